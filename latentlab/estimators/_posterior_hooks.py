"""Each generative estimator's posterior problem, described once.

A :class:`PosteriorProblem` holds the declaration to sample (on the data as the
estimator's own MAP/SVI fit sees it: centred at the column means and divided by one
global scale), the fitted point in those units, the map of draws back to data units,
how to score rows, and which sites need alignment.  Every estimator points its
``_posterior_problem(X, y, prior)`` hook at one of the builders here; a new model
joins by writing one.  :mod:`latentlab.estimators._posterior_sampling` runs NUTS,
SVI or a Laplace approximation on the problem and returns an ArviZ DataTree.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import numpy as np

from latentlab._validation import (
    check_data,
    check_no_empty_columns,
    check_no_empty_rows,
)

__all__ = [
    "METHODS",
    "PosteriorProblem",
    "fitted_with_prior",
    "gaussian_latent_problem",
    "supervised_problem",
    "mixture_problem",
    "topic_problem",
    "default_problem",
]

METHODS = ("nuts", "svi", "laplace")


class PosteriorProblem(NamedTuple):
    target: Callable  # NumPyro model sampled (static settings bound), called target(*target_args)
    target_args: tuple  # its data, in the target's units
    init: dict  # the fitted point in the target's units (constrained)
    to_original: Callable  # dict of draws (any leading dims) in target units -> data units
    loglik_model: Callable  # declaration scoring rows in data units
    loglik_args: tuple
    loglik_sites: tuple  # observed sites whose per-row log-densities are added up
    loglik_name: str  # name of the pointwise log-likelihood variable
    point: dict  # fitted parameters in data units (params_), the alignment reference
    use_prior: bool
    dims: dict  # site -> dimension names
    coords: dict
    loadings: tuple = ()  # loadings sites (d_i, K) sharing one latent space, stacked by rows
    noise: tuple = ()  # (site, n_features) noise variances, for explained-variance ratios
    components: dict | None = None  # site -> axis of the component index (mixtures)
    component_key: str | None = None  # site whose rows identify components
    component_weights: str | None = None
    component_metric: np.ndarray | None = None
    nuts_warning: str | None = None  # why NUTS is expected to struggle on this target


def fitted_with_prior(est) -> bool:
    """Whether the estimator's own fit used the declaration's priors."""
    if callable(getattr(est, "_use_prior", None)):
        return bool(est._use_prior())
    method = getattr(est, "method", "em")
    if method == "svi":
        return True
    if method == "map":
        return bool(getattr(est, "prior", False))
    return bool(getattr(est, "_em_uses_prior", False))


def _resolve_prior(est, prior) -> bool:
    if prior is None:
        return fitted_with_prior(est)
    if not isinstance(prior, (bool, np.bool_)):
        raise ValueError(f"prior must be True, False or None, got {prior!r}")
    if not prior and getattr(est, "_posterior_prior_required", False):
        raise ValueError(
            f"{type(est).__name__}'s prior is part of the model (without it some "
            "parameters are not identified); prior=False is not available"
        )
    return bool(prior)


def _standardisation(V):
    """Observed column means and one global scale, as the estimators' MAP/SVI fits use."""
    observed = ~np.isnan(V)
    shift = np.where(observed, V, 0.0).sum(axis=0) / observed.sum(axis=0)
    variance = np.where(observed, (V - shift) ** 2, 0.0).sum(axis=0) / observed.sum(axis=0)
    typical = np.mean(variance) if np.any(variance > 0) else 1.0
    mean_variance = float(np.mean(np.where(variance > 0, variance, typical)))
    return shift, (np.sqrt(mean_variance) if mean_variance > 0 else 1.0)


def _feature_coords(est, d):
    names = getattr(est, "feature_names_in_", None)
    return {"feature": list(names) if names is not None else list(range(d))}


# ----------------------------------------------------------------------------- problems


