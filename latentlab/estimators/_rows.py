"""Row bucketing shared by the EM estimators: few compiles, bounded memory.

JAX compiles once per shape.  Row counts are therefore padded -- to a bucket size
(:func:`~latentlab._shapes.bucket`) up to one chunk, and to a whole
number of fixed-size chunks beyond --
with padding rows that the callee ignores (row mask 0, or an all-zero observed mask).
Cross-validation folds, single rows and large arrays then reuse a handful of
compiled programs, and no call holds more than one chunk's intermediates.
"""

from __future__ import annotations

import numpy as np

from latentlab._shapes import bucket, chunked, pad_rows, padded_size
from latentlab.estimators.base import to_numpy

__all__ = ["ROWS_PER_CALL", "bucket", "padded_size", "pad_rows", "chunked", "map_row_chunks"]

ROWS_PER_CALL = 4096  # rows per call of a row-wise map: bounds its intermediates


def map_row_chunks(fn, *row_arrays, chunk: int = ROWS_PER_CALL):
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
