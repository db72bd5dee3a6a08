"""Gaussian mixtures: EM against scikit-learn, the declared-once contract, recovery, input."""

import warnings

import numpy as np
import pytest
from oracles import is_monotone
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as SkGaussianMixture

import latentlab
from latentlab import GaussianMixture

COVARIANCE_TYPES = ["full", "tied", "diag", "spherical"]
K, D = 3, 4


def planted_mixture(n=300, seed=0, separation=4.0):
    """Three overlapping correlated Gaussian clusters in 4-D; returns X, labels, means."""
    rng = np.random.default_rng(seed)
    means = separation * rng.normal(size=(K, D))
    weights = np.array([0.5, 0.3, 0.2])
    labels = rng.choice(K, size=n, p=weights)
    factors = [np.eye(D) + 0.4 * rng.normal(size=(D, D)) for _ in range(K)]
    X = np.stack([means[c] + factors[c] @ rng.normal(size=D) for c in labels])
    return X, labels, means


@pytest.fixture(scope="module")
def overlapping():
    return planted_mixture(n=300, seed=1, separation=1.5)[0]


@pytest.fixture(scope="module")
def sklearn_starts(overlapping):
    """A crude start per covariance type (two scikit-learn iterations from k-means)."""
    starts = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for ct in COVARIANCE_TYPES:
            sk = SkGaussianMixture(K, covariance_type=ct, max_iter=2, random_state=0)
            sk.fit(overlapping)
            starts[ct] = dict(
                weights_init=sk.weights_, means_init=sk.means_, precisions_init=sk.precisions_
            )
    return starts


@pytest.fixture(scope="module")
def fits(overlapping, sklearn_starts):
    return {
        ct: GaussianMixture(K, covariance_type=ct, **sklearn_starts[ct]).fit(overlapping)
        for ct in COVARIANCE_TYPES
    }


# -- EM --------------------------------------------------------------------------------


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_em_never_decreases_loglik(fits, covariance_type):
    trace = fits[covariance_type].log_likelihoods_
    assert len(trace) > 2
    assert is_monotone(trace)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_matches_sklearn_from_the_same_start(overlapping, sklearn_starts, fits, covariance_type):
    sk = SkGaussianMixture(
        K,
        covariance_type=covariance_type,
        tol=1e-12,
        max_iter=10_000,
        **sklearn_starts[covariance_type],
    ).fit(overlapping)
    ours = fits[covariance_type]
    assert ours.converged_
    np.testing.assert_allclose(ours.score(overlapping), sk.score(overlapping), rtol=1e-6)
    np.testing.assert_allclose(ours.lower_bound_, ours.score(overlapping), rtol=1e-12)
    np.testing.assert_allclose(ours.bic(overlapping), sk.bic(overlapping), rtol=1e-6)
    np.testing.assert_allclose(ours.aic(overlapping), sk.aic(overlapping), rtol=1e-6)


def test_lower_bounds_trace_as_sklearn(overlapping, sklearn_starts, fits):
    # from scikit-learn's test_gaussian_mixture_setting_best_params: lower_bounds_,
    # scikit-learn's per-iteration mean log-likelihood, ends at its converged lower_bound_
    sk = SkGaussianMixture(K, tol=1e-12, max_iter=10_000, **sklearn_starts["full"])
    sk.fit(overlapping)
    ours = fits["full"]
    assert ours.lower_bounds_.shape == (ours.n_iter_,)
    np.testing.assert_allclose(ours.lower_bounds_[-1], sk.lower_bounds_[-1], rtol=1e-6)
    np.testing.assert_allclose(ours.lower_bounds_[-1], ours.lower_bound_, rtol=1e-12)
    assert is_monotone(ours.lower_bounds_)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_sklearn_shaped_attributes_agree(overlapping, fits, covariance_type):
    est = fits[covariance_type]
    sk = SkGaussianMixture(K, covariance_type=covariance_type)
    sk.weights_, sk.means_, sk.covariances_ = est.weights_, est.means_, est.covariances_
    sk.precisions_cholesky_ = est.precisions_cholesky_
    np.testing.assert_allclose(est.score_samples(overlapping), sk.score_samples(overlapping))
    np.testing.assert_allclose(
        est.predict_proba(overlapping), sk.predict_proba(overlapping), atol=1e-12
    )
    np.testing.assert_allclose(
        est.precisions_,
        np.linalg.inv(est.covariances_)
        if covariance_type in ("full", "tied")
        else 1.0 / est.covariances_,
    )
    for out in (est.score_samples(overlapping), est.predict_proba(overlapping), est.means_):
        assert type(out) is np.ndarray and out.dtype == np.float64


