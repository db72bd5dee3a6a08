"""Missing-data imputation as a workflow: :class:`Imputer` and Rubin's rules.

:class:`Imputer` wraps any latentlab model that fits NaN by its exact observed-data
likelihood (PPCA, Bayesian PCA, factor analysis, Gaussian mixtures), chooses one by
held-out likelihood of masked entries if asked, and fills in, gives uncertainties
and draws multiple imputations in the data's own units.  :func:`rubin_pool` combines
an analysis repeated on each imputation.

Everything here assumes the entries are missing at random (MAR): whether an entry
is missing may depend on the observed entries of its row but not on its own value.

Modules: :mod:`~latentlab.impute.imputer` (the class), :mod:`~latentlab.impute.search`
(families, candidate grids, held-out scoring, the selection table),
:mod:`~latentlab.impute.calibration` (intervals, conformal calibration, bootstrap
refits), :mod:`~latentlab.impute.frames` (input checks, standardisation, DataFrames
out) and :mod:`~latentlab.impute.pooling` (Rubin's rules).  The helpers exported
here (:func:`family_class`, :func:`max_components`, :func:`progress`) are what the
command line builds its model comparisons from.
"""

from latentlab.impute.calibration import mixture_interval
from latentlab.impute.imputer import Imputer
from latentlab.impute.pooling import PooledEstimate, rubin_pool
from latentlab.impute.search import (
    AUTO_MIXTURES,
    FAMILIES,
    MIXTURE_GRID,
    MODELS,
    RANK_GRID,
    SEARCH_TOL,
    default_candidates,
    family_class,
    gmm_supports_missing,
    max_components,
    progress,
)

__all__ = [
    "Imputer",
    "rubin_pool",
    "PooledEstimate",
    "FAMILIES",
    "MODELS",
    "RANK_GRID",
    "MIXTURE_GRID",
    "AUTO_MIXTURES",
    "SEARCH_TOL",
    "default_candidates",
    "family_class",
    "max_components",
    "gmm_supports_missing",
    "mixture_interval",
    "progress",
]
