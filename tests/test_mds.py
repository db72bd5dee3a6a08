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
    "(max_iter only bounds metric='smacof')",
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
    mds = latentlab.MDS(n_components=3, dissimilarity="precomputed").fit(D)
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


def test_stress_is_kruskal_stress_1():
    mds = latentlab.MDS(n_components=2).fit(X)
    fitted = pairwise_distances(mds.embedding_)
    expected = np.sqrt(np.sum((D - fitted) ** 2) / np.sum(D**2))
    np.testing.assert_allclose(mds.stress_, expected, rtol=1e-10)


def test_smacof_never_increases_stress_on_non_euclidean_distances():
    D_bent = D**0.7  # a power of a metric: not Euclidean
    classical = latentlab.MDS(n_components=2, dissimilarity="precomputed").fit(D_bent)
    refined = latentlab.MDS(n_components=2, dissimilarity="precomputed", metric="smacof").fit(
        D_bent
    )
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
        latentlab.MDS(dissimilarity="precomputed").fit(D_bad)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_components": 61}, "n_components=61 is out of range"),
        ({"metric": "precomputed"}, "use dissimilarity='precomputed'"),
        ({"metric": "nonmetric"}, "Unknown metric"),
        ({"n_landmarks": 1}, "n_landmarks"),
        ({"metric": "smacof", "n_landmarks": 10}, "only available with metric='classical'"),
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
