"""Exact EM over row chunks held outside memory: NumPy memmaps, h5py/zarr arrays, Dask.

EM statistics are sums over rows (DESIGN.md section 4), so an E-step over data that
do not fit in memory is a sum of the same E-step over row chunks.  This module is the
model-agnostic part:

* :class:`RowChunks` / :func:`row_source`: which inputs take this route, and how they
  are read (sequential slices of ``chunk_size`` rows, or Dask blocks; a memmap's file
  is checked before each read, :func:`check_mapped_file`, since reading past the end
  of a truncated file kills the process);
* :func:`merge_moments`: Chan, Golub & LeVeque's (1979) pairwise update of (count,
  mean, centred second moment), so one pass in float64 about a pilot mean gives sums
  that do not depend on the chunking and survive large means;
* :func:`host_sum`: a ``jax.pure_callback`` through which a compiled EM program
  (:func:`latentlab.inference.em.run_em`, unchanged) asks the host for the statistics
  of the rows kept outside it.  The host maps a model's jitted chunk function over
  the chunks and adds the results in float64 (Dask: ``map_blocks`` and a tree
  reduction).  The EM driver, its SQUAREM steps and its trace are therefore the very
  same program as in memory.

Dask is imported only when a Dask array is passed.
"""

from __future__ import annotations

import itertools
import mmap
import threading
from typing import Any, NamedTuple

import jax
import numpy as np

from latentlab._shapes import CHUNKED_MIN_BYTES, DEFAULT_CHUNK_BYTES, RESIDENT_BYTES
from latentlab.inference.summaries import scatter_about_mean

__all__ = [
    "RowChunks",
    "Moments",
    "merge_moments",
    "block_moments",
    "row_source",
    "check_chunk_size",
    "check_mapped_file",
    "is_dask",
    "register",
    "host_sum",
]


def is_dask(X) -> bool:
    """Whether X is a ``dask.array.Array`` (without importing Dask)."""
    return type(X).__module__.startswith("dask.") and hasattr(X, "map_blocks")


def _is_scipy_sparse(X) -> bool:
    return type(X).__module__.startswith("scipy.sparse")


def _is_store(X) -> bool:
    # h5py datasets and zarr arrays: row-sliceable, with a shape, not in memory
    module = type(X).__module__
    return module.startswith(("h5py", "zarr")) and hasattr(X, "shape")


