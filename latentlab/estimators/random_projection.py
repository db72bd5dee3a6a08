"""``latentlab.GaussianRandomProjection`` and ``latentlab.SparseRandomProjection``."""

from __future__ import annotations

import numbers
import warnings

import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import DataDimensionalityWarning
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._validation import check_data
from latentlab.closed_form import random_projection as cf
from latentlab.closed_form.random_projection import johnson_lindenstrauss_min_dim
from latentlab.estimators._dispatch import map_rows
from latentlab.estimators.base import LatentEstimator, to_numpy

__all__ = [
    "GaussianRandomProjection",
    "SparseRandomProjection",
    "johnson_lindenstrauss_min_dim",
]

# Below this density the sparse product (SciPy, on the host) does at most a tenth of
# the dense product's flops, and wins even after building the CSR form of components_.
SPARSE_PRODUCT_MAX_DENSITY = 0.1


class _RandomProjection(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    def __init__(
        self,
        n_components="auto",
        *,
        eps=0.1,
        compute_inverse_components=False,
        random_state=None,
        dtype="float64",
    ):
        self.n_components = n_components
        self.eps = eps
        self.compute_inverse_components = compute_inverse_components
        self.random_state = random_state
        self.dtype = dtype

    def _n_components(self, n_samples, n_features):
        if isinstance(self.n_components, str) and self.n_components == "auto":
            k = johnson_lindenstrauss_min_dim(n_samples, eps=self.eps)
            if k > n_features:
                raise ValueError(
                    f"eps={self.eps} and n_samples={n_samples} need n_components >= {k} "
                    f"(Johnson-Lindenstrauss), more than n_features={n_features}: a random "
                    "projection cannot reduce this data at that distortion; raise eps or "
                    "set n_components"
                )
            return k
        k = self.n_components
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"n_components must be 'auto' or a positive integer, got {k!r}")
        if k > n_features:
            warnings.warn(
                f"n_components={k} is larger than n_features={n_features}: the projection "
                "does not reduce the dimension",
                DataDimensionalityWarning,
                stacklevel=3,
            )
        return int(k)

    def fit(self, X, y=None):
        """Draw the random matrix for data of X's shape (X's values are not used beyond
        validation)."""
        X = check_data(self, X, reset=True, allow_nan=False)
        n, d = X.shape
        k = self._n_components(n, d)
        self._check_density(d)
        seed = check_random_state(self.random_state).randint(0, 2**31 - 1)
        rng = np.random.default_rng(seed)
        self.components_ = self._draw(rng, k, d)
        self.n_components_ = k
        if self.compute_inverse_components:
            self.inverse_components_ = np.linalg.pinv(self.components_)
        return self

    def _check_density(self, n_features):
        pass

    @property
    def _n_features_out(self):
        return self.n_components_

    def transform(self, X):
        """Project X (n_samples, n_features) to (n_samples, n_components_)."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        with self._precision():
            return to_numpy(
                map_rows(
                    cf.project, X, jnp.asarray(self.components_), work_per_row=self.n_components_
                )
            )

    def inverse_transform(self, X):
        """Least-squares pre-images ``X pinv(components_)^T`` of projections
        (n_samples, n_components_), shape (n_samples, n_features)."""
        check_is_fitted(self)
        Z = np.asarray(X, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[1] != self.n_components_:
            raise ValueError(f"X must have shape (n_samples, {self.n_components_}), got {Z.shape}")
        if not np.isfinite(Z).all():
            raise ValueError("X contains NaN or infinity")
        inverse = getattr(self, "inverse_components_", None)
        if inverse is None:
            inverse = np.linalg.pinv(self.components_)
        with self._precision():
            return to_numpy(
                map_rows(cf.project, Z, jnp.asarray(inverse), work_per_row=self.n_features_in_)
            )


_SHARED_DOC = """
    Parameters
    ----------
    n_components : int or "auto", default="auto"
        Target dimension; "auto" takes :func:`johnson_lindenstrauss_min_dim` of the
        number of training samples at ``eps`` (an error if that exceeds n_features).
    eps : float in (0, 1), default=0.1
        Distortion allowed by the "auto" dimension.
    compute_inverse_components : bool, default=False
        Store the pseudo-inverse of ``components_`` at fit time for
        ``inverse_transform`` (otherwise computed at each call).
    random_state : int, RandomState or None, default=None
        Seeds NumPy's ``Generator`` that draws the matrix on the host; the same seed
        gives the same matrix, but not scikit-learn's matrix.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the product.

    Attributes
    ----------
    components_ : ndarray (n_components_, n_features)
        The random matrix, dense.
    inverse_components_ : ndarray (n_features, n_components_)
        Only with ``compute_inverse_components=True``.
    n_components_, n_features_in_ : int
