"""GaussianMixture's k-means starts (init_params="kmeans" and "k-means++") made by
latentlab's own k-means inside the fit program: from the same partition the start
(max_iter=0 evaluates it) is scikit-learn's, also with NaN (mean-imputed for k-means)."""

import numpy as np
import pytest
from sklearn import cluster, mixture
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

import latentlab

CENTRES = [[0.0, 0.0, 0.0, 0.0], [9.0, 9.0, 0.0, 0.0], [0.0, 9.0, 9.0, -9.0]]
# 120 rows: EM pads them to a bucket (128) with zero-weight rows, and 3 components to
# 4 with a padding component -- a k-means that counted either would move the start
BLOBS, TRUTH = make_blobs(120, centers=CENTRES, cluster_std=1.0, random_state=0)
X = BLOBS * np.array([1.0, 3.0, 0.5, 2.0])  # features on different scales
# 10% missing; on equal scales, where mean-imputed rows stay in their planted clusters
# for k-means in the data's units too (scikit-learn's), not only in EM's standardised
# units
MISSING = np.random.default_rng(0).random(X.shape) < 0.1
X_NAN = np.where(MISSING, np.nan, BLOBS)
X_IMPUTED = np.where(MISSING, np.nanmean(X_NAN, axis=0), BLOBS)


def _by_first_feature(means, *arrays):
    order = np.argsort(means[:, 0])
    return [means[order], *(a[order] for a in arrays)]


def _cluster_means(data, labels):
    return np.array([data[labels == k].mean(axis=0) for k in range(3)])


def _start(data, **settings):
    return latentlab.GaussianMixture(3, max_iter=0, reg_covar=0.0, **settings).fit(data)


@pytest.mark.parametrize("data", [X, X_IMPUTED], ids=["complete", "imputed"])
def test_planted_partition_is_what_both_kmeans_find(data):
    # the premise of the comparisons below: scikit-learn's single k-means run (on the
    # data's scale) and the planted labels agree
    labels = cluster.KMeans(3, n_init=1, random_state=0).fit(data).labels_
    assert adjusted_rand_score(labels, TRUTH) == 1.0


@pytest.mark.parametrize(
    "data, fitted, cov",
    [(X, X, "full"), (X_NAN, X_IMPUTED, "diag")],
    ids=["complete-full", "nan-diag"],
)
def test_kmeans_start_equals_sklearn_start_from_the_same_partition(data, fitted, cov):
    got = _start(data, covariance_type=cov, random_state=0)
    ref = mixture.GaussianMixture(
        3, covariance_type=cov, init_params="kmeans", max_iter=0, reg_covar=0.0, random_state=0
    ).fit(fitted)
    means, weights, covs = _by_first_feature(got.means_, got.weights_, got.covariances_)
    ref_means, ref_weights, ref_covs = _by_first_feature(ref.means_, ref.weights_, ref.covariances_)
    # closed form: the planted clusters' means and shares (of mean-imputed data for NaN)
    oracle = _by_first_feature(_cluster_means(fitted, TRUTH))[0]
    np.testing.assert_allclose(means, oracle, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(means, ref_means, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights, ref_weights, rtol=1e-12)
    np.testing.assert_allclose(covs, ref_covs, rtol=1e-10, atol=1e-12)


def test_nan_start_is_reproducible_and_em_runs_from_it():
    first = _start(X_NAN, covariance_type="diag", random_state=3)
    again = _start(X_NAN, covariance_type="diag", random_state=3)
    for name in ("weights_", "means_", "covariances_"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
    assert np.isfinite(first.lower_bound_)


def test_kmeans_plusplus_start_is_sklearns_seeding_of_the_standardised_data():
    # scikit-learn's RandomState draws, in its order: the same seed rows, in the same
    # component order, as scikit-learn's kmeans_plusplus on EM's standardised data
    got = latentlab.GaussianMixture(3, init_params="k-means++", max_iter=0, random_state=0).fit(X)
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    _, seeds = cluster.kmeans_plusplus(Z, 3, random_state=np.random.RandomState(0))
    np.testing.assert_allclose(got.means_, X[seeds], rtol=1e-12, atol=1e-12)
    assert sorted(TRUTH[seeds]) == [0, 1, 2]
    np.testing.assert_allclose(got.weights_, np.full(3, 1 / 3), rtol=1e-12)
