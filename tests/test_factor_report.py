"""The factor-analysis report's tables (latentlab.psychometrics.report): invariants
of communalities and variance accounted for under every rotation, Hofmann's
complexity, and the user's column names."""

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_wine
from sklearn.exceptions import NotFittedError

from latentlab import FactorAnalysis, GaussianMixture
from latentlab.psychometrics.report import loadings_table, variance_table


@pytest.fixture(scope="module")
def wine():
    data = load_wine(as_frame=True).data
    return (data - data.mean()) / data.std()


@pytest.fixture(scope="module")
def fits(wine):
    return {
        rotation: FactorAnalysis(3, rotation=rotation, random_state=0).fit(wine)
        for rotation in (None, "varimax", "oblimin")
    }


def test_communalities_are_the_models_whatever_the_rotation(wine, fits):
    reference = fits[None]
    S = reference.get_covariance()
    h2 = 1.0 - reference.noise_variance_ / np.diag(S)
    for model in fits.values():
        table = loadings_table(model)
        np.testing.assert_allclose(table["h2"], h2, atol=1e-10)
        np.testing.assert_allclose(table["u2"], 1.0 - h2, atol=1e-10)
        assert list(table.index) == list(wine.columns)  # the user's names
        assert list(table.columns) == ["F1", "F2", "F3", "h2", "u2", "complexity"]


def test_loadings_are_the_pattern_in_the_correlation_metric(fits):
    model = fits["oblimin"]
    sd = np.sqrt(np.diag(model.get_covariance()))
    table = loadings_table(model)
    np.testing.assert_allclose(table[["F1", "F2", "F3"]], model.components_.T / sd[:, None])
    raw = loadings_table(model, standardized=False)
    np.testing.assert_allclose(raw[["F1", "F2", "F3"]], model.components_.T)
    np.testing.assert_allclose(raw["u2"], model.noise_variance_)
    L = table[["F1", "F2", "F3"]].to_numpy()
    by_hand = (L**2).sum(axis=1) ** 2 / (L**4).sum(axis=1)  # Hofmann (1978)
    np.testing.assert_allclose(table["complexity"], by_hand)
    assert np.all((table["complexity"] >= 1 - 1e-12) & (table["complexity"] <= 3 + 1e-12))
    ordered = loadings_table(model, sort=True)
    main = np.abs(ordered[["F1", "F2", "F3"]].to_numpy()).argmax(axis=1)
    assert np.all(np.diff(main) >= 0)  # grouped by factor
    assert sorted(ordered.index) == sorted(table.index)


def test_variance_accounted_for(fits):
    total_h2 = loadings_table(fits[None])["h2"].sum()
    for rotation, model in fits.items():
        table = variance_table(model)
        ss = table.loc["SS loadings"].to_numpy()
        # the common variance is shared out among the factors by every rotation
        assert ss.sum() == pytest.approx(total_h2, rel=1e-10)
        np.testing.assert_allclose(table.loc["Proportion Var"], ss / 13)
        np.testing.assert_allclose(table.loc["Cumulative Var"], np.cumsum(ss) / 13)
        np.testing.assert_allclose(table.loc["Cumulative Proportion"].iloc[-1], 1.0)
        if rotation != "oblimin":  # uncorrelated factors: column sums of squares
            L = loadings_table(model)[["F1", "F2", "F3"]].to_numpy()
            np.testing.assert_allclose(ss, (L**2).sum(axis=0), rtol=1e-10)


def test_report_refuses_what_it_cannot_read(wine):
    with pytest.raises(NotFittedError):
        loadings_table(FactorAnalysis(2))
    mixture = GaussianMixture(2, random_state=0).fit(wine.to_numpy()[:, :3])
    with pytest.raises(ValueError, match="factor model"):
        variance_table(mixture)
    assert isinstance(variance_table(FactorAnalysis(2, random_state=0).fit(wine)), pd.DataFrame)


