"""Each model's posterior metadata (``posterior_spec``) against its own declaration.

Oracles: the declaration's trace (which latent sites exist, their shapes and
supports); the change of variables x -> (x - shift) / scale, under which a Gaussian
log-likelihood gains exactly n_observed * log(scale) (a wrong unit for any site breaks
it); NumPy's column means and variances for the stored standardisation.
"""

from __future__ import annotations

import numpy as np
import pytest
from estimator_recipes import COUNTS, X_MISSING, X, y
from numpyro.distributions import constraints

import latentlab
from latentlab.inference.posterior.spec import site_shape, to_data_units, to_target_units

SUPPORTS = {
    "real": constraints.real,
    "positive": constraints.positive,
    "simplex": constraints.simplex,
    "lower_cholesky": constraints.lower_cholesky,
}

# estimator, its data (the declaration's positional arguments)
CASES = {
    # the fits of estimator_recipes (compiled programs shared with test_save_load),
    # Bayesian PCA on data with missing entries
    "PPCA": (lambda: latentlab.PPCA(2, random_state=0), (X,)),
    "FactorAnalysis": (lambda: latentlab.FactorAnalysis(1, random_state=0), (X,)),
    "BayesianPCA": (lambda: latentlab.BayesianPCA(3, random_state=0), (X_MISSING,)),
    "SupervisedPCA": (lambda: latentlab.SupervisedPCA(2, random_state=0), (X, y)),
    "GaussianMixture": (lambda: latentlab.GaussianMixture(2, random_state=0), (X,)),
    "GaussianMixture-diag": (
        lambda: latentlab.GaussianMixture(2, covariance_type="diag", random_state=0),
        (X,),
    ),
    "PLSA": (lambda: latentlab.PLSA(2, random_state=0), (COUNTS,)),
}


def _sizes(est, data):
    n, d = data[0].shape
    K = est.n_components_
    return {
        "feature": d,
        "feature_bis": d,
        "component": K,
        "target": 1,  # y is one target
        "document": n,
        "word": d,
    }


@pytest.fixture(scope="module")
def problems():
    import warnings

    out = {}
    for name, (make, data) in CASES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BPCA keeping every component, pLSA's warnings
            est = make().fit(*data)
        with est._precision():
            out[name] = est, data, est._posterior_problem(*data, *([None] * (3 - len(data))))
    return out


def _latent_and_observed(problem):
    from numpyro import handlers

    target = problem.target
    model = handlers.substitute(handlers.seed(target.model, 0), data=target.init)
    trace = handlers.trace(model).get_trace(*target.args)
    sites = {k: s for k, s in trace.items() if s["type"] == "sample"}
    latent = {k: s for k, s in sites.items() if not s["is_observed"]}
    return latent, [k for k, s in sites.items() if s["is_observed"]]


@pytest.mark.parametrize("name", CASES)
def test_spec_names_the_declarations_sites_with_their_shapes(problems, name):
    est, data, problem = problems[name]
    spec = problem.spec
    with est._precision():
        latent, observed = _latent_and_observed(problem)
    assert set(latent) == set(spec.sites)
    assert set(spec.observed) <= set(observed)
    sizes = _sizes(est, data)
    for site_name, site in spec.sites.items():
        fn = latent[site_name]["fn"]
        assert tuple(fn.shape()) == site_shape(site, sizes), site_name
        support = fn.support
        while isinstance(support, constraints.independent):
            support = support.base_constraint
        assert support is SUPPORTS[site.constraint], site_name
        # the fitted point has the stated shape too
        assert np.shape(est.params_[site_name]) == site_shape(site, sizes)
    for site_name in spec.loadings:  # Procrustes rotates the last (component) axis
        assert spec.sites[site_name].dims[-1] == "component"
    for site_name, axis in (spec.components or {}).items():
        assert spec.sites[site_name].dims[axis] == "component"
    for site_name, dim in spec.noise:
        assert dim in sizes and site_name in spec.sites


