"""The chunked route of the EM estimators: data read in row chunks (memmap, h5py,
zarr) or held as a Dask array.

``fit`` makes one pass over the data to summarise it -- per-feature observed moments,
the complete rows' (count, mean, scatter) merged chunk by chunk with Chan et al.'s
update about a pilot mean from the first chunk, and the mean-imputed sums of the rows
with missing entries for the PCA start -- then runs the estimator's own compiled EM
program on those summaries.  Each E-step asks the host (through
:func:`latentlab.inference.chunked.host_sum`) for the statistics of the rows with
missing entries, which it reads again and passes through one jitted chunk function
at a fixed number of rows (the model's
:class:`~latentlab.models.gaussian_latent.GaussianRowsPass`).  The driver, its
starts and its SQUAREM arithmetic are the in-memory program's, so parameters and
trace equal the in-memory fit's to round-off (the mixture's k-means start sees every
row, as in memory, up to :data:`~latentlab._shapes.START_BYTES`; the mixture's own
chunked fit is ``GaussianMixture._fit_chunked``).

Rows an E-step revisits (PPCA/FA: those with missing entries; the mixture: every
row) that fit in ``source.resident_rows`` are instead read once and held in the
program, which is then the in-memory one: small sources pay no host round trip per
E-step (:data:`latentlab._shapes.RESIDENT_BYTES`).

Row outputs (``score_samples``, ``transform``) of a Dask array are Dask arrays.
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np
import scipy.sparse as sp

from latentlab._chunk_tasks import pilot_mean, summarise_block, summarise_chunk
from latentlab._shapes import START_BYTES
from latentlab._validation import check_column_scales
from latentlab.closed_form.eigensolvers import one_blas_thread
from latentlab.inference.chunked import (
    Moments,
    RowChunks,
    merge_moments,
    register,
)
from latentlab.inference.sharding import row_mesh
from latentlab.models.gaussian_latent import (
    CompleteSummary,
    GaussianData,
    GaussianRowsPass,
    OutOfCoreRows,
    missing_row_blocks,
)

__all__ = [
    "GaussianSummary",
    "fit_gaussian_latent",
    "forget_feature_names",
    "map_imputation",
    "map_row_output",
    "read_all",
    "source_mesh",
    "start_rows",
    "summarise_gaussian",
]

# ----------------------------------------------------------------------------- summary


class GaussianSummary:
    """One pass over a source: what the Gaussian latent E-step and its start need.

    Sums are in coordinates shifted by ``pilot`` (the first chunk's observed column
    means) and merged chunk by chunk; :meth:`about_mean` re-expresses them about the
    observed column means, as the in-memory route takes them.
    """

    def __init__(self, d, pilot):
        self.pilot = pilot
        self.columns = Moments(np.zeros(d), np.zeros(d), np.zeros(d))
        self.complete = Moments(0.0, np.zeros(d), np.zeros((d, d)))
        # rows with missing entries, in pilot coordinates, 0 where missing: sums of
        # x, x x^T, x m^T, m m^T and m (m the observed mask), and their indices
        self.n_missing_rows = 0
        self.sums = [np.zeros(d), np.zeros((d, d)), np.zeros((d, d)), np.zeros((d, d)), np.zeros(d)]
        self.missing_rows = []
        self.parts_with_missing = []  # which chunks (Dask blocks) hold such rows
        self.top, self.bottom = np.full(d, np.nan), np.full(d, np.nan)  # observed extremes

    def add(self, part):
        columns, complete, n_missing, sums, rows, (top, bottom) = part
        self.top, self.bottom = np.fmax(self.top, top), np.fmin(self.bottom, bottom)
        if n_missing:
            self.parts_with_missing.append(len(self.missing_rows))
        self.columns = merge_moments(self.columns, columns)
        self.complete = merge_moments(self.complete, complete)
        self.n_missing_rows += n_missing
        self.sums = [a + b for a, b in zip(self.sums, sums, strict=True)]
        self.missing_rows.append(rows)

    def about_mean(self):
        """``(shift, column_variance, complete (n, sum_x, sum_xx), start (sum_x, sum_xx),
        observed counts of the rows with missing entries)`` about the observed means."""
        count = self.columns.count
        empty = np.flatnonzero(count == 0)
        if empty.size:
            raise ValueError(
                f"X has {empty.size} column(s) with every entry missing (NaN): columns "
                f"{', '.join(map(str, empty[:10]))}. Drop them before fitting."
            )
        c = self.columns.mean  # observed means, pilot coordinates
        column_variance = np.maximum(self.columns.second / count, 0.0)
        # the in-memory routes' magnitude check, from the pass's column extremes
        magnitude = np.fmax(np.abs(self.top), np.abs(self.bottom))
        check_column_scales(magnitude, self.top - self.bottom, int(count.sum()))
        n_c = self.complete.count
        delta = self.complete.mean - c
        complete = (n_c, n_c * delta, self.complete.second + n_c * np.outer(delta, delta))
        # x' = x - m * c on the observed entries (m the mask): expand the products
        s1, s2, g, h, m = self.sums
        start_x = s1 - m * c
        start_xx = s2 - g * c[None, :] - c[:, None] * g.T + c[:, None] * h * c[None, :]
        return self.pilot + c, column_variance, complete, (start_x, start_xx), m


def summarise_gaussian(source: RowChunks) -> GaussianSummary:
    """One pass over ``source`` (sequential chunks, or Dask blocks in parallel).

    The chunks' (rows x d) products run on one BLAS thread (in this process: the
    chunk loop and Dask's threaded scheduler, whose blocks are the parallelism):
    right after a compiled program, a threaded product can wait 0.01-0.7 s on
    threads that XLA's pool holds (one 10^4 x 50 product on a loaded 2-core
    machine), against 1 ms on one thread.  At 10^5 x 50 rows the pass took 23 ms
    this way against 57 ms before (threaded, centred copies), quiet machine.
    """
    # values whose squares overflow make the sums inf or NaN on the way; the magnitude
    # check in about_mean then refuses them by name, so NumPy's warnings are noise
    with one_blas_thread(), np.errstate(over="ignore", invalid="ignore"):
        return _summarise(source)


def _summarise(source: RowChunks) -> GaussianSummary:
    d = source.shape[1]
    if source.dask:
        blocks = source.source.to_delayed().ravel()
        pilot = pilot_mean(np.asarray(blocks[0].compute(), np.float64))
        offsets = np.concatenate([[0], np.cumsum(source.source.chunks[0])[:-1]])
        import dask

        parts = dask.compute(
            *[
                dask.delayed(summarise_block)(b, pilot, int(o))
                for b, o in zip(blocks, offsets, strict=True)
            ]
        )
    else:
        slices = source.slices()
        parts = []
        pilot = None
        for start, stop in slices:
            X = source.read(start, stop)
            if pilot is None:
                pilot = pilot_mean(X)
            parts.append(summarise_chunk(X, pilot, start))
    summary = GaussianSummary(d, pilot)
    for part in parts:
        summary.add(part)
    return summary


# ----------------------------------------------------------------------------- fit


def source_mesh(est, source: RowChunks):
    """The mesh of ``est.devices`` for the host's chunk functions (None: one device)."""
    mesh = row_mesh(getattr(est, "devices", None))
    if mesh is not None and source.dask:
        raise ValueError(
            f"{type(est).__name__}(devices={est.devices!r}) cannot take a Dask array: Dask "
            "places the work on its workers; leave devices=None (each worker uses its "
            "default device)"
        )
    return mesh


