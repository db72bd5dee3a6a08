"""LLE (standard and modified) against scikit-learn's on the same neighbours, Hessian LLE
and LTSA against the exact flat-manifold solution, out-of-sample transform,
bad input and scikit-learn's estimator checks."""

import warnings

import numpy as np
import pytest
from sklearn import manifold
from sklearn.datasets import make_s_curve
from sklearn.utils.estimator_checks import check_estimator

import latentlab

X, _ = make_s_curve(200, random_state=0)
X_NEW = X[:9] + 0.02


def align(a, b):
    return a * np.sign(np.sum(a * b, axis=0))


@pytest.fixture(scope="module")
def fits():
    ours = latentlab.LocallyLinearEmbedding(n_neighbors=10).fit(X)
    ref = manifold.LocallyLinearEmbedding(n_neighbors=10, eigen_solver="dense").fit(X)
    return ours, ref


def test_matches_sklearn_embedding_and_reconstruction_error(fits):
    ours, ref = fits
    np.testing.assert_allclose(align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6)
    np.testing.assert_allclose(ours.reconstruction_error_, ref.reconstruction_error_, rtol=1e-6)
    # unit-norm eigenvectors, orthogonal to the constant one that was skipped (up to
    # round-off / eigenvalue gap: the bottom eigenvalues here are ~1e-8 apart)
    np.testing.assert_allclose(ours.embedding_.T @ ours.embedding_, np.eye(2), atol=1e-10)
    np.testing.assert_allclose(ours.embedding_.sum(axis=0), 0.0, atol=1e-5)


def test_transform_matches_sklearn_and_nearly_reproduces_training_points(fits):
    ours, ref = fits
    expected = ref.transform(X_NEW)
    np.testing.assert_allclose(align(ours.transform(X_NEW), expected), expected, atol=1e-6)
    # A training point is its own nearest neighbour, but the regularised weights do
    # not put all their mass on it (reg * trace(G) spreads some over the others): the
    # map is close to, not exactly, the identity on the training set (as scikit-learn).
    error = np.abs(ours.transform(X) - ours.embedding_).max()
    assert error < 1e-2 * np.abs(ours.embedding_).max()


def test_shift_invert_lanczos_matches_dense(fits):
    ours, _ = fits
    lanczos = latentlab.LocallyLinearEmbedding(n_neighbors=10, eigen_solver="lanczos").fit(X)
    assert lanczos.solver_ == "shift_invert"
    np.testing.assert_allclose(lanczos.embedding_, ours.embedding_, atol=1e-7)
    np.testing.assert_allclose(lanczos.eigenvalues_, ours.eigenvalues_, rtol=1e-6)


def test_sparse_arpack_matches_sklearn_and_dense(fits):
    ours, ref = fits
    sparse = latentlab.LocallyLinearEmbedding(
        n_neighbors=10, eigen_solver="arpack", random_state=0
    ).fit(X)
    assert sparse.solver_ == "arpack"
    np.testing.assert_allclose(align(sparse.embedding_, ref.embedding_), ref.embedding_, atol=1e-6)
    np.testing.assert_allclose(sparse.embedding_, ours.embedding_, atol=1e-7)
    np.testing.assert_allclose(sparse.eigenvalues_, ours.eigenvalues_, rtol=1e-6)
    expected = ref.transform(X_NEW)
    np.testing.assert_allclose(align(sparse.transform(X_NEW), expected), expected, atol=1e-6)


def test_sparse_matrix_equals_dense_matrix():
    from latentlab.closed_form import lle

    rng = np.random.default_rng(0)
    weights = rng.normal(size=(30, 4))
    indices = np.array([rng.choice(30, 4, replace=False) for _ in range(30)])
    W = np.zeros((30, 30))
    W[np.repeat(np.arange(30), 4), indices.ravel()] = weights.ravel()
    expected = (np.eye(30) - W).T @ (np.eye(30) - W)
    np.testing.assert_allclose(
        lle.sparse_lle_matrix(weights, indices).toarray(), expected, atol=1e-12
    )


