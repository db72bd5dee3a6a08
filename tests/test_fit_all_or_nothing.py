"""A fitting call that raises leaves the estimator as it found it.

Measured case: a first ``GaussianMixture.partial_fit`` refused halfway (one row for
two components) had already set ``n_features_in_``, so ``check_is_fitted`` took the
estimator for fitted and ``score`` raised AttributeError instead of NotFittedError;
BayesianPCA and PLSA did the same from ``fit``.
"""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import latentlab

RNG = np.random.default_rng(0)
X = np.abs(RNG.normal(size=(40, 3))) + 0.1  # non-negative, so that PLSA takes it too
ONE_ROW = X[:1]  # passes the array checks, then too few rows for two components


def _fitting_calls():
    for name in ("GaussianMixture", "PPCA", "FactorAnalysis", "BayesianPCA", "PLSA"):
        for method in ("fit", "partial_fit"):
            if hasattr(getattr(latentlab, name), method):
                yield pytest.param(name, method, id=f"{name}.{method}")


@pytest.mark.parametrize("name, method", list(_fitting_calls()))
def test_a_failed_first_fit_leaves_no_fitted_attribute(name, method):
    est = getattr(latentlab, name)(2)
    before = dict(vars(est))
    with pytest.raises(ValueError):
        getattr(est, method)(ONE_ROW)
    assert vars(est) == before
    with pytest.raises(NotFittedError):
        est.score(X)


def test_a_failed_partial_fit_keeps_the_stream_it_had():
    est = latentlab.GaussianMixture(2, random_state=0).partial_fit(X)
    kept = {k: v for k, v in vars(est).items() if k.endswith("_")}
    score = est.score(X)
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(X[:, :2])  # the wrong number of columns
    assert sorted(k for k in vars(est) if k.endswith("_")) == sorted(kept)
    assert est.n_samples_seen_ == len(X)
    assert est.score(X) == score
