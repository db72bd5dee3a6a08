"""Factor analysis against scikit-learn, planted parameters and its own declaration."""

import jax
import numpy as np
import pytest
from oracles import dense_observed_loglik, hide_at_random, is_monotone
from sklearn.datasets import load_iris, load_wine
from sklearn.decomposition import FactorAnalysis as SkFA

import latentlab
from latentlab import PPCA, FactorAnalysis


def heteroscedastic(n=500, d=8, K=2, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d, K))
    psi = rng.uniform(0.1, 1.0, size=d)
    X = rng.normal(size=(n, K)) @ W.T + 5.0 + rng.normal(size=(n, d)) * np.sqrt(psi)
    return X, W, psi


@pytest.fixture(scope="module")
def planted():
    return heteroscedastic()


@pytest.fixture(scope="module")
def fitted(planted):
    X, _, _ = planted
    return FactorAnalysis(2, random_state=0).fit(X)


@pytest.mark.filterwarnings("ignore:Heywood case")  # petal length is nearly all factor
def test_iris_reaches_at_least_sklearn_loglik():
    # one factor: the most iris's four variables identify (the Ledermann bound)
    X = load_iris().data
    est = FactorAnalysis(1, random_state=0).fit(X)
    assert est.score(X) >= -2.81586412 - 1e-6  # scikit-learn's, at tol=1e-8
    assert is_monotone(est.log_likelihoods_)


def test_em_never_decreases_loglik(fitted):
    assert fitted.converged_
    assert is_monotone(fitted.log_likelihoods_)


def test_matches_sklearn_on_regular_data(planted, fitted):
    X, _, _ = planted
    sk = SkFA(2, tol=1e-8, max_iter=10000).fit(X)
    assert fitted.score(X) >= sk.score(X) - 1e-9
    assert fitted.score(X) == pytest.approx(sk.score(X), rel=1e-6)
    np.testing.assert_allclose(fitted.get_covariance(), sk.get_covariance(), atol=2e-3)


def test_recovers_planted_noise_variances(planted, fitted):
    X, W, psi = planted
    np.testing.assert_allclose(fitted.noise_variance_, psi, rtol=0.25)
    np.testing.assert_allclose(fitted.components_.T @ fitted.components_, W @ W.T, atol=0.25)


def test_isotropic_noise_gives_equal_variances_and_ppca_sigma2():
    rng = np.random.default_rng(5)
    n, d, K, sigma2 = 4000, 8, 2, 0.3
    X = rng.normal(size=(n, K)) @ rng.normal(size=(d, K)).T + rng.normal(size=(n, d)) * np.sqrt(
        sigma2
    )
    psi = FactorAnalysis(K, random_state=0).fit(X).noise_variance_
    s2 = PPCA(K, method="closed_form").fit(X).noise_variance_
    # sampling sd of a variance estimate from n rows: sigma2 * sqrt(2 / n) ~ 0.007
    se = sigma2 * np.sqrt(2.0 / n)
    assert np.all(np.abs(psi - sigma2) < 5 * se)
    assert np.all(np.abs(psi - s2) < 5 * se)


@pytest.mark.parametrize("rotation", ["varimax", "quartimax"])
def test_rotation_leaves_likelihood_unchanged(planted, fitted, rotation):
    X, _, _ = planted
    rotated = FactorAnalysis(2, rotation=rotation, random_state=0).fit(X)
    assert rotated.score(X) == pytest.approx(fitted.score(X), rel=1e-12)
    np.testing.assert_allclose(rotated.get_covariance(), fitted.get_covariance(), atol=1e-9)


def test_varimax_matches_sklearn_rotation(planted, fitted):
    from sklearn.decomposition._factor_analysis import _ortho_rotation

    X, _, _ = planted

    def varimax(L):
        return np.sum(np.var(L**2, axis=0))

    rotated = FactorAnalysis(2, rotation="varimax", random_state=0).fit(X)
    reference = _ortho_rotation(fitted.components_.T, method="varimax").T  # (d, K)
    assert varimax(rotated.components_.T) == pytest.approx(varimax(reference), rel=1e-6)
    assert varimax(rotated.components_.T) > varimax(fitted.components_.T) + 1e-3