@pytest.mark.parametrize("name", CASES)
def test_units_carry_the_fit_to_the_sampled_declaration(problems, name):
    """log p(x_std | point_std) = log p(x | point) + n_observed log(scale) for every
    site's units; and the draws' map back to data units inverts the map there."""
    from numpyro.infer.util import log_likelihood

    est, data, problem = problems[name]
    with est._precision():
        target, scoring = problem.target, problem.scoring
        on_target = log_likelihood(
            target.model, {k: v[None] for k, v in target.init.items()}, *target.args
        )
        on_data = log_likelihood(
            scoring.model, {k: v[None] for k, v in problem.point.items()}, *scoring.args
        )
    # np.asarray first: np.sum of a JAX array would reduce in JAX, outside float64
    total = sum(float(np.sum(np.asarray(on_data[s]))) for s in problem.spec.observed)
    standardised = sum(float(np.sum(np.asarray(on_target[s]))) for s in problem.spec.observed)
    scale = 1.0 if problem.standardisation is None else problem.standardisation.scale
    n_observed = sum(int(np.sum(~np.isnan(np.asarray(a, float)))) for a in data)
    if problem.spec.interior:  # pLSA's start sits 1e-6 inside the simplex
        assert standardised == pytest.approx(total, rel=1e-4)
    else:
        assert standardised == pytest.approx(total + n_observed * np.log(scale), rel=1e-10)
    back = problem.to_original(target.init)
    for site_name, value in problem.point.items():
        np.testing.assert_allclose(back[site_name], value, rtol=1e-10, atol=1e-5)


def test_fits_store_their_standardisation(problems):
    """(x - fit_shift_) / fit_scale_: observed column means, sqrt(mean variance)."""
    for name, columns in (("BayesianPCA", X_MISSING), ("SupervisedPCA", np.c_[X, y])):
        est = problems[name][0]
        np.testing.assert_allclose(est.fit_shift_, np.nanmean(columns, axis=0), rtol=1e-12)
        scale = np.sqrt(np.mean(np.nanvar(columns, axis=0)))
        assert est.fit_scale_ == pytest.approx(scale, rel=1e-12)
        shift = problems[name][2].standardisation.shift
        np.testing.assert_array_equal(np.concatenate(list(shift.values())), est.fit_shift_)


def test_bpca_hyperprior_rate_rescales_with_the_data(problems):
    """The ARD prior's rate alpha_b has the data's variance units: the target's log
    joint at the standardised fit is the data's plus the change of variables,
    n_observed log s (rows) + (d - 2) K log s (W / s and alpha s^2)."""
    from functools import partial

    from numpyro.infer.util import log_density

    est, (X_data,), problem = problems["BayesianPCA"]
    target = problem.target
    s = problem.standardisation.scale
    d, K = est.params_["W"].shape
    with est._precision():
        standardised = log_density(target.model, target.args, {}, target.init)[0]
        data_model = partial(est.model_, use_prior=True, has_missing=True)
        original = log_density(data_model, (X_data,), {}, problem.point)[0]
    n_observed = int(np.sum(~np.isnan(X_data)))
    expected = float(original) + (n_observed + (d - 2) * K) * np.log(s)
    assert float(standardised) == pytest.approx(expected, rel=1e-10)


def test_unit_conversions_invert_each_other():
    from latentlab.models import bpca

    spec = bpca.posterior_spec()
    rng = np.random.default_rng(0)
    values = {
        "W": rng.normal(size=(3, 4, 2)),
        "mu": rng.normal(size=(3, 4)),
        "sigma2": rng.random(3),
        "alpha": rng.random((3, 2)),
    }
    shift = {"feature": rng.normal(size=4)}
    data = to_data_units(spec, values, shift, 2.0)
    np.testing.assert_allclose(data["W"], 2.0 * values["W"])
    np.testing.assert_allclose(data["mu"], 2.0 * values["mu"] + shift["feature"])
    np.testing.assert_allclose(data["sigma2"], 4.0 * values["sigma2"])
    np.testing.assert_allclose(data["alpha"], values["alpha"] / 4.0)
    back = to_target_units(spec, data, shift, 2.0)
    for k, v in values.items():
        np.testing.assert_allclose(back[k], v, rtol=1e-14)
