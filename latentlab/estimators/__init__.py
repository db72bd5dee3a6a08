"""scikit-learn style estimators over the inference engines and closed forms."""

from latentlab.estimators.agglomerative import AgglomerativeClustering
from latentlab.estimators.autoencoder import Autoencoder
from latentlab.estimators.bpca import BayesianPCA
from latentlab.estimators.cca import CCA, KernelCCA
from latentlab.estimators.cfa import ConfirmatoryFactorAnalysis
from latentlab.estimators.factor_analysis import FactorAnalysis
from latentlab.estimators.fastica import FastICA
from latentlab.estimators.gmm import GaussianMixture
from latentlab.estimators.isomap import Isomap
from latentlab.estimators.kernel_pca import KernelPCA
from latentlab.estimators.kmeans import KMeans
from latentlab.estimators.lda import LinearDiscriminantAnalysis
from latentlab.estimators.lle import LocallyLinearEmbedding
from latentlab.estimators.mds import MDS
from latentlab.estimators.nmf import NMF
from latentlab.estimators.pca import PCA
from latentlab.estimators.pls import PLSSVD, PLSCanonical, PLSRegression
from latentlab.estimators.plsa import PLSA
from latentlab.estimators.ppca import PPCA
from latentlab.estimators.random_projection import (
    GaussianRandomProjection,
    SparseRandomProjection,
    johnson_lindenstrauss_min_dim,
)
from latentlab.estimators.spectral import SpectralClustering, SpectralEmbedding
from latentlab.estimators.supervised_pca import SupervisedPCA
from latentlab.estimators.vae import VariationalAutoencoder

__all__ = [
    "PCA",
    "KernelPCA",
    "CCA",
    "KernelCCA",
    "PPCA",
    "FactorAnalysis",
    "ConfirmatoryFactorAnalysis",
    "BayesianPCA",
    "SupervisedPCA",
    "GaussianMixture",
    "PLSA",
    "PLSRegression",
    "PLSCanonical",
    "PLSSVD",
    "LinearDiscriminantAnalysis",
    "MDS",
    "GaussianRandomProjection",
    "SparseRandomProjection",
    "johnson_lindenstrauss_min_dim",
    "Isomap",
    "LocallyLinearEmbedding",
    "SpectralEmbedding",
    "SpectralClustering",
    "KMeans",
    "AgglomerativeClustering",
    "Autoencoder",
    "VariationalAutoencoder",
    "FastICA",
    "NMF",
]
