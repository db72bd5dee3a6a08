"""k-means: greedy k-means++ seeding and Lloyd's iterations in one jit-compiled loop.

Written once for ``KMeans``, spectral clustering and the k-means starts of
``GaussianMixture``.  Conventions follow scikit-learn's ``KMeans`` so results can be
compared: greedy k-means++ (Arthur & Vassilvitskii 2007) with ``2 + log(k)`` candidate
centres per step; Lloyd stops when the labels no longer change or the squared centre
shift is at most ``tol`` times the mean feature variance, and a final assignment step
makes the labels those of the returned centres.  An empty cluster keeps its previous
centre (scikit-learn moves it to a far point; neither happens on well-separated data).

Two generalisations serve the mixture starts, whose data are padded to a bucket of rows
and components so one compiled program fits many shapes: row weights
(``sample_weight``, as scikit-learn's; padding rows have weight 0 and change nothing)
and an ``active`` mask of centres (a prefix; the others are padding, never seeded nor
assigned), so that a padded run gives the unpadded run's result for the same draws.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from latentlab._shapes import DENSE_ROWS, PRUNE_MIN_ROWS
from latentlab.inference.programs import program

__all__ = [
    "KMeansResult",
    "kmeans_plusplus",
    "kmeans_plusplus_indices",
    "local_trials",
    "plusplus_uniforms_size",
    "random_seeds",
    "lloyd",
    "best_of_runs",
    "kmeans",
    "squared_distances",
]


# Lloyd prunes with bounds (see :func:`lloyd`) from PRUNE_MIN_ROWS rows on, in this
# many independent row parts, which XLA's CPU runtime can run on as many threads
# (scikit-learn's Lloyd splits rows over its OpenMP threads the same way); a part's
# dense pass reads X in blocks of DENSE_ROWS rows (both in latentlab._shapes)
ROW_PARTS = 2


class KMeansResult(NamedTuple):
    centers: jax.Array  # (k, d)
    labels: jax.Array  # (n,) int32, the nearest centre of every row
    inertia: jax.Array  # () sum of (weighted) squared distances to the assigned centres
    n_iter: jax.Array  # () Lloyd iterations run


def _squared_distances(X, centers):
    d2 = (
        jnp.sum(X * X, axis=1)[:, None]
        - 2.0 * (X @ centers.T)
        + jnp.sum(centers * centers, axis=1)[None, :]
    )
    return jnp.maximum(d2, 0.0)


def _weights(X, sample_weight):
    if sample_weight is None:
        return jnp.ones((X.shape[0],), X.dtype)
    return jnp.asarray(sample_weight, X.dtype)


def _draw(uniforms, weights):
    """Row indices, one per value of ``uniforms`` in [0, 1), drawn with probability
    proportional to ``weights`` (>= 0) by inverting their cumulative sum, as
    scikit-learn does: one O(n) pass, where a categorical draw would make n random
    numbers per index (most of the seeding's time at 100k rows).  A row of weight 0 is
    never drawn: its cumulative sum equals the previous row's, which is found first."""
    cumulative = jnp.cumsum(weights)
    u = uniforms * cumulative[-1]
    # searchsorted (side="right") as one comparison pass: no loop to compile, and
    # O(n x len(uniforms)) is a few k-means++ candidates
    index = jnp.sum(cumulative <= jnp.expand_dims(u, -1), axis=-1)
    # u rounded up to the total: the last row that can be drawn
    last = weights.shape[0] - 1 - jnp.argmax(weights[::-1] > 0)
    return jnp.minimum(index, last).astype(jnp.int32)


def local_trials(n_clusters: int) -> int:
    """k-means++ candidates per seed by default: ``2 + log(k)``, scikit-learn's."""
    return 2 + int(math.log(n_clusters))


def plusplus_uniforms_size(n_clusters: int, n_local_trials: int | None = None) -> int:
    """How many uniforms one k-means++ seeding uses: 1 + (k - 1) x trials."""
    return 1 + (n_clusters - 1) * (n_local_trials or local_trials(n_clusters))


def kmeans_plusplus_indices(
    X,
    key,
    n_clusters: int,
    n_local_trials: int | None = None,
    *,
    sample_weight=None,
    active=None,
    uniforms=None,
):
    """Row indices (k,) of greedy k-means++ seeds: the first drawn with probability
    proportional to the row weight, each next one the best (lowest weighted potential)
    of ``n_local_trials`` candidates drawn with probability proportional to weight x
    squared distance to the nearest seed so far.  A zero-weight row is never drawn.

    The draws are ``uniforms`` (:func:`plusplus_uniforms_size` values in [0, 1)) or,
    if None, uniforms from ``key``.  They are used in scikit-learn's order (the first
    seed, then each next seed's candidates), so a NumPy ``RandomState``'s
    ``random_sample`` values passed here give scikit-learn's seeds for that random
    state.  With ``active`` (k,), a prefix of True, only that many seeds are drawn (the
    rest are index 0); with the same uniforms and ``n_local_trials`` they are the
    unpadded call's."""
    n_active = n_clusters if active is None else jnp.sum(active)
    trials = n_local_trials or local_trials(n_clusters)
    size = plusplus_uniforms_size(n_clusters, trials)
    if uniforms is None:
        uniforms = jax.random.uniform(key, (size,), X.dtype)
    uniforms = jnp.asarray(uniforms, X.dtype)
    w = _weights(X, sample_weight)
    if sample_weight is None:
        # _draw's result for unit weights (the same row as with zero-weight padding
        # rows appended), without constant (n,) weights for XLA to fold at compile time
        first = jnp.minimum(jnp.floor(uniforms[0] * X.shape[0]).astype(jnp.int32), X.shape[0] - 1)
    else:
        first = _draw(uniforms[0], w)
    steps = uniforms[1:size].reshape(n_clusters - 1, trials)
    indices = jnp.zeros((n_clusters,), jnp.int32).at[0].set(first)
    x_norms = jnp.sum(X * X, axis=1)  # once, not per step

    def distances(rows):  # squared distances (len(rows), n) to the rows X[rows]
        # laid out (rows, n), as _scores: XLA's CPU product is faster with n columns
        d2 = x_norms[None, :] - 2.0 * (X[rows] @ X.T) + x_norms[rows][:, None]
        return jnp.maximum(d2, 0.0)

    if n_clusters == 1:  # no steps (and nothing to index in them)
        return indices
    closest = distances(first[None])[0]

    def add_center(c, state):
        indices, closest = state
        candidates = _draw(steps[c - 1], w * closest)
        d2 = distances(candidates)  # (trials, n)
        potentials = jnp.minimum(closest[None, :], d2) @ w
        best = jnp.argmin(potentials)
        closest = jnp.minimum(closest, d2[best])
        return indices.at[c].set(candidates[best]), closest

    indices, _ = jax.lax.fori_loop(1, n_active, add_center, (indices, closest))
    return indices


def kmeans_plusplus(X, key, n_clusters: int, n_local_trials: int | None = None, **weighting):
    """Greedy k-means++ seeds (k, d); see :func:`kmeans_plusplus_indices` (same
    keyword arguments)."""
    return X[kmeans_plusplus_indices(X, key, n_clusters, n_local_trials, **weighting)]


def random_seeds(X, key, n_clusters: int, *, sample_weight=None, active=None):
    """``n_clusters`` distinct rows of X drawn uniformly (scikit-learn's ``init="random"``;
    with ``sample_weight``, with probability proportional to it).  ``active`` is
    accepted for a uniform seeding signature: padding centres are never used."""
    del active
    p = None if sample_weight is None else _weights(X, sample_weight)
    rows = jax.random.choice(
        key, X.shape[0], (n_clusters,), replace=False, p=None if p is None else p / p.sum()
    )
    return X[rows]


def _assign(X, x_norms, centers, active):
    """Labels and squared distances (n,) to the nearest (active) centre.  The argmin is
    over ||c||^2 - 2 x.c, as scikit-learn's Lloyd computes it: ||x||^2 does not change
    the argmin, so it is added (precomputed once per fit) to the winner only.  X is
    multiplied by -2C, not the (n, k) product by -2: the same numbers (a power of two),
    one pass fewer."""
    scores = _scores(X, centers, active)
    labels = jnp.argmin(scores, axis=0).astype(jnp.int32)
    nearest = jnp.min(scores, axis=0)
    return labels, jnp.maximum(x_norms + nearest, 0.0)


def _scores(X, centers, active):
    """``||c||^2 - 2 c.x`` (k, n), inactive centres at +inf.  Laid out (k, n): XLA's
    CPU product with n columns is ~1.4x faster than the (n, k) one at k = 10, d = 50,
    and the minimum over k then runs along contiguous rows."""
    scores = jnp.sum(centers * centers, axis=1)[:, None] + (-2.0 * centers) @ X.T
    if active is not None:
        scores = jnp.where(active[:, None], scores, jnp.inf)
    return scores


def _bounds(X_rows, x_norms, centers, active):
    """Labels, and for each row an upper bound on the distance to its centre and a
    lower bound on the distance to every other centre, from one dense assignment; the
    bounds include the round-off of the computed squared distances (``_round_off``)."""
    scores = _scores(X_rows, centers, active)
    labels = jnp.argmin(scores, axis=0).astype(jnp.int32)
    best = jnp.min(scores, axis=0)
    mine = jnp.arange(centers.shape[0])[:, None] == labels[None, :]
    second = jnp.min(jnp.where(mine, jnp.inf, scores), axis=0)
    error = _round_off(x_norms, centers, active)
    upper = jnp.sqrt(jnp.maximum(x_norms + best + error, 0.0))
    lower = jnp.sqrt(jnp.maximum(x_norms + second - error, 0.0))
    return labels, upper, lower


def _round_off(x_norms, centers, active):
    """A bound on the round-off of ||x||^2 + ||c||^2 - 2 x.c as computed (d-term dot
    products: ~d eps relative to ||x||^2 + ||c||^2), with a safety factor of 4."""
    c_norms = jnp.sum(centers * centers, axis=1)
    if active is not None:
        c_norms = jnp.where(active, c_norms, 0.0)
    eps = jnp.finfo(centers.dtype).eps
    return 4.0 * centers.shape[1] * eps * (x_norms + jnp.max(c_norms))


def _half_gaps(centers, active):
    """Half the distance from each centre to its nearest other (active) centre, rounded
    down: a row closer than that to its centre has no nearer one (triangle inequality)."""
    d2 = jnp.sum((centers[:, None, :] - centers[None, :, :]) ** 2, axis=-1)
    other = ~jnp.eye(centers.shape[0], dtype=bool)
    if active is not None:
        other = other & active[None, :]
    eps = jnp.finfo(centers.dtype).eps
    gap = jnp.sqrt(jnp.min(jnp.where(other, d2, jnp.inf), axis=1))
    return 0.5 * gap * (1.0 - 4.0 * centers.shape[1] * eps)


def _row_parts(n: int) -> list[tuple[int, int]]:
    """Static (start, stop) of the row parts that :func:`lloyd` prunes independently."""
    if n < PRUNE_MIN_ROWS:
        return [(0, n)]
    edges = [n * p // ROW_PARTS for p in range(ROW_PARTS + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def lloyd(
    X, centers, max_iter: int, tol, *, sample_weight=None, active=None, relocate=False
) -> KMeansResult:
    """Lloyd's iterations from ``centers``; ``tol`` is an absolute bound on the summed
    squared centre shift.  Centres are (weighted) means of their rows; every centre
    that ``active`` marks as padding stays where it is, and so does an empty cluster
    unless ``relocate``: then, as in scikit-learn's Lloyd, the empty clusters (in index
    order) are moved onto the rows farthest from their own centres (farthest first),
    each taken out of its old cluster's sum (:func:`_relocate_empty`).

    The labels are those of the plain algorithm (argmin of the computed squared
    distances), found with Hamerly's (2010) bounds: each row keeps an upper bound on
    the distance to its centre and a lower bound on the distance to the others, moved
    by the centres' shifts; a row whose bounds (with a round-off margin) prove its label
    is not recomputed.  After the first few iterations most rows are proved, and only
    the others (gathered in chunks of 1/64 of the rows, as many chunks as needed up to
    an eighth of the rows, else all rows) meet the centres in a product.  The cluster
    sums are recomputed from all rows on a dense pass; on a pruned one, with unit
    weights, only the rows that changed cluster move between running sums (counts stay
    exact; the sums drift by ~1e-16 relative, which the tests against scikit-learn's
    centres bound).  The rows are pruned in ``ROW_PARTS`` independent parts, each with
    its own bounds and running sums, read from X in place (a dense pass in blocks of
    ``DENSE_ROWS`` rows, a pruned one by gathering).  Below
    ``PRUNE_MIN_ROWS`` rows (a static choice) every iteration is dense: there a
    product costs little and the pruned program would double the compile time."""
    k = centers.shape[0]
    n, d = X.shape
    x_norms = jnp.sum(X * X, axis=1)
    w = _weights(X, sample_weight)
    # unit weights: no (n, d) product per iteration
    weighted = X if sample_weight is None else X * w[:, None]
    # relative round-off margin on the moved bounds (~1e-12 in float64)
    margin = 4096.0 * jnp.finfo(X.dtype).eps
    # a part is its first row, its rows' norms and weights: X itself is never sliced
    # (a slice of X is a copy: ~5x the time of a product with X, measured on CPU)
    parts = [(a, x_norms[a:b], w[a:b]) for a, b in _row_parts(n)]

    def sums_of(labels, w, weighted):
        # a scatter-add (one pass over X): measured faster on CPU than a one-hot GEMM
        # or a sorted segment sum at 100k x 50, K = 10
        counts = jnp.zeros((k,), X.dtype).at[labels].add(w)
        return jnp.zeros((k, d), X.dtype).at[labels].add(weighted), counts

    def dense_part(part, centers, labels=None):
        """A part's rows in blocks read from X in the loop: (labels, upper, lower, sums,
        counts) from new bounds, or, given ``labels``, only the sums and counts."""
        a, xn, wp = part
        m = xn.shape[0]
        size = min(DENSE_ROWS, m)

        def one_block(j, state):
            # the last block is moved back to end at row m (no second program for a
            # shorter tail); its rows that an earlier block counted are not summed again
            nominal = j * size
            start = jnp.minimum(nominal, m - size)
            piece = lambda v: jax.lax.dynamic_slice_in_dim(v, start, size)  # noqa: E731
            Xb = jax.lax.dynamic_slice_in_dim(X, a + start, size)
            if labels is None:
                out, sums, counts = state
                new = _bounds(Xb, piece(xn), centers, active)
                out = tuple(
                    jax.lax.dynamic_update_slice_in_dim(o, b, start, axis=0)
                    for o, b in zip(out, new, strict=True)
                )
                lb = new[0]
            else:
                sums, counts = state
                lb = piece(labels)
            # counted already: label k, dropped by the scatter
            lb = jnp.where(start + jnp.arange(size) >= nominal, lb, k)
            wb = piece(wp)
            weighted_b = Xb if sample_weight is None else Xb * wb[:, None]
            sums = sums.at[lb].add(weighted_b, mode="drop")
            counts = counts.at[lb].add(wb, mode="drop")
            return (out, sums, counts) if labels is None else (sums, counts)

        totals = (jnp.zeros((k, d), X.dtype), jnp.zeros((k,), X.dtype))
        if labels is None:
            out = (jnp.zeros((m,), jnp.int32), jnp.zeros((m,), X.dtype), jnp.zeros((m,), X.dtype))
            out, sums, counts = jax.lax.fori_loop(0, -(-m // size), one_block, (out, *totals))
            return (*out, sums, counts)
        return jax.lax.fori_loop(0, -(-m // size), one_block, totals)

    def prune_part(part, centers, gaps, labels_old, upper, lower, sums, counts):
        """One pruned assignment of a part's rows: (labels, upper, lower, sums, counts)."""
        a, xn, wp = part
        m = xn.shape[0]
        # rows recomputed by gathering, in chunks of an eighth of the cap (as many as the
        # rows need: late iterations need few); more rows than the cap: a dense pass
        chunk = max(m // 64, 1)
        cap = 8 * chunk
        round_off = _round_off(xn, centers, active)
        bound = jnp.maximum(lower, gaps[labels_old])
        # proved: (upper + margin)^2 + 2 x round-off < bound^2, so the computed
        # squared distance to the own centre is below every other computed one
        slack = upper + margin * (upper + bound)
        need = ~(slack**2 + 2.0 * round_off < bound**2)

        def dense(labels, upper, lower, sums, counts):
            return dense_part(part, centers)

        def gathered(labels, upper, lower, sums, counts, n_need):
            all_rows = jnp.nonzero(need, size=cap, fill_value=m)[0]  # m: dropped below

            def one_chunk(j, state):
                labels, upper, lower, sums, counts = state
                rows = jax.lax.dynamic_slice_in_dim(all_rows, j * chunk, chunk)
                # a fill row (m) reads some other row: its results are dropped
                X_rows = jnp.take(X, a + rows, axis=0, mode="clip")
                new = _bounds(X_rows, jnp.take(xn, rows, mode="clip"), centers, active)
                before = jnp.take(labels, rows, mode="clip")
                labels, upper, lower = (
                    old.at[rows].set(fresh, mode="drop")
                    for old, fresh in zip((labels, upper, lower), new, strict=True)
                )
                if sample_weight is not None:  # fractional weights: sums after the chunks
                    return labels, upper, lower, sums, counts
                # unit weights: move the rows that changed cluster between the running
                # sums (counts stay exact integers; ~1e-16 relative drift, next to a full
                # pass) by a (k, chunk) product with +1/-1 at the new/old cluster
                clusters = jnp.arange(k)
                change = (new[0][:, None] == clusters).astype(X.dtype) - (
                    before[:, None] == clusters
                ).astype(X.dtype)
                change = change * (rows < m)[:, None].astype(X.dtype)
                return labels, upper, lower, sums + change.T @ X_rows, counts + change.sum(0)

            n_chunks = (n_need + chunk - 1) // chunk
            state = (labels, upper, lower, sums, counts)
            labels, upper, lower, sums, counts = jax.lax.fori_loop(0, n_chunks, one_chunk, state)
            if sample_weight is not None:  # fractional weights: no running sums (round-off)
                return labels, upper, lower, *dense_part(part, centers, labels)
            return labels, upper, lower, sums, counts

        n_need = jnp.sum(need)
        return jax.lax.cond(
            n_need > cap,
            lambda *state: dense(*state[:-1]),
            gathered,
            labels_old,
            upper,
            lower,
            sums,
            counts,
            n_need,
        )

    def body(state):
        centers, before, it, _, _ = state
        part_states = before
        if n < PRUNE_MIN_ROWS:
            labels, _ = _assign(X, x_norms, centers, active)
            part_states = ((labels, None, None, *sums_of(labels, w, weighted)),)
        else:
            # the parts share no buffers: XLA's CPU runtime runs each part's operations
            # as soon as their inputs are ready, so with 2+ threads the parts' passes
            # (the serial gathers and scatters included) run side by side
            gaps = _half_gaps(centers, active)
            part_states = tuple(
                prune_part(part, centers, gaps, *old)
                for part, old in zip(parts, before, strict=True)
            )
        sums = sum(part[3] for part in part_states)
        counts = sum(part[4] for part in part_states)
        if relocate:
            sums, counts = _relocate_empty(X, w, centers, sums, counts, active)
        # (a cluster's weight may be below 1: fractional sample weights)
        new = jnp.where(
            counts[:, None] > 0, sums / jnp.where(counts > 0, counts, 1.0)[:, None], centers
        )
        moved = jnp.sqrt(jnp.sum((new - centers) ** 2, axis=1)) * (1.0 + margin)
        if n >= PRUNE_MIN_ROWS:
            part_states = tuple(
                (labels, upper + moved[labels], lower - jnp.max(moved), sums, counts)
                for labels, upper, lower, sums, counts in part_states
            )
        shift = jnp.sum((new - centers) ** 2)
        same = jnp.all(
            jnp.stack([jnp.all(a[0] == b[0]) for a, b in zip(part_states, before, strict=True)])
        )
        return new, part_states, it + 1, same, shift

    def not_done(state):
        *_, it, same, shift = state
        return (it < max_iter) & ~same & ((it == 0) | (shift > tol))

    def initial(part):
        m = part[1].shape[0]
        bounds = (
            (jnp.full((m,), jnp.inf, X.dtype), jnp.zeros((m,), X.dtype))  # nothing proved
            if n >= PRUNE_MIN_ROWS
            else (None, None)
        )
        # labels, bounds, and the part's running sums and counts of the clusters
        return (
            jnp.full((m,), -1, jnp.int32),
            *bounds,
            jnp.zeros((k, d), X.dtype),
            jnp.zeros((k,), X.dtype),
        )

    init = (
        centers,
        tuple(initial(part) for part in parts),
        jnp.zeros((), jnp.int32),
        jnp.asarray(False),
        jnp.asarray(jnp.inf, X.dtype),
    )
    centers, *_, n_iter, _, _ = jax.lax.while_loop(not_done, body, init)
    # the labels and distances of the returned centres (one dense pass)
    labels, d2 = _assign(X, x_norms, centers, active)
    return KMeansResult(centers, labels, w @ d2, n_iter)


def _relocate_empty(X, w, centers, sums, counts, active):
    """Cluster (sums, weights) with each empty cluster (weight 0) given one of the rows
    farthest from their centres among ``centers`` -- the largest squared distance
    first, as scikit-learn's ``_relocate_empty_clusters`` -- and that row's weighted
    value taken out of its old cluster.  Skipped (one branch) when no cluster is
    empty, and, as scikit-learn's, when every row lies on its centre (duplicates)."""
    k = centers.shape[0]
    empty = counts == 0
    if active is not None:
        empty = empty & active

    def move(state):
        sums, counts = state
        labels, _ = _assign(X, jnp.sum(X * X, axis=1), centers, active)
        d2 = jnp.sum((X - centers[labels]) ** 2, axis=1)  # as scikit-learn: exact
        _, far = jax.lax.top_k(d2, min(k, X.shape[0]))
        targets = jnp.argsort(~empty, stable=True)  # the empty clusters first, in order

        def one(j, state):
            sums, counts = state
            row, cluster = far[j], targets[j]
            value = X[row] * w[row]
            sums = sums.at[labels[row]].add(-value).at[cluster].set(value)
            counts = counts.at[labels[row]].add(-w[row]).at[cluster].set(w[row])
            return sums, counts

        # every row on its centre (more clusters than distinct rows): nothing to move
        moves = jnp.where(jnp.max(d2) > 0, jnp.sum(empty), 0)
        return jax.lax.fori_loop(0, moves, one, (sums, counts))

    return jax.lax.cond(jnp.any(empty), move, lambda state: state, (sums, counts))


def _tolerance(X, sample_weight, tol):
    """``tol`` times the mean (weighted) feature variance, scikit-learn's scale."""
    if sample_weight is None:
        return tol * jnp.mean(jnp.var(X, axis=0))
    w = _weights(X, sample_weight)
    mean = (w @ X) / jnp.sum(w)
    return tol * jnp.mean(w @ (X - mean) ** 2) / jnp.sum(w)


def best_of_runs(
    X,
    keys,
    *,
    n_clusters: int,
    max_iter: int = 300,
    tol=1e-4,
    seeding: str = "k-means++",
    sample_weight=None,
    active=None,
    n_local_trials: int | None = None,
    uniforms=None,
    relocate: bool = False,
) -> KMeansResult:
    """One seeded k-means run per key in ``keys`` (n_runs, 2) -- or, for k-means++
    seeds, per row of ``uniforms`` (n_runs, m), then ``keys`` is not used -- the lowest
    inertia kept; ``tol`` relative as in :func:`kmeans`, ``active``,
    ``n_local_trials`` and ``uniforms`` as in :func:`kmeans_plusplus_indices`,
    ``relocate`` as in :func:`lloyd`."""
    tol = _tolerance(X, sample_weight, tol)
    weighting = dict(sample_weight=sample_weight, active=active)

    def run(draws):
        if seeding == "random":
            start = random_seeds(X, draws, n_clusters, **weighting)
        elif uniforms is not None:
            start = kmeans_plusplus(
                X, None, n_clusters, n_local_trials, uniforms=draws, **weighting
            )
        else:
            start = kmeans_plusplus(X, draws, n_clusters, n_local_trials, **weighting)
        return lloyd(X, start, max_iter, tol, relocate=relocate, **weighting)

    # lax.map, not vmap: a batched while_loop runs every restart as long as the slowest
    # one (n_init x max iterations); in sequence each stops at its own convergence
    runs = jax.lax.map(run, keys if uniforms is None or seeding == "random" else uniforms)
    best = jnp.argmin(runs.inertia)
    return jax.tree_util.tree_map(lambda a: a[best], runs)


@program(static_argnames=("n_clusters", "n_init", "max_iter", "seeding", "relocate"))
def kmeans(
    X,
    key,
    *,
    n_clusters: int,
    n_init: int = 1,
    max_iter: int = 300,
    tol=1e-4,
    init=None,
    seeding: str = "k-means++",
    sample_weight=None,
    uniforms=None,
    relocate: bool = False,
) -> KMeansResult:
    """k-means with ``n_init`` restarts (one after another) seeded by ``seeding``
    ("k-means++" or "random"), keeping the lowest inertia; ``init`` (k, d) replaces
    the seeding (one run).  ``tol`` is relative to the mean feature variance of X, as
    in scikit-learn; ``sample_weight`` (n,) weighs the rows.  ``uniforms`` (n_init,
    :func:`plusplus_uniforms_size`): the k-means++ draws of each restart, instead of
    draws from ``key`` (which differ between float32 and float64).  ``relocate``: move
    empty clusters onto far rows (:func:`lloyd`)."""
    if init is not None:
        tol = _tolerance(X, sample_weight, tol)
        start = jnp.asarray(init, X.dtype)
        return lloyd(X, start, max_iter, tol, sample_weight=sample_weight, relocate=relocate)
    return best_of_runs(
        X,
        jax.random.split(key, n_init),
        n_clusters=n_clusters,
        max_iter=max_iter,
        tol=tol,
        seeding=seeding,
        sample_weight=sample_weight,
        uniforms=uniforms,
        relocate=relocate,
    )


@program
def squared_distances(X, centers):
    """Squared Euclidean distances (n, k) of the rows of X to ``centers``."""
    return _squared_distances(X, centers)
