"""how_many_factors: every retention criterion in one table, each column equal to the
function that computes it on its own (parallel analysis, Velicer's MAP,
FactorAnalysis's BIC/AIC, latentlab.compare's held-out columns), on planted factor
structures, with missing entries, and refusing bad settings by name."""

import functools
import warnings

import numpy as np
import pandas as pd
import pytest

import latentlab
from latentlab.psychometrics._correlation import correlation_input, data_matrix
from latentlab.psychometrics.retention import (
    _seeds,
    how_many_factors,
    parallel_analysis,
    velicer_map,
)

CHOICES = ("parallel_analysis", "map", "map_fourth", "bic", "aic", "heldout", "heldout_one_se")
COLUMNS = [
    "eigenvalue",
    "parallel_quantile",
    "map",
    "map_fourth",
    "n_params",
    "loglik",
    "bic",
    "aic",
    "heldout_loglik",
    "heldout_se",
    "heldout_diff",
    "heldout_se_diff",
    "near_best",
    "warnings",
    "error",
]


def planted(seed, n=400, d=12, k=3, low=0.6, high=0.8):
    """n draws of d standardised variables, each loading (low..high) on one of k factors."""
    rng = np.random.default_rng(seed)
    loadings = np.zeros((d, k))
    loadings[np.arange(d), np.arange(d) % k] = rng.uniform(low, high, size=d)
    unique = np.sqrt(1.0 - (loadings**2).sum(axis=1))
    return rng.normal(size=(n, k)) @ loadings.T + rng.normal(size=(n, d)) * unique


