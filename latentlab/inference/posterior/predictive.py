"""What the declaration says beyond the likelihood of the draws: replicated data sets,
the log prior density at each draw, and draws from the prior.

All three run the model's one declaration -- given no data, under the spec's
``replicate`` settings, it draws a data set shaped as the observed one -- jitted and
vectorised over draws, in chunks so that memory stays bounded by one chunk.  Call them
inside ``jax.enable_x64(True)`` for float64.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.inference.mcmc import _Bound, map_in_chunks
from latentlab.inference.posterior.problem import PosteriorProblem

__all__ = ["replicated_data", "log_prior", "prior_draws", "has_proper_prior"]


def _replicating(problem: PosteriorProblem, model) -> _Bound:
    """``model`` (the scoring or the sampled declaration) set to draw data shaped as the
    problem's, and hashed by its settings so the compiled program is reused."""
    settings = problem.spec.replicate(*problem.scoring.args)
    return _Bound(partial(model, **settings))


@partial(jax.jit, static_argnums=(0, 1))
def _replicate_chunk(model, sites, draws, keys):
    from numpyro import handlers

    def one(draw, key):
        trace = handlers.trace(handlers.seed(handlers.condition(model, draw), key)).get_trace()
        return {site: trace[site]["value"] for site in sites}

    return jax.vmap(one)(draws, keys)


def replicated_data(problem: PosteriorProblem, draws: dict, seed: int, chunk_size: int = 16):
    """One data set drawn from the model at each draw (data units; complete, so entries
    missing in the observed data are filled): observed site -> (n_draws, *data shape).

    ``draws``: site -> (n_draws, *site_shape) in data units.
    """
    model = _replicating(problem, problem.scoring.model)
    n_draws = next(iter(draws.values())).shape[0]
    keys = jax.random.split(jax.random.PRNGKey(seed), n_draws)
    sites = tuple(problem.spec.observed)
    return map_in_chunks(
        lambda chunk: _replicate_chunk(model, sites, *chunk),
        (dict(draws), keys),
        chunk_size,
    )


@partial(jax.jit, static_argnums=0)
def _log_prior_chunk(model, draws, args):
    from numpyro import handlers

    def one(draw):
        trace = handlers.trace(handlers.substitute(model, data=draw)).get_trace(*args)
        out = {}
        for name in draw:  # each parameter site's density, masked and scaled as declared
            site = trace[name]
            density = site["fn"].log_prob(site["value"])
            if site.get("mask") is not None:
                density = jnp.where(site["mask"], density, 0.0)
            if site.get("scale") is not None:
                density = site["scale"] * density
            out[name] = jnp.sum(density)
        return out

    return jax.vmap(one)(draws)


def log_prior(problem: PosteriorProblem, draws: dict, chunk_size: int = 256) -> dict:
    """The sampled target's log prior density of each parameter site at each draw:
    site -> (n_draws,).

    ``draws`` are in the target's units (where the declared priors are written: on
    standardised data for Gaussian-latent models); zero everywhere when the priors are
    masked off (flat).  A change of units shifts it by a constant, which leaves what
    it is for -- prior-sensitivity checks, importance weights -- unchanged.
    """
    target = problem.target
    model = _Bound(target.model)
    args = tuple(jnp.asarray(a) for a in target.args)
    out = map_in_chunks(lambda chunk: _log_prior_chunk(model, chunk, args), dict(draws), chunk_size)
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def has_proper_prior(problem: PosteriorProblem) -> bool:
    """Whether the sampled target's priors are on and can be drawn from (an improper
    prior -- a flat prior on Cholesky factors, a covariance penalty -- cannot)."""
    if not problem.use_prior or problem.spec.replicate is None:
        return False
    from numpyro import handlers

    model = _replicating(problem, problem.target.model)
    try:
        handlers.trace(handlers.seed(model, 0)).get_trace()
    except NotImplementedError:  # numpyro's improper distributions have no sampler
        return False
    return True


@partial(jax.jit, static_argnums=(0, 1, 2))
def _prior_chunk(model, sites, n_draws, key):
    from numpyro.infer import Predictive

    return Predictive(model, num_samples=n_draws, return_sites=list(sites))(key)


def prior_draws(problem: PosteriorProblem, n_draws: int, seed: int) -> tuple[dict, dict]:
    """Draws of the parameters from the declared prior and of a data set at each:
    ``(parameters, data)``, both in data units, each value (n_draws, ...).

    Only where :func:`has_proper_prior`.  The prior is the sampled target's (on
    standardised data for Gaussian-latent models), its draws mapped to data units.
    """
    model = _replicating(problem, problem.target.model)
    sites = tuple(problem.spec.sites)
    values = _prior_chunk(model, sites, int(n_draws), jax.random.PRNGKey(seed))
    parameters = problem.to_original(values)
    data = replicated_data(problem, parameters, seed + 1)
    return parameters, data
