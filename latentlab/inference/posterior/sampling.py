"""The posterior engine: NUTS, SVI or Laplace on a :class:`PosteriorProblem`, then an
ArviZ DataTree with aligned draws, rotation-invariant summaries, pointwise
log-likelihoods and sampler diagnostics.

Model-agnostic: of a model it reads the problem's
:class:`~latentlab.inference.posterior.spec.PosteriorSpec` and nothing else.  Call it inside
``jax.enable_x64(True)`` for float64 (NumPyro otherwise evaluates in float32).
"""

from __future__ import annotations

import warnings

import jax
import numpy as np

from latentlab.inference.posterior.alignment import (
    align_loadings,
    loading_spectrum,
    match_components,
    relabel,
)
from latentlab.inference.posterior.laplace import (
    UnconstrainedCoordinates,
    gaussian_draws,
    laplace_approximation,
)
from latentlab.inference.posterior.problem import PosteriorProblem

__all__ = [
    "METHODS",
    "NUTS_OPTIONS",
    "DEFAULT_NUTS_CHAINS",
    "check_count",
    "check_nuts_options",
    "sample",
    "datatree_from_draws",
]

METHODS = ("nuts", "svi", "laplace")


def check_count(name, value, low):
    """``value`` as an int, or ValueError naming ``name`` unless it is an integer >= low."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


NUTS_OPTIONS = ("target_accept_prob", "max_tree_depth", "dense_mass", "chain_method")
DEFAULT_NUTS_CHAINS = 4  # enough for R-hat (az.summary) to be defined and meaningful


def check_nuts_options(options, method) -> dict:
    """The NUTS options as a dict (empty for None), or ValueError naming what is wrong."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"nuts_options must be a dict, got {type(options).__name__}")
    if options and method != "nuts":
        raise ValueError(f"nuts_options apply to method='nuts' only, not {method!r}")
    unknown = sorted(set(options) - set(NUTS_OPTIONS))
    if unknown:
        raise ValueError(f"unknown nuts_options {unknown}; expected some of {list(NUTS_OPTIONS)}")
    return dict(options)


def _approximate_draws(problem, method, key, n_draws, svi_steps, seed):
    """Draws from a Gaussian in unconstrained coordinates: SVI's guide or Laplace."""
    import jax.numpy as jnp

    target = problem.target
    if method == "laplace":
        coords = UnconstrainedCoordinates(
            target.model, target.args, target.init, problem.spec.loadings
        )
        mean, factor = laplace_approximation(coords)
    else:
        from latentlab.inference.svi import fit_svi

        fit = fit_svi(
            target.model,
            *target.args,
            guide="normal",
            num_steps=svi_steps,
            learning_rate=0.01,  # starts at the fitted point: small steps suffice
            init_values=target.init,
            seed=seed,
        )
        # AutoNormal is a diagonal Gaussian in the same biject_to coordinates
        coords = UnconstrainedCoordinates(target.model, target.args, fit.params)
        locs = [jnp.ravel(fit.guide_params[f"{name}_auto_loc"]) for name, _, _ in coords.layout]
        sds = [jnp.ravel(fit.guide_params[f"{name}_auto_scale"]) for name, _, _ in coords.layout]
        mean, factor = jnp.concatenate(locs), jnp.diag(jnp.concatenate(sds))
    return gaussian_draws(coords, mean, factor, key, n_draws)


def _align(problem, draws):
    """Aligned draws, the kind of alignment, and what undoes it (per draw)."""
    spec = problem.spec
    if spec.loadings:
        draws, R = align_loadings(draws, problem.point, spec.loadings)
        return draws, "procrustes", {"rotation": R}
    if spec.components:
        weights = spec.component_weights
        perm = match_components(
            draws[spec.component_key],
            problem.point[spec.component_key],
            metric=problem.component_metric,
            weights=None if weights is None else draws[weights],
            reference_weights=None if weights is None else problem.point[weights],
        )
        return (
            relabel(draws, perm, spec.components),
            "relabelled",
            {"permutation": perm},
        )
    return draws, "none", {}


def _invariant_summaries(problem, draws):
    """Explained variance per component (eigenvalues of W W^T) and its ratio."""
    spec, sizes = problem.spec, problem.sizes
    if not spec.loadings:
        return {}
    W = np.concatenate([draws[s] for s in spec.loadings], axis=-2)
    n = W.shape[0]
    noise = np.concatenate(
        [np.broadcast_to(draws[s].reshape(n, -1), (n, sizes[dim])) for s, dim in spec.noise],
        axis=1,
    )
    explained, ratio = loading_spectrum(W, noise)
    return {"explained_variance": explained, "explained_variance_ratio": ratio}


