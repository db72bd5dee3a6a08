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
from latentlab.closed_form import pca as cf_pca
from latentlab.inference.summaries import scatter_about_mean

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


def huge_mean_data(n=2000, d=6, offset=1e8, seed=0):
    """Unit-order spreads about column means of ``offset`` (the middle column at 0)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.linspace(0.5, 2.0, d)
    return X + offset * (np.arange(d) != d // 2)


@pytest.mark.parametrize("offset", [1e8, -3e6])
def test_covariance_eigh_with_huge_mean_matches_sklearn_full(offset):
    X = huge_mean_data(offset=offset)
    ref = decomposition.PCA(svd_solver="full").fit(X)
    for solver in ("covariance_eigh", "auto"):
        ours = latentlab.PCA(svd_solver=solver).fit(X)
        assert ours.svd_solver_ == "covariance_eigh"
        assert_allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-6)
        assert_allclose(ours.mean_, ref.mean_, rtol=1e-14)
        assert_allclose(np.abs(ours.components_ @ ref.components_.T), np.eye(6), atol=1e-6)
    with jax.enable_x64(True):  # the jit'd path (lax.cond) falls back to centring too
        fit = closed_form.pca_covariance_eigh(X)
        assert_allclose(np.asarray(fit.explained_variance), ref.explained_variance_, rtol=1e-6)
        mean, scatter = cf_pca.scatter_about_mean(X, method="gram")
        assert not cf_pca.shifted_gram_is_safe(X.shape[0], mean, scatter.diagonal())
        # ... and the guard is needed: the uncentred Gram misses the 1e-6 (1e8: entirely).
        wrong = cf_pca.pca_covariance_eigh(X, centring="gram").explained_variance
        assert not np.allclose(np.asarray(wrong), ref.explained_variance_, rtol=1e-6)


@pytest.mark.parametrize(
    "X",
    [
        decaying_spectrum(n=2000),
        IRIS,
        3.0 + np.random.default_rng(1).normal(size=(5000, 20)) * 10.0 * 0.8 ** np.arange(20),
    ],
    ids=["decaying", "iris", "benchmark-like"],
)
def test_shifted_gram_fast_path_matches_exact_centring(X):
    n = X.shape[0]
    with jax.enable_x64(True):
        mean, gram = (np.asarray(a) for a in cf_pca.scatter_about_mean(X, method="gram"))
        _, exact = (np.asarray(a) for a in cf_pca.scatter_about_mean(X, method="exact"))
        _, auto = (np.asarray(a) for a in cf_pca.scatter_about_mean(X))
        fast_fit = cf_pca.pca_covariance_eigh(X, centring="gram")
        exact_fit = cf_pca.pca_covariance_eigh(X, centring="exact")
        assert bool(cf_pca.shifted_gram_is_safe(n, mean, gram.diagonal()))  # the fast path
    assert cf_pca.shifted_gram_is_safe(n, mean, np.diag(gram))  # NumPy arrays too (host)
    scale = np.sqrt(np.outer(np.diag(exact), np.diag(exact)))
    assert_allclose(gram / scale, exact / scale, atol=1e-10)
    assert_allclose(auto, gram, rtol=0, atol=0)
    host_mean, host = scatter_about_mean(X)
    assert_allclose(host_mean, mean, rtol=1e-13)
    assert_allclose(host / scale, exact / scale, atol=1e-10)
    # Eigenvalues to 1e-10 of the largest (the small ones of an ill-conditioned scatter
    # carry absolute round-off ~eps * largest on either path); the top eigenvectors,
    # which are well separated, to 1e-10.
    reference = np.asarray(exact_fit.explained_variance)
    tol = dict(rtol=1e-10, atol=1e-10 * reference[0])
    top = 3
    assert_allclose(np.asarray(fast_fit.explained_variance), reference, **tol)
    assert_allclose(
        np.asarray(fast_fit.components)[:top], np.asarray(exact_fit.components)[:top], atol=1e-10
    )
    ours = latentlab.PCA(svd_solver="covariance_eigh").fit(X)  # host path, fast branch
    assert_allclose(ours.explained_variance_, reference, **tol)
    assert_allclose(ours.components_[:top], np.asarray(exact_fit.components)[:top], atol=1e-10)


def test_shifted_gram_guard_is_stricter_in_float32():
    def safe(X):
        mean = X.mean(axis=0)
        return cf_pca.shifted_gram_is_safe(X.shape[0], mean, np.diag(X.T @ X) - len(X) * mean**2)

    assert safe(IRIS)  # means a few times the spreads: fine in float64 ...
    assert not safe(IRIS.astype(np.float32))  # ... not in float32
    assert safe((IRIS - IRIS.mean(axis=0)).astype(np.float32))  # centred data pass
    assert not safe(IRIS + np.array([0.0, 0.0, 0.0, 1e3]))  # one bad column is enough


def test_host_scatter_exact_fallback_handles_ragged_blocks():
    X = huge_mean_data(n=1003)
    mean, scatter = scatter_about_mean(X, block=100)  # 11 blocks, last 3 rows
    Xc = X - X.mean(axis=0)
    assert_allclose(mean, X.mean(axis=0), rtol=1e-15)
    assert_allclose(scatter, Xc.T @ Xc, rtol=1e-10, atol=1e-10 * np.abs(Xc.T @ Xc).max())


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
        (IRIS, {"n_components": -1}, "n_components"),
        (IRIS, {"n_components": 5}, "n_components"),
        (IRIS, {"n_components": 1.5}, "n_components"),
        (IRIS, {"n_components": -0.2}, "n_components"),
        (IRIS, {"n_components": 0.9, "svd_solver": "randomized"}, "fraction"),
        # (None with arpack is min(n, d) - 1, as scikit-learn; the bound itself is checked)
        (IRIS, {"n_components": 4, "svd_solver": "arpack"}, "svd_solver"),
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
    from latentlab import _shapes

    quick = latentlab.PCA(n_components=2, svd_solver="full").fit(IRIS)
    monkeypatch.setattr(_shapes, "QUICK_COMPILE_MAX_WORK", -1)  # every call optimised
    optimised = latentlab.PCA(n_components=2, svd_solver="full").fit(IRIS)
    assert_allclose(optimised.components_, quick.components_, atol=1e-13)
    assert_allclose(optimised.transform(IRIS[:9]), quick.transform(IRIS[:9]), atol=1e-12)


def test_randomized_explained_variance_is_the_variance_of_its_projections():
    # a past bug: B's singular values (3.11803) were reported where the returned
    # axes carry 3.11822; now the Rayleigh-Ritz values of the axes themselves
    X = np.random.RandomState(0).randn(100, 80)
    pca = latentlab.PCA(5, svd_solver="randomized", random_state=0)
    Z = pca.fit_transform(X)
    np.testing.assert_allclose(pca.explained_variance_, Z.var(axis=0, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(pca.singular_values_**2 / 99, pca.explained_variance_, rtol=1e-12)
    assert np.all(np.diff(pca.explained_variance_) <= 0)
    # a lower bound of the exact (full SVD) eigenvalues, as Ritz values are
    exact = latentlab.PCA(5, svd_solver="full").fit(X).explained_variance_
    assert np.all(pca.explained_variance_ <= exact * (1 + 1e-12))


def _planted_rank_3(n=300, d=12, seed=0):
    rng = np.random.default_rng(seed)
    return 2 * rng.normal(size=(n, 3)) @ rng.normal(size=(3, d)) + 0.5 * rng.normal(size=(n, d))


@pytest.mark.parametrize("n_components", [1, 2, 4])
def test_get_covariance_and_precision_match_sklearn_and_score(n_components):
    # scikit-learn parity: get_precision (Woodbury), consistent with get_covariance and score
    from scipy.stats import multivariate_normal

    ours = latentlab.PCA(n_components=n_components).fit(IRIS)
    ref = decomposition.PCA(n_components=n_components).fit(IRIS)
    assert_allclose(ours.get_covariance(), ref.get_covariance(), rtol=1e-10, atol=1e-13)
    assert_allclose(ours.get_precision(), ref.get_precision(), rtol=1e-9, atol=1e-10)
    assert_allclose(ours.get_precision() @ ours.get_covariance(), np.eye(4), atol=1e-10)
    density = multivariate_normal(ours.mean_, np.linalg.inv(ours.get_precision()))
    assert_allclose(ours.score_samples(IRIS[:10]), density.logpdf(IRIS[:10]), rtol=1e-10)


def test_get_precision_of_a_singular_model_raises():
    # 3 samples in 4 dimensions, 3 components: nothing is discarded, so the noise
    # variance is 0 while a fourth direction exists
    pca = latentlab.PCA(n_components=3).fit(IRIS[:3])
    assert pca.noise_variance_ == 0.0
    with pytest.raises(ValueError, match="singular"):
        pca.get_precision()


@pytest.mark.parametrize("name", ["iris", "wine", "diabetes", "breast_cancer", "planted_rank_3"])
@pytest.mark.parametrize("solver", ["full", "covariance_eigh"])
def test_mle_number_of_components_matches_sklearn(name, solver):
    # n_components="mle" (Minka 2000), against scikit-learn's choice
    from sklearn import datasets

    X = _planted_rank_3() if name == "planted_rank_3" else getattr(datasets, f"load_{name}")().data
    ours = latentlab.PCA(n_components="mle", svd_solver=solver).fit(X)
    ref = decomposition.PCA(n_components="mle", svd_solver=solver).fit(X)
    assert ours.n_components_ == ref.n_components_
    # An eigenvalue of the covariance is computed to ~eps * its largest eigenvalue (the
    # eigensolver's backward error), so small ones are compared to that absolute
    # accuracy: breast_cancer's eigenvalues span 4.4e5 to 1e-5, and with scikit-learn
    # 1.9 / NumPy 2.5 the two solvers' round-off differs by 1.1e-10 (2.4e-16 of the
    # largest; 1.4e-8 relative to a small one).
    atol = 100 * np.finfo(float).eps * ref.explained_variance_.max()
    assert_allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-9, atol=atol)
    assert_allclose(ours.noise_variance_, ref.noise_variance_, rtol=1e-9)
    if name == "planted_rank_3":
        assert ours.n_components_ == 3


def test_mle_evidence_matches_a_direct_transcription_of_minka():
    # an independent, loop-by-loop transcription of Minka (2000) eq. (30) as scikit-learn
    # writes it, on a spectrum with known ranks
    from scipy.special import gammaln

    from latentlab.closed_form.pca_rank import laplace_evidence

    spectrum = np.array([9.0, 4.0, 2.5, 1.0, 0.9, 0.8, 0.75])
    n, d = 50, len(spectrum)
    for rank in range(1, d):
        pu = -rank * np.log(2.0)
        for i in range(1, rank + 1):
            pu += gammaln((d - i + 1) / 2.0) - np.log(np.pi) * (d - i + 1) / 2.0
        pl = -np.sum(np.log(spectrum[:rank])) * n / 2.0
        v = np.sum(spectrum[rank:]) / (d - rank)
        pv = -np.log(v) * n * (d - rank) / 2.0
        m = d * rank - rank * (rank + 1.0) / 2.0
        pp = np.log(2.0 * np.pi) * (m + rank) / 2.0
        filled = np.r_[spectrum[:rank], [v] * (d - rank)]
        pa = 0.0
        for i in range(rank):
            for j in range(i + 1, d):
                pa += np.log((spectrum[i] - spectrum[j]) * (1 / filled[j] - 1 / filled[i]))
                pa += np.log(n)
        expected = pu + pl + pv + pp - pa / 2.0 - rank * np.log(n) / 2.0
        assert_allclose(laplace_evidence(spectrum, rank, n), expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("X", "params", "match"),
    [
        (IRIS[:3], {"n_components": "mle"}, "n_samples >= n_features"),
        (IRIS, {"n_components": "mle", "svd_solver": "randomized"}, "full spectrum"),
        (IRIS, {"n_components": "auto"}, "n_components"),
    ],
)
def test_mle_bad_settings_raise(X, params, match):
    with pytest.raises(ValueError, match=match):
        latentlab.PCA(**params).fit(X)


def test_arpack_solver_matches_sklearn():
    # scikit-learn parity: svd_solver="arpack" (block Lanczos on the scatter operator)
    rng = np.random.default_rng(0)
    X = 5 + rng.normal(size=(500, 60)) * 0.9 ** np.arange(60)
    ours = latentlab.PCA(n_components=3, svd_solver="arpack", random_state=0).fit(X)
    assert ours.svd_solver_ == "arpack"
    ref = decomposition.PCA(n_components=3, svd_solver="arpack", random_state=0).fit(X)
    exact = decomposition.PCA(n_components=3, svd_solver="full").fit(X)
    for name in ("explained_variance_", "explained_variance_ratio_", "singular_values_"):
        assert_allclose(getattr(ours, name), getattr(ref, name), rtol=1e-10)
        assert_allclose(getattr(ours, name), getattr(exact, name), rtol=1e-10)
    assert_allclose(ours.noise_variance_, ref.noise_variance_, rtol=1e-10)
    assert_allclose(ours.components_, exact.components_, atol=1e-9)  # same sign rule
    assert_allclose(ours.transform(X[:20]), exact.transform(X[:20]), atol=1e-9)
    assert_allclose(ours.score(X), ref.score(X), rtol=1e-10)


def test_arpack_on_few_features_is_exact_and_checks_n_components():
    ours = latentlab.PCA(n_components=2, svd_solver="arpack").fit(IRIS)
    assert ours.svd_solver_ == "full"  # 4 features: too few for a Krylov basis
    assert_allclose(ours.explained_variance_ratio_, IRIS_RATIO, atol=5e-9)
    with pytest.raises(ValueError, match="strictly less"):
        latentlab.PCA(n_components=4, svd_solver="arpack").fit(IRIS)
    with pytest.raises(ValueError, match="full spectrum"):
        latentlab.PCA(n_components="mle", svd_solver="arpack").fit(IRIS)


@pytest.mark.parametrize("data", [IRIS, IRIS.T], ids=["tall", "wide"])
def test_arpack_with_n_components_none_keeps_one_fewer_like_sklearn(data):
    # scikit-learn parity (scikit-learn's test_n_components_none): arpack cannot return all
    # min(n, d) components, so None means min(n, d) - 1 there; latentlab used to raise.
    ours = latentlab.PCA(svd_solver="arpack").fit(data)
    ref = decomposition.PCA(svd_solver="arpack", random_state=0).fit(data)
    assert ours.n_components_ == ref.n_components_ == min(data.shape) - 1
    assert_allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-10)
    assert latentlab.PCA().fit(data).n_components_ == min(data.shape)  # other solvers


@pytest.mark.parametrize("copy", [True, False])
def test_copy_is_accepted_and_never_changes_the_input(copy):
    # scikit-learn's ``copy`` parameter; whatever its value, X stays unchanged
    X = IRIS.copy()
    ours = latentlab.PCA(n_components=2, copy=copy, whiten=True)
    Z = ours.fit_transform(X)
    np.testing.assert_array_equal(X, IRIS)
    ref = decomposition.PCA(n_components=2, copy=copy, whiten=True).fit_transform(IRIS.copy())
    assert_allclose(Z, ref, atol=1e-9)
    assert ours.get_params()["copy"] is copy


def test_zero_components_is_the_isotropic_gaussian():
    """PCA(0): every direction is noise. Its score is the isotropic Gaussian's with the
    ddof=1 variance averaged over features (scikit-learn's convention), and so is
    scikit-learn's PCA(0)'s."""
    from scipy.stats import multivariate_normal
    from sklearn.decomposition import PCA as SkPCA

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4)) * [1.0, 2.0, 3.0, 4.0] + 5.0
    variance = X.var(axis=0, ddof=1).mean()
    exact = multivariate_normal(X.mean(axis=0), variance * np.eye(4)).logpdf(X).mean()
    for solver in ("full", "covariance_eigh", "auto"):
        model = latentlab.PCA(0, svd_solver=solver).fit(X)
        assert model.components_.shape == (0, 4)
        assert model.transform(X).shape == (50, 0)
        assert model.noise_variance_ == pytest.approx(variance, rel=1e-12)
        assert model.score(X) == pytest.approx(exact, rel=1e-12)
        assert model.score(X) == pytest.approx(SkPCA(0, svd_solver="full").fit(X).score(X))
        np.testing.assert_allclose(model.get_precision(), np.eye(4) / variance, rtol=1e-12)
    with pytest.raises(ValueError, match="n_components=0 needs the whole spectrum"):
        latentlab.PCA(0, svd_solver="randomized").fit(X)


@pytest.mark.parametrize("solver", ["full", "covariance_eigh", "randomized", "arpack"])
def test_float32_data_give_float32_attributes_and_outputs(solver):
    """As scikit-learn: float32 in, float32 out; computed in float64 and rounded once,
    so each equals the float64 fit's to float32's rounding."""
    X = np.random.default_rng(0).normal(size=(200, 6)) * [1, 2, 3, 4, 5, 6]
    fit32 = latentlab.PCA(3, svd_solver=solver, random_state=0).fit(X.astype(np.float32))
    fit64 = latentlab.PCA(3, svd_solver=solver, random_state=0).fit(X)
    for name in ("mean_", "components_", "singular_values_", "explained_variance_"):
        value = getattr(fit32, name)
        assert value.dtype == np.float32, name
        np.testing.assert_allclose(value, getattr(fit64, name), rtol=2e-7, atol=2e-7)
    Z = fit32.transform(X.astype(np.float32))
    assert Z.dtype == np.float32 and fit32.fit_transform(X.astype(np.float32)).dtype == np.float32
    assert fit32.inverse_transform(Z).dtype == np.float32
    np.testing.assert_allclose(Z, fit64.transform(X), rtol=1e-5, atol=1e-5)
    # integers are data in float64, as scikit-learn's
    ints = latentlab.PCA(3, svd_solver=solver, random_state=0).fit(np.rint(X * 10).astype(np.int32))
    assert ints.components_.dtype == np.float64
