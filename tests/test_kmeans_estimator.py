"""latentlab.KMeans against scikit-learn's KMeans from the same initial centres, and the
k-means++ seeding distribution against its exact probabilities."""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from sklearn import cluster
from sklearn.datasets import load_iris, load_wine, make_blobs
from sklearn.utils.estimator_checks import check_estimator

import latentlab
from latentlab.closed_form.kmeans import kmeans_plusplus, random_seeds

IRIS = load_iris().data
WINE = load_wine().data
BLOBS, BLOB_TRUTH = make_blobs(400, centers=5, n_features=4, cluster_std=2.0, random_state=3)

# check_estimator: the checks expected to fail, with why (scikit-learn's KMeans lists
# the same one as an expected failure).
WEIGHTED_SEEDING = (
    "weights change the seeding draws: k-means++ with integer weights picks other rows "
    "(and so other local optima and cluster orders) than on the repeated rows"
)
KMEANS_EXPECTED_FAILED_CHECKS: dict[str, str] = {
    "check_sample_weight_equivalence_on_dense_data": WEIGHTED_SEEDING,
    "check_sample_weight_equivalence_on_sparse_data": WEIGHTED_SEEDING,
}


def _start(X, k, seed):
    return X[np.random.default_rng(seed).choice(len(X), k, replace=False)]


@pytest.mark.parametrize("X, k", [(IRIS, 3), (WINE, 3), (BLOBS, 5)], ids=["iris", "wine", "blobs"])
def test_equals_sklearn_from_the_same_initial_centres(X, k):
    init = _start(X, k, seed=1)
    ref = cluster.KMeans(k, init=init, n_init=1, algorithm="lloyd").fit(X)
    got = latentlab.KMeans(k, init=init).fit(X)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_allclose(got.inertia_, ref.inertia_, rtol=1e-10)
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=1e-9, atol=1e-9)
    assert got.n_iter_ == ref.n_iter_
    new = X[::7] + 0.3
    np.testing.assert_array_equal(got.predict(new), ref.predict(new))
    np.testing.assert_allclose(got.transform(new), ref.transform(new), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got.score(new), ref.score(new), rtol=1e-10)
    np.testing.assert_allclose(got.score(X), -got.inertia_, rtol=1e-10)


def test_restarts_keep_the_lowest_inertia_and_find_planted_blobs():
    X, truth = make_blobs(300, centers=4, cluster_std=0.5, random_state=7)
    ref = cluster.KMeans(4, n_init=10, random_state=0).fit(X)
    for init in ("k-means++", "random"):
        got = latentlab.KMeans(4, init=init, n_init=10, random_state=0).fit(X)
        np.testing.assert_allclose(got.inertia_, ref.inertia_, rtol=1e-10)
        # the planted partition, up to renumbering
        pairs = set(zip(got.labels_.tolist(), truth.tolist(), strict=True))
        assert len(pairs) == 4
    single = [latentlab.KMeans(4, init="random", random_state=s).fit(X).inertia_ for s in range(5)]
    assert latentlab.KMeans(4, init="random", n_init=5, random_state=0).fit(X).inertia_ <= max(
        single
    )


@functools.partial(jax.jit, static_argnames=("k", "trials"))
def _plusplus_draws(X, keys, k, trials, sample_weight=None):
    return jax.vmap(lambda key: kmeans_plusplus(X, key, k, trials, sample_weight=sample_weight))(
        keys
    )


def test_plusplus_first_seed_uniform_then_squared_distance_weighted():
    # points 0, 1, 3 on a line, k=2, one candidate per step (plain k-means++): the
    # first seed is uniform, the second drawn with probability D^2 / sum D^2
    X = np.array([[0.0], [1.0], [3.0]])
    exact = {
        (0, 1): 1 / 3 * 1 / 10,
        (0, 3): 1 / 3 * 9 / 10,
        (1, 0): 1 / 3 * 1 / 5,
        (1, 3): 1 / 3 * 4 / 5,
        (3, 0): 1 / 3 * 9 / 13,
        (3, 1): 1 / 3 * 4 / 13,
    }
    n_draws = 6000
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(0), n_draws)
        seeds = np.asarray(_plusplus_draws(jnp.asarray(X), keys, 2, 1))[:, :, 0]
    observed = [np.sum((seeds[:, 0] == a) & (seeds[:, 1] == b)) for a, b in exact]
    assert sum(observed) == n_draws  # never the same point twice
    expected = n_draws * np.array(list(exact.values()))
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # and a wrong weighting (D instead of D^2) is rejected by the same test
    wrong = {(0, 1): 1 / 12, (0, 3): 1 / 4, (1, 0): 1 / 9, (1, 3): 2 / 9}
    wrong |= {(3, 0): 1 / 3 * 3 / 5, (3, 1): 1 / 3 * 2 / 5}
    wrong_expected = n_draws * np.array([wrong[p] for p in exact])
    assert stats.chisquare(observed, wrong_expected).pvalue < 1e-6


