"""The estimator-side helpers the embedding estimators share
(:mod:`latentlab.estimators._embedding`)."""

import pytest
from sklearn import cluster, manifold

import latentlab


@pytest.mark.parametrize(
    "ours, theirs, setting, value",
    [
        (latentlab.SpectralEmbedding, manifold.SpectralEmbedding, "affinity", "precomputed"),
        (latentlab.SpectralEmbedding, manifold.SpectralEmbedding, "affinity", "rbf"),
        (latentlab.SpectralClustering, cluster.SpectralClustering, "affinity", "precomputed"),
        (latentlab.SpectralClustering, cluster.SpectralClustering, "affinity", "rbf"),
        (latentlab.MDS, manifold.MDS, "dissimilarity", "precomputed"),
        (latentlab.MDS, manifold.MDS, "dissimilarity", "euclidean"),
        (latentlab.MDS, manifold.MDS, "metric", "precomputed"),
        (latentlab.MDS, manifold.MDS, "metric", "euclidean"),
        (
            latentlab.SpectralEmbedding,
            manifold.SpectralEmbedding,
            "affinity",
            "precomputed_nearest_neighbors",
        ),
        (
            latentlab.SpectralClustering,
            cluster.SpectralClustering,
            "affinity",
            "precomputed_nearest_neighbors",
        ),
    ],
)
def test_pairwise_tag_follows_the_precomputed_setting_like_sklearn(ours, theirs, setting, value):
    expected = theirs(**{setting: value}).__sklearn_tags__().input_tags.pairwise
    assert expected == value.startswith("precomputed")
    assert ours(**{setting: value}).__sklearn_tags__().input_tags.pairwise is expected


def test_isomap_precomputed_metric_is_pairwise():
    # scikit-learn 1.9's Isomap leaves the tag off for metric="precomputed"; X is then
    # an (n, n) distance matrix all the same, whose columns are not features
    assert latentlab.Isomap(metric="precomputed").__sklearn_tags__().input_tags.pairwise
    assert not latentlab.Isomap().__sklearn_tags__().input_tags.pairwise
    assert latentlab.Isomap().__sklearn_tags__().input_tags.sparse
