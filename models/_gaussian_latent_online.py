"""Stepwise (online) EM for the Gaussian latent models that stream (PPCA and factor
analysis; :mod:`latentlab.models.gaussian_latent`, which re-exports these names):
the chunk's statistics and the M-step that
:func:`latentlab.inference.online.stepwise_update` (the one stepwise driver, which
says how the running average works) mixes and applies, and the stream's
coordinates, start and saved state.  The estimators' ``partial_fit``
(``GaussianLatentEstimator._stepwise_fit``) validates each chunk and calls these.

The statistics of a chunk are averages over its rows in fixed coordinates set by the
first chunk: centred on its observed column means (the pilot mean, DESIGN section 4)
and, where the model is fitted per-feature standardised (FA), divided by its column
scales.

The running state is public (``online_state_``, a dict of arrays) so a saved model
can go on learning.  The M-step's parameters are kept unrotated there: the
statistics of z are in the frame of the loadings that produced them, and the
canonical rotation reported in ``params_`` would mix frames.
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from latentlab._shapes import ONLINE_ROWS
from latentlab.inference.online import stepwise_update
from latentlab.inference.sharding import shard_rows
from latentlab.models._gaussian_latent_moments import (
    CompleteSummary,
    GaussianData,
    RegressionStats,
)
from latentlab.models._gaussian_latent_start import pca_solution

# no __all__: a private module; latentlab.models.gaussian_latent re-exports its names


# ----------------------------------------------------------------------------- coordinates


def pilot_moments(X, observed):
    """Observed column means and (ddof=0) variances of a chunk."""
    count = observed.sum(axis=0)
    shift = np.where(observed, X, 0.0).sum(axis=0) / count
    centred = np.where(observed, X - shift, 0.0)
    return shift, (centred**2).sum(axis=0) / count


def pilot_coordinates(X, observed):
    """The first chunk's observed column means and variances, a constant feature
    given the typical variance (so nothing starts at zero variance)."""
    shift, variance = pilot_moments(X, observed)
    typical = np.mean(variance) if np.any(variance > 0) else 1.0
    return shift, np.where(variance > 0, variance, typical)


# ----------------------------------------------------------------------------- programs


@partial(jax.jit, static_argnames="module")
def _latent_e_step(module, params, hyper, summary, X, mask):
    """The model's own E-step on complete rows summarised and one block of rows."""
    return module.e_step(params, GaussianData(summary, X[None], mask[None]), hyper)


@partial(jax.jit, static_argnames="module")
def _latent_m_step(module, stats, params, hyper):
    return module.m_step(stats, params, hyper)


@partial(jax.jit, static_argnames=("module", "n_components"))
def _latent_start(module, n, sum_x, sum_xx, hyper, n_components):
    return module.init_from_pca(pca_solution(n, sum_x, sum_xx, n_components), hyper)


def _latent_chunk_stats(module, params, hyper, Z, observed, dtype, mesh=None):
    """Average regression statistics of the rows of Z (coordinates of the state, 0
    where missing) and their summed log-likelihood; each block of rows split over
    ``mesh``'s devices when given (the ``devices`` setting)."""
    n, d = Z.shape
    complete = observed.all(axis=1)
    Zc = Z[complete]
    summary = CompleteSummary(
        np.asarray(Zc.shape[0], dtype), Zc.sum(axis=0).astype(dtype), (Zc.T @ Zc).astype(dtype)
    )
    Zm, mask = Z[~complete], observed[~complete].astype(dtype)
    total, loglik = None, 0.0
    for start in range(0, max(len(Zm), 1), ONLINE_ROWS):
        rows = np.zeros((ONLINE_ROWS, d), dtype)
        part = np.zeros((ONLINE_ROWS, d), dtype)
        piece = Zm[start : start + ONLINE_ROWS]
        rows[: len(piece)], part[: len(piece)] = piece, mask[start : start + ONLINE_ROWS]
        if mesh is not None:
            rows, part = shard_rows(rows, mesh), shard_rows(part, mesh)
        stats, ll = _latent_e_step(module, params, hyper, summary, rows, part)
        stats = jax.tree.map(lambda a: np.asarray(a, np.float64), stats)
        total = stats if total is None else jax.tree.map(np.add, total, stats)
        loglik += float(ll)
        # complete rows once: later blocks carry an empty summary
        summary = CompleteSummary(np.zeros((), dtype), np.zeros(d, dtype), np.zeros((d, d), dtype))
    return jax.tree.map(lambda a: a / n, total), loglik


