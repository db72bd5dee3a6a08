"""Gaussian mixture model, declared once.

Generative story::

    c_i ~ Categorical(weights)
    x_i | c_i ~ N(means[c_i], Sigma[c_i])     =>   x_i ~ sum_k weights_k N(means_k, Sigma_k)

The NumPyro function below is the single declaration.  Its observed site is the exact
mixture marginal (``MixtureSameFamily``), so its log-likelihood *is* the EM objective;
``explicit_latent=True`` samples the assignment ``c`` instead (enumerable, for
posterior predictive draws and SVI/NUTS with enumeration).  Priors are switched with
``handlers.mask``: off for maximum likelihood, on for MAP.

Covariances are kept as Cholesky factors, in the shape the covariance type needs
(the ``scale`` site / ``Params.scale``):

    full       (K, d, d)  lower-triangular L_k,  Sigma_k = L_k L_k^T
    tied       (d, d)     one L shared by every component
    diag       (K, d)     standard deviations,   Sigma_k = diag(s_k^2)
    spherical  (K,)       standard deviations,   Sigma_k = s_k^2 I

EM (PRML 9.23-9.27) is written with statistics taken about the *current* means, so
the M-step never forms a raw second moment minus mu mu^T (which cancels catastrophically
when the means are large against the spreads).

The covariance-type algebra -- component densities and conditionals, the floored
covariance of the M-step, and the host-side quantities estimators report
(covariances, precisions, rescaling, conditional draws) -- is in
:mod:`latentlab.models._gmm_covariances` and re-exported here.  This file is the
story, parameters, declaration (with its posterior metadata), starts, E-step and
M-step; it is ~450 lines because the exact missing-data E-step and the floored M-step
carry their derivations, and the declaration its exact masked marginal.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from latentlab.models._gmm_covariances import (
    COVARIANCE_TYPES,
    component_log_density,
    component_variances,
    conditional_components,
    covariances,
    draw_conditional,
    draw_samples,
    floored_cholesky,
    marginal_variances,
    n_parameters,
    pooled_covariance,
    precisions,
    precisions_cholesky,
    rescale,
    scale_from_precisions,
    scale_prior,
    scale_shape,
    scale_tril,
    unit_scale,
)
from latentlab.models.gaussian_latent import UNIT_DENSITY_VARIANCE, detect_missing
from numpyro import handlers
from numpyro.ops.indexing import Vindex

from latentlab.inference.posterior.spec import PosteriorSpec, Site

__all__ = [
    "COVARIANCE_TYPES",
    "Params",
    "Hyper",
    "GMMData",
    "MixtureStats",
    "gmm_model",
    "model",
    "posterior_spec",
    "masked_components",
    "scale_tril",
    "init_params",
    "params_from_responsibilities",
    "component_log_density",
    "component_variances",
    "conditional_components",
    "e_step",
    "m_step",
    "step_functions",
    "n_parameters",
    # the host-side algebra estimators report, from _gmm_covariances
    "scale_shape",
    "unit_scale",
    "covariances",
    "precisions_cholesky",
    "precisions",
    "pooled_covariance",
    "rescale",
    "scale_from_precisions",
    "marginal_variances",
    "draw_conditional",
    "draw_samples",
]


# ----------------------------------------------------------------------------- parameters


class Params(NamedTuple):
    weights: jax.Array  # (K,) mixing proportions
    means: jax.Array  # (K, d)
    scale: jax.Array  # Cholesky factor(s) of the covariance(s); shape set by covariance type


class Hyper(NamedTuple):
    # () or (d,): the covariance floor, Sigma >= diag(reg_covar) (see m_step); positive.
    # Per feature because the estimator fits in standardised units, where an absolute
    # floor in the data's units becomes reg_covar / s_j^2 for feature j.
    reg_covar: jax.Array
    # (K,) bool, or None for all: components that take part.  The others are padding
    # (one compiled program serves several n_components): their weight stays exactly
    # 0, so their responsibilities are exactly 0 (log 0 = -inf) and their means and
    # covariances never move -- a fixed point of EM that leaves the rest unchanged.
    active: jax.Array | None = None


class GMMData(NamedTuple):
    """Rows in fixed-size chunks, so an E-step never holds more than one chunk's
    (K, chunk, d) residuals and every chunk reuses one compiled body.

    Complete rows and rows with missing entries are kept apart: only the latter pay
    for per-row conditional Gaussians.  Padding rows have ``row_mask`` 0 (complete
    part) or an all-zero ``observed`` mask (missing part).
    """

    X: jax.Array  # (n_chunks, chunk, d) complete rows
    row_mask: jax.Array  # (n_chunks, chunk) 1 for a real row, 0 for padding
    X_missing: jax.Array  # (m_chunks, m_chunk, d) rows with NaN, zeros where missing
    observed: jax.Array  # (m_chunks, m_chunk, d) 1 where observed, 0 missing or padding
    # int32 token of rows kept outside the program (out of core, Dask), whose
    # statistics the host adds each E-step (latentlab.inference.chunked.host_sum)
    rows: jax.Array | None = None


class MixtureStats(NamedTuple):
    """Row sums, taken about the means the E-step was evaluated at."""

    count: jax.Array  # (K,)     N_k = sum_i r_ik
    sum_dx: jax.Array  # (K, d)  sum_i r_ik (x_i - mu_k)
    sum_dxx: jax.Array  # (K, d, d) for full/tied, (K, d) (diagonal only) for diag/spherical


# ----------------------------------------------------------------------------- declaration


def gmm_model(
    X=None,
    *,
    n_components: int,
    covariance_type: str = "full",
    n_features: int | None = None,
    n_samples: int | None = None,
    use_prior: bool = False,
    explicit_latent: bool = False,
    has_missing: bool | None = None,
):
    """Gaussian mixture with ``n_components`` components.  ``X`` is (n, d).

    Priors (active only with ``use_prior=True``): ``weights ~ Dirichlet(1)``,
    ``means ~ N(0, 10^2)``, standard deviations ``~ LogNormal(0, 2)``, and a flat prior
    on full/tied Cholesky factors.

    NaN in ``X`` marks missing entries; each row then contributes its exact marginal
    over the observed coordinates (see :func:`masked_components`).  Traced callers
    (SVI, NUTS) say whether X has NaN with ``has_missing``.
    """
    if X is not None:
        n_samples, n_features = X.shape
    missing = detect_missing(X, has_missing)
    K, d = n_components, n_features
    with handlers.mask(mask=use_prior):
        weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(K)))
        means = numpyro.sample("means", dist.Normal(0.0, 10.0).expand([K, d]).to_event(2))
        scale = numpyro.sample("scale", scale_prior(covariance_type, K, d))
    L = scale_tril(scale, covariance_type, K, d)
    locs = means
    if missing:
        X, locs, L = masked_components(X, means, L)  # per row: (n, K, d), (n, K, d, d)

    if explicit_latent:
        _observe_with_assignment(X, weights, locs, L, n_samples)
        return
    mixture = dist.MixtureSameFamily(
        dist.Categorical(probs=weights), dist.MultivariateNormal(locs, scale_tril=L)
    )
    with numpyro.plate("data", n_samples):
        numpyro.sample("x", mixture, obs=X)


def masked_components(X, means, L):
    """Per-row component Gaussians whose density at the filled row is each component's
    marginal over the row's observed coordinates.

    ``handlers.mask`` can only drop whole rows.  Instead, a missing coordinate is set
    to 0, its mean to 0, its covariance row and column to 0 and its variance to
    1/(2 pi) (:data:`~latentlab.models.gaussian_latent.UNIT_DENSITY_VARIANCE`): it
    then contributes a factor N(0 | 0, 1/(2 pi)) = 1, exactly, and leaves the observed
    block Sigma_oo untouched.  Returns ``(X_filled, locs (n, K, d),
    scale_tril (n, K, d, d))``.
    """
    observed = ~jnp.isnan(X)
    o = observed.astype(means.dtype)
    cov = L @ jnp.swapaxes(L, -1, -2)
    inflate = (1.0 - o) * UNIT_DENSITY_VARIANCE
    masked_cov = o[:, None, :, None] * cov[None] * o[:, None, None, :]
    masked_cov = masked_cov + inflate[:, None, :, None] * jnp.eye(means.shape[1])
    locs = o[:, None, :] * means[None]
    return jnp.where(observed, X, 0.0), locs, jnp.linalg.cholesky(masked_cov)


def _enumerate_discrete(site):
    """``config_enumerate`` (numpyro.contrib.funsor) without needing funsor installed."""
    if site["type"] == "sample" and not site["is_observed"]:
        if site["fn"].has_enumerate_support and "enumerate" not in site["infer"]:
            return {"enumerate": "parallel"}
    return {}


def _observe_with_assignment(X, weights, locs, L, n_samples):
    """x | c ~ N(loc_c, L_c L_c^T); ``locs``/``L`` are (K, ...) or per row (n, K, ...)."""
    with handlers.infer_config(config_fn=_enumerate_discrete):
        with numpyro.plate("data", n_samples):
            c = numpyro.sample("c", dist.Categorical(probs=weights))
            if locs.ndim == 3:  # per-row components (missing data): pick row i's c_i
                loc, tril = Vindex(locs)[..., c, :], Vindex(L)[..., c, :, :]
            else:
                loc, tril = locs[c], L[c]
            numpyro.sample("x", dist.MultivariateNormal(loc, scale_tril=tril), obs=X)


model = gmm_model  # the name every model module exports for its declaration


def posterior_spec(covariance_type: str) -> PosteriorSpec:
    """The declaration's sites for posterior draws (:mod:`latentlab.inference.posterior`).

    Sampled in data units (the declared priors are written in them); components are
    identified only up to relabelling, matched by their means and weights.
    """
    dense = covariance_type in ("full", "tied")
    scale_dims = {
        "full": ("component", "feature", "feature_bis"),
        "tied": ("feature", "feature_bis"),
        "diag": ("component", "feature"),
        "spherical": ("component",),
    }[covariance_type]
    components = {"weights": 0, "means": 0}
    if covariance_type != "tied":
        components["scale"] = 0
    return PosteriorSpec(
        sites={
            "weights": Site(("component",), "simplex"),
            "means": Site(("component", "feature"), "real"),
            "scale": Site(scale_dims, "lower_cholesky" if dense else "positive"),
        },
        standardise=False,
        components=components,
        component_key="means",
        component_weights="weights",
    )


# ----------------------------------------------------------------------------- init


def params_from_responsibilities(
    X, row_mask, resp, reg_covar, *, covariance_type: str, active=None
) -> Params:
    """The M-step from given responsibilities (n, K): how every start is made.

    Padding components (``active`` False, see :class:`Hyper`) need zero columns in
    ``resp``; they get weight exactly 0, mean 0 and unit covariance."""
    resp = resp * row_mask[:, None]
    count = jnp.sum(resp, axis=0) + 10.0 * jnp.finfo(X.dtype).eps
    means = resp.T @ X / count[:, None]
    diff = X[None, :, :] - means[:, None, :]
    stats = _moments(resp, diff, covariance_type)
    K, d = means.shape
    placeholder = unit_scale(covariance_type, K, d, X.dtype, xp=jnp)
    start = Params(jnp.full((K,), 1.0 / K, X.dtype), means, placeholder)
    hyper = Hyper(jnp.asarray(reg_covar, X.dtype), active)
    return m_step(stats, start, hyper, covariance_type=covariance_type)


def init_params(key, X, row_mask, n_components: int, reg_covar, *, covariance_type: str) -> Params:
    """Random start as scikit-learn's ``init_params="random"``: uniform responsibilities."""
    resp = jax.random.uniform(key, (X.shape[0], n_components), X.dtype)
    resp = resp / jnp.sum(resp, axis=1, keepdims=True)
    return params_from_responsibilities(
        X, row_mask, resp, reg_covar, covariance_type=covariance_type
    )