def test_weighted_plusplus_draws_with_weight_times_squared_distance():
    # scikit-learn's sample_weight: the first seed with probability w / sum w, the next
    # with w D^2 / sum w D^2; the zero-weight row (7) is never drawn
    X = np.array([[0.0], [1.0], [3.0], [7.0]])
    w = np.array([2.0, 1.0, 1.0, 0.0])
    exact = {
        (0, 1): 2 / 4 * 1 / 10,
        (0, 3): 2 / 4 * 9 / 10,
        (1, 0): 1 / 4 * 2 / 6,
        (1, 3): 1 / 4 * 4 / 6,
        (3, 0): 1 / 4 * 18 / 22,
        (3, 1): 1 / 4 * 4 / 22,
    }
    n_draws = 6000
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(2), n_draws)
        seeds = np.asarray(_plusplus_draws(jnp.asarray(X), keys, 2, 1, jnp.asarray(w)))[:, :, 0]
    observed = [np.sum((seeds[:, 0] == a) & (seeds[:, 1] == b)) for a, b in exact]
    assert sum(observed) == n_draws
    assert stats.chisquare(observed, n_draws * np.array(list(exact.values()))).pvalue > 1e-3
    # unit weights on rows 0, 1, 3 (the weights ignored) give a rejected distribution
    unweighted = np.array([1 / 30, 9 / 30, 1 / 15, 4 / 15, 9 / 39, 4 / 39])
    unweighted = unweighted / unweighted.sum()  # row 7 left out
    assert stats.chisquare(observed, n_draws * unweighted).pvalue < 1e-6


def test_plusplus_covers_tight_clusters_far_more_often_than_random_seeds():
    X, truth = make_blobs(200, centers=4, cluster_std=0.05, center_box=(-20, 20), random_state=2)
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(1), 200)
        plus = np.asarray(_plusplus_draws(jnp.asarray(X), keys, 4, 3))
        rand = np.asarray(jax.vmap(lambda key: random_seeds(jnp.asarray(X), key, 4))(keys))

    def covered(seeds):
        nearest = np.argmin(((seeds[:, :, None, :] - X[None, None]) ** 2).sum(-1), axis=-1)
        return np.mean([len(set(truth[row])) == 4 for row in nearest])

    # all four clusters: k-means++ essentially always; uniform seeds ~ 4!/4^4 ~ 10%
    assert covered(plus) >= 0.98
    assert covered(rand) <= 0.25


@pytest.mark.parametrize(
    "params, data, match",
    [
        (dict(n_clusters=11), IRIS[:10], "n_samples=10 should be >= n_clusters=11"),
        (dict(n_clusters=0), IRIS, "n_clusters"),
        (
            dict(n_clusters=2, init=np.zeros((3, 4))),
            IRIS,
            r"initial centers \(3, 4\) does not match the number of clusters 2",
        ),
        (dict(n_clusters=2, init=np.full((2, 4), np.nan)), IRIS, "init array has NaN"),
        (dict(n_clusters=2, init="kmeans"), IRIS, "Unknown init"),
        (dict(n_clusters=2, n_init=0), IRIS, "n_init"),
        (dict(n_clusters=2, tol=-1.0), IRIS, "tol"),
        (dict(n_clusters=2), np.where(IRIS > 7, np.nan, IRIS), "NaN"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(params, data, match):
    with pytest.raises(ValueError, match=match):
        latentlab.KMeans(**params).fit(data)


def test_predict_needs_the_fitted_number_of_features():
    est = latentlab.KMeans(3, random_state=0).fit(IRIS)
    with pytest.raises(ValueError, match="features"):
        est.predict(IRIS[:, :2])


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.KMeans(), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(KMEANS_EXPECTED_FAILED_CHECKS), failed


def test_an_empty_cluster_moves_to_the_farthest_row_as_sklearn():
    # the second start is far from every row: after the first assignment its cluster is
    # empty; scikit-learn moves it onto the row farthest from its centre, (5, 5)
    X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [5.0, 5.0]])
    init = np.array([[0.5, 0.5], [30.0, 30.0]])
    ref = cluster.KMeans(2, init=init, n_init=1).fit(X)
    got = latentlab.KMeans(2, init=init).fit(X)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=1e-12)
    np.testing.assert_allclose(got.inertia_, ref.inertia_, rtol=1e-12)
    assert got.inertia_ == pytest.approx(4.0 / 3.0)  # the three corners around their mean
    # from 4096 rows Lloyd prunes with bounds: the relocated centre's jump moves them
    X = np.random.RandomState(0).rand(6000, 3)
    init = np.r_[X[:3], [[50.0, 50.0, 50.0]]]
    ref = cluster.KMeans(4, init=init, n_init=1).fit(X)
    got = latentlab.KMeans(4, init=init).fit(X)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=1e-12)
    assert got.n_iter_ == ref.n_iter_
    # clusters of total weight below 1 (fractional weights) are weighted means too
    X, w, init = np.array([[0.0], [2.0], [10.0]]), np.array([0.2, 0.2, 0.3]), [[1.0], [50.0]]
    ref = cluster.KMeans(2, init=np.array(init), n_init=1).fit(X, sample_weight=w)
    got = latentlab.KMeans(2, init=init).fit(X, sample_weight=w)
    np.testing.assert_allclose(got.cluster_centers_, [[1.0], [10.0]], rtol=1e-12)
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=1e-12)
    np.testing.assert_allclose(got.inertia_, ref.inertia_, rtol=1e-12)


