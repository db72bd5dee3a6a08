"""Confirmatory factor analysis against lavaan's published Holzinger-Swineford fit,
its own declaration, exploratory factor analysis and full-information ML."""

from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest
from numpyro.infer.util import log_likelihood
from oracles import dense_observed_loglik, hide_at_random, is_monotone

from latentlab import ConfirmatoryFactorAnalysis, FactorAnalysis
from latentlab.psychometrics import goodness_of_fit

THREE_ABILITIES = {
    "visual": ["x1", "x2", "x3"],
    "textual": ["x4", "x5", "x6"],
    "speed": ["x7", "x8", "x9"],
}


@pytest.fixture(scope="module")
def tests9():
    path = Path(__file__).resolve().parents[1] / "examples/data/holzinger_swineford_1939.csv"
    return pd.read_csv(path)[[f"x{i}" for i in range(1, 10)]]


@pytest.fixture(scope="module")
def fitted(tests9):
    return ConfirmatoryFactorAnalysis(THREE_ABILITIES).fit(tests9)


def test_holzinger_swineford_as_lavaan_publishes_it(tests9, fitted):
    # lavaan's tutorial, cfa(HS.model, data = HolzingerSwineford1939): estimates and
    # fitMeasures, as printed (3 decimals)
    assert fitted.converged_
    L = fitted.loadings_
    np.testing.assert_allclose(
        [L[1, 0], L[2, 0], L[4, 1], L[5, 1], L[7, 2], L[8, 2]],
        [0.554, 0.729, 1.113, 0.926, 1.180, 1.082],
        atol=0.0005,
    )
    phi = fitted.factor_covariance_
    np.testing.assert_allclose(
        [phi[0, 1], phi[0, 2], phi[1, 2], phi[0, 0], phi[1, 1], phi[2, 2]],
        [0.408, 0.262, 0.173, 0.809, 0.979, 0.384],
        atol=0.0005,
    )
    np.testing.assert_allclose(
        fitted.noise_variance_,
        [0.549, 1.134, 0.844, 0.371, 0.446, 0.356, 0.799, 0.488, 0.566],
        atol=0.0005,
    )
    fit = goodness_of_fit(fitted, tests9)
    value = fit["value"]
    assert value["chi2"] == pytest.approx(85.306, abs=0.0005)
    assert value["df"] == 24
    assert value["cfi"] == pytest.approx(0.931, abs=0.0005)
    assert value["tli"] == pytest.approx(0.896, abs=0.0005)
    assert value["srmr"] == pytest.approx(0.065, abs=0.0005)
    assert value["aic"] == pytest.approx(7535.490, abs=0.0005)
    assert value["bic"] == pytest.approx(7646.703, abs=0.0005)
    np.testing.assert_allclose(fit.loc["rmsea"], [0.092, 0.071, 0.114], atol=0.0005)
    # the standardised solution: unit factor variances (std.lv), then features (std.all)
    np.testing.assert_allclose(fitted.components_.T, L * np.sqrt(np.diag(phi)), rtol=1e-12)
    assert fitted.standardized_loadings_[0, 0] == pytest.approx(0.772, abs=0.0005)
    np.testing.assert_allclose(np.diag(fitted.factor_correlation_), 1.0)


def test_the_declaration_scores_what_em_maximised(tests9, fitted):
    X = tests9.to_numpy()
    with jax.enable_x64(True):
        site = log_likelihood(fitted.model_, fitted.params_, X, batch_ndims=0)["x"]
    np.testing.assert_allclose(np.asarray(site), fitted.score_samples(X), rtol=1e-10)
    assert fitted.log_likelihoods_[-1] == pytest.approx(fitted.score(X) * len(X), rel=1e-10)
    assert is_monotone(fitted.log_likelihoods_)
    implied = dense_observed_loglik(X, fitted.mean_, fitted.get_covariance())
    assert fitted.score(X) * len(X) == pytest.approx(implied, rel=1e-10)


def test_missing_entries_by_full_information_ml(tests9, fitted):
    holes, _ = hide_at_random(tests9.to_numpy(), 0.2, seed=1)
    model = ConfirmatoryFactorAnalysis(THREE_ABILITIES).fit(
        pd.DataFrame(holes, columns=tests9.columns)
    )
    assert model.converged_ and is_monotone(model.log_likelihoods_)
    # the exact likelihood of the observed entries, by SciPy
    implied = dense_observed_loglik(holes, model.mean_, model.get_covariance())
    assert model.log_likelihoods_[-1] == pytest.approx(implied, rel=1e-10)
    # (the declaration's own score with NaN: test_generative_contract's CFA-missing)
    assert np.abs(model.loadings_ - fitted.loadings_).max() < 0.25
    fit = goodness_of_fit(model, pd.DataFrame(holes, columns=tests9.columns))["value"]
    assert fit["df"] == 24 and 0 < fit["chi2"] < 200


