"""Autoencoder: the linear one recovers PCA's subspace (Baldi & Hornik 1989), a
non-linear one beats it on a curved manifold, and the estimator surface."""

import warnings

import numpy as np
import pytest
import scipy.linalg
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import check_estimator

import latentlab

RNG = np.random.default_rng(0)
N, D, K = 200, 6, 2
# distinct spectrum (gap after K) in a random orientation, off-centre
X = (
    RNG.normal(size=(N, D))
    @ np.diag([3.0, 2.0, 1.0, 0.7, 0.5, 0.3])
    @ np.linalg.qr(RNG.normal(size=(D, D)))[0]
    + 5.0
)
# a curve in 3-D: one intrinsic dimension that no line captures
T = RNG.uniform(-1.0, 1.0, N)
CURVE = np.c_[T, T**2, 0.5 * T**3] + 0.01 * RNG.normal(size=(N, 3))

FULL_BATCH = dict(batch_size=N, tol=0.0, alpha=0.0, learning_rate_init=3e-2, random_state=0)


def _fit(X, n_components, epochs, **settings):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # tol=0 runs every epoch
        return latentlab.Autoencoder(
            n_components, max_iter=epochs, n_iter_no_change=epochs, **{**FULL_BATCH, **settings}
        ).fit(X)


@pytest.fixture(scope="module")
def linear():
    # Adam at a constant step hops around the optimum (0.015 rad off here after 1000
    # epochs); the adaptive schedule settles into it
    return latentlab.Autoencoder(
        K,
        activation="linear",
        learning_rate="adaptive",
        max_iter=5000,
        n_iter_no_change=10,
        **{**FULL_BATCH, "tol": 1e-9},
    ).fit(X)


def test_linear_autoencoder_decoder_spans_pca_subspace(linear):
    pca = PCA(K).fit(X)
    angles = scipy.linalg.subspace_angles(linear.components_.T, pca.components_.T)
    assert np.max(angles) < 1e-3, angles
    # the encoder's row space is the same subspace at the optimum; its error along a
    # direction costs only that direction's (small) variance, so it converges slower
    encoder = linear.params_["encoder_W0"]
    assert np.max(scipy.linalg.subspace_angles(encoder, pca.components_.T)) < 1e-2


def test_linear_autoencoder_error_is_the_discarded_variance(linear):
    # PCA's optimal rank-K reconstruction error per row: the discarded ML eigenvalues
    eigenvalues = np.linalg.eigvalsh(np.cov(X.T, ddof=0))[::-1]
    discarded = eigenvalues[K:].sum()
    np.testing.assert_allclose(-linear.score(X), discarded, rtol=1e-5)
    np.testing.assert_allclose(linear.loss_, discarded, rtol=1e-5)
    assert linear.converged_ and linear.loss_curve_.shape == (linear.n_iter_,)
    assert linear.validation_scores_ is None


def test_linear_maps_agree_with_components(linear):
    Z = linear.transform(X[:7])
    np.testing.assert_allclose(
        linear.inverse_transform(Z), Z @ linear.components_ + linear.intercept_, atol=1e-10
    )
    np.testing.assert_allclose(linear.score_samples(X[:7]).sum() / 7, linear.score(X[:7]))
    reconstruction = linear.inverse_transform(linear.transform(X))
    np.testing.assert_allclose(
        -np.sum((reconstruction - X) ** 2, axis=1), linear.score_samples(X), atol=1e-10
    )


CURVED = dict(hidden_layer_sizes=(16,), activation="relu", batch_size=50)


def test_nonlinear_autoencoder_beats_linear_on_a_curve():
    line = _fit(CURVE, 1, 400, activation="linear")
    curved = _fit(CURVE, 1, 400, **CURVED)
    # the linear one is PCA(1): its error is the two discarded eigenvalues
    eigenvalues = np.linalg.eigvalsh(np.cov(CURVE.T, ddof=0))
    np.testing.assert_allclose(-line.score(CURVE), eigenvalues[:2].sum(), rtol=1e-3)
    assert -curved.score(CURVE) < 0.05 * -line.score(CURVE)
    assert not hasattr(curved, "components_")


def test_reproducible_with_random_state_and_progress_bar(capsys):
    # mini-batches of 50: the shuffles are part of what must be reproducible
    a, b, c = (
        _fit(CURVE, 1, 5, random_state=seed, verbose=verbose, **CURVED)
        for seed, verbose in ((3, False), (3, True), (4, False))
    )
    assert "Autoencoder" in capsys.readouterr().err  # tqdm's bar
    for name, value in a.params_.items():
        np.testing.assert_array_equal(value, b.params_[name])
    assert not np.allclose(a.params_["encoder_W0"], c.params_["encoder_W0"])


def test_early_stopping_keeps_the_best_validation_epoch():
    ae = latentlab.Autoencoder(
        K,
        activation="linear",
        early_stopping=True,
        validation_fraction=0.2,
        n_iter_no_change=5,
        max_iter=400,
        learning_rate_init=3e-2,
        batch_size=N,
        random_state=0,
    ).fit(X)
    assert ae.converged_ and ae.n_iter_ < 400
    assert ae.validation_scores_.shape == (ae.n_iter_,)
    assert ae.best_validation_score_ == ae.validation_scores_.max()
    # stopped n_iter_no_change epochs after the best one, whose parameters it kept
    assert int(np.argmax(ae.validation_scores_)) == ae.n_iter_ - 6


def test_stopping_at_max_iter_warns():
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        latentlab.Autoencoder(K, activation="linear", max_iter=2, batch_size=N).fit(X)


@pytest.mark.parametrize(
    ("settings", "data", "match"),
    [
        (dict(n_components=7), X, "n_components=7 is out of range"),
        (dict(n_components=0), X, "n_components must be a positive integer"),
        (dict(hidden_layer_sizes=(4, 0)), X, "hidden_layer_sizes"),
        (dict(hidden_layer_sizes="big"), X, "hidden_layer_sizes"),
        (dict(activation="softmax"), X, "activation"),
        (dict(learning_rate="invscaling"), X, "learning_rate"),
        (dict(learning_rate_init=0.0), X, "learning_rate_init"),
        (dict(batch_size=0), X, "batch_size"),
        (dict(early_stopping=True, validation_fraction=1.5), X, "validation_fraction"),
        (dict(early_stopping=True, validation_fraction=0.6), X[:2], "early_stopping needs"),
        (dict(alpha=-1.0), X, "alpha"),
        (dict(tol=-1.0), X, "tol"),
        (dict(), np.where(np.eye(N, D) > 0, np.nan, X), "NaN"),
        (dict(), X[0], "2D array"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(settings, data, match):
    with pytest.raises(ValueError, match=match):
        latentlab.Autoencoder(**settings).fit(data)


def test_inverse_transform_rejects_codes_of_the_wrong_width(linear):
    with pytest.raises(ValueError, match="codes of shape"):
        linear.inverse_transform(np.zeros((3, K + 1)))


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.Autoencoder(max_iter=5), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert not failed, failed
