"""latentlab.AgglomerativeClustering against SciPy's linkage and scikit-learn's trees and
labels, unconstrained and through a connectivity graph."""

import warnings
from functools import partial

import numpy as np
import pytest
from scipy import sparse
from scipy.cluster import hierarchy
from scipy.spatial.distance import pdist, squareform
from sklearn import cluster
from sklearn.datasets import load_iris, make_blobs, make_swiss_roll
from sklearn.neighbors import kneighbors_graph
from sklearn.utils.estimator_checks import check_estimator

import latentlab
from latentlab.closed_form.agglomerative import LINKAGES, linkage_matrix

IRIS = load_iris().data
X, _ = make_blobs(120, centers=4, n_features=3, cluster_std=1.5, random_state=0)

# check_estimator: every check passes (none expected to fail).
AGGLOMERATIVE_EXPECTED_FAILED_CHECKS: dict[str, str] = {}


def _same_partition(a, b):
    """Equal up to a renumbering of the clusters: a bijection between the labels."""
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


@pytest.mark.parametrize("method", LINKAGES)
def test_linkage_matrix_equals_scipy(method):
    # continuous data: no ties, so the whole tree (ids, heights, sizes) is SciPy's
    np.testing.assert_allclose(
        linkage_matrix(X, method), hierarchy.linkage(X, method=method), rtol=1e-12, atol=1e-12
    )
    # iris has duplicated rows (tied merges): the heights still agree
    np.testing.assert_allclose(
        linkage_matrix(IRIS, method)[:, 2],
        hierarchy.linkage(IRIS, method=method)[:, 2],
        rtol=1e-12,
        atol=1e-12,
    )


def test_single_linkage_mst_equals_scipy_bit_for_bit_with_ties():
    # Prim's tree on a 6 x 6 grid with many duplicates: every height ties with many
    # others, so the merge order and ids depend on SciPy's tie rule (first index of a
    # tie, stable sort of the heights).  n = 1030 runs all three of Prim's buffers.
    grid = np.random.default_rng(0).integers(0, 6, size=(1030, 2)).astype(float)
    np.testing.assert_array_equal(linkage_matrix(grid, "single"), hierarchy.linkage(grid, "single"))
    # iris: duplicated rows and decimal coordinates, whose distances tie only when they
    # are summed as pdist sums them (no fused multiply-add)
    np.testing.assert_array_equal(linkage_matrix(IRIS, "single"), hierarchy.linkage(IRIS, "single"))


@pytest.mark.parametrize("method", LINKAGES)
def test_labels_tree_and_heights_equal_sklearn(method):
    ref = cluster.AgglomerativeClustering(4, linkage=method, compute_distances=True).fit(X)
    got = latentlab.AgglomerativeClustering(4, linkage=method, compute_distances=True).fit(X)
    assert _same_partition(got.labels_, ref.labels_)
    # scikit-learn orders the two children of its single-linkage merges differently
    np.testing.assert_array_equal(np.sort(got.children_, axis=1), np.sort(ref.children_, axis=1))
    np.testing.assert_allclose(got.distances_, ref.distances_, rtol=1e-12)
    assert (got.n_clusters_, got.n_leaves_) == (4, len(X))


@pytest.mark.parametrize("method", ["ward", "single"])
def test_distance_threshold_cuts_where_sklearn_does(method):
    threshold = float(np.median(hierarchy.linkage(X, method=method)[-10:, 2]))
    ref = cluster.AgglomerativeClustering(None, linkage=method, distance_threshold=threshold).fit(X)
    got = latentlab.AgglomerativeClustering(None, linkage=method, distance_threshold=threshold).fit(
        X
    )
    assert got.n_clusters_ == ref.n_clusters_ > 1
    assert _same_partition(got.labels_, ref.labels_)
    # and equal to SciPy's flat cut at the same height
    flat = hierarchy.fcluster(hierarchy.linkage(X, method=method), threshold, "distance")
    assert _same_partition(got.labels_, flat)


