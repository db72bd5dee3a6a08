"""Agglomerative clustering: the nearest-neighbour chain over Lance-Williams updates.

Host NumPy (SciPy's ``pdist`` for the distances), not JAX: the chain is a strictly
sequential walk of ~3n short steps, each an O(n) row operation on the dense distance
matrix.  Complete, average and Ward linkage are *reducible* (merging two clusters
never brings the merged one closer to a third than both parts were), so the chain
finds the same merges as the greedy closest-pair algorithm in O(n^2) time and memory
(Murtagh 1983; Müllner 2011, arXiv:1109.2378); single linkage takes the cheaper route
through Prim's minimum spanning tree.  The merge list is then sorted by height and
numbered as ``scipy.cluster.hierarchy.linkage`` numbers it: leaves 0..n-1, the i-th
merge n+i.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LINKAGES", "pairwise_distances", "linkage_matrix", "cut_tree"]

LINKAGES = ("ward", "complete", "average", "single")


def pairwise_distances(X: np.ndarray) -> np.ndarray:
    """Euclidean distances (n, n), zero on the diagonal.

    From coordinate differences, not the Gram-matrix shortcut: its round-off breaks
    exact ties (duplicated rows, data on a grid), and which of two tied pairs merges
    first changes later complete/average heights.
    """
    from scipy.spatial.distance import pdist, squareform

    return squareform(pdist(X))


def _lance_williams(method, D, a, b, size):
    """The distances of every cluster to a merged with b (Lance & Williams 1967);
    ``D`` holds squared distances for ward."""
    if method == "single":
        return np.minimum(D[a], D[b])
    if method == "complete":
        return np.maximum(D[a], D[b])
    na, nb = size[a], size[b]
    if method == "average":
        return (na * D[a] + nb * D[b]) / (na + nb)
    # ward on squared Euclidean distances: d(k, ab)^2 =
    # ((na + nk) d(k,a)^2 + (nb + nk) d(k,b)^2 - nk d(a,b)^2) / (na + nb + nk)
    return ((na + size) * D[a] + (nb + size) * D[b] - size * D[a, b]) / (na + nb + size)


def linkage_matrix(X: np.ndarray, method: str) -> np.ndarray:
    """The hierarchy of the rows of X as SciPy's linkage matrix (n-1, 4): the two
    merged cluster ids (smaller first), the merge height and the merged size.

    Heights are Euclidean distances; for ward, the Ward distance
    ``sqrt(2 na nb / (na + nb)) * |mean_a - mean_b|`` as SciPy reports it.
    """
    if method not in LINKAGES:
        raise ValueError(f"Unknown linkage={method!r}; expected one of {LINKAGES}")
    n = X.shape[0]
    D = pairwise_distances(X)
    if method == "single":
        return _number_merges(_prim_merges(D), n)
    if method == "ward":
        D *= D
    np.fill_diagonal(D, np.inf)
    size = np.ones(n)
    active = np.ones(n, dtype=bool)
    merges = np.empty((n - 1, 3))
    chain: list[int] = []
    for m in range(n - 1):
        if not chain:
            chain.append(int(np.flatnonzero(active)[0]))
        while True:
            a = chain[-1]
            row = D[a]
            b = int(np.argmin(row))
            # ties: prefer the previous chain element, so the chain cannot cycle
            if len(chain) > 1 and row[chain[-2]] <= row[b]:
                b = chain[-2]
            if len(chain) > 1 and b == chain[-2]:
                break
            chain.append(b)
        chain.pop()
        chain.pop()
        # the merged cluster lives on in the larger index, the smaller is retired: SciPy's
        # (and fastcluster's) convention, which with tied distances decides later merges
        a, b = max(a, b), min(a, b)
        height = D[a, b]
        merges[m] = (b, a, height)
        new = _lance_williams(method, D, a, b, size)
        size[a] += size[b]
        active[b] = False
        # retired clusters already have inf columns, and every update keeps inf at inf;
        # the retired row b is never read again
        new[a] = np.inf
        D[a] = new
        D[:, a] = new
        D[:, b] = np.inf
    if method == "ward":
        merges[:, 2] = np.sqrt(merges[:, 2])
    return _number_merges(merges, n)


def _prim_merges(D: np.ndarray) -> np.ndarray:
    """Single linkage from Prim's minimum spanning tree, O(n^2) with one O(n) vector
    step per point: in Prim's order v0, v1, ... with edge heights h1, h2, ..., the
    single-linkage distance of v_i and v_j (i < j) is max(h_{i+1}, ..., h_j), so
    merging each v_k with its predecessor v_{k-1} at h_k gives the dendrogram
    (Müllner 2011, "MST-linkage"; SciPy's order and tie-breaking)."""
    n = D.shape[0]
    merges = np.empty((n - 1, 3))
    closest = np.full(n, np.inf)
    in_tree = np.zeros(n, dtype=bool)
    last = 0
    for k in range(n - 1):
        in_tree[last] = True
        np.minimum(closest, D[last], out=closest)
        closest[in_tree] = np.inf
        new = int(np.argmin(closest))
        merges[k] = (last, new, closest[new])
        last = new
    return merges


def _number_merges(merges: np.ndarray, n: int) -> np.ndarray:
    """Sort merges by height (stable) and rename the surviving row indices by the ids
    of the clusters they hold, as SciPy's ``linkage`` does."""
    merges = merges[np.argsort(merges[:, 2], kind="mergesort")]
    parent = np.arange(2 * n - 1)
    size = np.ones(2 * n - 1)
    Z = np.empty((n - 1, 4))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for m, (a, b, height) in enumerate(merges):
        ra, rb = root(int(a)), root(int(b))
        new = n + m
        parent[ra] = parent[rb] = new
        size[new] = size[ra] + size[rb]
        Z[m] = (min(ra, rb), max(ra, rb), height, size[new])
    return Z


def cut_tree(children: np.ndarray, n_leaves: int, n_clusters: int) -> np.ndarray:
    """Labels (n_leaves,) of the clusters left after the first ``n - n_clusters``
    merges, numbered 0..n_clusters-1 in order of their first leaf."""
    parent = np.arange(2 * n_leaves - 1)
    for m in range(n_leaves - n_clusters):
        parent[children[m]] = n_leaves + m
    # children come before their parents, so one reverse sweep resolves every root
    for i in range(n_leaves + (n_leaves - n_clusters) - 1, -1, -1):
        parent[i] = parent[parent[i]]
    roots = parent[:n_leaves]
    _, labels = np.unique(roots, return_inverse=True)
    order = np.argsort(np.unique(labels, return_index=True)[1])
    return np.argsort(order)[labels].astype(np.int64)
