"""Stepwise (online) EM: the one driver behind every model's ``partial_fit``.

Cappe & Moulines (2009) replace EM's sums over all rows by a running average of
per-chunk expected sufficient statistics,

    s_hat <- (1 - eta_t) s_hat + eta_t s(chunk_t),     eta_t = (t + 1)^(-kappa),

and take the ordinary M-step from ``s_hat`` after every chunk.  For kappa in
(0.5, 1] the step sizes satisfy sum eta = inf, sum eta^2 < inf, and the iterates
converge to a stationary point of the expected log-likelihood.  The first chunk
(t = 0) has eta = 1: it sets ``s_hat``; with kappa = 1 ``s_hat`` is the plain
average over chunks.

A model takes part by giving, for one chunk, its statistics as *averages* over the
chunk's rows (so eta mixes like with like whatever the chunk sizes) with the
chunk's summed log-likelihood under the current parameters, and its M-step from
such averages.  How two averages mix is linear by default; a model whose
statistics are moments about a moving centre passes its own ``mix`` (the Gaussian
mixture merges per-component moments by Chan et al.'s pairwise update, never as
raw second moments).  This module knows no model; the models' pieces live beside
the models, the estimators keep the running state between calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

__all__ = ["check_learning_decay", "linear_mix", "step_size", "stepwise_update"]


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
    (step + 1)^(-kappa)."""
    return float((step + 1.0) ** (-learning_decay))


def linear_mix(old, new, eta: float):
    """(1 - eta) old + eta new, leaf by leaf (NumPy float64)."""
    return jax.tree.map(
        lambda a, b: (1.0 - eta) * np.asarray(a, np.float64) + eta * np.asarray(b, np.float64),
        old,
        new,
    )


def stepwise_update(
    chunk_statistics: Callable[[Any], tuple[Any, float]],
    m_step: Callable[[Any, Any], Any],
    running,
    params,
    step: int,
    learning_decay: float,
    *,
    mix: Callable[[Any, Any, float], Any] = linear_mix,
):
    """One chunk of stepwise EM.

    ``chunk_statistics(params)`` gives the chunk's average statistics and its summed
    log-likelihood under ``params``; they are mixed into ``running`` (None for the
    stream's first chunk, whose statistics start it) with weight
    ``step_size(step, learning_decay)``, and ``m_step(statistics, params)`` gives the
    new parameters.  Returns ``(running statistics, new parameters, log-likelihood)``.
    """
    statistics, loglik = chunk_statistics(params)
    if running is not None:
        statistics = mix(running, statistics, step_size(step, learning_decay))
    return statistics, m_step(statistics, params), loglik
