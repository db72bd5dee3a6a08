"""SciPy sparse input for PCA (implicit centring) and KernelPCA, against
scikit-learn on the same sparse data and against latentlab's own dense fit."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from sklearn import decomposition

import latentlab


def sparse_data(n=400, d=150, density=0.1, scale=10.0, seed=0, fmt="csr"):
    """Sparse data with column means and scales that vary (as scikit-learn's test)."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=rng, format=fmt)
    return (X @ sp.diags(rng.random(d) * scale)).asformat(fmt)


TRAIN = sparse_data()
NEW = sparse_data(n=30, seed=1)


def assert_same_fit(ours, ref, rtol=1e-9):
    for name in ("explained_variance_", "singular_values_", "mean_", "noise_variance_"):
        assert_allclose(getattr(ours, name), getattr(ref, name), rtol=rtol, atol=1e-12)
    assert_allclose(ours.components_, ref.components_, atol=1e-9)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("solver", ["arpack", "covariance_eigh"])
def test_sparse_pca_matches_sklearn_and_the_dense_fit(solver, fmt):
    X = TRAIN.asformat(fmt)
    ours = latentlab.PCA(5, svd_solver=solver, random_state=0).fit(X)
    assert ours.svd_solver_ == solver  # arpack: the sparse Lanczos converged
    ref = decomposition.PCA(5, svd_solver=solver, random_state=0).fit(X)
    assert_same_fit(ours, ref)
    assert_same_fit(ours, latentlab.PCA(5, svd_solver=solver, random_state=0).fit(X.toarray()))
    assert_allclose(ours.transform(NEW), ref.transform(NEW), atol=1e-10)
    assert_allclose(ours.transform(NEW), ours.transform(NEW.toarray()), atol=1e-12)
    assert_allclose(ours.fit_transform(X), ours.transform(X), atol=1e-12)


def test_sparse_pca_auto_takes_arpack_and_refuses_densifying_solvers():
    assert latentlab.PCA(3, random_state=0).fit(TRAIN).svd_solver_ == "arpack"
    for solver in ("full", "randomized"):
        with pytest.raises(TypeError, match=f'sparse inputs .* "{solver}" was passed'):
            latentlab.PCA(3, svd_solver=solver).fit(TRAIN)
        with pytest.raises(ValueError, match="sparse"):  # InputTypeError is both
            latentlab.PCA(3, svd_solver=solver).fit(TRAIN)


@pytest.mark.parametrize("solver", ["arpack", "covariance_eigh"])
def test_sparse_pca_with_large_column_means_centres_exactly(solver):
    # columns near 1e6 with unit spread, stored sparse: X^T X - n mu mu^T would lose
    # the spread to cancellation; the exact (dense full-SVD) fit is the oracle
    rng = np.random.default_rng(3)
    dense = 1e6 + rng.normal(size=(200, 40)) @ np.diag(np.linspace(1, 3, 40))
    dense[rng.random(dense.shape) < 0.2] = 0.0
    ours = latentlab.PCA(3, svd_solver=solver, random_state=0).fit(sp.csr_array(dense))
    exact = latentlab.PCA(3, svd_solver="full").fit(dense)
    assert_same_fit(ours, exact, rtol=1e-8)


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "sigmoid", "cosine"])
def test_sparse_kernel_pca_matches_sklearn(kernel):
    X, Xn = TRAIN[:120], NEW
    settings = dict(n_components=4, kernel=kernel, gamma=0.01)
    ours = latentlab.KernelPCA(**settings).fit(X)
    ref = decomposition.KernelPCA(**settings, eigen_solver="dense").fit(X)
    assert sp.issparse(ours.X_fit_)  # kept sparse
    assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    Z, Z_ref = ours.transform(Xn), ref.transform(Xn)
    signs = np.sign(np.sum(Z * Z_ref, axis=0))
    assert_allclose(Z * signs, Z_ref, atol=1e-10 * np.abs(Z_ref).max())
    assert_allclose(ours.transform(Xn.toarray()), Z, atol=1e-12)  # dense new rows
    dense_fit = latentlab.KernelPCA(**settings).fit(X.toarray())
    assert_allclose(dense_fit.transform(Xn), dense_fit.transform(Xn.toarray()), atol=1e-12)


def test_sparse_kernel_pca_refuses_pre_images():
    with pytest.raises(ValueError, match="sparse"):
        latentlab.KernelPCA(2, kernel="rbf", fit_inverse_transform=True).fit(TRAIN[:50])


def test_sparse_arpack_falls_back_to_the_exact_scatter_when_lanczos_stops_early(monkeypatch):
    from latentlab.estimators import _pca_solvers as pca  # where PCA's solvers live

    real = pca.lanczos_settings

    def one_product(n, n_components, dtype):
        block, blocks, _, tol = real(n, n_components, dtype)
        return block, blocks, 1, tol

    monkeypatch.setattr(pca, "lanczos_settings", one_product)
    ours = latentlab.PCA(5, svd_solver="arpack", random_state=0).fit(TRAIN)
    assert ours.svd_solver_ == "covariance_eigh"
    assert_same_fit(ours, decomposition.PCA(5, svd_solver="arpack", random_state=0).fit(TRAIN))
