"""``latentlab.FastICA``: independent component analysis by the FastICA fixed point, one
compiled program per fit (:mod:`latentlab.closed_form.ica`)."""

from __future__ import annotations

import functools
import numbers
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._settings import (
    ArrayLike,
    Callable,
    Dtype,
    InstanceOf,
    Integer,
    Options,
    RandomState,
    Real,
)
from latentlab._validation import (
    check_codes,
    check_data,
    check_n_components,
    check_start_array,
)
from latentlab.closed_form import ica
from latentlab.closed_form.pca import pca_inverse_transform, pca_transform
from latentlab.closed_form.whitening import WHITENING_SOLVERS
from latentlab.estimators._dispatch import call, map_rows, to_device
from latentlab.estimators.base import (
    LATENTLAB_FILES,
    LatentEstimator,
    check_finite_fit,
    to_numpy,
    warn_not_converged,
)

# what tracing a contrast that calls NumPy on JAX's traced arrays raises
NOT_TRACEABLE = (
    jax.errors.TracerArrayConversionError,
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)

__all__ = ["FastICA"]

ALGORITHMS = ("parallel", "deflation")
WHITENINGS = ("unit-variance", "arbitrary-variance", False)


class FastICA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """Independent component analysis: FastICA (Hyvärinen & Oja 2000).

    The data are centred and PCA-whitened onto ``n_components`` principal axes; an
    orthogonal unmixing of the whitened data is then found by the fixed-point
    iteration on the contrast ``fun``, for all components at once with symmetric
    decorrelation (``algorithm="parallel"``) or one after another with Gram-Schmidt
    deflation.  The whole fit (whitening, iterations, rescaling) is one compiled
    program.  Settings, attributes and conventions are scikit-learn's, so from the
    same ``w_init`` (or the same integer ``random_state``, which draws ``w_init`` the
    same way) the fitted matrices equal scikit-learn's up to round-off.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of sources; None: ``min(n_samples, n_features)``.  Ignored (with a
        warning, as in scikit-learn) when ``whiten=False``.
    algorithm : {"parallel", "deflation"}, default="parallel"
    whiten : {"unit-variance", "arbitrary-variance"} or False, default="unit-variance"
        "unit-variance" rescales the unmixing so that the training sources have unit
        variance; "arbitrary-variance" keeps the scale of the iteration; False uses X as
        it is (not centred: the data must be white already) with ``n_features``
        components.
    fun : {"logcosh", "exp", "cube"} or callable, default="logcosh"
        The derivative g of the contrast: ``tanh(alpha u)``, ``u exp(-u^2/2)``, ``u^3``.
        A callable ``fun(u, **fun_args)`` returns ``(g(u), g'(u))`` with ``g'`` averaged
        over the last axis (or per element).  A JAX-traceable one runs in the compiled
        iteration; one that needs NumPy arrays (``np.tanh``, ...) is called on the host
        at each fixed-point step (slower; scikit-learn's results), and one that fails
        on both raises a ValueError.
    fun_args : dict or None, default=None
        Numbers passed to ``fun``; ``{"alpha": a}`` with ``1 <= a <= 2`` for logcosh.
    max_iter : int, default=200
    tol : float, default=1e-4
        Stop when every row of the unmixing moves by less than this:
        ``max_i | |<w_i, w_i^old>| - 1 | < tol``.
    w_init : array of shape (n_components, n_components) or None, default=None
        Initial unmixing of the whitened data; None draws it from a standard normal
        with ``random_state`` (NumPy's ``RandomState``, as scikit-learn).
    whiten_solver : {"svd", "eigh"}, default="svd"
        "svd": thin SVD of the centred data (robust when it is nearly rank-deficient);
        "eigh": eigendecomposition of the d x d scatter (cheaper for n >> d); warns
        (UserWarning, as scikit-learn) when the scatter has eigenvalues at its
        round-off level (below ``n_features * eps`` times the largest): the singular
        values there are lost, and "svd" is the accurate choice.
    random_state : int, RandomState or None, default=None
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    components_ : ndarray (n_components, n_features)
        The unmixing: ``sources = (X - mean_) @ components_.T``.
    mixing_ : ndarray (n_features, n_components)
        Pseudo-inverse of ``components_``: ``X ~ sources @ mixing_.T + mean_``.
    mean_ : ndarray (n_features,)
        Column means (only when whitening).
    whitening_ : ndarray (n_components, n_features)
        scikit-learn's K: the principal axes divided by the singular values of the
        centred data (only when whitening; ``sqrt(n_samples) K`` whitens).
    n_iter_ : int
        Fixed-point iterations (deflation: the most any component needed).
    n_features_in_ : int

    Notes
    -----
    A ``ConvergenceWarning`` is issued when any component stops at ``max_iter``, for
    both algorithms (scikit-learn warns for "parallel" only).  Sources are recovered
    up to order, sign and (with "arbitrary-variance") scale.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> t = np.linspace(0, 8, 2000)
    >>> S = np.c_[np.sin(3 * t), np.sign(np.sin(2 * t))]
    >>> X = S @ np.array([[1.0, 0.5], [0.4, 1.0]]).T
    >>> est = latentlab.FastICA(random_state=0).fit(X)
    >>> corr = np.corrcoef(est.transform(X).T, S.T)[:2, 2:]
    >>> bool(np.all(np.sort(np.abs(corr).max(axis=1)) > 0.99))
    True
    """

    _settings = {
        "n_components": Integer() | None,
        "algorithm": Options(*ALGORITHMS),
        "whiten": Options(*WHITENINGS),
        "fun": Options(*ica.CONTRASTS) | Callable(),
        "fun_args": InstanceOf(dict, "a dict") | None,
        "max_iter": Integer(1, None),
        "tol": Real(0, None),
        "w_init": ArrayLike() | None,
        "whiten_solver": Options(*WHITENING_SOLVERS),
        "random_state": RandomState(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_components=None,
        *,
        algorithm="parallel",
        whiten="unit-variance",
        fun="logcosh",
        fun_args=None,
        max_iter=200,
        tol=1e-4,
        w_init=None,
        whiten_solver="svd",
        random_state=None,
        dtype="float64",
    ):
        self.n_components = n_components
        self.algorithm = algorithm
        self.whiten = whiten
        self.fun = fun
        self.fun_args = fun_args
        self.max_iter = max_iter
        self.tol = tol
        self.w_init = w_init
        self.whiten_solver = whiten_solver
        self.random_state = random_state
        self.dtype = dtype

    # -- settings --------------------------------------------------------------------

    def _fun_args(self):
        fun_args = {} if self.fun_args is None else self.fun_args
        alpha = fun_args.get("alpha", 1.0)
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 1 <= alpha <= 2:
            raise ValueError(f"fun_args['alpha'] must be a number in [1, 2], got {alpha!r}")
        try:
            return {str(k): jnp.asarray(v) for k, v in fun_args.items()}
        except TypeError as err:
            raise ValueError(f"fun_args must hold numbers or arrays ({err})") from err

    def _check_settings(self, n_samples, n_features):
        whiten, max_iter, tol = self.whiten, self.max_iter, self.tol
        if whiten is False:
            if self.n_components is not None:
                warnings.warn(
                    "Ignoring n_components with whiten=False.", skip_file_prefixes=LATENTLAB_FILES
                )
            k = n_features
        elif self.n_components is None:
            k = min(n_samples, n_features)
        else:
            k = check_n_components(
                self.n_components,
                1,
                min(n_samples, n_features),
                f"at most min(n_samples, n_features) = min({n_samples}, {n_features}) "
                "independent sources can be separated",
            )
        if self.w_init is None:
            # scikit-learn's draw, so an integer random_state gives its start too
            w_init = check_random_state(self.random_state).normal(size=(k, k))
        else:
            w_init = check_start_array(
                "w_init", self.w_init, (k, k), "(n_components, n_components)"
            )
        return whiten, k, int(max_iter), float(tol), w_init

    # -- fitting ---------------------------------------------------------------------

    def fit(self, X, y=None):
        """Estimate the unmixing of X (n_samples, n_features); returns self."""
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        whiten, k, max_iter, tol, w_init = self._check_settings(*X.shape)
        with self._precision():
            run = functools.partial(
                call,
                ica.fastica,
                X.size * k,
                to_device(X),
                jnp.asarray(w_init),
                self._fun_args(),
                max_iter,
                tol,
                n_components=k,
                algorithm=self.algorithm,
                whiten=whiten,
                whiten_solver=self.whiten_solver,
            )
            try:
                fit = run(fun=self.fun)
            except NOT_TRACEABLE as err:
                if not callable(self.fun):
                    raise
                # a NumPy contrast: run on the host, once per fixed-point step
                host = ica.host_contrast(self.fun, dict(self.fun_args or {}))
                try:
                    fit = run(fun=host)
                except Exception as host_err:
                    raise ValueError(
                        f"fun={self.fun!r} is not JAX-traceable ({type(err).__name__}) and "
                        f"failed on NumPy arrays too: {host_err}; it must map an array u to "
                        "(g(u), g'(u))"
                    ) from host_err
            self.components_ = to_numpy(fit.components)
            self.mixing_ = to_numpy(fit.mixing)
            if whiten:
                self.mean_ = to_numpy(fit.mean)
                self.whitening_ = to_numpy(fit.whitening)
            else:  # a refit without whitening drops what an earlier fit stored
                for name in ("mean_", "whitening_"):
                    self.__dict__.pop(name, None)
            self.n_iter_ = int(fit.n_iter)
            converged = bool(fit.converged)
            small_singular_values = bool(fit.small_singular_values)
        if small_singular_values:
            warnings.warn(
                "There are some small singular values: the centred X is rank-deficient "
                "(or nearly), and whiten_solver='eigh' squares them into eigenvalues of "
                "X^T X that are lost to round-off; whiten_solver='svd' resolves them",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        check_finite_fit(
            self,
            {"components_": self.components_},
            "X is probably degenerate (constant or collinear columns); lower n_components",
        )
        if not converged:
            lead = (
                "FastICA did not converge. Consider increasing tolerance or the maximum "
                "number of iterations"
            )
            warn_not_converged(self, "fixed-point iteration", lead=lead)
        return self

    def fit_transform(self, X, y=None):
        """Fit and return the sources of X, (n_samples, n_components)."""
        return self.fit(X).transform(X)

    # -- using the fit ---------------------------------------------------------------

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

    def _mean(self):
        return self.mean_ if self.whiten else np.zeros(self.n_features_in_)

    def transform(self, X, copy=True):
        """Sources of X: ``(X - mean_) @ components_.T``, (n_samples, n_components).

        ``copy`` is accepted for scikit-learn compatibility; X is never modified."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        with self._precision():
            return to_numpy(
                map_rows(
                    pca_transform,
                    X,
                    jnp.asarray(self._mean()),
                    jnp.asarray(self.components_),
                    jnp.ones(()),
                    work_per_row=self.components_.size,
                )
            )

    def inverse_transform(self, X, copy=True):
        """Mix sources back: ``X @ mixing_.T + mean_``, (n_samples, n_features).

        ``copy`` is accepted for scikit-learn compatibility; X is never modified."""
        check_is_fitted(self)
        k = self.components_.shape[0]
        S = check_codes(X, k)  # the sources
        with self._precision():
            return to_numpy(
                map_rows(
                    pca_inverse_transform,
                    S,
                    jnp.asarray(self._mean()),
                    jnp.asarray(self.mixing_.T),
                    jnp.ones(()),
                    work_per_row=self.mixing_.size,
                )
            )

    def _validate_loaded(self):
        """Checks on a model restored by :func:`latentlab.load` (shapes)."""
        d, k = self.n_features_in_, self.components_.shape[0]
        expected = {"components_": (k, d), "mixing_": (d, k)}
        if self.whiten:
            expected |= {"mean_": (d,), "whitening_": (k, d)}
        for name, shape in expected.items():
            if np.shape(getattr(self, name)) != shape:
                raise ValueError(f"{name} has shape {np.shape(getattr(self, name))}, not {shape}")