def test_map_reaches_em_optimum(planted, fitted):
    X, _, _ = planted
    est = FactorAnalysis(2, method="map", svi_steps=3000, random_state=0).fit(X)
    assert est.score(X) == pytest.approx(fitted.score(X), rel=1e-4)


def test_missing_data_loglik_trace_and_imputation(planted):
    X, _, _ = planted
    X_missing, hidden = hide_at_random(X, 0.2, seed=2)
    est = FactorAnalysis(2, random_state=0).fit(X_missing)
    assert is_monotone(est.log_likelihoods_)
    dense = dense_observed_loglik(X_missing, est.mean_, est.get_covariance())
    assert est.score(X_missing) * len(X) == pytest.approx(dense, rel=1e-10)
    filled, std = est.impute(X_missing, return_std=True)
    np.testing.assert_array_equal(filled[~hidden], X[~hidden])
    rmse = np.sqrt(np.mean((filled[hidden] - X[hidden]) ** 2))
    rmse_mean = np.sqrt(np.mean((np.nanmean(X_missing, axis=0) - X)[hidden] ** 2))
    assert rmse < 0.8 * rmse_mean
    inside = np.abs(filled[hidden] - X[hidden]) <= 1.6448536 * std[hidden]
    assert 0.85 <= inside.mean() <= 0.95


# EM crawls towards a Heywood boundary; finiteness, not convergence, is the point here.
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_constant_and_duplicated_columns_give_finite_parameters():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 4))
    X = np.c_[X, X[:, 0], np.full(100, 2.0)]
    with pytest.warns(UserWarning, match="Heywood"):
        est = FactorAnalysis(2, max_iter=300, random_state=0).fit(X)
    for value in est.params_.values():
        assert np.all(np.isfinite(value))
    assert np.all(np.isfinite(est.score_samples(X)))


def test_parameter_count_is_capped_at_saturated_gaussian():
    from latentlab.models.factor_analysis import n_parameters

    assert n_parameters(10, 3) == 10 * 3 + 20 - 3
    assert n_parameters(4, 4) == 4 + 10  # past the Ledermann bound: full covariance


# (K = 0 is the diagonal-Gaussian baseline: tests/test_baseline_and_mle.py)
@pytest.mark.parametrize("K", [-1, 5, 9])  # d = 8: the Ledermann bound is 4
def test_n_components_out_of_range(planted, K):
    X, _, _ = planted
    with pytest.raises(ValueError, match="n_components"):
        FactorAnalysis(K).fit(X)


# -- the Ledermann bound --------------------------------------------------------------


def test_ledermann_bound_is_the_largest_k_with_non_negative_degrees_of_freedom():
    from latentlab.models.factor_analysis import ledermann_bound

    def df(d, K):
        return ((d - K) ** 2 - (d + K)) / 2

    bounds = {d: ledermann_bound(d) for d in range(1, 31)}
    assert all(df(d, K) >= 0 and (K == d or df(d, K + 1) < 0) for d, K in bounds.items())
    assert [bounds[d] for d in (1, 2, 3, 4, 5, 6, 10, 13, 30)] == [0, 0, 1, 1, 2, 3, 6, 8, 22]


@pytest.mark.filterwarnings("ignore::UserWarning")  # K = 8 in 50 iterations: Heywood, not converged
def test_factors_beyond_the_ledermann_bound_are_refused_naming_it():
    # measured before: FactorAnalysis(13) on wine's 13 variables was fitted, with only
    # a Heywood warning (four noise variances at their floor)
    X = load_wine().data
    bound = r"n_components <= 8 \(the Ledermann bound: .*n_features=13\)"
    with pytest.raises(ValueError, match=bound):
        FactorAnalysis(13).fit(X)
    with pytest.raises(ValueError, match=bound):
        FactorAnalysis(9).partial_fit(X)  # the streaming fit checks it too
    assert FactorAnalysis(8, max_iter=50).fit(X).n_components_ == 8


def test_default_takes_the_ledermann_bound():
    X = np.random.default_rng(0).normal(size=(50, 5))
    assert FactorAnalysis().fit(X).n_components_ == 2
    # two variables identify no factor: the default is the diagonal Gaussian
    assert FactorAnalysis().fit(X[:, :2]).n_components_ == 0


