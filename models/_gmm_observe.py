"""How the mixture's declaration (:func:`latentlab.models.gmm.gmm_model`) observes its
rows: the exact marginal of a row with missing entries, and the explicit, enumerable
assignment ``c`` for posterior predictive draws and SVI/NUTS with enumeration.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.ops.indexing import Vindex

from latentlab.models.gaussian_latent import UNIT_DENSITY_VARIANCE

# no __all__: a private module; latentlab.models.gmm re-exports its public names


def masked_components(X, means, L):
    """Per-row component Gaussians whose density at the filled row is each component's
    marginal over the row's observed coordinates.

    ``handlers.mask`` can only drop whole rows.  Instead, a missing coordinate is set
    to 0, its mean to 0, its covariance row and column to 0 and its variance to
    1/(2 pi) (:data:`~latentlab.models.gaussian_latent.UNIT_DENSITY_VARIANCE`): it
    then contributes a factor N(0 | 0, 1/(2 pi)) = 1, exactly, and leaves the observed
    block Sigma_oo untouched.  Returns ``(X_filled, locs (n, K, d),
    scale_tril (n, K, d, d))``.
    """
    observed = ~jnp.isnan(X)
    o = observed.astype(means.dtype)
    cov = L @ jnp.swapaxes(L, -1, -2)
    inflate = (1.0 - o) * UNIT_DENSITY_VARIANCE
    masked_cov = o[:, None, :, None] * cov[None] * o[:, None, None, :]
    masked_cov = masked_cov + inflate[:, None, :, None] * jnp.eye(means.shape[1])
    locs = o[:, None, :] * means[None]
    return jnp.where(observed, X, 0.0), locs, jnp.linalg.cholesky(masked_cov)


def _enumerate_discrete(site):
    """``config_enumerate`` (numpyro.contrib.funsor) without needing funsor installed."""
    if site["type"] == "sample" and not site["is_observed"]:
        if site["fn"].has_enumerate_support and "enumerate" not in site["infer"]:
            return {"enumerate": "parallel"}
    return {}


def _observe_with_assignment(X, weights, locs, L, n_samples):
    """x | c ~ N(loc_c, L_c L_c^T); ``locs``/``L`` are (K, ...) or per row (n, K, ...)."""
    with handlers.infer_config(config_fn=_enumerate_discrete):
        with numpyro.plate("data", n_samples):
            c = numpyro.sample("c", dist.Categorical(probs=weights))
            if locs.ndim == 3:  # per-row components (missing data): pick row i's c_i
                loc, tril = Vindex(locs)[..., c, :], Vindex(L)[..., c, :, :]
            else:
                loc, tril = locs[c], L[c]
            numpyro.sample("x", dist.MultivariateNormal(loc, scale_tril=tril), obs=X)
