"""Classical MDS against PCA (its closed form for Euclidean distances), the landmark
formula, SMACOF's monotone stress, and bad distance matrices."""

import warnings

import jax
import numpy as np
import pytest
from sklearn.decomposition import PCA as SkPCA
from sklearn.manifold import ClassicalMDS
from sklearn.metrics import pairwise_distances
from sklearn.utils.estimator_checks import check_estimator

import latentlab
from latentlab.closed_form import mds as cf

RNG = np.random.default_rng(0)
# far from the origin, anisotropic: squared distances must not cancel
X = RNG.normal(size=(60, 5)) * [3.0, 2.0, 1.0, 0.5, 0.1] + 100.0
X_NEW = RNG.normal(size=(7, 5)) * [3.0, 2.0, 1.0, 0.5, 0.1] + 100.0
D = pairwise_distances(X)

MDS_EXPECTED_FAILED_CHECKS = {
    "check_transformer_n_iter": "classical MDS is one eigendecomposition: n_iter_ is 0 "
    "(max_iter only bounds algorithm='smacof')",
}


def _up_to_sign(A, B):
    return A * np.sign(np.sum(A * B, axis=0))


@pytest.fixture(scope="module")
def classical():
    return latentlab.MDS(n_components=3).fit(X)


def test_euclidean_mds_equals_pca_scores(classical):
    scores = SkPCA(n_components=3).fit_transform(X)
    np.testing.assert_allclose(_up_to_sign(classical.embedding_, scores), scores, atol=1e-8)
    # eigenvalues of B are the PCA scatter: (n - 1) times the ddof=1 variances
    variance = SkPCA(n_components=3).fit(X).explained_variance_
    np.testing.assert_allclose(classical.eigenvalues_, (len(X) - 1) * variance, rtol=1e-10)


def test_out_of_sample_transform_is_the_pca_projection(classical):
    np.testing.assert_allclose(classical.transform(X), classical.embedding_, atol=1e-10)
    pca = SkPCA(n_components=3).fit(X)
    expected = pca.transform(X_NEW)
    signs = np.sign(np.sum(classical.embedding_ * pca.transform(X), axis=0))
    np.testing.assert_allclose(classical.transform(X_NEW) * signs, expected, atol=1e-8)


def test_precomputed_distances_give_the_same_fit(classical):
    mds = latentlab.MDS(n_components=3, metric="precomputed").fit(D)
    np.testing.assert_allclose(mds.embedding_, classical.embedding_, atol=1e-9)
    np.testing.assert_allclose(mds.transform(D), classical.embedding_, atol=1e-9)
    np.testing.assert_allclose(
        mds.transform(pairwise_distances(X_NEW, X)), classical.transform(X_NEW), atol=1e-9
    )
    # scikit-learn's ClassicalMDS, up to sign
    theirs = ClassicalMDS(n_components=3, metric="precomputed").fit(D)
    np.testing.assert_allclose(
        _up_to_sign(mds.embedding_, theirs.embedding_), theirs.embedding_, atol=1e-8
    )


def test_lanczos_solver_equals_dense(classical):
    mds = latentlab.MDS(n_components=3, eigen_solver="lanczos", random_state=0).fit(X)
    assert mds.eigen_solver_ == "lanczos"
    np.testing.assert_allclose(mds.eigenvalues_, classical.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(
        _up_to_sign(mds.embedding_, classical.embedding_), classical.embedding_, atol=1e-8
    )


def test_landmark_mds_with_all_points_equals_classical(classical):
    landmark = latentlab.MDS(n_components=3, n_landmarks=len(X), random_state=0).fit(X)
    np.testing.assert_allclose(
        _up_to_sign(landmark.embedding_, classical.embedding_), classical.embedding_, atol=1e-9
    )


def test_landmark_mds_recovers_euclidean_configuration():
    """Data of rank 5: 10 landmarks in general position pin every point down, so the
    landmark embedding reproduces all pairwise distances (de Silva & Tenenbaum 2004)."""
    mds = latentlab.MDS(n_components=5, n_landmarks=10, random_state=1).fit(X)
    assert len(mds.landmarks_) == 10
    np.testing.assert_allclose(pairwise_distances(mds.embedding_), D, atol=1e-8)
    assert mds.stress_ < 1e-10


@pytest.mark.parametrize("normalized", ["auto", False, True])
def test_stress_is_raw_stress_or_kruskal_stress_1(normalized):
    mds = latentlab.MDS(n_components=2, normalized_stress=normalized).fit(X)
    fitted = pairwise_distances(mds.embedding_)
    raw = np.sum((D - fitted) ** 2) / 2  # over pairs i < j
    # Kruskal's stress-1: the configuration's distances in the denominator
    expected = np.sqrt(raw / (np.sum(fitted**2) / 2)) if normalized is True else raw
    assert expected > 1.0 if normalized is not True else 0.01 < expected < 1.0
    np.testing.assert_allclose(mds.stress_, expected, rtol=1e-10)


def test_smacof_never_increases_stress_on_non_euclidean_distances():
    D_bent = D**0.7  # a power of a metric: not Euclidean
    classical = latentlab.MDS(n_components=2, metric="precomputed").fit(D_bent)
    refined = latentlab.MDS(n_components=2, metric="precomputed", algorithm="smacof").fit(D_bent)
    assert refined.n_iter_ >= 1
    assert refined.stress_ < classical.stress_
    with jax.enable_x64(True):
        raw = [
            float(cf.smacof(D_bent, classical.embedding_, 0.0, max_iter=k).raw_stress)
            for k in (1, 2, 5, 20)
        ]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(raw, raw[1:], strict=False)), raw