# ----------------------------------------------------------------------------- E-step


def _moments(resp, diff, covariance_type: str) -> MixtureStats:
    """Row sums of r_ik, r_ik (x_i - mu_k) and the second moments about mu_k."""
    count = jnp.sum(resp, axis=0)
    sum_dx = jnp.einsum("nk,knd->kd", resp, diff)
    if covariance_type in ("full", "tied"):
        sum_dxx = jnp.einsum("knd,kne->kde", resp.T[:, :, None] * diff, diff)
    else:
        sum_dxx = jnp.einsum("nk,knd->kd", resp, diff**2)
    return MixtureStats(count, sum_dx, sum_dxx)


def _responsibilities(log_density, weights, row_mask):
    """Responsibilities (PRML 9.23) in log space, and the summed log-likelihood."""
    weighted = log_density + jnp.log(weights)
    row_loglik = logsumexp(weighted, axis=1)
    resp = jnp.exp(weighted - row_loglik[:, None]) * row_mask[:, None]
    return resp, jnp.sum(jnp.where(row_mask > 0, row_loglik, 0.0))


# The chunk statistics and the M-step are jitted functions of their own: called
# inside the EM program (several times: the starts, each SQUAREM sub-step, the
# carries' shapes) they are traced and lowered once and reused, which halves the
# time a fresh process spends before the first fit; the compiled numbers are the same.
@partial(jax.jit, static_argnames="covariance_type")
def _complete_chunk(params, X, row_mask, covariance_type):
    log_density, diff = component_log_density(params, X, covariance_type)
    resp, loglik = _responsibilities(log_density, params.weights, row_mask)
    return _moments(resp, diff, covariance_type), loglik


