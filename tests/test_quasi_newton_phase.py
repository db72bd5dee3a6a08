"""EM's quasi-Newton phase (latentlab.inference.quasi_newton, run_em's ``polish``).

Oracles: a box-constrained quadratic solved by enumerating its active sets; for the
Gaussian latent models on real data, (a) plain EM started at the fit cannot raise
the log-likelihood (a maximum is a fixed point of EM, and EM never descends), (b) the
fit is at least as good as accelerated EM without the phase, and as scikit-learn's
factor analysis on complete data; (c) a variable that copies another is a Heywood
case whose uniquenesses sit on their floor.
"""

from __future__ import annotations

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import is_monotone
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.decomposition import FactorAnalysis as SklearnFactorAnalysis
from sklearn.preprocessing import StandardScaler

from latentlab import PPCA, FactorAnalysis
from latentlab.inference.em import run_em
from latentlab.inference.quasi_newton import maximise_in_box
from latentlab.models import factor_analysis as fa
from latentlab.models import ppca
from latentlab.models.gaussian_latent import mean_imputed_pca, summarise

# data set -> (loader, factors, most steps seen plus headroom: EM alone took 4,000 to
# more than 30,000 accelerated cycles on these, without converging on breast_cancer)
DATA = {
    "wine": (load_wine, 6, 130),
    "diabetes": (load_diabetes, 4, 145),
    "breast_cancer": (load_breast_cancer, 8, 280),
}


def standardised_with_holes(name, fraction):
    X = StandardScaler().fit_transform(DATA[name][0]().data)
    rng = np.random.default_rng(0)
    return np.where(rng.random(X.shape) < fraction, np.nan, X)


def em_problem(X, module, params):
    """The E-step's data, floors and the fit's parameters, in the data's units."""
    mask = ~np.isnan(X)
    n, d = X.shape
    data, column_variance = summarise(
        np.where(mask, X, 0.0), np.zeros(d), mask.astype(float) if not mask.all() else None
    )
    floor = 1e-6 * column_variance
    hyper = module.Hyper(variance_floor=floor if module is fa else np.mean(floor))
    fields = {name: jnp.asarray(params[name], jnp.float64) for name in module.Params._fields}
    return data, hyper, module.Params(**fields)


def plain_em(module, start, data, hyper, n, cycles, accelerate):
    """Log-likelihood per row after ``cycles`` EM iterations (SQUAREM cycles with
    ``accelerate``) without the quasi-Newton phase; float64 (``jax.enable_x64``)."""
    starts = jax.tree.map(lambda leaf: leaf[None], start)
    result = run_em(
        module.e_step,
        module.m_step,
        starts,
        data,
        hyper,
        jnp.asarray(float(n)),
        jnp.asarray(0.0),
        max_iter=cycles,
        accelerate=accelerate,
    )
    return float(result.objective) / n


def fit_quietly(estimator, X):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Heywood")
        return estimator.fit(X)


# ----------------------------------------------------------------------------- the method


def test_maximise_in_box_solves_a_bounded_quadratic():
    """max -(x - a)' A (x - a) / 2 over x >= 0: the KKT point found by trying every
    active set (free part solves A_FF x_F = (A a)_F; multipliers of the held part
    have the right sign)."""
    rng = np.random.default_rng(3)
    B = rng.normal(size=(6, 6))
    A = B @ B.T + 0.5 * np.eye(6)
    a = np.array([1.0, -2.0, 0.5, -0.3, 2.0, -1.0])

    def kkt_solution():
        for held in itertools.product([False, True], repeat=6):
            held = np.array(held)
            x = np.zeros(6)
            free = ~held
            x[free] = np.linalg.solve(A[np.ix_(free, free)], (A @ a)[free])
            gradient = A @ (x - a)  # of the loss; >= 0 where held at the bound
            if np.all(x[free] >= 0) and np.all(gradient[held] >= -1e-12):
                return x
        raise AssertionError("no KKT point")

    with jax.enable_x64(True):
        A_, a_ = jnp.asarray(A), jnp.asarray(a)

        def objective(x):
            return -0.5 * (x - a_) @ A_ @ (x - a_)

        start = jnp.ones(6)
        x_em = start - 0.01 * A_ @ (start - a_)  # a slow gradient step standing in for EM's
        result = maximise_in_box(
            objective, x_em, start, jnp.zeros(6), jnp.full(6, jnp.inf), 1.0, 1e-14, 100
        )
        converged = bool(result.converged)
        x = np.asarray(result.x)
        n_iter = int(result.n_iter)
        trace = np.asarray(result.trace)[:n_iter]
    expected = kkt_solution()
    np.testing.assert_allclose(x, expected, atol=1e-7)
    assert np.all(x[expected == 0] == 0.0)  # on the bound exactly, not near it
    assert converged and n_iter <= 30
    assert is_monotone(trace)


