"""latentlab.AgglomerativeClustering against SciPy's linkage and scikit-learn's labels."""

import warnings

import numpy as np
import pytest
from scipy.cluster import hierarchy
from sklearn import cluster
from sklearn.datasets import load_iris, make_blobs
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
    got = latentlab.AgglomerativeClustering(4, linkage=method).fit(X)
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
        (dict(n_clusters=2, distance_threshold=1.0), X, "exactly one"),
        (dict(n_clusters=None), X, "exactly one"),
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
    got = latentlab.AgglomerativeClustering(4, metric=metric, linkage=linkage).fit(data)
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
