"""``latentlab.AgglomerativeClustering``: bottom-up hierarchical clustering
(:mod:`latentlab.closed_form.agglomerative`)."""

from __future__ import annotations

import os
import warnings

import numpy as np
from joblib import Memory
from scipy import sparse
from sklearn.base import ClusterMixin

from latentlab._settings import ArrayLike, Boolean, Callable, InstanceOf, Integer, Options, Real
from latentlab._validation import check_data
from latentlab.closed_form import agglomerative as cf
from latentlab.estimators.base import LATENTLAB_FILES, LatentEstimator

__all__ = ["AgglomerativeClustering"]

# metric names (scikit-learn's pairwise_distances computes all but "precomputed")
METRICS = (
    "euclidean",
    "l2",
    "l1",
    "manhattan",
    "cityblock",
    "cosine",
    "chebyshev",
    "minkowski",
    "sqeuclidean",
    "canberra",
    "braycurtis",
    "correlation",
    "precomputed",
)


class AgglomerativeClustering(ClusterMixin, LatentEstimator):
    """Agglomerative clustering with single, complete, average or Ward linkage on
    Euclidean distances (or, but for Ward, another ``metric``), optionally restricted
    to merges along the edges of a ``connectivity`` graph.

    Without ``connectivity`` the whole tree is built by the nearest-neighbour chain
    with Lance-Williams updates (O(n^2) time and memory), then cut into ``n_clusters``
    clusters, or where merges reach ``distance_threshold``.  The tree and its merge
    heights equal ``scipy.cluster.hierarchy.linkage(X, method=linkage)`` (and so
    scikit-learn's ``children_`` and ``distances_``); the labels are scikit-learn's up
    to a renumbering (here clusters are numbered in order of their first sample).
    With ``connectivity`` only clusters joined by an edge may merge, the closest
    adjacent pair first (:func:`latentlab.closed_form.agglomerative.graph_linkage`,
    a heap over the edges: O(E log E) for E edges, no n x n matrix); scikit-learn's
    tree, merge order and heights.
    As in scikit-learn, ``distances_`` is stored only when asked for
    (``compute_distances=True``) or when ``distance_threshold`` cuts the tree.
    Like scikit-learn's, it has no out-of-sample ``predict``; see
    :func:`latentlab.plots.dendrogram` to draw the tree.

    Parameters
    ----------
    n_clusters : int or None, default=2
        None when ``distance_threshold`` is given.
    linkage : {"ward", "complete", "average", "single"}, default="ward"
        Ward merges the pair that least increases the within-cluster sum of squares;
        its heights are ``sqrt(2 na nb / (na + nb)) |mean_a - mean_b|`` (SciPy's).
    metric : str or callable, default="euclidean"
        The dissimilarity that "complete", "average" and "single" linkages merge on:
        "euclidean" (or "l2"), "manhattan" (or "l1", "cityblock"), "cosine",
        "chebyshev", "minkowski", "sqeuclidean", "canberra", "braycurtis",
        "correlation" (by :func:`sklearn.metrics.pairwise_distances`), a callable on
        two rows, or
        "precomputed" (then X is the (n_samples, n_samples) dissimilarity matrix:
        symmetric, non-negative, zero diagonal).  Ward needs "euclidean".
    memory : str, os.PathLike, joblib.Memory or None, default=None
        Where to cache the tree (a directory, or a ``joblib.Memory``); None: no cache.
    connectivity : array-like, sparse matrix, callable or None, default=None
        The (n_samples, n_samples) graph that merges must follow (for instance
        ``sklearn.neighbors.kneighbors_graph(X, 10)``), or a callable that returns it
        from X.  Any nonzero entry, in either direction, is an edge; the diagonal is
        ignored.  A graph of several connected components is completed with a
        ``UserWarning``: each pair of components gets one edge, between its two
        closest samples (by ``metric``), so that the tree can still be finished.
        With "complete" and "average" linkage the linkage of two clusters is read
        along edges only (see :func:`~latentlab.closed_form.agglomerative.
        graph_linkage`), as scikit-learn's is; with a complete graph it is the
        unconstrained linkage.
    compute_full_tree : "auto" or bool, default="auto"
        With ``connectivity``, False stops merging at ``n_clusters`` clusters
        (``children_`` then has ``n_samples - n_clusters`` rows); "auto" stops early
        when ``n_clusters >= max(100, 0.02 * n_samples)`` and ``distance_threshold``
        is None.  Must not be False with ``distance_threshold``.  Without
        ``connectivity`` the full tree is always built.
    linkage : {"ward", "complete", "average", "single"}, default="ward"
        (see above)
    distance_threshold : float or None, default=None
        Merges at heights at least this are not made; needs ``n_clusters=None``.
        (With ``connectivity`` heights may decrease along the tree; as in
        scikit-learn the number of clusters is then one more than the number of
        merges at or above the threshold, and the tree is cut after that many fewer
        merges.)
    compute_distances : bool, default=False
        Store the merge heights in ``distances_`` (they are always set with
        ``distance_threshold``).  The tree builders compute them anyway, so this
        costs no time; it is off by default as in scikit-learn.

    Attributes
    ----------
    labels_ : ndarray (n_samples,) of int
    n_clusters_ : int
    n_leaves_ : int
    n_connected_components_ : int
        Connected components of ``connectivity`` before it was completed (1 without).
    children_ : ndarray (n_merges, 2) of int
        The clusters merged at step i, the smaller id first; ids below
        ``n_samples`` are samples, id ``n_samples + i`` is the cluster formed at step
        i.  ``n_merges`` is ``n_samples - 1``, or ``n_samples - n_clusters`` when the
        tree is stopped early (``compute_full_tree``).
    distances_ : ndarray (n_merges,)
        Merge heights (non-decreasing without ``connectivity``); only with
        ``compute_distances=True`` or ``distance_threshold``.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 5.0], [5.0, 6.5]])
    >>> latentlab.AgglomerativeClustering(2).fit(X).labels_
    array([0, 0, 1, 1])
    """

    _settings = {
        "n_clusters": Integer(1, None) | None,  # at most n_samples: checked with the data
        "linkage": Options(*cf.LINKAGES),
        "metric": Options(*METRICS) | Callable(),
        "distance_threshold": Real(0, None, finite=True) | None,
        "memory": InstanceOf((str, os.PathLike), "a cache directory")
        | InstanceOf(Memory, "a joblib.Memory")
        | None,
        "connectivity": ArrayLike()
        | InstanceOf((sparse.spmatrix, sparse.sparray), "a sparse matrix")
        | Callable()
        | None,
        "compute_full_tree": Options("auto") | Boolean(),
        "compute_distances": Boolean(),
    }

    def __init__(
        self,
        n_clusters=2,
        *,
        metric="euclidean",
        memory=None,
        connectivity=None,
        compute_full_tree="auto",
        linkage="ward",
        distance_threshold=None,
        compute_distances=False,
    ):
        self.n_clusters = n_clusters
        self.metric = metric
        self.memory = memory
        self.connectivity = connectivity
        self.compute_full_tree = compute_full_tree
        self.linkage = linkage
        self.distance_threshold = distance_threshold
        self.compute_distances = compute_distances

    def _is_euclidean(self):
        return isinstance(self.metric, str) and self.metric in ("euclidean", "l2")

    def _is_precomputed(self):
        return isinstance(self.metric, str) and self.metric == "precomputed"

    def _check_metric(self, X):
        """Refuse ward with another metric, and a precomputed X that is no distance
        matrix."""
        metric = self.metric
        if self._is_euclidean():
            return
        if self.linkage == "ward":
            raise ValueError(
                f"linkage='ward' merges on Euclidean distances only; got metric={metric!r} "
                "(use linkage 'complete', 'average' or 'single')"
            )
        if isinstance(metric, str) and metric == "precomputed":
            if X.shape[0] != X.shape[1]:
                raise ValueError(
                    f"Distance matrix should be square, got matrix of shape {X.shape}: "
                    "metric='precomputed' needs an (n_samples, n_samples) distance matrix"
                )
            if np.any(X < 0) or not np.allclose(X, X.T) or np.any(np.diag(X) != 0):
                raise ValueError(
                    "metric='precomputed': X must be symmetric and non-negative with a zero "
                    "diagonal (a distance matrix)"
                )

    def _distances(self, X):
        """None (X's Euclidean distances), or the (n, n) dissimilarities of ``metric``."""
        if self._is_euclidean():
            return None
        if self._is_precomputed():
            return X
        from sklearn.metrics import pairwise_distances

        D = pairwise_distances(X, metric=self.metric)
        np.fill_diagonal(D, 0.0)
        return 0.5 * (D + D.T)

    def _check_settings(self, n_samples):
        k, threshold = self.n_clusters, self.distance_threshold
        if (k is None) == (threshold is None):
            raise ValueError(
                "Exactly one of n_clusters and distance_threshold has to be set (the "
                f"other None), got n_clusters={k!r}, distance_threshold={threshold!r}"
            )
        if threshold is not None:
            if isinstance(self.compute_full_tree, (bool, np.bool_)) and not self.compute_full_tree:
                raise ValueError(
                    "compute_full_tree must be True if distance_threshold is set (or "
                    "'auto'): compute_full_tree=False stops the tree at n_clusters, but "
                    "distance_threshold needs the full tree"
                )
            return None, float(threshold)
        if k > n_samples:
            raise ValueError(f"n_clusters={k} exceeds n_samples={n_samples}")
        return int(k), None

    def fit(self, X, y=None):
        """Build the tree of X (n_samples, n_features) and cut it; returns self."""
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n = X.shape[0]
        k, threshold = self._check_settings(n)
        self._check_metric(X)
        from sklearn.utils.validation import check_memory

        build = check_memory(self.memory).cache(_build_tree)
        if self.connectivity is None:
            D = self._distances(X)
            with self._precision():  # single linkage compiles: float64, the compile cache
                children, heights = build(X, self.linkage, D)
            n_components = 1
        else:
            metric = "euclidean" if self.linkage == "ward" else self.metric
            graph, n_components = _complete_graph(X, self._connectivity_graph(X), metric)
            full = self.compute_full_tree
            if full == "auto":
                full = threshold is not None or k < max(100, 0.02 * n)
            n_merges = None if full else n - k
            children, heights = build(X, self.linkage, None, graph, self.metric, n_merges)
        self.children_ = children
        if self.compute_distances or threshold is not None:
            self.distances_ = heights
        else:
            self.__dict__.pop("distances_", None)  # a refit must not keep an old tree's
        if threshold is not None:
            k = int(np.count_nonzero(heights >= threshold)) + 1
        self.n_clusters_ = k
        self.n_leaves_ = n
        self.n_connected_components_ = n_components
        self.labels_ = cf.cut_tree(self.children_, n, k)
        return self

    def _connectivity_graph(self, X):
        """``connectivity`` (called on X if a callable) as a symmetric CSR pattern of
        the validated shape, without its diagonal."""
        graph = self.connectivity(X) if callable(self.connectivity) else self.connectivity
        n = X.shape[0]
        if sparse.issparse(graph):
            graph = sparse.csr_array(graph)
            values = graph.data
        else:
            try:
                graph = np.asarray(graph, dtype=np.float64)
            except (TypeError, ValueError) as error:
                raise ValueError(
                    f"connectivity must be a numeric (n_samples, n_samples) matrix: {error}"
                ) from error
            values = graph
        if graph.ndim != 2 or graph.shape != (n, n):
            raise ValueError(
                f"connectivity must be a (n_samples, n_samples) = ({n}, {n}) matrix for X "
                f"of shape {X.shape}, got shape {graph.shape}"
            )
        if not np.all(np.isfinite(values)):
            raise ValueError("connectivity has NaN or infinite entries")
        entries = sparse.coo_array(graph)
        keep = (entries.data != 0) & (entries.row != entries.col)
        rows, cols = entries.row[keep], entries.col[keep]
        return _edge_pattern(np.r_[rows, cols], np.r_[cols, rows], n)

    def fit_predict(self, X, y=None):
        """Fit and return ``labels_``."""
        return self.fit(X).labels_.copy()


