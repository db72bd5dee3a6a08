"""How the estimators call the jit'd closed forms: compile little, reuse much.

JAX compiles once per input shape, and on CPU XLA spends ~0.3-1 s compiling each of
these programs -- far longer than running them on a small data set.  Two remedies:

* :func:`call` runs small problems (at most
  :data:`latentlab._shapes.QUICK_COMPILE_MAX_WORK` elements) through the quick-compile
  variant of a :class:`~latentlab.inference.programs.Program`.
* :func:`map_rows` pads the number of rows of row-wise maps (transform, score_samples,
  pre-images) up to a bucket, so cross-validation folds, single rows and the many small
  arrays of scikit-learn's checks share one compiled program.

And :func:`to_device` hands NumPy inputs to JAX without its slow host-to-device copy
(on CPU, ``jnp.asarray`` of 40 MB takes ~60 ms; an aligned NumPy copy that JAX then
aliases takes ~8 ms).

Convention: the closed-form functions take their static arguments keyword-only.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from latentlab._shapes import map_rows_bucket as row_bucket
from latentlab._shapes import pad_rows
from latentlab.inference.programs import Program

__all__ = ["call", "map_rows", "row_bucket", "to_device"]


def call(compiled: Program, work: int, *args, **static):
    """``compiled(*args, **static)``, through its quick-compile variant when ``work`` (a
    size estimate in elements, e.g. ``X.size`` or ``n**2`` for a Gram matrix) is small
    (see :mod:`latentlab.inference.programs`)."""
    return compiled.for_work(work)(*args, **static)


_ALIGNMENT = 64  # XLA:CPU aliases host buffers aligned to this many bytes


def to_device(X: np.ndarray) -> jax.Array:
    """A JAX array with X's values, in the precision of the current x64 context.

    float64 input under x64: copy into a 64-byte aligned buffer with NumPy (unless X
    already is one) and let JAX alias it (JAX keeps the buffer alive).  Otherwise, the
    ordinary conversion.
    """
    X = np.asarray(X)
    if X.dtype != np.float64 or jax.dtypes.canonicalize_dtype(np.float64) != np.float64:
        return jnp.asarray(X)
    if X.ctypes.data % _ALIGNMENT or not X.flags.c_contiguous:
        raw = np.empty(X.nbytes + _ALIGNMENT, dtype=np.uint8)
        start = -raw.ctypes.data % _ALIGNMENT
        aligned = raw[start : start + X.nbytes].view(np.float64).reshape(X.shape)
        np.copyto(aligned, X)
        X = aligned
    return jax.device_put(X, may_alias=True)


def map_rows(jitted, X: np.ndarray, *args, work_per_row: int | None = None, **static):
    """``jitted(X_padded, *args, **static)[:n]`` with X padded by zero rows to
    :func:`row_bucket` rows.  Only for functions whose output rows depend on their own
    input row alone."""
    n = X.shape[0]
    padded = row_bucket(n)
    X = pad_rows(X, padded)
    per_row = int(np.prod(X.shape[1:])) if work_per_row is None else work_per_row
    return call(jitted, padded * per_row, to_device(X), *args, **static)[:n]
