"""Row bucketing shared by the EM estimators: few compiles, bounded memory.

JAX compiles once per shape.  Row counts are therefore padded -- to a bucket size
(:func:`~latentlab.inference.summaries.bucket`) up to one chunk, and to a whole
number of fixed-size chunks beyond --
with padding rows that the callee ignores (row mask 0, or an all-zero observed mask).
Cross-validation folds, single rows and large arrays then reuse a handful of
compiled programs, and no call holds more than one chunk's intermediates.
"""

from __future__ import annotations

import numpy as np

from latentlab.estimators.base import to_numpy
from latentlab.inference.summaries import bucket

__all__ = ["bucket", "padded_size", "pad_rows", "chunked", "map_row_chunks"]


def padded_size(n: int, chunk: int) -> tuple[int, int]:
    """``(rows per chunk, number of chunks)`` that hold ``n`` rows."""
    if n <= chunk:
        return bucket(n), 1
    return chunk, -(-n // chunk)


def pad_rows(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with zero rows appended up to ``rows`` rows."""
    extra = rows - a.shape[0]
    if extra == 0:
        return a
    return np.concatenate([a, np.zeros((extra, *a.shape[1:]), dtype=a.dtype)])


def chunked(a: np.ndarray, chunk: int) -> np.ndarray:
    """``a`` (n, ...) zero-padded and reshaped to (n_chunks, rows per chunk, ...)."""
    size, count = padded_size(a.shape[0], chunk)
    return pad_rows(a, size * count).reshape(count, size, *a.shape[1:])


def map_row_chunks(fn, *row_arrays, chunk: int = 4096):
    """``fn(*padded_chunk)`` over row chunks of ``row_arrays``, outputs concatenated
    and cut back to ``n`` rows; every output of ``fn`` must be row-wise.

    Returns a tuple of float64 NumPy arrays (or one array if ``fn`` returns one).
    """
    n = row_arrays[0].shape[0]
    size, count = padded_size(n, chunk)
    pieces = []
    for c in range(count):
        part = [pad_rows(a[c * size : (c + 1) * size], size) for a in row_arrays]
        out = fn(*part)
        pieces.append(tuple(to_numpy(o) for o in (out if isinstance(out, tuple) else (out,))))
    # a copy where padding is cut off: users get arrays that own their data
    joined = tuple(
        whole if whole.shape[0] == n else whole[:n].copy()
        for whole in (np.concatenate(p) for p in zip(*pieces, strict=True))
    )
    return joined if len(joined) > 1 else joined[0]
