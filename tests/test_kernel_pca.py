"""Kernel PCA against linear PCA and scikit-learn's KernelPCA, in float64."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn import decomposition
from sklearn.datasets import load_digits, load_iris
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

import latentlab

IRIS = load_iris().data
NEW = IRIS[::10] + np.linspace(-0.2, 0.3, 4)  # out-of-sample points

# check_estimator: every check passes for KernelPCA (none expected to fail).
KERNEL_PCA_EXPECTED_FAILED_CHECKS: dict[str, str] = {}


def align_signs(A, B):
    """Flip the columns of A to best match B (eigenvectors are defined up to sign)."""
    return A * np.sign(np.sum(A * B, axis=0))


def relative_error(A, B):
    return np.max(np.abs(A - B)) / np.max(np.abs(B))


def test_linear_kernel_eigenvalues_are_pca_squared_singular_values():
    kpca = latentlab.KernelPCA(n_components=4, kernel="linear").fit(IRIS)
    pca = latentlab.PCA(n_components=4).fit(IRIS)
    assert_allclose(kpca.eigenvalues_, pca.singular_values_**2, rtol=1e-10)


def test_linear_kernel_projections_equal_pca_up_to_sign():
    kpca = latentlab.KernelPCA(n_components=3, kernel="linear")
    pca = latentlab.PCA(n_components=3).fit(IRIS)
    train = kpca.fit_transform(IRIS)
    assert_allclose(align_signs(train, pca.transform(IRIS)), pca.transform(IRIS), atol=1e-9)
    new = kpca.transform(NEW)
    assert_allclose(align_signs(new, pca.transform(NEW)), pca.transform(NEW), atol=1e-9)


def test_transform_of_training_data_equals_fit_transform():
    # Guards the test-kernel centring: the raw kernel vector would shift every point.
    kpca = latentlab.KernelPCA(n_components=3, kernel="rbf", gamma=0.4)
    assert_allclose(kpca.fit_transform(IRIS), kpca.transform(IRIS), atol=1e-10)


def test_rbf_matches_sklearn_eigenvalues_projections_and_preimages():
    settings = dict(n_components=4, kernel="rbf", gamma=0.3, fit_inverse_transform=True, alpha=0.1)
    ours = latentlab.KernelPCA(**settings).fit(IRIS)
    ref = decomposition.KernelPCA(**settings, eigen_solver="dense").fit(IRIS)
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    Z, Z_ref = ours.transform(NEW), ref.transform(NEW)
    assert relative_error(align_signs(Z, Z_ref), Z_ref) < 1e-8
    assert_allclose(ours.eigenvectors_, ref.eigenvectors_, atol=1e-8)  # same sign rule
    assert relative_error(ours.inverse_transform(Z), ref.inverse_transform(Z_ref)) < 1e-8


@pytest.mark.parametrize(
    ("kernel", "params"),
    [
        ("poly", dict(gamma=0.2, degree=2, coef0=1.0)),
        ("sigmoid", dict(gamma=0.01, coef0=0.5)),
        ("cosine", {}),
    ],
)
def test_other_kernels_match_sklearn(kernel, params):
    ours = latentlab.KernelPCA(n_components=2, kernel=kernel, **params).fit(IRIS)
    ref = decomposition.KernelPCA(n_components=2, kernel=kernel, eigen_solver="dense", **params)
    ref.fit(IRIS)
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    Z_ref = ref.transform(NEW)
    assert relative_error(align_signs(ours.transform(NEW), Z_ref), Z_ref) < 1e-8


def test_callable_kernel_equals_builtin():
    def rbf(A, B):
        sq = jnp.sum(A**2, 1)[:, None] + jnp.sum(B**2, 1)[None, :] - 2 * A @ B.T
        return jnp.exp(-0.3 * sq)

    ours = latentlab.KernelPCA(n_components=2, kernel=rbf).fit(IRIS)
    builtin = latentlab.KernelPCA(n_components=2, kernel="rbf", gamma=0.3).fit(IRIS)
    assert_allclose(ours.eigenvalues_, builtin.eigenvalues_, rtol=1e-10)
    assert_allclose(ours.transform(NEW), builtin.transform(NEW), atol=1e-10)


def test_numpy_kernel_of_two_rows_equals_scikit_learns():
    """A callable of two rows written in NumPy (scikit-learn's form) is evaluated on
    the host, pair by pair, and gives scikit-learn's fit and projections."""

    def histogram(x, y):
        return np.minimum(x, y).sum()

    X = np.abs(IRIS)
    ours = latentlab.KernelPCA(n_components=3, kernel=histogram).fit(X)
    ref = decomposition.KernelPCA(n_components=3, kernel=histogram, eigen_solver="dense").fit(X)
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    Z_ref = ref.transform(np.abs(NEW))
    assert relative_error(align_signs(ours.transform(np.abs(NEW)), Z_ref), Z_ref) < 1e-10
    with pytest.raises(ValueError, match="fit_inverse_transform"):
        latentlab.KernelPCA(2, kernel=histogram, fit_inverse_transform=True).fit(X)
    # a callable that is neither form is still refused by name
    with pytest.raises(ValueError, match="kernel callable"):
        latentlab.KernelPCA(2, kernel=lambda x, y: np.ones(3)).fit(X)


def test_randomized_eigensolver_agrees_with_dense_on_decaying_spectrum():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))  # a smooth RBF kernel: geometric eigenvalue decay
    dense = latentlab.KernelPCA(n_components=5, kernel="rbf", gamma=0.1, eigen_solver="dense")
    fast = latentlab.KernelPCA(
        n_components=5, kernel="rbf", gamma=0.1, eigen_solver="randomized", random_state=0
    )
    dense.fit(X), fast.fit(X)
    assert_allclose(fast.eigenvalues_, dense.eigenvalues_, rtol=1e-10)
    assert_allclose(fast.eigenvectors_, dense.eigenvectors_, atol=1e-7)


