"""Stepwise (online) EM for streams: the statistics behind ``partial_fit`` of PPCA
and FactorAnalysis (pure functions of the model module, the state and the chunk;
``GaussianLatentEstimator._stepwise_fit`` drives them), and the chunk checks and
step sizes GaussianMixture's shares.

Cappe & Moulines (2009) replace EM's sums over all rows by a running average of
per-chunk expected sufficient statistics,

    s_hat <- (1 - eta_t) s_hat + eta_t s(chunk_t),     eta_t = (t + 2)^(-kappa),

and take the ordinary M-step from ``s_hat`` after every chunk.  For kappa in
(0.5, 1] the step sizes satisfy sum eta = inf, sum eta^2 < inf, and the iterates
converge to a stationary point of the expected log-likelihood.  The first chunk has
eta = 1 (it sets ``s_hat``), so chunk t >= 1 gets (t + 1)^(-kappa); with kappa = 1
``s_hat`` is the plain average over chunks.

The statistics of a chunk are *averages* over its rows (``s(chunk)`` estimates the
expectation of one row's statistics), so eta mixes like with like whatever the
chunk sizes.  They live in fixed coordinates set by the first chunk: centred on its
observed column means (the pilot mean, DESIGN section 4) and, where the model is
fitted per-feature standardised (FA, GMM), divided by its column scales; the GMM's
per-component moments are kept centred about the component means and mixed by Chan
et al.'s pairwise update, never as raw second moments.

The running state is public (``online_state_``, a dict of arrays) so a saved model
can go on learning.  The M-step's parameters are kept unrotated there: the
statistics of z are in the frame of the loadings that produced them, and the
canonical rotation reported in ``params_`` would mix frames.
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from latentlab._validation import check_data, check_no_empty_columns, check_no_empty_rows
from latentlab.inference.sharding import shard_rows
from latentlab.models.gaussian_latent import (
    CompleteSummary,
    GaussianData,
    RegressionStats,
    pca_solution,
)

__all__ = [
    "check_chunk",
    "check_learning_decay",
    "online_params",
    "online_start",
    "online_step",
    "online_unrotated",
    "pilot_coordinates",
    "pilot_moments",
    "step_size",
]

# Rows of the per-row E-step (rows with missing entries) per compiled call.
ONLINE_ROWS = 256


def check_learning_decay(value) -> float:
    """``learning_decay`` (kappa) as a float in (0.5, 1], else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"learning_decay must be a number in (0.5, 1], got {value!r}")
    if not 0.5 < float(value) <= 1.0:
        raise ValueError(
            f"learning_decay must be in (0.5, 1] (Cappe & Moulines' kappa), got {value!r}"
        )
    return float(value)


def step_size(step: int, learning_decay: float) -> float:
    """eta for the chunk with 0-based index ``step``: 1 for the first, then
    (t + 2)^(-kappa) for the t-th update after it (t = step - 1)."""
    return float((step + 1.0) ** (-learning_decay))


def check_chunk(est, X, *, first: bool, min_samples: int):
    """Validated chunk (float64, NaN kept) and its observed mask."""
    name = type(est).__name__
    if getattr(X, "shape", None) is not None and len(X.shape) == 2 and X.shape[0] == 0:
        raise ValueError(f"{name}.partial_fit got an empty chunk (0 rows)")
    # later chunks: check_data refuses another column count with scikit-learn's
    # message ("X has 3 features, but PPCA is expecting 4 features as input.")
    X = check_data(est, X, reset=first, allow_nan=True, min_samples=min_samples)
    observed = ~np.isnan(X)
    check_no_empty_rows(observed)
    if first:  # the first chunk sets the coordinates: every feature must be seen
        check_no_empty_columns(observed)
    return X, observed


def pilot_moments(X, observed):
    """Observed column means and (ddof=0) variances of a chunk."""
    count = observed.sum(axis=0)
    shift = np.where(observed, X, 0.0).sum(axis=0) / count
    centred = np.where(observed, X - shift, 0.0)
    return shift, (centred**2).sum(axis=0) / count


def _mix(old, new, eta):
    return jax.tree.map(lambda a, b: (1.0 - eta) * np.asarray(a) + eta * np.asarray(b), old, new)


# ----------------------------------------------------------------------------- Gaussian latent


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


def pilot_coordinates(X, observed):
    """The first chunk's observed column means and variances, a constant feature
    given the typical variance (so nothing starts at zero variance)."""
    shift, variance = pilot_moments(X, observed)
    typical = np.mean(variance) if np.any(variance > 0) else 1.0
    return shift, np.where(variance > 0, variance, typical)


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


def online_step(module, state, params, hyper, X, observed, eta, dtype, *, first, mesh=None):
    """One stepwise-EM update with the chunk ``X`` (NaN where ``observed`` is False):
    the chunk's average statistics under ``params`` mixed into the state's with
    weight ``eta`` (the first chunk sets them), then the M-step.  Returns the new
    state, the new parameters (NumPy float64, unrotated, in the state's units) and
    the chunk's summed log-likelihood under ``params`` in the data's units."""
    Z = np.where(observed, (X - state["shift"]) / state["unit"], 0.0)
    stats, loglik = _latent_chunk_stats(module, params, hyper, Z, observed, dtype, mesh)
    # log p(x) = log p(z) - sum over observed entries of log unit_j
    loglik -= float(observed.sum(axis=0) @ np.log(state["unit"]))
    if not first:
        old = RegressionStats(*(state[f"stats_{f}"] for f in RegressionStats._fields))
        stats = _mix(old, stats, eta)
    stats = RegressionStats(*(np.asarray(a, np.float64) for a in stats))
    stats_in = jax.tree.map(lambda a: a.astype(dtype), stats)
    params = _latent_m_step(module, stats_in, params, hyper)
    params = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
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
