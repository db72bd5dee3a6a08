"""Imputation by a fitted Gaussian latent model: conditional means and standard
deviations of the missing entries, their intervals, the common mixture form, and
multiple-imputation draws (z from its posterior, then x_miss given z)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._validation import check_level, check_positive_int
from latentlab.estimators._gaussian_latent_programs import (
    _chunked_outputs,
    _conditional_missing,
    _padded,
)
from latentlab.inference.chunked import is_dask
from latentlab.models.gaussian_latent import draw_rows

__all__ = ["GaussianImputationMixin"]


class GaussianImputationMixin:
    """``impute`` and its relatives for :class:`GaussianLatentEstimator` (which
    supplies ``_observed``, ``_arrays``, ``_centred`` and ``_posterior``)."""

    def impute(self, X, *, return_std: bool = False):
        """Fill NaN entries with their conditional mean given the row's observed entries.

        Observed entries are returned unchanged.  With ``return_std=True`` also returns
        the conditional standard deviation of each entry (0 where observed).  A Dask
        array gives Dask arrays.
        """
        if is_dask(X):
            check_is_fitted(self)
            return _chunked_outputs().map_imputation(self, X, return_std)
        X, mask = self._observed(X, allow_empty_rows=True)
        with self._precision():
            filled, var, _, _ = _padded(
                _conditional_missing, *self._arrays(len(X)), X=self._centred(X, mask), mask=mask
            )
        std = np.sqrt(var)
        # un-centre in float64; observed entries bit-exact
        filled = np.where(mask > 0, X, filled + self.params_["mu"])
        return (filled, std) if return_std else filled

    def conditional_mixture(self, X):
        """Each entry's distribution given its row's observed entries, as a mixture
        ``sum_c weights[n, c] N(means[n, c, j], sds[n, c, j]^2)`` with one component:
        ``weights`` (n, 1) ones, ``means`` and ``sds`` (n, 1, d), sd 0 where observed.
        (The common form of every imputing model; mixtures have K components.)"""
        mean, std = self.impute(X, return_std=True)
        return np.ones((mean.shape[0], 1)), mean[:, None, :], std[:, None, :]

    def impute_interval(self, X, level: float = 0.9):
        """Central ``level`` interval of each missing entry given the row's observed ones.

        The conditional distribution is Gaussian, so the interval is the conditional
        mean -/+ z * sd.  Plug-in: parameter uncertainty is not included.  Returns
        ``(lower, upper)``, each (n_samples, n_features); both equal X where observed.
        """
        from scipy.stats import norm

        z = norm.ppf(0.5 + 0.5 * check_level(level))
        filled, std = self.impute(X, return_std=True)
        return filled - z * std, filled + z * std

    def sample_imputations(self, X, n_imputations: int = 5, random_state=None) -> np.ndarray:
        """Multiple imputation: draws of the missing entries from p(x_miss | x_obs).

        Draws z from its posterior, then the missing coordinates given z, so their
        correlations are kept.  Returns shape (n_imputations, n_samples, n_features).
        """
        check_positive_int("n_imputations", n_imputations)
        X, mask = self._observed(X, allow_empty_rows=True)
        z_mean, z_cov = self._posterior(X, mask)
        rng = check_random_state(random_state)
        W, mu, noise = self.params_["W"], self.params_["mu"], self._noise_variance_vector()
        draws = np.empty((n_imputations, *X.shape))
        for m in range(n_imputations):
            draws[m] = np.where(mask > 0, X, draw_rows(z_mean, z_cov, W, mu, noise, rng))
        return draws
