"""``latentlab.SpectralEmbedding`` (Laplacian eigenmaps) and ``latentlab.SpectralClustering``."""

from __future__ import annotations

import jax
import numpy as np
from sklearn.base import ClusterMixin
from sklearn.utils import check_random_state

from latentlab._docstrings import fill_doc
from latentlab._settings import (
    Callable,
    Dtype,
    InstanceOf,
    Integer,
    Options,
    RandomState,
    Real,
    Verbose,
)
from latentlab._validation import check_data, check_n_components, check_symmetric
from latentlab.closed_form import kmeans as km
from latentlab.closed_form import neighbors as nb
from latentlab.closed_form import spectral as cf
from latentlab.closed_form.eigensolvers import solve_with_fallback
from latentlab.estimators._dispatch import call, to_device
from latentlab.estimators._embedding import pairwise_tags
from latentlab.estimators.base import LatentEstimator, to_numpy
from latentlab.estimators.isomap import check_n_neighbors
from latentlab.estimators.kmeans import plusplus_draws

__all__ = ["SpectralEmbedding", "SpectralClustering"]

AFFINITIES = ("nearest_neighbors", "rbf", "precomputed", "precomputed_nearest_neighbors")
# scikit-learn's pairwise kernels, SpectralClustering's other affinities (rbf runs on
# the device; the rest on the host through sklearn.metrics.pairwise_kernels)
KERNEL_AFFINITIES = (
    "additive_chi2",
    "chi2",
    "linear",
    "poly",
    "polynomial",
    "laplacian",
    "sigmoid",
    "cosine",
)
EIGEN_SOLVERS = ("auto", "dense", "arpack", "lanczos", "lobpcg", "amg")
SPARSE = ("csr", "csc", "coo")
ASSIGN_LABELS = ("kmeans", "discretize", "cluster_qr")
# The settings of the affinity and the eigensolver, shared by both estimators.
GRAPH_SETTINGS = {
    "affinity": Options(*AFFINITIES) | Callable(),
    "gamma": Real(0, None, closed="neither", finite=True) | None,  # None: 1 / n_features
    "n_neighbors": Integer(1, None) | None,  # < n_samples: checked with the data
    "eigen_solver": Options(*EIGEN_SOLVERS),
    "eigen_tol": Real(0, None, finite=True) | "auto",
    "n_jobs": Integer() | None,
    "random_state": RandomState(),
    "dtype": Dtype(),
}


def _check_gamma(gamma, n_features):
    return 1.0 / n_features if gamma is None else float(gamma)


def _check_affinity_matrix(A, n, who):
    """A host affinity matrix (dense or sparse) as float64 (CSR if sparse): square
    (n, n), finite, symmetric to round-off and non-negative, or a ValueError naming
    the problem."""
    from scipy import sparse

    if sparse.issparse(A):
        A = sparse.csr_matrix(A, dtype=np.float64)
        values = A.data
    else:
        A = np.asarray(A, dtype=np.float64)
        values = A
    if A.shape != (n, n):
        raise ValueError(
            f"{who} must be a square (n_samples, n_samples) = ({n}, {n}) matrix, got "
            f"shape {A.shape}"
        )
    if not np.isfinite(values).all():
        raise ValueError(f"{who} holds NaN or infinite values")
    if (values < 0).any():
        raise ValueError(
            f"{who} has negative entries (smallest {values.min():.3g}); affinities must "
            "be non-negative"
        )
    check_symmetric(A, who)
    return A


def _amg_unavailable():
    try:
        import pyamg  # noqa: F401
    except ImportError:
        return True
    return False