def sample(
    problem: PosteriorProblem,
    *,
    method: str,
    num_samples: int,
    num_warmup: int,
    num_chains: int,
    seed: int,
    svi_steps: int,
    nuts_options: dict,
    align: bool,
    model_name: str,
):
    """Posterior draws of ``problem`` by ``method`` as an ArviZ DataTree (the body of
    every ``sample_posterior``; settings already validated)."""
    from latentlab.inference.mcmc import run_nuts

    target = problem.target
    if method == "nuts":
        if problem.spec.nuts_warning:
            warnings.warn(problem.spec.nuts_warning, UserWarning, stacklevel=4)
        result = run_nuts(
            target.model,
            *target.args,
            init_values=target.init,
            num_samples=num_samples,
            num_warmup=num_warmup,
            num_chains=num_chains,
            seed=seed,
            **nuts_options,
        )
        draws, stats = result.draws, result.sample_stats
    else:
        n_draws = num_chains * num_samples
        approx = _approximate_draws(
            problem, method, jax.random.PRNGKey(seed), n_draws, svi_steps, seed
        )
        draws = {
            k: v.reshape((num_chains, num_samples) + v.shape[1:]) for k, v in approx.draws.items()
        }
        stats = {
            "lp": approx.log_p.reshape(num_chains, num_samples),
            "log_q": approx.log_q.reshape(num_chains, num_samples),
        }
    return datatree_from_draws(
        problem, draws, stats, method=method, align=align, model_name=model_name
    )


def datatree_from_draws(problem, draws, stats, *, method, align, model_name):
    """DataTree from draws in the target's units, each (chain, draw, *site_shape).

    Maps them to data units, scores every row at every draw, aligns, adds the
    rotation-invariant summaries and the attrs (``model_name`` names the model).
    Call inside ``jax.enable_x64(True)`` for float64.
    """
    import arviz as az

    from latentlab.inference.mcmc import pointwise_log_likelihood

    shape = next(iter(draws.values())).shape[:2]
    draws = problem.to_original(draws)
    flat = {k: np.asarray(v).reshape((-1,) + v.shape[2:]) for k, v in draws.items()}
    scoring, spec = problem.scoring, problem.spec
    loglik = pointwise_log_likelihood(scoring.model, flat, *scoring.args)
    loglik = sum(loglik[s] for s in scoring.sites)

    aligned, undo = "none", {}
    if align:
        flat, aligned, undo = _align(problem, flat)
    flat.update(_invariant_summaries(problem, flat))
    posterior = {k: v.reshape(shape + v.shape[1:]) for k, v in flat.items()}
    dims = dict(problem.dims)
    dims.update(
        explained_variance=["component"],
        explained_variance_ratio=["component"],
        rotation=["component", "component_bis"],
        permutation=["component"],
        **{scoring.name: ["obs"]},
    )
    prior_text = (
        "the declaration's priors"
        if problem.use_prior
        else "flat (improper): the declaration's priors are masked off, as in the "
        "maximum-likelihood fit"
    )
    attrs = {
        "model": model_name,
        "method": method,
        "prior": prior_text,
        "aligned": aligned,
        "alignment_reference": "the point estimate params_" if aligned != "none" else "",
        "loadings": ",".join(spec.loadings),
        "units": "data units",
        "log_likelihood": f"{scoring.name}: log p(row) of sites " + "+".join(scoring.sites),
    }
    coords = {k: v for k, v in problem.coords.items() if any(k in d for d in dims.values())}
    groups = {
        "posterior": posterior,
        "log_likelihood": {scoring.name: loglik.reshape(shape + loglik.shape[1:])},
    }
    if stats:
        groups["sample_stats"] = stats
    if undo:  # raw draws stay recoverable: W_raw = W R^T, x_raw[perm] = x
        groups["alignment"] = {k: v.reshape(shape + v.shape[1:]) for k, v in undo.items()}
    tree = az.from_dict(
        groups,
        dims=dims,
        coords=coords,
        attrs={"/": attrs},
    )
    if method == "nuts" and stats:
        _nuts_diagnostics(tree, stats)
    return tree


def _nuts_diagnostics(tree, stats):
    """R-hat, ESS, divergences and full-depth trees into the tree's attrs; warn on the
    last two."""
    import arviz as az

    def extreme(result, fn):
        values = [np.ravel(result[v].values) for v in result.data_vars]
        values = np.concatenate(values) if values else np.array([np.nan])
        return float(fn(values)) if np.any(np.isfinite(values)) else float("nan")

    divergences = int(np.sum(stats["diverging"]))
    at_max_depth = int(np.sum(stats.get("reached_max_treedepth", 0)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # R-hat of one short chain: NaN, not an error
        tree.attrs["max_rhat"] = extreme(az.rhat(tree), np.nanmax)
        tree.attrs["min_ess_bulk"] = extreme(az.ess(tree, method="bulk"), np.nanmin)
        tree.attrs["min_ess_tail"] = extreme(az.ess(tree, method="tail"), np.nanmin)
    tree.attrs["num_divergences"] = divergences
    tree.attrs["num_max_treedepth"] = at_max_depth
    if divergences:
        warnings.warn(
            f"NUTS produced {divergences} divergent transition(s) after warm-up: the draws "
            "may be biased. Increase num_warmup, or check the model (e.g. fewer components).",
            UserWarning,
            stacklevel=6,
        )
    if at_max_depth:
        total = int(np.size(stats["reached_max_treedepth"]))
        warnings.warn(
            f"{at_max_depth} of {total} NUTS transitions stopped at the maximum tree depth: "
            "an efficiency problem, not a bias, but the effective sample size suffers.  It "
            "happens along weakly identified directions (flat priors on loadings, the "
            "rotation of W); try prior=True, or nuts_options={'dense_mass': True} or "
            "{'max_tree_depth': ...}.",
            UserWarning,
            stacklevel=6,
        )
