"""Random projections: the Johnson-Lindenstrauss dimension, the distortion it promises,
and the law of the sparse matrix's entries."""

import warnings

import numpy as np
import pytest
from scipy import sparse
from scipy.stats import chi2
from sklearn.metrics import pairwise_distances
from sklearn.random_projection import johnson_lindenstrauss_min_dim as sk_jl_min_dim
from sklearn.utils.estimator_checks import check_estimator

import latentlab

RP_EXPECTED_FAILED_CHECKS: dict[str, str] = {}


def test_johnson_lindenstrauss_min_dim_matches_sklearn():
    n = np.array([1, 10, 1_000, 10_000, 1_000_000])
    for eps in (0.05, 0.1, 0.5, 0.99):
        np.testing.assert_array_equal(
            latentlab.johnson_lindenstrauss_min_dim(n, eps=eps), sk_jl_min_dim(n, eps=eps)
        )
    assert latentlab.johnson_lindenstrauss_min_dim(10_000, eps=0.1) == sk_jl_min_dim(
        10_000, eps=0.1
    )
    with pytest.raises(ValueError, match="eps"):
        latentlab.johnson_lindenstrauss_min_dim(100, eps=1.0)
    with pytest.raises(ValueError, match="n_samples"):
        latentlab.johnson_lindenstrauss_min_dim(0)


@pytest.mark.parametrize("cls", ["GaussianRandomProjection", "SparseRandomProjection"])
def test_distances_kept_within_eps_at_the_promised_dimension(cls):
    """Dasgupta & Gupta (2003): at k = johnson_lindenstrauss_min_dim(n, eps) each pair's
    squared distance leaves [1 - eps, 1 + eps] times its own with probability at most
    2 / n^2, so every pair is kept with probability at least 1 / n (union bound).
    Over 20 seeds and n = 50 points: the violations stay below the promised mean
    20 * C(n, 2) * 2 / n^2 (~20; about 1 seen), and at least the promised 1 / n of
    the seeds keep every pair (nearly all do)."""
    n, eps, seeds = 50, 0.5, 20
    k = latentlab.johnson_lindenstrauss_min_dim(n, eps=eps)
    X = np.random.default_rng(0).normal(size=(n, 2 * k))
    pairs = np.triu_indices(n, 1)
    original = pairwise_distances(X, squared=True)[pairs]
    violations, all_kept = 0, 0
    for seed in range(seeds):
        rp = getattr(latentlab, cls)(eps=eps, random_state=seed).fit(X)
        assert rp.n_components_ == k
        ratio = pairwise_distances(rp.transform(X), squared=True)[pairs] / original
        outside = int(np.sum((ratio <= 1 - eps) | (ratio >= 1 + eps)))
        violations += outside
        all_kept += outside == 0
    assert violations <= seeds * len(original) * 2 / n**2
    assert all_kept >= seeds / n


def test_sparse_entries_take_three_values_with_the_right_frequencies():
    k, d = 200, 400
    rp = latentlab.SparseRandomProjection(n_components=k, random_state=0).fit(np.zeros((5, d)))
    density = 1 / np.sqrt(d)
    assert rp.density_ == density
    value = np.sqrt(1 / (density * k))
    assert sparse.isspmatrix_csr(rp.components_) and rp.components_.has_canonical_format
    assert np.all(rp.components_.data != 0)  # only the non-zeros are stored
    R = rp.components_.toarray()
    values = np.unique(R)
    np.testing.assert_allclose(values, [-value, 0.0, value], rtol=1e-14)
    observed = np.array([(R < 0).sum(), (R == 0).sum(), (R > 0).sum()])
    expected = R.size * np.array([density / 2, 1 - density, density / 2])
    statistic = np.sum((observed - expected) ** 2 / expected)
    assert statistic < chi2.ppf(0.999, df=2), (observed, expected)
    # zero mean and variance 1/k per entry, as the projection needs
    np.testing.assert_allclose(np.mean(R**2) * k, 1.0, rtol=0.05)


def test_gaussian_entries_have_variance_one_over_k():
    k, d = 100, 500
    R = (
        latentlab.GaussianRandomProjection(n_components=k, random_state=0)
        .fit(np.zeros((3, d)))
        .components_
    )
    np.testing.assert_allclose(np.var(R) * k, 1.0, rtol=0.02)
    assert abs(np.mean(R)) * np.sqrt(R.size * k) < 4  # within 4 standard errors


@pytest.mark.parametrize("density", [0.05, 0.5])
def test_transform_is_the_product_with_components(density):
    X = np.random.default_rng(1).normal(size=(30, 300))
    rp = latentlab.SparseRandomProjection(n_components=20, density=density, random_state=0)
    Z = rp.fit_transform(X)
    np.testing.assert_allclose(Z, X @ rp.components_.toarray().T, atol=1e-12)
    assert Z.flags.writeable and Z.flags.owndata
    # sparse X: a sparse projection, or a dense one with dense_output
    Xs = sparse.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))
    expected = Xs.toarray() @ rp.components_.toarray().T
    out = rp.transform(Xs)
    assert sparse.issparse(out)
    np.testing.assert_allclose(out.toarray(), expected, atol=1e-12)
    dense = rp.set_params(dense_output=True).transform(Xs)
    assert isinstance(dense, np.ndarray)
    np.testing.assert_allclose(dense, expected, atol=1e-12)
    # fitting on sparse X draws the same matrix as on dense X of the same shape
    refit = latentlab.SparseRandomProjection(n_components=20, density=density, random_state=0)
    assert (refit.fit(Xs).components_ != rp.components_).nnz == 0