def host_affinity(est, X, gamma, n_neighbors, kernel_params=None):
    """The affinity matrix built on the host (dense ndarray or CSR), or None where the
    device builds it (rbf or k-NN of dense data).  Returns (matrix, n_neighbors used)."""
    from scipy import sparse

    n, d = X.shape
    affinity = est.affinity
    sparse_input = sparse.issparse(X)
    if affinity in ("precomputed", "precomputed_nearest_neighbors") and n != d:
        raise ValueError(
            f"affinity={affinity!r} needs a square (n_samples, n_samples) matrix, got shape "
            f"{X.shape}"
        )
    if affinity == "precomputed":
        return _check_affinity_matrix(
            X, n, "affinity='precomputed': the affinity matrix X"
        ), n_neighbors
    if affinity in ("nearest_neighbors", "precomputed_nearest_neighbors"):
        # scikit-learn counts the point itself among its n_neighbors (include_self=True)
        n_neighbors = check_n_neighbors(n_neighbors, n + 1)
    if affinity == "precomputed_nearest_neighbors":
        from sklearn.neighbors import NearestNeighbors

        if (X.data if sparse_input else X).min(initial=0.0) < 0:
            raise ValueError(
                "affinity='precomputed_nearest_neighbors' needs non-negative distances"
            )
        search = NearestNeighbors(n_neighbors=n_neighbors, metric="precomputed", n_jobs=est.n_jobs)
        C = search.fit(X).kneighbors_graph(X, mode="connectivity")
        return (0.5 * (C + C.T)).tocsr(), n_neighbors
    if affinity == "nearest_neighbors" and sparse_input:
        from sklearn.neighbors import NearestNeighbors

        search = NearestNeighbors(n_neighbors=n_neighbors, n_jobs=est.n_jobs).fit(X)
        return cf.sparse_knn_affinity(search.kneighbors(X, return_distance=False)), n_neighbors
    if affinity == "rbf" and sparse_input:
        from sklearn.metrics.pairwise import rbf_kernel

        return rbf_kernel(X, gamma=_check_gamma(gamma, d)), n_neighbors
    if kernel_params is not None:  # SpectralClustering: a kernel name or a kernel of two rows
        from sklearn.metrics.pairwise import pairwise_kernels

        A = pairwise_kernels(
            X, metric=affinity, filter_params=True, n_jobs=est.n_jobs, **kernel_params
        )
        return _check_affinity_matrix(A, n, f"The {affinity!r} affinity of X"), n_neighbors
    if callable(affinity):  # SpectralEmbedding: a function of X returning the matrix
        return _check_affinity_matrix(affinity(X), n, "The callable affinity's matrix"), n_neighbors
    return None, n_neighbors