class RowChunks:
    """Marks ``source`` for chunked exact EM and sets the rows read per chunk.

    Parameters
    ----------
    source : array-like with ``.shape`` (n_samples, n_features) and row slicing
        A NumPy memmap or array, an h5py/zarr array, or a ``dask.array.Array``.
    chunk_size : int, optional
        Rows per chunk; the jitted chunk functions are compiled for this many rows
        (padded; at most 1024 for the per-row E-step), once.  Default: about 16 MB of
        float64 rows; for a Dask array, its largest row block.  Rows that the E-step
        revisits each iteration are held in the compiled program when there are at
        most ``resident_rows`` of them: one chunk's rows for a given ``chunk_size``,
        with the default also up to :data:`~latentlab._shapes.RESIDENT_BYTES` of float64 rows.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> from latentlab.inference.chunked import RowChunks
    >>> X = np.random.default_rng(0).normal(size=(500, 4))
    >>> latentlab.PPCA(1).fit(RowChunks(X, chunk_size=128)).components_.shape
    (1, 4)
    """

    def __init__(self, source, chunk_size: int | None = None):
        if isinstance(source, RowChunks):
            source = source.source
        shape = getattr(source, "shape", None)
        if shape is None:
            source = np.asarray(source)
            shape = source.shape
        elif _is_scipy_sparse(source) and source.format != "csr":
            source = source.tocsr()  # COO cannot be sliced by rows; CSC slices slowly
        if len(shape) != 2:
            raise ValueError(
                f"Expected a 2-D array (n_samples, n_features), got shape {tuple(shape)}"
            )
        n, d = (int(s) for s in shape)
        if d < 1:
            raise ValueError(f"X has 0 features; at least 1 is required (shape {(n, d)})")
        automatic = chunk_size is None
        if chunk_size is None and is_dask(source):
            chunk_size = max(source.chunks[0]) if n else 1  # the blocks' rows
        if chunk_size is None:
            chunk_size = max(256, DEFAULT_CHUNK_BYTES // (8 * d))
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        if is_dask(source) and source.numblocks[1] != 1:
            source = source.rechunk({1: -1})  # whole rows per block
        self.source = source
        self.chunk_size = int(chunk_size)
        self.shape = (n, d)
        resident = RESIDENT_BYTES // (8 * d) if automatic else 0
        self.resident_rows = max(self.chunk_size, resident)

    @property
    def dask(self) -> bool:
        return is_dask(self.source)

    def slices(self):
        """Row ranges ``(start, stop)`` of the sequential chunks."""
        n = self.shape[0]
        return [(s, min(s + self.chunk_size, n)) for s in range(0, n, self.chunk_size)]

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a float64 NumPy array of their own."""
        self._check_mapped(start, stop)
        out = np.array(self.source[start:stop], dtype=np.float64, copy=True)
        self._release()
        return out

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The given rows (sorted indices) as a float64 NumPy array."""
        source = self.source
        if hasattr(source, "oindex"):  # zarr
            return np.asarray(source.oindex[rows, :], dtype=np.float64)
        if len(rows):
            self._check_mapped(int(rows[0]), int(rows[-1]) + 1)
        out = np.asarray(source[rows], dtype=np.float64)
        self._release()
        return out

    def _check_mapped(self, start: int, stop: int) -> None:
        """:func:`check_mapped_file` on rows ``start:stop`` of an array source (a
        view: slicing an h5py/zarr source would read it)."""
        if isinstance(self.source, np.ndarray):
            check_mapped_file(self.source[start:stop])

    def gather(self, rows: np.ndarray) -> np.ndarray:
        """The given rows (sorted indices into the whole source) as float64 NumPy,
        read chunk by chunk (a Dask source: one compute of its fancy index)."""
        rows = np.asarray(rows, np.int64)
        d = self.shape[1]
        if self.dask:
            return np.asarray(self.source[rows].compute(), np.float64).reshape(-1, d)
        parts = [np.zeros((0, d))]
        for start, stop in self.slices():
            lo, hi = np.searchsorted(rows, (start, stop))
            if hi > lo:
                parts.append(self.take(rows[lo:hi]))
        return np.concatenate(parts)

    def _release(self):
        """Drop a memmap's pages from this process's resident set after a read.

        Pages of a file mapping that were read stay resident (and count in RSS) until
        the kernel needs the memory, so RSS would grow with n; the file's page cache
        is unaffected.  Shared mappings only: on a copy-on-write one ('c') this would
        discard the user's changes.
        """
        if not isinstance(self.source, np.memmap) or self.source.mode == "c":
            return
        mapping = _file_mapping(self.source)
        if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
            try:
                mapping[0].madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):  # closed or unsupported: only a memory hint
                pass

    def map_reduce(self, block_fn, template):
        """``sum over blocks of block_fn(block)`` for a Dask source: one task per
        block, combined by Dask's tree reduction (``sum(split_every=8)``).

        ``block_fn`` returns a pytree shaped like ``template`` (NumPy); the sum is
        formed as one flat float64 vector per block.
        """
        import dask.array as da

        leaves, treedef = jax.tree.flatten(template)
        sizes = [int(np.size(leaf)) for leaf in leaves]
        width = sum(sizes)
        blocks = self.source.map_blocks(
            _flat_block,
            block_fn,
            dtype=np.float64,
            chunks=((1,) * self.source.numblocks[0], (width,)),
        )
        total = np.asarray(da.sum(blocks, axis=0, split_every=8).compute(), np.float64)
        pieces = np.split(total, np.cumsum(sizes)[:-1])
        return jax.tree.unflatten(
            treedef, [p.reshape(np.shape(leaf)) for p, leaf in zip(pieces, leaves, strict=True)]
        )

    def blocks_compute(self, block_fn) -> list:
        """``[block_fn(block) for each Dask block]`` in row order (host objects)."""
        import dask

        delayed = [dask.delayed(block_fn)(b) for b in self.source.to_delayed().ravel()]
        return list(dask.compute(*delayed))


def _file_mapping(array) -> tuple[mmap.mmap, np.memmap] | None:
    """The ``mmap`` behind a NumPy array and the ``np.memmap`` that maps it (the
    array itself or an array its ``.base`` chain leads to), or None."""
    while isinstance(array, np.ndarray):
        parent = array.base
        if isinstance(parent, mmap.mmap):
            return (parent, array) if isinstance(array, np.memmap) else None
        array = parent
    return None