def test_classical_mds_function_matches_the_estimator(classical):
    """The function Isomap reuses: squared distances in, configuration out."""
    with jax.enable_x64(True):
        fit = cf.classical_mds(D**2, n_components=3)
    np.testing.assert_allclose(np.asarray(fit.embedding), classical.embedding_, atol=1e-9)


@pytest.mark.parametrize(
    ("D_bad", "match"),
    [
        (D[:, :-1], "square"),
        (D + np.triu(np.full_like(D, 0.5), 1), "not symmetric"),
        (np.where(np.eye(len(D)) == 1, 0.0, D - 5.0), "negative"),
        (np.where(np.arange(len(D))[:, None] == 3, np.nan, D), "NaN"),
        (D + np.eye(len(D)), "diagonal"),
    ],
)
def test_bad_distance_matrices_name_the_problem(D_bad, match):
    with pytest.raises(ValueError, match=match):
        latentlab.MDS(metric="precomputed").fit(D_bad)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_components": 61}, "n_components=61 is out of range"),
        ({"metric": "precomputed"}, "square"),
        ({"metric": "nonmetric"}, "Unknown metric 'nonmetric'"),
        ({"n_landmarks": 1}, "n_landmarks"),
        ({"algorithm": "smacof", "n_landmarks": 10}, "only available with algorithm='classical'"),
        ({"algorithm": "classical", "metric_mds": False}, "needs algorithm='smacof'"),
        ({"metric": "cosine", "dissimilarity": "euclidean"}, "provided both"),
        ({"n_init": 0}, "n_init"),
        ({"normalized_stress": "yes"}, "normalized_stress"),
    ],
)
def test_bad_settings_name_the_problem(params, match):
    with pytest.raises(ValueError, match=match):
        latentlab.MDS(**params).fit(X)


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.MDS(), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(MDS_EXPECTED_FAILED_CHECKS), failed


def _disparity(A, B):
    """Procrustes disparity of two configurations (0: equal up to rotation, scale)."""
    from scipy.spatial import procrustes

    return procrustes(A, B)[2]


