"""scikit-learn parity of the Gaussian latent estimators: the K = 0
baseline, n_components="mle", FactorAnalysis(noise_variance_init=...) and loglike_."""

import numpy as np
import pytest
from oracles import planted_low_rank
from scipy.stats import multivariate_normal, norm
from sklearn.datasets import load_diabetes, load_iris, load_wine
from sklearn.decomposition import PCA as SklearnPCA
from sklearn.decomposition import FactorAnalysis as SklearnFA

import latentlab


@pytest.fixture(scope="module")
def wine():
    return load_wine().data


def test_ppca_with_no_component_is_the_isotropic_gaussian(wine):
    X = wine
    n, d = X.shape
    model = latentlab.PPCA(0).fit(X)
    variance = X.var(axis=0).mean()  # ML: the mean of the features' variances
    assert model.noise_variance_ == pytest.approx(variance, rel=1e-12)
    oracle = multivariate_normal(X.mean(axis=0), variance * np.eye(d)).logpdf(X)
    np.testing.assert_allclose(model.score_samples(X), oracle, rtol=1e-12)
    assert model.components_.shape == (0, d)
    assert model.transform(X).shape == (n, 0)
    assert model._n_parameters() == d + 1
    closed = latentlab.PPCA(0, method="closed_form").fit(X)
    assert closed.score(X) == pytest.approx(model.score(X), rel=1e-12)


def test_factor_analysis_with_no_factor_is_the_diagonal_gaussian(wine):
    X = wine.copy()
    model = latentlab.FactorAnalysis(0).fit(X)
    oracle = multivariate_normal(X.mean(axis=0), np.diag(X.var(axis=0))).logpdf(X)
    np.testing.assert_allclose(model.score_samples(X), oracle, rtol=1e-12)
    assert model._n_parameters() == 2 * X.shape[1]
    # with missing entries the features stay independent: each one's observed mean
    # and variance are the ML fit, and a row's density is the product over its entries
    X[np.random.default_rng(0).random(X.shape) < 0.2] = np.nan
    model = latentlab.FactorAnalysis(0).fit(X)
    mean, sd = np.nanmean(X, axis=0), np.nanstd(X, axis=0)
    oracle = np.nansum(norm.logpdf(X, mean, sd), axis=1)
    np.testing.assert_allclose(model.score_samples(X), oracle, rtol=1e-10)
    filled = model.impute(X)
    np.testing.assert_allclose(filled[np.isnan(X)], np.broadcast_to(mean, X.shape)[np.isnan(X)])


def test_compare_has_the_baseline_row(wine):
    X = wine
    table = latentlab.compare([latentlab.PPCA(0), latentlab.PPCA(2)], X, cv=2)
    row = table.loc["PPCA(K=0)"]
    assert row["n_params"] == X.shape[1] + 1
    variance = X.var(axis=0).mean()
    oracle = multivariate_normal(X.mean(axis=0), variance * np.eye(X.shape[1])).logpdf(X).sum()
    assert row["loglik"] == pytest.approx(oracle, rel=1e-12)


@pytest.mark.parametrize("name", ["iris", "wine", "diabetes", "planted"])
def test_ppca_mle_rank_is_minkas_as_in_sklearn(name):
    if name == "planted":
        X, _, _ = planted_low_rank(n=300, d=10, rank=3, noise=0.3, seed=0)
    else:
        X = {"iris": load_iris, "wine": load_wine, "diabetes": load_diabetes}[name]().data
    expected = SklearnPCA(n_components="mle", svd_solver="full").fit(X).n_components_
    assert latentlab.PPCA("mle").fit(X).n_components_ == expected
    if name == "planted":
        assert expected == 3


def test_mle_and_zero_components_are_refused_where_undefined(wine):
    X = wine.copy()
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="needs complete data"):
        latentlab.PPCA("mle").fit(X)
    with pytest.raises(ValueError, match="n_samples >= n_features"):
        latentlab.PPCA("mle").fit(wine[:5])
    with pytest.raises(ValueError, match="does not support n_components='mle'"):
        latentlab.FactorAnalysis("mle").fit(wine)
    with pytest.raises(ValueError, match="n_components=0 is out of range"):
        latentlab.BayesianPCA(0).fit(wine)  # its prior is on the columns of W


def test_noise_variance_init_starts_em_there_and_reaches_sklearns_optimum(wine):
    X = wine
    psi0 = 0.3 * X.var(axis=0)
    default = latentlab.FactorAnalysis(3).fit(X)
    started = latentlab.FactorAnalysis(3, noise_variance_init=psi0).fit(X)
    sklearn = SklearnFA(3, noise_variance_init=psi0, tol=1e-10, max_iter=10000).fit(X)
    # a different start (its first objective differs), the same optimum
    assert started.log_likelihoods_[0] != pytest.approx(default.log_likelihoods_[0], rel=1e-6)
    assert started.score(X) == pytest.approx(sklearn.score(X), abs=1e-8)
    assert started.score(X) == pytest.approx(default.score(X), abs=1e-8)
    assert started.loglike_ == list(started.log_likelihoods_)
    with pytest.raises(ValueError, match=r"noise_variance_init must have shape \(13,\)"):
        latentlab.FactorAnalysis(3, noise_variance_init=np.ones(3)).fit(X)
    with pytest.raises(ValueError, match="positive and finite"):
        latentlab.FactorAnalysis(3, noise_variance_init=-psi0).fit(X)


def test_factor_analysis_copy_false_leaves_x_as_it_was(wine):
    X = wine.copy()
    X[3, 2] = np.nan
    before = X.copy()
    fitted = latentlab.FactorAnalysis(2, copy=False).fit(X)
    np.testing.assert_array_equal(X, before)  # NaN in place, values untouched
    reference = latentlab.FactorAnalysis(2).fit(before)
    assert fitted.score(before) == reference.score(before)
