"""k-means (k-means++ seeding + Lloyd) against scikit-learn's KMeans."""

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from latentlab.closed_form.kmeans import kmeans, kmeans_plusplus

X, TRUTH = make_blobs(300, centers=4, n_features=3, cluster_std=1.5, random_state=0)


def test_lloyd_from_given_centres_equals_sklearn():
    # overlapping blobs and poor initial centres: several Lloyd steps are needed
    init = X[[0, 1, 2, 3]]
    ref = KMeans(4, init=init, n_init=1, algorithm="lloyd", tol=1e-4).fit(X)
    with jax.enable_x64(True):
        got = kmeans(jnp.asarray(X), jax.random.PRNGKey(0), n_clusters=4, init=jnp.asarray(init))
    assert int(got.n_iter) > 3
    np.testing.assert_array_equal(np.asarray(got.labels), ref.labels_)
    np.testing.assert_allclose(float(got.inertia), ref.inertia_, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got.centers), ref.cluster_centers_, rtol=1e-12)


def test_restarts_find_the_planted_clusters_and_sklearn_inertia():
    Xs, truth = make_blobs(200, centers=3, cluster_std=0.4, random_state=1)
    with jax.enable_x64(True):
        got = kmeans(jnp.asarray(Xs), jax.random.PRNGKey(3), n_clusters=3, n_init=5)
    ref = KMeans(3, n_init=5, random_state=0).fit(Xs)
    assert adjusted_rand_score(np.asarray(got.labels), truth) == 1.0
    np.testing.assert_allclose(float(got.inertia), ref.inertia_, rtol=1e-10)


def test_plusplus_seeds_are_distinct_data_points():
    with jax.enable_x64(True):
        seeds = np.asarray(kmeans_plusplus(jnp.asarray(X), jax.random.PRNGKey(0), 6))
    rows = [np.flatnonzero(np.all(X == s, axis=1)) for s in seeds]
    assert all(r.size == 1 for r in rows)
    assert len({int(r[0]) for r in rows}) == 6
