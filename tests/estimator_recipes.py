"""Small data and a fitting recipe for every estimator latentlab exports, shared by the
tests that must cover each of them (save/load round trips, output ownership)."""

import inspect

import numpy as np
from sklearn.base import BaseEstimator

import latentlab

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 4)) @ RNG.normal(size=(4, 4)) + 3.0
Y = np.c_[X[:, 0] - X[:, 1], X[:, 2] ** 2] + 0.3 * RNG.normal(size=(40, 2))
y = X @ np.array([1.0, -0.5, 0.2, 0.0]) + 0.1 * RNG.normal(size=40)
COUNTS = RNG.poisson(2.0, size=(30, 12)).astype(float)
COUNTS[COUNTS.sum(axis=1) == 0, 0] = 1
X_MISSING = X.copy()
X_MISSING[::5, 1] = np.nan
LABELS = (X[:, 0] > np.median(X[:, 0])).astype(int) + (X[:, 1] > np.median(X[:, 1]))

# class name -> (constructor settings, fit arguments, arguments of each method)
DEFAULT_CALLS = {
    "transform": (X,),
    "score_samples": (X,),
    "score": (X,),
    "predict": (X,),
    "predict_proba": (X,),
}
RECIPES = {
    "PCA": (dict(n_components=2), (X,), {"transform": (X,)}),
    "KernelPCA": (
        dict(n_components=3, kernel="rbf", gamma=0.2, fit_inverse_transform=True, alpha=0.1),
        (X,),
        {"transform": (X,)},
    ),
    "CCA": (dict(n_components=2), (X, Y), {"transform": (X, Y), "score": (X, Y)}),
    "KernelCCA": (dict(n_components=2, reg=0.1), (X, Y), {"transform": (X, Y)}),
    "PLSRegression": (dict(n_components=2), (X, Y), {"transform": (X, Y), "score": (X, Y)}),
    "PLSCanonical": (dict(n_components=2), (X, Y), {"transform": (X, Y), "score": (X, Y)}),
    "PLSSVD": (dict(n_components=2), (X, Y), {"transform": (X, Y)}),
    "PPCA": (dict(n_components=2, random_state=0), (X,), {"transform": (X,)}),
    # one factor: the most 4 features identify (the Ledermann bound)
    "FactorAnalysis": (dict(n_components=1, random_state=0), (X,), {"transform": (X,)}),
    "ConfirmatoryFactorAnalysis": (
        dict(pattern={"f": [0, 1, 2, 3]}),
        (X,),
        {"transform": (X,)},
    ),
    "BayesianPCA": (dict(n_components=3, random_state=0), (X,), {"transform": (X,)}),
    "SupervisedPCA": (
        dict(n_components=2, random_state=0),
        (X, y),
        {"transform": (X,), "score": (X, y), "score_samples": (X, y)},
    ),
    "GaussianMixture": (dict(n_components=2, random_state=0), (X,), {}),
    "PLSA": (
        dict(n_components=2, random_state=0),
        (COUNTS,),
        {"transform": (COUNTS,), "score_samples": (COUNTS,), "score": (COUNTS,)},
    ),
    "LinearDiscriminantAnalysis": (
        dict(solver="eigen", shrinkage="auto"),
        (X, LABELS),
        {"transform": (X,), "score": (X, LABELS)},
    ),
    "MDS": (dict(n_components=2), (X,), {"transform": (X[:5] + 0.1,)}),
    "GaussianRandomProjection": (dict(n_components=3, random_state=0), (X,), {}),
    "SparseRandomProjection": (
        dict(n_components=3, density=0.5, compute_inverse_components=True, random_state=0),
        (X,),
        {},
    ),
    "Isomap": (dict(n_neighbors=8, n_components=2), (X,), {"transform": (X[:5] + 0.1,)}),
    "LocallyLinearEmbedding": (
        dict(n_neighbors=8, n_components=2),
        (X,),
        {"transform": (X[:5] + 0.1,)},
    ),
    "SpectralEmbedding": (dict(n_components=2, affinity="rbf", gamma=0.05), (X,), {}),
    "SpectralClustering": (dict(n_clusters=2, gamma=0.05, random_state=0), (X,), {}),
    "KMeans": (dict(n_clusters=3, n_init=2, random_state=0), (X,), {}),
    "AgglomerativeClustering": (dict(n_clusters=3, linkage="average"), (X,), {}),
    "Autoencoder": (
        dict(n_components=2, hidden_layer_sizes=(3,), max_iter=20, random_state=0),
        (X,),
        {},
    ),
    "VariationalAutoencoder": (
        dict(n_components=2, svi_steps=50, elbo_particles=5, random_state=0),
        (X,),
        {},
    ),
    "NMF": (dict(n_components=2, random_state=0), (COUNTS,), {"transform": (COUNTS,)}),
    "FastICA": (dict(n_components=3, random_state=0), (X,), {}),
}


def exported_estimators():
    return sorted(
        name
        for name in latentlab.__all__
        if inspect.isclass(getattr(latentlab, name))
        and issubclass(getattr(latentlab, name), BaseEstimator)
    )
