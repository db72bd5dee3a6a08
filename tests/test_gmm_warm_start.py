"""GaussianMixture's warm_start and max_iter=0, against scikit-learn and SciPy."""

import warnings

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from latentlab import GaussianMixture

K, D = 2, 3


def _data():
    rng = np.random.RandomState(0)
    return np.vstack([rng.randn(60, D), 0.5 * rng.randn(40, D) + 2.0])


def _start(covariance_type):
    """A deliberately poor start, so that each EM step moves the parameters."""
    precisions = {
        "full": np.stack([np.eye(D), 2.0 * np.eye(D)]),
        "tied": np.eye(D),
        "diag": np.array([[1.0, 2.0, 0.5], [1.0, 1.0, 3.0]]),
        "spherical": np.array([1.0, 2.0]),
    }[covariance_type]
    return {
        "weights_init": np.array([0.3, 0.7]),
        "means_init": np.array([[0.0, 0.0, 0.0], [1.0, 1.5, 1.0]]),
        "precisions_init": precisions,
    }


def _covariances(precisions, covariance_type):
    """Each component's (d, d) covariance from scikit-learn-shaped precisions."""
    if covariance_type == "full":
        return np.linalg.inv(precisions)
    if covariance_type == "tied":
        return np.stack([np.linalg.inv(precisions)] * K)
    if covariance_type == "diag":
        return np.stack([np.diag(1.0 / p) for p in precisions])
    return np.stack([np.eye(D) / p for p in precisions])


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_max_iter_zero_returns_the_start_and_its_loglik(covariance_type):
    X = _data()
    start = _start(covariance_type)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConvergenceWarning, as scikit-learn
        gm = GaussianMixture(K, covariance_type=covariance_type, max_iter=0, **start).fit(X)
    np.testing.assert_allclose(gm.weights_, start["weights_init"], rtol=1e-13)
    np.testing.assert_allclose(gm.means_, start["means_init"], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(gm.precisions_, start["precisions_init"], rtol=1e-12)
    assert gm.n_iter_ == 0
    assert gm.converged_ is False
    assert gm.log_likelihoods_.shape == (0,) and gm.lower_bounds_.shape == (0,)
    # the start's log-likelihood, from SciPy
    covariances = _covariances(start["precisions_init"], covariance_type)
    density = sum(
        w * multivariate_normal(m, c).pdf(X)
        for w, m, c in zip(start["weights_init"], start["means_init"], covariances, strict=True)
    )
    expected = np.mean(np.log(density))
    np.testing.assert_allclose(gm.lower_bound_, expected, rtol=1e-12)
    np.testing.assert_allclose(gm.score(X), expected, rtol=1e-12)


def test_max_iter_zero_keeps_scikit_learns_start_means():
    # scikit-learn's test_max_iter_zero: the means are means_init, whatever else
    X = _data()
    means = np.array([[20.0, 30.0, 0.0], [30.0, 25.0, 1.0]])
    gm = GaussianMixture(K, max_iter=0, means_init=means, random_state=0).fit(X)
    sk = SkGaussianMixture(K, max_iter=0, means_init=means, random_state=0).fit(X)
    np.testing.assert_allclose(gm.means_, means, rtol=1e-13)
    np.testing.assert_allclose(sk.means_, means)
    assert gm.n_iter_ == sk.n_iter_ == 0


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_warm_start_takes_scikit_learns_em_steps(covariance_type):
    """Four warm-started fits of one EM step each reach scikit-learn's parameters from
    the same start (reg_covar=0: both M-steps are exact EM there)."""
    X = _data()
    settings = dict(
        covariance_type=covariance_type,
        reg_covar=0.0,
        warm_start=True,
        max_iter=1,
        tol=0.0,
        **_start(covariance_type),
    )
    sk = SkGaussianMixture(K, **settings)
    gm = GaussianMixture(K, accelerate=False, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        scores = []
        for _ in range(4):
            sk.fit(X)
            gm.fit(X)
            scores.append(gm.score(X))
            assert gm.n_iter_ == 1
    np.testing.assert_allclose(gm.weights_, sk.weights_, rtol=1e-10)
    np.testing.assert_allclose(gm.means_, sk.means_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gm.covariances_, sk.covariances_, rtol=1e-10, atol=1e-12)
    assert np.all(np.diff(scores) > 0)  # each fit went on from the last


def test_warm_start_continues_where_the_last_fit_stopped():
    """Two warm fits of max_iter=1 equal one cold fit of max_iter=2 (SQUAREM cycles
    too); the warm fit ignores n_init and the *_init settings."""
    X = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cold = GaussianMixture(K, max_iter=2, tol=0.0, random_state=1).fit(X)
        warm = GaussianMixture(K, max_iter=1, tol=0.0, random_state=1, warm_start=True).fit(X)
        warm.set_params(n_init=3, means_init=np.zeros((K, D)))
        warm.fit(X)
    np.testing.assert_allclose(warm.means_, cold.means_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(warm.covariances_, cold.covariances_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(warm.lower_bound_, cold.lower_bound_, rtol=1e-12)


def test_warm_start_detects_convergence():
    X = _data()
    gm = GaussianMixture(K, max_iter=1, warm_start=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(100):
            gm.fit(X)
            if gm.converged_:
                break
    assert gm.converged_
    full = GaussianMixture(K, random_state=0).fit(X)
    np.testing.assert_allclose(gm.lower_bound_, full.lower_bound_, atol=1e-5)


def test_warm_start_refuses_a_changed_model():
    X = _data()
    gm = GaussianMixture(K, warm_start=True, random_state=0).fit(X)
    gm.set_params(n_components=3)
    with pytest.raises(ValueError, match="warm_start"):
        gm.fit(X)


@pytest.mark.parametrize("max_iter", [-1, 1.5, True])
def test_max_iter_must_be_a_non_negative_integer(max_iter):
    with pytest.raises(ValueError, match="max_iter"):
        GaussianMixture(K, max_iter=max_iter).fit(_data())
