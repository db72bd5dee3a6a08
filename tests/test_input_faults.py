"""Estimator-specific input faults a fuzzer found, each
checked on the measured case: k-means++ seeds that depended on the dtype, PLS on a
constant X, and kernel PCA silently symmetrising an asymmetric precomputed kernel.

(The faults of the shared validation -- magnitudes, masked arrays, dates, scalars --
are in test_input_validation.py.)
"""

import numpy as np
import pytest
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import load_wine
from sklearn.metrics.pairwise import rbf_kernel

import latentlab


@pytest.fixture(scope="module")
def raw_wine():
    return load_wine().data  # unscaled: proline in the thousands, hue near 1


@pytest.mark.parametrize("random_state", [0, 1, 2])
def test_kmeans_seeds_do_not_depend_on_the_dtype(raw_wine, random_state):
    # JAX's uniforms from one key differ between float32 and float64, so the two
    # precisions started from different seeds: with random_state=0 on raw wine, k=3,
    # inertia 2.63e6 in float32 against 2.37e6 in float64.  The draws are now made on
    # the host in float64, in scikit-learn's order: its seeds for the same random_state.
    f64 = latentlab.KMeans(3, random_state=random_state).fit(raw_wine)
    f32 = latentlab.KMeans(3, random_state=random_state, dtype="float32").fit(raw_wine)
    ref = SkKMeans(3, n_init=1, random_state=random_state).fit(raw_wine)
    np.testing.assert_array_equal(f32.labels_, f64.labels_)
    np.testing.assert_array_equal(f64.labels_, ref.labels_)
    assert f32.inertia_ == pytest.approx(f64.inertia_, rel=1e-5)  # float32's sum
    assert f64.inertia_ == pytest.approx(ref.inertia_, rel=1e-12)


def test_kmeans_restarts_draw_scikit_learns_seeds_in_both_precisions(raw_wine):
    f64 = latentlab.KMeans(8, n_init=3, random_state=0).fit(raw_wine)
    f32 = latentlab.KMeans(8, n_init=3, random_state=0, dtype="float32").fit(raw_wine)
    ref = SkKMeans(8, n_init=3, random_state=0).fit(raw_wine)
    np.testing.assert_array_equal(f32.labels_, f64.labels_)
    assert f64.inertia_ == pytest.approx(ref.inertia_, rel=1e-12)


@pytest.mark.parametrize("name", ["PLSRegression", "PLSCanonical"])
def test_pls_refuses_a_constant_x(name):
    # NIPALS' first weights were 0 / 0: NaN coefficients, with a convergence warning
    # (scikit-learn 1.9 fails too, with "slice 0 has a NaN entry")
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(30, 2))
    with pytest.raises(ValueError, match=r"X is constant .* no direction of X"):
        getattr(latentlab, name)(2).fit(np.ones((30, 3)), Y)
    # one constant column among others is legal (scikit-learn fits it too)
    X = np.c_[rng.normal(size=(30, 2)), np.ones(30)]
    fit = getattr(latentlab, name)(2).fit(X, Y)
    assert np.all(np.isfinite(fit.coef_))


def test_plssvd_of_a_constant_x_is_finite():
    Y = np.random.default_rng(0).normal(size=(30, 2))
    fit = latentlab.PLSSVD(2).fit(np.ones((30, 3)), Y)
    assert np.all(np.isfinite(fit.x_weights_))


def test_precomputed_kernel_pca_refuses_an_asymmetric_kernel():
    # It used to decompose (K + K^T) / 2 without a word, where MDS and the spectral
    # methods refuse an asymmetric precomputed matrix; one check now serves all three.
    rng = np.random.default_rng(3)
    K = rbf_kernel(rng.normal(size=(30, 3)), gamma=0.3)
    skewed = K + 0.01 * np.triu(np.ones_like(K), 1)
    with pytest.raises(ValueError, match=r"kernel matrix X is not symmetric \(centred\)"):
        latentlab.KernelPCA(2, kernel="precomputed").fit(skewed)
    with pytest.raises(ValueError, match=r"affinity matrix X is not symmetric"):
        latentlab.SpectralEmbedding(2, affinity="precomputed").fit(skewed)
    distances = np.sqrt(np.maximum(2.0 - 2.0 * skewed, 0.0))
    np.fill_diagonal(distances, 0.0)
    with pytest.raises(ValueError, match=r"distance matrix X is not symmetric"):
        latentlab.MDS(2, metric="precomputed").fit(distances)
    # round-off asymmetry is taken (and so is a kernel plus row and column constants,
    # whose centred form is symmetric: see test_kernel_pca.py)
    jitter = K + 1e-13 * rng.normal(size=K.shape)
    latentlab.KernelPCA(2, kernel="precomputed").fit(jitter)
