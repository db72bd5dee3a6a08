"""The compiled row programs of :class:`latentlab.GaussianMixture` and the host-side
helpers that keep their number small (the compile budget): scoring and conditionals at
one fixed row count, and components padded up to a power of two at weight exactly 0.
The EM fit itself is :func:`latentlab.inference.em.fit_em`'s one program."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.estimators._rows import map_row_chunks, pad_rows
from latentlab.models import gmm

__all__ = [
    "CHUNK",
    "MISSING_CHUNK",
    "SCORE_WORK",
    "pad_components",
    "fixed_row_chunks",
    "make_starts",
    "row_scores",
    "conditionals",
]

# Rows per chunk in the E-step: complete rows hold (K, chunk, d) residuals; rows with
# missing entries hold (chunk, K, d, d) conditional covariances for full/tied.
CHUNK = 2048
MISSING_CHUNK = {"full": 128, "tied": 128, "diag": 1024, "spherical": 1024}
# Work (~flops) per call of a scoring program: sets its fixed rows per call
SCORE_WORK = 2**22


def pad_components(weights, means, scale, pad, covariance_type):
    """Append ``pad`` padding components -- weight 0, mean 0, unit covariance -- to
    host arrays (any of them None stays None; a tied covariance has no component axis)."""
    if weights is not None:
        weights = np.concatenate([weights, np.zeros(pad, weights.dtype)])
    if means is not None:
        means = np.concatenate([means, np.zeros((pad, means.shape[1]), means.dtype)])
    if scale is not None and covariance_type != "tied":
        d = means.shape[1] if means is not None else scale.shape[-1]
        unit = gmm.unit_scale(covariance_type, pad, d, scale.dtype)
        scale = np.concatenate([scale, unit])
    return weights, means, scale


def fixed_row_chunks(fn, *row_arrays, chunk: int):
    """:func:`map_row_chunks` with every call at exactly ``chunk`` rows (a power of two
    >= 32): any row count then reuses one compiled program, where buckets would
    compile one per size class (a predict on 7 rows, then 100, then 178: three).
    Outputs are cut back to the input's rows (views, for internal use)."""
    n = row_arrays[0].shape[0]
    rows = -(-n // chunk) * chunk
    out = map_row_chunks(fn, *(pad_rows(a, rows) for a in row_arrays), chunk=chunk)
    return tuple(o[:n] for o in out) if isinstance(out, tuple) else out[:n]


@partial(jax.jit, static_argnames="covariance_type")
def make_starts(X, row_mask, resp, reg_covar, active, user, use_user, covariance_type):
    """The starts of :func:`latentlab.models.gmm.em_starts` as a program of their own
    (for the MAP/SVI and online routes; EM makes them inside its fit program)."""
    inputs = (X, row_mask, resp, user, use_user)
    hyper = gmm.Hyper(reg_covar, active)
    return gmm.em_starts(inputs, None, hyper, covariance_type=covariance_type)


@partial(jax.jit, static_argnames="covariance_type")
def row_scores(params, X, observed, covariance_type):
    """log p(x_i) (n,) and log responsibilities (n, K); rows with NaN (``observed`` 0
    there) by their marginal over the observed coordinates."""
    if observed is None:
        log_density, _ = gmm.component_log_density(params, X, covariance_type)
    else:
        log_density, _, _ = gmm.conditional_components(params, X, observed, covariance_type)
    weighted = log_density + jnp.log(params.weights)
    row = jax.scipy.special.logsumexp(weighted, axis=1)
    return row, weighted - row[:, None]


@partial(jax.jit, static_argnames="covariance_type")
def conditionals(params, X, observed, covariance_type):
    """Log responsibilities given the observed entries, and each component's
    conditional mean (n, K, d) and covariance of the row."""
    log_density, dx, cond_cov = gmm.conditional_components(params, X, observed, covariance_type)
    weighted = log_density + jnp.log(params.weights)
    log_resp = weighted - jax.scipy.special.logsumexp(weighted, axis=1, keepdims=True)
    return log_resp, dx + params.means[None], cond_cov