def test_planted_mixture_is_recovered_up_to_relabelling():
    X, labels, means = planted_mixture(n=300, seed=3, separation=4.0)  # shapes as `fits`
    est = GaussianMixture(K, random_state=0).fit(X)
    # match each fitted component to the nearest planted mean
    match = np.argmin(((est.means_[:, None] - means[None]) ** 2).sum(-1), axis=1)
    assert sorted(match) == [0, 1, 2]
    np.testing.assert_allclose(est.means_, means[match], atol=0.5)
    agreement = np.mean(match[est.predict(X)] == labels)
    assert agreement > 0.95
    np.testing.assert_allclose(np.sort(est.weights_), [0.2, 0.3, 0.5], atol=0.07)


def test_best_bic_no_worse_than_sklearn_with_the_same_restarts(overlapping):
    ours = GaussianMixture(K, n_init=3, random_state=0).fit(overlapping)
    sk = SkGaussianMixture(K, n_init=3, random_state=0).fit(overlapping)
    assert ours.bic(overlapping) <= sk.bic(overlapping) + 1e-6 * abs(sk.bic(overlapping))


@pytest.mark.parametrize("init", ["kmeans", "k-means++", "random", "random_from_data"])
def test_every_init_reaches_a_finite_monotone_fit(overlapping, init):
    est = GaussianMixture(K, init_params=init, random_state=0, covariance_type="diag").fit(
        overlapping
    )
    assert np.isfinite(est.lower_bound_) and is_monotone(est.log_likelihoods_)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_collapsing_components_stay_finite(covariance_type):
    # duplicated rows and more components than distinct points: components collapse
    rng = np.random.default_rng(0)
    X = np.repeat(rng.normal(size=(3, D)), 10, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = GaussianMixture(5, covariance_type=covariance_type, random_state=0)
        est.fit(X)
    for value in (est.weights_, est.means_, est.covariances_, est.precisions_cholesky_):
        assert np.all(np.isfinite(value))
    assert np.all(np.isfinite(est.score_samples(X)))
    assert is_monotone(est.log_likelihoods_)


def test_sample_follows_the_fit(fits):
    est = fits["full"]
    X, labels = est.sample(4000, random_state=0)
    assert X.shape == (4000, D) and labels.shape == (4000,)
    np.testing.assert_allclose(np.bincount(labels, minlength=K) / 4000, est.weights_, atol=0.03)
    np.testing.assert_allclose(X.mean(0), est.weights_ @ est.means_, atol=0.15)


def test_max_iter_warns(overlapping):
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        est = GaussianMixture(K, covariance_type="diag", max_iter=2, tol=0.0, random_state=0)
        est.fit(overlapping)
    assert not est.converged_ and est.n_iter_ == 2


def test_fit_predict_matches_predict(overlapping, fits):
    est = fits["tied"]
    np.testing.assert_array_equal(
        est.predict(overlapping), np.argmax(est.predict_proba(overlapping), 1)
    )


def test_save_and_load_round_trip(tmp_path, overlapping, fits):
    est = fits["diag"]
    path = tmp_path / "gmm.npz"
    est.save(path)
    loaded = latentlab.load(path)
    np.testing.assert_allclose(loaded.score_samples(overlapping), est.score_samples(overlapping))


# -- one compiled program for several n_components ------------------------------------


def fit_with_and_without_padding(monkeypatch, X, **kwargs):
    """The same K=3 fit with one padding component (EM compiled for 4 components, the
    default on small data) and without; checks that each ran with that many."""
    from latentlab.models import gmm_programs as module

    ran_with = []
    fit_em = module.fit_em

    def spy(model, start_inputs, data, hyper, *args, **kw):
        ran_with.append(hyper.active.shape[-1])  # (components,), padding included
        return fit_em(model, start_inputs, data, hyper, *args, **kw)

    monkeypatch.setattr(module, "fit_em", spy)
    padded = GaussianMixture(K, **kwargs).fit(X)
    with latentlab.config_context(padding=False):
        plain = GaussianMixture(K, **kwargs).fit(X)
    assert ran_with == [4, 3]
    return padded, plain


def assert_same_fit(padded, plain, X):
    """Parameters, trace and log-likelihood of the two fits agree to 1e-10.

    Components are matched by their weights first: where n_init starts tie at one
    optimum up to relabelling, round-off decides which start's labelling is kept."""
    assert padded.n_iter_ == plain.n_iter_ and padded.converged_ == plain.converged_
    match = np.argsort(padded.weights_)[np.argsort(np.argsort(plain.weights_))]
    for name, value in plain.params_.items():
        ours = padded.params_[name]
        ours = ours if name == "scale" and padded.covariance_type == "tied" else ours[match]
        assert ours.shape == value.shape
        np.testing.assert_allclose(ours, value, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(padded.log_likelihoods_, plain.log_likelihoods_, rtol=1e-10)
    np.testing.assert_allclose(padded.lower_bound_, plain.lower_bound_, rtol=1e-10)
    np.testing.assert_allclose(padded.score_samples(X), plain.score_samples(X), rtol=1e-10)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_padding_components_at_weight_zero_change_nothing(
    monkeypatch, overlapping, sklearn_starts, covariance_type
):
    # the settings of `fits`, whose compiled program the padded fit reuses; user starts
    # exercise the padding of weights_init/means_init/precisions_init too
    kwargs = dict(covariance_type=covariance_type, **sklearn_starts[covariance_type])
    padded, plain = fit_with_and_without_padding(monkeypatch, overlapping, **kwargs)
    assert_same_fit(padded, plain, overlapping)


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "X, kwargs, match",
    [
        (np.ones(10), {}, "2D array"),
        (np.array([[1.0, np.inf], [2.0, 3.0]]), {}, "infinity"),
        (np.array([[np.nan, np.nan], [2.0, 3.0], [1.0, 1.0]]), {}, "every entry missing"),
        (np.array([[np.nan, 1.0], [np.nan, 3.0], [np.nan, 1.0]]), {}, "column"),
        (np.ones((5, 2)), {"n_components": 6}, "n_components"),
        (np.ones((5, 2)), {"n_components": 0}, "n_components"),
        (np.ones((5, 2)), {"covariance_type": "banana"}, "covariance_type"),
        (np.ones((5, 2)), {"init_params": "nope"}, "init_params"),
        (np.ones((5, 2)), {"reg_covar": -1.0}, "reg_covar"),
        (np.ones((5, 2)), {"tol": -1.0}, "tol"),
        (np.ones((5, 2)), {"max_iter": -1}, "max_iter"),
        (np.ones((5, 2)), {"n_components": 2, "weights_init": [0.2, 0.2]}, "weights_init"),
        (np.ones((5, 2)), {"n_components": 2, "means_init": np.zeros((2, 3))}, "means_init"),
        (
            np.ones((5, 2)),
            {"n_components": 1, "precisions_init": -np.eye(2)[None]},
            "precisions_init",
        ),
    ],
)
def test_bad_input_is_rejected_with_a_named_problem(X, kwargs, match):
    kwargs = {"n_components": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        GaussianMixture(**kwargs).fit(X)


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    # The protocol checks fit many small shapes; the cheapest-to-compile settings keep
    # them fast (every covariance type and acceleration is exercised numerically above).
    est = GaussianMixture(1, covariance_type="spherical", accelerate=False, random_state=0)
    check_estimator(est, expected_failed_checks={})  # nothing is expected to fail


def test_svi_random_state_reaches_the_svi_and_reproduces_the_fit():
    """``random_state`` seeds the SVI itself through the shared multi-start driver (the
    start is fixed by the *_init settings, so only the SVI's noise can differ)."""
    X = planted_mixture(n=60, seed=2)[0]
    start = dict(
        weights_init=np.full(K, 1.0 / K),
        means_init=X[:K],
        precisions_init=np.ones((K, D)),
    )

    def fit(seed):  # diag: the cheapest SVI program to compile
        est = GaussianMixture(K, covariance_type="diag", method="svi", svi_steps=40, **start)
        return est.set_params(random_state=seed).fit(X)

    a, b, c = fit(3), fit(3), fit(4)
    for key in a.params_:
        np.testing.assert_array_equal(a.params_[key], b.params_[key])
    np.testing.assert_array_equal(a.log_likelihoods_, b.log_likelihoods_)
    assert not np.array_equal(a.log_likelihoods_, c.log_likelihoods_)


def _degeneracy_warnings(X, K):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        GaussianMixture(K, random_state=0).fit(X)
    return [str(w.message) for w in record if "floor" in str(w.message)]


def test_covariances_at_the_floor_are_warned_about():
    """Measured cases: diabetes' components collapse along its near-degenerate columns
    and inflated the likelihood without a word; wine times 1e-4 puts every variance
    below the absolute reg_covar (another clustering, -30 nats per row), silently.
    Standardised wine is a regular fit: no such warning."""
    from sklearn.datasets import load_diabetes, load_wine

    diabetes = load_diabetes().data
    (collapsed,) = _degeneracy_warnings(diabetes, 2)
    assert "collapsed onto a (near-)degenerate set" in collapsed and "feature" in collapsed
    wine = load_wine().data
    (dominated,) = _degeneracy_warnings(wine * 1e-4, 3)
    assert "reg_covar=1e-06 is a variance in the data's units" in dominated
    standardised = (wine - wine.mean(axis=0)) / wine.std(axis=0)
    assert _degeneracy_warnings(standardised, 3) == []