def test_one_factor_is_exploratory_factor_analysis(tests9):
    X = tests9.to_numpy()
    one = ConfirmatoryFactorAnalysis({"g": list(range(9))}).fit(X)
    efa = FactorAnalysis(1, random_state=0).fit(X)
    assert one.score(X) == pytest.approx(efa.score(X), rel=1e-9)
    np.testing.assert_allclose(one.get_covariance(), efa.get_covariance(), atol=1e-6)
    assert one.n_parameters_ == efa.n_parameters_


def test_orthogonal_factors(tests9, fitted):
    X = tests9.to_numpy()
    orthogonal = ConfirmatoryFactorAnalysis(THREE_ABILITIES, orthogonal=True).fit(tests9)
    phi = orthogonal.factor_covariance_
    np.testing.assert_array_equal(phi, np.diag(np.diag(phi)))
    assert orthogonal.n_parameters_ == fitted.n_parameters_ - 3
    assert orthogonal.score(X) < fitted.score(X)  # a restriction of the correlated model


def test_bad_patterns_are_refused(tests9):
    X = tests9
    with pytest.raises(ValueError, match="unknown column 'x10'"):
        ConfirmatoryFactorAnalysis({"a": ["x1", "x10"]}).fit(X)
    with pytest.raises(ValueError, match="have no indicator"):
        ConfirmatoryFactorAnalysis({"a": ["x1", "x2", "x3"], "b": []}).fit(X)
    with pytest.raises(ValueError, match="needs a pattern"):
        ConfirmatoryFactorAnalysis().fit(X)
    with pytest.raises(ValueError, match="not identified"):
        ConfirmatoryFactorAnalysis({"a": ["x1", "x2"]}, orthogonal=False).fit(X[["x1", "x2"]])
    with pytest.raises(ValueError, match="boolean"):
        ConfirmatoryFactorAnalysis(np.ones((3, 2))).fit(X)


def test_modification_indices_as_lavaan_publishes_them(tests9, fitted):
    # lavaan's tutorial, modindices(fit, sort = TRUE, maximum.number = 5)
    table = fitted.modification_indices(tests9)
    top = table.head(5)
    assert list(zip(top.lhs, top.op, top.rhs, strict=True)) == [
        ("visual", "=~", "x9"),
        ("x7", "~~", "x8"),
        ("visual", "=~", "x7"),
        ("x8", "~~", "x9"),
        ("textual", "=~", "x3"),
    ]
    np.testing.assert_allclose(top.mi, [36.411, 34.145, 18.631, 14.946, 9.151], atol=0.0005)
    np.testing.assert_allclose(top.epc, [0.577, 0.536, -0.422, -0.423, -0.272], atol=0.0005)
    # every cross-loading and residual covariance, none of the model's own parameters
    assert len(table) == 9 * 3 - 9 + 9 * 8 // 2
    # the score test predicts the chi-square drop of freeing the parameter
    freed = ConfirmatoryFactorAnalysis({**THREE_ABILITIES, "visual": ["x1", "x2", "x3", "x9"]}).fit(
        tests9
    )
    drop = (
        goodness_of_fit(fitted, tests9)["value"]["chi2"]
        - goodness_of_fit(freed, tests9)["value"]["chi2"]
    )
    assert 0.75 * table.mi[0] < drop < 1.25 * table.mi[0]
    # with NaN entries: the observed information of the full-information likelihood
    holes, _ = hide_at_random(tests9.to_numpy(), 0.2, seed=1)
    holes = pd.DataFrame(holes, columns=tests9.columns)
    model = ConfirmatoryFactorAnalysis(THREE_ABILITIES).fit(holes)
    with_nan = model.modification_indices(holes)
    assert len(with_nan) == len(table) and np.all(np.isfinite(with_nan.mi))
    assert np.all(with_nan.mi > -1e-8)


def test_full_information_modification_indices_on_complete_rows_are_the_moments_ones(
    tests9, fitted
):
    from latentlab.models import cfa

    X = tests9.to_numpy()
    free, _ = fitted._hyper_host
    args = (
        fitted.loadings_,
        fitted.factor_covariance_,
        np.diag(fitted.noise_variance_),
        X.mean(axis=0),
        free,
        False,
    )
    _, mi_rows, epc_rows = cfa.modification_indices(*args, X=X)
    _, mi_moments, epc_moments = cfa.modification_indices(*args, S=(len(X), np.cov(X.T, bias=True)))
    np.testing.assert_allclose(mi_rows, mi_moments, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(epc_rows, epc_moments, rtol=1e-8, atol=1e-8)
