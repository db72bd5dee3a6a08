"""What Dask workers run for the chunked EM route, in a module of its own.

A worker imports the module of every function it is sent.  These functions live
apart from :mod:`latentlab.estimators._chunked` because importing anything under
``latentlab.estimators`` first imports every estimator (scikit-learn, SciPy, pandas:
seconds per worker process, and a slower shutdown); here a worker needs only NumPy,
JAX and the model modules.  The client calls the same functions for memmap, h5py and
zarr sources, so every route shares one implementation.  The Gaussian latent models'
E-step over such rows (``gaussian_rows``) is a model module's, and workers import it
from there: :mod:`latentlab.models._gaussian_latent_chunked`.
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from latentlab.inference.chunked import Moments, block_moments
from latentlab.inference.sharding import shard_rows

__all__ = ["mixture_rows", "pilot_mean", "summarise_block", "summarise_chunk"]


def summarise_chunk(X, pilot, offset):
    """The summary of one chunk of raw rows (float64), rows numbered from ``offset``:
    column moments, moments of the complete rows, the sums of the rows with missing
    entries and their indices, and each column's (largest, smallest) observed value
    (NaN where none), for the magnitude check that squares cannot make (a spread of
    1e-200 has a variance of 0)."""
    n, d = X.shape
    extremes = (np.fmax.reduce(X, axis=0), np.fmin.reduce(X, axis=0))
    if np.isfinite(X).all():
        # complete chunk (the common case): one product; the columns' moments are
        # the scatter's diagonal
        complete = block_moments(X - pilot)
        columns = Moments(np.full(d, float(n)), complete.mean, np.diag(complete.second).copy())
        zeros = [np.zeros(d), np.zeros((d, d)), np.zeros((d, d)), np.zeros((d, d)), np.zeros(d)]
        return columns, complete, 0, zeros, np.zeros(0, np.int64), extremes
    if np.isinf(X).any():
        raise ValueError("Input X contains infinity or a value too large for dtype('float64').")
    mask = ~np.isnan(X)
    observed_rows = mask.any(axis=1)
    if not observed_rows.all():
        empty = offset + np.flatnonzero(~observed_rows)
        raise ValueError(
            f"X has row(s) with every entry missing (NaN): rows "
            f"{', '.join(map(str, empty[:10]))}. Drop them; they carry no information."
        )
    Xp = np.where(mask, X - pilot, 0.0)
    count = mask.sum(axis=0).astype(np.float64)
    mean = Xp.sum(axis=0) / np.where(count > 0, count, 1.0)
    second = np.where(mask, Xp - mean, 0.0)
    columns = Moments(count, mean, np.einsum("ij,ij->j", second, second))
    complete = mask.all(axis=1)
    Xz, m = Xp[~complete], mask[~complete].astype(np.float64)
    sums = [Xz.sum(axis=0), Xz.T @ Xz, Xz.T @ m, m.T @ m, m.sum(axis=0)]
    rows = offset + np.flatnonzero(~complete)
    return columns, block_moments(Xp[complete]), int(Xz.shape[0]), sums, rows, extremes


def pilot_mean(first):
    mask = ~np.isnan(first)
    count = mask.sum(axis=0)
    total = np.where(mask, first, 0.0).sum(axis=0)
    return np.where(count > 0, total / np.maximum(count, 1), 0.0)


def summarise_block(block, pilot, offset):
    return summarise_chunk(np.asarray(block, np.float64), pilot, offset)


@partial(jax.jit, static_argnames="covariance_type")
def _complete_sums(params, X, row_mask, covariance_type):
    """The mixture's complete-row statistics summed over the leading axis of X
    (calls, rows, d) inside one program, as the in-memory E-step's scan does."""
    from latentlab.models import gmm

    chunk = partial(gmm._complete_chunk, covariance_type=covariance_type)
    return gmm._sum_over_chunks(chunk, params, (X, row_mask))


def mixture_rows(
    X, *, params, shift, unit, covariance_type, dtype, rows_per_call, mesh=None, calls=None
):
    """Mixture statistics (count, sum_dx, sum_dxx) and log-likelihood of the rows of X
    (raw, float64), standardised as the in-memory fit does; complete rows and rows
    with missing entries by their jitted chunk functions at fixed row counts (split
    over ``mesh``'s devices when given).

    ``calls``: the complete rows go through one compiled scan per ``calls`` x
    ``rows_per_call[0]`` rows (zero-weight padding) instead of one call per
    ``rows_per_call[0]`` rows; float64 on one device only, where the scan adds in
    float64 in the same order as the host would.
    """
    from latentlab.models import gmm

    observed = ~np.isnan(X)
    Z = np.where(observed, (X - shift) / unit, 0.0)
    complete = observed.all(axis=1)
    d = X.shape[1]
    complete_rows, missing_rows = rows_per_call
    with jax.enable_x64(dtype == np.float64), jax.default_matmul_precision("highest"):
        outputs = []  # dispatched asynchronously, read back (and added in float64) at the end

        def add(fn, rows, *arrays):
            for start in range(0, arrays[0].shape[0], rows):
                padded = []
                for a in arrays:
                    part = np.zeros((rows, *a.shape[1:]), dtype)
                    piece = a[start : start + rows]
                    part[: len(piece)] = piece
                    padded.append(part if mesh is None else shard_rows(part, mesh))
                outputs.append(
                    jax.tree.leaves(fn(params, *padded, covariance_type=covariance_type))
                )

        if calls is not None and mesh is None and np.dtype(dtype) == np.float64:
            # one program call per block of rows: per-call dispatch and read-back cost
            # as much as the arithmetic at 2048 rows a call
            Zc, size = Z[complete], calls * complete_rows
            for start in range(0, Zc.shape[0], size):
                piece = Zc[start : start + size]
                block, weight = np.zeros((size, d), dtype), np.zeros(size, dtype)
                block[: len(piece)], weight[: len(piece)] = piece, 1.0
                out = _complete_sums(
                    params,
                    block.reshape(calls, complete_rows, d),
                    weight.reshape(calls, complete_rows),
                    covariance_type=covariance_type,
                )
                outputs.append(jax.tree.leaves(out))
        else:
            add(gmm._complete_chunk, complete_rows, Z[complete], np.ones(int(complete.sum())))
        add(gmm._missing_chunk, missing_rows, Z[~complete], observed[~complete])
        if not outputs:  # no rows: zeros of the statistics' shapes
            shapes = jax.eval_shape(
                partial(gmm._complete_chunk, covariance_type=covariance_type),
                params,
                np.zeros((complete_rows, d), dtype),
                np.zeros(complete_rows, dtype),
            )
            return [np.zeros(leaf.shape) for leaf in jax.tree.leaves(shapes)]
        total = [np.zeros(np.shape(leaf)) for leaf in outputs[0]]
        for out in outputs:
            for i, leaf in enumerate(out):
                total[i] = total[i] + np.asarray(leaf, np.float64)
    return total
