"""``latentlab.AgglomerativeClustering``: bottom-up hierarchical clustering
(:mod:`latentlab.closed_form.agglomerative`)."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClusterMixin

from latentlab._settings import Callable, Integer, Options, Real
from latentlab._validation import check_data
from latentlab.closed_form import agglomerative as cf
from latentlab.estimators.base import LatentEstimator

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
    Euclidean distances (or, but for Ward, another ``metric``).

    The whole tree is built by the nearest-neighbour chain with Lance-Williams
    updates (O(n^2) time and memory), then cut into ``n_clusters`` clusters, or where
    merges reach ``distance_threshold``.  The tree and its merge heights equal
    ``scipy.cluster.hierarchy.linkage(X, method=linkage)`` (and so scikit-learn's
    ``children_`` and ``distances_``); the labels are scikit-learn's up to a
    renumbering (here clusters are numbered in order of their first sample).
    ``distances_`` is always set: the chain computes every merge height anyway.
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
    distance_threshold : float or None, default=None
        Merges at heights at least this are not made; needs ``n_clusters=None``.

    Attributes
    ----------
    labels_ : ndarray (n_samples,) of int
    n_clusters_ : int
    n_leaves_ : int
    n_connected_components_ : int
        Always 1 (no connectivity constraint).
    children_ : ndarray (n_samples - 1, 2) of int
        The clusters merged at step i; ids below ``n_samples`` are samples, id
        ``n_samples + i`` is the cluster formed at step i.
    distances_ : ndarray (n_samples - 1,)
        Merge heights, non-decreasing.
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
    }

    def __init__(
        self, n_clusters=2, *, metric="euclidean", linkage="ward", distance_threshold=None
    ):
        self.n_clusters = n_clusters
        self.metric = metric
        self.linkage = linkage
        self.distance_threshold = distance_threshold

    def _distances(self, X):
        """None (X's Euclidean distances), or the (n, n) dissimilarities of ``metric``."""
        metric = self.metric
        if isinstance(metric, str) and metric in ("euclidean", "l2"):
            return None
        if self.linkage == "ward":
            raise ValueError(
                f"linkage='ward' merges on Euclidean distances only; got metric={metric!r} "
                "(use linkage 'complete', 'average' or 'single')"
            )
        if isinstance(metric, str) and metric == "precomputed":
            if X.shape[0] != X.shape[1]:
                raise ValueError(
                    f"metric='precomputed' needs a square (n_samples, n_samples) distance "
                    f"matrix, got X of shape {X.shape}"
                )
            if np.any(X < 0) or not np.allclose(X, X.T) or np.any(np.diag(X) != 0):
                raise ValueError(
                    "metric='precomputed': X must be symmetric and non-negative with a zero "
                    "diagonal (a distance matrix)"
                )
            return X
        from sklearn.metrics import pairwise_distances

        D = pairwise_distances(X, metric=metric)
        np.fill_diagonal(D, 0.0)
        return 0.5 * (D + D.T)

    def _check_settings(self, n_samples):
        k, threshold = self.n_clusters, self.distance_threshold
        if (k is None) == (threshold is None):
            raise ValueError(
                "give exactly one of n_clusters and distance_threshold (set the other "
                f"to None), got n_clusters={k!r}, distance_threshold={threshold!r}"
            )
        if threshold is not None:
            return None, float(threshold)
        if k > n_samples:
            raise ValueError(f"n_clusters={k} exceeds n_samples={n_samples}")
        return int(k), None

    def fit(self, X, y=None):
        """Build the tree of X (n_samples, n_features) and cut it; returns self."""
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n = X.shape[0]
        k, threshold = self._check_settings(n)
        D = self._distances(X)
        with self._precision():  # single linkage compiles: float64, the compile cache
            Z = cf.linkage_matrix(X, self.linkage, D)
        self.children_ = Z[:, :2].astype(np.int64)
        self.distances_ = Z[:, 2].copy()
        if threshold is not None:
            k = int(np.count_nonzero(self.distances_ >= threshold)) + 1
        self.n_clusters_ = k
        self.n_leaves_ = n
        self.n_connected_components_ = 1
        self.labels_ = cf.cut_tree(self.children_, n, k)
        return self

    def fit_predict(self, X, y=None):
        """Fit and return ``labels_``."""
        return self.fit(X).labels_.copy()