def laplacian_embedding(est, X, n_components, drop_first, gamma, n_neighbors, kernel_params=None):
    """Build the affinity of ``est.affinity`` from validated X and embed it; returns
    (embedding, eigenvalues, affinity matrix on the host, solver used, n_neighbors
    used, gamma).  ``kernel_params``: SpectralClustering's kernel settings (its
    affinities include scikit-learn's pairwise kernels)."""
    from scipy import sparse

    n, d = X.shape
    wanted = n_components + 1 if drop_first else n_components
    check_n_components(n_components, 1, n - 1 if drop_first else n, "n_samples")
    dtype = np.float32 if getattr(est, "dtype", "float64") == "float32" else np.float64
    if est.eigen_solver == "amg" and _amg_unavailable():
        raise ValueError(
            "The eigen_solver was set to 'amg', but pyamg is not available. Install pyamg, or "
            "use eigen_solver='lobpcg' (LOBPCG without the multigrid preconditioner), "
            "'arpack' or 'dense'"
        )
    eigen_tol = None if est.eigen_tol == "auto" else float(est.eigen_tol)
    matrix, n_neighbors = host_affinity(est, X, gamma, n_neighbors, kernel_params)
    affinity = est.affinity
    if affinity == "rbf":
        gamma = _check_gamma(gamma, d)
    knn = matrix is None and affinity == "nearest_neighbors"
    with est._precision():
        seed = check_random_state(est.random_state).randint(0, 2**31 - 1)
        key = jax.random.PRNGKey(seed)
        if knn:
            others = np.zeros((n, 0), np.int32)
            if n_neighbors > 1:
                # a connectivity: who the neighbours are, not how far
                others = nb.kneighbors_indices(X, X, n_neighbors - 1, exclude_self=True)
            indices = np.concatenate([np.arange(n, dtype=np.int32)[:, None], others], axis=1)
            matrix = cf.sparse_knn_affinity(indices)  # O(n k): built on the host
            fit_program, data = cf.fit_knn_spectral_embedding, (to_device(indices),)
        elif matrix is None:  # rbf of dense data: the n x n affinity built on the device
            fit_program, data = cf.fit_rbf_spectral_embedding, (to_device(X), gamma)
            matrix = to_numpy(call(cf.rbf_affinity_program, n * n * d, to_device(X), gamma))
        elif sparse.issparse(matrix):
            fit_program, data = cf.fit_spectral_embedding, None  # densified only if asked
        else:
            fit_program, data = cf.fit_spectral_embedding, (to_device(0.5 * (matrix + matrix.T)),)
        is_sparse = sparse.issparse(matrix)
        nb.check_connected(
            matrix if is_sparse else _sparse(matrix),
            "affinity graph",
            "Graph is not fully connected: spectral embedding may not work as expected "
            "(each component gets its own zero eigenvalue)"
            + (
                "; increase n_neighbors."
                if affinity in ("nearest_neighbors", "precomputed_nearest_neighbors")
                else "."
            ),
            error=False,
        )

        def solve(solver, **settings):
            if solver == "arpack":  # a sparse Laplacian, solved on the host
                return cf.sparse_spectral_embedding(
                    matrix, n_components=n_components, drop_first=drop_first, seed=seed
                )
            args = data if data is not None else (to_device(matrix.toarray()),)
            return call(
                fit_program,
                n * n,
                *args,
                key,
                n_components=n_components,
                drop_first=drop_first,
                solver=solver,
                **settings,
            )

        if est.eigen_solver in ("lobpcg", "amg"):
            result = cf.lobpcg_spectral_embedding(
                matrix, n_components=n_components, drop_first=drop_first, seed=seed, tol=eigen_tol
            )
            solver = "lobpcg"
            if not bool(result.converged):
                result, solver = solve("dense"), "dense"
        else:
            result, solver = solve_with_fallback(
                solve, n, wanted, est.eigen_solver, dtype, shift_invert=is_sparse, sparse=is_sparse
            )
        embedding = to_numpy(result.embedding)
        eigenvalues = to_numpy(result.eigenvalues)
    return embedding, eigenvalues, matrix, solver, n_neighbors, gamma


def _sparse(A):
    from scipy.sparse import csr_matrix

    A = np.array(A, copy=True)
    np.fill_diagonal(A, 0)
    return csr_matrix(A)


