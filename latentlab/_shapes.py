"""The shape policy: how latentlab pads row and component counts, in one place.

JAX compiles one program per input shape, and on CPU XLA spends 0.3-1 s on each of
latentlab's fit programs -- longer than the fit itself on small data.  Padding lets
nearby shapes share one program, exactly:

* **rows** are padded with rows whose mask is entirely 0 (they add nothing to any
  sum), so cross-validation folds, chunks and shard remainders reuse a program;
* **components** (loadings columns of the Gaussian latent models, mixture components,
  pLSA topics) are padded with components held at an exact fixed point of EM (a zero
  loadings column, a component of weight 0, a topic of zero weight), so every K of a
  bucket runs the same program and gives the K-component fit to round-off.

Padding is paid for in run time: a padded fit does the padded shape's work in every
iteration.  The trade-off, stated once here:

* A padded component count is used only where the padded work of one EM iteration is
  at most :data:`MAX_WORK_RATIO` (1.5) times the exact shape's, or where its extra
  work is negligible in absolute terms (at most :data:`NEGLIGIBLE_EXTRA_WORK`, about
  0.2 ms an iteration: a thousand such iterations cost less than one compile), and
  never on problems large enough that a compile is cheap next to the work (each
  family's ``*_MAX_WORK``).  Work is estimated by per-family cost models (below),
  calibrated by timing EM iterations on CPU; they include a fixed per-iteration
  overhead, which is what makes padding nearly free on small data.
* Candidate buckets are tried from coarse to fine -- one shared bucket for every small
  K, powers of two, then the ladder 2, 4, 6, 8, 12, 16, 24, 32, ... (steps of at most
  1.5x) -- and the first within the bound is taken, else K itself.  A K grid 1..8 on
  small data then compiles one to four programs, and no fit pays more than ~1.5x.
* A shape whose exact program this process has already compiled is not padded.
* Inside a search over a grid of K (:func:`search_grid`: the Imputer's model search),
  the bound holds for the search as a whole: the grid is cut into the fewest
  contiguous groups, each fitted at its largest K, whose total padded work is within
  :data:`MAX_WORK_RATIO` of the grid's exact total.  A search over K = 1..12 then
  compiles about three EM programs instead of five, and small K, whose fits are
  cheapest, carry the padding.
* Rows that EM revisits every iteration are padded on a quarter-octave ladder (at most
  1.25x: 32, 40, 48, 56, 64, 80, ...); rows of one-pass maps (scoring, transforms) on a
  coarser one (powers of two up to 256, then quarter-octaves), whose padding is paid
  once per call.

The setting ``latentlab.set_config(padding=False)`` (or ``config_context``) turns
component padding off: every fit then runs at its exact K.  Row padding stays, since
masked rows are not an approximation of anything.

Every other size that shapes a compiled program or bounds its memory lives here too,
in sections:

* **rows per compiled call** -- the rows one call of a row-wise or E-step program
  holds (:data:`ROWS_PER_CALL`, :data:`GMM_CHUNK`, :data:`GMM_MISSING_CHUNK`,
  :data:`GMM_SCORE_WORK`, :data:`E_STEP_ROWS`, :data:`ONLINE_ROWS`,
  :data:`MIN_STAGE_ROWS`);
* **padding limits** -- the largest inputs padded to buckets (:data:`PAD_MAX_ENTRIES`);
* **route thresholds** -- quick-compile or optimised programs
  (:data:`QUICK_COMPILE_MAX_WORK`), dense or sparse E-steps (:data:`DENSE_MIN_DENSITY`,
  :data:`DENSE_MAX_ENTRIES`), dense or pruned Lloyd (:data:`PRUNE_MIN_ROWS`), in
  memory or chunked (:data:`CHUNKED_MIN_BYTES`, :data:`DEFAULT_CHUNK_BYTES`,
  :data:`RESIDENT_BYTES`, :data:`START_BYTES`);
* **memory blocks of closed forms** -- :data:`BLOCK_ROWS`, :data:`BLOCK_ELEMENTS`,
  :data:`DENSE_ROWS`, :data:`ROW_BLOCK`, :data:`BATCH_ENTRIES`;
* **iteration limits** -- EM's trace holds :func:`trace_capacity` entries, a power of
  two, and the limit itself is an input of the program, so fits that differ only in
  ``max_iter`` share one;
* then the row rules, the component rules with their cost models, and the row-wise
  map over chunks (:func:`map_row_chunks`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable

import numpy as np

from latentlab._config import get_config

__all__ = [
    "BATCH_ENTRIES",
    "BLOCK_ELEMENTS",
    "BLOCK_ROWS",
    "CHUNKED_MIN_BYTES",
    "DEFAULT_CHUNK_BYTES",
    "DENSE_MAX_ENTRIES",
    "DENSE_MIN_DENSITY",
    "DENSE_ROWS",
    "E_STEP_ROWS",
    "GMM_CHUNK",
    "GMM_MISSING_CHUNK",
    "GMM_SCORE_WORK",
    "MAX_WORK_RATIO",
    "MIN_STAGE_ROWS",
    "NEGLIGIBLE_EXTRA_WORK",
    "ONLINE_ROWS",
    "PAD_MAX_ENTRIES",
    "PRUNE_MIN_ROWS",
    "QUICK_COMPILE_MAX_WORK",
    "RESIDENT_BYTES",
    "ROWS_PER_CALL",
    "ROW_BLOCK",
    "START_BYTES",
    "bucket",
    "chunked",
    "component_bucket",
    "em_rows",
    "fold_in_rows",
    "forget_programs",
    "gaussian_latent_columns",
    "map_row_chunks",
    "map_rows_bucket",
    "mixture_components",
    "pad_rows",
    "padded_count",
    "padded_size",
    "search_grid",
    "signature",
    "trace_capacity",
    "topic_bucket",
    "topics",
]

MAX_WORK_RATIO = 1.5
NEGLIGIBLE_EXTRA_WORK = 1 << 13  # in the units of the cost models: ~20 ns each
# A one-pass program (scoring, imputing) pays its padding once per call, not once per
# iteration, and a search calls one for every candidate: there up to twice the work,
# or ~2.5 ms more, is cheap next to a compile (~0.5 s, or ~0.1 s to trace and load a
# cached program in a new process).
ONE_PASS_MAX_WORK_RATIO = 2.0
ONE_PASS_NEGLIGIBLE_WORK = 1 << 17

# ----------------------------------------------------------------- rows per compiled call

ROWS_PER_CALL = 4096  # rows per call of a row-wise map: bounds its intermediates
# Gaussian mixtures: rows per chunk in the E-step: complete rows hold (K, chunk, d)
# residuals; rows with missing entries hold (chunk, K, d, d) conditional covariances
# for full/tied.
GMM_CHUNK = 2048
GMM_MISSING_CHUNK = {"full": 128, "tied": 128, "diag": 1024, "spherical": 1024}
# Gaussian mixtures: work (~flops) per call of a scoring program: sets its fixed rows
# per call
GMM_SCORE_WORK = 2**22
# Gaussian latent models, chunked route: most rows per call of the jitted per-row
# E-step (otherwise the chunk size): it holds (K+1)^2 x rows posterior moments (the
# in-memory route uses 1024 rows too).
E_STEP_ROWS = 1024
# Gaussian latent models, online route: rows of the per-row E-step (rows with missing
# entries) per compiled call.
ONLINE_ROWS = 256
# pLSA fold-in: the documents still moving are gathered into batches of D, D/4, D/16,
# ... rows (see latentlab.models._plsa_fold_in), down to this many rows.
MIN_STAGE_ROWS = 32

# -------------------------------------------------------------------------- padding limits

# NMF: inputs up to this many entries are padded to row and column buckets (see
# latentlab.estimators.nmf.NMF._run); larger ones compile for their exact shape.
PAD_MAX_ENTRIES = 1 << 18

# ---------------------------------------------------------------------- route thresholds
#
# Dense or sparse, quick-compile or optimised, in memory or chunked.

# Problems up to this many elements run the quick-compile variant of a program
# (latentlab.inference.programs).
QUICK_COMPILE_MAX_WORK = 1 << 16
# pLSA: the EM E-step uses dense matrix products (O(D W K) multiply-adds) instead of
# gathers and scatters at the nonzeros (O(nnz K), each several times dearer on CPU)
# when the corpus has at least this share of nonzeros, and the dense matrix stays
# small (at most DENSE_MAX_ENTRIES entries).  Measured per EM step: digits (51%
# nonzero) 1.4-2.3 ms dense against 2.8-4.9 ms at the nonzeros; a 2,000 x 1,000
# corpus with 10% nonzeros 31-39 ms against 8-13 ms.
DENSE_MIN_DENSITY = 0.3
DENSE_MAX_ENTRIES = 1 << 24
# k-means: Lloyd prunes with bounds (see latentlab.closed_form.kmeans.lloyd) from this
# many rows on
PRUNE_MIN_ROWS = 4096
# A np.memmap at least this large takes the chunked route; a smaller one is read into
# memory.  joblib hands arrays above 1 MB to GridSearchCV's workers as read-only
# memmaps: those fit in memory and must keep every method (SVI, closed forms) of the
# in-memory route.  Wrap any array in RowChunks to choose the chunked route yourself.
CHUNKED_MIN_BYTES = 1 << 28
# Default rows per chunk of a chunked source: about this many bytes of float64 data
# per chunk.
DEFAULT_CHUNK_BYTES = 1 << 24
# With the automatic chunk size, the rows an E-step revisits each iteration (every
# row for a mixture, the rows with missing entries for PPCA/FA) are read once and
# held in the compiled program when they take at most this many bytes: small
# sources then run the in-memory program, one call per fit with no host round trip
# per E-step.  The bound does not grow with n, so neither does the memory it costs.
RESIDENT_BYTES = 1 << 26
# A chunked mixture's start (k-means, or random draws) is made from every row, as in
# memory, when they take at most this many bytes (a memmap under the same size is
# fitted in memory anyway: CHUNKED_MIN_BYTES); from that many evenly spaced rows
# otherwise.  The rows are held in the fit program beside the E-step's chunks.
START_BYTES = 1 << 28

# ---------------------------------------------------------- memory blocks of closed forms

# Nearest neighbours: query rows per block: a 1024 x n block of distances is ~80 MB at
# n = 10,000.
BLOCK_ROWS = 1024
# FastICA: elements per block: a block of the data and of g(W z) stay in cache between
# the two products of an iteration, instead of streaming n x k twice more through
# memory (~1.7x faster iterations for 100,000 x 20 on one CPU core than unblocked;
# 128 KiB blocks, in a core's L2 with their g(W z), ~15% faster again than 512 KiB
# ones)
BLOCK_ELEMENTS = 1 << 14
# k-means: a row part's dense Lloyd pass reads X in blocks of this many rows
DENSE_ROWS = 2048
# Sparse moments: rows are centred in dense blocks of this many rows (bounds the
# densified block's memory)
ROW_BLOCK = 4096
# Factor retention (parallel analysis): simulated or resampled data are drawn in
# batches of at most this many float64 entries (64 MiB), however many iterations are
# asked for.
BATCH_ENTRIES = 1 << 23

# ----------------------------------------------------------------------------- rows


def bucket(n: int, smallest: int = 32) -> int:
    """Padded size for ``n`` rows of a one-pass computation: a power of two (at least
    ``smallest``) up to 256, then quarter-octave steps (320, 384, 448, 512, 640, ...).
    Few distinct sizes; padding adds at most a quarter of the rows above 256."""
    n = int(n)
    size = max(smallest, 1 << (max(n, 1) - 1).bit_length())
    if size <= 256:
        return size
    return em_rows(n, smallest)


def em_rows(n: int, smallest: int = 32) -> int:
    """Padded size for ``n`` rows that EM revisits every iteration: the quarter-octave
    ladder k * 2^e, k in 4..7 (at least ``smallest``), so padding adds at most a quarter
    of the rows at any size (32, 40, 48, 56, 64, 80, 96, 112, 128, 160, ...)."""
    n = int(n)
    if n <= smallest:
        return smallest
    step = 1 << max((n - 1).bit_length() - 3, 0)
    return -(-n // step) * step


def padded_size(n: int, chunk: int, rows: Callable[[int], int] = bucket) -> tuple[int, int]:
    """``(rows per chunk, number of chunks)`` that hold ``n`` rows: one chunk of
    ``rows(n)`` rows up to ``chunk`` rows, whole chunks of ``chunk`` rows beyond."""
    if n <= chunk:
        return rows(n), 1
    return chunk, -(-n // chunk)


def pad_rows(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with zero rows appended up to ``rows`` rows (``a`` itself if none)."""
    extra = rows - a.shape[0]
    if extra == 0:
        return a
    return np.concatenate([a, np.zeros((extra, *a.shape[1:]), dtype=a.dtype)])


