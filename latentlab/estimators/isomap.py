"""``latentlab.Isomap``: geodesic-distance MDS with an out-of-sample ``transform``.

Also the neighbour-graph plumbing the manifold estimators share (:func:`neighbors_of`,
:func:`check_n_neighbors`).
"""

from __future__ import annotations

import numbers

import jax.numpy as jnp
import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab._docstrings import fill_doc
from latentlab._settings import Callable, Dtype, InstanceOf, Integer, Options, RandomState, Real
from latentlab._shapes import pad_rows
from latentlab._validation import check_data, check_n_components, kept_float_dtype
from latentlab.closed_form import isomap as cf
from latentlab.closed_form import neighbors as nb
from latentlab.closed_form.eigensolvers import solve_with_fallback
from latentlab.estimators._dispatch import call, row_bucket, to_device
from latentlab.estimators._embedding import EmbeddingEstimator, pairwise_tags
from latentlab.estimators.base import jax_key, to_numpy

__all__ = ["Isomap", "neighbors_of", "check_n_neighbors"]

EIGEN_SOLVERS = ("auto", "dense", "arpack", "lanczos")
EUCLIDEAN = ("euclidean", "l2")
PATH_METHODS = ("auto", "FW", "D")


def check_n_neighbors(n_neighbors, n_samples: int) -> int:
    """``n_neighbors`` as an int in [1, n_samples - 1], or a ValueError saying why."""
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, numbers.Integral):
        raise ValueError(f"n_neighbors must be a positive integer, got {n_neighbors!r}")
    if not 1 <= n_neighbors < n_samples:
        raise ValueError(
            f"n_neighbors={n_neighbors} is out of range: it must satisfy 1 <= n_neighbors "
            f"< n_samples={n_samples} (a point is not its own neighbour)"
        )
    return int(n_neighbors)


def neighbors_of(Q, R, n_neighbors: int, exclude_self: bool = False):
    """(distances, indices) as NumPy arrays of the ``n_neighbors`` nearest rows of R
    for every row of Q (:func:`latentlab.closed_form.neighbors.kneighbors`); call
    inside the estimator's precision context."""
    result = nb.kneighbors(Q, R, n_neighbors, exclude_self=exclude_self)
    return result.distances, result.indices


def symmetrized(graph):
    """The undirected graph of a sparse ``graph`` (csr) as a symmetric csr matrix: an
    edge wherever ``graph`` has one either way, at the smaller of its weights (what
    SciPy's ``directed=False`` searches use); stored zeros (coincident points) stay
    edges."""
    from scipy.sparse import csr_matrix

    coo = graph.tocoo()
    rows = np.concatenate([coo.row, coo.col])
    cols = np.concatenate([coo.col, coo.row])
    weights = np.concatenate([coo.data, coo.data])
    order = np.lexsort((weights, cols, rows))  # by edge, lightest first
    order = order[rows[order] != cols[order]]  # a self-loop never shortens a path
    rows, cols, weights = rows[order], cols[order], weights[order]
    first = np.ones(rows.size, dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    n = graph.shape[0]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[first], minlength=n), out=indptr[1:])
    return csr_matrix((weights[first], cols[first], indptr), shape=graph.shape)


def independent_set(graph) -> np.ndarray:
    """A maximal independent set of a symmetric sparse graph (boolean mask), built
    greedily from the lowest-degree nodes (which block the fewest others)."""
    indptr, indices = graph.indptr, graph.indices
    degree = np.diff(indptr)
    chosen = np.zeros(graph.shape[0], dtype=bool)
    blocked = np.zeros(graph.shape[0], dtype=bool)
    for node in np.argsort(degree, kind="stable"):
        if not blocked[node]:
            chosen[node] = blocked[node] = True
            blocked[indices[indptr[node] : indptr[node + 1]]] = True
    return chosen


