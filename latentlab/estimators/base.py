"""What every latentlab estimator shares: precision handling, likelihood scores, saving."""

from __future__ import annotations

import jax
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, check_random_state

__all__ = ["LatentEstimator", "GenerativeMixin", "to_numpy", "jax_key"]


def to_numpy(a) -> np.ndarray:
    """Every public return is a float64 NumPy array, never a JAX array."""
    return np.asarray(a, dtype=np.float64)


def jax_key(random_state) -> jax.Array:
    """A JAX key drawn from a scikit-learn style ``random_state``."""
    seed = check_random_state(random_state).randint(0, 2**31 - 1)
    return jax.random.PRNGKey(seed)


class LatentEstimator(BaseEstimator):
    """Base class: runs JAX in the estimator's precision without touching global config."""

    def _precision(self):
        """Context in which JAX computes in ``self.dtype`` (float64 unless asked otherwise)."""
        dtype = getattr(self, "dtype", "float64")
        if dtype not in ("float64", "float32"):
            raise ValueError(f"Unknown dtype={dtype!r}; expected 'float64' or 'float32'")
        return jax.enable_x64(dtype == "float64")

    def _draw_from_declaration(self, n_samples, random_state):
        """Run ``model_`` forward at ``params_`` with its explicit latent sampled.

        Returns the trace (site name -> site); call inside ``self._precision()``.
        """
        import jax.numpy as jnp
        from numpyro import handlers

        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
        if n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
        params = {k: jnp.asarray(v) for k, v in self.params_.items()}
        model = handlers.seed(handlers.condition(self.model_, params), jax_key(random_state))
        return handlers.trace(model).get_trace(
            n_samples=int(n_samples), n_features=self.n_features_in_, explicit_latent=True
        )

    def save(self, path) -> None:
        """Save the fitted model as arrays + JSON (no pickle); see :func:`latentlab.load`."""
        from latentlab.io import save

        save(self, path)


class GenerativeMixin:
    """Likelihood-based model selection for estimators with ``score_samples``."""

    def score(self, X, y=None) -> float:
        """Mean per-sample log-likelihood of X (higher is better)."""
        return float(np.mean(self.score_samples(X)))

    def _n_parameters(self) -> int:
        raise NotImplementedError

    def bic(self, X) -> float:
        """Bayesian information criterion, ``-2 log L + p log n`` (lower is better)."""
        check_is_fitted(self)
        n = np.asarray(X).shape[0]
        return float(-2.0 * self.score(X) * n + self._n_parameters() * np.log(n))

    def aic(self, X) -> float:
        """Akaike information criterion, ``-2 log L + 2 p`` (lower is better)."""
        check_is_fitted(self)
        n = np.asarray(X).shape[0]
        return float(-2.0 * self.score(X) * n + 2 * self._n_parameters())