def test_same_seed_same_matrix():
    X = np.zeros((4, 50))
    a = latentlab.SparseRandomProjection(n_components=10, random_state=3).fit(X)
    b = latentlab.SparseRandomProjection(n_components=10, random_state=3).fit(X)
    np.testing.assert_array_equal(a.components_.toarray(), b.components_.toarray())


def test_inverse_transform_is_the_least_squares_preimage():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(10, 8)) @ rng.normal(size=(8, 40))  # rank 8 < k = 12
    rp = latentlab.GaussianRandomProjection(
        n_components=12, compute_inverse_components=True, random_state=0
    ).fit(X)
    assert rp.inverse_components_.shape == (40, 12)
    np.testing.assert_allclose(rp.inverse_components_, np.linalg.pinv(rp.components_))
    back = rp.inverse_transform(rp.transform(X))
    # the pre-image is the projection of X onto the row space of components_
    P = rp.components_.T @ np.linalg.pinv(rp.components_.T)
    np.testing.assert_allclose(back, X @ P, atol=1e-10)


@pytest.mark.parametrize(
    ("cls", "params", "match"),
    [
        ("GaussianRandomProjection", {"eps": 0.1}, "n_features=100"),
        ("GaussianRandomProjection", {"eps": 1.5}, "eps"),
        ("SparseRandomProjection", {"n_components": 5, "density": 0.0}, "density"),
        ("SparseRandomProjection", {"n_components": 0}, "n_components"),
    ],
)
def test_bad_settings_name_the_problem(cls, params, match):
    with pytest.raises(ValueError, match=match):
        getattr(latentlab, cls)(**params).fit(np.ones((20, 100)))


def test_nan_is_refused():
    X = np.ones((20, 100))
    X[3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        latentlab.SparseRandomProjection(n_components=5).fit(X)


@pytest.mark.parametrize("cls", ["GaussianRandomProjection", "SparseRandomProjection"])
def test_check_estimator(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(getattr(latentlab, cls)(n_components=3), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(RP_EXPECTED_FAILED_CHECKS), failed


def test_inverse_transform_takes_its_own_sparse_projection():

    X = sparse.random(30, 50, density=0.1, format="csr", random_state=1)
    rp = latentlab.SparseRandomProjection(n_components=10, random_state=0).fit(X)
    Z = rp.transform(X)
    assert sparse.issparse(Z)
    back = rp.inverse_transform(Z)
    # the least-squares pre-image of the dense projection (closed form: Z pinv(R)^T)
    R = rp.components_.toarray()
    np.testing.assert_allclose(back, Z.toarray() @ np.linalg.pinv(R).T, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cls", ["GaussianRandomProjection", "SparseRandomProjection"])
def test_auto_dimension_of_one_sample_is_refused(cls):
    # the Johnson-Lindenstrauss dimension of one point is 4 ln(1) / ... = 0
    with pytest.raises(ValueError, match="at least 2 samples"):
        getattr(latentlab, cls)().fit(np.ones((1, 30)))


@pytest.mark.parametrize("cls", ["GaussianRandomProjection", "SparseRandomProjection"])
def test_float32_input_keeps_float32(cls):
    X = np.random.default_rng(0).random((20, 400))
    rp64 = getattr(latentlab, cls)(n_components=30, random_state=0).fit(X)
    rp32 = getattr(latentlab, cls)(n_components=30, random_state=0).fit(X.astype(np.float32))
    Z32 = rp32.transform(X.astype(np.float32))
    assert rp32.components_.dtype == np.float32 and Z32.dtype == np.float32
    assert rp64.components_.dtype == np.float64 and rp64.transform(X).dtype == np.float64
    # the same matrix rounded once: the projections agree to float32's precision
    R32 = rp32.components_.toarray() if cls.startswith("Sparse") else rp32.components_
    R64 = rp64.components_.toarray() if cls.startswith("Sparse") else rp64.components_
    np.testing.assert_array_equal(R32, R64.astype(np.float32))
    np.testing.assert_allclose(Z32, rp64.transform(X), rtol=2e-6, atol=1e-6)


def test_gaussian_projection_of_sparse_x_equals_the_dense_product():
    X = sparse.random(40, 300, density=0.05, format="csr", random_state=3)
    rp = latentlab.GaussianRandomProjection(n_components=20, random_state=0).fit(X)
    Z = rp.transform(X)
    assert isinstance(Z, np.ndarray)
    np.testing.assert_allclose(Z, X.toarray() @ rp.components_.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(Z, rp.transform(X.toarray()), rtol=1e-10, atol=1e-12)
