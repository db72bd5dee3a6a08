"""Imputation by a fitted Gaussian latent model: conditional means and standard
deviations of the missing entries, their intervals, the common mixture form, and
multiple-imputation draws (z from its posterior, then x_miss given z).

Pure functions of the fitted arrays; :class:`GaussianLatentEstimator`'s ``impute``,
``impute_interval``, ``conditional_mixture`` and ``sample_imputations`` call them.
"""

from __future__ import annotations

import numpy as np

from latentlab._validation import check_level
from latentlab.estimators._gaussian_latent_programs import _conditional_missing, _padded
from latentlab.models.gaussian_latent import draw_rows

__all__ = ["conditional_fill", "central_quantile", "mixture_form", "draw_imputations"]


def conditional_fill(arrays, X, mask, mean):
    """Each entry's conditional mean and sd given its row's observed entries.

    ``arrays`` are the estimator's ``(W, 0, noise precision)`` (padded, see
    ``GaussianLatentEstimator._arrays``), ``X`` (n, d) with 0 where ``mask`` is 0,
    ``mean`` the fitted mean.  Returns ``(filled, std)``: observed entries of X
    bit-exact with sd 0.  Runs inside the estimator's precision.
    """
    centred = np.where(mask > 0, X - mean, 0.0)  # in float64 on the host
    filled, var, _, _ = _padded(_conditional_missing, *arrays, X=centred, mask=mask)
    std = np.sqrt(var)
    # un-centre in float64; observed entries bit-exact
    return np.where(mask > 0, X, filled + mean), std


def mixture_form(mean, std):
    """The one-component mixture ``(weights (n, 1), means (n, 1, d), sds (n, 1, d))``."""
    return np.ones((mean.shape[0], 1)), mean[:, None, :], std[:, None, :]


def central_quantile(level):
    """z with ``mean -/+ z * sd`` the central ``level`` interval of a Gaussian."""
    from scipy.stats import norm

    return norm.ppf(0.5 + 0.5 * check_level(level))


def draw_imputations(X, mask, z_mean, z_cov, W, mu, noise, n_imputations, rng):
    """``n_imputations`` draws of the missing entries (n_imputations, n, d): z from its
    posterior ``(z_mean, z_cov)``, then x given z; observed entries kept."""
    draws = np.empty((n_imputations, *X.shape))
    for m in range(n_imputations):
        draws[m] = np.where(mask > 0, X, draw_rows(z_mean, z_cov, W, mu, noise, rng))
    return draws