@functools.cache
def run(seed):
    """how_many_factors of planted(seed) with its defaults (K = 0..7, 5 folds, 100
    simulations), seeded by ``seed``, and the warnings it raised; computed once per
    seed for the whole module (the factor analyses compile one program per K and
    shape)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = how_many_factors(planted(seed), random_state=seed)
    return table, [str(w.message) for w in caught]


def table_of(seed):
    return run(seed)[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_three_factors(seed):
    table = table_of(seed)
    assert list(table.columns) == COLUMNS
    assert table.index.tolist() == list(range(8)) and table.index.name == "n_factors"
    assert table.attrs["max_factors"] == table.attrs["ledermann_bound"] == 7
    choices = {key: table.attrs[key] for key in CHOICES}
    # Measured over seeds 0..59 (n = 400, d = 12, loadings 0.6-0.8): parallel analysis,
    # MAP, BIC and the held-out one-SE rule chose 3 every time.  The others may
    # differ: AIC (penalty 2 per parameter, light at n = 400) chose 4 or 5 in 9 of 60;
    # the best held-out K, 4 in 1 of 60 (a fourth factor fitting noise scores within
    # one paired SE of 3); MAP's fourth power, 2 in 2 of 60.
    strict = {key: choices[key] for key in ("parallel_analysis", "map", "bic", "heldout_one_se")}
    assert strict == dict.fromkeys(strict, 3)
    assert choices["aic"] in (3, 4, 5)
    assert choices["heldout"] in (3, 4)
    assert choices["map_fourth"] in (2, 3)
    summary = table.attrs["summary"]
    assert summary.startswith("How many factors (n = 400, d = 12, K = 0..7, 5-fold CV): ")
    assert "parallel analysis 3, MAP 3, " in summary and "BIC 3, " in summary
    assert summary.endswith("all say 3") == (set(choices.values()) == {3})
    # what the columns show agrees with the choices
    assert table["bic"].idxmin() == 3
    assert table.loc[3, "near_best"] in ("best", "within 1 SE")
    assert (table.loc[:2, "near_best"] == "beyond 2 SE").all()
    assert table.loc[3, "eigenvalue"] > table.loc[3, "parallel_quantile"]
    assert table.loc[4, "eigenvalue"] < table.loc[4, "parallel_quantile"]
    assert np.isnan(table.loc[0, ["eigenvalue", "parallel_quantile"]].astype(float)).all()
    # Heywood cases past K = 3 stay in the table; a warning names only a chosen K's
    assert table.loc[4:, "warnings"].str.contains("Heywood case").any()
    assert table.loc[:3, "warnings"].isna().all()
    flagged = sorted({K for K in choices.values() if pd.notna(table.loc[K, "warnings"])})
    raised = run(seed)[1]
    if flagged:
        assert len(raised) == 1 and raised[0].startswith("how_many_factors: the factor analyses")
        assert all(f"K = {K}: Heywood case" in raised[0] for K in flagged)
    else:
        assert raised == []


def test_columns_equal_the_separate_functions():
    seed = 0
    X = planted(seed)
    table = table_of(seed)

    parallel = parallel_analysis(X, n_iter=100, quantile=0.95, random_state=seed)
    np.testing.assert_allclose(
        table["eigenvalue"].iloc[1:], parallel["observed_factors"].iloc[:7], rtol=0, atol=1e-10
    )
    np.testing.assert_allclose(
        table["parallel_quantile"].iloc[1:],
        parallel["simulated_factors_quantile"].iloc[:7],
        rtol=0,
        atol=1e-10,
    )
    assert table.attrs["parallel_analysis"] == parallel.attrs["n_factors"]

    partial = velicer_map(X)
    np.testing.assert_allclose(table["map"], partial["squared"].iloc[:8], rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        table["map_fourth"], partial["fourth_power"].iloc[:8], rtol=0, atol=1e-10
    )
    assert table.attrs["map"] == partial.attrs["n_factors"]
    assert table.attrs["map_fourth"] == partial.attrs["n_factors_fourth"]

    for K in (0, 3, 7):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # K = 7: a Heywood case
            fa = latentlab.FactorAnalysis(K).fit(X)
        assert table.loc[K, "bic"] == pytest.approx(fa.bic(X), rel=1e-12)
        assert table.loc[K, "aic"] == pytest.approx(fa.aic(X), rel=1e-12)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scored = latentlab.compare(
            {K: latentlab.FactorAnalysis(K) for K in range(8)}, X, cv=5, random_state=seed
        ).sort_index()
    for ours, theirs in [
        ("loglik", "loglik"),
        ("bic", "BIC"),
        ("aic", "AIC"),
        ("heldout_loglik", "heldout_loglik"),
        ("heldout_se", "heldout_se"),
        ("heldout_diff", "heldout_diff"),
        ("heldout_se_diff", "heldout_se_diff"),
    ]:
        np.testing.assert_allclose(table[ours], scored[theirs], rtol=1e-10, atol=0)
    assert table["near_best"].tolist() == scored["near_best"].tolist()
    assert table["n_params"].tolist() == scored["n_params"].tolist()
    assert table.attrs["heldout"] == scored["heldout_loglik"].idxmax()
    near = scored.index[scored["near_best"].isin(["best", "within 1 SE"])]
    assert table.attrs["heldout_one_se"] == min(near)
    assert table.attrs["cv"] == 5 and table.attrs["random_state"] == seed


def test_missing_entries_give_finite_values():
    seed = 2
    X = planted(seed)
    rng = np.random.default_rng(seed)
    X[rng.random(X.shape) < 0.15] = np.nan
    X = np.vstack([X, np.full((1, 12), np.nan)])  # an empty row: dropped, not counted
    # K = 0..3 only: with missing entries each K's fits compile their own programs,
    # and K = 4 would double the test's time (its EM runs long to a Heywood case)
    with pytest.warns(UserWarning, match="has the largest K of its grid"):
        table = how_many_factors(
            X, max_factors=3, cv=2, n_iter=20, random_state=np.random.default_rng(seed)
        )
    assert table.index.tolist() == [0, 1, 2, 3]
    numbers = table.drop(columns=["near_best", "warnings", "error"]).astype(float)
    assert np.isfinite(numbers.iloc[1:]).all().all()
    assert np.isfinite(numbers.iloc[0].drop(["eigenvalue", "parallel_quantile"])).all()
    assert table["near_best"].notna().all() and table["error"].isna().all()
    assert table.attrs["n_samples"] == 400
    assert isinstance(table.attrs["random_state"], int)
    for key in ("parallel_analysis", "map", "bic", "heldout", "heldout_one_se"):
        assert table.attrs[key] == 3, key
    # parallel analysis and MAP read the full-information ML correlation
    A, _ = data_matrix(X)
    R, n, _ = correlation_input(A)
    _, simulations = _seeds(np.random.default_rng(seed))
    parallel = parallel_analysis(covariance=R, n_samples=n, n_iter=20, random_state=simulations)
    np.testing.assert_allclose(table["eigenvalue"].iloc[1:], parallel["observed_factors"][:3])
    np.testing.assert_allclose(
        table["parallel_quantile"].iloc[1:], parallel["simulated_factors_quantile"][:3]
    )
    np.testing.assert_allclose(table["map"], velicer_map(covariance=R)["squared"][:4])


def test_seeds():
    assert _seeds(5) == (5, 5) and _seeds(np.int64(5)) == (5, 5)
    a, b = _seeds(np.random.default_rng(1)), _seeds(np.random.default_rng(1))
    assert a[0] == b[0] and isinstance(a[0], int)
    assert a[1].standard_normal() == b[1].standard_normal()


def test_edge_of_grid_warning_only_below_the_bound():
    X = planted(0)
    with pytest.warns(UserWarning, match="has the largest K of its grid"):
        table = how_many_factors(X, max_factors=2, cv=5, n_iter=10, random_state=0)
    assert table.attrs["heldout"] == 2 and table.attrs["bic"] == 2
    # at the Ledermann bound no larger K can be fitted: no advice to try one
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 1)) @ np.full((1, 4), 0.8) + 0.6 * rng.normal(size=(200, 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = how_many_factors(X, cv=2, n_iter=10, random_state=0)
    assert table.attrs["ledermann_bound"] == 1 and table.attrs["heldout"] == 1
    assert not [w for w in caught if "largest K" in str(w.message)]


def test_dataframe_input():
    X = pd.DataFrame(planted(1), columns=[f"v{j}" for j in range(12)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # AIC chooses 4 here: a Heywood case
        table = how_many_factors(X, max_factors=4, cv=5, n_iter=10, random_state=1)
    assert table.attrs["parallel_analysis"] == 3 and table.attrs["heldout"] == 3


@pytest.mark.parametrize(
    "settings, match",
    [
        ({"max_factors": 8}, r"max_factors=8 exceeds the Ledermann bound for 12 variables \(7\)"),
        ({"max_factors": -1}, r"max_factors must be >= 0"),
        ({"max_factors": 2.5}, r"max_factors must be an integer or None, got 2\.5"),
        ({"max_factors": True}, r"max_factors must be an integer or None, got True"),
        ({"max_factors": "3"}, r"max_factors must be an integer or None, got '3'"),
        ({"n_iter": 0}, r"n_iter must be a positive integer"),
        ({"quantile": 1.0}, r"quantile must lie strictly between 0 and 1"),
        ({"cv": 1}, r"cv must be >= 2 folds"),
    ],
)
def test_bad_settings_are_refused(settings, match):
    with pytest.raises(ValueError, match=match):
        how_many_factors(planted(0, n=50), **settings)


def test_bad_data_are_refused():
    with pytest.raises(ValueError, match="more rows than variables|positive definite"):
        how_many_factors(planted(0, n=10))
    with pytest.raises(ValueError, match="constant column"):
        how_many_factors(np.column_stack([planted(0, n=50), np.ones(50)]))