# ----------------------------------------------------------------------------- the stream


def online_start(module, X, observed, shift, unit, hyper, K, dtype):
    """The stream's coordinates and first parameters: ``(state, params)``, the
    state holding ``shift``, ``unit`` and the variance floor, the parameters the
    model's PCA start on the chunk with missing entries at their column means."""
    Z = np.where(observed, (X - shift) / unit, 0.0)  # missing at the column mean
    start = _latent_start(
        module,
        np.asarray(X.shape[0], dtype),
        Z.sum(axis=0).astype(dtype),
        (Z.T @ Z).astype(dtype),
        hyper,
        n_components=K,
    )
    state = {
        "shift": shift,
        "unit": unit,
        "variance_floor": np.asarray(hyper.variance_floor, np.float64),
    }
    return state, start


def online_params(module, state, dtype):
    """The current (unrotated) parameters and hyperparameters of a saved stream."""
    hyper = module.Hyper(variance_floor=np.asarray(state["variance_floor"], dtype))
    params = module.Params(*(np.asarray(state[f"param_{f}"], dtype) for f in module.Params._fields))
    return params, hyper


def online_step(module, state, params, hyper, X, observed, step, decay, dtype, *, first, mesh=None):
    """One stepwise-EM update with the chunk ``X`` (NaN where ``observed`` is False),
    the ``step``-th of its stream (:func:`~latentlab.inference.online.stepwise_update`
    with the regression statistics mixed linearly).  Returns the new state, the new
    parameters (NumPy float64, unrotated, in the state's units) and the chunk's
    summed log-likelihood under ``params`` in the data's units."""
    Z = np.where(observed, (X - state["shift"]) / state["unit"], 0.0)

    def chunk_statistics(params):
        stats, loglik = _latent_chunk_stats(module, params, hyper, Z, observed, dtype, mesh)
        # log p(x) = log p(z) - sum over observed entries of log unit_j
        return stats, loglik - float(observed.sum(axis=0) @ np.log(state["unit"]))

    def m_step(stats, params):
        stats_in = jax.tree.map(lambda a: np.asarray(a, dtype), stats)
        return jax.tree.map(
            lambda a: np.asarray(a, np.float64), _latent_m_step(module, stats_in, params, hyper)
        )

    running = (
        None if first else RegressionStats(*(state[f"stats_{f}"] for f in RegressionStats._fields))
    )
    stats, params, loglik = stepwise_update(chunk_statistics, m_step, running, params, step, decay)
    stats = RegressionStats(*(np.asarray(a, np.float64) for a in stats))
    state = {
        **{k: state[k] for k in ("shift", "unit", "variance_floor")},
        **{f"stats_{f}": getattr(stats, f) for f in RegressionStats._fields},
        **{f"param_{f}": getattr(params, f) for f in params._fields},
    }
    return state, params, loglik


def online_unrotated(module, state, params):
    """The state's parameters in the data's units (NumPy float64), still unrotated."""
    unit = state["unit"]
    # back from the fit's units (all 1 for PPCA, whose rescale takes one number)
    out = module.rescale(params, unit) if np.any(unit != 1.0) else params
    out = jax.tree.map(lambda a: np.asarray(a, np.float64), out)
    return out._replace(mu=out.mu + state["shift"])
