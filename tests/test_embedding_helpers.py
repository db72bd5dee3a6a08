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
    ],
)
def test_pairwise_tag_follows_the_precomputed_setting_like_sklearn(ours, theirs, setting, value):
    expected = theirs(**{setting: value}).__sklearn_tags__().input_tags.pairwise
    assert expected == (value == "precomputed")
    assert ours(**{setting: value}).__sklearn_tags__().input_tags.pairwise is expected