def test_components_beyond_kernel_rank_are_dropped_with_remove_zero_eig():
    kpca = latentlab.KernelPCA(n_components=6, kernel="linear", remove_zero_eig=True).fit(IRIS)
    assert kpca.n_components_ == 4 and kpca.transform(NEW).shape == (len(NEW), 4)
    assert np.all(kpca.eigenvalues_ > 0)


@pytest.mark.parametrize("solver", ["dense", "arpack"])
def test_zero_eigenvalue_components_are_kept_at_zero_by_default_as_sklearn(solver):
    # remove_zero_eig=False (scikit-learn's default) keeps the components beyond
    # the rank, with eigenvalue exactly 0 and projections 0 (no division by zero)
    settings = dict(n_components=6, kernel="linear", eigen_solver=solver)
    ours = latentlab.KernelPCA(**settings, random_state=0).fit(IRIS)
    ref = decomposition.KernelPCA(**settings, random_state=0).fit(IRIS)
    assert ours.n_components_ == 6
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10, atol=0)
    assert np.all(ours.eigenvalues_[4:] == 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        Z, Z_fit = ours.transform(NEW), ours.fit_transform(IRIS)
    assert np.all(Z[:, 4:] == 0) and np.all(Z_fit[:, 4:] == 0)
    Z_ref = ref.transform(NEW)
    assert_allclose(align_signs(Z[:, :4], Z_ref[:, :4]), Z_ref[:, :4], atol=1e-10)
    assert_allclose(Z_fit[:, :4], ours.transform(IRIS)[:, :4], atol=1e-10)


def test_n_components_none_and_remove_zero_eig_drop_a_zero_kernel_as_sklearn():
    X = np.array([[1 - 1e-30, 1], [1, 1], [1, 1 - 1e-20]])  # centred kernel exactly 0
    for settings, width in [
        ({}, 0),
        ({"n_components": 2}, 2),
        (dict(n_components=2, remove_zero_eig=True), 0),
    ]:
        ref = decomposition.KernelPCA(**settings).fit_transform(X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "numerically zero"
            ours = latentlab.KernelPCA(**settings).fit_transform(X)
        assert ours.shape == ref.shape == (3, width)
        assert np.all(ours == 0)


def test_copy_x_false_keeps_a_reference_and_true_a_copy():
    X = IRIS.copy()
    copied = latentlab.KernelPCA(n_components=2, kernel="rbf").fit(X)
    shared = latentlab.KernelPCA(n_components=2, kernel="rbf", copy_X=False).fit(X)
    assert copied.X_fit_ is not X and shared.X_fit_ is X  # as scikit-learn's copy_X
    Z = copied.transform(NEW)
    X[:] = 0.0
    assert_allclose(copied.transform(NEW), Z, rtol=1e-12)


def test_pandas_output_and_feature_names():
    kpca = latentlab.KernelPCA(n_components=2, kernel="rbf").set_output(transform="pandas")
    out = kpca.fit(pd.DataFrame(IRIS)).transform(pd.DataFrame(NEW))
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["kernelpca0", "kernelpca1"]
    assert list(kpca.get_feature_names_out()) == ["kernelpca0", "kernelpca1"]


def test_returns_numpy_float64():
    kpca = latentlab.KernelPCA(n_components=2, kernel="rbf").fit(IRIS)
    for value in (kpca.eigenvalues_, kpca.eigenvectors_, kpca.transform(NEW)):
        assert type(value) is np.ndarray and value.dtype == np.float64


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.KernelPCA(), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(KERNEL_PCA_EXPECTED_FAILED_CHECKS), failed


def _wrong_shape(A, B):
    return A @ A.T


def _not_traceable(A, B):
    return np.asarray(A) @ np.asarray(B).T


@pytest.mark.parametrize(
    ("X", "params", "match"),
    [
        (IRIS, {"kernel": "laplacian"}, "Unknown kernel"),
        (IRIS, {"kernel": _wrong_shape}, "shape"),
        (IRIS, {"kernel": _not_traceable}, "traced"),
        (IRIS, {"n_components": 0}, "n_components"),
        (IRIS, {"n_components": len(IRIS) + 1}, "n_components"),
        (IRIS, {"gamma": -1.0, "kernel": "rbf"}, "gamma"),
        (IRIS, {"alpha": -1.0}, "alpha"),
        (IRIS, {"eigen_solver": "lobpcg"}, "eigen_solver"),
        (np.r_[IRIS[:-1], [[np.nan, 1, 2, 3]]], {}, "NaN"),
        (np.r_[IRIS[:-1], [[1, 2, np.inf, 3]]], {}, "infinity"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(X, params, match):
    with pytest.raises(ValueError, match=match):
        latentlab.KernelPCA(**params).fit(X)


def test_inverse_transform_needs_fit_inverse_transform():
    kpca = latentlab.KernelPCA(n_components=2).fit(IRIS)
    with pytest.raises(NotFittedError, match="fit_inverse_transform"):
        kpca.inverse_transform(np.zeros((1, 2)))


def test_global_jax_config_untouched():
    before = jax.config.jax_enable_x64
    latentlab.KernelPCA(n_components=2).fit(IRIS)
    assert jax.config.jax_enable_x64 == before


def test_quick_compile_path_matches_optimised_path(monkeypatch):
    from latentlab import _shapes

    settings = dict(n_components=2, kernel="rbf", gamma=0.3, fit_inverse_transform=True)
    quick = latentlab.KernelPCA(**settings).fit(IRIS)
    monkeypatch.setattr(_shapes, "QUICK_COMPILE_MAX_WORK", -1)  # every call optimised
    optimised = latentlab.KernelPCA(**settings).fit(IRIS)
    assert_allclose(optimised.eigenvalues_, quick.eigenvalues_, rtol=1e-12)
    assert_allclose(optimised.transform(NEW), quick.transform(NEW), atol=1e-12)
    Z = quick.transform(NEW)
    assert_allclose(optimised.inverse_transform(Z), quick.inverse_transform(Z), atol=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize("dtype, atol", [("float64", 1e-6), ("float32", 2e-5)])
def test_shift_invariant_kernels_ignore_where_the_data_sit(kernel, dtype, atol):
    # A shift of 1e8 used to leave nothing of the spread in ||a||^2 + ||b||^2 - 2a.b
    # (float64: projections off by 0.7; float32: "every sample looks the same").  The
    # oracle is scikit-learn on the unshifted data; the shift itself rounds iris by
    # up to 7e-9.
    settings = dict(n_components=3, kernel=kernel, gamma=0.3)
    ref = decomposition.KernelPCA(**settings, eigen_solver="dense").fit(IRIS)
    shift = 1e8
    ours = latentlab.KernelPCA(**settings, dtype=dtype).fit(IRIS + shift)
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=atol)
    Z, Z_ref = ours.transform(NEW + shift), ref.transform(NEW)
    assert_allclose(align_signs(Z, Z_ref), Z_ref, atol=atol * np.abs(Z_ref).max())
    assert_allclose(ours.X_offset_, IRIS.mean(axis=0) + shift)


def test_rounding_error_eigenvalue_is_not_a_component():
    # a past bug: centring cancels kernel entries of ~3000 (poly kernel), leaving an
    # "eigenvalue" of 7.8e-13 whose exact value is ~1e-30; scikit-learn returns 0
    X = np.array([[5.0, 1.0], [5.0 + 1e-8, 1e-8], [5.0 + 1e-8, 0.0]])
    kpca = latentlab.KernelPCA(n_components=2, kernel="poly", remove_zero_eig=True).fit(X)
    np.testing.assert_allclose(kpca.eigenvalues_, [189.08333151], rtol=1e-8)
    assert kpca.n_components_ == 1
    kept = latentlab.KernelPCA(n_components=2, kernel="poly").fit(X)  # remove_zero_eig=False
    ref = decomposition.KernelPCA(n_components=2, kernel="poly").fit(X)
    assert kept.eigenvalues_[1] == ref.eigenvalues_[1] == 0.0


def test_precomputed_kernel_matches_sklearn_and_the_built_in_kernel():
    # kernel="precomputed" takes K(X, X) in fit and K(X_new, X_fit) in transform
    from sklearn.metrics.pairwise import polynomial_kernel

    settings = dict(gamma=0.2, degree=2, coef0=1.0)
    K_fit, K_new = polynomial_kernel(IRIS, **settings), polynomial_kernel(NEW, IRIS, **settings)
    ours = latentlab.KernelPCA(n_components=3, kernel="precomputed")
    Z_fit = ours.fit_transform(K_fit)
    ref = decomposition.KernelPCA(n_components=3, kernel="precomputed", eigen_solver="dense")
    Z_fit_ref = ref.fit_transform(K_fit)
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    assert_allclose(align_signs(Z_fit, Z_fit_ref), Z_fit_ref, atol=1e-9)
    Z, Z_ref = ours.transform(K_new), ref.transform(K_new)
    assert relative_error(align_signs(Z, Z_ref), Z_ref) < 1e-10
    assert_allclose(ours.fit(K_fit).transform(K_new), Z, atol=1e-12)  # fit, then transform
    builtin = latentlab.KernelPCA(n_components=3, kernel="poly", **settings).fit(IRIS)
    assert_allclose(Z, builtin.transform(NEW), atol=1e-9)
    assert ours.n_features_in_ == len(IRIS)


def test_precomputed_kernel_refuses_pre_images_and_bad_shapes():
    K = IRIS @ IRIS.T
    with pytest.raises(ValueError, match="precomputed"):
        latentlab.KernelPCA(kernel="precomputed", fit_inverse_transform=True).fit(K)
    kpca = latentlab.KernelPCA(n_components=2, kernel="precomputed").fit(K)
    with pytest.raises(NotFittedError, match="precomputed"):
        kpca.inverse_transform(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="square"):
        latentlab.KernelPCA(kernel="precomputed").fit(IRIS)
    with pytest.raises(ValueError, match="features"):
        kpca.transform(K[:, :10])  # K(X_new, X_fit) needs one column per training point
    with pytest.raises(ValueError, match="Unknown kernel"):
        latentlab.KernelCCA(kernel="precomputed", reg=0.1).fit(IRIS, IRIS)


def test_precomputed_kernel_model_saves_and_loads(tmp_path):
    K = IRIS @ IRIS.T
    kpca = latentlab.KernelPCA(n_components=2, kernel="precomputed").fit(K)
    kpca.save(tmp_path / "kpca.npz")
    loaded = latentlab.load(tmp_path / "kpca.npz")
    assert_allclose(loaded.transform(NEW @ IRIS.T), kpca.transform(NEW @ IRIS.T), rtol=1e-12)


# kernel PCA speed: "auto" takes the block Lanczos solver for n > 500
LANCZOS_X = np.random.default_rng(1).normal(size=(600, 5))


@pytest.mark.parametrize(
    ("X", "gamma"),
    [
        (LANCZOS_X, 0.2),  # a decaying spectrum
        (load_digits().data[:600], 1 / 64),  # flat: lambda_11 / lambda_10 = 0.96
    ],
    ids=["decaying", "flat"],
)
def test_lanczos_is_the_default_for_large_n_and_matches_sklearn_dense(X, gamma):
    ours = latentlab.KernelPCA(n_components=10, kernel="rbf", gamma=gamma, random_state=0)
    ours.fit(X)
    assert ours.solver_ == "lanczos"  # converged: no fallback to dense eigh
    ref = decomposition.KernelPCA(n_components=10, kernel="rbf", gamma=gamma)
    ref.fit(X)  # scikit-learn's default for n_components >= 10: dense eigh
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    Z, Z_ref = ours.transform(X[:50]), ref.transform(X[:50])
    assert relative_error(align_signs(Z, Z_ref), Z_ref) < 1e-7


def test_lanczos_on_a_kernel_of_lower_rank_than_asked():
    # the linear kernel of 600 x 5 data has rank 5: the Krylov space runs out after one
    # block, and the solver must still return the exact spectrum (PCA's)
    kpca = latentlab.KernelPCA(n_components=10, eigen_solver="arpack", remove_zero_eig=True)
    kpca.fit(LANCZOS_X)
    assert kpca.solver_ == "lanczos" and kpca.n_components_ == 5
    pca = latentlab.PCA(n_components=5).fit(LANCZOS_X)
    assert_allclose(kpca.eigenvalues_, pca.singular_values_**2, rtol=1e-10)


def test_lanczos_falls_back_to_dense_eigh_when_not_converged(monkeypatch):
    from latentlab.estimators import kernel_pca

    real = kernel_pca.lanczos_settings

    def one_product(n, n_components, dtype):
        block, blocks, _, tol = real(n, n_components, dtype)
        return block, blocks, 1, tol

    monkeypatch.setattr(kernel_pca, "lanczos_settings", one_product)
    X = load_digits().data[:600]
    kpca = latentlab.KernelPCA(n_components=10, kernel="rbf", random_state=0).fit(X)
    assert kpca.solver_ == "dense"
    ref = decomposition.KernelPCA(n_components=10, kernel="rbf", eigen_solver="dense").fit(X)
    assert_allclose(kpca.eigenvalues_, ref.eigenvalues_, rtol=1e-10)


# A centred, non-PSD Gram matrix (scikit-learn's test_precomputed_kernel_not_psd): its
# eigenvalues are [52.72, 7.65, 7.65, 5.02, 0, -0, -6.13, -15.11].
NOT_PSD = np.array(
    [
        [4.48, -1.0, 8.07, 2.33, 2.33, 2.33, -5.76, -12.78],
        [-1.0, -6.48, 4.5, -1.24, -1.24, -1.24, -0.81, 7.49],
        [8.07, 4.5, 15.48, 2.09, 2.09, 2.09, -11.1, -23.23],
        [2.33, -1.24, 2.09, 4.0, -3.65, -3.65, 1.02, -0.9],
        [2.33, -1.24, 2.09, -3.65, 4.0, -3.65, 1.02, -0.9],
        [2.33, -1.24, 2.09, -3.65, -3.65, 4.0, 1.02, -0.9],
        [-5.76, -0.81, -11.1, 1.02, 1.02, 1.02, 4.86, 9.75],
        [-12.78, 7.49, -23.23, -0.9, -0.9, -0.9, 9.75, 21.46],
    ]
)


def test_significantly_negative_kernel_eigenvalue_is_rejected_like_sklearn():
    # Asking for 7 components reaches the eigenvalue -6.13: scikit-learn raises, and
    # latentlab used to drop it silently with the zero ones (n_components_=5).
    with pytest.raises(ValueError, match="significant negative eigenvalues"):
        decomposition.KernelPCA(n_components=7, kernel="precomputed").fit(NOT_PSD)
    with pytest.raises(ValueError, match="significant negative eigenvalues"):
        latentlab.KernelPCA(n_components=7, kernel="precomputed").fit(NOT_PSD)
    # Two components stay within the positive part: same eigenvalues as scikit-learn.
    ours = latentlab.KernelPCA(n_components=2, kernel="precomputed").fit(NOT_PSD)
    ref = decomposition.KernelPCA(n_components=2, kernel="precomputed").fit(NOT_PSD)
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    H = np.eye(8) - 1 / 8  # the matrix is centred only up to its printed digits
    assert_allclose(ours.eigenvalues_, np.linalg.eigvalsh(H @ NOT_PSD @ H)[::-1][:2], rtol=1e-10)


def test_precomputed_kernel_cross_validates_like_sklearn():
    # scikit-learn's test_gridsearch_pipeline_precomputed: a precomputed kernel is
    # "pairwise", so cross-validation must slice its columns too (test folds are
    # (n_test, n_train)); latentlab used to fail every fold on a non-square kernel.
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics.pairwise import rbf_kernel
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline

    X = load_iris().data[::2]
    y = X[:, 0] * X[:, 3]
    K = rbf_kernel(X[:, :3], gamma=0.5)
    scores = {}
    for name, cls in [("ours", latentlab.KernelPCA), ("sklearn", decomposition.KernelPCA)]:
        model = make_pipeline(cls(n_components=3, kernel="precomputed"), LinearRegression())
        scores[name] = cross_val_score(model, K, y, cv=3, error_score="raise")
    assert_allclose(scores["ours"], scores["sklearn"], rtol=1e-8)


def test_non_symmetric_precomputed_kernel_with_symmetric_centred_form_matches_sklearn():
    # scikit-learn's test_kernel_pca_precomputed_non_symmetric: adding a row-constant
    # and a column-constant matrix changes K but not its centred form H K H, so the fit
    # must not change; latentlab centred such a K with its column means only.
    from sklearn.metrics.pairwise import rbf_kernel

    rng = np.random.default_rng(3)
    S = rbf_kernel(rng.normal(size=(30, 3)), gamma=0.3)
    K = S + rng.normal(size=(30, 1)) + rng.normal(size=(1, 30))
    ours = latentlab.KernelPCA(n_components=3, kernel="precomputed").fit(K)
    ref = decomposition.KernelPCA(n_components=3, kernel="precomputed").fit(K)
    on_S = latentlab.KernelPCA(n_components=3, kernel="precomputed").fit(S)
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    assert_allclose(ours.eigenvalues_, on_S.eigenvalues_, rtol=1e-10)
    assert_allclose(np.abs(ours.eigenvectors_), np.abs(ref.eigenvectors_), atol=1e-10)
