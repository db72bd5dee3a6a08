"""``latentlab.PLSRegression``, ``PLSCanonical`` and ``PLSSVD``: partial least squares.

The three classes derive from the family base only; what they share is in
module-level functions: validation (:func:`_check_fit`), the means (:func:`_set_means`),
the loaded-model checks (:func:`_check_loaded`), and, for the two NIPALS classes, the
fit (:func:`_fit_nipals`) and :func:`_inverse_transform`."""

from __future__ import annotations

import warnings

import jax
import numpy as np
from sklearn.base import MultiOutputMixin, RegressorMixin
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted

from latentlab._settings import Boolean, Dtype, Integer, Options, Real
from latentlab.closed_form import pls as cf
from latentlab.estimators._dispatch import call, to_device
from latentlab.estimators._two_view import (
    _check_linear_loaded,
    _check_n_components,
    _TwoViewTransformer,
)
from latentlab.estimators.base import LATENTLAB_FILES, to_numpy, warn_not_converged

__all__ = ["PLSRegression", "PLSCanonical", "PLSSVD"]

_SETTINGS = {
    "n_components": Integer(),  # its range depends on the data
    "scale": Boolean(),
    "copy": Boolean(),
    "dtype": Dtype(),
}
_NIPALS_SETTINGS = {
    **_SETTINGS,
    "max_iter": Integer(1, None),
    "tol": Real(0, None, finite=True),
}


def _check_fit(estimator, X, y, *, regression_bound: bool):
    """The validated views, with ``n_components_`` set: at most ``min(n, p)`` for
    PLSRegression (``regression_bound``, the rank bound of X), else ``min(n, p, q)``."""
    X, Y = estimator._views(X, y, reset=True, min_samples=2)  # ddof=1 scaling needs two rows
    (n, p), q = X.shape, Y.shape[1]
    if regression_bound:
        high, why = min(n, p), "min(n_samples, n_features_x), the rank bound of X"
    else:
        high, why = min(n, p, q), "min(n_samples, n_features_x, n_features_y)"
    estimator.n_components_ = _check_n_components(estimator, estimator.n_components, high, why)
    # a constant Y column (scale=True: its standard deviation 0 taken as 1, as
    # scikit-learn's) is a zero column after centring: it covaries with nothing, and
    # an all-constant Y leaves PLSRegression/PLSCanonical no component (they warn,
    # "y residual is constant at iteration 0", and fit zero weights and coef_)
    return X, Y


def _set_means(estimator, X, Y, fit):
    """``x_mean_``, ``y_mean_``, ``x_std_`` and ``y_std_`` from a closed-form fit of the
    centred views."""
    # the host centring's round-off is added back (fit.*_mean is what was left)
    estimator.x_mean_ = X.mean(axis=0) + fit.x_mean
    estimator.y_mean_ = Y.mean(axis=0) + fit.y_mean
    estimator.x_std_, estimator.y_std_ = fit.x_scale, fit.y_scale


def _check_loaded(estimator):
    """Checks on a PLS model restored by :func:`latentlab.load` (shapes, scales)."""
    p, q, k = estimator.n_features_in_, estimator.n_features_y_, estimator.n_components_
    more = {}
    if hasattr(estimator, "coef_"):  # the NIPALS classes
        more = {
            "x_loadings_": (p, k),
            "y_loadings_": (q, k),
            "x_rotations_": (p, k),
            "y_rotations_": (q, k),
            "coef_": (q, p),
            "intercept_": (q,),
        }
    _check_linear_loaded(estimator, more)