def _edge_pattern(rows, cols, n):
    """The (n, n) CSR matrix with a 1 at each (rows[e], cols[e]), repeats merged."""
    edges = sparse.csr_array((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(n, n))
    edges.data[:] = 1
    return edges.astype(np.int8)


def _edge_distances(X, metric, rows, cols):
    """The dissimilarity of each edge (rows[e], cols[e]) under ``metric``."""
    if isinstance(metric, str) and metric in ("euclidean", "l2"):
        gaps = X[rows] - X[cols]
        return np.sqrt(np.einsum("ij,ij->i", gaps, gaps))
    if isinstance(metric, str) and metric == "precomputed":
        return X[rows, cols].astype(np.float64)
    from sklearn.metrics import pairwise_distances

    # one row against its neighbours at a time: never the (n, n) matrix
    out = np.empty(len(rows))
    order = np.argsort(rows, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(rows[order]) != 0])
    for lo, hi in zip(starts, np.r_[starts[1:], len(order)], strict=True):
        picked = order[lo:hi]
        r = rows[picked[0]]
        out[picked] = pairwise_distances(X[r : r + 1], X[cols[picked]], metric=metric)[0]
    return out


def _complete_graph(X, edges, metric):
    """Join the connected components of ``edges`` (CSR): each pair of components gets
    an edge between its two closest samples.  Returns (graph, components before)."""
    from scipy.sparse.csgraph import connected_components

    n_components, component = connected_components(edges, directed=False)
    if n_components == 1:
        return edges, 1
    warnings.warn(
        f"The connectivity graph has {n_components} connected components. Completing it "
        "to avoid stopping the tree early: each pair of components is joined by an edge "
        "between its two closest samples.",
        UserWarning,
        skip_file_prefixes=LATENTLAB_FILES,
    )
    members = [np.flatnonzero(component == c) for c in range(n_components)]
    new_rows, new_cols = [], []
    for i in range(n_components):
        for j in range(i):
            if isinstance(metric, str) and metric == "precomputed":
                D = X[np.ix_(members[i], members[j])]
            elif isinstance(metric, str) and metric in ("euclidean", "l2"):
                from scipy.spatial.distance import cdist

                D = cdist(X[members[i]], X[members[j]])
            else:
                from sklearn.metrics import pairwise_distances

                D = pairwise_distances(X[members[i]], X[members[j]], metric=metric)
            a, b = np.unravel_index(np.argmin(D), D.shape)
            new_rows += [members[i][a], members[j][b]]
            new_cols += [members[j][b], members[i][a]]
    joined = sparse.coo_array(edges)
    rows = np.r_[joined.row, new_rows]
    cols = np.r_[joined.col, new_cols]
    return _edge_pattern(rows, cols, edges.shape[0]), n_components


def _build_tree(X, linkage, distances=None, graph=None, metric="euclidean", n_merges=None):
    """(children, heights): the unconstrained tree of X (or of its ``distances``), or
    the tree through ``graph`` (connected, symmetric, CSR)."""
    if graph is None:
        Z = cf.linkage_matrix(X, linkage, distances)
        return Z[:, :2].astype(np.int64), Z[:, 2].copy()
    lower = sparse.tril(graph, k=-1).tocoo()
    rows, cols = lower.row.astype(np.int64), lower.col.astype(np.int64)
    weights = None if linkage == "ward" else _edge_distances(X, metric, rows, cols)
    return cf.graph_linkage(X, linkage, rows, cols, weights, n_merges)
