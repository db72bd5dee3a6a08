"""Agglomerative clustering: the nearest-neighbour chain over Lance-Williams updates,
and Prim's minimum spanning tree for single linkage.

Complete, average and Ward linkage run in host NumPy (SciPy's ``pdist`` for the
distances), not JAX: the chain is a strictly sequential walk of ~3n short steps, each an
O(n) row operation on the dense distance matrix.  These linkages are *reducible*
(merging two clusters never brings the merged one closer to a third than both parts
were), so the chain finds the same merges as the greedy closest-pair algorithm in
O(n^2) time and memory (Murtagh 1983; Müllner 2011, arXiv:1109.2378).  Single linkage
takes the cheaper route through Prim's tree, one compiled loop over O(n) vectors
(:func:`_single_linkage`), without the n x n matrix.  The merge list is then sorted by
height and numbered as ``scipy.cluster.hierarchy.linkage`` numbers it: leaves
0..n-1, the i-th merge n+i.

Under a connectivity graph (:func:`graph_linkage`) only clusters joined by an edge may
merge, and the chain no longer applies (a constrained linkage need not be reducible);
a heap of the candidate merges takes its place, also on the host.
"""

from __future__ import annotations

import heapq

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.inference.programs import program

__all__ = ["LINKAGES", "pairwise_distances", "linkage_matrix", "graph_linkage", "cut_tree"]

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


def linkage_matrix(X: np.ndarray, method: str, distances: np.ndarray | None = None) -> np.ndarray:
    """The hierarchy of the rows of X as SciPy's linkage matrix (n-1, 4): the two
    merged cluster ids (smaller first), the merge height and the merged size.

    Heights are Euclidean distances; for ward, the Ward distance
    ``sqrt(2 na nb / (na + nb)) * |mean_a - mean_b|`` as SciPy reports it.  Given
    ``distances`` (n, n), symmetric with a zero diagonal (any dissimilarity: another
    metric, or precomputed), "single", "complete" and "average" merge on those instead
    of X's Euclidean distances (all three are reducible, so the nearest-neighbour chain
    finds their hierarchy); ward needs Euclidean distances.
    """
    if method not in LINKAGES:
        raise ValueError(f"Unknown linkage={method!r}; expected one of {LINKAGES}")
    n = X.shape[0]
    if method == "single" and distances is None:
        with jax.enable_x64(True):
            X64 = jnp.asarray(X, jnp.float64)
            zero = jnp.zeros((), jnp.float64)  # see _squared_norms
            return np.asarray(_single_linkage.for_work(n * n * X.shape[1])(X64, zero))
    if distances is not None and method == "ward":
        raise ValueError("ward linkage merges on Euclidean distances only")
    D = pairwise_distances(X) if distances is None else np.array(distances, dtype=np.float64)
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


# Prim's steps run on a buffer of the points still outside the tree; once a buffer is
# half spent it is compacted to the points left.  Buffers n, n/2, n/4 cost 11/16 of the
# n^2 distance evaluations of one buffer; each more buffer saves little (the limit is
# 2/3) and costs a compiled loop (~0.5 s of XLA compile each).
_PRIM_MAX_BUFFERS = 3
_PRIM_MIN_BUFFER = 256


