"""latentlab: latent-variable models declared once in NumPyro, fitted by jit-compiled EM,
closed forms or MAP/SVI, with a scikit-learn surface.

Importing latentlab never changes JAX's global configuration: estimators compute in
float64 inside ``jax.enable_x64(True)`` contexts of their own.
"""

from latentlab import posterior
from latentlab.compare import compare
from latentlab.estimators import (
    CCA,
    PCA,
    PLSA,
    PPCA,
    BayesianPCA,
    FactorAnalysis,
    GaussianMixture,
    KernelCCA,
    KernelPCA,
    SupervisedPCA,
)
from latentlab.impute import Imputer, rubin_pool
from latentlab.io import load

__version__ = "0.1.0"
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
    "Imputer",
    "rubin_pool",
    "compare",
    "load",
    "posterior",
    "__version__",
]