def forget_feature_names(est, d):
    est.n_features_in_ = d
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_


def fit_gaussian_latent(est, source: RowChunks):
    """``est.fit`` (PPCA, FactorAnalysis, BayesianPCA) on a chunked source."""
    name = type(est).__name__
    n, d = source.shape
    if n < 2:
        raise ValueError(f"{name} needs at least 2 samples, got n_samples={n}")
    if est.method not in ("em", "closed_form"):
        raise ValueError(
            f"{name}(method={est.method!r}) needs X in memory; out-of-core and Dask "
            "inputs are fitted by method='em'"
        )
    if isinstance(est.n_components, str):
        raise ValueError(f"{name}(n_components={est.n_components!r}) needs X in memory")
    K = est._check_settings(n, d)
    mesh = source_mesh(est, source)
    summary = summarise_gaussian(source)
    shift, column_variance, complete, start, counts = summary.about_mean()
    forget_feature_names(est, d)
    with est._precision():
        dtype = jax.dtypes.canonicalize_dtype(np.float64)
        n_c, sum_x, sum_xx = complete
        summarised = CompleteSummary(*(np.asarray(v, dtype) for v in (n_c, sum_x, sum_xx)))
        missing = True if summary.n_missing_rows else None
        if 0 < summary.n_missing_rows <= source.resident_rows:
            # few enough to hold: the in-memory program on them, no host round trips
            X = source.gather(np.concatenate(summary.missing_rows))
            mask = ~np.isnan(X)
            X_inc, m_inc = missing_row_blocks(
                np.where(mask, X - shift, 0.0), mask.astype(float), 1024
            )
            data = GaussianData(summarised, X_inc.astype(dtype), m_inc.astype(dtype))
            return est._fit_summarised(data, n, K, column_variance, shift, X=None, mask=missing)
        rows_pass = GaussianRowsPass(
            source, shift, summary.missing_rows, summary.parts_with_missing, dtype, mesh
        )
        with register(rows_pass) as token:
            rows = None
            if summary.n_missing_rows:
                rows = OutOfCoreRows(
                    token=token,
                    n_rows=np.asarray(summary.n_missing_rows, np.int32),
                    scale=np.ones(d, dtype),
                    count=np.asarray(counts, dtype),
                    start_sum_x=np.asarray(start[0], dtype),
                    start_sum_xx=np.asarray(start[1], dtype),
                )
            empty = np.zeros((0, 32, d), dtype)
            data = GaussianData(summarised, empty, empty, rows)
            return est._fit_summarised(data, n, K, column_variance, shift, X=None, mask=missing)


