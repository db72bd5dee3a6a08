"""Property tests: random shapes, missing patterns and degenerate data never give NaN
(PPCA, factor analysis, Bayesian PCA)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latentlab import PPCA, BayesianPCA, FactorAnalysis

N_FEATURES = 4  # fixed so that the examples share a few compiled programs


@st.composite
def data_with_holes(draw):
    n = draw(st.integers(5, 32))
    K = draw(st.integers(1, 2))
    seed = draw(st.integers(0, 2**16))
    fraction = draw(st.sampled_from([0.0, 0.1, 0.3, 0.5]))
    degenerate = draw(st.sampled_from(["none", "constant_column", "duplicated_rows"]))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, K)) @ rng.normal(size=(K, N_FEATURES)) + 0.1 * rng.normal(
        size=(n, N_FEATURES)
    )
    if degenerate == "constant_column":
        X[:, 0] = 3.0
    elif degenerate == "duplicated_rows":
        X[n // 2 :] = X[: n - n // 2]
    hidden = rng.random(X.shape) < fraction
    hidden[hidden.all(axis=1), 0] = False
    hidden[0] = False  # every column keeps an observed entry
    return np.where(hidden, np.nan, X), K


@pytest.mark.filterwarnings("ignore::UserWarning")  # Heywood / floor / convergence notes
@pytest.mark.parametrize(
    "make, examples",
    [
        (lambda K: PPCA(K, max_iter=200, random_state=0), 10),
        # one factor: the most N_FEATURES = 4 identify (the Ledermann bound)
        (lambda K: FactorAnalysis(1, max_iter=200, random_state=0), 5),
        (lambda K: BayesianPCA(K, max_iter=200, random_state=0), 5),
    ],
    ids=["PPCA", "FactorAnalysis", "BayesianPCA"],
)
def test_fit_score_impute_are_finite(make, examples):
    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data_with_holes())
    def check(case):
        X, K = case
        est = make(K).fit(X)
        check_fitted(est, X)

    check()


def check_fitted(est, X):
    for value in est.params_.values():
        assert np.all(np.isfinite(value))
    assert np.all(np.isfinite(est.score_samples(X)))
    filled, std = est.impute(X, return_std=True)
    assert np.all(np.isfinite(filled)) and np.all(np.isfinite(std))
    trace = est.log_likelihoods_
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
