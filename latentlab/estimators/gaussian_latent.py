"""Estimator surface shared by the Gaussian latent models (PPCA, and later FA, BPCA, SPCA).

A subclass fits ``params_`` (with loadings ``W`` (d, K) and mean ``mu`` (d,)) and
says what its per-coordinate noise variance is; everything a user asks of the fitted
model -- scores, the posterior of z, imputation, sampling, covariances -- follows
from the marginal N(mu, W W^T + Psi) and lives here once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._validation import check_data, check_no_empty_columns, check_no_empty_rows
from latentlab.estimators.base import GenerativeMixin, LatentEstimator, to_numpy
from latentlab.models.gaussian_latent import conditional_missing, row_posteriors

__all__ = ["GaussianLatentEstimator"]

_row_posteriors = jax.jit(row_posteriors)
_conditional_missing = jax.jit(conditional_missing)


def _bucket(n: int) -> int:
    """Row count rounded up to a power of two (at least 32): one compile per bucket."""
    return max(32, 1 << (n - 1).bit_length())


def _padded(fn, *arrays_before, X, mask):
    """Call a jitted row-wise ``fn`` on rows padded to a bucket, then drop the padding."""
    n = X.shape[0]
    pad = _bucket(n) - n
    Xp = np.concatenate([X, np.zeros((pad, X.shape[1]))])
    mp = np.concatenate([mask, np.zeros((pad, X.shape[1]))])
    out = fn(*arrays_before, Xp, mp)
    return tuple(to_numpy(a)[:n] for a in out)


class GaussianLatentEstimator(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, GenerativeMixin, LatentEstimator
):
    """Shared methods; subclasses implement ``fit`` and ``_noise_variance_vector``."""

    def _noise_variance_vector(self) -> np.ndarray:
        raise NotImplementedError

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # -- fitted quantities ------------------------------------------------------------

    @property
    def _n_features_out(self):
        return self.n_components_

    def _arrays(self):
        """(W, mu, noise precision) as JAX arrays in the estimator's precision."""
        check_is_fitted(self)
        W = jnp.asarray(self.params_["W"])
        mu = jnp.asarray(self.params_["mu"])
        precision = 1.0 / jnp.asarray(self._noise_variance_vector())
        return W, mu, precision

    def _validate_for_fit(self, X):
        """Validate training data: returns ``(X, mask, column_means)``.

        ``mask`` is None for complete data.  ``check_data`` has already refused
        infinities, so a non-finite column mean means a NaN: complete data never pay
        for building a mask.
        """
        X = check_data(self, X, reset=True, allow_nan=True, min_samples=2)
        shift = X.mean(axis=0)
        if np.all(np.isfinite(shift)):
            return X, None, shift
        mask = ~np.isnan(X)
        check_no_empty_rows(mask)
        check_no_empty_columns(mask)
        shift = np.where(mask, X, 0.0).sum(axis=0) / mask.sum(axis=0)
        return X, mask, shift

    def _observed(self, X, *, allow_empty_rows: bool):
        X = check_data(self, X, reset=False, allow_nan=True)
        mask = ~np.isnan(X)
        if not allow_empty_rows:
            check_no_empty_rows(mask)
        return np.where(mask, X, 0.0), mask.astype(np.float64)

    def get_covariance(self) -> np.ndarray:
        """Model covariance of x: ``W W^T + Psi``, shape (n_features, n_features)."""
        check_is_fitted(self)
        W = self.params_["W"]
        return W @ W.T + np.diag(self._noise_variance_vector())

    def get_precision(self) -> np.ndarray:
        """Inverse model covariance by the Woodbury identity (O(d^2 K))."""
        check_is_fitted(self)
        W = self.params_["W"]
        psi_inv = 1.0 / self._noise_variance_vector()
        M = np.eye(W.shape[1]) + (W.T * psi_inv) @ W
        B = np.linalg.solve(M, W.T * psi_inv)
        return np.diag(psi_inv) - (W * psi_inv[:, None]) @ B

    # -- likelihood ---------------------------------------------------------------------

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each row under the fitted model, shape (n_samples,).

        Rows with NaN entries are scored by their exact marginal over the observed
        coordinates.
        """
        X, mask = self._observed(X, allow_empty_rows=False)
        with self._precision():
            return _padded(_row_posteriors, *self._arrays(), X=X, mask=mask)[2]

    # -- latent posterior -------------------------------------------------------------

    def posterior_latent(self, X):
        """Posterior of z for each row: mean (n, K) and covariance (n, K, K)."""
        X, mask = self._observed(X, allow_empty_rows=True)
        return self._posterior(X, mask)

    def _posterior(self, X, mask):
        with self._precision():
            mean, cov, _ = _padded(_row_posteriors, *self._arrays(), X=X, mask=mask)
        return mean, cov

    def transform(self, X) -> np.ndarray:
        """Posterior mean E[z | x] of the latent variables, shape (n_samples, n_components)."""
        return self.posterior_latent(X)[0]

    def inverse_transform(self, Z) -> np.ndarray:
        """Map latent coordinates back to data space: ``Z W^T + mu``."""
        check_is_fitted(self)
        Z = np.asarray(Z, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[1] != self.n_components_:
            raise ValueError(f"Z must have shape (n_samples, {self.n_components_}), got {Z.shape}")
        return Z @ self.params_["W"].T + self.params_["mu"]

    # -- imputation ---------------------------------------------------------------------

    def impute(self, X, *, return_std: bool = False):
        """Fill NaN entries with their conditional mean given the row's observed entries.

        Observed entries are returned unchanged.  With ``return_std=True`` also returns
        the conditional standard deviation of each entry (0 where observed).
        """
        X, mask = self._observed(X, allow_empty_rows=True)
        with self._precision():
            filled, var, _, _ = _padded(_conditional_missing, *self._arrays(), X=X, mask=mask)
        std = np.sqrt(var)
        filled = np.where(mask > 0, X, filled)  # bit-exact observed entries
        return (filled, std) if return_std else filled

    def sample_imputations(self, X, n_imputations: int = 5, random_state=None) -> np.ndarray:
        """Multiple imputation: draws of the missing entries from p(x_miss | x_obs).

        Draws z from its posterior, then the missing coordinates given z, so their
        correlations are kept.  Returns shape (n_imputations, n_samples, n_features).
        """
        if n_imputations < 1:
            raise ValueError(f"n_imputations must be >= 1, got {n_imputations}")
        X, mask = self._observed(X, allow_empty_rows=True)
        z_mean, z_cov = self._posterior(X, mask)
        rng = check_random_state(random_state)
        W, mu = self.params_["W"], self.params_["mu"]
        noise_sd = np.sqrt(self._noise_variance_vector())
        chol = np.linalg.cholesky(z_cov)
        n, d = X.shape
        draws = np.empty((n_imputations, n, d))
        for m in range(n_imputations):
            z = z_mean + np.einsum("nkl,nl->nk", chol, rng.standard_normal(z_mean.shape))
            x = z @ W.T + mu + noise_sd * rng.standard_normal((n, d))
            draws[m] = np.where(mask > 0, X, x)
        return draws
