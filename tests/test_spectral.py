"""Laplacian eigenmaps and spectral clustering against scikit-learn's."""

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn import cluster, manifold
from sklearn.datasets import make_blobs, make_s_curve
from sklearn.metrics import adjusted_rand_score
from sklearn.utils.estimator_checks import check_estimator

import latentlab

X, _ = make_s_curve(200, random_state=0)


def align(a, b):
    return a * np.sign(np.sum(a * b, axis=0))


@pytest.mark.parametrize(
    "params",
    [
        dict(affinity="rbf"),  # gamma = 1 / n_features
        dict(affinity="rbf", gamma=2.0),
        dict(affinity="nearest_neighbors", n_neighbors=10),
    ],
)
def test_embedding_matches_sklearn(params):
    ours = latentlab.SpectralEmbedding(n_components=3, **params).fit(X)
    ref = manifold.SpectralEmbedding(n_components=3, random_state=0, **params).fit(X)
    scale = np.abs(ref.embedding_).max()
    np.testing.assert_allclose(
        align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6 * scale
    )
    if params["affinity"] == "nearest_neighbors":
        assert sparse.issparse(ours.affinity_matrix_)
        np.testing.assert_array_equal(
            ours.affinity_matrix_.toarray(), ref.affinity_matrix_.toarray()
        )


@pytest.mark.parametrize(("solver", "used"), [("lanczos", "shift_invert"), ("arpack", "arpack")])
def test_shift_invert_solvers_for_knn_affinity_match_sklearn(solver, used):
    ours = latentlab.SpectralEmbedding(n_neighbors=10, eigen_solver=solver).fit(X)
    ref = manifold.SpectralEmbedding(n_neighbors=10, random_state=0).fit(X)
    assert ours.solver_ == used
    scale = np.abs(ref.embedding_).max()
    np.testing.assert_allclose(
        align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6 * scale
    )
    # the eigenvalues of the normalized Laplacian, as dense eigh of it gives them
    A = ours.affinity_matrix_.toarray()
    np.fill_diagonal(A, 0.0)
    scaled = A / np.sqrt(np.outer(A.sum(axis=1), A.sum(axis=1)))
    expected = np.linalg.eigvalsh(np.eye(len(X)) - scaled)[1:3]
    np.testing.assert_allclose(ours.eigenvalues_, expected, rtol=1e-8)


def test_precomputed_affinity_and_lanczos_solver_match_sklearn():
    affinity = np.exp(-0.5 * np.sum((X[:, None] - X[None]) ** 2, axis=-1))
    ref = manifold.SpectralEmbedding(affinity="precomputed", random_state=0).fit(affinity)
    scale = np.abs(ref.embedding_).max()
    for solver in ("dense", "lanczos"):
        ours = latentlab.SpectralEmbedding(affinity="precomputed", eigen_solver=solver)
        ours.fit(affinity)
        assert ours.solver_ == solver
        np.testing.assert_allclose(
            align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6 * scale
        )
        # the eigenvalues are those of the normalized Laplacian, in [0, 2]
        assert np.all((ours.eigenvalues_ > 0) & (ours.eigenvalues_ < 2))


@pytest.mark.parametrize("affinity", ["rbf", "nearest_neighbors"])
def test_clustering_labels_equal_sklearn_up_to_permutation(affinity):
    Xb, truth = make_blobs(150, centers=3, cluster_std=0.6, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 3 blobs' k-NN graphs are disconnected
        ours = latentlab.SpectralClustering(3, affinity=affinity, random_state=0).fit(Xb)
        ref = cluster.SpectralClustering(3, affinity=affinity, random_state=0).fit(Xb)
    assert adjusted_rand_score(ours.labels_, ref.labels_) == 1.0
    assert adjusted_rand_score(ours.labels_, truth) == 1.0
    assert ours.labels_.dtype.kind == "i"


def test_disconnected_affinity_warns_naming_components():
    two = np.r_[X[:60], X[:40] + 10.0]
    with pytest.warns(UserWarning, match=r"2 connected components of sizes \[60, 40\]"):
        latentlab.SpectralEmbedding(n_neighbors=5).fit(two)


@pytest.mark.parametrize(
    ("params", "data", "match"),
    [
        (dict(affinity="precomputed"), X, "square"),
        (dict(affinity="precomputed"), np.triu(np.ones((5, 5))), "symmetric"),
        (dict(affinity="precomputed"), -np.ones((5, 5)), "non-negative"),
        (dict(affinity="cosine"), X, "affinity"),
        (dict(n_neighbors=201), X, "n_neighbors"),
        (dict(affinity="rbf", gamma=-1.0), X, "gamma"),
        (dict(n_components=200), X, "n_components"),
        ({}, np.r_[X[:-1], [[np.nan, 0, 0]]], "NaN"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(params, data, match):
    with pytest.raises(ValueError, match=match):
        latentlab.SpectralEmbedding(**params).fit(data)


def test_clustering_bad_settings():
    with pytest.raises(ValueError, match="n_clusters"):
        latentlab.SpectralClustering(0).fit(X)
    with pytest.raises(ValueError, match="n_init"):
        latentlab.SpectralClustering(2, n_init=0).fit(X)


@pytest.mark.parametrize("name", ["SpectralEmbedding", "SpectralClustering"])
def test_check_estimator(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(getattr(latentlab, name)(), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert not failed, failed
