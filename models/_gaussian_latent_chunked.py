"""The E-step of the Gaussian latent models over rows read from a source (a memmap,
h5py or zarr array, or a Dask array; :class:`latentlab.inference.chunked.RowChunks`)
rather than held in the fit program (:mod:`latentlab.models.gaussian_latent`, which
re-exports these names).

EM's program asks the host for the statistics of the rows with missing entries
(:func:`latentlab.inference.chunked.host_sum`, ``OutOfCoreRows`` in the data):
:class:`GaussianRowsPass` reads those rows again, chunk by chunk (or Dask block by
block, on the workers) and passes them through one jitted chunk function at a fixed
number of rows (:func:`gaussian_rows`).  The summary pass that comes first, and the
fit that registers the pass, are the estimators' (``latentlab.estimators._chunked``).
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from latentlab._shapes import E_STEP_ROWS
from latentlab.inference.chunked import RowChunks
from latentlab.inference.sharding import shard_rows
from latentlab.models._gaussian_latent_moments import _chunk_stats

# no __all__: a private module; latentlab.models.gaussian_latent re-exports its names

_chunk_stats_jit = jax.jit(_chunk_stats)


def gaussian_rows(X, *, W, mu, precision, scale, shift, dtype, rows_per_call, mesh=None):
    """Regression statistics and log-likelihood of the rows of X (raw, float64) that
    have missing entries, by the jitted chunk function at ``rows_per_call`` rows
    (split over ``mesh``'s devices when given)."""
    mask = ~np.isnan(X)
    keep = ~mask.all(axis=1)
    mask = mask[keep].astype(np.float64)
    Xz = np.where(mask > 0, (X[keep] - shift) / scale, 0.0)
    K1 = W.shape[1] + 1
    d = X.shape[1]
    total = [np.zeros(d), np.zeros(d), np.zeros((d, K1)), np.zeros((d, K1, K1)), np.zeros(())]
    with jax.enable_x64(dtype == np.float64), jax.default_matmul_precision("highest"):
        outputs = []  # dispatched asynchronously, read back (and added in float64) at the end
        for start in range(0, Xz.shape[0], rows_per_call):
            rows = np.zeros((rows_per_call, d), dtype)
            part = np.zeros((rows_per_call, d), dtype)
            piece = Xz[start : start + rows_per_call]
            rows[: len(piece)] = piece
            part[: len(piece)] = mask[start : start + rows_per_call]
            if mesh is not None:
                rows, part = shard_rows(rows, mesh), shard_rows(part, mesh)
            stats, loglik = _chunk_stats_jit(W, mu, precision, rows, part)
            outputs.append((*stats, loglik))
        for out in outputs:
            for i, leaf in enumerate(out):
                total[i] = total[i] + np.asarray(leaf, np.float64)
    return tuple(total[:4]), total[4]


class GaussianRowsPass:
    """The host side of the E-step for rows with missing entries (see
    :func:`latentlab.inference.chunked.host_sum`).

    ``missing_rows`` are the indices of those rows, one array per chunk of the source
    (empty where a chunk has none), and ``parts_with_missing`` which chunks (Dask
    blocks) hold any: the summary pass's.
    """

    def __init__(
        self, source: RowChunks, shift, missing_rows, parts_with_missing, dtype, mesh=None
    ):
        self.source = source
        self.mesh = mesh
        self.shift = shift
        # per chunk: a read spans at most one chunk of the source (a memmap's pages
        # touched by one fancy index stay resident until released)
        self.missing_rows = [rows for rows in missing_rows if len(rows)]
        self.dtype = np.dtype(dtype)
        self.blocks = source
        if source.dask and 0 < len(parts_with_missing) < source.source.numblocks[0]:
            # Dask: only the blocks that hold rows with missing entries
            blocks = source.source.blocks[parts_with_missing]
            self.blocks = RowChunks(blocks, chunk_size=source.chunk_size)

    def reduce(self, name, W, mu, precision, scale):
        assert name == "gaussian_rows"
        block_fn = partial(
            gaussian_rows,
            W=W.astype(self.dtype),
            mu=mu.astype(self.dtype),
            precision=precision.astype(self.dtype),
            scale=np.asarray(scale, np.float64),
            shift=self.shift,
            dtype=self.dtype,
            rows_per_call=min(self.source.chunk_size, E_STEP_ROWS),
            mesh=self.mesh,
        )
        if self.source.dask:
            d, K1 = W.shape[0], W.shape[1] + 1
            template = (
                (np.zeros(d), np.zeros(d), np.zeros((d, K1)), np.zeros((d, K1, K1))),
                np.zeros(()),
            )
            stats, loglik = self.blocks.map_reduce(block_fn, template)
            return tuple(stats), loglik
        stats, loglik = None, 0.0
        for rows in self.missing_rows:
            more, more_ll = block_fn(self.source.take(rows))
            stats = (
                more if stats is None else tuple(a + b for a, b in zip(stats, more, strict=True))
            )
            loglik = loglik + more_ll
        return stats, loglik