def start_rows(source: RowChunks, every_row: bool) -> np.ndarray:
    """The rows a mixture's start is made from (float64): with ``every_row``, all of
    them when they take at most :data:`~latentlab._shapes.START_BYTES`, else that many
    rows evenly spaced over the source; otherwise the first chunk."""
    n, d = source.shape
    if not every_row:
        return source.read(0, min(n, source.chunk_size))
    budget = max(START_BYTES // (8 * d), 1)
    if n <= budget:
        return read_all(source)
    return source.gather(np.unique(np.linspace(0, n - 1, budget).astype(np.int64)))


def read_all(source: RowChunks) -> np.ndarray:
    """Every row of a small source as one float64 NumPy array."""
    if source.dask:
        return np.asarray(source.source.compute(), np.float64)
    return source.read(0, source.shape[0])


# ----------------------------------------------------------------------------- outputs


def map_row_output(est, method, X, n_columns=None, dtype=np.float64):
    """``method`` (a bound estimator method on NumPy rows) over a Dask array's row
    blocks: a Dask array of shape (n,) or (n, n_columns) and type ``dtype``."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(est)
    n_features = est.n_features_in_
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D array (n_samples, n_features), got shape {X.shape}")
    if X.shape[1] != n_features:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(est).__name__} is expecting "
            f"{n_features} features as input."
        )
    X = X.rechunk({1: -1})
    if n_columns is None:
        return X.map_blocks(_apply, method, drop_axis=1, dtype=dtype)
    return X.map_blocks(_apply, method, chunks=(X.chunks[0], (n_columns,)), dtype=dtype)


def _apply(block, method):
    if sp.issparse(block):  # SciPy sparse blocks (pLSA's counts) stay sparse
        return method(block)
    return method(np.asarray(block, np.float64))


def map_imputation(est, X, return_std: bool):
    """``est.impute`` over a Dask array's row blocks: the filled array, and with
    ``return_std`` the conditional standard deviations (each a Dask array)."""
    d = est.n_features_in_
    filled = map_row_output(est, est.impute, X, n_columns=d)
    if not return_std:
        return filled
    std = map_row_output(est, partial(_imputation_std, est), X, n_columns=d)
    return filled, std


def _imputation_std(est, block):
    return est.impute(block, return_std=True)[1]
