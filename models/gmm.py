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

This file is the story, parameters, declaration (with its posterior metadata),
starts, E-step and M-step.  The pieces are in private modules it re-exports:
:mod:`latentlab.models._gmm_covariances` (every switch on the covariance type, and the
host-side quantities estimators report), ``_gmm_observe`` (how the declaration
observes a row: exact masked marginal, enumerable assignment), ``_gmm_starts`` (the
starts made inside the fit program) and ``_gmm_statistics`` (the E-step's data
layout and per-chunk row sums).  At ~330 lines it is over the convention's ~300 by
its re-export list.

How the model is fitted and used, without an estimator, is in the public module
built on this one, :mod:`latentlab.models.gmm_programs` (it imports this module;
this module does not import it): EM's row blocks and program, MAP/SVI, the starts'
host side (standardised units, floor, starting responsibilities, given parameters),
scoring at fixed row counts, the conditional mixture of missing entries, stepwise EM
and the E-step's host side on a chunked source.
:class:`latentlab.GaussianMixture` validates, calls them and stores the fit.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers

from latentlab.inference.em import EMModel
from latentlab.inference.posterior.spec import PosteriorSpec, Site
from latentlab.models._gmm_covariances import (
    COVARIANCE_TYPES,
    component_log_density,
    component_variances,
    conditional_components,
    covariance_penalty,
    covariances,
    draw_conditional,
    draw_samples,
    features_at_floor,
    floored_cholesky,
    marginal_variances,
    n_parameters,
    penalised_scatter,
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
from latentlab.models._gmm_observe import _observe_with_assignment, masked_components
from latentlab.models._gmm_starts import KMeansStart, em_starts, start_responsibilities
from latentlab.models._gmm_statistics import (
    GMMData,
    MixtureStats,
    _complete_chunk,
    _missing_block_chunk,
    _missing_chunk,
    _moments,
    _sum_over_chunks,
)
from latentlab.models.gaussian_latent import detect_missing, replicate_settings

__all__ = [
    "COVARIANCE_TYPES",
    "Params",
    "Hyper",
    "GMMData",
    "MixtureStats",
    "gmm_model",
    "model",
    "PenalisedScale",
    "posterior_spec",
    "masked_components",
    "scale_tril",
    "init_params",
    "params_from_responsibilities",
    "KMeansStart",
    "start_responsibilities",
    "em_starts",
    "em_model",
    "component_log_density",
    "component_variances",
    "covariance_penalty",
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
    "features_at_floor",
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
    # () or None: tau of the covariance penalty (covariance_penalty; None: maximum
    # likelihood), in the fit's standardised units, where its target D is the identity
    prior_rows: jax.Array | None = None


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
    covariance_prior=None,
):
    """Gaussian mixture with ``n_components`` components.  ``X`` is (n, d).

    Priors (active only with ``use_prior=True``): ``weights ~ Dirichlet(1)``,
    ``means ~ N(0, 10^2)``, standard deviations ``~ LogNormal(0, 2)``, and a flat prior
    on full/tied Cholesky factors.

    NaN in ``X`` marks missing entries; each row then contributes its exact marginal
    over the observed coordinates (see :func:`masked_components`).  Traced callers
    (SVI, NUTS) say whether X has NaN with ``has_missing``.

    ``covariance_prior = (tau, prior_variance)``: the covariance penalty of
    :func:`covariance_penalty` as the log density of the ``scale`` site
    (:class:`PenalisedScale`; always on: it is part of the penalised likelihood EM
    maximises, not a prior switched by ``use_prior``), so ``log_density`` is EM's
    objective and ``log_likelihood`` stays the likelihood.
    """
    if X is not None:
        n_samples, n_features = X.shape
    missing = detect_missing(X, has_missing)
    K, d = n_components, n_features
    with handlers.mask(mask=use_prior):
        weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(K)))
        means = numpyro.sample("means", dist.Normal(0.0, 10.0).expand([K, d]).to_event(2))
        if covariance_prior is None:
            scale = numpyro.sample("scale", scale_prior(covariance_type, K, d))
    if covariance_prior is not None:  # the penalty on, whatever use_prior says
        prior = scale_prior(covariance_type, K, d)
        scale = numpyro.sample(
            "scale", PenalisedScale(prior, covariance_type, *covariance_prior, use_prior)
        )
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


model = gmm_model  # the name every model module exports for its declaration