def chunked(a: np.ndarray, chunk: int, rows: Callable[[int], int] = bucket) -> np.ndarray:
    """``a`` (n, ...) zero-padded and reshaped to (n_chunks, rows per chunk, ...)
    (:func:`padded_size`)."""
    size, count = padded_size(a.shape[0], chunk, rows)
    return pad_rows(a, size * count).reshape(count, size, *a.shape[1:])


def map_rows_bucket(n: int) -> int:
    """Rows of a row-wise map (transform, score_samples, pre-images): a bucket (at least
    8) up to 4096 rows; larger inputs are not padded (compiling is then cheap next to
    the work, and padding would copy the data)."""
    return bucket(n, smallest=8) if n <= 4096 else n


def fold_in_rows(n: int) -> int:
    """Rows for folding ``n`` new documents into a pLSA model: a power of two (at least
    32) up to 4096 rows, so calls with different row counts share few programs; above
    that the fit's buckets."""
    if n <= 4096:
        return max(32, 1 << (max(n, 1) - 1).bit_length())
    return bucket(n, 32)


# ----------------------------------------------------------------------------- components
#
# Programs this process has been handed, as (family, count, signature): a fit whose
# exact program exists runs it instead of a padded one.
_PROGRAMS: set[tuple] = set()


def forget_programs() -> None:
    """Forget which exact programs ran (benchmarks that time padded programs call it)."""
    _PROGRAMS.clear()


