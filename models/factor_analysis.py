"""Factor analysis, declared once.

Generative story::

    z_i ~ N(0, I_K)
    x_i | z_i ~ N(W z_i + mu, diag(psi))          =>   x_i ~ N(mu, W W^T + diag(psi))

It differs from probabilistic PCA only in the noise: one variance per feature, so
the model separates shared variation (the factors) from feature-specific noise
and is equivariant under rescaling any feature.  EM with exact posterior moments
(Rubin & Thayer 1982; PRML 12.69-12.70) reuses the Gaussian-latent algebra; with
complete data an iteration costs O(d^2 K) whatever n is.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
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
    replicate_settings,
    sample_loadings_and_mean,
    solve_regression,
    variance_coordinates,
)

__all__ = [
    "Params",
    "Hyper",
    "fa_model",
    "model",
    "posterior_spec",
    "init_params",
    "e_step",
    "m_step",
    "coordinates",
    "rescale",
    "scale_data",
    "observed_counts",
    "n_parameters",
    "ledermann_bound",
    "log_jacobian",
]


# ----------------------------------------------------------------------------- parameters


class Params(NamedTuple):
    W: jax.Array  # (d, K) loadings
    mu: jax.Array  # (d,) mean
    psi: jax.Array  # (d,) noise variance of each feature


class Hyper(NamedTuple):
    variance_floor: jax.Array  # (d,) lower bound on psi
    psi_init: jax.Array | None = None  # (d,) the PCA start's psi, if given by the user


# ----------------------------------------------------------------------------- declaration


def fa_model(
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
    """Factor analysis.  ``X`` (n, d) may hold NaN for missing entries.

    Priors (active only with ``use_prior=True``; for standardised data -- the estimator
    fits every method on features scaled to unit variance):
    ``W_jk ~ N(0, 1)``, ``mu_j ~ N(0, 10^2)``, ``psi_j ~ LogNormal(0, 2)``.
    """
    if X is not None:
        n_samples, n_features = X.shape
    d, K = n_features, n_components
    has_missing = detect_missing(X, has_missing)

    with handlers.mask(mask=use_prior):
        W, mu = sample_loadings_and_mean(d, K)
        psi = numpyro.sample("psi", dist.LogNormal(0.0, 2.0).expand([d]).to_event(1))

    observe_rows(
        X,
        W,
        mu,
        psi,
        n_samples=n_samples,
        has_missing=has_missing,
        explicit_latent=explicit_latent,
        subsample_size=subsample_size,
    )


model = fa_model


def posterior_spec() -> PosteriorSpec:
    """The declaration's sites for posterior draws (:mod:`latentlab.inference.posterior`):
    W is identified up to rotation; psi holds each feature's noise variance."""
    return PosteriorSpec(
        sites={**loadings_and_mean_sites(), "psi": Site(("feature",), "positive", "variance")},
        loadings=("W",),
        noise=(("psi", "feature"),),
        replicate=replicate_settings,
    )


# ----------------------------------------------------------------------------- init


def init_params(key, n_features: int, n_components: int, column_variance, active=None) -> Params:
    """Random loadings at each feature's own scale; each noise variance at half its
    feature's variance.

    Row j of W is drawn with variance ``column_variance[j] / K``, so the start (and with
    it every EM iterate) is equivariant under rescaling the features: a start at the
    mean variance would give a feature with a tiny variance huge loadings relative to
    its noise, and an ill-conditioned first E-step.  ``active`` as for
    :func:`latentlab.models.ppca.init_params`.
    """
    column_variance = jnp.asarray(column_variance) * jnp.ones(n_features)
    W = column_normals(key, n_features, n_components, column_variance.dtype)
    if active is not None:
        W = W * active
    n_active = n_components if active is None else jnp.sum(active)
    W = jnp.sqrt(column_variance / n_active)[:, None] * W
    return Params(W=W, mu=jnp.zeros_like(column_variance), psi=0.5 * column_variance)