"""


class GaussianRandomProjection(_RandomProjection):
    __doc__ = (
        """Random projection by a Gaussian matrix with i.i.d. N(0, 1 / n_components)
    entries (Johnson & Lindenstrauss 1984; Dasgupta & Gupta 2003).

    ``transform`` is one jit-compiled product ``X components_^T``.
"""
        + _SHARED_DOC
        + """
    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(100, 5000))
    >>> latentlab.GaussianRandomProjection(random_state=0).fit(X).n_components_
    3947
    """
    )

    def _draw(self, rng, k, d):
        return cf.gaussian_random_matrix(rng, k, d)


class SparseRandomProjection(_RandomProjection):
    __doc__ = (
        """Random projection by a sparse matrix (Achlioptas 2003; Li, Hastie & Church
    2006): entries ``+-sqrt(1 / (density n_components))`` with probability
    ``density / 2`` each, 0 otherwise.

    The matrix is kept as a dense array (``components_``), where scikit-learn keeps a
    SciPy sparse matrix: it saves and loads like every other fitted array and is
    what a jit-compiled dense product takes.  It costs ``n_components x n_features``
    floats of memory, so for very large n_features (where a dense matrix would not
    fit) scikit-learn's sparse storage is the better choice.  For ``density <= 0.1``
    ``transform`` multiplies by the matrix's non-zeros only (SciPy's sparse product on
    the host, ``density`` times the dense flops); the output is always dense.
"""
        + _SHARED_DOC.replace(
            "    eps : float",
            """    density : float in (0, 1] or "auto", default="auto"
        Share of non-zero entries; "auto" is ``1 / sqrt(n_features)`` (Li et al.).
    eps : float""",
        ).replace(
            "    n_components_, n_features_in_ : int",
            """    density_ : float
        The density used.
    n_components_, n_features_in_ : int""",
        )
        + """
    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(100, 5000))
    >>> rp = latentlab.SparseRandomProjection(random_state=0).fit(X)
    >>> rp.transform(X).shape
    (100, 3947)
    """
    )

    def __init__(
        self,
        n_components="auto",
        *,
        density="auto",
        eps=0.1,
        compute_inverse_components=False,
        random_state=None,
        dtype="float64",
    ):
        super().__init__(
            n_components,
            eps=eps,
            compute_inverse_components=compute_inverse_components,
            random_state=random_state,
            dtype=dtype,
        )
        self.density = density

    def _check_density(self, n_features):
        density = self.density
        if isinstance(density, str) and density == "auto":
            density = 1.0 / np.sqrt(n_features)
        elif (
            isinstance(density, bool)
            or not isinstance(density, numbers.Real)
            or not 0.0 < density <= 1.0
        ):
            raise ValueError(f"density must be 'auto' or a float in (0, 1], got {density!r}")
        self.density_ = float(density)

    def _draw(self, rng, k, d):
        return cf.sparse_random_matrix(rng, k, d, self.density_)

    def transform(self, X):
        """Project X (n_samples, n_features) to (n_samples, n_components_)."""
        check_is_fitted(self)
        if self.density_ > SPARSE_PRODUCT_MAX_DENSITY:
            return super().transform(X)
        from scipy import sparse

        X = check_data(self, X, reset=False, allow_nan=False)
        # (R X^T)^T with R in CSR: the product touches R's non-zeros only
        R = sparse.csr_array(self.components_)
        out = (R @ X.T).T
        if self.dtype == "float32":
            out = out.astype(np.float32)
        return to_numpy(out)