def signature(*trees, **statics) -> tuple:
    """A hashable key for a program's inputs other than the component count: the shape
    and dtype of every array leaf of ``trees`` plus the ``statics``."""
    import jax

    leaves = jax.tree.leaves(trees)
    return (
        tuple((np.shape(leaf), str(getattr(leaf, "dtype", type(leaf)))) for leaf in leaves),
        tuple(sorted(statics.items())),
    )


def shared(k: int, size: int = 16) -> int:
    """One bucket for every k up to ``size``."""
    return size if k <= size else k


def powers(k: int, smallest: int = 1) -> int:
    """The next power of two (at least ``smallest``)."""
    return max(smallest, 1 << (int(k) - 1).bit_length())


def ladder(k: int) -> int:
    """The next of 2, 4, 6, 8, 12, 16, 24, 32, 48, ...: steps of at most 1.5x from 4 on."""
    k = int(k)
    if k <= 2:
        return 2
    power = 1 << (k - 1).bit_length()  # k <= power < 2k
    return power * 3 // 4 if power >= 8 and k <= power * 3 // 4 else power


def missing_block_size(most_missing: int, n_features: int) -> int | None:
    """Slots for each row's missing coordinates in the mixture's missing-block E-step
    (:func:`latentlab.models._gmm_covariances.missing_block_components`): the
    :func:`ladder` rung above the largest number missing in a row, so that data sets
    (and cross-validation folds) with similar holes share a program.  None (the d x d
    route) where the block would not be smaller by a clear margin, measured: with 30%
    of the entries missing, breast_cancer (d = 30, 24 slots) ran an E-step twice as
    fast by blocks, wine (d = 13, 12 slots) a little slower -- small d x d matrices are
    inverted by a fast sweep (:mod:`latentlab.models._linalg`), larger ones are not."""
    size = ladder(max(int(most_missing), 1))
    if size >= n_features or (n_features <= 20 and 4 * size > 3 * n_features):
        return None
    return size


