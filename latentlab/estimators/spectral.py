"""``latentlab.SpectralEmbedding`` (Laplacian eigenmaps) and ``latentlab.SpectralClustering``."""

from __future__ import annotations

import jax
import numpy as np
from sklearn.base import ClusterMixin
from sklearn.utils import check_random_state

from latentlab._docstrings import fill_doc
from latentlab._settings import Dtype, Integer, Options, RandomState, Real
from latentlab._validation import check_data, check_n_components, check_symmetric
from latentlab.closed_form import kmeans as km
from latentlab.closed_form import neighbors as nb
from latentlab.closed_form import spectral as cf
from latentlab.closed_form.eigensolvers import solve_with_fallback
from latentlab.estimators._dispatch import call, to_device
from latentlab.estimators._embedding import PairwiseWhenPrecomputed
from latentlab.estimators.base import LatentEstimator, to_numpy
from latentlab.estimators.isomap import check_n_neighbors
from latentlab.estimators.kmeans import plusplus_draws

__all__ = ["SpectralEmbedding", "SpectralClustering"]

AFFINITIES = ("nearest_neighbors", "rbf", "precomputed")
EIGEN_SOLVERS = ("auto", "dense", "arpack", "lanczos")
# The settings of the affinity and the eigensolver, shared by both estimators.
GRAPH_SETTINGS = {
    "affinity": Options(*AFFINITIES),
    "gamma": Real(0, None, closed="neither", finite=True) | None,  # None: 1 / n_features
    "n_neighbors": Integer(1, None) | None,  # < n_samples: checked with the data
    "eigen_solver": Options(*EIGEN_SOLVERS),
    "random_state": RandomState(),
    "dtype": Dtype(),
}


def _check_gamma(gamma, n_features):
    return 1.0 / n_features if gamma is None else float(gamma)


def laplacian_embedding(est, X, n_components, drop_first, gamma, n_neighbors):
    """Build the affinity of ``est.affinity`` from validated X and embed it; returns
    (embedding, eigenvalues, affinity matrix, solver used, n_neighbors used, gamma)."""
    n, d = X.shape
    wanted = n_components + 1 if drop_first else n_components
    check_n_components(n_components, 1, n - 1 if drop_first else n, "n_samples")
    dtype = np.float32 if getattr(est, "dtype", "float64") == "float32" else np.float64
    affinity = est.affinity
    if affinity == "precomputed":
        if n != d:
            raise ValueError(
                f"affinity='precomputed' needs a square (n_samples, n_samples) affinity "
                f"matrix, got shape {X.shape}"
            )
        check_symmetric(X, "affinity='precomputed': the affinity matrix X")
        if (X < 0).any():
            raise ValueError("affinity='precomputed' needs non-negative affinities")
    elif affinity == "nearest_neighbors":
        # scikit-learn counts the point itself among its n_neighbors (include_self=True)
        n_neighbors = check_n_neighbors(n_neighbors, n + 1)
    else:
        gamma = _check_gamma(gamma, d)
    knn = affinity == "nearest_neighbors"
    with est._precision():
        seed = check_random_state(est.random_state).randint(0, 2**31 - 1)
        key = jax.random.PRNGKey(seed)
        # one program per affinity, all taking (data..., key) and the solver settings
        if affinity == "precomputed":
            fit_program, data = cf.fit_spectral_embedding, (to_device(0.5 * (X + X.T)),)
        elif affinity == "rbf":
            fit_program, data = cf.fit_rbf_spectral_embedding, (to_device(X), gamma)
        else:
            others = np.zeros((n, 0), np.int32)
            if n_neighbors > 1:
                # a connectivity: who the neighbours are, not how far
                others = nb.kneighbors_indices(X, X, n_neighbors - 1, exclude_self=True)
            indices = np.concatenate([np.arange(n, dtype=np.int32)[:, None], others], axis=1)
            matrix = cf.sparse_knn_affinity(indices)  # O(n k): built on the host
            nb.check_connected(
                matrix,
                "nearest-neighbour affinity graph",
                "Spectral embedding may not work as expected: each component gets its own "
                "zero eigenvalue; increase n_neighbors.",
                error=False,
            )
            fit_program, data = cf.fit_knn_spectral_embedding, (to_device(indices),)

        def solve(solver, **settings):
            if solver == "arpack":  # the k-NN Laplacian stays sparse, solved on the host
                return cf.sparse_spectral_embedding(
                    matrix, n_components=n_components, drop_first=drop_first, seed=seed
                )
            return call(
                fit_program,
                n * n,
                *data,
                key,
                n_components=n_components,
                drop_first=drop_first,
                solver=solver,
                **settings,
            )

        result, solver = solve_with_fallback(
            solve, n, wanted, est.eigen_solver, dtype, shift_invert=knn, sparse=knn
        )
        embedding = to_numpy(result.embedding)
        eigenvalues = to_numpy(result.eigenvalues)
        if affinity == "precomputed":
            matrix = X.copy()
        elif affinity == "rbf":
            matrix = None  # rebuilt below only when asked for
    if affinity == "precomputed":
        nb.check_connected(
            _sparse(matrix),
            "affinity graph",
            "Spectral embedding may not work as expected: each component gets its own "
            "zero eigenvalue.",
            error=False,
        )
    return embedding, eigenvalues, matrix, solver, n_neighbors, gamma


