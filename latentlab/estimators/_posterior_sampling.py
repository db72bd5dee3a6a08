"""The posterior driver: NUTS, SVI or Laplace on a :class:`PosteriorProblem`, then an
ArviZ DataTree with aligned draws, rotation-invariant summaries, pointwise
log-likelihoods and sampler diagnostics (the body of every ``sample_posterior``).
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._validation import check_option
from latentlab.estimators._posterior_hooks import METHODS

__all__ = ["sample_posterior", "datatree_from_draws", "NUTS_OPTIONS"]


def _check_count(name, value, low):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


NUTS_OPTIONS = ("target_accept_prob", "max_tree_depth", "dense_mass", "chain_method")
DEFAULT_NUTS_CHAINS = 4  # enough for R-hat (az.summary) to be defined and meaningful


def _check_nuts_options(options, method) -> dict:
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

    from latentlab.posterior import UnconstrainedCoordinates, gaussian_draws, laplace_approximation

    if method == "laplace":
        coords = UnconstrainedCoordinates(
            problem.target, problem.target_args, problem.init, problem.loadings
        )
        mean, factor = laplace_approximation(coords)
    else:
        from latentlab.inference.svi import fit_svi

        fit = fit_svi(
            problem.target,
            *problem.target_args,
            guide="normal",
            num_steps=svi_steps,
            learning_rate=0.01,  # starts at the fitted point: small steps suffice
            init_values=problem.init,
            seed=seed,
        )
        # AutoNormal is a diagonal Gaussian in the same biject_to coordinates
        coords = UnconstrainedCoordinates(problem.target, problem.target_args, fit.params)
        locs = [jnp.ravel(fit.guide_params[f"{name}_auto_loc"]) for name, _, _ in coords.layout]
        sds = [jnp.ravel(fit.guide_params[f"{name}_auto_scale"]) for name, _, _ in coords.layout]
        mean, factor = jnp.concatenate(locs), jnp.diag(jnp.concatenate(sds))
    return gaussian_draws(coords, mean, factor, key, n_draws)


def _align(problem, draws):
    """Aligned draws, the kind of alignment, and what undoes it (per draw)."""
    from latentlab import posterior

    if problem.loadings:
        draws, R = posterior.align_loadings(draws, problem.point, problem.loadings)
        return draws, "procrustes", {"rotation": R}
    if problem.components:
        weights = problem.component_weights
        perm = posterior.match_components(
            draws[problem.component_key],
            problem.point[problem.component_key],
            metric=problem.component_metric,
            weights=None if weights is None else draws[weights],
            reference_weights=None if weights is None else problem.point[weights],
        )
        return (
            posterior.relabel(draws, perm, problem.components),
            "relabelled",
            {"permutation": perm},
        )
    return draws, "none", {}


def _invariant_summaries(problem, draws):
    """Explained variance per component (eigenvalues of W W^T) and its ratio."""
    from latentlab.posterior import loading_spectrum

    if not problem.loadings:
        return {}
    W = np.concatenate([draws[s] for s in problem.loadings], axis=-2)
    n = W.shape[0]
    noise = np.concatenate(
        [np.broadcast_to(draws[s].reshape(n, -1), (n, size)) for s, size in problem.noise],
        axis=1,
    )
    explained, ratio = loading_spectrum(W, noise)
    return {"explained_variance": explained, "explained_variance_ratio": ratio}


def sample_posterior(
    est,
    X,
    y=None,
    *,
    method="nuts",
    num_samples=1000,
    num_warmup=500,
    num_chains=None,
    random_state=None,
    align=True,
    prior=None,
    svi_steps=None,
    nuts_options=None,
):
    """The body of ``sample_posterior`` for every estimator (see PosteriorMixin)."""
    from latentlab.inference.mcmc import run_nuts

    check_is_fitted(est)
    check_option("method", method, METHODS)
    num_samples = _check_count("num_samples", num_samples, 1)
    num_warmup = _check_count("num_warmup", num_warmup, 0)
    if num_chains is None:  # iid SVI/Laplace draws gain nothing from being split in chains
        num_chains = DEFAULT_NUTS_CHAINS if method == "nuts" else 1
    num_chains = _check_count("num_chains", num_chains, 1)
    if svi_steps is None:
        svi_steps = int(getattr(est, "svi_steps", 2000))
    svi_steps = _check_count("svi_steps", svi_steps, 1)
    if not isinstance(align, (bool, np.bool_)):
        raise ValueError(f"align must be True or False, got {align!r}")
    nuts_options = _check_nuts_options(nuts_options, method)
    seed = int(check_random_state(random_state).randint(0, 2**31 - 1))

    with est._precision():
        problem = est._posterior_problem(X, y, prior)
        if method == "nuts":
            if problem.nuts_warning:
                warnings.warn(problem.nuts_warning, UserWarning, stacklevel=3)
            result = run_nuts(
                problem.target,
                *problem.target_args,
                init_values=problem.init,
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
                k: v.reshape((num_chains, num_samples) + v.shape[1:])
                for k, v in approx.draws.items()
            }
            stats = {
                "lp": approx.log_p.reshape(num_chains, num_samples),
                "log_q": approx.log_q.reshape(num_chains, num_samples),
            }
        return datatree_from_draws(est, problem, draws, stats, method=method, align=align)


def datatree_from_draws(est, problem, draws, stats, *, method, align):
    """DataTree from draws in the target's units, each (chain, draw, *site_shape).

    Maps them to data units, scores every row at every draw, aligns, adds the
    rotation-invariant summaries and the attrs.  Call inside ``est._precision()``.
    """
    import arviz as az

    from latentlab.inference.mcmc import pointwise_log_likelihood

    shape = next(iter(draws.values())).shape[:2]
    draws = problem.to_original(draws)
    flat = {k: np.asarray(v).reshape((-1,) + v.shape[2:]) for k, v in draws.items()}
    loglik = pointwise_log_likelihood(problem.loglik_model, flat, *problem.loglik_args)
    loglik = sum(loglik[s] for s in problem.loglik_sites)

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
        **{problem.loglik_name: ["obs"]},
    )
    prior_text = (
        "the declaration's priors"
        if problem.use_prior
        else "flat (improper): the declaration's priors are masked off, as in the "
        "maximum-likelihood fit"
    )
    attrs = {
        "model": type(est).__name__,
        "method": method,
        "prior": prior_text,
        "aligned": aligned,
        "alignment_reference": "the point estimate params_" if aligned != "none" else "",
        "loadings": ",".join(problem.loadings),
        "units": "data units",
        "log_likelihood": f"{problem.loglik_name}: log p(row) of sites "
        + "+".join(problem.loglik_sites),
    }
    coords = {k: v for k, v in problem.coords.items() if any(k in d for d in dims.values())}
    groups = {
        "posterior": posterior,
        "log_likelihood": {problem.loglik_name: loglik.reshape(shape + loglik.shape[1:])},
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
            stacklevel=4,
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
            stacklevel=4,
        )