@pytest.mark.parametrize(
    "params, data, match",
    [
        (dict(n_clusters=11), X[:10], "n_clusters=11 exceeds n_samples=10"),
        (dict(n_clusters=2, distance_threshold=1.0), X, "Exactly one"),
        (dict(n_clusters=None), X, "Exactly one"),
        (dict(n_clusters=0), X, "n_clusters"),
        (dict(n_clusters=None, distance_threshold=-1.0), X, "distance_threshold"),
        (dict(linkage="centroid"), X, "Unknown linkage"),
        (dict(), np.where(X > 5, np.nan, X), "NaN"),
        (dict(), X[:1], "minimum of 2"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(params, data, match):
    with pytest.raises(ValueError, match=match):
        latentlab.AgglomerativeClustering(**params).fit(data)


def test_distances_only_when_asked_as_sklearn():
    # scikit-learn stores the merge heights only with compute_distances=True or a
    # distance_threshold; a refit without them drops an earlier fit's
    model = latentlab.AgglomerativeClustering(3)
    assert not hasattr(model.fit(X), "distances_")
    assert not hasattr(cluster.AgglomerativeClustering(3).fit(X), "distances_")
    model.set_params(compute_distances=True).fit(X)
    assert model.distances_.shape == (len(X) - 1,)
    assert not hasattr(model.set_params(compute_distances=False).fit(X), "distances_")
    with pytest.raises(ValueError, match="compute_distances=True"):
        latentlab.plots.dendrogram(model)


def test_dendrogram_draws_the_fitted_tree():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    model = latentlab.AgglomerativeClustering(None, distance_threshold=8.0).fit(X[:30])
    ax = latentlab.plots.dendrogram(model)
    # one U-shaped line per merge, topped at the merge heights
    tops = sorted(
        float(seg[1, 1]) for coll in ax.collections for seg in coll.get_segments() if len(seg) == 4
    )
    np.testing.assert_allclose(tops, np.sort(model.distances_), rtol=1e-12)
    with pytest.raises(TypeError, match="dendrogram"):
        latentlab.plots.dendrogram(latentlab.PCA(2).fit(X))
    plt.close("all")


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.AgglomerativeClustering(), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(AGGLOMERATIVE_EXPECTED_FAILED_CHECKS), failed


@pytest.mark.parametrize("linkage", ["complete", "average", "single"])
@pytest.mark.parametrize("metric", ["manhattan", "cosine", "precomputed"])
def test_other_metrics_equal_scipy_and_sklearn(linkage, metric):
    from scipy.spatial.distance import squareform
    from sklearn.metrics import adjusted_rand_score, pairwise_distances

    X = np.random.RandomState(0).rand(60, 4)
    data = pairwise_distances(X, metric="chebyshev") if metric == "precomputed" else X
    D = data if metric == "precomputed" else pairwise_distances(X, metric=metric)
    got = latentlab.AgglomerativeClustering(
        4, metric=metric, linkage=linkage, compute_distances=True
    ).fit(data)
    # SciPy's hierarchy of the same dissimilarities: the same merge heights
    Z = hierarchy.linkage(squareform(0.5 * (D + D.T), checks=False), method=linkage)
    np.testing.assert_allclose(got.distances_, Z[:, 2], rtol=1e-12, atol=1e-15)
    ref = cluster.AgglomerativeClustering(4, metric=metric, linkage=linkage).fit(data)
    assert adjusted_rand_score(got.labels_, ref.labels_) == 1.0


@pytest.mark.parametrize(
    "params, data, match",
    [
        (dict(metric="manhattan"), np.eye(5), "Euclidean distances only"),
        (dict(metric="precomputed", linkage="complete"), np.ones((4, 3)), "square"),
        (dict(metric="precomputed", linkage="average"), -np.eye(4), "distance matrix"),
    ],
)
def test_metric_refusals(params, data, match):
    with pytest.raises(ValueError, match=match):
        latentlab.AgglomerativeClustering(2, **params).fit(data)


# -- connectivity-constrained trees -------------------------------------------------

# a swiss roll with a 5-nearest-neighbour graph: continuous coordinates (no tied
# merges), one connected component, and a constraint that changes the tree
ROLL = make_swiss_roll(300, noise=0.05, random_state=0)[0]
ROLL_GRAPH = kneighbors_graph(ROLL, 5, include_self=False)


def _children_as_sklearn_orders(children, linkage):
    # scikit-learn writes its constrained single-linkage merges in the orientation of
    # its spanning-tree edges; every other linkage, and latentlab, smaller id first
    return np.sort(children, axis=1) if linkage == "single" else children


@pytest.mark.parametrize("linkage", LINKAGES)
def test_connectivity_tree_equals_sklearn_on_a_swiss_roll(linkage):
    ref = cluster.AgglomerativeClustering(
        6, linkage=linkage, connectivity=ROLL_GRAPH, compute_distances=True
    ).fit(ROLL)
    got = latentlab.AgglomerativeClustering(
        6, linkage=linkage, connectivity=ROLL_GRAPH, compute_distances=True
    ).fit(ROLL)
    np.testing.assert_array_equal(
        got.children_, _children_as_sklearn_orders(ref.children_, linkage)
    )
    np.testing.assert_allclose(got.distances_, ref.distances_, rtol=1e-12)
    assert _same_partition(got.labels_, ref.labels_)
    assert got.n_connected_components_ == ref.n_connected_components_ == 1
    # the constraint matters: the unconstrained tree is another one -- but for single
    # linkage, whose tree is the minimum spanning tree's, which this graph holds
    free = latentlab.AgglomerativeClustering(6, linkage=linkage).fit(ROLL)
    assert np.array_equal(free.children_, got.children_) == (linkage == "single")


@pytest.mark.parametrize("linkage", LINKAGES)
def test_connectivity_on_iris_completes_its_two_components_as_sklearn(linkage):
    # iris's 10-NN graph has two components (setosa apart): both complete it with one
    # edge and warn; iris's duplicated rows tie some merges, so the merge order of
    # tied pairs may differ, but not the heights or the 3-cluster partition
    graph = kneighbors_graph(IRIS, 10, include_self=False)
    with pytest.warns(UserWarning, match="2 connected components. Completing it"):
        got = latentlab.AgglomerativeClustering(
            3, linkage=linkage, connectivity=graph, compute_distances=True
        ).fit(IRIS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = cluster.AgglomerativeClustering(
            3, linkage=linkage, connectivity=graph, compute_distances=True
        ).fit(IRIS)
    assert got.n_connected_components_ == ref.n_connected_components_ == 2
    np.testing.assert_allclose(got.distances_, ref.distances_, rtol=1e-12)
    assert _same_partition(got.labels_, ref.labels_)


def test_path_graph_tree_by_hand():
    # four points on a line joined as a path 0-1-2-3: unconstrained, 0 and 2 (1 apart)
    # would merge first; along the path 1-2 (9 apart) is the closest adjacent pair
    x = np.array([[0.0], [10.0], [1.0], [12.0]])
    path = sparse.csr_array(np.diag(np.ones(3), 1))
    expected_children = [[1, 2], [0, 4], [3, 5]]
    # single, complete and average read the edges 0-1 (10) and 2-3 (11) after 1-2
    for linkage in ("single", "complete", "average"):
        got = latentlab.AgglomerativeClustering(
            1, linkage=linkage, connectivity=path, compute_distances=True
        ).fit(x)
        np.testing.assert_array_equal(got.children_, expected_children)
        np.testing.assert_allclose(got.distances_, [9.0, 10.0, 11.0], rtol=1e-15)
    # ward: sqrt(2 n_a n_b / (n_a + n_b)) |mean_a - mean_b|; {0} joins {10, 1} *below*
    # the height of that merge (constrained heights need not increase)
    ward = latentlab.AgglomerativeClustering(1, connectivity=path, compute_distances=True).fit(x)
    np.testing.assert_array_equal(ward.children_, expected_children)
    heights = [9.0, np.sqrt(4 / 3) * 5.5, np.sqrt(6 / 4) * (12 - 11 / 3)]
    np.testing.assert_allclose(ward.distances_, heights, rtol=1e-14)
    ref = cluster.AgglomerativeClustering(1, connectivity=path, compute_distances=True).fit(x)
    np.testing.assert_allclose(ref.distances_, heights, rtol=1e-14)


@pytest.mark.parametrize("linkage", LINKAGES)
def test_complete_graph_gives_the_unconstrained_tree(linkage):
    # every pair adjacent: the heap finds SciPy's greedy closest-pair tree
    ones = np.ones((len(X), len(X)))
    got = latentlab.AgglomerativeClustering(
        4, linkage=linkage, connectivity=ones, compute_distances=True
    ).fit(X)
    Z = hierarchy.linkage(X, method=linkage)
    np.testing.assert_array_equal(got.children_, Z[:, :2].astype(int))
    np.testing.assert_allclose(got.distances_, Z[:, 2], rtol=1e-12)


@pytest.mark.parametrize("linkage", LINKAGES)
def test_early_stop_is_the_start_of_the_full_tree(linkage):
    full = latentlab.AgglomerativeClustering(
        40, linkage=linkage, connectivity=ROLL_GRAPH, compute_full_tree=True
    ).fit(ROLL)
    early = latentlab.AgglomerativeClustering(
        40, linkage=linkage, connectivity=ROLL_GRAPH, compute_full_tree=False
    ).fit(ROLL)
    assert full.children_.shape == (len(ROLL) - 1, 2)
    assert early.children_.shape == (len(ROLL) - 40, 2)
    np.testing.assert_array_equal(early.children_, full.children_[: len(ROLL) - 40])
    np.testing.assert_array_equal(early.labels_, full.labels_)
    ref = cluster.AgglomerativeClustering(
        40, linkage=linkage, connectivity=ROLL_GRAPH, compute_full_tree=False
    ).fit(ROLL)
    assert _same_partition(early.labels_, ref.labels_)


def test_compute_full_tree_auto_stops_early_for_many_clusters():
    # "auto": the full tree unless n_clusters >= max(100, 0.02 n_samples)
    few = latentlab.AgglomerativeClustering(99, connectivity=ROLL_GRAPH).fit(ROLL)
    many = latentlab.AgglomerativeClustering(100, connectivity=ROLL_GRAPH).fit(ROLL)
    assert few.children_.shape[0] == len(ROLL) - 1
    assert many.children_.shape[0] == len(ROLL) - 100
    # without a graph the whole tree is always built
    free = latentlab.AgglomerativeClustering(100, compute_full_tree=False).fit(ROLL)
    assert free.children_.shape[0] == len(ROLL) - 1


@pytest.mark.parametrize("linkage", LINKAGES)
def test_distance_threshold_with_connectivity_cuts_where_sklearn_does(linkage):
    heights = (
        cluster.AgglomerativeClustering(
            2, linkage=linkage, connectivity=ROLL_GRAPH, compute_distances=True
        )
        .fit(ROLL)
        .distances_
    )
    threshold = float(np.quantile(heights, 0.97))
    kwargs = dict(n_clusters=None, distance_threshold=threshold, linkage=linkage)
    ref = cluster.AgglomerativeClustering(connectivity=ROLL_GRAPH, **kwargs).fit(ROLL)
    got = latentlab.AgglomerativeClustering(connectivity=ROLL_GRAPH, **kwargs).fit(ROLL)
    assert got.n_clusters_ == ref.n_clusters_ > 1
    assert _same_partition(got.labels_, ref.labels_)


def test_callable_connectivity_memory_and_precomputed_metric():
    graph = partial(kneighbors_graph, n_neighbors=5, include_self=False)
    base = latentlab.AgglomerativeClustering(6, linkage="complete", connectivity=ROLL_GRAPH)
    base.fit(ROLL)
    called = latentlab.AgglomerativeClustering(6, linkage="complete", connectivity=graph)
    np.testing.assert_array_equal(called.fit(ROLL).children_, base.children_)
    # dense, with the diagonal set: the same graph
    dense = ROLL_GRAPH.toarray() + np.eye(len(ROLL))
    with_self = latentlab.AgglomerativeClustering(6, linkage="complete", connectivity=dense)
    np.testing.assert_array_equal(with_self.fit(ROLL).children_, base.children_)
    # the distances of X given directly
    D = squareform(pdist(ROLL))
    pre = latentlab.AgglomerativeClustering(
        6, linkage="complete", connectivity=ROLL_GRAPH, metric="precomputed"
    ).fit(D)
    np.testing.assert_array_equal(pre.children_, base.children_)


def test_memory_caches_the_tree(tmp_path):
    model = latentlab.AgglomerativeClustering(6, connectivity=ROLL_GRAPH, memory=str(tmp_path))
    first = model.fit(ROLL).children_.copy()
    again = model.fit(ROLL).children_
    np.testing.assert_array_equal(first, again)
    assert any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(connectivity=np.ones((10, 10))), r"connectivity must be a \(n_samples, n_samples\)"),
        (dict(connectivity=sparse.eye(4).tocsr()), r"got shape \(4, 4\)"),
        (dict(connectivity=np.ones(len(X))), "connectivity must be a"),
        (dict(connectivity=lambda X: np.ones((3, 3))), r"got shape \(3, 3\)"),
        (dict(connectivity=np.full((len(X), len(X)), np.nan)), "NaN or infinite"),
        (
            dict(n_clusters=None, distance_threshold=1.0, compute_full_tree=False),
            "compute_full_tree=False",
        ),
        (dict(compute_full_tree="yes"), "compute_full_tree"),
        (dict(connectivity="kneighbors"), "connectivity"),
        (dict(connectivity=np.ones((len(X), len(X))), metric="manhattan"), "Euclidean"),
    ],
)
def test_bad_connectivity_settings_raise_value_error(params, match):
    with pytest.raises(ValueError, match=match):
        latentlab.AgglomerativeClustering(**params).fit(X)