def _fit_nipals(estimator, X, y, *, deflation: str, algorithm: str):
    """The fit of PLSRegression (``deflation="regression"``) and PLSCanonical
    (``"canonical"``): PLS by deflation, each component by NIPALS power iteration or
    (``algorithm="svd"``) by SVD."""
    X, Y = _check_fit(estimator, X, y, regression_bound=deflation == "regression")
    if not np.ptp(X, axis=0).any():
        # NIPALS' first x weights would be 0 / 0 (scikit-learn fails there too, with
        # "slice 0 has a NaN entry"); PLSSVD's SVD of a zero matrix is defined
        raise ValueError(
            f"X is constant (every column holds a single value), so "
            f"{type(estimator).__name__} finds no direction of X that covaries with Y; "
            "check that the right data were passed."
        )
    max_iter = int(estimator.max_iter)
    K = estimator.n_components_
    (n, p), q = X.shape, Y.shape[1]
    # Centre in float64 on the host, before any cast to float32.
    with estimator._precision():
        fit = call(
            cf.fit_pls,
            n * (p + q),
            to_device(X - X.mean(axis=0)),
            to_device(Y - Y.mean(axis=0)),
            float(estimator.tol),
            max_iter,
            n_components=K,
            deflation=deflation,
            algorithm=algorithm,
            scale=bool(estimator.scale),
        )
        fit = jax.tree.map(to_numpy, fit)
    n_fitted = int(fit.n_fitted)
    if n_fitted < K:
        warnings.warn(
            f"y residual is constant at iteration {n_fitted}: Y is fully explained by "
            f"{n_fitted} component(s); the remaining ones are zero",
            UserWarning,
            skip_file_prefixes=LATENTLAB_FILES,
        )
    estimator.n_iter_ = (
        fit.n_iter[:n_fitted].astype(int) if algorithm == "nipals" else np.zeros(0, int)
    )
    if np.any(estimator.n_iter_ >= max_iter):  # tol bounds |w - w_old|^2
        warn_not_converged(estimator, "power iteration")
    _set_means(estimator, X, Y, fit)
    estimator.x_weights_, estimator.y_weights_ = fit.x_weights, fit.y_weights
    estimator.x_loadings_, estimator.y_loadings_ = fit.x_loadings, fit.y_loadings
    estimator.x_rotations_, estimator.y_rotations_ = fit.x_rotations, fit.y_rotations
    estimator.coef_ = fit.coef
    estimator.intercept_ = estimator.y_mean_.copy()
    estimator.x_scores_, estimator.y_scores_ = fit.x_scores, fit.y_scores
    return estimator


def _inverse_transform(estimator, X, y=None):
    """Map scores back to the data: ``X @ x_loadings_.T * x_std_ + x_mean_`` (and the
    same for y scores when given); exact for data in the span of the components.

    Parameters
    ----------
    X : array (n_samples, n_components_)
        x scores, as returned by :meth:`transform`.
    y : array (n_samples, n_components_), optional
        y scores.

    Returns
    -------
    X_reconstructed : ndarray (n_samples, n_features_x), and ``Y_reconstructed``
    (n_samples, n_features_y) when y is given.
    """
    check_is_fitted(estimator)
    out = []
    for name, scores, loadings, std, mean in (
        ("X", X, estimator.x_loadings_, estimator.x_std_, estimator.x_mean_),
        ("y", y, estimator.y_loadings_, estimator.y_std_, estimator.y_mean_),
    ):
        if scores is None:
            continue
        scores = check_array(scores, dtype=np.float64, input_name=name)
        if scores.shape[1] != estimator.n_components_:
            raise ValueError(
                f"{name} has {scores.shape[1]} columns, but inverse_transform takes "
                f"scores with n_components_={estimator.n_components_} columns"
            )
        out.append(scores @ loadings.T * std + mean)
    return out[0] if len(out) == 1 else tuple(out)


_SHARED_PARAMETERS = """n_components : int, default=2
        Number of components, at least 1.
    scale : bool, default=True
        Divide each column of X and Y by its standard deviation (ddof=1) first; a
        constant column's (0) is taken as 1, as scikit-learn's: it covaries with
        nothing (an all-constant Y gives no component, with a warning).
"""