def missing_block_groups(missing_counts, n_features: int, chunk: int) -> tuple[int, ...] | None:
    """Slots of the groups the mixture's missing-block E-step sorts its rows into, by
    each row's number of missing entries (``missing_counts``, rows with any), smallest
    first; None for the d x d route (:func:`missing_block_size`).  Two groups, the
    rows with at most s / 2 missing (the rung at or below it) in blocks of that size
    and the rest in blocks of s, where the first fills at least a chunk of ``chunk``
    rows: each group pays for chunks of its own and the block's cost grows as its
    cube.  Measured on breast_cancer with 30% MAR holes (most missing 21, mean 9):
    an E-step 2.2x faster than with every row at 24 slots (three groups: 2.5x)."""
    counts = np.asarray(missing_counts)
    largest = missing_block_size(int(counts.max()), n_features)
    if largest is None:
        return None
    small = largest // 2
    while small > 2 and ladder(small) != small:  # the rung at or below s / 2
        small -= 1
    if small >= 2 and np.sum(counts <= small) >= chunk and np.any(counts > small):
        return small, largest
    return (largest,)


def trace_capacity(max_iter: int) -> int:
    """The length of EM's trace buffer for ``max_iter`` iterations: the next power of
    two, at least 8 (0 stays 0: no EM step).  The limit itself is an input of the
    compiled program, so fits that differ only in ``max_iter`` within a power of two
    share one (scikit-learn's checks run one estimator at 1, 2, 5, 100, ...)."""
    return 0 if max_iter <= 0 else powers(max_iter, smallest=8)


