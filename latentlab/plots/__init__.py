"""The plots people expect of latent-variable models, with matplotlib.

Every function takes ``ax=None`` (a new figure when None), draws on it and returns
the Axes.  matplotlib is imported inside the functions, so ``import latentlab`` stays
light.  A model a plot cannot show is refused with a TypeError naming what it accepts.

The functions live in private modules by what they show (``_fit``: scree and
convergence; ``_latent``: latent_scatter; ``_uncertainty``: imputation and
loadings_posterior; ``_predictive``: ppc; ``_comparison``; ``_dendrogram``;
``_retention``: parallel_analysis); import them from here.
"""

from latentlab.plots._comparison import comparison
from latentlab.plots._dendrogram import dendrogram
from latentlab.plots._fit import convergence, scree
from latentlab.plots._latent import latent_scatter
from latentlab.plots._predictive import ppc
from latentlab.plots._retention import parallel_analysis
from latentlab.plots._uncertainty import imputation, loadings_posterior

__all__ = [
    "scree",
    "convergence",
    "latent_scatter",
    "imputation",
    "comparison",
    "loadings_posterior",
    "ppc",
    "dendrogram",
    "parallel_analysis",
]
