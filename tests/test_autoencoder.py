"""Autoencoder: the linear one recovers PCA's subspace (Baldi & Hornik 1989) -- at its
defaults (full-batch L-BFGS on small data) and with Adam --, a non-linear one beats it
on a curved manifold, and the estimator surface."""

import warnings

import numpy as np
import pytest
import scipy.linalg
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

import latentlab
from latentlab.estimators import autoencoder

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

FULL_BATCH = dict(
    solver="adam", batch_size=N, tol=0.0, alpha=0.0, learning_rate_init=3e-2, random_state=0
)
WINE = StandardScaler().fit_transform(load_wine().data)  # 178 x 13


def _mean_squared_error(model, X):
    return np.mean(np.sum((model.inverse_transform(model.transform(X)) - X) ** 2, axis=1))


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


def test_linear_autoencoder_at_its_defaults_reaches_pca_on_wine():
    # measured: 200 epochs of Adam stopped at twice PCA's error (0.87 against 0.45 per
    # entry); full-batch L-BFGS, what "auto" picks for 178 rows, converges to it
    pca = PCA(2).fit(WINE)
    optimum = _mean_squared_error(pca, WINE)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ae = latentlab.Autoencoder(
            2, hidden_layer_sizes=(), activation="linear", random_state=0
        ).fit(WINE)
    assert ae.solver_ == "lbfgs" and ae.converged_ and ae.n_iter_ < 100, ae.n_iter_
    error = _mean_squared_error(ae, WINE)
    assert optimum * (1 - 1e-9) <= error <= 1.01 * optimum, (error, optimum)
    np.testing.assert_allclose(-ae.score(WINE), error)
    # the decoder spans PCA's subspace (alpha's small shrinkage leaves it in place)
    angles = scipy.linalg.subspace_angles(ae.components_.T, pca.components_.T)
    assert np.max(angles) < 5e-3, angles
    # every L-BFGS iteration is a line-search step that lowered the loss
    assert ae.loss_curve_.shape == (ae.n_iter_,)
    assert np.all(np.diff(ae.loss_curve_) <= 0)
    assert ae.loss_ == ae.loss_curve_[-1]


def test_lbfgs_trains_a_nonlinear_network():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # may run all 200 iterations
        ae = latentlab.Autoencoder(
            2, hidden_layer_sizes=(8,), activation="tanh", random_state=0
        ).fit(WINE)
    assert ae.solver_ == "lbfgs" and 1 < ae.n_iter_ <= 200
    curve = ae.loss_curve_
    assert np.all(np.diff(curve) <= 0) and curve[-1] < 0.5 * curve[0]
    # one tanh layer each side reconstructs wine better than the best linear code
    pca = PCA(2).fit(WINE)
    assert _mean_squared_error(ae, WINE) < 0.9 * _mean_squared_error(pca, WINE)
    assert not hasattr(ae, "components_")


@pytest.mark.parametrize(
    ("settings", "solver"),
    [
        (dict(), "lbfgs"),
        (dict(batch_size=50), "adam"),  # mini-batches asked for
        (dict(early_stopping=True), "adam"),  # validation epochs asked for
        (dict(solver="adam"), "adam"),
        (dict(solver="lbfgs", batch_size=50), "lbfgs"),  # L-BFGS takes every row
    ],
)
def test_auto_solver_is_lbfgs_for_small_data_unless_adam_is_asked_for(settings, solver):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ae = latentlab.Autoencoder(K, activation="linear", max_iter=3, **settings).fit(X)
    assert ae.solver_ == solver


def test_auto_solver_is_adam_for_large_data(monkeypatch):
    monkeypatch.setattr(autoencoder, "LBFGS_MAX_ROWS", N - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ae = latentlab.Autoencoder(K, activation="linear", max_iter=3).fit(X)
    assert ae.solver_ == "adam"


def test_lbfgs_progress_report_in_data_units(capsys):
    ae = latentlab.Autoencoder(K, activation="linear", verbose=5, random_state=0).fit(X)
    lines = [line for line in capsys.readouterr().out.splitlines() if "L-BFGS iteration" in line]
    assert len(lines) == ae.n_iter_ // 5
    np.testing.assert_allclose(float(lines[0].split()[-1]), ae.loss_curve_[4], rtol=1e-5)


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
        solver="adam",
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
    # scikit-learn's rule, replayed on the recorded scores: an epoch resets the count
    # only if it beats the best so far by more than tol (in training units, score /
    # scale^2), while any gain, however small, moves the best (kept) epoch; training
    # stopped n_iter_no_change epochs after the last reset
    errors = -ae.validation_scores_ / ae.scale_**2
    resets = [
        i for i in range(ae.n_iter_) if errors[i] < np.min(errors[:i], initial=np.inf) - ae.tol
    ]
    assert ae.n_iter_ - 1 - resets[-1] == ae.n_iter_no_change
    assert int(np.argmax(ae.validation_scores_)) >= resets[-1]


@pytest.mark.parametrize(
    ("solver", "match"),
    [
        ("adam", "training did not converge within max_iter=2 epochs"),
        ("lbfgs", "L-BFGS did not converge within max_iter=2 iterations"),
    ],
)
def test_stopping_at_max_iter_warns(solver, match):
    with pytest.warns(ConvergenceWarning, match=match):
        ae = latentlab.Autoencoder(K, activation="linear", max_iter=2, solver=solver).fit(X)
    assert ae.n_iter_ == 2 and not ae.converged_


@pytest.mark.parametrize(
    ("settings", "data", "match"),
    [
        (dict(n_components=7), X, "n_components=7 is out of range"),
        (dict(n_components=0), X, "n_components must be a positive integer"),
        (dict(hidden_layer_sizes=(4, 0)), X, "hidden_layer_sizes"),
        (dict(hidden_layer_sizes="big"), X, "hidden_layer_sizes"),
        (dict(activation="softmax"), X, "activation"),
        (dict(solver="sgd"), X, "solver"),
        (dict(solver="lbfgs", early_stopping=True), X, "early_stopping needs solver='adam'"),
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
