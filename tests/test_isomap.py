"""Isomap against scikit-learn's on the same neighbours, out-of-sample transform, bad
input and scikit-learn's estimator checks."""

import warnings

import numpy as np
import pytest
from sklearn import manifold
from sklearn.datasets import make_s_curve
from sklearn.utils.estimator_checks import check_estimator

import latentlab

X, _ = make_s_curve(200, random_state=0)
X_NEW = X[:9] + 0.02  # near the manifold, off the training points


def align(a, b):
    """a with each column's sign chosen to match b (eigenvector signs are arbitrary)."""
    return a * np.sign(np.sum(a * b, axis=0))


@pytest.fixture(scope="module")
def fits():
    return latentlab.Isomap(n_neighbors=10).fit(X), manifold.Isomap(n_neighbors=10).fit(X)


def test_matches_sklearn_embedding_distances_and_error(fits):
    ours, ref = fits
    np.testing.assert_allclose(ours.dist_matrix_, ref.dist_matrix_, atol=1e-12)
    np.testing.assert_allclose(align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6)
    np.testing.assert_allclose(ours.eigenvalues_, ref.kernel_pca_.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(ours.reconstruction_error(), ref.reconstruction_error(), rtol=1e-8)


def test_transform_reproduces_training_embedding_and_matches_sklearn(fits):
    ours, ref = fits
    np.testing.assert_allclose(ours.transform(X), ours.embedding_, atol=1e-10)
    Z = ours.transform(X_NEW)
    np.testing.assert_allclose(align(Z, ref.transform(X_NEW)), ref.transform(X_NEW), atol=1e-6)


def test_lanczos_solver_matches_dense(fits):
    ours, _ = fits
    lanczos = latentlab.Isomap(n_neighbors=10, eigen_solver="lanczos").fit(X)
    assert lanczos.solver_ == "lanczos"
    np.testing.assert_allclose(lanczos.embedding_, ours.embedding_, atol=1e-8)


def test_radius_graph_matches_sklearn():
    ours = latentlab.Isomap(n_neighbors=None, radius=0.5).fit(X)
    ref = manifold.Isomap(n_neighbors=None, radius=0.5).fit(X)
    np.testing.assert_allclose(align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6)
    np.testing.assert_allclose(
        align(ours.transform(X_NEW), ref.transform(X_NEW)), ref.transform(X_NEW), atol=1e-6
    )


def test_disconnected_graph_warns_naming_components_and_links_them_like_sklearn():
    two = np.r_[X[:60], X[:40] + 10.0]
    with pytest.warns(UserWarning, match=r"2 connected components of sizes \[60, 40\]"):
        ours = latentlab.Isomap(n_neighbors=5).fit(two)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = manifold.Isomap(n_neighbors=5).fit(two)
    np.testing.assert_allclose(ours.dist_matrix_, ref.dist_matrix_, atol=1e-10)


@pytest.mark.parametrize(
    ("params", "data", "match"),
    [
        ({"n_neighbors": 200}, X, "n_neighbors=200 is out of range"),
        ({"n_neighbors": 0}, X, "n_neighbors"),
        ({"n_neighbors": 5, "radius": 1.0}, X, "Both n_neighbors and radius"),
        ({"n_neighbors": None, "radius": -1.0}, X, "radius"),
        ({"n_components": 201}, X, "n_components"),
        ({}, np.r_[X[:-1], [[np.nan, 0, 0]]], "NaN"),
        ({"path_method": "BF"}, X, "path_method"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(params, data, match):
    with pytest.raises(ValueError, match=match):
        latentlab.Isomap(**params).fit(data)


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.Isomap(), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert not failed, failed


def test_geodesic_distances_equal_scipys_undirected_shortest_paths():
    """The directed search on the symmetrised graph equals SciPy's undirected one (an
    edge either way, at the smaller weight, a stored zero kept), and so do the rows of
    the independent set filled in from their neighbours' rows."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    from latentlab.estimators.isomap import geodesic_distances, independent_set, symmetrized

    rng = np.random.default_rng(0)
    n = 40
    pairs = np.unique(rng.integers(0, n, size=(150, 2)), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    weights = rng.uniform(0.5, 2.0, len(pairs))  # (i, j) and (j, i) weigh differently
    weights[0] = 0.0
    graph = csr_matrix((weights, (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    assert graph.nnz == len(pairs)  # the zero is stored
    expected = shortest_path(graph, directed=False)
    sym = symmetrized(graph)
    assert (sym != sym.T).nnz == 0
    np.testing.assert_array_equal(shortest_path(sym, directed=True), expected)
    inside = independent_set(sym)
    assert inside.sum() >= 5 and not sym[inside][:, inside].nnz  # independent
    np.testing.assert_allclose(geodesic_distances(graph, "D"), expected, rtol=1e-14)
    np.testing.assert_allclose(geodesic_distances(graph, "FW"), expected, rtol=1e-14)


@pytest.mark.parametrize(
    "params",
    [
        {"metric": "manhattan"},
        {"metric": "minkowski", "p": 3},
        {"metric": "chebyshev", "n_neighbors": None, "radius": 0.8},
    ],
    ids=["manhattan", "minkowski-p3", "chebyshev-radius"],
)
def test_other_metrics_match_sklearn_fit_and_transform(params):
    params = {"n_neighbors": 10, **params}
    ours = latentlab.Isomap(**params).fit(X)
    ref = manifold.Isomap(**params).fit(X)
    np.testing.assert_allclose(ours.dist_matrix_, ref.dist_matrix_, atol=1e-12)
    np.testing.assert_allclose(align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6)
    Z_ref = ref.transform(X_NEW)
    np.testing.assert_allclose(align(ours.transform(X_NEW), Z_ref), Z_ref, atol=1e-6)
    # a non-Euclidean graph gives other geodesics than the Euclidean one
    euclidean = latentlab.Isomap(n_neighbors=params["n_neighbors"], radius=params.get("radius"))
    assert not np.allclose(euclidean.fit(X).dist_matrix_, ours.dist_matrix_)
    assert ours.nbrs_.metric == params["metric"]


def test_precomputed_distances_and_graph_match_data_fit():
    from sklearn.metrics import pairwise_distances
    from sklearn.neighbors import kneighbors_graph

    ref = manifold.Isomap(n_neighbors=10).fit(X)
    dense = latentlab.Isomap(n_neighbors=10, metric="precomputed").fit(pairwise_distances(X))
    graph = kneighbors_graph(X, n_neighbors=10, mode="distance")
    sparse = latentlab.Isomap(n_neighbors=10, metric="precomputed").fit(graph)
    for ours in (dense, sparse):
        np.testing.assert_allclose(ours.dist_matrix_, ref.dist_matrix_, atol=1e-12)
        np.testing.assert_allclose(
            align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6
        )
    Z_ref = ref.transform(X_NEW)
    Z = dense.transform(pairwise_distances(X_NEW, X))
    np.testing.assert_allclose(align(Z, Z_ref), Z_ref, atol=1e-6)
    with pytest.raises(ValueError, match="square"):
        latentlab.Isomap(metric="precomputed").fit(X)


def test_sparse_input_matches_dense_and_sklearn():
    from scipy import sparse

    rng = np.random.default_rng(0)
    Xs = sparse.random(150, 6, density=0.5, format="csr", random_state=1) + sparse.csr_matrix(
        rng.normal(size=(150, 1)) @ np.ones((1, 6)) * 0.1
    )
    Xs = sparse.csr_matrix(Xs)
    ours = latentlab.Isomap(n_neighbors=12).fit(Xs)
    dense = latentlab.Isomap(n_neighbors=12).fit(Xs.toarray())
    ref = manifold.Isomap(n_neighbors=12).fit(Xs)
    np.testing.assert_allclose(ours.dist_matrix_, ref.dist_matrix_, atol=1e-12)
    np.testing.assert_allclose(ours.embedding_, dense.embedding_, atol=1e-8)
    new = Xs[:5] * 1.01
    Z_ref = ref.transform(new)
    np.testing.assert_allclose(align(ours.transform(new), Z_ref), Z_ref, atol=1e-6)


def test_infinite_radius_is_classical_mds_of_the_distances():
    ours = latentlab.Isomap(n_neighbors=None, radius=np.inf).fit(X)
    # every pair linked: the geodesics are the Euclidean distances, and the embedding
    # is PCA's scores of X (a closed form)
    from sklearn.metrics import pairwise_distances

    np.testing.assert_allclose(ours.dist_matrix_, pairwise_distances(X), atol=1e-12)
    Xc = X - X.mean(axis=0)
    U, S, _ = np.linalg.svd(Xc, full_matrices=False)
    scores = U[:, :2] * S[:2]
    np.testing.assert_allclose(align(ours.embedding_, scores), scores, atol=1e-8)


def test_arpack_is_the_iterative_solver(fits):
    ours, _ = fits
    arpack = latentlab.Isomap(n_neighbors=10, eigen_solver="arpack").fit(X)
    np.testing.assert_allclose(
        align(arpack.embedding_, ours.embedding_), ours.embedding_, atol=1e-8
    )


def test_float32_data_give_float32_embedding_as_sklearn(fits):
    # scikit-learn keeps float32: embedding_, dist_matrix_ and the kernel's eigenvalues,
    # and transform of float32 data.  Ours are computed in float64 from the values
    # float32 holds and rounded once, so they equal that fit's rounded.
    X32 = X.astype(np.float32)
    ours = latentlab.Isomap(n_neighbors=10).fit(X32)
    ref = manifold.Isomap(n_neighbors=10).fit(X32)
    exact = latentlab.Isomap(n_neighbors=10).fit(X32.astype(np.float64))
    for name in ("embedding_", "dist_matrix_", "eigenvalues_", "kernel_column_means_"):
        assert getattr(ours, name).dtype == np.float32, name
        np.testing.assert_array_equal(getattr(ours, name), getattr(exact, name).astype(np.float32))
    assert ref.embedding_.dtype == ref.dist_matrix_.dtype == np.float32
    np.testing.assert_allclose(align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-4)
    # transform: float32 only for float32 data on a float32 fit (scikit-learn's dtypes)
    new32 = X_NEW.astype(np.float32)
    assert ours.fit_transform(X32).dtype == ref.transform(new32).dtype == np.float32
    assert ours.transform(new32).dtype == np.float32
    assert ours.transform(X_NEW).dtype == ref.transform(X_NEW).dtype == np.float64
    assert fits[0].transform(new32).dtype == fits[1].transform(new32).dtype == np.float64
    np.testing.assert_allclose(ours.transform(new32), exact.transform(new32), rtol=0, atol=1e-5)
    # reconstruction_error is taken in float64 (its difference cancels), from the
    # float32-rounded eigenvalues: 3.6e-5 from the float64 fit's 0.2507515, where
    # scikit-learn's float32 value (0.2507115) is 1.6e-4 away
    error = exact.reconstruction_error()
    assert ours.reconstruction_error() == pytest.approx(error, rel=1e-4)
    assert abs(ours.reconstruction_error() - error) <= abs(ref.reconstruction_error() - error)
    # integer data are not kept: float64
    assert latentlab.Isomap(n_neighbors=10).fit(np.rint(X * 10).astype(int)).embedding_.dtype == (
        np.float64
    )
