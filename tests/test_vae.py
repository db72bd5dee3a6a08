"""VariationalAutoencoder: with the linear decoder its ELBO reaches PPCA's exact
log-likelihood on data simulated from PPCA (and never exceeds it beyond Monte Carlo
error); the encoder is PPCA's posterior; the MLP decoder beats every linear one on a
curve; the estimator surface."""

import warnings

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.utils.estimator_checks import check_estimator

import latentlab

RNG = np.random.default_rng(1)
N, D, K = 240, 5, 2
W_TRUE = 2.0 * RNG.normal(size=(D, K))
X = RNG.normal(size=(N, K)) @ W_TRUE.T + 3.0 * RNG.normal(size=D) + 0.5 * RNG.normal(size=(N, D))
T = RNG.uniform(-1.0, 1.0, 200)
CURVE = np.c_[T, T**2, 0.5 * T**3] + 0.05 * RNG.normal(size=(200, 3))

SETTINGS = dict(svi_steps=2000, learning_rate=0.03)


@pytest.fixture(scope="module")
def ppca():
    return latentlab.PPCA(K).fit(X)


@pytest.fixture(scope="module")
def vae():
    return latentlab.VariationalAutoencoder(K, random_state=0, **SETTINGS).fit(X)


def _decoder_covariance(est):
    W, sigma2 = est.params_["W"], est.params_["sigma2"]
    return W @ W.T + sigma2 * np.eye(W.shape[0])


def test_linear_vae_elbo_reaches_ppca_loglik(vae, ppca):
    loglik = ppca.score(X)  # exact ML log-likelihood per row
    assert abs(vae.elbo_ - loglik) <= 0.01 * abs(loglik)
    assert vae.elbo_ <= loglik + 3 * vae.elbo_std_error_
    # measured: 1.5e-5 relative, so far tighter than the 1% asked
    assert abs(vae.elbo_ - loglik) <= 1e-3 * abs(loglik)
    np.testing.assert_allclose(vae.score(X), vae.elbo_, rtol=1e-12)


def test_elbo_bounds_the_exact_loglik_at_its_own_decoder(vae, ppca):
    # the ELBO is a lower bound on log p(x) at the decoder's own (W, mu, sigma2), whose
    # exact value (SciPy, marginal N(mu, W W^T + sigma2 I)) is at most the ML optimum
    p = vae.params_
    own = multivariate_normal(p["mu"], _decoder_covariance(vae)).logpdf(X).mean()
    assert vae.elbo_ <= own + 3 * vae.elbo_std_error_
    assert ppca.score(X) - 1e-3 * abs(ppca.score(X)) <= own <= ppca.score(X) + 1e-9


def test_encoder_mean_is_the_ppca_posterior_mean(vae):
    # PRML 12.48: E[z | x] = M^-1 W^T (x - mu), M = W^T W + sigma2 I, at the VAE's decoder
    p = vae.params_
    M = p["W"].T @ p["W"] + p["sigma2"] * np.eye(K)
    exact = (X - p["mu"]) @ p["W"] @ np.linalg.inv(M)
    np.testing.assert_allclose(vae.transform(X), exact, atol=0.05)  # measured 0.033
    np.testing.assert_allclose(vae.inverse_transform(exact), exact @ p["W"].T + p["mu"])


def test_sample_draws_from_the_declaration(vae):
    Xs, Z = vae.sample(4000, random_state=0)
    assert Xs.shape == (4000, D) and Z.shape == (4000, K)
    np.testing.assert_allclose(np.cov(Xs.T), _decoder_covariance(vae), atol=0.25)
    np.testing.assert_allclose(Xs.mean(axis=0), vae.params_["mu"], atol=0.15)


def test_mlp_decoder_beats_every_linear_decoder_on_a_curve_and_is_reproducible():
    # any linear decoder's ELBO is at most PPCA(1)'s exact log-likelihood; the fits use
    # minibatches (the subsampled plate), one compiled program for all three
    linear_best = latentlab.PPCA(1).fit(CURVE).score(CURVE)

    def fit(seed):
        return latentlab.VariationalAutoencoder(
            1,
            hidden_layer_sizes=(16,),
            decoder="mlp",
            batch_size=64,
            random_state=seed,
            **SETTINGS,
        ).fit(CURVE)

    a, b, c = fit(0), fit(0), fit(1)
    assert a.elbo_ > linear_best + 2.0  # measured: 2.02 against -0.64
    assert set(a.params_) == {"W", "mu", "sigma2", "decoder_W0", "decoder_b0"}
    for name in a.params_:
        np.testing.assert_array_equal(a.params_[name], b.params_[name])
    assert not np.allclose(a.params_["W"], c.params_["W"])


@pytest.mark.parametrize(
    ("settings", "data", "match"),
    [
        (dict(n_components=6), X, "n_components=6 is out of range"),
        (dict(decoder="conv"), X, "decoder"),
        (dict(decoder="mlp"), X, "decoder='mlp' needs hidden layers"),
        (dict(hidden_layer_sizes=(-1,)), X, "hidden_layer_sizes"),
        (dict(activation="gelu"), X, "activation"),
        (dict(learning_rate=0.0), X, "learning_rate"),
        (dict(batch_size=0), X, "batch_size"),
        (dict(svi_steps=0), X, "svi_steps"),
        (dict(), np.where(np.eye(N, D) > 0, np.nan, X), "NaN"),
        (dict(), X[:1], "minimum of 2"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(settings, data, match):
    with pytest.raises(ValueError, match=match):
        latentlab.VariationalAutoencoder(**settings).fit(data)


def test_bad_arguments_of_the_fitted_model(vae):
    with pytest.raises(ValueError, match="codes of shape"):
        vae.inverse_transform(np.zeros((2, K + 1)))
    with pytest.raises(ValueError, match="n_samples"):
        vae.sample(0)


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = latentlab.VariationalAutoencoder(svi_steps=10, elbo_particles=2)
        results = check_estimator(est, on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert not failed, failed
