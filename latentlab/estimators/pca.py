"""``latentlab.PCA``: principal component analysis in closed form (full, eigh, randomized)."""

from __future__ import annotations

import numbers

import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from latentlab._settings import Boolean, Dtype, Integer, Options, RandomState, Real
from latentlab._validation import (
    InputTypeError,
    check_codes,
    check_data,
    check_n_components,
    kept_float_dtype,
)
from latentlab.closed_form import pca as cf
from latentlab.closed_form.pca_rank import mle_dimension
from latentlab.estimators._dispatch import map_rows
from latentlab.estimators._pca_solvers import decompose_dense, decompose_sparse
from latentlab.estimators._sparse import check_sparse_data, is_sparse
from latentlab.estimators.base import LatentEstimator, to_numpy

__all__ = ["PCA"]

# the fitted arrays that take float32 where the training data were float32
_FLOAT_ATTRIBUTES = (
    "mean_",
    "components_",
    "singular_values_",
    "explained_variance_",
    "explained_variance_ratio_",
)

SOLVERS = ("auto", "full", "covariance_eigh", "randomized", "arpack")
SPARSE_SOLVERS = ("auto", "arpack", "covariance_eigh")  # the ones that never densify X


def _is_fraction(n_components) -> bool:
    return (
        isinstance(n_components, numbers.Real)
        and not isinstance(n_components, (bool, numbers.Integral))
        and 0 < n_components < 1
    )


class PCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """Principal component analysis, computed by jit-compiled JAX in float64.

    The centred data ``X - mean_`` are decomposed as ``U S V^T``; the rows of ``V^T``
    are the components.  Same attributes and conventions as scikit-learn's ``PCA``.

    Parameters
    ----------
    n_components : int, float in (0, 1), "mle" or None, default=None
        An int keeps that many components (``0 <= n_components <= min(n_samples,
        n_features)``; 0 is the isotropic Gaussian, whose ``score`` is the K = 0 row of
        a model-comparison table, and needs an exact solver); a float in (0, 1) keeps
        the fewest components whose explained variance ratio exceeds it; ``"mle"``
        chooses the number by Minka's (2000) Laplace approximation to the evidence of
        probabilistic PCA, as scikit-learn
        (:func:`~latentlab.closed_form.pca_rank.mle_dimension`; needs
        ``n_samples >= n_features``).  Both need the full spectrum, so not
        ``svd_solver="randomized"``.  None keeps ``min(n_samples,
        n_features)``, one fewer with ``svd_solver="arpack"`` (as scikit-learn).
    copy : bool, default=True
        Accepted for compatibility with scikit-learn's ``PCA``.  latentlab never writes
        into the caller's array, so ``copy=False`` leaves X unchanged too.
    whiten : bool, default=False
        Scale the projections to unit variance (``transform`` divides by
        ``sqrt(explained_variance_)``; ``inverse_transform`` undoes it).
    svd_solver : {"auto", "full", "covariance_eigh", "randomized", "arpack"}, \
default="auto"
        ``"full"``: thin SVD of the centred data.  ``"covariance_eigh"``: eigh of the
        d x d scatter matrix, fastest when n_samples >> n_features.  ``"randomized"``:
        Halko-Martinsson-Tropp randomized SVD.  ``"auto"`` follows scikit-learn:
        covariance_eigh when ``n_features <= 1000`` and ``n_samples >= 10 n_features``,
        else full for small problems or fractional ``n_components``, else randomized
        when ``n_components < 0.8 min(n_samples, n_features)``, else full.
        ``"arpack"``: block Lanczos on the scatter operator ``M -> Xc^T Xc M`` (the
        scatter is never formed), run until every residual is at most 1e-11 of the
        largest eigenvalue, for ``n_components < min(n_samples, n_features)`` as in
        scikit-learn; the exact full SVD is used instead (``svd_solver_ = "full"``)
        where n_features is too small for a Krylov basis (below about 2 n_components
        + 32) or the iteration does not converge.
    n_oversamples : int, default=10
        Extra sketch columns for the randomized solver.
    iterated_power : int or "auto", default="auto"
        Power iterations for the randomized solver; "auto" is 7 when
        ``n_components < 0.1 min(n_samples, n_features)``, else 4.
    random_state : int, RandomState or None, default=None
        Seeds the randomized solver's sketch.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the computation; float64 does not change JAX's global config.

    Attributes
    ----------
    components_ : ndarray (n_components_, n_features)
        Principal axes, by decreasing variance; the largest-magnitude entry of each is
        positive (scikit-learn's ``svd_flip(u_based_decision=False)``).
    explained_variance_ : ndarray (n_components_,)
        Variance along each component, ddof=1 (``singular_values_**2 / (n - 1)``).
    explained_variance_ratio_ : ndarray (n_components_,)
        Fraction of the total (ddof=1) variance.
    singular_values_ : ndarray (n_components_,)
    mean_ : ndarray (n_features,)
    noise_variance_ : float
        Mean of the discarded eigenvalues (ddof=1), 0 when none are discarded; the
        noise of the probabilistic PCA model used by :meth:`score`.
    n_components_, n_samples_, n_features_in_ : int
    svd_solver_ : str
        The solver actually used.

    Notes
    -----
    Sparse input (SciPy CSR/CSC; other formats are converted), for ``fit``,
    ``fit_transform`` and ``transform``, as scikit-learn 1.4+: X is centred implicitly
    and never densified.  ``svd_solver="arpack"`` (and ``"auto"``, which takes it for
    sparse X) runs block Lanczos on the sparse products ``Xc^T (Xc M)``, each formed as
    ``X M`` minus the mean's part; ``"covariance_eigh"`` forms the d x d scatter from
    the sparse ``X^T X`` (``- n mean mean^T`` when the means are small against the
    spreads, else from centred blocks of rows).  ``"full"`` and ``"randomized"`` would
    densify X and raise ``TypeError`` (a ``ValueError`` too).  ``score`` and
    ``score_samples`` take dense X only, as scikit-learn's.

    ``score`` is the probabilistic PCA log-likelihood with these ddof=1 eigenvalues,
    exactly scikit-learn's ``PCA.score``.  ``latentlab.PPCA`` scores the maximum
    likelihood (ddof=0) fit instead, so the two differ slightly on the same data.
    With ``whiten=True`` scikit-learn's ``get_covariance`` rescales the components; here
    the likelihood of x does not depend on how the projections are scaled.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(100, 5))
    >>> latentlab.PCA(n_components=2).fit(X).components_.shape
    (2, 5)
    """

    _generative = True  # score, bic, aic, n_parameters_, sample_posterior
    # for standard_errors
    _no_standard_errors = (
        "it is fitted in closed form, not from a declaration; PPCA fits the same loadings "
        "by maximum likelihood and has them"
    )
    _settings = {
        # an int, a fraction of variance to keep, Minka's choice, or all
        "n_components": Integer() | Real(0, 1, closed="neither") | None | "mle",
        "copy": Boolean(),
        "whiten": Boolean(),
        "svd_solver": Options(*SOLVERS),
        "n_oversamples": Integer(0, None),
        "iterated_power": Integer(0, None) | "auto",
        "random_state": RandomState(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_components=None,
        *,
        copy=True,
        whiten=False,
        svd_solver="auto",
        n_oversamples=10,
        iterated_power="auto",
        random_state=None,
        dtype="float64",
    ):
        self.n_components = n_components
        self.copy = copy
        self.whiten = whiten
        self.svd_solver = svd_solver
        self.n_oversamples = n_oversamples
        self.iterated_power = iterated_power
        self.random_state = random_state
        self.dtype = dtype

    # -- fitting ------------------------------------------------------------------------

    def _resolve(self, n_samples, n_features, sparse=False):
        """(solver, n_components or None for a fraction) after checking the settings."""
        high = min(n_samples, n_features)
        mle = isinstance(self.n_components, str) and self.n_components == "mle"
        fraction = _is_fraction(self.n_components) or mle
        if mle and n_samples < n_features:
            raise ValueError(
                "n_components='mle' is only supported if n_samples >= n_features: Minka's "
                f"estimate needs a full-rank covariance, got {n_samples} samples and "
                f"{n_features} features"
            )
        # as scikit-learn, sparse input takes arpack unless covariance_eigh is asked for
        solver = "arpack" if sparse and self.svd_solver == "auto" else self.svd_solver
        if self.n_components is None:
            # as scikit-learn: arpack cannot return all min(n, d) components
            K = max(high - 1, 1) if solver == "arpack" else high
        elif fraction:
            K = None
        else:
            # the integer check; the range is checked below, once the solver is known
            # (scikit-learn's wording names it)
            K = check_n_components(self.n_components, -np.inf, np.inf, "")
        if solver == "auto":
            if n_features <= 1000 and n_samples >= 10 * n_features:
                solver = "covariance_eigh"
            elif max(n_samples, n_features) <= 500 or fraction:
                solver = "full"
            elif K is not None and 1 <= K < 0.8 * high:
                solver = "randomized"
            else:
                solver = "full"
        truncated = solver in ("arpack", "randomized")
        if K is not None and not (1 if truncated else 0) <= K <= high:
            # 0 is the isotropic Gaussian (every direction is noise), as scikit-learn's
            why = (
                "n_components=0 needs the whole spectrum (its noise variance is the mean "
                "of every eigenvalue); use svd_solver='full' or 'covariance_eigh'"
                if K == 0
                else f"the data have at most {high} principal axes; reduce n_components"
                if K > high
                else "a number of components cannot be negative"
            )
            raise ValueError(
                f"n_components={K} must be between {1 if truncated else 0} and "
                f"min(n_samples, n_features)={high} with svd_solver={solver!r}: {why}"
            )
        if truncated and fraction:
            if mle:
                raise ValueError(
                    f"n_components='mle' cannot be a string with svd_solver='{solver}': "
                    "Minka's estimate needs the full spectrum; use svd_solver='full' or "
                    "'covariance_eigh'"
                )
            raise ValueError(
                f"n_components={self.n_components!r} (a fraction of variance) needs the "
                "full spectrum; use svd_solver='full' or 'covariance_eigh', "
                f"not {solver!r}"
            )
        if solver == "arpack" and K >= high:
            raise ValueError(
                f"n_components={K} must be strictly less than min(n_samples, "
                f"n_features)={high} with svd_solver='arpack'"
            )
        return solver, K

    def fit(self, X, y=None):
        """Fit the model to X (n_samples, n_features)."""
        self._fit(X)
        return self

    def fit_transform(self, X, y=None):
        """Fit to X and return its projections (n_samples, n_components_)."""
        X = self._fit(X)
        return self._project(X)

    def _fit(self, X):
        # float32 data get float32 attributes and outputs (as scikit-learn), computed
        # at this estimator's dtype and rounded once at the end
        float32 = kept_float_dtype(X) == np.float32
        if is_sparse(X):
            if self.svd_solver not in SPARSE_SOLVERS:
                # scikit-learn's wording (and TypeError, which InputTypeError also is)
                raise InputTypeError(
                    'PCA only support sparse inputs with the "arpack" and "covariance_eigh" '
                    f'solvers, while "{self.svd_solver}" was passed: the other solvers '
                    "would densify X"
                )
            X = check_sparse_data(self, X, reset=True, min_samples=2)
        else:
            X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n, d = X.shape
        solver, K = self._resolve(n, d, sparse=is_sparse(X))
        high = min(n, d)
        with self._precision():
            if is_sparse(X):
                solver, result, shift = decompose_sparse(
                    X, solver, K, dtype=self.dtype, random_state=self.random_state
                )
            else:
                solver, result, shift = decompose_dense(
                    X,
                    solver,
                    K,
                    dtype=self.dtype,
                    random_state=self.random_state,
                    n_oversamples=self.n_oversamples,
                    iterated_power=self.iterated_power,
                )
            mean = shift + to_numpy(result.mean)
            components = to_numpy(result.components)[:high]
            singular_values = to_numpy(result.singular_values)[:high]
            variance = to_numpy(result.explained_variance)[:high]
            total_variance = float(result.total_variance)
        ratio = variance / total_variance if total_variance > 0 else np.zeros_like(variance)
        if isinstance(self.n_components, str):  # "mle"
            K = mle_dimension(variance, n)
        elif K is None:  # scikit-learn's rule: fewest components whose ratio exceeds it
            K = min(
                int(np.searchsorted(np.cumsum(ratio), self.n_components, side="right")) + 1, high
            )
        if solver in ("randomized", "arpack"):
            kept = float(variance[:K].sum())
            self.noise_variance_ = (total_variance - kept) / (high - K) if K < high else 0.0
        else:
            self.noise_variance_ = float(variance[K:].mean()) if K < high else 0.0
        self.noise_variance_ = max(float(self.noise_variance_), 0.0)
        self.svd_solver_ = solver
        self.n_components_ = K
        self.n_samples_ = n
        self.mean_ = mean
        self.components_ = components[:K].copy()
        self.singular_values_ = singular_values[:K].copy()
        self.explained_variance_ = variance[:K].copy()
        self.explained_variance_ratio_ = ratio[:K].copy()
        if float32:
            for name in _FLOAT_ATTRIBUTES:
                setattr(self, name, getattr(self, name).astype(np.float32))
            self.noise_variance_ = np.float32(self.noise_variance_)
        return X

    def _as_output(self, values):
        """Outputs in float32 where the fit's components are (float32 training data)."""
        return values.astype(np.float32) if self.components_.dtype == np.float32 else values

    # -- projections --------------------------------------------------------------------

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self.svd_solver in SPARSE_SOLVERS
        return tags

    @property
    def _n_features_out(self):
        return self.n_components_

    def _scale(self):
        if not self.whiten:
            return np.ones(self.n_components_)
        variance = self.explained_variance_
        return np.sqrt(np.where(variance > 0, variance, 1.0))

    def _centred(self, X):
        """``X - mean_`` in float64 on the host, and the zero mean the solvers then take."""
        return X - self.mean_, np.zeros(self.n_features_in_)

    def _project(self, X):
        if is_sparse(X):  # X V^T - mean V^T on the host: X stays sparse
            V = self.components_
            Z = np.asarray(X @ V.T) - self.mean_ @ V.T
            return self._as_output((Z / self._scale()).astype(np.dtype(self.dtype)))
        Xc, zero = self._centred(X)
        with self._precision():
            Z = to_numpy(
                map_rows(
                    cf.pca_transform,
                    Xc,
                    zero,
                    jnp.asarray(self.components_),
                    jnp.asarray(self._scale()),
                )
            )
        return self._as_output(Z)

    def transform(self, X):
        """Project X onto the components: shape (n_samples, n_components_)."""
        check_is_fitted(self)
        if is_sparse(X):
            return self._project(check_sparse_data(self, X, reset=False))
        return self._project(check_data(self, X, reset=False, allow_nan=False))

    def inverse_transform(self, X):
        """Map projections (n_samples, n_components_) back to data space."""
        check_is_fitted(self)
        Z = check_codes(X, self.n_components_)
        with self._precision():
            Xc = to_numpy(
                map_rows(
                    cf.pca_inverse_transform,
                    Z,
                    np.zeros(self.n_features_in_),
                    jnp.asarray(self.components_),
                    jnp.asarray(self._scale()),
                )
            )
        return self._as_output(Xc + self.mean_)  # un-centred in float64

    # -- probabilistic PCA likelihood ---------------------------------------------------

    def get_covariance(self) -> np.ndarray:
        """Model covariance ``V^T diag(max(var, s2) - s2) V + s2 I`` (n_features, n_features)."""
        check_is_fitted(self)
        gap = np.maximum(self.explained_variance_ - self.noise_variance_, 0.0)
        cov = (self.components_.T * gap) @ self.components_
        cov[np.diag_indices_from(cov)] += self.noise_variance_
        return cov

    def get_precision(self) -> np.ndarray:
        """Inverse of :meth:`get_covariance` (n_features, n_features), by Woodbury.

        With orthonormal components V the inverse is exact and needs no d x d solve:
        ``V^T diag(1 / max(var, s2) - 1 / s2) V + I / s2`` (``V^T diag(1 / var) V``
        when every direction is kept and s2 = 0).  This is the precision
        :meth:`score_samples` uses.  Raises ValueError when the covariance is singular.
        """
        check_is_fitted(self)
        self._check_nonsingular()
        s2 = self.noise_variance_
        variance = np.maximum(self.explained_variance_, s2)
        V = self.components_
        if s2 > 0:
            precision = (V.T * (1.0 / variance - 1.0 / s2)) @ V
            precision[np.diag_indices_from(precision)] += 1.0 / s2
        else:  # n_components_ == n_features (checked above): V is square
            precision = (V.T / variance) @ V
        return 0.5 * (precision + precision.T)

    def _check_nonsingular(self):
        d, K = self.n_features_in_, self.n_components_
        if (self.noise_variance_ <= 0 and K < d) or np.any(self.explained_variance_ <= 0):
            raise ValueError(
                "The probabilistic PCA covariance of this fit is singular (a kept component "
                "or the noise has zero variance), so its likelihood is undefined; fit with "
                "fewer components"
            )

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each row under the probabilistic PCA model (n_samples,)."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        self._check_nonsingular()
        Xc, zero = self._centred(X)
        with self._precision():
            return to_numpy(
                map_rows(
                    cf.ppca_score_samples,
                    Xc,
                    zero,
                    jnp.asarray(self.components_),
                    jnp.asarray(self.explained_variance_),
                    jnp.asarray(self.noise_variance_),
                )
            )

    def _n_parameters(self) -> int:
        d, K = self.n_features_in_, self.n_components_
        return d * K + d + 1 - K * (K - 1) // 2
