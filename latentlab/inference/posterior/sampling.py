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

from latentlab.inference.posterior import predictive as predictive_draws
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
    predictive: bool = True,
    settings: dict | None = None,
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
        problem,
        draws,
        stats,
        method=method,
        align=align,
        model_name=model_name,
        seed=seed,
        predictive=predictive,
        settings=settings,
    )


def datatree_from_draws(
    problem,
    draws,
    stats,
    *,
    method,
    align,
    model_name,
    seed=0,
    predictive=True,
    settings=None,
):
    """DataTree from draws in the target's units, each (chain, draw, *site_shape).

    Maps them to data units, scores every row at every draw, aligns, adds the
    rotation-invariant summaries, the data (observed and constant), the log prior, and
    with ``predictive`` a data set replicated at each draw and, under a proper prior,
    prior draws with theirs; ``model_name`` and ``settings`` (the estimator's) go into
    the attrs.  Call inside ``jax.enable_x64(True)`` for float64.
    """
    import arviz as az
    import xarray as xr

    from latentlab.inference.mcmc import pointwise_log_likelihood

    shape = next(iter(draws.values())).shape[:2]

    def by_chain(values):
        return {k: v.reshape(shape + v.shape[1:]) for k, v in values.items()}

    target_flat = {k: np.asarray(v).reshape((-1,) + v.shape[2:]) for k, v in draws.items()}
    flat = problem.to_original(target_flat)
    scoring, spec = problem.scoring, problem.spec
    loglik = pointwise_log_likelihood(scoring.model, flat, *scoring.args)
    loglik = sum(loglik[s] for s in scoring.sites)
    groups = _data_groups(problem)
    log_prior = by_chain(predictive_draws.log_prior(problem, target_flat))
    if predictive and spec.replicate is not None:
        groups["posterior_predictive"] = by_chain(
            predictive_draws.replicated_data(problem, flat, seed + 1)
        )
        if predictive_draws.has_proper_prior(problem):
            n_prior = int(np.prod(shape))
            parameters, data = predictive_draws.prior_draws(problem, n_prior, seed + 2)
            groups["prior"] = {k: v[None] for k, v in parameters.items()}
            groups["prior_predictive"] = {k: v[None] for k, v in data.items()}

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
    )
    dims[scoring.name] = ["obs"]
    dims.update(_data_dims(spec))  # the observed sites' data (the same name: a row's
    # log-likelihood takes its first dimension)
    prior_text = (
        "the declaration's priors"
        if problem.use_prior
        else "flat (improper): the declaration's priors are masked off, as in the "
        "maximum-likelihood fit"
    )
    attrs = {
        **_provenance(),
        "model": model_name,
        "model_settings": repr(settings or {}),
        "method": method,
        "prior": prior_text,
        "aligned": aligned,
        "alignment_reference": "the point estimate params_" if aligned != "none" else "",
        "loadings": ",".join(spec.loadings),
        "units": "data units",
        "log_likelihood": f"{scoring.name}: log p(row) of sites " + "+".join(scoring.sites),
    }
    if method == "point":
        attrs["posterior_note"] = (
            "the fitted point estimate, repeated once per replicated data set: a point "
            "mass, not a posterior"
        )
    coords = {k: v for k, v in problem.coords.items() if any(k in d for d in dims.values())}
    groups.update(
        posterior=posterior,
        log_likelihood={scoring.name: loglik.reshape(shape + loglik.shape[1:])},
    )
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
    # one number per parameter site and draw: the sites' dimensions do not apply
    tree["log_prior"] = xr.DataTree(az.dict_to_dataset(log_prior))
    if method == "nuts" and stats:
        _nuts_diagnostics(tree, stats)
    return tree


def _data_dims(spec) -> dict:
    """Dimensions of each observed site's data (rows ``obs`` by its column dimension),
    of its missing-entry mask and of its standardisation's shift."""
    dims = {}
    for site, column in zip(spec.observed, spec.data_dims, strict=True):
        dims[site] = ["obs", column]
        dims[f"{site}_missing"] = ["obs", column]
        dims[f"{site}_shift"] = [column]
    return dims


def _data_groups(problem) -> dict:
    """``observed_data`` (the data in data units, NaN where missing) and
    ``constant_data`` (each site's missing-entry mask, and the standardisation the
    draws were sampled under)."""
    spec = problem.spec
    data = {s: np.asarray(a) for s, a in zip(spec.observed, problem.scoring.args, strict=True)}
    constant = {}
    if spec.missing_data:
        constant.update({f"{s}_missing": np.isnan(a) for s, a in data.items()})
    if problem.standardisation is not None:
        shift, scale = problem.standardisation
        for site, column in zip(spec.observed, spec.data_dims, strict=True):
            constant[f"{site}_shift"] = np.asarray(shift[column], dtype=np.float64)
        constant["scale"] = np.float64(scale)
    groups = {"observed_data": data}
    if constant:
        groups["constant_data"] = constant
    return groups


def _provenance() -> dict:
    """Root attrs naming what made the tree (ArviZ stamps each group with its own
    version and the time)."""
    from importlib.metadata import version

    return {
        "inference_library": "latentlab",
        "inference_library_version": version("latentlab"),
        "jax_version": version("jax"),
        "numpyro_version": version("numpyro"),
        "arviz_version": version("arviz"),
    }


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
