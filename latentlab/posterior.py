"""Working with posterior draws of latent-variable models.

Loadings are identified only up to rotation (the likelihood depends on W through
W W^T) and mixture components only up to relabelling, so raw posterior draws of W or
of component means are not summarisable as they are.  This module

- aligns draws to the point estimate: orthogonal Procrustes for loadings
  (:func:`align_loadings`), Hungarian matching for mixture components
  (:func:`match_components`, :func:`relabel`);
- gives rotation-invariant summaries: :func:`loading_spectrum` (the eigenvalues of
  W W^T, "explained variance" per component) and :func:`loading_covariance`
  (W W^T itself, from a DataTree);
- builds Laplace approximations in an identified, unconstrained parametrisation
  (:func:`laplace_approximation`);
- wraps ArviZ's PSIS-LOO with a clear warning when it is unreliable (:func:`loo`),
  and gives the LOO-PIT of every observed entry from whole-row weights
  (:func:`loo_pit`);
- gives credible intervals of the latent variables (:func:`latent_intervals`).

Draws come from ``estimator.sample_posterior(X, method=...)``.  The engine behind them
lives in :mod:`latentlab.inference.posterior`; this module is its public face.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from latentlab._validation import check_level
from latentlab.inference.posterior.alignment import (
    align_loadings,
    loading_covariance,
    loading_spectrum,
    match_components,
    procrustes_rotations,
    relabel,
)
from latentlab.inference.posterior.laplace import (
    GaussianDraws,
    UnconstrainedCoordinates,
    gaussian_draws,
    laplace_approximation,
)
from latentlab.inference.posterior.loo import loo, loo_pit

__all__ = [
    "procrustes_rotations",
    "align_loadings",
    "match_components",
    "relabel",
    "loading_spectrum",
    "loading_covariance",
    "UnconstrainedCoordinates",
    "GaussianDraws",
    "laplace_approximation",
    "gaussian_draws",
    "loo",
    "loo_pit",
    "LatentIntervals",
    "latent_intervals",
]


# ----------------------------------------------------------------------------- latent


class LatentIntervals(NamedTuple):
    mean: np.ndarray  # (n_samples, n_components) E[z | x]
    sd: np.ndarray  # (n_samples, n_components) posterior standard deviation
    lower: np.ndarray  # (n_samples, n_components)
    upper: np.ndarray  # (n_samples, n_components)


def latent_intervals(estimator: Any, X, level: float = 0.9) -> LatentIntervals:
    """Central credible intervals of each latent coordinate of each row.

    For the Gaussian latent models (PPCA, BayesianPCA, FactorAnalysis,
    SupervisedPCA) the posterior of z given a row's observed entries is Gaussian,
    ``N(mean, cov)`` from ``estimator.posterior_latent(X)``, so the interval of z_k is
    ``mean_k -/+ q sd_k`` with q the standard normal quantile at (1 + level) / 2.
    Plug-in: the fitted parameters are taken as known.  Intervals are per coordinate
    (marginal), in the estimator's rotation of W (``components_``).

    For mixtures the latent is the discrete component label and its posterior is the
    responsibilities themselves, ``estimator.predict_proba(X)``; there is no interval
    to give, so this raises ValueError.

    Parameters
    ----------
    estimator : fitted latentlab estimator with ``posterior_latent``.
    X : (n_samples, n_features) data; NaN marks missing entries where the model allows.
    level : float in (0, 1).

    Returns
    -------
    LatentIntervals
        ``mean``, ``sd``, ``lower``, ``upper``, each (n_samples, n_components).
    """
    from scipy.stats import norm

    level = check_level(level)
    if not hasattr(estimator, "posterior_latent"):
        if hasattr(estimator, "predict_proba"):
            raise ValueError(
                f"{type(estimator).__name__} has a discrete latent (the component label): its "
                "posterior is predict_proba(X) itself, with no interval to compute"
            )
        raise ValueError(f"{type(estimator).__name__} has no latent posterior")
    mean, cov = estimator.posterior_latent(X)
    sd = np.sqrt(np.maximum(np.diagonal(cov, axis1=1, axis2=2), 0.0))
    q = norm.ppf(0.5 + 0.5 * level)
    return LatentIntervals(mean=mean, sd=sd, lower=mean - q * sd, upper=mean + q * sd)