@partial(jax.jit, static_argnames="covariance_type")  # see _complete_chunk
def _missing_chunk(params, X, observed, covariance_type):
    """Statistics of rows with missing entries: expected moments under each component's
    conditional, E[(x - mu_k)(x - mu_k)^T | x_o, k] = dx dx^T + cond_cov."""
    log_density, dx, cond_cov = conditional_components(params, X, observed, covariance_type)
    row_mask = (jnp.sum(observed, axis=1) > 0).astype(X.dtype)
    resp, loglik = _responsibilities(log_density, params.weights, row_mask)
    count = jnp.sum(resp, axis=0)
    sum_dx = jnp.einsum("nk,nkd->kd", resp, dx)
    if covariance_type in ("full", "tied"):
        outer = jnp.einsum("nkd,nke->nkde", dx, dx) + cond_cov
        sum_dxx = jnp.einsum("nk,nkde->kde", resp, outer)
    else:
        sum_dxx = jnp.einsum("nk,nkd->kd", resp, dx**2 + cond_cov)
    return MixtureStats(count, sum_dx, sum_dxx), loglik


def _sum_over_chunks(chunk_stats, params, arrays):
    """Add ``chunk_stats(params, *chunk)`` over the leading (chunk) axis of ``arrays``."""
    first = jax.eval_shape(chunk_stats, params, *(a[0] for a in arrays))
    zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), first)

    def add(total, chunk):
        return jax.tree.map(jnp.add, total, chunk_stats(params, *chunk)), None

    return jax.lax.scan(add, zero, arrays)[0]


