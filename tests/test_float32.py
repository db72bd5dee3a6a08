"""``dtype="float32"`` on data far from the origin.

float32 has a spacing of 8 at 1e8, so a mean of 1e8 must never meet the data or the
parameters in float32: the Gaussian latent estimators centre in float64 on the host
before any cast and add the mean back in float64.  The oracles are dense float64
NumPy/SciPy computations at the same parameters (``oracles.py``) and the float64 fits.
"""

import copy

import numpy as np
import pytest
from oracles import dense_conditional, dense_observed_loglik, hide_at_random
from scipy.stats import multivariate_normal

from latentlab import PPCA, BayesianPCA, FactorAnalysis, SupervisedPCA

OFFSET = 1e8
ESTIMATORS = [PPCA, FactorAnalysis, BayesianPCA]


@pytest.fixture(scope="module")
def data():
    """Unit-scale rank-2 structure plus noise, shifted to a mean of 1e8."""
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(200, 2))
    X0 = Z @ rng.normal(size=(6, 2)).T + 0.3 * rng.normal(size=(200, 6))
    y0 = Z[:, 0] + 0.1 * rng.normal(size=200)
    X_missing, hidden = hide_at_random(X0 + OFFSET, 0.1, seed=1)
    return X0, y0, X_missing, hidden