def init_from_pca(start: PCAStart, hyper: Hyper) -> Params:
    """EM start at the PCA solution (from
    :func:`~latentlab.models.gaussian_latent.mean_imputed_pca`): its loadings, and each
    feature's variance left unexplained by them as its noise variance, floored.

    Deterministic and near a good optimum, where a random start can settle, converged,
    in a worse one (seen: 0.06 nats/row on 60 x 6 data with K = 2).
    """
    psi = start.residual if hyper.psi_init is None else hyper.psi_init
    return Params(W=start.W, mu=start.mu, psi=jnp.maximum(psi, hyper.variance_floor))


# ----------------------------------------------------------------------------- prepare


def scale_data(data: GaussianData, scale) -> GaussianData:
    """The E-step's data for X divided column-wise by ``scale`` (d,): elementwise, one
    rounding per entry (no sums are recomputed).  NumPy in, NumPy out."""
    complete = data.complete._replace(
        sum_x=data.complete.sum_x / scale,
        sum_xx=data.complete.sum_xx / (scale[:, None] * scale[None, :]),
    )
    rows = None if data.rows is None else data.rows.scaled(scale)  # out of core
    return data._replace(complete=complete, X=data.X / scale, rows=rows)


def observed_counts(data: GaussianData):
    """Number of observed entries of each feature, (d,)."""
    out_of_core = 0.0 if data.rows is None else data.rows.count
    return data.complete.n + data.mask.sum(axis=(0, 1)) + out_of_core


# ----------------------------------------------------------------------------- EM


def e_step(params: Params, data: GaussianData, hyper: Hyper):
    """Exact posterior moments of z as row sums, and log p(X) (PRML 12.66)."""
    return expected_stats(params.W, params.mu, 1.0 / params.psi, data)


def m_step(stats, params: Params, hyper: Hyper) -> Params:
    """(W, mu) by per-feature regression on E[z], then psi_j = expected residual variance."""
    W, mu, residual = solve_regression(stats)
    psi = jnp.maximum(residual / stats.count, hyper.variance_floor)
    return Params(W=W, mu=mu, psi=psi)


# The quasi-Newton phase's coordinates: a Heywood uniqueness lands on its floor.
coordinates = variance_coordinates(Params, lambda hyper: (hyper.variance_floor,))


# ----------------------------------------------------------------------------- host algebra


def rescale(params: Params, scale) -> Params:
    """Parameters for data multiplied by ``scale``: a number, or one factor per feature
    (d,) -- the model is equivariant under both (x -> S x: W -> S W, psi -> S^2 psi)."""
    # NumPy stays NumPy (a fitted model is rescaled on the host, without a compile)
    scale = scale if isinstance(scale, (np.ndarray, jax.Array)) else np.asarray(scale)
    return Params(W=params.W * scale[..., None], mu=params.mu * scale, psi=params.psi * scale**2)


def n_parameters(n_features: int, n_components: int) -> int:
    """Free parameters up to rotation, dK + 2d - K(K-1)/2, capped at the saturated
    Gaussian's d + d(d+1)/2 (past the Ledermann bound FA is the full covariance)."""
    d, K = n_features, n_components
    return min(d * K + 2 * d - K * (K - 1) // 2, d + d * (d + 1) // 2)


def ledermann_bound(n_features: int) -> int:
    """The largest number of factors K whose model has non-negative degrees of freedom
    ((d - K)^2 - (d + K)) / 2, the moments of the covariance (d(d+1)/2) minus the
    parameters up to rotation (dK + d - K(K-1)/2) (Ledermann 1937).

    Past it FA has more parameters than the covariance has entries: the loadings are
    not identified, and EM typically ends at a Heywood case (wine, d = 13, K = 13:
    four noise variances at their floor).  d = 13 gives 8; d = 2 gives 0 (for two
    variables only the diagonal model, K = 0).
    """
    d = n_features
    return next(K for K in range(d, -1, -1) if (d - K) ** 2 >= d + K)


def log_jacobian(counts, scale):
    """log p(X / scale) - log p(X) for data with ``counts[j]`` observed entries in
    feature j: sum_j counts_j log scale_j (per entry, log N(s x | s m, s^2 v) =
    log N(x | m, v) - log s)."""
    return float(np.sum(np.asarray(counts, np.float64) * np.log(scale)))
