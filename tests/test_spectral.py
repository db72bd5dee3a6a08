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
        (dict(affinity="cosine"), X, "affinity"),  # a kernel of SpectralClustering only
        (dict(eigen_solver="lobpcg", eigen_tol=-1.0), X, "eigen_tol"),
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


BLOBS, TRUTH = make_blobs(120, centers=3, cluster_std=0.7, random_state=1)


def _random_rotation(k, seed):
    return np.linalg.qr(np.random.default_rng(seed).normal(size=(k, k)))[0]


@pytest.mark.parametrize("assign_labels", ["discretize", "cluster_qr"])
def test_label_assignments_recover_rotated_indicators(assign_labels):
    """Closed form: rows that are a (positively scaled) cluster indicator turned by any
    rotation are labelled by their cluster, whatever the rotation."""
    from latentlab.closed_form import spectral as cf

    labels = np.repeat(np.arange(4), [30, 10, 25, 15])
    indicator = np.eye(4)[labels] * np.random.default_rng(0).uniform(0.5, 2.0, (80, 1))
    for seed in range(3):
        V = indicator @ _random_rotation(4, seed)
        if assign_labels == "discretize":
            found = cf.discretize(V, seed=seed)
        else:
            found = cf.cluster_qr(V)
        assert adjusted_rand_score(found, labels) == 1.0


@pytest.mark.parametrize("assign_labels", ["discretize", "cluster_qr"])
def test_assign_labels_match_sklearn(assign_labels):
    ours = latentlab.SpectralClustering(
        3, gamma=0.5, assign_labels=assign_labels, random_state=0
    ).fit(BLOBS)
    ref = cluster.SpectralClustering(3, gamma=0.5, assign_labels=assign_labels, random_state=0).fit(
        BLOBS
    )
    assert adjusted_rand_score(ours.labels_, ref.labels_) == 1.0
    assert adjusted_rand_score(ours.labels_, TRUTH) == 1.0
    # centres and inertia of the labelled embedding
    centre = ours.embedding_[ours.labels_ == 0].mean(axis=0)
    np.testing.assert_allclose(ours.cluster_centers_[0], centre)
    residual = ours.embedding_ - ours.cluster_centers_[ours.labels_]
    np.testing.assert_allclose(ours.inertia_, np.sum(residual**2))


@pytest.mark.parametrize(
    ("affinity", "kwargs"),
    [
        ("polynomial", dict(degree=2, coef0=1.0, gamma=0.05)),
        ("laplacian", dict(gamma=0.3)),
        ("chi2", dict(gamma=0.2)),
        ("cosine", {}),
        ("sigmoid", dict(gamma=0.01, coef0=0.5)),
    ],
)
def test_kernel_affinities_match_sklearn(affinity, kwargs):
    Xp = BLOBS - BLOBS.min(axis=0) + 0.1  # chi2 needs non-negative data
    ours = latentlab.SpectralClustering(3, affinity=affinity, random_state=0, **kwargs).fit(Xp)
    ref = cluster.SpectralClustering(3, affinity=affinity, random_state=0, **kwargs).fit(Xp)
    np.testing.assert_allclose(ours.affinity_matrix_, ref.affinity_matrix_, rtol=1e-12)
    assert adjusted_rand_score(ours.labels_, ref.labels_) == 1.0


def test_callable_affinities():
    def histogram(x, y):
        return np.minimum(x, y).sum()

    Xp = BLOBS - BLOBS.min(axis=0)
    ours = latentlab.SpectralClustering(3, affinity=histogram, random_state=0).fit(Xp)
    ref = cluster.SpectralClustering(3, affinity=histogram, random_state=0).fit(Xp)
    np.testing.assert_allclose(ours.affinity_matrix_, ref.affinity_matrix_, rtol=1e-12)
    assert adjusted_rand_score(ours.labels_, ref.labels_) == 1.0
    # SpectralEmbedding's callable maps X to the matrix: the same fit as precomputed
    from sklearn.metrics.pairwise import rbf_kernel

    embed = latentlab.SpectralEmbedding(affinity=lambda A: rbf_kernel(A, gamma=0.7)).fit(X)
    pre = latentlab.SpectralEmbedding(affinity="precomputed").fit(rbf_kernel(X, gamma=0.7))
    np.testing.assert_allclose(embed.embedding_, pre.embedding_, atol=1e-12)
    with pytest.raises(ValueError, match="callable affinity's matrix has negative"):
        latentlab.SpectralEmbedding(affinity=lambda A: -rbf_kernel(A)).fit(X)


def test_precomputed_nearest_neighbors_and_sparse_affinities_match_sklearn():
    from sklearn.neighbors import kneighbors_graph

    graph = kneighbors_graph(X, n_neighbors=15, mode="distance")
    ours = latentlab.SpectralEmbedding(
        affinity="precomputed_nearest_neighbors", n_neighbors=10
    ).fit(graph)
    ref = manifold.SpectralEmbedding(
        affinity="precomputed_nearest_neighbors", n_neighbors=10, random_state=0
    ).fit(graph)
    np.testing.assert_array_equal(ours.affinity_matrix_.toarray(), ref.affinity_matrix_.toarray())
    scale = np.abs(ref.embedding_).max()
    np.testing.assert_allclose(
        align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6 * scale
    )
    assert ours.__sklearn_tags__().input_tags.pairwise
    # the same affinity passed sparse, and dense, as "precomputed"
    for A in (ref.affinity_matrix_, ref.affinity_matrix_.toarray()):
        pre = latentlab.SpectralEmbedding(affinity="precomputed").fit(A)
        np.testing.assert_allclose(
            align(pre.embedding_, ref.embedding_), ref.embedding_, atol=1e-6 * scale
        )
    # sparse data: rbf and k-NN on the host give the dense data's fits
    Xs = sparse.csr_matrix(X)
    for affinity in ("rbf", "nearest_neighbors"):
        dense_fit = latentlab.SpectralEmbedding(affinity=affinity, n_neighbors=10).fit(X)
        sparse_fit = latentlab.SpectralEmbedding(affinity=affinity, n_neighbors=10).fit(Xs)
        np.testing.assert_allclose(sparse_fit.embedding_, dense_fit.embedding_, atol=1e-8)