def padded_count(
    k: int,
    work: Callable[[int], float],
    buckets: Iterable[Callable[[int], int]],
    *,
    max_work: float = float("inf"),
    max_ratio: float = MAX_WORK_RATIO,
    negligible: float = NEGLIGIBLE_EXTRA_WORK,
    family: str = "",
    key: tuple | None = None,
) -> int:
    """The component count to compute ``k`` components with.

    ``work(c)`` estimates one iteration's work with ``c`` components; ``buckets`` are
    the candidate rules, coarse first.  The first candidate whose work is within
    ``max_ratio`` of ``work(k)`` (or at most ``negligible`` above it) and at most
    ``max_work`` is taken, else ``k``.  With a ``key`` (see :func:`signature`), a
    program this process already ran for exactly ``k`` is reused, and the choice is
    remembered.
    """
    k = int(k)
    size = k
    if get_config()["padding"] and (key is None or (family, k, key) not in _PROGRAMS):
        exact = work(k)
        for rule in buckets:
            candidate = rule(k)
            if candidate == k:  # k is on this rule's grid, or the rule does not apply
                continue
            padded = work(candidate)
            within = padded <= max_ratio * exact or padded - exact <= negligible
            if within and padded <= max_work:
                size = candidate
                break
    if key is not None:
        _PROGRAMS.add((family, size, key))
    return size