def test_imputer_search_stops_factor_analysis_at_the_bound():
    from latentlab import impute

    assert impute.max_components("fa", 500, 13) == 8
    assert impute.default_candidates("fa", 500, 13) == [("fa", K) for K in (1, 2, 3, 5, 8)]
    assert impute.default_candidates("fa", 500, 4) == [("fa", 1)]
    # auto's second stage: FA at the best PPCA rank and the next grid rank below,
    # each capped at the bound (PPCA's best 12 on 13 variables: FA at 8 once)
    second = impute.default_candidates("auto", 500, 13, best_rank=12)
    assert [spec for spec in second if spec[0] == "fa"] == [("fa", 8)]
    second = impute.default_candidates("auto", 500, 10, best_rank=8)
    assert [spec for spec in second if spec[0] == "fa"] == [("fa", 6), ("fa", 5)]


def test_unknown_rotation(planted):
    X, _, _ = planted
    with pytest.raises(ValueError, match="rotation"):
        FactorAnalysis(2, rotation="obliquemax").fit(X)


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    # the default K, the Ledermann bound, follows each check's data: one factor is
    # refused on the checks' two-feature data
    check_estimator(FactorAnalysis(random_state=0), expected_failed_checks={})


def test_save_load_round_trip(fitted, planted, tmp_path):
    X, _, _ = planted
    fitted.save(tmp_path / "fa.npz")
    loaded = latentlab.load(tmp_path / "fa.npz")
    assert loaded.score(X) == fitted.score(X)
    np.testing.assert_array_equal(loaded.transform(X), fitted.transform(X))


def test_svi_runs_on_the_same_declaration(planted, fitted):
    X, _, _ = planted
    est = FactorAnalysis(2, method="svi", svi_steps=1500, random_state=0).fit(X)
    # a posterior-median point estimate: close to, and never above, the ML optimum
    assert est.score(X) <= fitted.score(X) + 1e-9
    assert est.score(X) == pytest.approx(fitted.score(X), rel=1e-2)