def _as_float32(est):
    """The same fitted parameters, evaluated in float32."""
    est = copy.deepcopy(est)
    return est.set_params(dtype="float32")


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_fit_float32_uncentred_agrees_with_float64(cls, data):
    X0, _, _, _ = data
    X = X0 + OFFSET
    f64 = cls(n_components=2, random_state=0, tol=1e-6).fit(X)
    f32 = cls(n_components=2, random_state=0, tol=1e-6, dtype="float32").fit(X)
    # mean_ is the column mean (complete data): exact in float64, not rounded to 8
    np.testing.assert_allclose(f32.mean_ - OFFSET, X0.mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(f32.mean_ - OFFSET, f64.mean_ - OFFSET, atol=1e-6)
    # per-sample log-likelihood (~ -5) to what a float32 EM reaches (the old code was 25x
    # off): on these data plain EM crawls (1,105 float64 cycles to tol=1e-12), and
    # factor analysis's float32 EM stops where its updates fall below float32's
    # resolution, 1.0e-4 relative below the float64 fit at tol=1e-6 (5.7e-4 nats per row
    # below the maximum), so the bound is 2e-4.
    np.testing.assert_allclose(f32.score(X), f64.score(X), rtol=2e-4)
    # (Row by row the two fits differ inside the optimum's flat directions, which
    # float32's objective cannot resolve; score_samples itself is checked row by row
    # against a dense oracle below.)
    # a float32 fit on X + 1e8 is the float32 fit on X, moved by 1e8
    near = cls(n_components=2, random_state=0, tol=1e-6, dtype="float32").fit(X0)
    np.testing.assert_allclose(f32.mean_ - OFFSET, near.mean_, atol=1e-6)
    np.testing.assert_allclose(f32.score(X), near.score(X0), rtol=1e-4)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_predictions_float32_uncentred_match_float64_oracle(cls, data):
    _, _, X_missing, hidden = data
    f64 = cls(n_components=2, random_state=0).fit(X_missing)
    f32 = _as_float32(f64)
    mean, cov = f64.mean_, f64.get_covariance()
    n = len(X_missing)
    # score_samples on rows with NaN: exact marginal of the observed coordinates
    assert f32.score(X_missing) == pytest.approx(
        dense_observed_loglik(X_missing, mean, cov) / n, rel=1e-5
    )
    oracle_rows = [dense_observed_loglik(row[None], mean, cov) for row in X_missing]
    np.testing.assert_allclose(f32.score_samples(X_missing), oracle_rows, atol=1e-3)
    # imputations of the NaN entries, and their standard deviations (unit scale)
    oracle_fill, oracle_std = dense_conditional(X_missing, mean, cov)
    filled, std = f32.impute(X_missing, return_std=True)
    np.testing.assert_allclose(filled[hidden] - OFFSET, oracle_fill[hidden] - OFFSET, atol=1e-4)
    np.testing.assert_array_equal(filled[~hidden], X_missing[~hidden])
    np.testing.assert_allclose(std, oracle_std, atol=1e-4)
    np.testing.assert_allclose(f32.transform(X_missing), f64.transform(X_missing), atol=1e-4)
    draws = f32.sample_imputations(X_missing, n_imputations=2, random_state=0)
    assert np.all(np.abs(draws[:, hidden] - oracle_fill[hidden]) < 10 * oracle_std[hidden])


def test_sample_float32_uncentred_keeps_unit_scale(data):
    X0, _, _, _ = data
    f32 = _as_float32(PPCA(n_components=2, random_state=0).fit(X0 + OFFSET))
    draws = f32.sample(4000, random_state=0)
    # float32 draws about 1e8 would be multiples of 8: their spread would be wrong
    np.testing.assert_allclose(draws.mean(axis=0), f32.mean_, atol=0.2)
    np.testing.assert_allclose(draws.std(axis=0), np.sqrt(np.diag(f32.get_covariance())), rtol=0.1)


def test_supervised_pca_float32_uncentred(data):
    X0, y0, X_missing, hidden = data
    X, y = X0 + OFFSET, y0 + OFFSET
    f64 = SupervisedPCA(n_components=2, random_state=0, tol=1e-6).fit(X, y)
    f32 = SupervisedPCA(n_components=2, random_state=0, tol=1e-6, dtype="float32").fit(X, y)
    np.testing.assert_allclose(f32.params_["mu_x"] - OFFSET, X0.mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(f32.params_["mu_y"] - OFFSET, y0.mean(), atol=1e-6)
    assert f32.score(X, y) == pytest.approx(f64.score(X, y), rel=1e-4)  # R^2 of predict
    # the prediction path alone, at the float64 parameters, against a dense oracle
    f32 = _as_float32(f64)
    p = f64.params_
    W = np.vstack([p["W_x"], p["W_y"]])
    mu = np.r_[p["mu_x"], p["mu_y"]]
    cov = W @ W.T + np.diag(np.r_[np.full(6, p["sigma2_x"]), p["sigma2_y"]])
    oracle = multivariate_normal(mu, cov).logpdf(np.column_stack([X, y]))
    np.testing.assert_allclose(f32.score_samples(X, y), oracle, atol=1e-3)
    np.testing.assert_allclose(f32.predict(X_missing), f64.predict(X_missing), atol=1e-4)
    np.testing.assert_allclose(f32.transform(X_missing), f64.transform(X_missing), atol=1e-4)


@pytest.mark.parametrize("solver", ["full", "covariance_eigh", "randomized"])
def test_pca_float32_uncentred_matches_sklearn_on_centred_data(solver, data):
    from sklearn.decomposition import PCA as SkPCA

    from latentlab import PCA

    X0, _, _, _ = data
    X = X0 + OFFSET
    oracle = SkPCA(2, svd_solver="full").fit(X0)
    f32 = PCA(2, svd_solver=solver, dtype="float32", random_state=0).fit(X)
    # the old code: mean_ off by 16, explained_variance_ [1557, 5.3] for [12.2, 1.0]
    np.testing.assert_allclose(f32.mean_ - OFFSET, oracle.mean_, atol=1e-6)
    np.testing.assert_allclose(f32.explained_variance_, oracle.explained_variance_, rtol=1e-5)
    np.testing.assert_allclose(f32.score(X), oracle.score(X0), rtol=1e-5)
    Z = f32.transform(X)
    np.testing.assert_allclose(np.abs(Z), np.abs(oracle.transform(X0)), atol=1e-4)
    back = f32.inverse_transform(Z) - OFFSET
    np.testing.assert_allclose(back, oracle.inverse_transform(oracle.transform(X0)), atol=1e-4)