def test_sample_weight_equals_sklearn_and_repeated_rows():
    w = np.random.default_rng(0).integers(1, 4, len(IRIS)).astype(float)
    init = _start(IRIS, 3, seed=2)
    ref = cluster.KMeans(3, init=init, n_init=1).fit(IRIS, sample_weight=w)
    got = latentlab.KMeans(3, init=init).fit(IRIS, sample_weight=w)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=1e-10)
    np.testing.assert_allclose(got.inertia_, ref.inertia_, rtol=1e-10)
    np.testing.assert_allclose(got.score(IRIS, sample_weight=w), -got.inertia_, rtol=1e-10)
    # an integer weight is that many copies of the row (the closed form of weighting)
    repeated = latentlab.KMeans(3, init=init).fit(np.repeat(IRIS, w.astype(int), axis=0))
    np.testing.assert_allclose(got.cluster_centers_, repeated.cluster_centers_, rtol=1e-10)
    np.testing.assert_allclose(got.inertia_, repeated.inertia_, rtol=1e-10)


@pytest.mark.parametrize(
    "weights, match",
    [(np.ones(5), r"shape \(5,\)"), (-np.ones(150), "non-negative"), (np.zeros(150), "zero")],
)
def test_bad_sample_weight_raises_value_error(weights, match):
    with pytest.raises(ValueError, match=match):
        latentlab.KMeans(2).fit(IRIS, sample_weight=weights)


def test_callable_init_n_init_auto_and_the_explicit_start_warning():
    calls = []

    def first_rows(X, k, random_state):
        calls.append(random_state)
        return X[len(calls) - 1 :: 40][:k]

    got = latentlab.KMeans(3, init=first_rows, n_init="auto", random_state=0).fit(WINE)
    assert len(calls) == 10  # "auto": 10 restarts for a callable
    # the kept run is the lowest inertia of the ten starts, each run as scikit-learn's
    inertias = [
        cluster.KMeans(3, init=WINE[j::40][:3], n_init=1).fit(WINE).inertia_ for j in range(10)
    ]
    np.testing.assert_allclose(got.inertia_, min(inertias), rtol=1e-10)
    # "auto" is 10 restarts for init="random", 1 for k-means++: the same fits (on iris
    # with 6 clusters one random restart and the best of ten differ: 45.9 against 39.1)
    for init, n_init in (("random", 10), ("k-means++", 1)):
        auto = latentlab.KMeans(6, init=init, n_init="auto", random_state=5).fit(IRIS)
        explicit = latentlab.KMeans(6, init=init, n_init=n_init, random_state=5).fit(IRIS)
        np.testing.assert_array_equal(auto.cluster_centers_, explicit.cluster_centers_)
    one = latentlab.KMeans(6, init="random", n_init=1, random_state=5).fit(IRIS)
    assert (
        one.inertia_
        > latentlab.KMeans(6, init="random", n_init="auto", random_state=5).fit(IRIS).inertia_
    )
    with pytest.warns(RuntimeWarning, match="only one init"):
        latentlab.KMeans(3, init=WINE[:3], n_init=4).fit(WINE)


def test_sparse_float32_elkan_copy_x_and_verbose(capsys):
    from scipy import sparse

    X = np.where(BLOBS > 1.0, BLOBS, 0.0)
    init = _start(X, 5, seed=3)
    dense = latentlab.KMeans(5, init=init).fit(X)
    ref = cluster.KMeans(5, init=init, n_init=1).fit(sparse.csr_matrix(X))
    got = latentlab.KMeans(5, init=init, algorithm="elkan", copy_x=False, verbose=1)
    got.fit(sparse.csr_matrix(X))
    assert "Lloyd iterations" in capsys.readouterr().out
    np.testing.assert_array_equal(got.labels_, dense.labels_)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=1e-10)
    X32 = X.astype(np.float32)
    f32 = latentlab.KMeans(5, init=init).fit(X32)
    assert f32.cluster_centers_.dtype == np.float32 and f32.transform(X32).dtype == np.float32
    np.testing.assert_allclose(f32.cluster_centers_, dense.cluster_centers_, rtol=1e-6)
    with pytest.warns(RuntimeWarning, match="single cluster"):
        latentlab.KMeans(1, algorithm="elkan").fit(X)
