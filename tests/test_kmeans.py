"""k-means (k-means++ seeding + Lloyd) against scikit-learn's KMeans."""

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.cluster import KMeans
from sklearn.cluster import kmeans_plusplus as kmeans_plusplus_sk
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from latentlab.closed_form.kmeans import (
    best_of_runs,
    kmeans,
    kmeans_plusplus,
    kmeans_plusplus_indices,
    plusplus_uniforms_size,
)

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


def test_weighted_lloyd_equals_sklearn_sample_weight():
    # row weights as scikit-learn's sample_weight, zeros included (padding rows)
    w = np.random.default_rng(1).uniform(0.0, 2.0, len(X))
    w[::10] = 0.0
    init = X[[0, 1, 2, 3]]
    ref = KMeans(4, init=init, n_init=1, algorithm="lloyd").fit(X, sample_weight=w)
    with jax.enable_x64(True):
        got = kmeans(
            jnp.asarray(X),
            jax.random.PRNGKey(0),
            n_clusters=4,
            init=jnp.asarray(init),
            sample_weight=jnp.asarray(w),
        )
    assert int(got.n_iter) == ref.n_iter_ > 3
    np.testing.assert_array_equal(np.asarray(got.labels), ref.labels_)
    np.testing.assert_allclose(float(got.inertia), ref.inertia_, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got.centers), ref.cluster_centers_, rtol=1e-12)


def test_zero_weight_rows_and_padding_centres_change_nothing():
    # GaussianMixture pads rows (weight 0) and centres (inactive) to buckets: the
    # padded run is the unpadded one, seeds included (same key, same trial count)
    padded = np.r_[X, np.full((20, 3), 50.0)]  # far away: drawn or assigned, they'd show
    weight = np.r_[np.ones(len(X)), np.zeros(20)]
    keys = jax.random.split(jax.random.PRNGKey(4), 2)
    with jax.enable_x64(True):
        plain = best_of_runs(jnp.asarray(X), keys, n_clusters=4, n_local_trials=3)
        got = best_of_runs(
            jnp.asarray(padded),
            keys,
            n_clusters=6,
            n_local_trials=3,
            sample_weight=jnp.asarray(weight),
            active=jnp.arange(6) < 4,
        )
    np.testing.assert_array_equal(np.asarray(got.labels)[: len(X)], np.asarray(plain.labels))
    np.testing.assert_array_equal(np.asarray(got.centers)[:4], np.asarray(plain.centers))
    np.testing.assert_allclose(float(got.inertia), float(plain.inertia), rtol=1e-13)
    assert int(got.n_iter) == int(plain.n_iter)


def test_bound_pruned_iterations_keep_sklearn_labels_over_many_iterations():
    # overlapping blobs and a poor start: dozens of iterations, most rows proved by
    # the bounds (not recomputed) after the first few; every label must still be the
    # plain algorithm's
    Xs, _ = make_blobs(5000, centers=8, n_features=4, cluster_std=3.0, random_state=5)
    init = Xs[:8]
    ref = KMeans(8, init=init, n_init=1, algorithm="lloyd", tol=0.0).fit(Xs)
    with jax.enable_x64(True):
        got = kmeans(
            jnp.asarray(Xs), jax.random.PRNGKey(0), n_clusters=8, init=jnp.asarray(init), tol=0.0
        )
    assert int(got.n_iter) == ref.n_iter_ > 15
    np.testing.assert_array_equal(np.asarray(got.labels), ref.labels_)
    np.testing.assert_allclose(float(got.inertia), ref.inertia_, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got.centers), ref.cluster_centers_, rtol=1e-11)


def test_plusplus_with_numpy_uniforms_gives_sklearn_seeds():
    # scikit-learn's k-means++ takes RandomState.random_sample values in this order
    k, trials = 5, 3
    uniforms = np.random.RandomState(7).random_sample(plusplus_uniforms_size(k, trials))
    _, ref = kmeans_plusplus_sk(X, k, random_state=np.random.RandomState(7), n_local_trials=trials)
    with jax.enable_x64(True):
        got = kmeans_plusplus_indices(jnp.asarray(X), None, k, trials, uniforms=uniforms)
    np.testing.assert_array_equal(np.asarray(got), ref)


def test_bound_pruned_iterations_with_row_weights_equal_sklearn():
    # fractional weights (zeros included) on the pruned route: the pruned rows' labels,
    # then the weighted sums recomputed from the blocks of every part
    Xs, _ = make_blobs(5000, centers=8, n_features=4, cluster_std=3.0, random_state=5)
    weight = np.random.default_rng(1).uniform(0.5, 2.0, len(Xs))
    weight[::7] = 0.0
    init = Xs[:8]
    ref = KMeans(8, init=init, n_init=1, algorithm="lloyd", tol=0.0).fit(Xs, sample_weight=weight)
    with jax.enable_x64(True):
        got = kmeans(
            jnp.asarray(Xs),
            jax.random.PRNGKey(0),
            n_clusters=8,
            init=jnp.asarray(init),
            tol=0.0,
            sample_weight=jnp.asarray(weight),
        )
    assert int(got.n_iter) == ref.n_iter_ > 15
    np.testing.assert_array_equal(np.asarray(got.labels), ref.labels_)
    np.testing.assert_allclose(float(got.inertia), ref.inertia_, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got.centers), ref.cluster_centers_, rtol=1e-11)