# Gaussian latent models (PPCA, FA, Bayesian PCA, supervised PCA).  Cost of one EM
# iteration, fitted to timings of FA iterations on wine, diabetes and breast_cancer
# with 5-30% entries missing, K = 1..16 (within ~25%): a fixed overhead, the
# d x d summary algebra of the complete rows, and for each of the m rows with missing
# entries its posterior (K x K inversion) and its share of the regression statistics.
GAUSSIAN_LATENT_OVERHEAD = 3500
# above this work per iteration (~10 ms) a compile is cheap next to the padding's cost
GAUSSIAN_LATENT_MAX_WORK = 1 << 19


def gaussian_latent_work(n_columns: int, n_features: int, n_missing_rows: int = 0) -> float:
    K, d, m = n_columns, n_features, n_missing_rows
    return GAUSSIAN_LATENT_OVERHEAD + d * d * K + d * K**3 / 10 + m * (d * (K + 0.5) + K**3 / 4)


_GRIDS: list[tuple[int, ...]] = []  # the K grids of the searches in progress


@contextlib.contextmanager
def search_grid(n_components: Iterable[int]):
    """Inside this block, Gaussian latent EM fits whose K is in ``n_components`` choose
    their loadings columns for the whole grid (see the module docstring)."""
    _GRIDS.append(tuple(sorted({int(k) for k in n_components if k is not None and k >= 1})))
    try:
        yield
    finally:
        _GRIDS.pop()


@functools.lru_cache(maxsize=256)
def _grid_buckets(grid: tuple[int, ...], n_features: int, n_missing_rows: int) -> dict:
    """K -> columns for a search over ``grid``: the fewest contiguous groups, each at its
    largest K, whose summed work is within MAX_WORK_RATIO of the grid's exact sum."""
    work = [gaussian_latent_work(K, n_features, n_missing_rows) for K in grid]
    budget = MAX_WORK_RATIO * sum(work)
    n = len(grid)
    # least padded work covering grid[:i] with g groups, and where its last group starts
    best = {(0, 0): (0.0, 0)}
    for groups in range(1, n + 1):
        for i in range(1, n + 1):
            options = [
                (best[groups - 1, j][0] + (i - j) * work[i - 1], j)
                for j in range(i)
                if (groups - 1, j) in best
            ]
            if options:
                best[groups, i] = min(options)
        if (groups, n) in best and best[groups, n][0] <= budget:
            break
    buckets, i = {}, n
    while i > 0:
        j = best[groups, i][1]
        buckets.update(dict.fromkeys(grid[j:i], grid[i - 1]))
        i, groups = j, groups - 1
    return buckets


def gaussian_latent_columns(
    n_components: int,
    n_features: int,
    n_missing_rows: int = 0,
    key: tuple | None = None,
    one_pass: bool = False,
) -> int:
    """Loadings columns to fit ``n_components`` with (zero columns are EM's fixed point:
    see :mod:`latentlab.models.gaussian_latent`); ``n_missing_rows`` are the padded rows
    the E-step visits one by one.  ``one_pass``: for a row-wise map over that many
    rows (scoring, posteriors, imputation) instead of an EM iteration."""
    K = max(int(n_components), 1)
    if _GRIDS and K in _GRIDS[-1] and not one_pass and get_config()["padding"]:
        columns = _grid_buckets(_GRIDS[-1], int(n_features), int(n_missing_rows))[K]
        # the same size cap as a single fit's, and an exact program already run wins
        small = gaussian_latent_work(columns, n_features, n_missing_rows)
        exact_ran = key is not None and ("gaussian_latent", K, key) in _PROGRAMS
        if small <= GAUSSIAN_LATENT_MAX_WORK and not exact_ran:
            if key is not None:
                _PROGRAMS.add(("gaussian_latent", columns, key))
            return columns
    return padded_count(
        K,
        lambda c: gaussian_latent_work(c, n_features, n_missing_rows),
        (shared, lambda K: powers(K, 4), ladder),
        max_work=GAUSSIAN_LATENT_MAX_WORK,
        max_ratio=ONE_PASS_MAX_WORK_RATIO if one_pass else MAX_WORK_RATIO,
        negligible=ONE_PASS_NEGLIGIBLE_WORK if one_pass else NEGLIGIBLE_EXTRA_WORK,
        family="gaussian_latent",
        key=key,
    )