def gaussian_latent_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    """PPCA, Bayesian PCA, factor analysis: sites named by the model module's Params."""
    import jax.numpy as jnp

    module = est._module
    X = check_data(est, X, reset=False, allow_nan=True)
    mask = ~np.isnan(X)
    check_no_empty_rows(mask)
    check_no_empty_columns(mask)
    has_missing = not mask.all()
    shift, scale = _standardisation(X)
    use_prior = _resolve_prior(est, prior)
    fields = module.Params._fields

    def to_original(values):
        params = module.rescale(module.Params(**{f: values[f] for f in fields}), scale)
        params = params._replace(mu=params.mu + shift)
        return {f: np.asarray(v) for f, v in params._asdict().items()}

    point = {f: np.asarray(est.params_[f]) for f in fields}
    start = module.Params(**point)
    start = module.rescale(start._replace(mu=start.mu - shift), 1.0 / scale)
    init = {f: jnp.asarray(v) for f, v in start._asdict().items()}
    target = partial(
        module.model,
        n_components=est.n_components_,
        has_missing=has_missing,
        use_prior=use_prior,
        **est._declaration_settings(scale),
    )
    d = X.shape[1]
    noise_site = "psi" if "psi" in fields else "sigma2"
    dims = {"W": ["feature", "component"], "mu": ["feature"], "psi": ["feature"]}
    dims["alpha"] = ["component"]
    return PosteriorProblem(
        target=target,
        target_args=(jnp.asarray((X - shift) / scale),),
        init=init,
        to_original=to_original,
        loglik_model=partial(est.model_, has_missing=has_missing),
        loglik_args=(jnp.asarray(X),),
        loglik_sites=("x",),
        loglik_name="x",
        point=point,
        use_prior=use_prior,
        dims={k: v for k, v in dims.items() if k in fields},
        coords=_feature_coords(est, d),
        loadings=("W",),
        noise=((noise_site, d),),
    )


def supervised_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    """Supervised PCA: the tempered collapsed declaration (EM's objective at any alpha)."""
    import jax.numpy as jnp

    from latentlab.models import supervised_pca as spca

    if y is None:
        raise ValueError("SupervisedPCA.sample_posterior requires y (the targets of X's rows)")
    X = check_data(est, X, reset=False, allow_nan=True)
    Y = est._check_y(y, X.shape[0]).reshape(X.shape[0], -1)
    if Y.shape[1] != est.n_targets_:
        raise ValueError(
            f"y has {Y.shape[1]} target(s), but SupervisedPCA was fitted with {est.n_targets_}"
        )
    V = np.concatenate([X, Y], axis=1)
    mask = ~np.isnan(V)
    check_no_empty_rows(mask)
    check_no_empty_columns(mask)
    has_missing = not mask.all()
    shift, scale = _standardisation(V)
    d_x, d_y = X.shape[1], Y.shape[1]
    shifts = {"mu_x": shift[:d_x], "mu_y": shift[d_x:]}
    use_prior = _resolve_prior(est, prior)

    def to_original(values):
        out = {}
        for name, value in values.items():
            value = np.asarray(value)
            if name.startswith("mu"):
                out[name] = value * scale + shifts[name]
            elif name.startswith("W"):
                out[name] = value * scale
            else:
                out[name] = value * scale**2
        return out

    point = {k: np.asarray(v) for k, v in est.params_.items()}
    init = {}
    for name, value in point.items():
        if name.startswith("mu"):
            init[name] = jnp.asarray((value - shifts[name]) / scale)
        elif name.startswith("W"):
            init[name] = jnp.asarray(value / scale)
        else:
            init[name] = jnp.asarray(value / scale**2)
    target = partial(
        spca.spca_model,
        n_components=est.n_components_,
        alpha=float(est.alpha),
        has_missing=has_missing,
        use_prior=use_prior,
        tempered=True,
    )
    coords = _feature_coords(est, d_x)
    coords["target"] = list(range(d_y))
    return PosteriorProblem(
        target=target,
        target_args=(
            jnp.asarray((X - shift[:d_x]) / scale),
            jnp.asarray((Y - shift[d_x:]) / scale),
        ),
        init=init,
        to_original=to_original,
        loglik_model=partial(est.model_, has_missing=has_missing),
        loglik_args=(jnp.asarray(X), jnp.asarray(Y)),
        loglik_sites=("x", "y"),
        loglik_name="xy",
        point=point,
        use_prior=use_prior,
        dims={
            "W_x": ["feature", "component"],
            "W_y": ["target", "component"],
            "mu_x": ["feature"],
            "mu_y": ["target"],
        },
        coords=coords,
        loadings=("W_x", "W_y"),
        noise=(("sigma2_x", d_x), ("sigma2_y", d_y)),
    )