def _buffer_sizes(n: int) -> list[int]:
    """Static buffer sizes n, n//2, n//4 (each a separate compiled loop), none below
    ``_PRIM_MIN_BUFFER``; a buffer of size s is filled when s points are left."""
    sizes = [n]
    while len(sizes) < _PRIM_MAX_BUFFERS and sizes[-1] // 2 >= _PRIM_MIN_BUFFER:
        sizes.append(sizes[-1] // 2)
    return sizes


@program
def _single_linkage(X, zero):
    """SciPy's ``linkage(X, "single")`` (n-1, 4) from Prim's minimum spanning tree.

    Prim's walk from point 0 adds, at each step, the outside point nearest to the tree
    (the first one of a tie, as SciPy's scan finds it) at height h_k.  In that order
    v_0, v_1, ..., the single-linkage distance of v_i and v_j (i < j) is
    max(h_{i+1}, ..., h_j), so merging v_k with v_{k-1} at h_k gives the dendrogram
    (Gower & Ross 1969; Müllner 2011, "MST-linkage").  Each step is one O(n d) vector
    pass over the outside points, its distances bit-equal to SciPy's ``pdist``
    (:func:`_squared_norms`): O(n) memory, never the n x n matrix.  The merges are then
    sorted by height (stable) and numbered (:func:`_number_path_merges`).  ``zero`` is
    a traced 0.0 (see :func:`_squared_norms`).
    """
    n, d = X.shape
    sizes = _buffer_sizes(n)
    # coordinates as rows of length n: each step's reductions run along contiguous rows
    coords = X.T
    ids = jnp.arange(n, dtype=jnp.int32)
    closest = jnp.full((n,), jnp.inf, X.dtype)
    outside = ids != 0
    last = X[0]
    order = jnp.zeros((n,), jnp.int32)
    heights = jnp.zeros((n - 1,), X.dtype)
    start = 0
    for b in range(len(sizes)):
        # steps in this buffer: until the next buffer's size is left (the last: none)
        stop = n - 1 - (sizes[b + 1] if b + 1 < len(sizes) else 0)

        def step(k, state, coords=coords, ids=ids):
            closest, outside, last, order, heights = state
            dist = jnp.sqrt(_squared_norms(coords - last[:, None], zero))
            closest = jnp.where(outside, jnp.minimum(closest, dist), jnp.inf)
            height = jnp.min(closest)
            # argmin as min + first match: XLA's variadic argmin reduce is ~2x slower;
            # "outside" keeps the tree a tree even if distances overflow to inf
            new = jnp.argmax((closest == height) & outside)
            return (
                closest,
                outside.at[new].set(False),
                coords[:, new],
                order.at[k + 1].set(ids[new]),
                heights.at[k].set(height),
            )

        state = (closest, outside, last, order, heights)
        closest, outside, last, order, heights = jax.lax.fori_loop(start, stop, step, state)
        start = stop
        if b + 1 < len(sizes):
            # keep the outside points, in index order (so a first match is still the
            # smallest index); a stable sort compiles ~6x faster than jnp.nonzero
            keep = jnp.argsort(~outside, stable=True)[: sizes[b + 1]]
            coords, ids, closest = coords[:, keep], ids[keep], closest[keep]
            outside = jnp.ones((sizes[b + 1],), bool)
    return _number_path_merges(order, heights)


def _squared_norms(diff, zero):
    """Column sums of squares of ``diff`` (d, m), added coordinate by coordinate in
    order as SciPy's ``pdist`` adds them: bit-equal distances, so ties tie as there.

    ``zero`` is a traced 0.0 added to every square: fused, LLVM would contract
    ``total + x * x`` into one fused multiply-add, whose single rounding differs from
    pdist's in the last bit (measured: 2,524 of iris's 22,500 distances) and breaks
    ties; ``x * x + zero`` is the rounded square whatever the compiler contracts, and a
    traced zero cannot be folded away.  (An optimisation barrier on the squares does
    the same but materialises them: ~1.6x slower steps.)
    """
    squares = diff * diff + zero

    def add(j, total):
        return total + squares[j]

    d = diff.shape[0]
    return jax.lax.fori_loop(1, d, add, squares[0], unroll=max(d - 1, 1) if d <= 32 else 8)


def _number_path_merges(order, heights):
    """Number the merges of v_{k-1} with v_k at ``heights[k-1]`` as SciPy does: sorted by
    height (stable), ids n + m, the smaller child first.  Clusters are runs of
    consecutive positions on the path, so a merge joins the run ending at k-1 with the
    run starting at k, and each run's id and far end are kept at its two ends: O(1) per
    merge, no union-find."""
    n = order.shape[0]
    edges = jnp.argsort(heights, stable=True) + 1
    positions = jnp.arange(n, dtype=jnp.int32)

    def merge(m, state):
        cluster, left_end, right_end, Z = state
        k = edges[m]
        lo, hi = left_end[k - 1], right_end[k]
        a, b = cluster[k - 1], cluster[k]
        row = jnp.stack([jnp.minimum(a, b), jnp.maximum(a, b), 0, hi - lo + 1]).astype(
            heights.dtype
        )
        new = n + m
        return (
            cluster.at[lo].set(new).at[hi].set(new),
            left_end.at[hi].set(lo),
            right_end.at[lo].set(hi),
            Z.at[m].set(row.at[2].set(heights[k - 1])),
        )

    Z = jnp.zeros((n - 1, 4), heights.dtype)
    state = (order, positions, positions, Z)
    return jax.lax.fori_loop(0, n - 1, merge, state)[3]


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


def graph_linkage(
    X: np.ndarray,
    method: str,
    rows: np.ndarray,
    cols: np.ndarray,
    weights: np.ndarray | None = None,
    n_merges: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Agglomeration in which only clusters joined by an edge of a graph may merge.

    The graph's edges are ``(rows[e], cols[e])``, each undirected edge once (the
    diagonal and repeats are ignored); two clusters are adjacent when an edge joins a
    sample of one to a sample of the other.  At every step the adjacent pair with the
    smallest linkage merges (ties: the pair whose larger id is smaller, then whose
    smaller id is; for single linkage, the earlier edge); after ``n_merges`` steps
    (default ``n - 1``), or when no two clusters are adjacent any more, it stops.

    The linkage of two adjacent clusters:

    - "ward": ``n_a n_b / (n_a + n_b) |mean_a - mean_b|^2`` from the cluster sizes and
      centroids of X (the increase of the within-cluster sum of squares); the height
      reported is ``sqrt(2 * that)``, SciPy's Ward distance.
    - "single": the smallest ``weights`` of an edge between them.  Its merges are those
      of Kruskal's minimum spanning forest: the edges taken in increasing weight
      (stable), each joining two clusters.
    - "complete" and "average": the linkage lives on the edges.  Two samples start
      with their edge's weight; when a and b merge, the new cluster's linkage to a
      neighbour c is ``max(d(a, c), d(b, c))`` ("complete") or the size-weighted mean
      ``(n_a d(a, c) + n_b d(b, c)) / (n_a + n_b)`` ("average") when both a and b are
      adjacent to c, and the one that is when only one is.  Through a complete graph
      this is exact complete / average linkage; through a sparse one it only reads
      distances along edges (scikit-learn's rule for constrained trees).

    Heights need not increase: a constrained merge can bring a cluster closer to a
    neighbour than the pair just merged.  ``weights`` (one dissimilarity per edge) is
    needed except for ward, which reads X.  Returns ``(children (m, 2), heights
    (m,))`` in merge order: merge i forms cluster ``n + i`` from the two ids of row
    i, the smaller first.
    """
    if method not in LINKAGES:
        raise ValueError(f"Unknown linkage={method!r}; expected one of {LINKAGES}")
    n = X.shape[0]
    n_merges = n - 1 if n_merges is None else int(n_merges)
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    if method == "ward":
        weights = None
    elif weights is None:
        raise ValueError(f"linkage={method!r} needs one dissimilarity per edge (weights)")
    else:
        weights = np.asarray(weights, dtype=np.float64)
    off_diagonal = rows != cols
    rows, cols = rows[off_diagonal], cols[off_diagonal]
    if weights is not None:
        weights = weights[off_diagonal]
    if method == "single":
        return _kruskal_merges(n, rows, cols, weights, n_merges)
    return _heap_merges(X, method, rows, cols, weights, n_merges)


def _kruskal_merges(n, rows, cols, weights, n_merges):
    """Single linkage through a graph: Kruskal's forest, its edges in merge order."""
    root_of = np.arange(2 * n - 1)

    def root(i):
        while root_of[i] != i:
            root_of[i] = root_of[root_of[i]]
            i = root_of[i]
        return i

    children = np.empty((n_merges, 2), dtype=np.int64)
    heights = np.empty(n_merges)
    m = 0
    for e in np.argsort(weights, kind="stable"):
        if m == n_merges:
            break
        a, b = root(int(rows[e])), root(int(cols[e]))
        if a == b:
            continue
        root_of[a] = root_of[b] = n + m
        children[m] = (min(a, b), max(a, b))
        heights[m] = weights[e]
        m += 1
    return children[:m], heights[:m]


def _ward_costs(sums, sizes, k, others):
    """Ward's merge costs of cluster k with each of ``others``: n_k n_c / (n_k + n_c)
    times the squared distance of their centroids."""
    size_k, size_c = sizes[k], sizes[others]
    gaps = sums[k] / size_k - sums[others] / size_c[:, None]
    return size_k * size_c / (size_k + size_c) * np.einsum("ij,ij->i", gaps, gaps)


def _heap_merges(X, method, rows, cols, weights, n_merges):
    """Ward, complete and average linkage through a graph (:func:`graph_linkage`).

    ``links[c]`` maps each live neighbour of cluster c to their linkage; the heap holds
    (linkage, larger id, smaller id) of every adjacent pair, and entries of a cluster
    that has since merged are dropped when they surface."""
    n = X.shape[0]
    ward = method == "ward"
    sizes = np.zeros(2 * n - 1)
    sizes[:n] = 1.0
    alive = np.zeros(2 * n - 1, dtype=bool)
    alive[:n] = True
    if ward:
        sums = np.zeros((2 * n - 1, X.shape[1]))
        sums[:n] = X
        gaps = X[rows] - X[cols]
        weights = 0.5 * np.einsum("ij,ij->i", gaps, gaps)
    links: list[dict[int, float] | None] = [{} for _ in range(n)]
    for r, c, w in zip(rows.tolist(), cols.tolist(), weights.tolist(), strict=True):
        links[r][c] = w
        links[c][r] = w
    heap = [(w, a, b) for a in range(n) for b, w in links[a].items() if b < a]
    heapq.heapify(heap)
    children = np.empty((n_merges, 2), dtype=np.int64)
    heights = np.empty(n_merges)
    m = 0
    while m < n_merges and heap:
        w, a, b = heapq.heappop(heap)
        if not (alive[a] and alive[b]):
            continue
        k = n + m
        children[m] = (b, a)
        heights[m] = w
        m += 1
        alive[a] = alive[b] = False
        alive[k] = True
        sizes[k] = sizes[a] + sizes[b]
        link_a, link_b = links[a], links[b]
        links[a] = links[b] = None
        if ward:
            sums[k] = sums[a] + sums[b]
            neighbours = sorted((set(link_a) | set(link_b)) - {a, b})
            costs = _ward_costs(sums, sizes, k, np.array(neighbours, dtype=np.int64))
            merged = dict(zip(neighbours, costs.tolist(), strict=True))
        else:
            merged = {c: d for c, d in link_a.items() if alive[c]}
            na, nb = sizes[a], sizes[b]
            for c, d in link_b.items():
                if not alive[c]:
                    continue
                if c not in merged:
                    merged[c] = d
                elif method == "complete":
                    merged[c] = max(merged[c], d)
                else:
                    merged[c] = (na * merged[c] + nb * d) / (na + nb)
        links.append(merged)
        for c, d in merged.items():
            neighbour = links[c]
            neighbour.pop(a, None)
            neighbour.pop(b, None)
            neighbour[k] = d
            heapq.heappush(heap, (d, k, c))
    if ward:
        heights[:m] = np.sqrt(2.0 * heights[:m])
    return children[:m], heights[:m]


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