def check_mapped_file(array) -> None:
    """Refuse to read a memory-mapped array whose file is now shorter than it.

    Touching a page of a mapping past the end of its file kills the process with
    SIGBUS, which no ``try`` can catch: a file truncated while a fit reads it (by
    another process, or a rewrite of the file) would take the whole process down.
    The file's current size (``fstat`` of the mapping's own descriptor, so a renamed
    or replaced path does not matter) is compared with the bytes ``array`` spans; a
    shortfall is a ``ValueError`` naming the file.  Anything else passes.  The file
    can still shrink between this check and the read, but a fit checks before every
    chunk.
    """
    mapping = _file_mapping(array)
    if mapping is None or array.size == 0:
        return
    mapped, memmap = mapping
    try:
        size = mapped.size()
    except (OSError, ValueError):  # closed, or no size to ask: nothing to compare
        return
    # the memmap's first byte is at file offset memmap.offset
    _, end = np.lib.array_utils.byte_bounds(array)
    start = memmap.__array_interface__["data"][0]
    needed = memmap.offset + (end - start)
    if size < needed:
        raise ValueError(
            f"{memmap.filename or 'the memory-mapped file'}: the file is {size} bytes but "
            f"the rows being read need {needed}; it was truncated while in use (reading "
            "past its end would kill the process with SIGBUS)"
        )


def _flat_block(block, block_fn):
    out = block_fn(np.asarray(block, dtype=np.float64))
    leaves = jax.tree.leaves(out)
    return np.concatenate([np.ravel(np.asarray(leaf, np.float64)) for leaf in leaves])[None, :]


def check_chunk_size(chunk_size) -> None:
    """Refuse a ``chunk_size`` that is neither None nor a positive integer."""
    if chunk_size is None:
        return
    if isinstance(chunk_size, (bool, np.bool_)) or not isinstance(chunk_size, (int, np.integer)):
        raise ValueError(f"chunk_size must be a positive integer or None, got {chunk_size!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer or None, got {chunk_size!r}")


def row_source(
    X, min_bytes: int = CHUNKED_MIN_BYTES, chunk_size: int | None = None
) -> RowChunks | None:
    """``X`` as a :class:`RowChunks` if it takes the chunked route, else None.

    The chunked route: a :class:`RowChunks`; a ``dask.array.Array``; an h5py or zarr
    array; a ``np.memmap`` of at least ``min_bytes`` (the memmap type says the data
    live on disk; the size threshold keeps small ones, such as joblib's copies for
    parallel workers, on the in-memory route with every method).

    ``chunk_size`` (an estimator's setting; None: automatic) sets the rows per chunk,
    overriding a :class:`RowChunks` wrapper's.  It is checked whatever the route.
    """
    check_chunk_size(chunk_size)
    if isinstance(X, RowChunks):
        return X if chunk_size is None else RowChunks(X.source, chunk_size=chunk_size)
    if is_dask(X) or _is_store(X):
        return RowChunks(X, chunk_size=chunk_size)
    if isinstance(X, np.memmap) and X.nbytes >= min_bytes:
        return RowChunks(X, chunk_size=chunk_size)
    return None


# ----------------------------------------------------------------------------- moments


class Moments(NamedTuple):
    """Count, mean and centred second moment of a set of vectors (NumPy, float64).

    ``second`` is the scatter matrix ``sum (x - mean)(x - mean)^T`` (d, d) or, for
    per-column moments with their own counts, the vector of centred sums of squares.
    """

    count: Any  # scalar or (d,)
    mean: np.ndarray  # (d,)
    second: np.ndarray  # (d, d) or (d,)


def block_moments(X: np.ndarray) -> Moments:
    """:class:`Moments` of the rows of a complete block (scatter matrix)."""
    n = X.shape[0]
    if n == 0:
        d = X.shape[1]
        return Moments(0.0, np.zeros(d), np.zeros((d, d)))
    mean, scatter = scatter_about_mean(X)  # one BLAS product unless that would cancel
    return Moments(float(n), mean, scatter)


