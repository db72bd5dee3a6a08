"""PCA (latentlab.PCA and latentlab.closed_form.pca / whitening) against closed forms and
scikit-learn, in float64."""

import warnings

import jax
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn import decomposition
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

import latentlab
from latentlab import closed_form

IRIS = load_iris().data
IRIS_RATIO = [0.92461872, 0.05306648]
SOLVERS = ["full", "covariance_eigh", "randomized"]

# check_estimator: every check passes for PCA (none expected to fail).
PCA_EXPECTED_FAILED_CHECKS: dict[str, str] = {}


def decaying_spectrum(n=300, d=40, rate=0.7, seed=0):
    """Data whose singular values decay geometrically: s_k = 100 * rate**k."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.normal(size=(n, d)))
    V, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return 5.0 + (U * (100.0 * rate ** np.arange(d))) @ V.T


@pytest.mark.parametrize("solver", SOLVERS)
def test_iris_explained_variance_ratio_matches_oracle(solver):
    pca = latentlab.PCA(n_components=2, svd_solver=solver, random_state=0).fit(IRIS)
    assert_allclose(pca.explained_variance_ratio_, IRIS_RATIO, atol=5e-9)
    assert isinstance(pca.components_, np.ndarray) and pca.components_.dtype == np.float64


@pytest.mark.parametrize("solver", SOLVERS)
def test_components_and_variances_match_sklearn(solver):
    ours = latentlab.PCA(n_components=3, svd_solver=solver, random_state=0).fit(IRIS)
    ref = decomposition.PCA(n_components=3, svd_solver="full").fit(IRIS)
    signs = np.sign(np.sum(ours.components_ * ref.components_, axis=1))
    assert_allclose(ours.components_ * signs[:, None], ref.components_, atol=1e-9)
    # Same deterministic sign convention as scikit-learn: not only "up to sign".
    assert_allclose(signs, 1.0)
    for name in ("explained_variance_", "singular_values_", "mean_", "noise_variance_"):
        assert_allclose(getattr(ours, name), getattr(ref, name), rtol=1e-9, err_msg=name)
    assert_allclose(ours.transform(IRIS[:7] + 0.3), ref.transform(IRIS[:7] + 0.3), atol=1e-9)


@pytest.mark.parametrize("n_components", [1, 2, 3])
def test_score_matches_sklearn_pca_score(n_components):
    ours = latentlab.PCA(n_components=n_components).fit(IRIS)
    ref = decomposition.PCA(n_components=n_components, svd_solver="full").fit(IRIS)
    assert_allclose(ours.score(IRIS), ref.score(IRIS), rtol=1e-10)
    new = IRIS[::7] * 1.1
    assert_allclose(ours.score_samples(new), ref.score_samples(new), rtol=1e-10)
    assert_allclose(ours.get_covariance(), ref.get_covariance(), atol=1e-12)


def test_score_does_not_depend_on_whitening():
    plain = latentlab.PCA(n_components=2).fit(IRIS)
    white = latentlab.PCA(n_components=2, whiten=True).fit(IRIS)
    assert_allclose(white.score_samples(IRIS), plain.score_samples(IRIS), rtol=1e-12)


def test_fraction_of_variance_keeps_same_components_as_sklearn():
    for fraction in (0.5, 0.95, 0.99):
        ours = latentlab.PCA(n_components=fraction).fit(IRIS)
        ref = decomposition.PCA(n_components=fraction, svd_solver="full").fit(IRIS)
        assert ours.n_components_ == ref.n_components_
        assert_allclose(ours.noise_variance_, ref.noise_variance_, rtol=1e-9)


def test_randomized_solver_agrees_with_exact_on_decaying_spectrum():
    X = decaying_spectrum()
    exact = latentlab.PCA(n_components=8, svd_solver="full").fit(X)
    fast = latentlab.PCA(n_components=8, svd_solver="randomized", random_state=1).fit(X)
    assert_allclose(fast.singular_values_, exact.singular_values_, rtol=1e-10)
    assert_allclose(fast.components_, exact.components_, atol=1e-8)
    assert_allclose(fast.noise_variance_, exact.noise_variance_, rtol=1e-8)


def test_whitened_projections_have_unit_variance_and_invert():
    pca = latentlab.PCA(n_components=4, whiten=True).fit(IRIS)
    Z = pca.transform(IRIS)
    assert_allclose(np.cov(Z.T), np.eye(4), atol=1e-10)
    assert_allclose(pca.inverse_transform(Z), IRIS, atol=1e-10)
    ref = decomposition.PCA(n_components=4, whiten=True).fit(IRIS)
    assert_allclose(Z, ref.transform(IRIS), atol=1e-9)


def test_fit_transform_equals_fit_then_transform():
    pca = latentlab.PCA(n_components=2)
    assert_allclose(pca.fit_transform(IRIS), pca.transform(IRIS), atol=1e-12)


def test_float32_option_returns_float64_arrays_close_to_float64():
    before = jax.config.jax_enable_x64
    ours = latentlab.PCA(n_components=2, dtype="float32").fit(IRIS)
    assert ours.components_.dtype == np.float64
    assert_allclose(ours.explained_variance_ratio_, IRIS_RATIO, rtol=1e-5)
    assert jax.config.jax_enable_x64 == before  # the global JAX config is untouched


def test_pandas_output_and_feature_names():
    frame = pd.DataFrame(IRIS, columns=load_iris().feature_names)
    pca = latentlab.PCA(n_components=2).set_output(transform="pandas").fit(frame)
    out = pca.transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["pca0", "pca1"]
    assert list(pca.get_feature_names_out()) == ["pca0", "pca1"]


def test_works_in_pipeline_and_grid_search():
    pipe = make_pipeline(StandardScaler(), latentlab.PCA())
    search = GridSearchCV(pipe, {"pca__n_components": [1, 2, 3]}, cv=3).fit(IRIS)
    assert search.best_params_["pca__n_components"] in (1, 2, 3)


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.PCA(), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(PCA_EXPECTED_FAILED_CHECKS), failed


@pytest.mark.parametrize(
    ("X", "params", "match"),
    [
        (np.r_[IRIS[:-1], [[np.nan, 1, 2, 3]]], {}, "NaN"),
        (np.r_[IRIS[:-1], [[np.inf, 1, 2, 3]]], {}, "infinity"),
        (IRIS, {"n_components": 0}, "n_components"),
        (IRIS, {"n_components": 5}, "n_components"),
        (IRIS, {"n_components": 1.5}, "n_components"),
        (IRIS, {"n_components": -0.2}, "n_components"),
        (IRIS, {"n_components": 0.9, "svd_solver": "randomized"}, "fraction"),
        (IRIS, {"svd_solver": "arpack"}, "svd_solver"),
        (IRIS[:1], {}, "sample"),
        (IRIS[:, 0], {}, "2D"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(X, params, match):
    with pytest.raises(ValueError, match=match):
        latentlab.PCA(**params).fit(X)


def test_transform_rejects_wrong_width_and_inverse_rejects_wrong_shape():
    pca = latentlab.PCA(n_components=2).fit(IRIS)
    with pytest.raises(ValueError, match="features"):
        pca.transform(IRIS[:, :3])
    with pytest.raises(ValueError, match="shape"):
        pca.inverse_transform(np.zeros((3, 3)))


# -- whitening ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["pca", "zca", "cholesky"])
def test_whitening_gives_identity_covariance(method):
    with jax.enable_x64(True):
        result = closed_form.whiten(IRIS, method)
        Xw, W = np.asarray(result.X), np.asarray(result.matrix)
    assert_allclose(np.cov(Xw.T), np.eye(4), atol=1e-10)
    if method == "zca":
        assert_allclose(W, W.T, atol=1e-12)  # symmetric: Sigma^{-1/2}
    if method == "cholesky":
        assert_allclose(W, np.triu(W), atol=1e-14)  # L^{-T} is upper triangular
    if method == "pca":  # equals whitened PCA scores
        ref = latentlab.PCA(whiten=True).fit_transform(IRIS)
        assert_allclose(Xw, ref, atol=1e-9)


def test_unknown_whitening_method_raises():
    with pytest.raises(ValueError, match="whitening method"):
        closed_form.whitening_matrix(np.eye(2), "nope")


def test_quick_compile_path_matches_optimised_path(monkeypatch):
    from latentlab.estimators import _dispatch

    quick = latentlab.PCA(n_components=2, svd_solver="full").fit(IRIS)
    monkeypatch.setattr(_dispatch, "QUICK_COMPILE_MAX_WORK", -1)  # every call optimised
    optimised = latentlab.PCA(n_components=2, svd_solver="full").fit(IRIS)
    assert_allclose(optimised.components_, quick.components_, atol=1e-13)
    assert_allclose(optimised.transform(IRIS[:9]), quick.transform(IRIS[:9]), atol=1e-12)