@fill_doc
class SpectralEmbedding(LatentEstimator):
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
    affinity : {"nearest_neighbors", "rbf", "precomputed", \
"precomputed_nearest_neighbors"} or callable, default="nearest_neighbors"
        ``"nearest_neighbors"``: the symmetrised 0/1 connectivity of the k-NN graph
        (each point counted among its own ``n_neighbors``, as scikit-learn);
        ``"rbf"``: ``exp(-gamma |x - y|^2)``; ``"precomputed"``: X is the (n, n)
        symmetric, non-negative affinity matrix, dense or sparse;
        ``"precomputed_nearest_neighbors"``: X is an (n, n) distance matrix or sparse
        distance graph, and the affinity the symmetrised connectivity of its
        ``n_neighbors`` nearest entries per row (scikit-learn's
        ``NearestNeighbors(metric="precomputed")``); a callable takes X and returns the
        (n, n) affinity matrix.  Sparse X is taken by every affinity (rbf and the
        k-NN search then run on the host).
    gamma : float or None, default=None
        rbf width; None means ``1 / n_features``.
    n_neighbors : int or None, default=None
        None means ``max(n_samples // 10, 1)``.
    eigen_solver : {"auto", "dense", "arpack", "lanczos", "lobpcg", "amg"}, \
default="auto"
        For ``"nearest_neighbors"``: ``"arpack"`` keeps the Laplacian sparse and runs
        ARPACK on its inverse (SciPy's sparse LU, as scikit-learn): the sparse
        graph's bottom eigenvalues crowd near 0, which only shift-invert separates;
        ``"lanczos"`` does the same with a dense Cholesky and block Lanczos on the
        device; "auto": arpack above 200 samples, dense eigh below.  For the dense
        affinities (rbf, precomputed): ``"lanczos"`` (or ``"arpack"``, read as
        ``"lanczos"``) is block Lanczos on ``D^{-1/2} A D^{-1/2}``; "auto": lanczos
        above 500 samples, dense below.  Sparse affinities (precomputed sparse, the
        k-NN graphs) follow the ``"nearest_neighbors"`` rules.  ``"lobpcg"``: SciPy's
        LOBPCG on the normalized Laplacian on the host, to ``eigen_tol``.  ``"amg"``
        needs pyamg (a ValueError says so where it is not installed) and then runs
        LOBPCG without a multigrid preconditioner.  The iterative solvers fall back to
        dense when they do not converge.
    eigen_tol : float or "auto", default="auto"
        Residual tolerance of ``"lobpcg"`` ("auto": SciPy's default, ``n_samples *
        sqrt(eps)``); the other solvers use their own (see
        :func:`latentlab.closed_form.eigensolvers.eigen_settings`).
    n_jobs : int or None, default=None
        Parallel jobs of the host neighbour searches (sparse X,
        ``"precomputed_nearest_neighbors"``).
    {eigensolver_seed}

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
        float32 when X is float32 (as scikit-learn), else float64.
    eigenvalues_ : ndarray (n_components,)
        The normalized Laplacian's eigenvalues of the kept eigenvectors, increasing.
    affinity_matrix_ : sparse matrix or ndarray (n_samples, n_samples)
        The affinity embedded: a ``scipy.sparse`` CSR matrix for the k-NN graphs and
        sparse precomputed affinities (as scikit-learn's), else dense; float32 when X
        is float32.
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
        eigen_tol="auto",
        n_jobs=None,
        random_state=None,
        dtype="float64",
    ):
        self.n_components = n_components
        self.affinity = affinity
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.eigen_solver = eigen_solver
        self.eigen_tol = eigen_tol
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.dtype = dtype

    def fit(self, X, y=None):
        """Fit the embedding to X (n_samples, n_features), or to an affinity or
        distance matrix (dense or sparse; see ``affinity``)."""
        single = getattr(X, "dtype", None) == np.float32
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2, accept_sparse=SPARSE)
        n = X.shape[0]
        k = self.n_neighbors if self.n_neighbors is not None else max(n // 10, 1)
        embedding, eigenvalues, matrix, solver, k, gamma = laplacian_embedding(
            self, X, self.n_components, True, self.gamma, k
        )
        out = np.float32 if single else np.float64
        self.embedding_ = embedding.astype(out, copy=False)
        self.eigenvalues_ = eigenvalues
        self.affinity_matrix_ = matrix.astype(out, copy=False)
        if self.affinity in ("nearest_neighbors", "precomputed_nearest_neighbors"):
            self.n_neighbors_ = int(k)
        if self.affinity == "rbf":
            self.gamma_ = float(gamma)
        self.solver_ = solver
        return self

    def fit_transform(self, X, y=None):
        """Fit and return the embedding (n_samples, n_components)."""
        return self.fit(X).embedding_.copy()

    def __sklearn_tags__(self):
        return pairwise_tags(super().__sklearn_tags__(), self.affinity, accepts_sparse=True)


@fill_doc
class SpectralClustering(ClusterMixin, LatentEstimator):
    """Spectral clustering (Ng, Jordan & Weiss 2002): k-means on the Laplacian
    eigenmap of an affinity matrix, scikit-learn's conventions (the embedding keeps
    the first eigenvector; ``n_init`` k-means++ restarts keep the lowest inertia).

    Parameters
    ----------
    n_clusters : int, default=8
    affinity : str or callable, default="rbf"
        As for :class:`SpectralEmbedding` (``"rbf"``, ``"nearest_neighbors"``,
        ``"precomputed"``, ``"precomputed_nearest_neighbors"``), or one of
        scikit-learn's pairwise kernels (``"linear"``, ``"poly"``/``"polynomial"``,
        ``"sigmoid"``, ``"laplacian"``, ``"chi2"``, ``"additive_chi2"``,
        ``"cosine"``; computed on the host by ``sklearn.metrics.pairwise_kernels``
        with ``gamma``, ``degree``, ``coef0`` and ``kernel_params``), or a callable
        kernel of two rows returning a number (scikit-learn's convention for this
        class).  The affinities must be non-negative.
    gamma : float, default=1.0
        Width of the rbf, laplacian, sigmoid, polynomial and chi2 kernels.
    n_neighbors : int, default=10
        For ``"nearest_neighbors"`` (the point itself counted).
    n_components : int or None, default=None
        Eigenvectors used; None means ``n_clusters``.
    n_init : int, default=10
        k-means restarts (``assign_labels="kmeans"``).
    eigen_solver : {"auto", "dense", "arpack", "lanczos", "lobpcg", "amg"}, \
default="auto"
        As for :class:`SpectralEmbedding`.
    eigen_tol : float or "auto", default="auto"
        As for :class:`SpectralEmbedding`.
    assign_labels : {"kmeans", "discretize", "cluster_qr"}, default="kmeans"
        How the embedding becomes labels: k-means (``n_init`` k-means++ restarts),
        Yu & Shi's (2003) discretisation (:func:`latentlab.closed_form.spectral.
        discretize`), or Damle, Minden & Ying's (2019) column-pivoted QR
        (:func:`latentlab.closed_form.spectral.cluster_qr`, no restarts or seed).
        ``cluster_centers_`` and ``inertia_`` are the mean of each label's rows and
        their within-cluster sum of squares for the latter two.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial and sigmoid kernels.
    kernel_params : dict or None, default=None
        Further keyword arguments of a kernel affinity (a callable's too).
    n_jobs : int or None, default=None
        Parallel jobs of the host kernels and neighbour searches.
    random_state : int, RandomState or None, default=None
        Seeds k-means++ and the ARPACK start vector or Lanczos start block.
    verbose : int or bool, default=False
        Print how the labels are assigned and, for k-means, each restart's
        initialisation, the inertia after every Lloyd iteration and why it stopped.
        The restarts then run one Lloyd step per compiled call (so that each step
        can be reported) instead of all in one program: the same iterations, slower.
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
        The affinity clustered (``scipy.sparse`` CSR for the k-NN graphs and sparse
        precomputed affinities).
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
        "affinity": Options(*AFFINITIES, *KERNEL_AFFINITIES) | Callable(),
        "assign_labels": Options(*ASSIGN_LABELS),
        "degree": Real(0, None, finite=True),
        "coef0": Real(finite=True),
        "kernel_params": InstanceOf(dict, "a dict") | None,
        "verbose": Verbose(),
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
        eigen_tol="auto",
        assign_labels="kmeans",
        degree=3,
        coef0=1,
        kernel_params=None,
        n_jobs=None,
        random_state=None,
        verbose=False,
        dtype="float64",
    ):
        self.eigen_tol = eigen_tol
        self.assign_labels = assign_labels
        self.verbose = verbose
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_jobs = n_jobs
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.n_components = n_components
        self.n_init = n_init
        self.eigen_solver = eigen_solver
        self.random_state = random_state
        self.dtype = dtype

    def __sklearn_tags__(self):
        return pairwise_tags(super().__sklearn_tags__(), self.affinity, accepts_sparse=True)

    def fit(self, X, y=None):
        """Cluster X (n_samples, n_features), or an affinity or distance matrix (dense
        or sparse; see ``affinity``)."""
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2, accept_sparse=SPARSE)
        n = X.shape[0]
        if self.n_clusters > n:
            raise ValueError(f"n_clusters={self.n_clusters} exceeds n_samples={n}")
        n_components = self.n_clusters if self.n_components is None else self.n_components
        kernel_params = None
        if callable(self.affinity) or self.affinity in KERNEL_AFFINITIES:
            kernel_params = dict(self.kernel_params or {})
            if not callable(self.affinity):
                kernel_params.update(gamma=self.gamma, degree=self.degree, coef0=self.coef0)
        embedding, _, matrix, solver, _, _ = laplacian_embedding(
            self, X, n_components, False, self.gamma, self.n_neighbors, kernel_params
        )
        self.embedding_ = embedding
        self.affinity_matrix_ = matrix
        self.solver_ = solver
        if self.verbose:
            print(f"Computing label assignment using {self.assign_labels}")
        if self.assign_labels != "kmeans":
            seed = check_random_state(self.random_state).randint(0, 2**31 - 1)
            if self.assign_labels == "discretize":
                labels = cf.discretize(embedding, seed=seed)
            else:
                labels = cf.cluster_qr(embedding)
            self.labels_ = labels
            centers = np.zeros((int(self.n_clusters), embedding.shape[1]))
            for c in np.unique(labels):
                centers[c] = embedding[labels == c].mean(axis=0)
            self.cluster_centers_ = centers
            self.inertia_ = float(np.sum((embedding - centers[labels]) ** 2))
            return self
        uniforms = plusplus_draws(
            check_random_state(self.random_state), int(self.n_init), int(self.n_clusters)
        )
        with self._precision():
            if self.verbose:
                result = _reported_kmeans(embedding, int(self.n_clusters), uniforms)
            else:
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
        return self


# km.kmeans's defaults, which the reported run repeats step by step
_KMEANS_MAX_ITER = 300
_KMEANS_TOL = 1e-4


def _reported_kmeans(embedding, n_clusters, uniforms):
    """``km.kmeans`` with one k-means++ restart per row of ``uniforms``, the lowest
    inertia kept, printing each restart's progress: the seeding (a call with no Lloyd
    iteration, which also gives the labels of the seeds), then one compiled Lloyd
    iteration per call, stopped by the rule of :func:`latentlab.closed_form.kmeans.
    lloyd` (labels unchanged, summed squared centre shift within ``tol`` times the
    mean feature variance, or ``max_iter``)."""
    X = to_device(embedding)
    work = embedding.size * n_clusters
    key = jax.random.PRNGKey(0)  # unused: k-means++ draws ``uniforms`` / ``init``
    tol = _KMEANS_TOL * float(np.mean(np.var(embedding, axis=0)))
    best = None
    for draws in uniforms:
        seeded = call(
            km.kmeans,
            work,
            X,
            key,
            n_clusters=n_clusters,
            max_iter=0,
            uniforms=to_device(draws[None]),
        )
        print("Initialization complete")
        centers, previous, before = seeded.centers, None, np.asarray(seeded.labels)
        for iteration in range(1, _KMEANS_MAX_ITER + 1):
            result = call(km.kmeans, work, X, key, n_clusters=n_clusters, max_iter=1, init=centers)
            print(f"Iteration {iteration}, inertia {float(result.inertia):.6g}.")
            shift = float(np.sum((np.asarray(result.centers) - np.asarray(centers)) ** 2))
            # this iteration's assignment is the previous call's labels (``before``)
            unchanged = previous is not None and np.array_equal(before, previous)
            centers, previous, before = result.centers, before, np.asarray(result.labels)
            if unchanged:
                print(f"Converged at iteration {iteration}: strict convergence.")
                break
            if shift <= tol:
                print(
                    f"Converged at iteration {iteration}: center shift {shift:.6g} within "
                    f"tolerance {tol:.6g}."
                )
                break
        if best is None or float(result.inertia) < float(best.inertia):
            best = result
    return best