# ----------------------------------------------------------------------------- the models


@pytest.mark.parametrize("fraction", [0.0, 0.15, 0.3])
@pytest.mark.parametrize("name", list(DATA))
def test_factor_analysis_converges_to_a_maximum_in_few_steps(name, fraction):
    X = standardised_with_holes(name, fraction)
    n = X.shape[0]
    _, K, most_steps = DATA[name]
    est = fit_quietly(FactorAnalysis(K), X)  # tol=1e-10 per row
    assert est.converged_ and est.n_iter_ <= most_steps
    assert is_monotone(est.log_likelihoods_)

    at_fit = est.score(X)
    with jax.enable_x64(True):
        data, hyper, params = em_problem(X, fa, est.params_)
        # (a) a maximum is a fixed point of EM.  The stopping rule (a step's gain at
        # most tol and the projected gradient at most sqrt(tol) per row) leaves up to
        # ~10 tol along weakly determined directions (seen: 1.03e-9 on
        # breast_cancer); at tol=1e-12 FA's Heywood fits reach the arithmetic's limit
        # before the rule holds, so the bound is 100 tol at the default tol.
        assert plain_em(fa, params, data, hyper, n, 50, accelerate=False) - at_fit <= 1e-8
        # (b) at least as good as accelerated EM alone from the same (PCA) start
        start = fa.init_from_pca(mean_imputed_pca(data, n, K, K), hyper)
        assert at_fit >= plain_em(fa, start, data, hyper, n, 200, accelerate=True) - 1e-9
    if fraction == 0.0:
        sklearn_fit = SklearnFactorAnalysis(K, tol=1e-8, max_iter=10_000).fit(X)
        assert at_fit >= sklearn_fit.score(X) - 1e-9


@pytest.mark.parametrize("fraction", [0.15, 0.3])
@pytest.mark.parametrize("name", list(DATA))
def test_ppca_with_missing_entries_converges_to_a_maximum_in_few_steps(name, fraction):
    X = standardised_with_holes(name, fraction)
    n = X.shape[0]
    K = DATA[name][1]
    est = PPCA(K, tol=1e-12).fit(X)
    assert est.converged_ and est.n_iter_ <= 110  # seen: at most 85 (breast_cancer)
    assert is_monotone(est.log_likelihoods_)
    at_fit = est.score(X)
    with jax.enable_x64(True):
        data, hyper, params = em_problem(X, ppca, est.params_)
        assert plain_em(ppca, params, data, hyper, n, 50, accelerate=False) - at_fit <= 1e-9


def test_a_copied_variable_is_a_heywood_case_on_its_floor():
    """x_13 = x_4: their uniquenesses' optimum is zero, so both sit on the floor
    (1e-6 of each variance), and the warning names them."""
    X = StandardScaler().fit_transform(load_wine().data)
    X = np.c_[X, X[:, 4]]
    with pytest.warns(UserWarning, match=r"Heywood case: .*feature\(s\) 4, 13 reached"):
        est = FactorAnalysis(3).fit(X)
    assert est.converged_ and est.n_iter_ <= 100
    floor = 1e-6 * X.var(axis=0)
    np.testing.assert_allclose(est.noise_variance_[[4, 13]], floor[[4, 13]], rtol=1e-12)
    assert np.all(est.noise_variance_[:4] > 100 * floor[:4])