# Gaussian mixtures: an E-step costs a fixed overhead plus ``per_component`` for each
# component (measured, 30 SQUAREM cycles, full covariances: wine K = 3 as 4 1.09x,
# K = 5 as 8 1.20x; 20000 x 10 K = 3 as 4 1.35x).  Data whose per-component work is
# above MIXTURE_MAX_WORK are not padded: a compile is cheap next to their E-steps.
MIXTURE_OVERHEAD = 1 << 18
MIXTURE_MAX_WORK = 1 << 18


def mixture_components(n_components: int, per_component: float, key: tuple | None = None) -> int:
    """Components EM computes with (padding at weight 0: see
    :class:`latentlab.models.gmm.Hyper`); ``per_component`` is one E-step's work per
    component."""
    if per_component > MIXTURE_MAX_WORK:
        return int(n_components)
    return padded_count(
        n_components,
        lambda K: MIXTURE_OVERHEAD + K * per_component,
        (powers, ladder),
        family="mixture",
        key=key,
    )


def component_bucket(n_components: int) -> int:
    """Components a mixture's scoring programs are compiled for (one pass over the rows:
    padding is cheap there): the next power of two."""
    return powers(n_components)


# pLSA: one EM step's E-step touches ``per_topic`` elements per topic, and its
# elementwise logs and ratios (independent of K) cost about TOPIC_FIXED_COST topics'
# worth (measured on digits: 5 topics as 8 +10% a SQUAREM cycle, 10 as 12 +7%).
# Corpora whose padded E-step is above TOPIC_MAX_WORK (ten times digits') keep K.
TOPIC_FIXED_COST = 24
TOPIC_MAX_WORK = 1 << 23


def topic_bucket(n_components: int) -> int:
    """``n_components`` rounded up to a multiple of 4."""
    return -(-int(n_components) // 4) * 4


def topics(n_components: int, per_topic: int) -> int:
    """Topics a pLSA fit computes with (padding topics hold zero weight, a fixed point
    of EM) for an E-step touching ``per_topic`` elements per topic."""
    if per_topic * topic_bucket(n_components) > TOPIC_MAX_WORK:
        return int(n_components)
    return padded_count(
        n_components,
        lambda K: per_topic * (TOPIC_FIXED_COST + K),
        (topic_bucket, ladder),
        family="topics",
    )


# ---------------------------------------------------------------- row-wise maps over chunks


def map_row_chunks(fn, *row_arrays, chunk: int = ROWS_PER_CALL):
    """``fn(*padded_chunk)`` over row chunks of ``row_arrays``, outputs concatenated
    and cut back to ``n`` rows; every output of ``fn`` must be row-wise.

    Row counts are padded -- to a :func:`bucket` up to one chunk, and to a whole
    number of fixed-size chunks beyond -- with zero rows that ``fn`` must ignore (row
    mask 0, or an all-zero observed mask), so cross-validation folds, single rows and
    large arrays reuse a handful of compiled programs and no call holds more than one
    chunk's intermediates.  Returns a tuple of float64 NumPy arrays that own their
    data (or one array if ``fn`` returns one).
    """
    n = row_arrays[0].shape[0]
    size, count = padded_size(n, chunk)
    pieces = []
    for c in range(count):
        part = [pad_rows(a[c * size : (c + 1) * size], size) for a in row_arrays]
        out = fn(*part)
        outputs = out if isinstance(out, tuple) else (out,)
        pieces.append(tuple(np.array(o, dtype=np.float64, copy=True) for o in outputs))
    # a copy where padding is cut off: users get arrays that own their data
    joined = tuple(
        whole if whole.shape[0] == n else whole[:n].copy()
        for whole in (np.concatenate(p) for p in zip(*pieces, strict=True))
    )
    return joined if len(joined) > 1 else joined[0]