class PenalisedScale(dist.Distribution):
    """The ``scale`` site's improper density under the covariance penalty:
    log p(scale) = :func:`covariance_penalty` (+ the masked prior ``base`` where
    ``use_prior``), on ``base``'s support and shapes.  Not sampled: a MAP/EM term."""

    def __init__(self, base, covariance_type, prior_rows, prior_variance, use_prior=False):
        self.base, self.covariance_type = base, covariance_type
        self.prior_rows, self.prior_variance = prior_rows, jnp.asarray(prior_variance)
        self.use_prior = use_prior
        super().__init__(batch_shape=base.batch_shape, event_shape=base.event_shape)

    @property
    def support(self):
        return self.base.support

    def sample(self, key, sample_shape=()):
        raise NotImplementedError("the covariance penalty is improper: it has no draws")

    def log_prob(self, value):
        penalty = covariance_penalty(
            value, self.covariance_type, self.prior_rows, self.prior_variance
        )
        return penalty + (self.base.log_prob(value) if self.use_prior else 0.0)


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
        replicate=replicate_settings,
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


def e_step(params: Params, data: GMMData, hyper: Hyper, *, covariance_type: str):
    """Responsibilities in log space (PRML 9.23) as row-sum statistics, and log p(X).

    Rows with missing entries use each component's marginal over their observed
    coordinates and the conditional moments of the missing ones (exact EM for data
    missing at random).
    """
    complete = partial(_complete_chunk, covariance_type=covariance_type)
    stats, loglik = _sum_over_chunks(complete, params, (data.X, data.row_mask))
    if data.X_missing.shape[0]:
        if data.missing_index is None:
            incomplete = partial(_missing_chunk, covariance_type=covariance_type)
            groups = [(data.X_missing, data.observed)]
        else:  # full/tied: only each row's missing block is inverted, group by group
            incomplete = partial(_missing_block_chunk, covariance_type=covariance_type)
            groups, start = [], 0
            for index in data.missing_index:  # a group's chunks follow the previous one's
                stop = start + index.shape[0]
                groups.append((data.X_missing[start:stop], data.observed[start:stop], index))
                start = stop
        for arrays in groups:
            more, more_ll = _sum_over_chunks(incomplete, params, arrays)
            stats = jax.tree.map(jnp.add, stats, more)
            loglik = loglik + more_ll
    if data.rows is not None:
        from latentlab.inference.chunked import host_sum

        more, more_ll = host_sum("gmm_rows", data.rows, tuple(params), (stats, loglik))
        stats = jax.tree.map(jnp.add, stats, more)
        loglik = loglik + more_ll
    if hyper.prior_rows is not None:  # EM's objective: the penalised log-likelihood
        unit = jnp.ones(params.means.shape[-1], loglik.dtype)
        loglik = loglik + covariance_penalty(
            params.scale, covariance_type, hyper.prior_rows, unit, hyper.active
        )
    return stats, loglik


# ----------------------------------------------------------------------------- M-step


@partial(jax.jit, static_argnames="covariance_type")  # see _gmm_statistics._complete_chunk
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
    tau = hyper.prior_rows

    def penalised(cov, rows):  # the penalty's pseudo-rows (None: maximum likelihood)
        return cov if tau is None else penalised_scatter(cov, rows, tau)

    if covariance_type == "full":
        cov = stats.sum_dxx / count[:, None, None] - delta[:, :, None] * delta[:, None, :]
        scale = floored_cholesky(penalised(cov, count), reg)
        scale = jnp.where(empty[:, None, None], params.scale, scale)
    elif covariance_type == "tied":
        scatter = stats.sum_dxx - count[:, None, None] * delta[:, :, None] * delta[:, None, :]
        cov = jnp.sum(scatter, axis=0) / jnp.sum(mass)
        scale = floored_cholesky(penalised(cov, jnp.sum(mass)), reg)
    else:
        var = stats.sum_dxx / count[:, None] - delta**2
        if covariance_type == "diag":
            var = penalised(var, count)
            scale = jnp.where(empty[:, None], params.scale, jnp.sqrt(jnp.maximum(var, reg)))
        else:
            spherical = jnp.maximum(penalised(jnp.mean(var, axis=1), count), jnp.max(reg))
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


def em_model(covariance_type: str) -> EMModel:
    """The EM model for :func:`latentlab.inference.em.fit_em`: the steps of
    ``covariance_type`` and the starts of :func:`em_starts`."""
    e_step, m_step = step_functions(covariance_type)
    return EMModel(e_step, m_step, starts=em_starts).with_settings(covariance_type=covariance_type)
