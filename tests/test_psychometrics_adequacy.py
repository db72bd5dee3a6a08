"""Sampling adequacy (KMO, Bartlett) and the number of factors (parallel analysis,
Velicer's MAP) against factor_analyzer, closed forms, hand computations, an
independent EM for the saturated normal model with missing data, and planted factor
structures."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine

from latentlab.psychometrics._correlation import correlation_input, saturated_correlation
from latentlab.psychometrics.adequacy import bartlett_sphericity, kmo
from latentlab.psychometrics.retention import parallel_analysis, velicer_map

DATASETS = {"wine": load_wine, "breast_cancer": load_breast_cancer, "diabetes": load_diabetes}


def planted(seed, n=300, d=12, k=3, low=0.6, high=0.7):
    """n draws of d standardised variables, each loading on one of k factors."""
    rng = np.random.default_rng(seed)
    loadings = np.zeros((d, k))
    loadings[np.arange(d), np.arange(d) % k] = rng.uniform(low, high, size=d)
    unique = np.sqrt(1.0 - (loadings**2).sum(axis=1))
    return rng.normal(size=(n, k)) @ loadings.T + rng.normal(size=(n, d)) * unique


def hide(X, fraction, seed):
    """X with a random fraction of its entries NaN (no row left empty)."""
    rng = np.random.default_rng(seed)
    mask = rng.random(X.shape) < fraction
    mask[mask.all(axis=1), 0] = False
    X = X.copy()
    X[mask] = np.nan
    return X


def plain_em_covariance(X, iterations=20000, tol=1e-15):
    """ML mean and covariance of a normal model with entries missing at random, by
    plain EM (Little & Rubin 2002, 11.2), rows grouped by missingness pattern."""
    observed = ~np.isnan(X)
    n, d = X.shape
    mu, S = np.nanmean(X, axis=0), np.diag(np.nanvar(X, axis=0))
    patterns = [(p, np.all(observed == p, axis=1)) for p in np.unique(observed, axis=0)]
    for _ in range(iterations):
        total, cross = np.zeros(d), np.zeros((d, d))
        for o, rows in patterns:
            m = ~o
            filled = np.where(observed[rows], X[rows], 0.0)
            gain = np.linalg.solve(S[np.ix_(o, o)], S[np.ix_(o, m)])  # (|o|, |m|)
            filled[:, m] = mu[m] + (filled[:, o] - mu[o]) @ gain
            total += filled.sum(axis=0)
            cross += filled.T @ filled
            cross[np.ix_(m, m)] += rows.sum() * (S[np.ix_(m, m)] - S[np.ix_(m, o)] @ gain)
        new_mu = total / n
        new_S = cross / n - np.outer(new_mu, new_mu)
        change = max(np.abs(new_mu - mu).max(), np.abs(new_S - S).max())
        mu, S = new_mu, new_S
        if change < tol:
            break
    return mu, S


def as_correlation(C):
    s = np.sqrt(np.diag(C))
    return C / np.outer(s, s)


# --- KMO and Bartlett against factor_analyzer --------------------------------------


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_kmo_matches_factor_analyzer(name):
    from factor_analyzer.factor_analyzer import calculate_kmo

    X = DATASETS[name]().data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # its pinv notice
        expected_per_variable, expected_overall = calculate_kmo(X)
    result = kmo(X)
    assert abs(result.overall - expected_overall) < 1e-10
    np.testing.assert_allclose(result.per_variable.to_numpy(), expected_per_variable, atol=1e-10)
    assert result.per_variable.index.equals(pd.RangeIndex(X.shape[1]))


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_bartlett_matches_factor_analyzer_and_closed_form(name):
    from factor_analyzer.factor_analyzer import calculate_bartlett_sphericity

    X = DATASETS[name]().data
    n, d = X.shape
    statistic, p_value = calculate_bartlett_sphericity(X)
    result = bartlett_sphericity(X)
    assert result.df == d * (d - 1) // 2
    assert result.statistic == pytest.approx(statistic, rel=1e-10)
    assert result.p_value == pytest.approx(p_value, rel=1e-8, abs=1e-300)
    # the closed form on three weakly correlated columns, where p is not 0
    Z = X[:40, :3]
    R = np.corrcoef(Z, rowvar=False)
    chi2 = -(40 - 1 - (2 * 3 + 5) / 6) * np.log(np.linalg.det(R))
    small = bartlett_sphericity(Z)
    assert small.statistic == pytest.approx(chi2, rel=1e-12)
    assert small.p_value == pytest.approx(stats.chi2.sf(chi2, 3), rel=1e-10)


def test_kmo_by_hand_on_three_variables():
    # closed form of the partial correlation r_12.3 = (r12 - r13 r23) / sqrt(...)
    r12, r13, r23 = 0.5, 0.4, 0.3
    R = np.array([[1, r12, r13], [r12, 1, r23], [r13, r23, 1]])

    def partial(a, b, c):
        return (a - b * c) / np.sqrt((1 - b**2) * (1 - c**2))

    p12, p13, p23 = partial(r12, r13, r23), partial(r13, r12, r23), partial(r23, r12, r13)
    msa1 = (r12**2 + r13**2) / (r12**2 + r13**2 + p12**2 + p13**2)
    total = (r12**2 + r13**2 + r23**2) / (r12**2 + r13**2 + r23**2 + p12**2 + p13**2 + p23**2)
    result = kmo(covariance=R)
    assert result.per_variable[0] == pytest.approx(msa1, abs=1e-14)
    assert result.overall == pytest.approx(total, abs=1e-14)


# --- covariance= route ------------------------------------------------------------


def test_covariance_route_equals_data_route():
    X = load_wine().data[:, :8]
    n = X.shape[0]
    units = np.array([1e-3, 2.0, 50.0, 1.0, 7e2, 0.1, 3.0, 1e4])
    C = np.cov(X * units, rowvar=False)  # ddof=1: the scale cancels
    R = np.corrcoef(X, rowvar=False)
    for given in (C, R, pd.DataFrame(C)):
        np.testing.assert_allclose(
            correlation_input(covariance=given, n_samples=n).R, R, atol=1e-13
        )
        by_cov, by_data = kmo(covariance=given), kmo(X)
        assert by_cov.overall == pytest.approx(by_data.overall, abs=1e-12)
        np.testing.assert_allclose(by_cov.per_variable, by_data.per_variable, atol=1e-12)
        assert bartlett_sphericity(covariance=given, n_samples=n) == pytest.approx(
            tuple(bartlett_sphericity(X)), rel=1e-10
        )
        pd.testing.assert_frame_equal(
            velicer_map(covariance=given), velicer_map(X), check_exact=False, atol=1e-12
        )
        a = parallel_analysis(covariance=given, n_samples=n, n_iter=20, random_state=3)
        b = parallel_analysis(X, n_iter=20, random_state=3)
        pd.testing.assert_frame_equal(a, b, check_exact=False, atol=1e-10)
        for key in ("n_factors", "n_components", "n_samples"):
            assert a.attrs[key] == b.attrs[key]


def test_dataframe_names_index_the_results():
    X = pd.DataFrame(load_wine().data[:, :5], columns=list("abcde"))
    assert kmo(X).per_variable.index.tolist() == list("abcde")
    assert kmo(covariance=X.cov()).per_variable.index.tolist() == list("abcde")
    assert parallel_analysis(X, n_iter=5, random_state=0).attrs["variables"] == list("abcde")


# --- missing data ------------------------------------------------------------------


def test_nan_route_is_the_saturated_normal_ml_correlation():
    rng = np.random.default_rng(0)
    d = 5
    L = rng.normal(size=(d, d))
    X = rng.multivariate_normal(np.arange(d) * 3.0, L @ L.T + np.eye(d), size=150)
    X = hide(X, 0.2, seed=1)
    _, S = plain_em_covariance(X)
    R, n, names = correlation_input(X)
    assert n == 150 and names is None
    np.testing.assert_allclose(R, as_correlation(S), atol=1e-8, rtol=0)
    # every report reads that matrix, with n the number of rows
    via_cov = kmo(covariance=S)
    assert kmo(X).overall == pytest.approx(via_cov.overall, abs=1e-8)
    assert bartlett_sphericity(X).statistic == pytest.approx(
        bartlett_sphericity(covariance=S, n_samples=150).statistic, rel=1e-7
    )
    # all-NaN rows are dropped and not counted
    padded = np.vstack([X, np.full((3, d), np.nan)])
    assert correlation_input(padded).n == 150


def test_resampling_with_missing_entries_keeps_the_pattern(monkeypatch):
    import latentlab.psychometrics.retention as retention

    X = hide(planted(0, n=120, d=6, k=2), 0.1, seed=2)
    seen = []

    def spy(A):
        seen.append(A.copy())
        return saturated_correlation(A)

    monkeypatch.setattr(retention, "saturated_correlation", spy)
    table = parallel_analysis(X, n_iter=3, resample=True, random_state=0)
    assert table.attrs["reference"] == "resampled"
    assert np.isfinite(table.to_numpy()).all()
    assert len(seen) == 3
    missing = np.isnan(X)
    for B in seen:
        np.testing.assert_array_equal(np.isnan(B), missing)  # the pattern is kept
        for j in range(6):  # each column's observed values, permuted
            np.testing.assert_array_equal(
                np.sort(B[~missing[:, j], j]), np.sort(X[~missing[:, j], j])
            )
        assert not np.array_equal(B[~missing[:, 0], 0], X[~missing[:, 0], 0])


# --- parallel analysis -------------------------------------------------------------


def test_parallel_analysis_recovers_planted_factors():
    factors = [parallel_analysis(planted(seed), n_iter=50, random_state=seed) for seed in range(20)]
    assert sum(t.attrs["n_factors"] == 3 for t in factors) >= 19
    assert sum(t.attrs["n_components"] == 3 for t in factors) >= 19
    resampled = [
        parallel_analysis(planted(seed), n_iter=50, resample=True, random_state=seed)
        for seed in range(20)
    ]
    assert sum(t.attrs["n_factors"] == 3 for t in resampled) >= 19


def test_parallel_analysis_finds_nothing_in_noise():
    rng = np.random.default_rng(5)
    counts = [
        parallel_analysis(rng.normal(size=(300, 10)), n_iter=50, random_state=s).attrs
        for s in range(20)
    ]
    assert sum(c["n_components"] == 0 for c in counts) >= 16  # 5% false alarms each


def test_parallel_simulated_reference_against_a_plain_loop():
    X = planted(1)
    n, d = X.shape
    table = parallel_analysis(X, n_iter=30, quantile=0.9, random_state=11)
    rng = np.random.default_rng(11)
    components, factors = [], []
    for _ in range(30):
        R = np.corrcoef(rng.standard_normal((n, d)), rowvar=False)
        components.append(np.sort(np.linalg.eigvalsh(R))[::-1])
        reduced = R.copy()
        np.fill_diagonal(reduced, 1 - 1 / np.diag(np.linalg.inv(R)))
        factors.append(np.sort(np.linalg.eigvalsh(reduced))[::-1])
    components, factors = np.array(components), np.array(factors)
    np.testing.assert_allclose(table["simulated_components_mean"], components.mean(0), atol=1e-12)
    np.testing.assert_allclose(
        table["simulated_factors_quantile"], np.quantile(factors, 0.9, axis=0), atol=1e-12
    )
    # observed eigenvalues and the count rule
    R = np.corrcoef(X, rowvar=False)
    np.testing.assert_allclose(table["observed_components"], np.sort(np.linalg.eigvalsh(R))[::-1])
    above = table["observed_factors"] > table["simulated_factors_quantile"]
    assert table.attrs["n_factors"] == int(np.argmin(above.to_numpy()))


def test_parallel_analysis_is_reproducible_and_seeded():
    X = planted(2)
    a = parallel_analysis(X, n_iter=20, resample=True, random_state=4)
    b = parallel_analysis(X, n_iter=20, resample=True, random_state=np.random.default_rng(4))
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    c = parallel_analysis(X, n_iter=20, resample=True, random_state=5)
    assert not np.allclose(a["simulated_components_mean"], c["simulated_components_mean"])
    pc = parallel_analysis(X, kind="pc", n_iter=20, random_state=4)
    assert list(pc.columns) == [
        "observed_components",
        "simulated_components_mean",
        "simulated_components_quantile",
    ]
    assert pc.attrs["n_factors"] is None and pc.attrs["n_components"] == a.attrs["n_components"]
    assert list(a.index) == list(range(1, 13))


# --- Velicer's MAP -----------------------------------------------------------------


def test_map_matches_partial_correlations_given_component_scores():
    # partial correlations by regression: residuals of each variable on the first m
    # principal component scores, correlated
    X = planted(3, n=80, d=6, k=2)
    Z = (X - X.mean(0)) / X.std(0)
    _, vectors = np.linalg.eigh(np.corrcoef(X, rowvar=False))
    scores = Z @ vectors[:, ::-1]
    table = velicer_map(X)
    off = ~np.eye(6, dtype=bool)
    for m in range(6):
        F = np.column_stack([np.ones(80), scores[:, :m]])
        residuals = Z - F @ np.linalg.lstsq(F, Z, rcond=None)[0]
        partial = np.corrcoef(residuals, rowvar=False)[off]
        assert table.loc[m, "squared"] == pytest.approx(np.mean(partial**2), abs=1e-10)
        assert table.loc[m, "fourth_power"] == pytest.approx(np.mean(partial**4), abs=1e-10)
    assert table.attrs["n_factors"] == int(np.argmin(table["squared"]))
    assert table.attrs["n_factors_fourth"] == int(np.argmin(table["fourth_power"]))


def test_map_recovers_planted_factors():
    tables = [velicer_map(planted(seed)) for seed in range(20)]
    assert sum(t.attrs["n_factors"] == 3 for t in tables) >= 19
    # the fourth-power variant takes stronger loadings: at 0.6-0.7 it finds 3 in
    # about 70% of samples and 2 otherwise (even at n = 1000)
    assert sum(t.attrs["n_factors_fourth"] in (2, 3) for t in tables) >= 19
    strong = [velicer_map(planted(seed, low=0.7, high=0.8)) for seed in range(20)]
    assert sum(t.attrs["n_factors_fourth"] == 3 for t in strong) >= 19


# --- bad input ---------------------------------------------------------------------

R3 = np.array([[1.0, 0.5, 0.4], [0.5, 1.0, 0.3], [0.4, 0.3, 1.0]])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: kmo(), "exactly one of X"),
        (lambda: kmo(np.eye(3), covariance=R3), "exactly one of X"),
        (lambda: kmo(np.random.default_rng(0).normal(size=(9, 3)), n_samples=9), "covariance="),
        (lambda: bartlett_sphericity(covariance=R3), "needs n_samples="),
        (lambda: bartlett_sphericity(covariance=R3, n_samples=3), "must exceed the number"),
        (lambda: bartlett_sphericity(covariance=R3, n_samples=2.5), "must be an integer"),
        (lambda: kmo(covariance=np.ones((3, 2))), "square"),
        (lambda: kmo(covariance=R3 + np.triu(R3, 1) * 0.1), "not symmetric"),
        (lambda: kmo(covariance=np.where(np.eye(3) > 0, np.nan, R3)), "NaN or infinite"),
        (lambda: kmo(covariance=-R3), "non-positive variances"),
        (
            lambda: kmo(covariance=np.array([[1, 0.9, -0.9], [0.9, 1, 0.9], [-0.9, 0.9, 1]])),
            "not positive definite: smallest eigenvalue",
        ),
        (lambda: kmo(covariance=np.eye(1)), "at least 2 variables"),
        (lambda: kmo(np.ones((5, 1))), "at least 2 variables"),
        (lambda: kmo(np.array([[1.0, 2.0, 3.0]])), "at least 2 are needed"),
        (
            lambda: kmo(pd.DataFrame({"a": [1.0, 2, 3, 5], "const": 4.0, "b": [3.0, 1, 2, 0]})),
            "constant column.*'const'",
        ),
        (lambda: kmo(np.array([[1.0, np.inf], [2, 3], [4, 1]])), "infinite"),
        (lambda: kmo(np.random.default_rng(0).normal(size=(3, 5))), "more than 5 rows"),
        (
            lambda: kmo(
                np.column_stack([np.arange(9.0), np.arange(9.0) * 2, np.sin(np.arange(9))])
            ),
            "not positive definite: smallest eigenvalue",
        ),
        (lambda: parallel_analysis(covariance=R3, n_samples=50, kind="pca"), "kind"),
        (lambda: parallel_analysis(covariance=R3, n_samples=50, quantile=1.0), "quantile"),
        (lambda: parallel_analysis(covariance=R3, n_samples=50, n_iter=0), "n_iter"),
        (lambda: parallel_analysis(covariance=R3, n_samples=50, resample=True), "pass X"),
        (lambda: parallel_analysis(covariance=R3), "needs n_samples="),
    ],
)
def test_bad_input_is_refused_clearly(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_saturated_correlation_of_complete_data_is_corrcoef():
    X = planted(4, n=50, d=4, k=1)
    np.testing.assert_array_equal(saturated_correlation(X), correlation_input(X).R)
    np.testing.assert_allclose(saturated_correlation(X), np.corrcoef(X, rowvar=False), atol=1e-15)