_SHARED_ATTRIBUTES = """x_weights_, y_weights_ : ndarray (n_features_x, k), (n_features_y, k)
        Unit x weights (and y weights) of each component on the deflated, scaled views;
        the largest-magnitude x weight of each component is positive.
    x_loadings_, y_loadings_ : ndarray
        Regressions of the deflated views on their deflating scores.
    x_rotations_, y_rotations_ : ndarray
        ``W (P^T W)^+``: scores of the undeflated scaled views, ``x_scores = Xs @
        x_rotations_``.
    coef_ : ndarray (n_features_y, n_features_x)
        :meth:`predict` is ``(X - x_mean_) @ coef_.T + intercept_``.
    intercept_ : ndarray (n_features_y,)
    x_mean_, y_mean_, x_std_, y_std_ : ndarray
        Column means and the scales divided out (ones when ``scale=False``).
    x_scores_, y_scores_ : ndarray (n_samples, n_components_)
        Training scores of the deflated views (``x_scores_ = transform(X)``).
    n_iter_ : ndarray (n_fitted,)
        Power iterations of each component (empty for ``algorithm="svd"``).
    y_ndim_ : int
        1 when Y was one-dimensional at fit (then :meth:`predict` returns 1-D).
    n_components_, n_features_in_, n_features_y_ : int
"""

_COPY_DTYPE_AND_ATTRIBUTES = f"""copy : bool, default=True
        Accepted for scikit-learn compatibility: inputs are never written into.
    dtype : {{"float64", "float32"}}, default="float64"

    Attributes
    ----------
    {_SHARED_ATTRIBUTES}"""


class PLSRegression(RegressorMixin, MultiOutputMixin, _TwoViewTransformer):
    __doc__ = f"""PLS regression (PLS2): NIPALS with Y deflated on the x scores.

    Each component is the first singular pair of the deflated cross-covariance, found by
    the NIPALS power iteration (one compiled ``lax.while_loop`` per component, all
    components in one ``lax.fori_loop``); X is deflated on its scores and Y is regressed
    on the same x scores, so ``predict`` is a regression of Y on X through
    ``n_components`` latent directions.  The numbers are scikit-learn's
    ``PLSRegression``'s (Wegelin 2000), computed on the p x p covariance of X.

    Parameters
    ----------
    {_SHARED_PARAMETERS}    max_iter : int, default=500
        Power iterations per component at most (``ConvergenceWarning`` if reached).
    tol : float, default=1e-6
        Stop when the squared change of the x weights is below ``tol``.
    {_COPY_DTYPE_AND_ATTRIBUTES}
    Examples
    --------
    >>> import numpy as np, latentlab
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 4)); Y = X[:, :2] @ [[1.0, 0.5], [0.2, -1.0]]
    >>> pls = latentlab.PLSRegression(n_components=2).fit(X, Y)
    >>> round(pls.score(X, Y), 3)  # scikit-learn's PLSRegression gives the same
    0.969
    """

    _x_projection, _y_projection = "x_rotations_", "y_rotations_"
    _predicts_through_coef = True
    _settings = _NIPALS_SETTINGS

    def __init__(
        self, n_components=2, *, scale=True, max_iter=500, tol=1e-6, copy=True, dtype="float64"
    ):
        self.n_components = n_components
        self.scale = scale
        self.max_iter = max_iter
        self.tol = tol
        self.copy = copy
        self.dtype = dtype

    def fit(self, X, y=None):
        """Fit on X (n_samples, n_features_x) and y = Y (n_samples,) or (n_samples,
        n_features_y)."""
        return _fit_nipals(self, X, y, deflation="regression", algorithm="nipals")

    def inverse_transform(self, X, y=None):
        return _inverse_transform(self, X, y)

    inverse_transform.__doc__ = _inverse_transform.__doc__

    def _validate_loaded(self):
        """Checks on a model restored by :func:`latentlab.load` (shapes, scales)."""
        _check_loaded(self)