@pytest.mark.parametrize("precision", [1.0, 1e6])
def test_row_posteriors_match_dense_gaussian(precision):
    """The per-row E-step (batched Gauss-Jordan inverse, refined) against SciPy's dense
    marginal and the textbook posterior moments, also with nearly noise-free features
    (precision 1e6 is where the variance floor stops a Heywood case)."""
    from latentlab.models.gaussian_latent import row_posteriors

    rng = np.random.default_rng(5)
    n, d, K = 40, 9, 4
    W, mu = rng.normal(size=(d, K)), rng.normal(size=d)
    psi = 1.0 / np.r_[np.full(2, precision), rng.uniform(0.5, 2.0, d - 2)]
    X = rng.normal(size=(n, K)) @ W.T + mu + np.sqrt(psi) * rng.normal(size=(n, d))
    X_missing, _ = hide_at_random(X, 0.25, seed=6)
    mask = (~np.isnan(X_missing)).astype(float)
    with jax.enable_x64(True):
        mean, cov, loglik = map(
            np.asarray, row_posteriors(W, mu, 1.0 / psi, np.nan_to_num(X_missing), mask)
        )
    expected = [dense_observed_loglik(row[None], mu, W @ W.T + np.diag(psi)) for row in X_missing]
    np.testing.assert_allclose(loglik, expected, rtol=1e-10, atol=1e-8)
    for i, row in enumerate(X_missing):
        o = ~np.isnan(row)
        M = np.eye(K) + (W[o].T / psi[o]) @ W[o]
        np.testing.assert_allclose(cov[i], np.linalg.inv(M), rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(
            mean[i], np.linalg.solve(M, W[o].T @ ((row[o] - mu[o]) / psi[o])), rtol=1e-8, atol=1e-10
        )


# -- equivariance under rescaling features -----------------------------------------------
#
# x -> S x + c with S = diag(s) maps W -> S W, psi -> S^2 psi, E[z | x] unchanged, and
# every observed entry's log-density drops by log s_j.  The fit must follow exactly,
# whatever the spread of s.


def rescaled_wine(seed=0):
    """Wine (178 x 13, feature variances from 0.01 to 1e5), and the same data with
    feature j multiplied by s_j in 1e-8 .. 1e8 and shifted."""
    from sklearn.datasets import load_wine

    X = load_wine().data
    d = X.shape[1]
    rng = np.random.default_rng(seed)
    s = np.logspace(-8, 8, d)[rng.permutation(d)]
    return X, X * s + 10.0 * s * rng.normal(size=d), s


def fit_quietly(est, X):
    """Fit with every warning an error: no Heywood or convergence warning is expected."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return est.fit(X)


def assert_scaled_copy(a, X, b, Y, s, rtol):
    """b (fitted on Y = X S + c) is a (fitted on X) in other units."""
    n = len(X)
    counts = np.sum(~np.isnan(X), axis=0)
    assert n * b.score(Y) == pytest.approx(n * a.score(X) - np.sum(counts * np.log(s)), rel=1e-6)
    # loadings compared in units of each feature's sd, so every entry counts alike
    sd = np.nanstd(X, axis=0)
    np.testing.assert_allclose(b.components_ / (s * sd), a.components_ / sd, atol=rtol)
    np.testing.assert_allclose(b.noise_variance_ / s**2, a.noise_variance_, rtol=rtol)
    np.testing.assert_allclose(b.transform(Y), a.transform(X), atol=rtol)


def test_fit_is_equivariant_under_feature_scales_from_1e_minus8_to_1e8():
    X, Y, s = rescaled_wine()
    n = len(X)
    a = fit_quietly(FactorAnalysis(2, random_state=0), X)
    b = fit_quietly(FactorAnalysis(2, random_state=0), Y)  # raised "non-finite values"
    assert_scaled_copy(a, X, b, Y, s, rtol=1e-8)
    for est, data in ((a, X), (b, Y)):
        assert est.converged_
        assert is_monotone(est.log_likelihoods_)
        assert est.log_likelihoods_[-1] == pytest.approx(n * est.score(data), rel=1e-10)
    # oracle: scikit-learn on the standardised data (where it converges well); Y is
    # that data times sd * s
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    sk = SkFA(2, tol=1e-8, max_iter=10000).fit(Xs).score(Xs)
    ours = b.score(Y) + np.sum(np.log(X.std(axis=0) * s))
    assert ours >= sk - 1e-9 * abs(sk)
    assert ours == pytest.approx(sk, rel=1e-7)


def test_a_feature_scaled_by_1e_minus8_fits_at_least_as_well_as_sklearn():
    X, _, _ = rescaled_wine()
    Y = X.copy()
    Y[:, 0] *= 1e-8
    a = fit_quietly(FactorAnalysis(2, random_state=0), X)
    b = fit_quietly(FactorAnalysis(2, random_state=0), Y)  # raised "non-finite values"
    s = np.r_[1e-8, np.ones(X.shape[1] - 1)]
    assert_scaled_copy(a, X, b, Y, s, rtol=1e-8)
    sk = SkFA(2, tol=1e-8, max_iter=10000).fit(Y)
    assert b.score(Y) >= sk.score(Y) - 1e-9 * abs(sk.score(Y))


def test_two_rescaled_features_reach_the_standardised_optimum_without_warnings():
    """Features x 1e3 and x 1e-3: previously EM stalled at -32.78 per row (against
    -23.55 for the standardised data) and warned that it had not converged."""
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    s = np.ones(X.shape[1])
    s[0], s[1] = 1e3, 1e-3
    a = fit_quietly(FactorAnalysis(2, random_state=0), Xs)
    b = fit_quietly(FactorAnalysis(2, random_state=0), Xs * s)
    assert b.score(Xs * s) + np.sum(np.log(s)) == pytest.approx(a.score(Xs), rel=1e-6)
    sk = SkFA(2, tol=1e-8, max_iter=10000).fit(Xs).score(Xs)
    assert a.score(Xs) >= sk - 1e-9 * abs(sk)


def test_missing_data_fit_is_equivariant_under_feature_scales():
    X, Y, s = rescaled_wine()
    hidden = hide_at_random(X, 0.1, seed=4)[1]
    X, Y = np.where(hidden, np.nan, X), np.where(hidden, np.nan, Y)
    a = fit_quietly(FactorAnalysis(2, random_state=0), X)
    b = fit_quietly(FactorAnalysis(2, random_state=0), Y)
    assert_scaled_copy(a, X, b, Y, s, rtol=1e-8)
    assert is_monotone(b.log_likelihoods_)
    assert b.log_likelihoods_[-1] == pytest.approx(len(Y) * b.score(Y), rel=1e-10)


@pytest.mark.parametrize("method", ["map", "svi"])
def test_gradient_fits_are_equivariant_under_feature_scales(method):
    # the same Adam run in standardised units, up to round-off in the data
    X, Y, s = rescaled_wine()
    a = fit_quietly(FactorAnalysis(2, method=method, svi_steps=400, random_state=0), X)
    b = fit_quietly(FactorAnalysis(2, method=method, svi_steps=400, random_state=0), Y)
    assert_scaled_copy(a, X, b, Y, s, rtol=1e-3)
    if method == "map":  # the last trace entry is the log-likelihood at the result
        assert b.log_likelihoods_[-1] == pytest.approx(len(Y) * b.score(Y), rel=1e-10)


def test_fit_passes_its_feature_units_without_parking_them_on_the_estimator(planted, fitted):
    """The per-feature units reach the canonical form as an argument, not as private
    scratch state of the estimator (which save/load would refuse)."""
    X, _, _ = planted
    seen = []

    class Watched(FactorAnalysis):
        def _finish(self, params, hyper, units):
            seen.append((sorted(k for k in vars(self) if k.startswith("_")), units))
            return super()._finish(params, hyper, units)

    est = Watched(2, random_state=0).fit(X)
    [(private, units)] = seen
    assert private == []
    np.testing.assert_allclose(units, X.std(axis=0), rtol=1e-12)  # each feature's sd
    np.testing.assert_array_equal(est.components_, fitted.components_)


def test_default_start_reaches_the_best_optimum_on_monotone_missing_data():
    # A random start settles, converged, 0.059 nats/row below the best optimum on these
    # data (random_state=0 before the PCA start); the default start is the
    # mean-imputed PCA solution and must reach the best of many starts.
    rng = np.random.default_rng(39)
    n, d = 60, 6
    X = rng.normal(size=(n, 2)) @ rng.normal(size=(2, d)) + 0.5 * rng.normal(size=(n, d))
    first_missing = rng.integers(1, d, size=n)
    dropout = rng.random(n) < 0.4
    hidden = dropout[:, None] & (np.arange(d)[None, :] >= first_missing[:, None])
    hidden[:8] = False
    X[hidden] = np.nan
    default = FactorAnalysis(2, random_state=0, tol=1e-9).fit(X)
    best = FactorAnalysis(2, random_state=1, n_init=8, tol=1e-9).fit(X)
    assert default.score(X) >= best.score(X) - 1e-7
    np.testing.assert_allclose(default.score(X), -5.63488, atol=1e-5)
    trace = default.log_likelihoods_
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))


@pytest.mark.parametrize("svd_method", ["lapack", "randomized"])
def test_svd_method_gives_the_exact_em_fit_that_sklearn_reaches(planted, fitted, svd_method):
    # latentlab's EM decomposes only the d x d covariance (exactly), so both of
    # scikit-learn's SVD choices give the default fit; scikit-learn's own fit with the
    # same svd_method is the oracle for the optimum's likelihood.
    X, _, _ = planted
    est = FactorAnalysis(2, svd_method=svd_method, iterated_power=1, random_state=0).fit(X)
    np.testing.assert_array_equal(est.components_, fitted.components_)
    np.testing.assert_array_equal(est.log_likelihoods_, fitted.log_likelihoods_)
    sk = SkFA(2, svd_method=svd_method, iterated_power=1, tol=1e-8, max_iter=10000).fit(X)
    assert est.score(X) >= sk.score(X) - 1e-9
    assert est.score(X) == pytest.approx(sk.score(X), rel=1e-6)


@pytest.mark.parametrize(
    "setting", [{"svd_method": "arpack"}, {"iterated_power": -1}, {"iterated_power": 1.5}]
)
def test_bad_svd_settings_are_refused_by_name(planted, setting):
    X, _, _ = planted
    with pytest.raises(ValueError, match=next(iter(setting))):
        FactorAnalysis(2, **setting).fit(X)
