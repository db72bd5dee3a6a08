"""``latentlab.psychometrics.goodness_of_fit`` against closed forms written here in
NumPy (F_ML, Bartlett's factor, RMSEA and its defining noncentral chi-square
equations, CFI, TLI, SRMR), semopy's statistics for an EFA-equivalent CFA, an
independent NumPy EM for the saturated model with missing entries, and planted
factor structures (correctly specified and misspecified)."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.datasets import load_wine
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import scale

import latentlab
from latentlab.psychometrics._correlation import saturated_normal
from latentlab.psychometrics.goodness_of_fit import goodness_of_fit

RTOL = 1e-8


# --- data and fits (module scope: each shape compiles its EM program once) ---------


def _planted(n=500, seed=0):
    """12 indicators of 3 orthogonal factors, four each, loadings 0.6-0.8, two
    cross-loadings: exactly a 3-factor model."""
    rng = np.random.default_rng(seed)
    W = np.zeros((12, 3))
    for k in range(3):
        W[4 * k : 4 * k + 4, k] = [0.8, 0.7, 0.6, 0.7]
    W[1, 1], W[6, 2] = 0.3, 0.3
    psi = 1.0 - (W**2).sum(axis=1) + 0.1
    Z = rng.standard_normal((n, 3))
    return Z @ W.T + rng.standard_normal((n, 12)) * np.sqrt(psi) + 5.0


@pytest.fixture(scope="module")
def wine():
    X = scale(load_wine().data)
    return X, latentlab.FactorAnalysis(3, random_state=0).fit(X)


@pytest.fixture(scope="module")
def planted():
    X = _planted()
    fits = {K: latentlab.FactorAnalysis(K, random_state=0).fit(X) for K in (1, 3)}
    return X, fits


@pytest.fixture(scope="module")
def planted_holes(planted):
    X = planted[0].copy()
    X[np.random.default_rng(1).random(X.shape) < 0.15] = np.nan
    return X, latentlab.FactorAnalysis(3, random_state=0).fit(X)


def _F_ml(S, Sigma):
    d = len(S)
    return (
        np.linalg.slogdet(Sigma)[1]
        - np.linalg.slogdet(S)[1]
        + np.trace(np.linalg.solve(Sigma, S))
        - d
    )


def _values(table, *rows):
    return [table.loc[r, "value"] for r in rows]


# --- complete data: closed forms ---------------------------------------------------


def test_complete_data_statistics_equal_closed_forms(wine):
    X, fa = wine
    n, d = X.shape
    K = 3
    S = np.cov(X.T, bias=True)
    Sigma = fa.get_covariance()
    F = _F_ml(S, Sigma)
    df = ((d - K) ** 2 - (d + K)) // 2
    fit = goodness_of_fit(fa, X)

    assert fit.loc["df", "value"] == df == 42
    assert fit.loc["n", "value"] == n
    chi2 = n * F
    np.testing.assert_allclose(fit.loc["chi2", "value"], chi2, rtol=RTOL)
    np.testing.assert_allclose(fit.loc["p_value", "value"], stats.chi2.sf(chi2, df), rtol=1e-6)
    bartlett = (n - 1 - (2 * d + 5) / 6 - 2 * K / 3) * F  # R's factanal
    np.testing.assert_allclose(fit.loc["chi2_bartlett", "value"], bartlett, rtol=RTOL)
    np.testing.assert_allclose(
        fit.loc["p_value_bartlett", "value"], stats.chi2.sf(bartlett, df), rtol=1e-6
    )
    rmsea = np.sqrt(max(chi2 - df, 0) / (n * df))  # lavaan: N, not N - 1
    np.testing.assert_allclose(fit.loc["rmsea", "value"], rmsea, rtol=RTOL)

    # log-likelihoods: saturated and independence in closed form; the model's own
    ll_sat = -0.5 * n * (d * np.log(2 * np.pi) + np.linalg.slogdet(S)[1] + d)
    ll_ind = -0.5 * n * (d * np.log(2 * np.pi) + np.log(np.diag(S)).sum() + d)
    ll = fa.score(X) * n
    np.testing.assert_allclose(
        _values(fit, "loglik", "loglik_saturated", "loglik_independence"),
        [ll, ll_sat, ll_ind],
        rtol=1e-12,
    )
    chi2_0 = 2 * (ll_sat - ll_ind)
    np.testing.assert_allclose(  # the independence statistic is n F(diag S, S) too
        chi2_0, n * _F_ml(S, np.diag(np.diag(S))), rtol=1e-10
    )
    df0 = d * (d - 1) // 2
    cfi = 1 - max(chi2 - df, 0) / max(chi2 - df, chi2_0 - df0, 0)
    tli = 1 - (chi2 / df - 1) / (chi2_0 / df0 - 1)
    R = (S - Sigma) / np.sqrt(np.outer(np.diag(S), np.diag(S)))
    srmr = np.sqrt(np.sum(R[np.tril_indices(d)] ** 2) / (d * (d + 1) / 2))
    np.testing.assert_allclose(
        _values(fit, "chi2_independence", "df_independence", "cfi", "tli", "srmr"),
        [chi2_0, df0, cfi, tli, srmr],
        rtol=RTOL,
    )
    np.testing.assert_allclose(
        _values(fit, "aic", "bic", "n_parameters"),
        [fa.aic(X), fa.bic(X), d * K + 2 * d - K * (K - 1) // 2],
        rtol=1e-12,
    )
    assert set(fit.columns) == {"value", "lower", "upper"}
    assert fit.drop(index="rmsea")[["lower", "upper"]].isna().all().all()
    assert fit.attrs["missing"] is False and fit.attrs["notes"] == []


def test_rmsea_interval_solves_the_noncentral_chi2_equations(wine):
    X, fa = wine
    n = len(X)
    fit = goodness_of_fit(fa, X, level=0.90)
    chi2, df = _values(fit, "chi2", "df")
    low, high = fit.loc["rmsea", ["lower", "upper"]]
    assert 0 < low < fit.loc["rmsea", "value"] < high
    # Browne & Cudeck: chi2 is the 95th / 5th percentile of chi2'(df, n df eps^2)
    np.testing.assert_allclose(stats.ncx2.cdf(chi2, df, n * df * low**2), 0.95, atol=1e-9)
    np.testing.assert_allclose(stats.ncx2.cdf(chi2, df, n * df * high**2), 0.05, atol=1e-9)
    np.testing.assert_allclose(
        fit.loc["rmsea_p_close", "value"],
        stats.ncx2.sf(chi2, df, n * df * 0.05**2),
        rtol=1e-8,
    )
    wider = goodness_of_fit(fa, X, level=0.99).loc["rmsea"]
    assert wider["lower"] < low and wider["upper"] > high


def test_matches_semopy_efa_equivalent_cfa(wine):
    """An orthogonal CFA with K(K-1)/2 anchor zeros and one unit loading per factor
    is EFA with K factors: the same chi2 (semopy: n F_ML), df, CFI and TLI; semopy's
    RMSEA divides by n - 1 where lavaan and latentlab divide by n."""
    import semopy  # a test dependency: an oracle that does not run is no oracle

    X, fa = wine
    n, d = X.shape
    names = [f"x{j}" for j in range(d)]
    lines = []
    for k in range(3):
        terms = [("0*" if j < k else "1*" if j == k else "") + c for j, c in enumerate(names)]
        lines.append(f"f{k} =~ " + " + ".join(terms))
        lines.append(f"f{k} ~~ f{k}")
        lines += [f"f{k} ~~ 0*f{m}" for m in range(k + 1, 3)]
    model = semopy.Model("\n".join(lines))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(pd.DataFrame(X, columns=names), obj="MLW")
        theirs = semopy.calc_stats(model).T["Value"]
    fit = goodness_of_fit(fa, X)
    assert fit.loc["df", "value"] == theirs["DoF"]
    # semopy's optimiser stops a little short of the optimum (chi2 +4e-7 relative);
    # EM reaches a lower chi2, never a higher one
    assert fit.loc["chi2", "value"] <= theirs["chi2"] * (1 + 1e-9)
    np.testing.assert_allclose(fit.loc["chi2", "value"], theirs["chi2"], rtol=1e-5)
    np.testing.assert_allclose(
        _values(fit, "cfi", "tli"), [theirs["CFI"], theirs["TLI"]], rtol=1e-5
    )
    np.testing.assert_allclose(
        fit.loc["rmsea", "value"] * np.sqrt(n / (n - 1)), theirs["RMSEA"], rtol=1e-5
    )


# --- planted structures --------------------------------------------------------------


def test_correct_model_fits_and_too_few_factors_do_not(planted):
    X, fits = planted
    good = goodness_of_fit(fits[3], X)
    bad = goodness_of_fit(fits[1], X)
    assert good.loc["df", "value"] == 33 and bad.loc["df", "value"] == 54
    assert good.loc["p_value", "value"] > 0.05
    assert good.loc["rmsea", "value"] < 0.02 and good.loc["rmsea", "lower"] == 0.0
    assert good.loc["rmsea_p_close", "value"] > 0.9
    assert good.loc["cfi", "value"] > 0.99 and good.loc["tli", "value"] > 0.99
    assert good.loc["srmr", "value"] < 0.03
    assert bad.loc["rmsea", "value"] > 0.05 and bad.loc["rmsea", "lower"] > 0.05
    assert bad.loc["p_value", "value"] < 1e-20
    assert bad.loc["cfi", "value"] < 0.9
    assert bad.loc["srmr", "value"] > 2 * good.loc["srmr", "value"]
    # the independence model and the saturated model do not depend on K
    for row in ("loglik_saturated", "loglik_independence", "chi2_independence"):
        assert good.loc[row, "value"] == bad.loc[row, "value"]
    # nested models: the 3-factor model has the higher likelihood
    assert good.loc["loglik", "value"] > bad.loc["loglik", "value"]


def test_saturated_model_df_zero_gives_nan_not_error():
    X = _planted(n=300, seed=2)[:, :3]  # d = 3, K = 1: df = ((3-1)^2 - 4)/2 = 0
    fa = latentlab.FactorAnalysis(1, random_state=0).fit(X)
    fit = goodness_of_fit(fa, X)
    assert fit.loc["df", "value"] == 0
    assert abs(fit.loc["chi2", "value"]) < 1e-6
    for row in ("p_value", "p_value_bartlett", "rmsea", "rmsea_p_close", "tli"):
        assert np.isnan(fit.loc[row, "value"]), row
    assert np.isnan(fit.loc["rmsea", ["lower", "upper"]]).all()
    assert fit.loc["cfi", "value"] == pytest.approx(1.0, abs=1e-9)
    assert fit.loc["srmr", "value"] < 1e-6
    assert any("df = 0" in note for note in fit.attrs["notes"])


# --- missing entries (FIML) ------------------------------------------------------------


def test_fiml_saturated_model_on_complete_data_is_the_closed_form(wine):
    X, fa = wine
    ll_closed, S_closed, _ = saturated_normal(X)
    # the EM route that data with NaN entries take, here on complete rows
    em = latentlab.GaussianMixture(1, covariance_type="full", reg_covar=0.0, tol=1e-12).fit(X)
    ll_em, S_em = em.score_samples(X).sum(), em.covariances_[0]
    np.testing.assert_allclose(ll_em, ll_closed, rtol=1e-12)
    np.testing.assert_allclose(S_em, S_closed, rtol=1e-10, atol=1e-12)
    # the FIML statistic 2 (l_sat - l_model) is the complete-data uncorrected chi2
    chi2_fiml = 2 * (ll_em - fa.score_samples(X).sum())
    np.testing.assert_allclose(chi2_fiml, goodness_of_fit(fa, X).loc["chi2", "value"], rtol=1e-9)


def _numpy_em_saturated(X, n_iter=60):
    """EM for the unrestricted normal with missing entries (Little & Rubin 2002,
    sec. 11.2), written here independently, and its observed-data log-likelihood."""
    n, d = X.shape
    observed = ~np.isnan(X)
    mu, S = np.nanmean(X, axis=0), np.diag(np.nanvar(X, axis=0))
    patterns = {}
    for i, row in enumerate(observed):
        patterns.setdefault(row.tobytes(), []).append(i)
    groups = [(observed[rows[0]], np.array(rows)) for rows in patterns.values()]

    def loglik(mu, S):
        total = 0.0
        for o, rows in groups:
            r = X[np.ix_(rows, o)] - mu[o]
            So = S[np.ix_(o, o)]
            quad = np.einsum("ij,ij->", r, np.linalg.solve(So, r.T).T)
            logdet = np.linalg.slogdet(So)[1]
            total -= 0.5 * (len(rows) * (o.sum() * np.log(2 * np.pi) + logdet) + quad)
        return total

    for _ in range(n_iter):
        sx, sxx = np.zeros(d), np.zeros((d, d))
        for o, rows in groups:
            m = ~o
            Xh = np.where(np.isnan(X[rows]), 0.0, X[rows])
            B = np.linalg.solve(S[np.ix_(o, o)], S[np.ix_(o, m)]).T
            Xh[:, m] = mu[m] + (Xh[:, o] - mu[o]) @ B.T
            C = np.zeros((d, d))
            C[np.ix_(m, m)] = S[np.ix_(m, m)] - B @ S[np.ix_(o, m)]
            sx += Xh.sum(axis=0)
            sxx += Xh.T @ Xh + len(rows) * C
        mu = sx / n
        S = sxx / n - np.outer(mu, mu)
    return loglik(mu, S), S


def test_fiml_with_holes(planted, planted_holes):
    X, fits = planted
    Xm, fa = planted_holes
    fit = goodness_of_fit(fa, Xm)
    complete = goodness_of_fit(fits[3], X)
    assert fit.attrs["missing"] is True
    assert np.isfinite(fit.loc["chi2", "value"]) and fit.loc["chi2", "value"] > 0
    assert fit.loc["df", "value"] == complete.loc["df", "value"]
    assert fit.loc["n", "value"] == len(Xm)
    ll, ll_sat, ll_ind = _values(fit, "loglik", "loglik_saturated", "loglik_independence")
    assert ll_sat >= ll >= ll_ind
    assert np.isnan(fit.loc["chi2_bartlett", "value"])
    assert any("Bartlett" in note for note in fit.attrs["notes"])
    # the FIML saturated model: an independent NumPy EM reaches the same maximum
    ll_oracle, S_oracle = _numpy_em_saturated(Xm)
    np.testing.assert_allclose(ll_sat, ll_oracle, rtol=1e-10)
    # the independence model: FactorAnalysis(0) fitted to the same entries
    ll_fa0 = latentlab.FactorAnalysis(0).fit(Xm).score_samples(Xm).sum()
    np.testing.assert_allclose(ll_ind, ll_fa0, rtol=1e-9)
    # the statistics are the model's: chi2 = 2 (l_sat - l), RMSEA etc. from it
    chi2, df = 2 * (ll_oracle - fa.score_samples(Xm).sum()), fit.loc["df", "value"]
    np.testing.assert_allclose(fit.loc["chi2", "value"], chi2, rtol=1e-7)
    n = len(Xm)
    np.testing.assert_allclose(
        fit.loc["rmsea", "value"], np.sqrt(max(chi2 - df, 0) / (n * df)), rtol=1e-6, atol=1e-12
    )
    R = (S_oracle - fa.get_covariance()) / np.sqrt(np.outer(np.diag(S_oracle), np.diag(S_oracle)))
    srmr = np.sqrt(np.mean(R[np.tril_indices(len(R))] ** 2))
    np.testing.assert_allclose(fit.loc["srmr", "value"], srmr, rtol=1e-6)
    # a correctly specified model still fits with 15% of the entries missing
    assert fit.loc["p_value", "value"] > 0.01 and fit.loc["cfi", "value"] > 0.99


def test_rows_without_observed_entries_are_dropped(planted_holes):
    Xm, fa = planted_holes
    padded = np.vstack([Xm, np.full((2, Xm.shape[1]), np.nan)])
    pd.testing.assert_frame_equal(goodness_of_fit(fa, padded), goodness_of_fit(fa, Xm))


# --- PPCA ----------------------------------------------------------------------------


def test_ppca_is_accepted_with_its_own_df(wine):
    X, _ = wine
    n, d = X.shape
    ppca = latentlab.PPCA(2, random_state=0).fit(X)
    fit = goodness_of_fit(ppca, X)
    assert fit.loc["df", "value"] == d * (d + 1) // 2 - (d * 2 + 1 - 1)  # 91 - 26
    F = _F_ml(np.cov(X.T, bias=True), ppca.get_covariance())
    np.testing.assert_allclose(fit.loc["chi2", "value"], n * F, rtol=RTOL)
    assert np.isnan(fit.loc["chi2_bartlett", "value"])


# --- bad input ---------------------------------------------------------------------------


def test_bad_inputs(wine):
    X, fa = wine
    with pytest.raises(NotFittedError):
        goodness_of_fit(latentlab.FactorAnalysis(2), X)
    with pytest.raises(ValueError, match="X has 12 features, but the model was fitted on 13"):
        goodness_of_fit(fa, X[:, :12])
    with pytest.raises(TypeError, match="FactorAnalysis, PPCA or ConfirmatoryFactorAnalysis"):
        goodness_of_fit(latentlab.GaussianMixture(1), X)
    with pytest.raises(ValueError, match="2-D"):
        goodness_of_fit(fa, X[0])
    with pytest.raises(ValueError, match="at least 2 rows"):
        goodness_of_fit(fa, X[:1])
    bad = X.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        goodness_of_fit(fa, bad)
    bad = X.copy()
    bad[:, 4] = np.nan
    with pytest.raises(ValueError, match=r"column\(s\) \[4\] without any observed entry"):
        goodness_of_fit(fa, bad)
    with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"):
        goodness_of_fit(fa, X, level=1.5)
    with pytest.raises(ValueError, match="close must be a positive number"):
        goodness_of_fit(fa, X, close=0)


def test_negative_df_is_refused(wine):
    """No fitted latentlab model has df < 0 (FA stops at the Ledermann bound, PPCA at
    K = d - 1, df = 0); a model claiming more parameters than the saturated one is
    refused."""
    X, fa = wine

    class Overparametrised(latentlab.FactorAnalysis):
        def _n_parameters(self):
            return 200

    model = Overparametrised(3)
    model.__dict__.update(fa.__dict__)
    with pytest.raises(ValueError, match=r"df = -96 < 0, the model is not identified"):
        goodness_of_fit(model, X)


def test_warns_when_the_model_was_fitted_to_other_data(wine):
    X, fa = wine
    with pytest.warns(UserWarning, match="was it fitted on this X"):
        goodness_of_fit(fa, X + 1.0)