def geodesic_distances(graph, method: str = "auto") -> np.ndarray:
    """All shortest-path distances (n, n) of the undirected graph of a sparse
    ``graph``, as SciPy's ``shortest_path(graph, method, directed=False)``.

    Dijkstra (``"D"``, and ``"auto"`` for graphs with under n**2 / 4 edges, SciPy's
    rule) runs on the symmetrised graph (SciPy's undirected search relaxes every edge
    of the graph and of its transpose, so a k-NN graph's mutual neighbours twice) and
    only from the nodes outside an independent set I: every neighbour of a node i in I
    lies outside it, so its row follows exactly from theirs,
    ``D[i, j] = min_u (w_iu + D[u, j])``, and by symmetry only its entries in I's
    columns need that (a k-NN graph's I holds ~15% of the nodes).
    """
    from scipy.sparse.csgraph import dijkstra, shortest_path

    graph = symmetrized(graph)
    n = graph.shape[0]
    if method == "FW" or (method == "auto" and graph.nnz >= n * n / 4):
        return shortest_path(graph, method="FW", directed=True)
    inside = independent_set(graph)
    members, others = np.flatnonzero(inside), np.flatnonzero(~inside)
    D = np.empty((n, n))
    D[others] = dijkstra(graph, directed=True, indices=others)
    to_members = D[np.ix_(others, members)]  # (n - |I|, |I|)
    D[np.ix_(members, others)] = to_members.T
    row_of = np.zeros(n, dtype=np.int64)
    row_of[others] = np.arange(others.size)
    indptr, indices, weights = graph.indptr, graph.indices, graph.data
    within = np.full((members.size, members.size), np.inf)
    for a, i in enumerate(members):
        edges = slice(indptr[i], indptr[i + 1])
        if edges.stop > edges.start:
            neighbours = row_of[indices[edges]]
            within[a] = np.min(weights[edges, None] + to_members[neighbours], axis=0)
    np.fill_diagonal(within, 0.0)
    D[np.ix_(members, members)] = within
    return D


def radius_neighbors_of(Q, R, radius: float):
    """Neighbours within ``radius`` of every row of Q, padded to the largest count
    (padding: distance ``inf``, index 0); a ValueError names rows with none."""
    m = Q.shape[0]
    rows = row_bucket(m)
    D = np.asarray(
        call(nb.pairwise_distances, rows * R.shape[0], to_device(pad_rows(Q, rows)), to_device(R))
    )[:m]
    within = D <= radius
    counts = within.sum(axis=1)
    _refuse_lonely_rows(counts, radius)
    width = int(counts.max())
    order = np.argsort(np.where(within, D, np.inf), axis=1, kind="stable")[:, :width]
    distances = np.take_along_axis(np.where(within, D, np.inf), order, axis=1)
    indices = np.where(np.isfinite(distances), order, 0)
    return distances, indices


def _precomputed_graph(G, k, radius):
    """The edges of a precomputed sparse neighbour graph G: each row's stored
    off-diagonal entries, the ``k`` smallest of them (or those within ``radius``)."""
    from scipy.sparse import csr_matrix

    G = G.tocoo()
    keep = G.row != G.col
    rows, cols, weights = G.row[keep], G.col[keep], G.data[keep]
    if radius is not None:
        keep = weights <= radius
        rows, cols, weights = rows[keep], cols[keep], weights[keep]
    else:
        order = np.lexsort((weights, rows))
        rows, cols, weights = rows[order], cols[order], weights[order]
        starts = np.searchsorted(rows, rows, side="left")
        keep = np.arange(rows.size) - starts < k
        rows, cols, weights = rows[keep], cols[keep], weights[keep]
    return csr_matrix((weights, (rows, cols)), shape=G.shape)


def _padded(distances, indices, radius):
    """scikit-learn's ragged radius neighbours as (m, width) arrays padded with
    distance ``inf`` and index 0; a ValueError names rows with none."""
    counts = np.array([len(row) for row in indices])
    _refuse_lonely_rows(counts, radius)
    width = int(counts.max())
    D = np.full((len(counts), width), np.inf)
    idx = np.zeros((len(counts), width), dtype=np.int64)
    for row, (d, i) in enumerate(zip(distances, indices, strict=True)):
        D[row, : len(d)], idx[row, : len(i)] = d, i
    return D, idx