def test_fit_from_a_covariance_matrix_is_the_fit_to_the_rows(wine):
    X = wine.to_numpy()
    S = np.cov(X.T, bias=True)
    rows = FactorAnalysis(3, random_state=0).fit(X)
    moments = FactorAnalysis(3, random_state=0).fit_covariance(S, len(X), mean=X.mean(axis=0))
    assert moments.score(X) == pytest.approx(rows.score(X), rel=1e-9)
    np.testing.assert_allclose(moments.get_covariance(), rows.get_covariance(), atol=1e-6)
    assert moments.bic(X) == pytest.approx(rows.bic(X), rel=1e-9)
    # a correlation matrix: the fit to the standardised rows; a DataFrame names them
    R = pd.DataFrame(np.corrcoef(X.T), index=wine.columns, columns=wine.columns)
    standardised = (X - X.mean(axis=0)) / X.std(axis=0)
    by_rows = FactorAnalysis(3, random_state=0).fit(standardised)
    by_matrix = FactorAnalysis(3, random_state=0).fit_covariance(R, len(X))
    named = pd.DataFrame(standardised, columns=wine.columns)
    assert by_matrix.score(named) == pytest.approx(by_rows.score(standardised), rel=1e-9)
    assert list(by_matrix.feature_names_in_) == list(wine.columns)
    np.testing.assert_array_equal(by_matrix.mean_, 0.0)


def test_fit_covariance_refuses_what_is_not_a_covariance(wine):
    S = np.cov(wine.to_numpy().T)
    fa = FactorAnalysis(2)
    with pytest.raises(ValueError, match="square"):
        fa.fit_covariance(S[:, :5], 100)
    with pytest.raises(ValueError, match="not symmetric"):
        fa.fit_covariance(S + np.triu(np.ones_like(S)), 100)
    indefinite = S.copy()
    indefinite[0, 1] = indefinite[1, 0] = 10 * np.sqrt(S[0, 0] * S[1, 1])
    with pytest.raises(ValueError, match="not positive definite: smallest eigenvalue"):
        fa.fit_covariance(indefinite, 100)
    with pytest.raises(ValueError, match="n_samples"):
        fa.fit_covariance(S, 1)
    with pytest.raises(ValueError, match="needs the rows"):
        FactorAnalysis(2, method="map").fit_covariance(S, 100)
    assert not hasattr(fa, "n_features_in_")  # all or nothing


def test_holzinger_swineford_as_r_factanal_prints_it():
    # R: factanal(HolzingerSwineford1939[, 7:15], factors = 3) prints the uniquenesses
    # 0.51 0.75 0.54 0.28 0.24 0.31 0.50 0.47 0.54 and "The chi square statistic is
    # 22.38 on 12 degrees of freedom.  The p-value is 0.0335"
    from pathlib import Path

    from latentlab.psychometrics import goodness_of_fit

    path = Path(__file__).resolve().parents[1] / "examples/data/holzinger_swineford_1939.csv"
    X = pd.read_csv(path)[[f"x{i}" for i in range(1, 10)]]
    fa = FactorAnalysis(3, rotation="promax", random_state=0).fit(X)
    uniqueness = loadings_table(fa)["u2"].to_numpy()
    published = [0.51, 0.75, 0.54, 0.28, 0.24, 0.31, 0.50, 0.47, 0.54]
    np.testing.assert_allclose(uniqueness, published, atol=0.005)
    fit = goodness_of_fit(fa, X)["value"]
    assert fit["chi2_bartlett"] == pytest.approx(22.38, abs=0.005)
    assert fit["df"] == 12
    assert fit["p_value_bartlett"] == pytest.approx(0.0335, abs=0.00005)
    text = fa.summary(X)
    assert "chi2 = 22.897 on 12 df" in text and "Factor correlations" in text


def test_goodness_of_fit_of_a_model_fitted_to_a_covariance_matrix(wine):
    from latentlab.psychometrics import goodness_of_fit

    X = wine.to_numpy()
    S = np.cov(X.T, bias=True)
    rows = FactorAnalysis(3, random_state=0).fit(X)
    moments = FactorAnalysis(3, random_state=0).fit_covariance(S, len(X), mean=X.mean(axis=0))
    by_rows = goodness_of_fit(rows, X)["value"]
    by_moments = goodness_of_fit(moments, covariance=S, n_samples=len(X))["value"]
    for statistic in ("chi2", "chi2_bartlett", "df", "rmsea", "cfi", "tli", "srmr", "bic"):
        assert by_moments[statistic] == pytest.approx(by_rows[statistic], rel=1e-6), statistic
    with pytest.raises(ValueError, match="not both"):
        goodness_of_fit(moments, X, covariance=S, n_samples=len(X))
    with pytest.raises(ValueError, match="n_samples"):
        goodness_of_fit(moments, covariance=S, n_samples=1)
    with pytest.raises(ValueError, match="describes 5 features"):
        goodness_of_fit(moments, covariance=S[:5, :5], n_samples=len(X))