@pytest.mark.parametrize("metric_mds", [True, False])
def test_smacof_from_a_given_start_matches_sklearns_smacof(metric_mds):
    """The same start and the same number of Guttman transforms: scikit-learn's SMACOF
    (metric, or non-metric with Kruskal's monotone regression) lands on the same
    configuration."""
    from sklearn.manifold import smacof

    D_bent = D**0.7
    start = np.random.default_rng(3).normal(size=(len(D), 2))
    ours = latentlab.MDS(
        n_components=2,
        metric="precomputed",
        metric_mds=metric_mds,
        algorithm="smacof",
        max_iter=8,
        eps=0.0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged in 8 steps
        Y = ours.fit_transform(D_bent, init=start)
    theirs, stress = smacof(
        D_bent,
        metric=metric_mds,
        init=start,
        n_init=1,
        max_iter=8,
        eps=0.0,
        normalized_stress=not metric_mds,
    )
    assert ours.n_iter_ == 8
    np.testing.assert_allclose(Y, theirs - theirs.mean(axis=0), atol=1e-8)
    if metric_mds:
        np.testing.assert_allclose(ours.stress_, stress, rtol=1e-6)
    else:
        # scikit-learn returns the stress against the disparities of the step before;
        # ours is that of the final configuration against its own disparities
        from scipy.spatial.distance import pdist, squareform
        from sklearn.isotonic import IsotonicRegression

        e, d = pdist(Y), squareform(D_bent, checks=False)
        dhat = IsotonicRegression().fit_transform(d, e)
        dhat *= np.sqrt(len(d) / np.sum(dhat**2))
        expected = np.sqrt(np.sum((e - dhat) ** 2) / np.sum(e**2))
        np.testing.assert_allclose(ours.stress_, expected, rtol=1e-10)
        assert abs(ours.stress_ - stress) < 1e-3 * stress  # one step apart


@pytest.mark.filterwarnings("ignore:MDS SMACOF did not converge")
def test_nonmetric_mds_recovers_a_monotone_transform_of_euclidean_distances():
    """Non-metric MDS fits only the order of the dissimilarities: for an increasing
    transform of Euclidean distances in 2-D the planar configuration is recovered (up
    to similarity), which metric MDS of the bent distances does not."""
    Z = RNG.normal(size=(40, 2))
    D_mono = np.exp(pairwise_distances(Z)) - 1.0
    nonmetric = latentlab.MDS(
        n_components=2, metric="precomputed", metric_mds=False, max_iter=3000, eps=1e-12
    ).fit(D_mono)
    metric = latentlab.MDS(n_components=2, metric="precomputed").fit(D_mono)
    assert nonmetric.n_iter_ > 1
    assert _disparity(Z, nonmetric.embedding_) < 1e-3
    assert _disparity(Z, metric.embedding_) > 10 * _disparity(Z, nonmetric.embedding_)
    assert nonmetric.stress_ < 0.01  # stress-1 by default for non-metric MDS
    with pytest.raises(ValueError, match="not available after non-metric MDS"):
        nonmetric.transform(D_mono[:3])


@pytest.mark.filterwarnings("ignore:MDS SMACOF did not converge")
def test_random_starts_keep_the_best_of_n_init():
    D_bent = D**0.5
    settings = dict(metric="precomputed", algorithm="smacof", init="random", random_state=0)
    stresses = [
        latentlab.MDS(n_components=2, n_init=k, **settings).fit(D_bent).stress_ for k in (1, 2, 6)
    ]
    # the same generator: n_init=6's starts include n_init=1's and n_init=2's
    assert stresses[2] <= stresses[1] <= stresses[0]
    assert stresses[2] < stresses[0]


@pytest.mark.parametrize("metric", ["manhattan", "cosine"])
def test_other_metrics_match_sklearns_classical_mds(metric):
    ours = latentlab.MDS(n_components=2, metric=metric).fit(X)
    theirs = ClassicalMDS(n_components=2, metric=metric).fit(X)
    np.testing.assert_allclose(
        _up_to_sign(ours.embedding_, theirs.embedding_), theirs.embedding_, atol=1e-8
    )
    np.testing.assert_allclose(ours.transform(X), ours.embedding_, atol=1e-8)
    # the same as the precomputed distances of that metric
    D_metric = pairwise_distances(X, metric=metric)
    pre = latentlab.MDS(n_components=2, metric="precomputed").fit(D_metric)
    np.testing.assert_allclose(pre.embedding_, ours.embedding_, atol=1e-9)
    np.testing.assert_allclose(
        ours.transform(X_NEW),
        pre.transform(pairwise_distances(X_NEW, X, metric=metric)),
        atol=1e-9,
    )


@pytest.mark.filterwarnings("ignore:MDS SMACOF did not converge")
def test_deprecated_spellings_still_work_with_a_future_warning(classical):
    with pytest.warns(FutureWarning, match="use algorithm='smacof'"):
        old = latentlab.MDS(n_components=3, metric="smacof", max_iter=5).fit(X)
    new = latentlab.MDS(n_components=3, algorithm="smacof", max_iter=5).fit(X)
    np.testing.assert_allclose(old.embedding_, new.embedding_)
    with pytest.warns(FutureWarning, match="dissimilarity"):
        old = latentlab.MDS(n_components=3, dissimilarity="precomputed").fit(D)
    np.testing.assert_allclose(old.embedding_, classical.embedding_, atol=1e-9)
    with pytest.warns(FutureWarning, match="Use metric_mds"):
        latentlab.MDS(n_components=2, metric=False, max_iter=5).fit(X)
    with pytest.raises(ValueError, match="shape"):
        latentlab.MDS(n_components=2, algorithm="smacof").fit(X, init=np.zeros((3, 2)))


@pytest.mark.parametrize("algorithm", ["classical", "smacof"])
def test_float32_data_give_float64_embedding_as_sklearn(algorithm):
    # scikit-learn's MDS and ClassicalMDS do not keep float32 (their embedding_ and
    # eigenvalues_ are float64 for float32 data); ours neither, and the fit is the one
    # of the float64 values float32 holds
    X32 = X.astype(np.float32)
    reference = ClassicalMDS(n_components=2) if algorithm == "classical" else None
    settings = dict(n_components=2, algorithm=algorithm, random_state=0)
    ours = latentlab.MDS(**settings).fit(X32)
    exact = latentlab.MDS(**settings).fit(X32.astype(np.float64))
    if reference is not None:
        assert reference.fit(X32).embedding_.dtype == np.float64
    assert ours.embedding_.dtype == np.float64
    np.testing.assert_array_equal(ours.embedding_, exact.embedding_)
    assert ours.transform(X_NEW.astype(np.float32)).dtype == np.float64