def test_lobpcg_matches_dense_and_sklearn():
    ref = manifold.SpectralEmbedding(affinity="rbf", gamma=0.5, random_state=0).fit(X)
    dense = latentlab.SpectralEmbedding(affinity="rbf", gamma=0.5, eigen_solver="dense").fit(X)
    ours = latentlab.SpectralEmbedding(
        affinity="rbf", gamma=0.5, eigen_solver="lobpcg", eigen_tol=1e-9, random_state=0
    ).fit(X)
    assert ours.solver_ == "lobpcg"
    scale = np.abs(ref.embedding_).max()
    np.testing.assert_allclose(ours.embedding_, dense.embedding_, atol=1e-6 * scale)
    np.testing.assert_allclose(
        align(ours.embedding_, ref.embedding_), ref.embedding_, atol=1e-6 * scale
    )
    np.testing.assert_allclose(ours.eigenvalues_, dense.eigenvalues_, rtol=1e-7)
    knn = latentlab.SpectralEmbedding(n_neighbors=10, eigen_solver="lobpcg", eigen_tol=1e-9)
    knn_dense = latentlab.SpectralEmbedding(n_neighbors=10, eigen_solver="dense")
    np.testing.assert_allclose(
        knn.fit(X).embedding_, knn_dense.fit(X).embedding_, atol=1e-6 * scale
    )


def test_amg_without_pyamg_is_refused_naming_it():
    try:
        import pyamg  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="pyamg is not available"):
            latentlab.SpectralEmbedding(eigen_solver="amg").fit(X)
    else:
        pytest.skip("pyamg is installed")


def test_float32_data_give_float32_embedding_and_affinity():
    Xs = X.astype(np.float32)
    single = latentlab.SpectralEmbedding(affinity="rbf").fit(Xs)
    double = latentlab.SpectralEmbedding(affinity="rbf").fit(X)
    assert single.embedding_.dtype == np.float32
    assert single.affinity_matrix_.dtype == np.float32
    assert single.fit_transform(Xs).dtype == np.float32
    assert double.embedding_.dtype == np.float64
    scale = np.abs(double.embedding_).max()
    np.testing.assert_allclose(single.embedding_, double.embedding_, atol=1e-5 * scale)


def test_every_affinity_is_kept():
    rbf = latentlab.SpectralEmbedding(affinity="rbf", gamma=0.5).fit(X)
    from sklearn.metrics.pairwise import rbf_kernel

    np.testing.assert_allclose(rbf.affinity_matrix_, rbf_kernel(X, gamma=0.5), atol=1e-12)


@pytest.mark.parametrize("assign_labels", ["kmeans", "discretize", "cluster_qr"])
def test_verbose_reports_the_label_assignment_and_each_lloyd_iteration(assign_labels, capsys):
    import re

    import jax
    from sklearn.utils import check_random_state

    from latentlab.closed_form import kmeans as km
    from latentlab.estimators.kmeans import plusplus_draws

    data, _ = make_blobs(200, centers=5, n_features=3, random_state=0)
    settings = dict(n_clusters=5, n_init=3, random_state=3, assign_labels=assign_labels)
    quiet = latentlab.SpectralClustering(**settings).fit(data)
    assert capsys.readouterr().out == ""
    loud = latentlab.SpectralClustering(verbose=1, **settings).fit(data)
    out = capsys.readouterr().out
    assert out.startswith(f"Computing label assignment using {assign_labels}\n")
    # the step-by-step k-means is the same fit as the one compiled program
    np.testing.assert_array_equal(loud.labels_, quiet.labels_)
    np.testing.assert_array_equal(loud.cluster_centers_, quiet.cluster_centers_)
    assert loud.inertia_ == quiet.inertia_
    if assign_labels != "kmeans":
        assert "Iteration" not in out
        return
    runs = out.split("Initialization complete\n")[1:]
    assert len(runs) == 3
    # each restart reports as many iterations as its compiled run makes, ending at
    # that run's inertia, and says why it stopped
    draws = plusplus_draws(check_random_state(3), 3, 5)
    with jax.enable_x64(True):
        for run, uniforms in zip(runs, draws, strict=True):
            lines = re.findall(r"Iteration (\d+), inertia ([0-9.e+-]+)\.", run)
            alone = km.kmeans(
                jax.numpy.asarray(loud.embedding_),
                jax.random.PRNGKey(0),
                n_clusters=5,
                uniforms=jax.numpy.asarray(uniforms[None]),
            )
            assert [int(i) for i, _ in lines] == list(range(1, int(alone.n_iter) + 1))
            assert float(lines[-1][1]) == pytest.approx(float(alone.inertia), rel=1e-5)
            assert "Converged at iteration" in run