def merge_moments(a: Moments, b: Moments) -> Moments:
    """Chan et al.'s pairwise update: the moments of the union of two sets.

    ``M = M_a + M_b + delta delta^T n_a n_b / n`` with ``delta = mean_b - mean_a``;
    elementwise when the counts are per column.
    """
    n = a.count + b.count
    safe = np.where(n > 0, n, 1.0)
    delta = b.mean - a.mean
    mean = a.mean + delta * (b.count / safe)
    weight = a.count * b.count / safe
    if np.ndim(a.second) == 2:
        second = a.second + b.second + weight * np.outer(delta, delta)
    else:
        second = a.second + b.second + weight * delta**2
    return Moments(n, mean, second)


# ----------------------------------------------------------------------------- callback

_SOURCES: dict[int, Any] = {}
_LOCK = threading.Lock()
_TOKENS = itertools.count(1)


class register:
    """Context manager: makes ``pass_`` reachable from compiled programs by a token.

    ``pass_`` is any object with a ``reduce(name, *arrays)`` method returning a pytree
    of NumPy arrays.  The token is an int32 NumPy scalar passed to the program as
    data, so programs compile once whatever the source.

    An error the host raises while a program runs reaches the caller as JAX's
    runtime error around it; leaving the context raises the host's own error
    instead (a ``ValueError`` about the data stays one).
    """

    def __init__(self, pass_):
        self.pass_ = pass_
        self.failure = None  # the error pass_.reduce raised inside a program
        with _LOCK:
            self.key = next(_TOKENS) % (2**31 - 1)
        self.token = np.asarray(self.key, np.int32)

    def __enter__(self):
        _SOURCES[self.key] = self
        return self.token

    def __exit__(self, exc_type, exc, traceback):
        _SOURCES.pop(self.key, None)
        if exc is not None and self.failure is not None and exc is not self.failure:
            raise self.failure from None
        return False


def _dispatch(name, token, *arrays):
    registered = _SOURCES.get(int(token))
    if registered is None:
        raise RuntimeError("latentlab: a chunked EM program ran outside its data source")
    try:
        return registered.pass_.reduce(name, *(np.asarray(a) for a in arrays))
    except Exception as err:
        registered.failure = err
        raise


def _to_bits(x):
    """A float array as uint32 words (float64: a trailing axis of 2), exactly."""
    return jax.lax.bitcast_convert_type(x, np.uint32) if x.dtype.kind == "f" else x


def _bits_like(spec):
    if np.dtype(spec.dtype).kind != "f":
        return spec
    words = np.dtype(spec.dtype).itemsize // 4
    shape = tuple(spec.shape) + ((words,) if words > 1 else ())
    return jax.ShapeDtypeStruct(shape, np.uint32)


def _from_host_bits(bits, spec):
    if np.dtype(spec.dtype).kind != "f":
        return np.asarray(bits)
    return np.ascontiguousarray(bits).view(spec.dtype).reshape(spec.shape)


def host_sum(name: str, token, arrays, result_like):
    """Inside a compiled program: the statistics ``pass_.reduce(name, *arrays)`` of
    the source registered under ``token``, shaped like ``result_like`` (a pytree of
    arrays).  Under ``vmap`` (EM's several starts) the host is asked once per start.

    Floats cross as uint32 words: the callback runs on a thread outside the caller's
    ``jax.enable_x64`` context, where JAX would round float64 values to float32.
    """
    specs, treedef = jax.tree.flatten(
        jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype), result_like)
    )
    arg_specs = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in arrays]

    def callback(token, *bits):
        host = [_from_host_bits(b, s) for b, s in zip(bits, arg_specs, strict=True)]
        # the host's pytree may use plain tuples: match the leaves in order
        leaves = jax.tree.leaves(_dispatch(name, token, *host))
        out = []
        for value, spec in zip(leaves, specs, strict=True):
            value = np.ascontiguousarray(np.asarray(value, spec.dtype).reshape(spec.shape))
            out.append(value.view(np.uint32).reshape(_bits_like(spec).shape))
        return out

    words = jax.pure_callback(
        callback,
        [_bits_like(s) for s in specs],
        token,
        *[_to_bits(a) for a in arrays],
        vmap_method="sequential",
    )
    leaves = [
        jax.lax.bitcast_convert_type(w, s.dtype) if np.dtype(s.dtype).kind == "f" else w
        for w, s in zip(words, specs, strict=True)
    ]
    return jax.tree.unflatten(treedef, leaves)