def _sparse(A):
    from scipy.sparse import csr_matrix

    A = np.array(A, copy=True)
    np.fill_diagonal(A, 0)
    return csr_matrix(A)


@fill_doc
class SpectralEmbedding(PairwiseWhenPrecomputed, LatentEstimator):
    """Laplacian eigenmaps (Belkin & Niyogi 2003).

    The bottom eigenvectors of the normalized graph Laplacian of an affinity matrix,
    divided by the square roots of the degrees, the first (constant) one dropped:
    scikit-learn's ``SpectralEmbedding`` conventions, which it matches up to the signs
    of the axes.  The eigenproblem runs on ``D^{-1/2} A D^{-1/2}`` through the shared
    eigensolver (:mod:`latentlab.closed_form.spectral`).  Like scikit-learn's, it has
    no out-of-sample ``transform``.

    Parameters
    ----------
    n_components : int, default=2
    affinity : {"nearest_neighbors", "rbf", "precomputed"}, default="nearest_neighbors"
        ``"nearest_neighbors"``: the symmetrised 0/1 connectivity of the k-NN graph
        (each point counted among its own ``n_neighbors``, as scikit-learn);
        ``"rbf"``: ``exp(-gamma |x - y|^2)``; ``"precomputed"``: X is the (n, n)
        symmetric, non-negative affinity matrix.
    gamma : float or None, default=None
        rbf width; None means ``1 / n_features``.
    n_neighbors : int or None, default=None
        None means ``max(n_samples // 10, 1)``.
    eigen_solver : {"auto", "dense", "arpack", "lanczos"}, default="auto"
        For ``"nearest_neighbors"``: ``"arpack"`` keeps the Laplacian sparse and runs
        ARPACK on its inverse (SciPy's sparse LU, as scikit-learn): the sparse
        graph's bottom eigenvalues crowd near 0, which only shift-invert separates;
        ``"lanczos"`` does the same with a dense Cholesky and block Lanczos on the
        device; "auto": arpack above 200 samples, dense eigh below.  For the dense
        affinities (rbf, precomputed): ``"lanczos"`` (or ``"arpack"``, read as
        ``"lanczos"``) is block Lanczos on ``D^{-1/2} A D^{-1/2}``; "auto": lanczos
        above 500 samples, dense below.  The iterative solvers fall back to dense
        when they do not converge.
    {eigensolver_seed}

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
    eigenvalues_ : ndarray (n_components,)
        The normalized Laplacian's eigenvalues of the kept eigenvectors, increasing.
    affinity_matrix_ : sparse matrix or ndarray (n_samples, n_samples)
        Only for ``"nearest_neighbors"`` (a ``scipy.sparse`` CSR matrix, as
        scikit-learn's) and ``"precomputed"`` (an rbf affinity stays on the device: it
        is n^2 numbers that ``gamma_`` rebuilds).
    n_neighbors_ : int
        Only for ``"nearest_neighbors"``.
    gamma_ : float
        Only for ``"rbf"``.
    {solver_attribute}
    n_features_in_ : int

    Examples
    --------
    >>> import latentlab
    >>> from sklearn.datasets import make_s_curve
    >>> X, _ = make_s_curve(100, random_state=0)
    >>> latentlab.SpectralEmbedding(n_neighbors=10).fit_transform(X).shape
    (100, 2)
    """

    _settings = {"n_components": Integer(), **GRAPH_SETTINGS}

    def __init__(
        self,
        n_components=2,
        *,
        affinity="nearest_neighbors",
        gamma=None,
        n_neighbors=None,
        eigen_solver="auto",
        random_state=None,
        dtype="float64",
    ):
        self.n_components = n_components
        self.affinity = affinity
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.eigen_solver = eigen_solver
        self.random_state = random_state
        self.dtype = dtype

    def fit(self, X, y=None):
        """Fit the embedding to X (n_samples, n_features), or to an affinity matrix."""
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n = X.shape[0]
        k = self.n_neighbors if self.n_neighbors is not None else max(n // 10, 1)
        embedding, eigenvalues, matrix, solver, k, gamma = laplacian_embedding(
            self, X, self.n_components, True, self.gamma, k
        )
        self.embedding_ = embedding
        self.eigenvalues_ = eigenvalues
        if matrix is not None:
            self.affinity_matrix_ = matrix
        if self.affinity == "nearest_neighbors":
            self.n_neighbors_ = int(k)
        if self.affinity == "rbf":
            self.gamma_ = float(gamma)
        self.solver_ = solver
        return self

    def fit_transform(self, X, y=None):
        """Fit and return the embedding (n_samples, n_components)."""
        return self.fit(X).embedding_.copy()


@fill_doc
class SpectralClustering(PairwiseWhenPrecomputed, ClusterMixin, LatentEstimator):
    """Spectral clustering (Ng, Jordan & Weiss 2002): k-means on the Laplacian
    eigenmap of an affinity matrix, scikit-learn's conventions (the embedding keeps
    the first eigenvector; ``n_init`` k-means++ restarts keep the lowest inertia).

    Parameters
    ----------
    n_clusters : int, default=8
    affinity : {"rbf", "nearest_neighbors", "precomputed"}, default="rbf"
    gamma : float, default=1.0
        rbf width.
    n_neighbors : int, default=10
        For ``"nearest_neighbors"`` (the point itself counted).
    n_components : int or None, default=None
        Eigenvectors used; None means ``n_clusters``.
    n_init : int, default=10
        k-means restarts.
    eigen_solver : {"auto", "dense", "arpack", "lanczos"}, default="auto"
        As for :class:`SpectralEmbedding`.
    random_state : int, RandomState or None, default=None
        Seeds k-means++ and the ARPACK start vector or Lanczos start block.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    labels_ : ndarray (n_samples,) of int
    embedding_ : ndarray (n_samples, n_components)
        The spectral embedding that k-means clustered.
    cluster_centers_ : ndarray (n_clusters, n_components)
        k-means centres in that embedding.
    inertia_ : float
    affinity_matrix_ : sparse matrix or ndarray (n_samples, n_samples)
        Only for ``"nearest_neighbors"`` (``scipy.sparse`` CSR) and ``"precomputed"``.
    {solver_attribute}
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.r_[np.zeros((10, 2)), np.ones((10, 2)) * 5] + 0.1 * np.arange(20)[:, None]
    >>> labels = latentlab.SpectralClustering(2, random_state=0).fit_predict(X)
    >>> len(set(labels[:10])), len(set(labels[10:])), bool(labels[0] != labels[-1])
    (1, 1, True)
    """

    _settings = {
        "n_clusters": Integer(1, None),
        "n_components": Integer() | None,  # None: n_clusters
        "n_init": Integer(1, None),
        **GRAPH_SETTINGS,
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        affinity="rbf",
        gamma=1.0,
        n_neighbors=10,
        n_components=None,
        n_init=10,
        eigen_solver="auto",
        random_state=None,
        dtype="float64",
    ):
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.n_components = n_components
        self.n_init = n_init
        self.eigen_solver = eigen_solver
        self.random_state = random_state
        self.dtype = dtype

    def fit(self, X, y=None):
        """Cluster X (n_samples, n_features), or an affinity matrix."""
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n = X.shape[0]
        if self.n_clusters > n:
            raise ValueError(f"n_clusters={self.n_clusters} exceeds n_samples={n}")
        n_components = self.n_clusters if self.n_components is None else self.n_components
        embedding, _, matrix, solver, _, _ = laplacian_embedding(
            self, X, n_components, False, self.gamma, self.n_neighbors
        )
        uniforms = plusplus_draws(
            check_random_state(self.random_state), int(self.n_init), int(self.n_clusters)
        )
        with self._precision():
            result = call(
                km.kmeans,
                embedding.size * self.n_clusters,
                to_device(embedding),
                jax.random.PRNGKey(0),  # unused: k-means++ draws ``uniforms``
                n_clusters=int(self.n_clusters),
                n_init=int(self.n_init),
                uniforms=to_device(uniforms),
            )
            self.labels_ = np.array(result.labels, dtype=np.int64, copy=True)
            self.cluster_centers_ = to_numpy(result.centers)
            self.inertia_ = float(result.inertia)
        self.embedding_ = embedding
        if matrix is not None:
            self.affinity_matrix_ = matrix
        self.solver_ = solver
        return self
