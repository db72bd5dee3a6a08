"""The compiled row programs of :class:`latentlab.GaussianMixture` and the host-side
helpers that keep their number small (the compile budget): scoring and conditionals at
one fixed row count, and components padded up to a power of two at weight exactly 0.
The EM fit itself is :func:`latentlab.inference.em.fit_em`'s one program.

A fitted mixture is scored with its parameters about the mixture's mean in the working
dtype (:func:`scoring_params`), padded to a bucket of components, by row-chunked
programs of a fixed size (:func:`rows_per_call`), so nearby models share compiled
programs and float32 keeps its digits on uncentred data (:func:`mixture_scores`)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from latentlab._shapes import component_bucket
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
    "mixture_centre",
    "centred_params",
    "scoring_params",
    "rows_per_call",
    "mixture_scores",
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


# ----------------------------------------------------------------- scoring a fitted mixture


def mixture_centre(params):
    """The mixture's mean sum_k w_k mu_k (float64) of ``params`` (a dict like
    ``params_``: ``weights``, ``means``, ``scale``)."""
    return params["weights"] @ params["means"]


def centred_params(params, dtype):
    """``(params, centre)``: the fitted parameters (a dict like ``params_``) in
    ``dtype`` with the means taken about ``centre`` (float64, the mixture's mean), on
    the host.

    Densities, responsibilities and conditionals are translation-equivariant, so
    callers subtract ``centre`` from X in float64 before the cast and add it back to
    means in float64 after: float32 then keeps its digits on uncentred data.  Call
    inside the estimator's ``_precision()``.
    """
    centre = mixture_centre(params)
    values = {**params, "means": params["means"] - centre}
    # host arrays in the working dtype (an eager jnp cast would compile a program)
    dtype = np.dtype(dtype)
    return gmm.Params(*(np.asarray(values[k], dtype) for k in gmm.Params._fields)), centre


def scoring_params(params, n_components, covariance_type, dtype):
    """:func:`centred_params` with padding components up to
    :func:`~latentlab._shapes.component_bucket` (weight 0: log-responsibility -inf, no
    effect on the rows' likelihoods), so that models with nearby ``n_components``
    share the scoring programs; callers cut the outputs back to ``n_components``."""
    params, centre = centred_params(params, dtype)
    pad = component_bucket(n_components) - n_components
    padded = pad_components(*params, pad, covariance_type)
    return gmm.Params(*padded), centre


def rows_per_call(n_components, n_features, covariance_type, missing: bool) -> int:
    """Rows per call of the scoring programs, fixed for a fitted model (see
    :func:`fixed_row_chunks`): about ``SCORE_WORK`` flops per call, so padding a
    single row costs little, capped by the E-step's chunk sizes, which bound the
    memory of the (rows, K, d, d) conditional covariances."""
    K, d = component_bucket(n_components), n_features
    dense = covariance_type in ("full", "tied")
    if missing:
        per_row, cap = (K * d**3 if dense else K * d), MISSING_CHUNK[covariance_type]
    else:
        per_row, cap = (K * d * d if dense else K * d), CHUNK
    rows = 1 << (max(SCORE_WORK // max(per_row, 1), 1).bit_length() - 1)
    return int(min(max(rows, 32), cap))


def mixture_scores(X, observed, params, centre, n_components, covariance_type):
    """(log p(x_i) (n,), log responsibilities (n, K)) as float64 NumPy arrays, for
    ``X`` (NaN at 0) with its ``observed`` mask (float) under :func:`scoring_params`'
    ``(params, centre)``.  Rows with NaN are scored by their marginal over the
    observed coordinates.  Call inside the estimator's ``_precision()``."""
    complete = observed.all(axis=1)
    row = np.empty(X.shape[0])
    log_resp = np.empty((X.shape[0], n_components))
    K, d = n_components, X.shape[1]
    X = np.where(observed > 0, X - centre, 0.0)
    if complete.any():
        row[complete], padded = fixed_row_chunks(
            lambda x: row_scores(params, x, None, covariance_type),
            X[complete],
            chunk=rows_per_call(K, d, covariance_type, missing=False),
        )
        log_resp[complete] = padded[:, :K]
    if not complete.all():
        row[~complete], padded = fixed_row_chunks(
            lambda x, o: row_scores(params, x, o, covariance_type),
            X[~complete],
            observed[~complete],
            chunk=rows_per_call(K, d, covariance_type, missing=True),
        )
        log_resp[~complete] = padded[:, :K]
    return row, log_resp
