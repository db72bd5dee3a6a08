"""``latentlab.GaussianRandomProjection`` and ``latentlab.SparseRandomProjection``."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import DataDimensionalityWarning
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._settings import Boolean, Dtype, Integer, RandomState, Real
from latentlab._validation import check_codes, check_data, kept_float_dtype
from latentlab.closed_form import random_projection as cf
from latentlab.closed_form.random_projection import johnson_lindenstrauss_min_dim
from latentlab.estimators._dispatch import map_rows
from latentlab.estimators._sparse import check_sparse_data, is_sparse
from latentlab.estimators.base import LATENTLAB_FILES, LatentEstimator, to_numpy

__all__ = [
    "GaussianRandomProjection",
    "SparseRandomProjection",
    "johnson_lindenstrauss_min_dim",
]

# Below this density the sparse product (SciPy, on the host) does at most a tenth of
# the dense product's flops and wins; above, transform densifies components_ for the
# jit-compiled dense product.
SPARSE_PRODUCT_MAX_DENSITY = 0.1


class _RandomProjection(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    _settings = {
        "n_components": Integer(1, None) | "auto",
        "eps": Real(0, None, closed="neither"),  # (0, 1) for "auto": the JL bound says
        "compute_inverse_components": Boolean(),
        "random_state": RandomState(),
        "dtype": Dtype(),
    }

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
            if k < 1:
                raise ValueError(
                    f"n_components='auto' needs at least 2 samples: the Johnson-Lindenstrauss "
                    f"dimension of n_samples={n_samples} at eps={self.eps} is {k}; set "
                    "n_components"
                )
            if k > n_features:
                raise ValueError(
                    f"eps={self.eps:f} and n_samples={n_samples} lead to a target dimension "
                    f"of {k} which is larger than the original space with "
                    f"n_features={n_features}: the Johnson-Lindenstrauss bound needs "
                    f"n_components >= {k}, so a random projection cannot reduce this data at "
                    "that distortion; raise eps or set n_components"
                )
            return k
        k = self.n_components
        if k > n_features:
            warnings.warn(
                f"n_components={k} is larger than n_features={n_features}: the projection "
                "does not reduce the dimension",
                DataDimensionalityWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        return int(k)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    _accepts_sparse = True

    def _check_X(self, X, reset):
        if self._accepts_sparse and is_sparse(X):
            return check_sparse_data(self, X, reset=reset)
        return check_data(self, X, reset=reset, allow_nan=False)

    def _dense_components(self):
        return self.components_

    def fit(self, X, y=None):
        """Draw the random matrix for data of X's shape (X's values are not used beyond
        validation)."""
        out_dtype = kept_float_dtype(X)
        X = self._check_X(X, reset=True)
        n, d = X.shape
        k = self._n_components(n, d)
        self._check_density(d)
        seed = check_random_state(self.random_state).randint(0, 2**31 - 1)
        rng = np.random.default_rng(seed)
        # drawn in float64 (the same matrix for either input precision), then stored in
        # the input's: float32 for float32 X, as scikit-learn's
        self.components_ = self._draw(rng, k, d).astype(out_dtype)
        self.n_components_ = k
        if self.compute_inverse_components:
            inverse = np.linalg.pinv(self._dense_components().astype(np.float64))
            self.inverse_components_ = inverse.astype(out_dtype)
        return self

    def _check_density(self, n_features):
        pass

    def _result_dtype(self):
        """float32 when fitted on float32 X (``components_`` are then float32, as
        scikit-learn's), else float64 (whatever ``dtype``, the precision of the
        computation)."""
        return self.components_.dtype

    @property
    def _n_features_out(self):
        return self.n_components_

    def transform(self, X):
        """Project X (n_samples, n_features) to (n_samples, n_components_)."""
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        if is_sparse(X):  # sparse X times the dense matrix: SciPy's product, dense output
            out = np.asarray(X @ self.components_.astype(np.float64).T)
            return out.astype(self._result_dtype(), copy=False)
        with self._precision():
            components = jnp.asarray(self.components_.astype(np.float64))
            out = to_numpy(map_rows(cf.project, X, components, work_per_row=self.n_components_))
        return out.astype(self._result_dtype(), copy=False)

    def inverse_transform(self, X):
        """Least-squares pre-images ``X pinv(components_)^T`` of projections
        (n_samples, n_components_), shape (n_samples, n_features)."""
        check_is_fitted(self)
        if is_sparse(X):  # a sparse projection (SparseRandomProjection of sparse X)
            X = X.toarray()
        Z = check_codes(X, self.n_components_)
        inverse = getattr(self, "inverse_components_", None)
        if inverse is None:
            inverse = np.linalg.pinv(self._dense_components().astype(np.float64))
        with self._precision():
            out = to_numpy(
                map_rows(
                    cf.project,
                    Z,
                    jnp.asarray(inverse, jnp.float64),
                    work_per_row=self.n_features_in_,
                )
            )
        return out.astype(self._result_dtype(), copy=False)


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
        Precision of the product.  A float32 X gives float32 ``components_`` and
        projections (scikit-learn keeps float32; the matrix is drawn in float64 and
        rounded once), other input float64 ones, whatever ``dtype``.

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

    ``transform`` is one jit-compiled product ``X components_^T`` (for SciPy sparse X,
    SciPy's sparse-dense product, a dense array).
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

    The matrix is a SciPy CSR matrix (``components_``, as scikit-learn's), drawn
    straight into that form: memory for its non-zeros only (a 3,947 x 10,000 matrix
    at the default density holds 0.4 M of 39 M entries).  For ``density <= 0.1``
    ``transform`` multiplies by the non-zeros only (SciPy's sparse product on the
    host, ``density`` times the dense flops); above, by the densified matrix
    (one jit-compiled product).  X may be a SciPy sparse matrix: the projection is
    then sparse too, unless ``dense_output``.
"""
        + _SHARED_DOC.replace(
            "    eps : float",
            """    density : float in (0, 1] or "auto", default="auto"
        Share of non-zero entries; "auto" is ``1 / sqrt(n_features)`` (Li et al.).
    eps : float""",
        )
        .replace(
            "    compute_inverse_components : bool",
            """    dense_output : bool, default=False
        Return a NumPy array even when X is sparse (the projection of dense X is
        always dense).
    compute_inverse_components : bool""",
        )
        .replace(
            """    components_ : ndarray (n_components_, n_features)
        The random matrix, dense.""",
            """    components_ : scipy.sparse.csr_matrix (n_components_, n_features)
        The random matrix.""",
        )
        .replace(
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

    _settings = {
        **_RandomProjection._settings,
        "density": Real(0, 1, closed="right") | "auto",
        "dense_output": Boolean(),
    }

    def __init__(
        self,
        n_components="auto",
        *,
        density="auto",
        eps=0.1,
        dense_output=False,
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
        self.dense_output = dense_output

    def _dense_components(self):
        return self.components_.toarray()

    def _check_density(self, n_features):
        density = self.density
        if isinstance(density, str):  # "auto"
            density = 1.0 / np.sqrt(n_features)
        self.density_ = float(density)

    def _draw(self, rng, k, d):
        return cf.sparse_random_matrix(rng, k, d, self.density_)

    def transform(self, X):
        """Project X (n_samples, n_features) to (n_samples, n_components_): a NumPy
        array, or for sparse X a SciPy CSR matrix unless ``dense_output``."""
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        dtype = self._result_dtype()
        R = self.components_.astype(np.float64)
        if is_sparse(X):
            out = (X @ R.T).astype(dtype)
            return out.toarray() if self.dense_output else out.tocsr()
        if self.density_ > SPARSE_PRODUCT_MAX_DENSITY:
            with self._precision():
                out = to_numpy(
                    map_rows(
                        cf.project, X, jnp.asarray(R.toarray()), work_per_row=self.n_components_
                    )
                )
            return out.astype(dtype, copy=False)
        # (R X^T)^T with R in CSR: the product touches R's non-zeros only
        return np.ascontiguousarray((R @ X.T).T, dtype=dtype)