class PLSCanonical(RegressorMixin, MultiOutputMixin, _TwoViewTransformer):
    __doc__ = f"""PLS in canonical (symmetric) mode: each view deflated on its own scores.

    As scikit-learn's ``PLSCanonical`` (Wegelin 2000, "PLS-C2A"): unit weights on both
    views, the first singular pair of the deflated cross-covariance by NIPALS power
    iteration or by SVD.

    Parameters
    ----------
    {_SHARED_PARAMETERS}    algorithm : {{"nipals", "svd"}}, default="nipals"
    max_iter : int, default=500
    tol : float, default=1e-6
        Power-iteration settings ("nipals" only).
    {_COPY_DTYPE_AND_ATTRIBUTES}
    Examples
    --------
    >>> import numpy as np, latentlab
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(50, 4)), rng.normal(size=(50, 3))
    >>> latentlab.PLSCanonical(n_components=2).fit(X, Y).transform(X).shape
    (50, 2)
    """

    _x_projection, _y_projection = "x_rotations_", "y_rotations_"
    _predicts_through_coef = True
    _settings = {**_NIPALS_SETTINGS, "algorithm": Options("nipals", "svd")}

    def __init__(
        self,
        n_components=2,
        *,
        scale=True,
        algorithm="nipals",
        max_iter=500,
        tol=1e-6,
        copy=True,
        dtype="float64",
    ):
        self.n_components = n_components
        self.scale = scale
        self.algorithm = algorithm
        self.max_iter = max_iter
        self.tol = tol
        self.copy = copy
        self.dtype = dtype

    def fit(self, X, y=None):
        """Fit on X (n_samples, n_features_x) and y = Y (n_samples,) or (n_samples,
        n_features_y)."""
        return _fit_nipals(self, X, y, deflation="canonical", algorithm=self.algorithm)

    def inverse_transform(self, X, y=None):
        return _inverse_transform(self, X, y)

    inverse_transform.__doc__ = _inverse_transform.__doc__

    def _validate_loaded(self):
        """Checks on a model restored by :func:`latentlab.load` (shapes, scales)."""
        _check_loaded(self)


class PLSSVD(_TwoViewTransformer):
    """PLS-SVD: the leading singular vectors of the cross-covariance ``X_s^T Y_s``.

    One SVD, no deflation (scikit-learn's ``PLSSVD``); it is CCA's maximum-covariance
    end (``reg -> inf``).  The x and y scores are ``X_s @ x_weights_`` and
    ``Y_s @ y_weights_``.

    Parameters
    ----------
    n_components : int, default=2
        ``1 <= n_components <= min(n_samples, n_features_x, n_features_y)``.
    scale : bool, default=True
        Divide each column by its standard deviation (ddof=1) first; a constant
        column's (0) is taken as 1, as scikit-learn's.
    copy : bool, default=True
        Accepted for scikit-learn compatibility: inputs are never written into.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    x_weights_, y_weights_ : ndarray (n_features_x, n_components_), (n_features_y, ...)
        Singular vectors; the largest-magnitude x weight of each pair is positive.
    singular_values_ : ndarray (n_components_,)
        Singular values of ``X_s^T Y_s`` (covariances times ``n_samples - 1``).
    x_mean_, y_mean_, x_std_, y_std_ : ndarray
    n_components_, n_features_in_, n_features_y_, y_ndim_ : int

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(50, 4)), rng.normal(size=(50, 3))
    >>> latentlab.PLSSVD(n_components=2).fit(X, Y).x_weights_.shape
    (4, 2)
    """

    _settings = _SETTINGS

    def __init__(self, n_components=2, *, scale=True, copy=True, dtype="float64"):
        self.n_components = n_components
        self.scale = scale
        self.copy = copy
        self.dtype = dtype

    def fit(self, X, y=None):
        """Fit on X (n_samples, n_features_x) and y = Y (n_samples, n_features_y)."""
        X, Y = _check_fit(self, X, y, regression_bound=False)
        (n, p), q = X.shape, Y.shape[1]
        K = self.n_components_
        with self._precision():
            fit = call(
                cf.fit_pls_svd,
                n * (p + q),
                to_device(X - X.mean(axis=0)),
                to_device(Y - Y.mean(axis=0)),
                scale=bool(self.scale),
            )
            fit = jax.tree.map(to_numpy, fit)
        _set_means(self, X, Y, fit)
        # copies, not views of the full solution: fitted arrays own their data
        self.x_weights_ = fit.x_weights[:, :K].copy()
        self.y_weights_ = fit.y_weights[:, :K].copy()
        self.singular_values_ = fit.singular_values[:K].copy()
        return self

    def _validate_loaded(self):
        """Checks on a model restored by :func:`latentlab.load` (shapes, scales)."""
        _check_loaded(self)
