"""latentlab: latent-variable models declared once in NumPyro, fitted by jit-compiled EM,
closed forms or MAP/SVI, with a scikit-learn surface.

Importing latentlab never changes JAX's global configuration: estimators compute in
float64 inside ``jax.enable_x64(True)`` contexts of their own.
"""

from latentlab.estimators import (
    CCA,
    PCA,
    PPCA,
    BayesianPCA,
    FactorAnalysis,
    GaussianMixture,
    KernelCCA,
    KernelPCA,
    SupervisedPCA,
)
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
    "load",
    "__version__",
]
