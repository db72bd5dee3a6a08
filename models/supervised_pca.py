"""Supervised PCA (latent factor regression), declared once.

x and y share the latent z (supervised probabilistic PCA, Yu et al. 2006); the
likelihood of x is weighted by alpha > 0 (a "discriminative likelihood")::

    z_i ~ N(0, I_K)
    x_i | z_i ~ N(W_x z_i + mu_x, sigma2_x I)      weighted by alpha
    y_i | z_i ~ N(W_y z_i + mu_y, sigma2_y I)

    L_alpha = prod_i  p(z_i) p(x_i | z_i)^alpha p(y_i | z_i)

alpha < 1 lets the targets steer the latent space; alpha -> infinity gives PCA of
x followed by regression on z.

EM maximises the alpha-weighted objective F = sum_i log integral L_alpha dz_i.
Since p(x|z)^alpha = N(x | W_x z + mu_x, sigma2_x / alpha I) * c(alpha, sigma2_x),
F is the log-likelihood of the *tempered* Gaussian latent model (x-noise divided by
alpha) plus that constant: the E-step is the shared Gaussian-latent algebra with
noise precision alpha / sigma2_x on x (posterior precision
I + alpha W_x^T W_x / sigma2_x + W_y^T W_y / sigma2_y, the identity coming from the
prior), and the M-step is the usual per-coordinate
regression, alpha cancelling from it.

In the declaration the x-likelihood is weighted with ``handlers.scale``.  The
explicit-latent form is exactly L_alpha.  The collapsed form observes
x ~ p(x) (scaled by alpha) and y ~ p(y | x), so NumPyro's ``log_likelihood``
(which ignores the scale) is the unweighted log p(x, y) = ``score_samples``.  Its
scaled log density, alpha log p(x) + log p(y | x), equals F only at alpha = 1:
no single collapsed site can carry both the unweighted joint and F (see the
estimator's notes).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro import handlers

from latentlab.inference.posterior.spec import PosteriorSpec, Site
from latentlab.models import ppca
from latentlab.models.gaussian_latent import (
    GaussianData,
    detect_missing,
    expected_stats,
    masked_low_rank,
    observe_rows,
    row_posteriors,
    solve_regression,
    variance_coordinates,
)

__all__ = [
    "Params",
    "Hyper",
    "spca_model",
    "model",
    "posterior_spec",
    "init_params",
    "e_step",
    "m_step",
    "coordinates",
    "noise_precision",
    "rescale",
]

LOG_2PI = math.log(2 * math.pi)


# ----------------------------------------------------------------------------- parameters


class Params(NamedTuple):
    W: jax.Array  # (d_x + d_y, K) loadings, x rows first
    mu: jax.Array  # (d_x + d_y,)
    sigma2_x: jax.Array  # ()
    sigma2_y: jax.Array  # ()


class Hyper(NamedTuple):
    alpha: jax.Array  # weight of the x-likelihood
    is_x: jax.Array  # (d,) 1.0 for x coordinates, 0.0 for y
    variance_floor: jax.Array  # (2,) floors for sigma2_x, sigma2_y


# ----------------------------------------------------------------------------- declaration


def _conditional_y(X, W_x, W_y, mu_x, mu_y, sigma2_x, sigma2_y):
    """p(y | x_O) per row: loc (n, d_y) and low-rank factor (n, d_y, K) of its covariance."""
    d_x = W_x.shape[0]
    observed = ~jnp.isnan(X)
    mask = observed.astype(W_x.dtype)
    precision = jnp.full((d_x,), 1.0, W_x.dtype) / sigma2_x
    z_mean, z_cov, _ = row_posteriors(W_x, mu_x, precision, jnp.where(observed, X, 0.0), mask)
    loc = z_mean @ W_y.T + mu_y
    factor = jnp.einsum("jk,nkl->njl", W_y, jnp.linalg.cholesky(z_cov))
    return loc, factor


def spca_model(
    X=None,
    y=None,
    *,
    n_components: int,
    alpha: float = 1.0,
    n_features: int | None = None,
    n_targets: int | None = None,
    n_samples: int | None = None,
    use_prior: bool = False,
    has_missing: bool | None = None,
    explicit_latent: bool = False,
    tempered: bool = False,
):
    """Supervised PCA.  ``X`` (n, d_x) and ``y`` (n, d_y) may hold NaN (missing).

    Collapsed form (default): x ~ p(x) weighted by ``handlers.scale(alpha)``, then
    y ~ p(y | x); NumPyro's ``log_likelihood`` is the unweighted log p(x, y).
    ``tempered=True`` collapses L_alpha exactly instead: x and y | x under the
    tempered model (x-noise sigma2_x / alpha) plus the factor ``alpha_weight`` =
    log c(alpha, sigma2_x), so the log density is EM's objective F at any alpha (what
    MAP and SVI optimise).

    Priors (only with ``use_prior=True``; for standardised data): loadings N(0, 1),
    means N(0, 10^2), noise variances LogNormal(0, 2).
    """
    if X is not None:
        n_samples, n_features = X.shape
    if y is not None:
        y = y.reshape(y.shape[0], -1)  # one target may come as a vector
        n_targets = y.shape[1]
    d_x, d_y, K = n_features, n_targets, n_components
    if has_missing is None and X is not None and y is not None:
        has_missing = detect_missing(X, None) or detect_missing(y, None)
    has_missing = bool(has_missing)

    with handlers.mask(mask=use_prior):
        W_x = numpyro.sample("W_x", dist.Normal(0.0, 1.0).expand([d_x, K]).to_event(2))
        W_y = numpyro.sample("W_y", dist.Normal(0.0, 1.0).expand([d_y, K]).to_event(2))
        mu_x = numpyro.sample("mu_x", dist.Normal(0.0, 10.0).expand([d_x]).to_event(1))
        mu_y = numpyro.sample("mu_y", dist.Normal(0.0, 10.0).expand([d_y]).to_event(1))
        sigma2_x = numpyro.sample("sigma2_x", dist.LogNormal(0.0, 2.0))
        sigma2_y = numpyro.sample("sigma2_y", dist.LogNormal(0.0, 2.0))

    if explicit_latent:  # L_alpha above, z sampled
        with numpyro.plate("rows", n_samples):
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([K]).to_event(1))
            for name, data, W, mu, s2, weight in (
                ("x", X, W_x, mu_x, sigma2_x, alpha),
                ("y", y, W_y, mu_y, sigma2_y, 1.0),
            ):
                loc = z @ W.T + mu
                likelihood = dist.Normal(loc, jnp.sqrt(s2))
                if data is not None and has_missing:
                    observed = ~jnp.isnan(data)
                    data = jnp.where(observed, data, loc)
                    likelihood = likelihood.mask(observed)
                with handlers.scale(scale=weight):
                    numpyro.sample(name, likelihood.to_event(1), obs=data)
        return

    x_noise = sigma2_x / alpha if tempered else sigma2_x
    with handlers.scale(scale=1.0 if tempered else alpha):
        observe_rows(
            X,
            W_x,
            mu_x,
            x_noise * jnp.ones(d_x),
            n_samples=n_samples,
            has_missing=has_missing,
            explicit_latent=False,
            subsample_size=None,
        )
    if X is None:
        return
    if tempered:  # p(x|z)^alpha = N(x | ., sigma2_x / alpha) * c(alpha, sigma2_x)
        n_x = jnp.sum(~jnp.isnan(X), axis=1)  # per row: each row's term of the objective
        log_c = 0.5 * (1 - alpha) * (LOG_2PI + jnp.log(sigma2_x)) - 0.5 * jnp.log(alpha)
        with numpyro.plate("rows_alpha", n_samples):
            numpyro.factor("alpha_weight", n_x * log_c)
    loc, factor = _conditional_y(X, W_x, W_y, mu_x, mu_y, x_noise, sigma2_y)
    noise = sigma2_y * jnp.ones(d_y)
    obs = y
    if y is not None and has_missing:  # missing targets contribute exactly 0
        obs, factor, noise = masked_low_rank(~jnp.isnan(y), loc, y, factor, noise)
    with numpyro.plate("rows_y", n_samples):
        numpyro.sample("y", dist.LowRankMultivariateNormal(loc, factor, noise), obs=obs)


model = spca_model


def posterior_spec() -> PosteriorSpec:
    """The declaration's sites for posterior draws (:mod:`latentlab.inference.posterior`).

    Draws are of the tempered declaration (its log density is EM's alpha-weighted
    objective); rows are scored by the unweighted joint of x and y.  W_x and W_y share
    one latent space, so they are rotated together.
    """
    return PosteriorSpec(
        sites={
            "W_x": Site(("feature", "component"), "real", "linear"),
            "W_y": Site(("target", "component"), "real", "linear"),
            "mu_x": Site(("feature",), "real", "location"),
            "mu_y": Site(("target",), "real", "location"),
            "sigma2_x": Site((), "positive", "variance"),
            "sigma2_y": Site((), "positive", "variance"),
        },
        data_dims=("feature", "target"),
        observed=("x", "y"),
        loglik_name="xy",
        target_settings={"tempered": True},
        loadings=("W_x", "W_y"),
        noise=(("sigma2_x", "feature"), ("sigma2_y", "target")),
        replicate=_replicate_settings,
    )


def _replicate_settings(X, y) -> dict:
    """Draw x and y together through z (the collapsed form draws x only)."""
    (n, d_x), d_y = np.shape(X), np.shape(y)[-1]
    return {
        "n_samples": int(n),
        "n_features": int(d_x),
        "n_targets": int(d_y),
        "has_missing": False,
        "explicit_latent": True,
    }


# ----------------------------------------------------------------------------- init


def init_params(key, n_features: int, n_components: int, column_variance, active=None) -> Params:
    """PPCA's random start on [x, y] (``n_features`` counts both blocks; ``active`` as
    there)."""
    start = ppca.init_params(key, n_features, n_components, column_variance, active)
    return Params(W=start.W, mu=start.mu, sigma2_x=start.sigma2, sigma2_y=start.sigma2)


# ----------------------------------------------------------------------------- EM


def noise_precision(params: Params, is_x, alpha=1.0):
    """Per-coordinate noise precision, the x block multiplied by ``alpha``."""
    return jnp.where(is_x > 0, alpha / params.sigma2_x, 1.0 / params.sigma2_y)


def e_step(params: Params, data: GaussianData, hyper: Hyper):
    """Posterior moments under the alpha-weighted model; objective F (module docstring)."""
    precision = noise_precision(params, hyper.is_x, hyper.alpha)
    stats, tempered_loglik = expected_stats(params.W, params.mu, precision, data)
    # log of p(x|z)^alpha / N(x | ., sigma2_x / alpha) for every observed x entry
    n_x = jnp.sum(stats.count * hyper.is_x)
    a = hyper.alpha
    correction = n_x * (0.5 * (1 - a) * (LOG_2PI + jnp.log(params.sigma2_x)) - 0.5 * jnp.log(a))
    return stats, tempered_loglik + correction


def m_step(stats, params: Params, hyper: Hyper) -> Params:
    """Per-coordinate regression; each block's variance is its mean expected residual."""
    W, mu, residual = solve_regression(stats)
    is_x = hyper.is_x
    sigma2_x = jnp.sum(residual * is_x) / jnp.sum(stats.count * is_x)
    sigma2_y = jnp.sum(residual * (1 - is_x)) / jnp.sum(stats.count * (1 - is_x))
    return Params(
        W=W,
        mu=mu,
        sigma2_x=jnp.maximum(sigma2_x, hyper.variance_floor[0]),
        sigma2_y=jnp.maximum(sigma2_y, hyper.variance_floor[1]),
    )


# The quasi-Newton phase's coordinates (latentlab.inference.quasi_newton).
coordinates = variance_coordinates(Params, lambda hyper: tuple(hyper.variance_floor))


# ----------------------------------------------------------------------------- host algebra


def rescale(params: Params, scale) -> Params:
    return Params(
        W=params.W * scale,
        mu=params.mu * scale,
        sigma2_x=params.sigma2_x * scale**2,
        sigma2_y=params.sigma2_y * scale**2,
    )


def n_parameters(n_features: int, n_targets: int, n_components: int) -> int:
    """(d_x + d_y) K loadings up to rotation, the means and two variances."""
    d, K = n_features + n_targets, n_components
    return d * K + d + 2 - K * (K - 1) // 2