def mixture_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    """Gaussian mixtures, sampled in data units (the declared priors are in those units)."""
    import jax.numpy as jnp

    allow_nan = est.__sklearn_tags__().input_tags.allow_nan
    X = check_data(est, X, reset=False, allow_nan=allow_nan)
    settings = dict(est.model_.keywords)
    if allow_nan:  # traced callers must say whether X has NaN
        mask = ~np.isnan(X)
        check_no_empty_rows(mask)
        settings["has_missing"] = not mask.all()
    use_prior = _resolve_prior(est, prior)
    point = {k: np.asarray(v) for k, v in est.params_.items()}
    covariance_type = est.covariance_type
    target = partial(est.model_.func, **{**settings, "use_prior": use_prior})
    scale_dims = {
        "full": ["component", "feature", "feature_bis"],
        "tied": ["feature", "feature_bis"],
        "diag": ["component", "feature"],
        "spherical": ["component"],
    }[covariance_type]
    components = {"weights": 0, "means": 0}
    if covariance_type != "tied":
        components["scale"] = 0
    covariances = est.covariances_
    if covariance_type == "tied":
        pooled = covariances
    elif covariance_type == "full":
        pooled = covariances.mean(axis=0)
    else:
        pooled = _diagonal_covariances(covariances, X.shape[1]).mean(axis=0)
    coords = _feature_coords(est, X.shape[1])
    coords["feature_bis"] = coords["feature"]
    return PosteriorProblem(
        target=target,
        target_args=(jnp.asarray(X),),
        init={k: jnp.asarray(v) for k, v in point.items()},
        to_original=lambda values: {k: np.asarray(v) for k, v in values.items()},
        loglik_model=partial(est.model_.func, **settings),
        loglik_args=(jnp.asarray(X),),
        loglik_sites=("x",),
        loglik_name="x",
        point=point,
        use_prior=use_prior,
        dims={"weights": ["component"], "means": ["component", "feature"], "scale": scale_dims},
        coords=coords,
        components=components,
        component_key="means",
        component_weights="weights",
        component_metric=np.linalg.inv(pooled),
    )


def _diagonal_covariances(variances, d):
    """(K, d, d) diagonal covariances from diag (K, d) or spherical (K,) variances."""
    variances = np.asarray(variances)
    if variances.ndim == 1:
        variances = np.repeat(variances[:, None], d, axis=1)
    return variances[:, :, None] * np.eye(d)


def topic_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    """pLSA: theta (one mixture per training document) and phi, on the simplex.

    Maximum-likelihood pLSA often puts exact zeros in theta or phi (a word a topic never
    uses), on the boundary of the simplex where unconstrained coordinates are
    infinite: the starting point is moved 1e-6 into the interior.  A Laplace
    approximation there is poor.

    The likelihood depends on theta and phi only through theta @ phi, which is
    unchanged by any invertible K x K map A with theta A and A^-1 phi still on their
    simplices (NMF's non-uniqueness), so beyond relabelling the flat-prior posterior
    is a ridge that reaches the simplex boundary.  NUTS explores that ridge and
    reports divergences near its ends (on a 20-document, 2-topic corpus: 150-180
    divergent transitions out of 200), so it warns up front; SVI (a local Gaussian in
    unconstrained coordinates) describes the spread around the fit.  Dirichlet
    priors (``doc_topic_prior``, ``topic_word_prior`` > 1 with ``prior=True``) pull the
    ridge's ends in but do not remove it.
    """
    import jax.numpy as jnp

    csr = est._counts(X, reset=False)
    D = len(est.doc_lengths_)
    if csr.shape[0] != D:
        raise ValueError(
            f"PLSA's theta holds one topic mixture per training document: sample_posterior "
            f"needs the training counts ({D} rows), got {csr.shape[0]} rows"
        )
    use_prior = _resolve_prior(est, prior)
    settings = {k: v for k, v in est.model_.keywords.items() if k != "use_prior"}
    point = {k: np.asarray(v) for k, v in est.params_.items()}

    def interior(p, eps=1e-6):
        return (p + eps) / (1.0 + eps * p.shape[-1])

    counts = jnp.asarray(csr.toarray())
    vocabulary = getattr(est, "vocabulary_", None)
    words = list(vocabulary) if vocabulary is not None else list(range(csr.shape[1]))
    return PosteriorProblem(
        target=partial(est.model_.func, **settings, use_prior=use_prior),
        target_args=(counts,),
        init={k: jnp.asarray(interior(v)) for k, v in point.items()},
        to_original=lambda values: {k: np.asarray(v) for k, v in values.items()},
        loglik_model=partial(est.model_.func, **settings),
        loglik_args=(counts,),
        loglik_sites=("x",),
        loglik_name="x",
        point=point,
        use_prior=use_prior,
        dims={"theta": ["document", "component"], "phi": ["component", "word"]},
        coords={"word": words},
        components={"phi": 0, "theta": 1},
        component_key="phi",
        nuts_warning=None
        if point["phi"].shape[0] == 1
        else (
            "pLSA's likelihood depends on theta and phi only through theta @ phi, so its "
            "posterior is a ridge reaching the simplex boundary (not a point up to "
            "relabelling): expect many divergent transitions and draws along that ridge.  "
            "method='svi' describes the spread around the fit."
        ),
    )


def default_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    """For estimators without a posterior hook of their own (e.g. classical PCA)."""
    raise ValueError(
        f"posterior sampling is not available for {type(est).__name__}: it has no "
        "generative declaration with parameters to sample"
    )