@fill_doc
class Isomap(EmbeddingEstimator):
    """Isomap embedding (Tenenbaum, de Silva & Langford 2000).

    Builds the k-nearest-neighbour (or epsilon-radius) graph of the data, computes the
    geodesic distances as shortest paths in it (SciPy), and embeds them by classical
    MDS (:func:`latentlab.closed_form.mds.classical_mds`): the top eigenpairs of the
    doubly centred ``-D**2 / 2``.  Matches
    scikit-learn's ``Isomap`` on the same neighbours (up to the signs of the axes).

    Parameters
    ----------
    n_neighbors : int or None, default=5
        Neighbours per point (the point itself not counted), ``1 <= n_neighbors <
        n_samples``.  Must be None when ``radius`` is given.
    radius : float or None, default=None
        Link every pair at distance at most ``radius`` instead (``inf``: every pair,
        i.e. classical MDS of the distances).
    n_components : int, default=2
    eigen_solver : {"auto", "dense", "arpack", "lanczos"}, default="auto"
        See :func:`latentlab.closed_form.eigensolvers.eigen_settings` ("auto": block
        Lanczos above 500 samples, dense eigh below; Lanczos falls back to dense when
        it does not converge).  ``"arpack"`` (scikit-learn's name for its iterative
        solver) runs the block Lanczos solver.
    path_method : {"auto", "FW", "D"}, default="auto"
        Shortest-path algorithm: SciPy's Floyd-Warshall, or Dijkstra from all but an
        independent set of nodes, whose rows follow from their neighbours' (see
        :func:`geodesic_distances`); "auto" takes Floyd-Warshall for graphs with at
        least n**2 / 4 edges, as SciPy does.
    neighbors_algorithm : {"auto", "brute", "kd_tree", "ball_tree"}, default="auto"
        scikit-learn's ``NearestNeighbors`` algorithm, for the neighbour searches that
        run on the host (``nbrs_``; see ``metric``).
    metric : str or callable, default="minkowski"
        Distance of the neighbour graph, as scikit-learn's ``NearestNeighbors``
        takes it (with ``p`` and ``metric_params``).  Euclidean distances of dense
        data (``"minkowski"`` with ``p=2``, ``"euclidean"``, ``"l2"``) are found by
        jit-compiled JAX; any other metric, and sparse X, by scikit-learn's
        ``NearestNeighbors`` on the host.  ``"precomputed"``: ``fit`` takes the (n, n)
        distance matrix, dense or a sparse neighbour graph (its stored entries are the
        edges), and ``transform`` the (m, n) distances of new points to the training
        points.
    p : float, default=2
        Power of the Minkowski metric (``metric="minkowski"``), >= 1.
    metric_params : dict or None, default=None
        Further keyword arguments of the metric.
    n_jobs : int or None, default=None
        Parallel jobs of the host neighbour searches.
    random_state : int, RandomState or None, default=None
        Seeds the Lanczos start block (the result does not depend on it beyond
        round-off).
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
        Training coordinates ``sqrt(eigenvalues_) * eigenvectors``.  float32 training
        data give float32 ``embedding_``, ``eigenvalues_``, ``dist_matrix_`` and
        ``kernel_column_means_`` (as scikit-learn), computed at ``dtype`` and rounded
        once; ``transform`` then returns float32 for float32 input.
    eigenvalues_ : ndarray (n_components,)
        Top eigenvalues of the centred geodesic kernel, decreasing.
    dist_matrix_ : ndarray (n_samples, n_samples)
        Geodesic distances.
    kernel_column_means_ : ndarray (n_samples,)
        Column means of ``-dist_matrix_**2 / 2`` (to centre new points' kernels).
    kernel_grand_mean_ : float
    X_fit_ : ndarray (n_samples, n_features) or sparse matrix
        A copy of the training data (new points' neighbours are found among them).
    nbrs_ : sklearn.neighbors.NearestNeighbors
        The neighbour search fitted to ``X_fit_`` with this estimator's
        ``n_neighbors``, ``radius``, ``metric``, ``p`` and ``metric_params`` (a
        property, built on access).
    {solver_attribute}
    n_features_in_ : int

    Notes
    -----
    A disconnected neighbour graph has infinite geodesic distances: ``fit`` warns,
    naming the components, and links every pair of components by its closest pair of
    points, as scikit-learn does.

    Examples
    --------
    >>> import latentlab
    >>> from sklearn.datasets import make_s_curve
    >>> X, _ = make_s_curve(100, random_state=0)
    >>> latentlab.Isomap(n_neighbors=10).fit(X).transform(X[:3]).shape
    (3, 2)
    """

    _settings = {
        "n_neighbors": Integer(1, None) | None,  # < n_samples: checked with the data
        "radius": Real(0, None, closed="neither") | None,
        "n_components": Integer(),  # its range depends on the data
        "eigen_solver": Options(*EIGEN_SOLVERS),
        "path_method": Options(*PATH_METHODS),
        "neighbors_algorithm": Options("auto", "brute", "kd_tree", "ball_tree"),
        "metric": InstanceOf(str, "a metric name") | Callable(),
        "p": Real(1, None),
        "metric_params": InstanceOf(dict, "a dict") | None,
        "n_jobs": Integer() | None,
        "random_state": RandomState(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_neighbors=5,
        *,
        radius=None,
        n_components=2,
        eigen_solver="auto",
        path_method="auto",
        neighbors_algorithm="auto",
        metric="minkowski",
        p=2,
        metric_params=None,
        n_jobs=None,
        random_state=None,
        dtype="float64",
    ):
        self.n_neighbors = n_neighbors
        self.radius = radius
        self.n_components = n_components
        self.eigen_solver = eigen_solver
        self.path_method = path_method
        self.neighbors_algorithm = neighbors_algorithm
        self.metric = metric
        self.p = p
        self.metric_params = metric_params
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.dtype = dtype

    def _check_graph_settings(self, n):
        if self.radius is not None:
            if self.n_neighbors is not None:
                raise ValueError(
                    "Both n_neighbors and radius are provided; set n_neighbors=None to use "
                    "a radius graph"
                )
            return None
        if self.n_neighbors is None:
            raise ValueError("One of n_neighbors and radius must be given")
        return check_n_neighbors(self.n_neighbors, n)

    def __sklearn_tags__(self):
        tags = pairwise_tags(super().__sklearn_tags__(), self.metric, accepts_sparse=True)
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def _on_device(self, X) -> bool:
        """Whether the neighbour graph is built by JAX (Euclidean distances of dense
        data) rather than by scikit-learn's ``NearestNeighbors`` on the host."""
        euclidean = self.metric in EUCLIDEAN or (
            self.metric == "minkowski" and self.p == 2 and not self.metric_params
        )
        return euclidean and not hasattr(X, "nnz")

    def _neighbor_search(self, X):
        from sklearn.neighbors import NearestNeighbors

        return NearestNeighbors(
            n_neighbors=5 if self.n_neighbors is None else self.n_neighbors,
            radius=1.0 if self.radius is None else self.radius,
            algorithm=self.neighbors_algorithm,
            metric=self.metric,
            p=self.p,
            metric_params=self.metric_params,
            n_jobs=self.n_jobs,
        ).fit(X)

    def _fit(self, X):
        float32 = kept_float_dtype(X) == np.float32
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2, accept_sparse="csr")
        n = X.shape[0]
        precomputed = self.metric == "precomputed"
        if precomputed and X.shape[1] != n:
            raise ValueError(
                f"metric='precomputed' needs a square (n_samples, n_samples) distance matrix "
                f"or sparse neighbour graph; X has shape {X.shape}"
            )
        k = self._check_graph_settings(n)
        K = check_n_components(self.n_components, 1, n, "n_samples")
        dtype = np.float32 if self.dtype == "float32" else np.float64
        on_device = self._on_device(X)
        nbrs = None if on_device else self._neighbor_search(X)
        with self._precision():
            if on_device:
                Xj = to_device(X)
                if k is not None:
                    distances, indices = neighbors_of(X, X, k, exclude_self=True)
                    graph = nb.knn_graph(distances, indices)
                else:
                    graph = nb.radius_graph(
                        np.asarray(call(nb.pairwise_distances, n * n, Xj, Xj)), self.radius
                    )
            elif precomputed and hasattr(X, "nnz"):
                graph = _precomputed_graph(X, k, self.radius)
            elif k is not None:
                graph = nbrs.kneighbors_graph(mode="distance").tocsr()
            else:
                graph = nbrs.radius_neighbors_graph(mode="distance").tocsr()
            n_parts, labels = nb.graph_components(graph)
            if n_parts > 1 and precomputed and hasattr(X, "nnz"):
                raise ValueError(
                    f"The precomputed neighbour graph is not connected (number of connected "
                    f"components: {n_parts}; {nb.describe_components(labels)}), and a sparse "
                    "graph does not hold the distances that would link its components; pass "
                    "more neighbours or the dense distance matrix"
                )
            nb.check_connected(
                graph,
                "neighbour graph",
                f"(number of connected components: {n_parts}) Geodesic distances between "
                "components would be infinite, so each pair of components is linked by its "
                "closest pair of points (as scikit-learn does); increase n_neighbors (or "
                "radius) to avoid this.",
                error=False,
            )
            if n_parts > 1:
                if on_device:
                    D_full = np.array(call(nb.pairwise_distances, n * n, Xj, Xj))
                elif precomputed:
                    D_full = np.asarray(X)
                else:
                    from sklearn.metrics import pairwise_distances

                    D_full = pairwise_distances(
                        X, metric=self.metric, n_jobs=self.n_jobs, **self._metric_kwargs()
                    )
                graph = nb.link_components(graph, D_full, labels)
            D = geodesic_distances(graph, self.path_method)
            D_device, key = to_device(D), jax_key(self.random_state)

            def solve(solver, **settings):
                # solve_with_fallback runs Lanczos with one BLAS thread
                return call(
                    cf.geodesic_mds, n * n, D_device, key, n_components=K, solver=solver, **settings
                )

            result, solver = solve_with_fallback(solve, n, K, self.eigen_solver, dtype)
            eigenvalues = to_numpy(result.eigenvalues)
            embedding = to_numpy(result.embedding)
        # eigenvalues at round-off level would blow up new points' coordinates
        floor = max(float(eigenvalues.max()), 0.0) * n * float(np.finfo(dtype).eps)
        if not np.all(eigenvalues > floor):
            raise ValueError(
                f"n_components={K} exceeds the number of positive eigenvalues of the "
                f"centred geodesic kernel ({int(np.sum(eigenvalues > floor))}): the data have "
                "fewer dimensions than that; ask for fewer components"
            )
        self.eigenvalues_ = eigenvalues
        self.embedding_ = embedding
        self.dist_matrix_ = np.require(D, np.float64, ["C", "O", "W"])  # SciPy's is a view
        self.kernel_column_means_ = to_numpy(result.column_means)
        self.kernel_grand_mean_ = float(result.grand_mean)
        self.X_fit_ = X.copy()
        self.solver_ = solver
        if float32:  # as scikit-learn: float32 data, float32 fitted arrays
            for name in ("eigenvalues_", "embedding_", "dist_matrix_", "kernel_column_means_"):
                setattr(self, name, getattr(self, name).astype(np.float32))
        return X

    @property
    def nbrs_(self):
        """scikit-learn's ``NearestNeighbors`` with this estimator's neighbour settings,
        fitted to ``X_fit_`` (built on access, not stored: saved models hold arrays
        only)."""
        check_is_fitted(self)
        return self._neighbor_search(self.X_fit_)

    def _metric_kwargs(self) -> dict:
        kwargs = dict(self.metric_params or {})
        if self.metric == "minkowski":
            kwargs.setdefault("p", self.p)
        return kwargs

    def reconstruction_error(self) -> float:
        """``sqrt(||H G H||_F^2 - sum(eigenvalues_**2)) / n_samples`` with ``G =
        -dist_matrix_**2 / 2``: how much of the centred geodesic kernel the embedding
        leaves out (scikit-learn's definition)."""
        check_is_fitted(self)
        # in float64 whatever the fit's dtype: the difference cancels
        G = -0.5 * self.dist_matrix_.astype(np.float64) ** 2
        means = G.mean(axis=0)
        centred = G - means[None, :] - means[:, None] + means.mean()
        residual = np.sum(centred**2) - np.sum(self.eigenvalues_.astype(np.float64) ** 2)
        return float(np.sqrt(max(residual, 0.0)) / G.shape[0])

    def transform(self, X):
        """Coordinates of new points: their geodesic distances to the training points
        through their graph neighbours (k nearest training points, or those within
        ``radius``), embedded by the MDS extension.  A training point is mapped to its
        own ``embedding_`` row.  float32 when both the training data and X are (as
        scikit-learn), else float64."""
        check_is_fitted(self)
        float32 = kept_float_dtype(X) == np.float32 and self.embedding_.dtype == np.float32
        X = check_data(self, X, reset=False, allow_nan=False, accept_sparse="csr")
        m = X.shape[0]
        if self.metric == "precomputed" and X.shape[1] != self.dist_matrix_.shape[0]:
            raise ValueError(
                "metric='precomputed': transform needs the (n_samples, n_training_samples) "
                f"distances to the {self.dist_matrix_.shape[0]} training points; X has shape "
                f"{X.shape}"
            )
        with self._precision():
            if self._on_device(X) and not hasattr(self.X_fit_, "nnz"):
                if self.radius is not None:
                    distances, indices = radius_neighbors_of(X, self.X_fit_, self.radius)
                else:
                    distances, indices = neighbors_of(X, self.X_fit_, self.n_neighbors)
            elif self.radius is not None:
                distances, indices = _padded(*self.nbrs_.radius_neighbors(X), self.radius)
            else:
                distances, indices = self.nbrs_.kneighbors(X, self.n_neighbors)
            rows = row_bucket(m)
            n = self.dist_matrix_.shape[0]
            # a float32 fit's arrays are read at this estimator's precision
            dtype = np.float32 if self.dtype == "float32" else np.float64
            eigenvalues, embedding = (
                np.asarray(a, dtype) for a in (self.eigenvalues_, self.embedding_)
            )
            Z = call(
                cf.isomap_transform,
                rows * n * distances.shape[1],
                jnp.asarray(pad_rows(distances, rows)),
                jnp.asarray(pad_rows(indices, rows)),
                to_device(np.asarray(self.dist_matrix_, dtype)),
                jnp.asarray(eigenvalues),
                jnp.asarray(embedding / np.sqrt(eigenvalues)),
                jnp.asarray(np.asarray(self.kernel_column_means_, dtype)),
                jnp.asarray(self.kernel_grand_mean_),
            )
            Z = to_numpy(Z[:m])
        return Z.astype(np.float32) if float32 else Z


def _refuse_lonely_rows(counts, radius):
    """A ValueError naming the rows with no training point within ``radius``."""
    lonely = np.flatnonzero(counts == 0)
    if lonely.size:
        raise ValueError(
            f"{lonely.size} sample(s) have no training point within radius={radius}: rows "
            f"{lonely[:10].tolist()}; use a larger radius or n_neighbors"
        )
