"""scikit-learn style estimators over the inference engines and closed forms."""

from latentlab.estimators.bpca import BayesianPCA
from latentlab.estimators.cca import CCA, KernelCCA
from latentlab.estimators.factor_analysis import FactorAnalysis
from latentlab.estimators.gmm import GaussianMixture
from latentlab.estimators.kernel_pca import KernelPCA
from latentlab.estimators.pca import PCA
from latentlab.estimators.plsa import PLSA
from latentlab.estimators.ppca import PPCA
from latentlab.estimators.supervised_pca import SupervisedPCA

__all__ = [
    "PCA",
    "KernelPCA",
    "CCA",
    "KernelCCA",
    "PPCA",
    "FactorAnalysis",
    "BayesianPCA",
    "SupervisedPCA",
    "GaussianMixture",
    "PLSA",
]
