"""Probabilistic PCA (Tipping & Bishop 1999), declared once.

Generative story::

    z_i ~ N(0, I_K)
    x_i | z_i ~ N(W z_i + mu, sigma2 I_d)        =>   x_i ~ N(mu, W W^T + sigma2 I_d)

The NumPyro function below is the single declaration.  Its observed site is the
exact marginal over z, so its log-likelihood *is* the EM objective; ``explicit_latent``
switches to the conditional form with z sampled, for prior/posterior predictive
draws and SVI/NUTS over z.  Priors are switched off with ``handlers.mask`` for
maximum likelihood and on for MAP/SVI, with the same function.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers

from latentlab.inference.posterior.spec import PosteriorSpec, Site
from latentlab.models.gaussian_latent import (
    GaussianData,
    PCAStart,
    column_normals,
    detect_missing,
    expected_stats,
    loadings_and_mean_sites,
    observe_rows,
    pca_solution,
    replicate_settings,
    sample_loadings_and_mean,
    solve_regression,
    variance_coordinates,
)

__all__ = [
    "Params",
    "Hyper",
    "ppca_model",
    "model",
    "posterior_spec",
    "rescale",
    "init_params",
    "init_from_pca",
    "e_step",
    "m_step",
    "coordinates",
    "ml_params",
    "n_parameters",
]


# ----------------------------------------------------------------------------- parameters


class Params(NamedTuple):
    W: jax.Array  # (d, K) loadings
    mu: jax.Array  # (d,) mean
    sigma2: jax.Array  # () isotropic noise variance


class Hyper(NamedTuple):
    variance_floor: jax.Array  # lower bound on sigma2


# ----------------------------------------------------------------------------- declaration


def ppca_model(
    X=None,
    *,
    n_components: int,
    n_features: int | None = None,
    n_samples: int | None = None,
    use_prior: bool = False,
    has_missing: bool | None = None,
    explicit_latent: bool = False,
    subsample_size: int | None = None,
):
    """Probabilistic PCA.  ``X`` (n, d) may hold NaN for missing entries.

    Priors (active only with ``use_prior=True``; scaled for standardised data):
    ``W_jk ~ N(0, 1)``, ``mu_j ~ N(0, 10^2)``, ``sigma2 ~ LogNormal(0, 2)``.
    """
    if X is not None:
        n_samples, n_features = X.shape
    d, K = n_features, n_components
    has_missing = detect_missing(X, has_missing)

    with handlers.mask(mask=use_prior):
        W, mu = sample_loadings_and_mean(d, K)
        sigma2 = numpyro.sample("sigma2", dist.LogNormal(0.0, 2.0))

    observe_rows(
        X,
        W,
        mu,
        sigma2 * jnp.ones(d),
        n_samples=n_samples,
        has_missing=has_missing,
        explicit_latent=explicit_latent,
        subsample_size=subsample_size,
    )


model = ppca_model  # the name every model module exports for its declaration


def posterior_spec() -> PosteriorSpec:
    """The declaration's sites for posterior draws (:mod:`latentlab.inference.posterior`):
    W is identified up to rotation; sigma2 is the noise variance of every feature."""
    return PosteriorSpec(
        sites={**loadings_and_mean_sites(), "sigma2": Site((), "positive", "variance")},
        loadings=("W",),
        noise=(("sigma2", "feature"),),
        replicate=replicate_settings,
    )


# ----------------------------------------------------------------------------- init


def init_params(key, n_features: int, n_components: int, column_variance, active=None) -> Params:
    """Random start: loadings at the data's scale, sigma2 at half the mean variance.

    ``column_variance`` is each feature's variance (or one number for all).  ``active``
    (n_components,) marks the model's columns; the others are padding, held at zero
    (see :func:`~latentlab._shapes.gaussian_latent_columns`).
    """
    mean_variance = jnp.mean(jnp.asarray(column_variance))
    W = column_normals(key, n_features, n_components, mean_variance.dtype)
    if active is not None:
        W = W * active
    n_active = n_components if active is None else jnp.sum(active)
    W = jnp.sqrt(mean_variance / n_active) * W
    return Params(W=W, mu=jnp.zeros(n_features, mean_variance.dtype), sigma2=0.5 * mean_variance)


def init_from_pca(start: PCAStart, hyper) -> Params:
    """EM start at a PCA solution (from
    :func:`~latentlab.models.gaussian_latent.mean_imputed_pca`), sigma2 floored."""
    return Params(W=start.W, mu=start.mu, sigma2=jnp.maximum(start.sigma2, hyper.variance_floor))


# ----------------------------------------------------------------------------- EM


def e_step(params: Params, data: GaussianData, hyper: Hyper):
    """Exact posterior moments of z (PRML 12.54-12.55) as row sums, and log p(X)."""
    d = params.W.shape[0]
    precision = jnp.full((d,), 1.0, params.W.dtype) / params.sigma2
    return expected_stats(params.W, params.mu, precision, data)


def m_step(stats, params: Params, hyper: Hyper) -> Params:
    """Joint update of (W, mu) by per-coordinate regression, then sigma2 (PRML 12.56-12.57)."""
    W, mu, residual = solve_regression(stats)
    sigma2 = jnp.sum(residual) / jnp.sum(stats.count)
    return Params(W=W, mu=mu, sigma2=jnp.maximum(sigma2, hyper.variance_floor))


# The quasi-Newton phase's coordinates (latentlab.inference.quasi_newton).
coordinates = variance_coordinates(Params, lambda hyper: (hyper.variance_floor,))


# ----------------------------------------------------------------------------- closed form


@partial(jax.jit, static_argnames="n_components")
def ml_params(n, sum_x, sum_xx, n_components: int) -> Params:
    """Tipping & Bishop (1999) eq. 7-8: the ML solution from complete-data row sums.

    With S the ML (ddof=0) covariance and eigenvalues l_1 >= ... >= l_d:
    sigma2 = mean(l_{K+1..d}),  W = U_K (L_K - sigma2 I)^{1/2}.
    """
    start = pca_solution(n, sum_x, sum_xx, n_components)
    return Params(W=start.W, mu=start.mu, sigma2=start.sigma2)


# ----------------------------------------------------------------------------- host algebra


def rescale(params: Params, scale) -> Params:
    """Parameters for data multiplied by ``scale`` (PPCA is equivariant under it)."""
    return Params(W=params.W * scale, mu=params.mu * scale, sigma2=params.sigma2 * scale**2)


def n_parameters(n_features: int, n_components: int) -> int:
    """Free parameters up to rotation of W: dK + d + 1 - K(K-1)/2."""
    d, K = n_features, n_components
    return d * K + d + 1 - K * (K - 1) // 2