@pytest.mark.parametrize("fraction", [0.0, 0.15, 0.3])
@pytest.mark.parametrize("name", ["wine", "diabetes"])
def test_supervised_pca_converges_to_a_maximum_in_few_steps(name, fraction, monkeypatch):
    """SPCA's fit, with and without holes in X: plain EM from the fitted (padded)
    parameters, on the program's own data, cannot raise the joint log-likelihood."""
    import latentlab.models.gaussian_latent as gaussian_latent
    from latentlab import SupervisedPCA

    captured = {}
    fit_em = gaussian_latent.fit_em

    def spy(model, start_inputs, data, hyper, n, *args, **kwargs):
        best = fit_em(model, start_inputs, data, hyper, n, *args, **kwargs)
        result = (best.params, best.trace, best.n_iter, best.converged)
        module = dict(model.settings)["module"]
        captured.update(module=module, data=data, n=n, hyper=hyper, result=result)
        return best

    monkeypatch.setattr(gaussian_latent, "fit_em", spy)
    X = standardised_with_holes(name, fraction)
    y = DATA[name][0]().target.astype(float)
    y = (y - y.mean()) / y.std()
    # seeded: SupervisedPCA's start is random, and an unseeded one reads NumPy's global
    # state, which the tests run before leave different (one CI run drew a start that
    # took 41 cycles; random_state 0..39 here take 8-11)
    est = SupervisedPCA(3, tol=1e-10, random_state=0).fit(X, y)
    assert est.converged_ and est.n_iter_ <= 30  # seen: 7-11 (EM alone: 8-11)
    assert is_monotone(est.log_likelihoods_)
    module, data, hyper = captured["module"], captured["data"], captured["hyper"]
    params, trace, n_iter, _ = captured["result"]
    n = float(captured["n"])
    at_fit = float(np.asarray(trace)[int(n_iter) - 1]) / n
    with jax.enable_x64(True):
        start = jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], params)
        polished = run_em(
            module.e_step,
            module.m_step,
            start,
            data,
            hyper,
            jnp.asarray(n),
            jnp.asarray(0.0),
            max_iter=50,
            accelerate=False,
        )
    assert float(polished.objective) / n - at_fit <= 1e-8


def bayesian_pca_runs(X, monkeypatch, quasi_newton):
    """Bayesian PCA's fit and its engine calls (the first run, then pruning's run with
    the kept columns): each call's start inputs, data, hyper, n and result."""
    import latentlab.models.gaussian_latent as gaussian_latent
    from latentlab import BayesianPCA
    from latentlab.models import bpca

    calls = []
    fit_em = gaussian_latent.fit_em

    def spy(model, start_inputs, data, hyper, n, *args, **kwargs):
        best = fit_em(model, start_inputs, data, hyper, n, *args, **kwargs)
        calls.append((start_inputs, data, hyper, float(n), best))
        return best

    with monkeypatch.context() as patch:
        patch.setattr(gaussian_latent, "fit_em", spy)
        if not quasi_newton:
            patch.setattr(bpca, "coordinates", None)
        est = BayesianPCA(tol=1e-10).fit(X)
    return est, calls


@pytest.mark.parametrize("name", ["wine", "diabetes"])
def test_bayesian_pca_reaches_the_map_of_em_alone(name, monkeypatch):
    """Bayesian PCA with its quasi-Newton phase (alpha profiled out) against EM alone,
    30% of the entries missing: the final log joint density is EM's or higher, and
    plain EM from the fit, on the program's own data, gains at most 1e-7 per row.

    Not the 1e-9 of the models above: the ARD prior leaves a nearly flat direction
    (seen: EM gains up to 5e-8 per row in 50 cycles from either fit, 1.8e-7 in 3,000,
    a few 1e-11 per cycle, so both stopping rules hold there).  On these small sets the
    phase saved no steps while it kept the rotation of W as coordinates (seen: 161-466
    against 127-560 in the first run); with the rotation profiled out, the first runs at
    the default tol converge in 39 (wine) and 32 (diabetes) steps.  breast_cancer's
    crawl is what it is for (benchmarks/bench_jobs.py's setting), too slow for a test."""
    from latentlab.models import bpca

    X = standardised_with_holes(name, 0.3)
    est, calls = bayesian_pca_runs(X, monkeypatch, quasi_newton=True)
    _, em_calls = bayesian_pca_runs(X, monkeypatch, quasi_newton=False)
    assert est.converged_ and is_monotone(est.log_likelihoods_)

    _, data, hyper, n, best = calls[-1]
    at_fit = float(best.objective) / n
    assert at_fit >= float(em_calls[-1][-1].objective) / n - 1e-8
    with jax.enable_x64(True):
        fitted = jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], best.params)
        rest = (data, hyper, jnp.asarray(n), jnp.asarray(0.0))
        polished = run_em(bpca.e_step, bpca.m_step, fitted, *rest, max_iter=50, accelerate=False)
    assert float(polished.objective) / n - at_fit <= 1e-7