def e_step(params: Params, data: GMMData, hyper: Hyper, *, covariance_type: str):
    """Responsibilities in log space (PRML 9.23) as row-sum statistics, and log p(X).

    Rows with missing entries use each component's marginal over their observed
    coordinates and the conditional moments of the missing ones (exact EM for data
    missing at random).
    """
    complete = partial(_complete_chunk, covariance_type=covariance_type)
    stats, loglik = _sum_over_chunks(complete, params, (data.X, data.row_mask))
    if data.X_missing.shape[0]:
        incomplete = partial(_missing_chunk, covariance_type=covariance_type)
        more, more_ll = _sum_over_chunks(incomplete, params, (data.X_missing, data.observed))
        stats = jax.tree.map(jnp.add, stats, more)
        loglik = loglik + more_ll
    if data.rows is not None:
        from latentlab.inference.chunked import host_sum

        more, more_ll = host_sum("gmm_rows", data.rows, tuple(params), (stats, loglik))
        stats = jax.tree.map(jnp.add, stats, more)
        loglik = loglik + more_ll
    return stats, loglik


# ----------------------------------------------------------------------------- M-step


@partial(jax.jit, static_argnames="covariance_type")  # see _complete_chunk
def m_step(stats: MixtureStats, params: Params, hyper: Hyper, *, covariance_type: str) -> Params:
    """PRML 9.24-9.26 from statistics about the old means mu_k, with the covariances
    floored at diag(``reg_covar``).

    With delta_k = sum_i r_ik (x_i - mu_k) / N_k, the new mean is mu_k + delta_k and the
    scatter about it ``S_k = sum_dxx_k / N_k - delta_k delta_k^T``: delta_k -> 0 as EM
    converges, so nothing cancels.  A component whose N_k is (numerically) zero keeps
    its old mean and covariance.

    The covariance is the maximiser of the expected complete-data log-likelihood over
    covariances Sigma >= diag(reg_covar) (``reg_covar`` a number or one floor per
    feature): for a number, ``S_k`` with its eigenvalues below the floor raised to it;
    for a vector, the same after scaling feature j by reg_covar_j^{-1/2} (computed
    as :func:`floored_cholesky` explains); variances: ``max(S_k, reg_covar)``; spherical:
    ``max(mean variance, max(reg_covar))``.  Unlike
    scikit-learn's ``S_k + reg_covar I`` this is an exact (constrained) M-step, so EM
    never lowers the likelihood -- ``S_k + reg_covar I`` can, most visibly with missing
    entries, whose conditional variances carry the added term into every later
    iteration.  On data whose scatter is well above ``reg_covar`` the two agree to
    O(reg_covar).
    """
    dtype = stats.count.dtype
    tiny = 10.0 * jnp.finfo(dtype).eps
    count = stats.count + tiny  # as scikit-learn: no division by zero
    # the mass of each component: exactly 0 for padding (see Hyper.active)
    mass = count if hyper.active is None else jnp.where(hyper.active, count, 0.0)
    weights = mass / jnp.sum(mass)
    delta = stats.sum_dx / count[:, None]
    means = params.means + delta
    empty = stats.count < tiny * jnp.maximum(jnp.sum(stats.count), 1.0)
    reg = hyper.reg_covar
    if covariance_type == "full":
        cov = stats.sum_dxx / count[:, None, None] - delta[:, :, None] * delta[:, None, :]
        scale = floored_cholesky(cov, reg)
        scale = jnp.where(empty[:, None, None], params.scale, scale)
    elif covariance_type == "tied":
        scatter = stats.sum_dxx - count[:, None, None] * delta[:, :, None] * delta[:, None, :]
        cov = jnp.sum(scatter, axis=0) / jnp.sum(mass)
        scale = floored_cholesky(cov, reg)
    else:
        var = stats.sum_dxx / count[:, None] - delta**2
        if covariance_type == "diag":
            scale = jnp.where(empty[:, None], params.scale, jnp.sqrt(jnp.maximum(var, reg)))
        else:
            spherical = jnp.maximum(jnp.mean(var, axis=1), jnp.max(reg))
            scale = jnp.where(empty, params.scale, jnp.sqrt(spherical))
    means = jnp.where(empty[:, None], params.means, means)
    return Params(weights=weights, means=means, scale=scale)


_STEPS = {
    t: (partial(e_step, covariance_type=t), partial(m_step, covariance_type=t))
    for t in COVARIANCE_TYPES
}


def step_functions(covariance_type: str):
    """``(e_step, m_step)`` with the covariance type bound; the same objects every call,
    so the jit'd EM driver compiles once per shape."""
    return _STEPS[covariance_type]