def test_disconnected_graph_warns_naming_components():
    two = np.r_[X[:60], X[:40] + 10.0]
    with pytest.warns(UserWarning, match=r"2 connected components of sizes \[60, 40\]"):
        latentlab.LocallyLinearEmbedding(n_neighbors=5).fit(two)


@pytest.mark.parametrize(
    ("params", "data", "match"),
    [
        ({"n_neighbors": 200}, X, "n_neighbors=200 is out of range"),
        ({"n_components": 200}, X, "n_components"),
        ({"reg": 0.0}, X, "reg"),
        ({"eigen_solver": "amg"}, X, "eigen_solver"),
        ({}, np.r_[X[:-1], [[np.nan, 0, 0]]], "NaN"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(params, data, match):
    with pytest.raises(ValueError, match=match):
        latentlab.LocallyLinearEmbedding(**params).fit(data)


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.LocallyLinearEmbedding(), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert not failed, failed


def _procrustes_disparity(A, B):
    from scipy.spatial import procrustes

    return procrustes(A, B)[2]


@pytest.mark.parametrize("solver", ["dense", "arpack"])
def test_modified_lle_matches_sklearn(solver):
    """Zhang & Wang's weights (adaptive s_i, Householder-combined eigenvectors) give
    scikit-learn's embedding on the same neighbours."""
    ours = latentlab.LocallyLinearEmbedding(
        n_neighbors=12, method="modified", eigen_solver=solver, random_state=0
    ).fit(X)
    ref = manifold.LocallyLinearEmbedding(
        n_neighbors=12, method="modified", eigen_solver="dense"
    ).fit(X)
    assert ours.solver_ == solver
    assert _procrustes_disparity(ours.embedding_, ref.embedding_) < 1e-12
    np.testing.assert_allclose(ours.reconstruction_error_, ref.reconstruction_error_, rtol=1e-6)


# a plane in R^3: every neighbourhood is exactly flat, so the local tangent
# coordinates are exact and the embedding must be an affine image of (u, v)
_UV = np.random.default_rng(1).uniform(-1.0, 1.0, size=(150, 2)) * [2.0, 1.0]
_ROTATION = np.linalg.qr(np.random.default_rng(2).normal(size=(3, 3)))[0]
PLANE = np.c_[_UV, np.zeros(150)] @ _ROTATION.T


def _affine_residual(Y, coordinates):
    """Relative residual of the least-squares fit of Y by [1, coordinates]."""
    design = np.c_[np.ones(len(coordinates)), coordinates]
    coef, *_ = np.linalg.lstsq(design, Y, rcond=None)
    return np.linalg.norm(Y - design @ coef) / np.linalg.norm(Y - Y.mean(axis=0))


@pytest.mark.parametrize("method", ["hessian", "ltsa"])
@pytest.mark.parametrize("solver", ["dense", "arpack"])
def test_hessian_and_ltsa_recover_flat_coordinates_exactly(method, solver):
    """On a flat manifold both null spaces are exactly the affine functions of the
    tangent coordinates (Donoho & Grimes 2003, Zhang & Zha 2004): a closed form the
    standard method, with its regularised barycentric weights, misses."""
    ours = latentlab.LocallyLinearEmbedding(
        n_neighbors=10, method=method, eigen_solver=solver, random_state=0
    ).fit(PLANE)
    assert _affine_residual(ours.embedding_, _UV) < 1e-8
    assert ours.reconstruction_error_ < 1e-10
    np.testing.assert_allclose(ours.embedding_.T @ ours.embedding_, np.eye(2), atol=1e-8)
    standard = latentlab.LocallyLinearEmbedding(n_neighbors=10).fit(PLANE)
    assert _affine_residual(standard.embedding_, _UV) > 1e-3


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"method": "hessian", "n_neighbors": 5}, "n_neighbors > n_components"),
        ({"method": "modified", "n_neighbors": 2}, "n_neighbors > n_components=2"),
        ({"method": "isomap"}, "method"),
        ({"hessian_tol": -1.0}, "hessian_tol"),
    ],
)
def test_bad_method_settings_name_the_problem(params, match):
    with pytest.raises(ValueError, match=match):
        latentlab.LocallyLinearEmbedding(**params).fit(X)
