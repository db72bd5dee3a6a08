"""The bodies of every ``sample_posterior`` and ``to_datatree``: validate the
settings, build the estimator's posterior problem
(:mod:`latentlab.estimators._posterior_hooks`) and run the engine
(:mod:`latentlab.inference.posterior.sampling`).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._validation import check_option
from latentlab.inference.posterior.sampling import (
    DEFAULT_NUTS_CHAINS,
    METHODS,
    check_count,
    check_nuts_options,
    datatree_from_draws,
    sample,
)

__all__ = ["sample_posterior", "point_datatree"]


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
    predictive=True,
):
    """The body of every estimator's ``LatentEstimator.sample_posterior``."""
    check_is_fitted(est)
    check_option("method", method, METHODS)
    num_samples = check_count("num_samples", num_samples, 1)
    num_warmup = check_count("num_warmup", num_warmup, 0)
    if num_chains is None:  # iid SVI/Laplace draws gain nothing from being split in chains
        num_chains = DEFAULT_NUTS_CHAINS if method == "nuts" else 1
    num_chains = check_count("num_chains", num_chains, 1)
    if svi_steps is None:
        svi_steps = int(getattr(est, "svi_steps", 2000))
    svi_steps = check_count("svi_steps", svi_steps, 1)
    _check_flag("align", align)
    _check_flag("predictive", predictive)
    nuts_options = check_nuts_options(nuts_options, method)
    seed = int(check_random_state(random_state).randint(0, 2**31 - 1))

    with est._precision():
        problem = est._posterior_problem(X, y, prior)
        tree = sample(
            problem,
            method=method,
            num_samples=num_samples,
            num_warmup=num_warmup,
            num_chains=num_chains,
            seed=seed,
            svi_steps=svi_steps,
            nuts_options=nuts_options,
            align=align,
            model_name=type(est).__name__,
            predictive=predictive,
            settings=est.get_params(deep=False),
        )
    return _with_reported_draws(est, tree)


def point_datatree(est, X, y=None, *, n_replicates=100, random_state=None):
    """The body of every estimator's ``LatentEstimator.to_datatree``: the fitted point
    as a posterior of ``n_replicates`` identical draws (a point mass), so that every
    group lines up draw by draw with the data sets replicated from the fitted model."""
    check_is_fitted(est)
    n_replicates = check_count("n_replicates", n_replicates, 1)
    seed = int(check_random_state(random_state).randint(0, 2**31 - 1))
    with est._precision():
        problem = est._posterior_problem(X, y, None)
        draws = {
            name: np.broadcast_to(np.asarray(value), (1, n_replicates) + np.shape(value))
            for name, value in problem.target.init.items()
        }
        tree = datatree_from_draws(
            problem,
            draws,
            {},
            method="point",
            align=False,
            model_name=type(est).__name__,
            seed=seed,
            settings=est.get_params(deep=False),
        )
    return _with_reported_draws(est, tree)


def _with_reported_draws(est, tree):
    # an estimator that reports its factors in another frame than the declaration's
    # (an oblique rotation) adds their draws
    add_reported = getattr(est, "_add_reported_draws", None)
    if add_reported is not None:
        add_reported(tree)
    return tree


def _check_flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
