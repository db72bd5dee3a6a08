"""latentlab: latent-variable models declared once in NumPyro, fitted by jit-compiled EM,
closed forms or MAP/SVI, with a scikit-learn surface.

Importing latentlab never changes JAX's global configuration: estimators compute in
float64 inside ``jax.enable_x64(True)`` contexts of their own. Compiled programs are
kept in a persistent cache (see :func:`set_cache_dir`), set up at the first fit.

Importing latentlab is light: the estimators, :class:`Imputer` and the submodules are
imported on first use (PEP 562), because scikit-learn alone loads pandas and SciPy's
statistics (~1 s), and ArviZ, matplotlib and NumPyro's inference modules load where
they are used.
"""

import importlib

from latentlab._cache import set_cache_dir
from latentlab._config import config_context, get_config, set_config

# compare and load are light modules; compare must be bound here, not lazily, because
# importing the submodule latentlab.compare would otherwise shadow the function.
from latentlab.compare import compare
from latentlab.io import load

__version__ = "0.1.0"
# The estimators, in the order of latentlab.estimators.__all__ (a test checks that the
# two lists agree: this one is written out so that importing latentlab stays light).
_ESTIMATORS = (
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
)
__all__ = [
    *_ESTIMATORS,
    "Imputer",
    "rubin_pool",
    "rotate",
    "compare",
    "load",
    "posterior",
    "set_cache_dir",
    "set_config",
    "get_config",
    "config_context",
    "__version__",
]

# Public name -> the module that defines it, imported at first access.
_LAZY = {
    **dict.fromkeys(_ESTIMATORS, "latentlab.estimators"),
    "Imputer": "latentlab.impute",
    "rubin_pool": "latentlab.impute",
    "rotate": "latentlab.closed_form.rotation",
}
_SUBMODULES = {
    "posterior",
    "estimators",
    "impute",
    "plots",
    "psychometrics",
    "closed_form",
    "inference",
    "models",
    "cli",
}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"latentlab.{name}")
    else:
        raise AttributeError(f"module 'latentlab' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)
