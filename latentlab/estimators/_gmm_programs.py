"""The compiled programs of :class:`latentlab.GaussianMixture` and the host-side
helpers that keep their number small (the compile budget): the whole EM fit as one program
(starts and EM driver together), scoring and conditionals at one fixed row count,
and components padded up to a power of two at weight exactly 0."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.estimators._rows import map_row_chunks, pad_rows
from latentlab.inference.em import EMResult, run_em
from latentlab.models import gmm

__all__ = [
    "CHUNK",
    "MISSING_CHUNK",
    "SCORE_WORK",
    "pad_components",
    "fixed_row_chunks",
    "make_starts",
    "fit_em_program",
    "evaluate_starts",
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
    """One start per stack of responsibilities (n_init, n, K), with the user's
    ``weights_init``/``means_init``/``precisions_init`` (``user``, a Params without the
    start axis) in place where ``use_user`` (3 bools) says.  The flags are traced, so
    every combination shares one program.  ``active`` (K,) marks the components that
    are not padding.  ``resp`` may also be a k-means start, made here
    (:func:`latentlab.estimators._gmm_starts.start_responsibilities`)."""
    # imported here: _gmm_starts imports this module
    from latentlab.estimators._gmm_starts import start_responsibilities

    resp = start_responsibilities(X, row_mask, resp, active)
    make = partial(gmm.params_from_responsibilities, covariance_type=covariance_type, active=active)
    starts = jax.vmap(lambda r: make(X, row_mask, r, reg_covar))(resp)
    return gmm.Params(
        *(
            jnp.where(use, jnp.broadcast_to(given, start.shape), start)
            for use, given, start in zip(use_user, user, starts, strict=True)
        )
    )


@partial(jax.jit, static_argnames=("steps", "covariance_type", "max_iter", "accelerate", "verbose"))
def fit_em_program(
    X,
    row_mask,
    resp,
    active,
    user,
    use_user,
    data,
    reg_covar,
    n_samples,
    tol,
    *,
    steps,
    covariance_type,
    max_iter,
    accelerate,
    verbose,
):
    """The whole EM fit as one compiled program: the starts (:func:`make_starts`) and
    the EM driver from them, with ``steps = (e_step, m_step)``.  Everything else in
    ``fit`` runs on the host in NumPy, so a cold fit compiles this program alone."""
    starts = make_starts(X, row_mask, resp, reg_covar, active, user, use_user, covariance_type)
    e_step, m_step = steps
    if max_iter == 0:
        return evaluate_starts(e_step, starts, data, gmm.Hyper(reg_covar, active))
    return run_em(
        e_step,
        m_step,
        starts,
        data,
        gmm.Hyper(reg_covar, active),
        n_samples,
        tol,
        max_iter=max_iter,
        accelerate=accelerate,
        verbose=verbose,
    )


def evaluate_starts(e_step, starts, data, hyper):
    """``max_iter=0``: no EM step, the start with the highest log-likelihood as an
    :class:`EMResult` (empty trace, ``n_iter`` 0, not converged)."""
    stats, objectives = jax.vmap(lambda start: e_step(start, data, hyper))(starts)
    best = jnp.argmax(jnp.where(jnp.isfinite(objectives), objectives, -jnp.inf))
    pick = partial(jax.tree.map, lambda leaf: leaf[best])
    return EMResult(
        params=pick(starts),
        trace=jnp.zeros((0,), objectives.dtype),
        n_iter=jnp.asarray(0),
        converged=jnp.asarray(False),
        objective=objectives[best],
        stats=pick(stats),
        start_objectives=objectives,
        breakdown=jnp.asarray(False),  # a non-finite start is refused in fit
    )


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
