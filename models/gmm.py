"""Gaussian mixture model, declared once.

Generative story::

    c_i ~ Categorical(weights)
    x_i | c_i ~ N(means[c_i], Sigma[c_i])     =>   x_i ~ sum_k weights_k N(means_k, Sigma_k)

The NumPyro function below is the single declaration.  Its observed site is the exact
mixture marginal (``MixtureSameFamily``), so its log-likelihood *is* the EM objective;
``explicit_latent=True`` samples the assignment ``c`` instead (enumerable, for
posterior predictive draws and SVI/NUTS with enumeration).  Priors are switched with
``handlers.mask``: off for maximum likelihood, on for MAP.

Covariances are kept as Cholesky factors, in the shape the covariance type needs
(the ``scale`` site / ``Params.scale``):

    full       (K, d, d)  lower-triangular L_k,  Sigma_k = L_k L_k^T
    tied       (d, d)     one L shared by every component
    diag       (K, d)     standard deviations,   Sigma_k = diag(s_k^2)
    spherical  (K,)       standard deviations,   Sigma_k = s_k^2 I

EM (PRML 9.23-9.27) is written with statistics taken about the *current* means, so
the M-step never forms a raw second moment minus mu mu^T (DESIGN section 9).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import logsumexp
from numpyro import handlers
from numpyro.distributions import constraints

__all__ = [
    "COVARIANCE_TYPES",
    "Params",
    "Hyper",
    "GMMData",
    "MixtureStats",
    "gmm_model",
    "model",
    "scale_tril",
    "init_params",
    "params_from_responsibilities",
    "component_log_density",
    "e_step",
    "m_step",
    "step_functions",
    "n_parameters",
]

COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
LOG_2PI = math.log(2.0 * math.pi)


class Params(NamedTuple):
    weights: jax.Array  # (K,) mixing proportions
    means: jax.Array  # (K, d)
    scale: jax.Array  # Cholesky factor(s) of the covariance(s); shape set by covariance type


class Hyper(NamedTuple):
    reg_covar: jax.Array  # () added to every covariance's diagonal


class GMMData(NamedTuple):
    X: jax.Array  # (n, d)
    row_mask: jax.Array  # (n,) 1 for a real row, 0 for padding


class MixtureStats(NamedTuple):
    """Row sums, taken about the means the E-step was evaluated at."""

    count: jax.Array  # (K,)     N_k = sum_i r_ik
    sum_dx: jax.Array  # (K, d)  sum_i r_ik (x_i - mu_k)
    sum_dxx: jax.Array  # (K, d, d) for full/tied, (K, d) (diagonal only) for diag/spherical


# ----------------------------------------------------------------------------- declaration


def scale_tril(scale, covariance_type: str, n_components: int, n_features: int):
    """(K, d, d) lower Cholesky factors of every component's covariance."""
    K, d = n_components, n_features
    if covariance_type == "full":
        return scale
    if covariance_type == "tied":
        return jnp.broadcast_to(scale, (K, d, d))
    if covariance_type == "diag":
        return jax.vmap(jnp.diag)(scale)
    return scale[:, None, None] * jnp.eye(d, dtype=scale.dtype)


def _scale_prior(covariance_type, K, d):
    """Prior on the Cholesky factors (flat on lower-Cholesky matrices for full/tied)."""
    if covariance_type == "full":
        return dist.ImproperUniform(constraints.lower_cholesky, (), (K, d, d))
    if covariance_type == "tied":
        return dist.ImproperUniform(constraints.lower_cholesky, (), (d, d))
    shape = (K, d) if covariance_type == "diag" else (K,)
    return dist.LogNormal(0.0, 2.0).expand(shape).to_event(len(shape))


def gmm_model(
    X=None,
    *,
    n_components: int,
    covariance_type: str = "full",
    n_features: int | None = None,
    n_samples: int | None = None,
    use_prior: bool = False,
    explicit_latent: bool = False,
):
    """Gaussian mixture with ``n_components`` components.  ``X`` is (n, d).

    Priors (active only with ``use_prior=True``): ``weights ~ Dirichlet(1)``,
    ``means ~ N(0, 10^2)``, standard deviations ``~ LogNormal(0, 2)``, and a flat prior
    on full/tied Cholesky factors.
    """
    if X is not None:
        n_samples, n_features = X.shape
    K, d = n_components, n_features
    with handlers.mask(mask=use_prior):
        weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(K)))
        means = numpyro.sample("means", dist.Normal(0.0, 10.0).expand([K, d]).to_event(2))
        scale = numpyro.sample("scale", _scale_prior(covariance_type, K, d))
    L = scale_tril(scale, covariance_type, K, d)

    if explicit_latent:
        _observe_with_assignment(X, weights, means, L, n_samples)
        return
    mixture = dist.MixtureSameFamily(
        dist.Categorical(probs=weights), dist.MultivariateNormal(means, scale_tril=L)
    )
    with numpyro.plate("data", n_samples):
        numpyro.sample("x", mixture, obs=X)


def _enumerate_discrete(site):
    """``config_enumerate`` (numpyro.contrib.funsor) without needing funsor installed."""
    if site["type"] == "sample" and not site["is_observed"]:
        if site["fn"].has_enumerate_support and "enumerate" not in site["infer"]:
            return {"enumerate": "parallel"}
    return {}


def _observe_with_assignment(X, weights, means, L, n_samples):
    with handlers.infer_config(config_fn=_enumerate_discrete):
        with numpyro.plate("data", n_samples):
            c = numpyro.sample("c", dist.Categorical(probs=weights))
            numpyro.sample("x", dist.MultivariateNormal(means[c], scale_tril=L[c]), obs=X)


model = gmm_model  # the name every model module exports for its declaration


def n_parameters(n_features: int, n_components: int, covariance_type: str) -> int:
    """Free parameters, counted as scikit-learn counts them."""
    d, K = n_features, n_components
    covariance = {
        "full": K * d * (d + 1) // 2,
        "tied": d * (d + 1) // 2,
        "diag": K * d,
        "spherical": K,
    }[covariance_type]
    return covariance + K * d + K - 1


# ----------------------------------------------------------------------------- E-step


def _precision_factor(L):
    """P = L^{-T} (upper triangular), so that (x - mu)^T Sigma^{-1} (x - mu) = |(x - mu) P|^2."""
    eye = jnp.broadcast_to(jnp.eye(L.shape[-1], dtype=L.dtype), L.shape)
    return jnp.swapaxes(solve_triangular(L, eye, lower=True), -1, -2)


def component_log_density(params: Params, X, covariance_type: str):
    """log N(x_i | mu_k, Sigma_k) for every row and component, and the centred rows.

    Returns ``(log_density (n, K), diff (K, n, d))`` with ``diff[k] = X - mu_k``.
    A non-positive diagonal in a Cholesky factor (e.g. from an extrapolation step)
    gives NaN, never a crash.
    """
    means, scale = params.means, params.scale
    d = X.shape[1]
    diff = X[None, :, :] - means[:, None, :]  # (K, n, d)
    if covariance_type in ("full", "tied"):
        P = _precision_factor(scale)
        if covariance_type == "full":
            y = jnp.einsum("knd,kde->kne", diff, P)
        else:
            y = jnp.einsum("knd,de->kne", diff, P)
        quad = jnp.sum(y**2, axis=-1)  # (K, n)
        log_det = jnp.sum(jnp.log(jnp.diagonal(scale, axis1=-2, axis2=-1)), axis=-1)
        log_det = jnp.broadcast_to(log_det, means.shape[:1])
    elif covariance_type == "diag":
        quad = jnp.einsum("knd,kd->kn", diff**2, 1.0 / scale**2)
        log_det = jnp.sum(jnp.log(scale), axis=-1)
    else:
        quad = jnp.sum(diff**2, axis=-1) / scale[:, None] ** 2
        log_det = d * jnp.log(scale)
    log_density = -0.5 * (d * LOG_2PI + quad) - log_det[:, None]
    return log_density.T, diff


def _moments(resp, diff, covariance_type: str) -> MixtureStats:
    """Row sums of r_ik, r_ik (x_i - mu_k) and the second moments about mu_k."""
    count = jnp.sum(resp, axis=0)
    sum_dx = jnp.einsum("nk,knd->kd", resp, diff)
    if covariance_type in ("full", "tied"):
        sum_dxx = jnp.einsum("knd,kne->kde", resp.T[:, :, None] * diff, diff)
    else:
        sum_dxx = jnp.einsum("nk,knd->kd", resp, diff**2)
    return MixtureStats(count, sum_dx, sum_dxx)


def e_step(params: Params, data: GMMData, hyper: Hyper, *, covariance_type: str):
    """Responsibilities in log space (PRML 9.23) as row-sum statistics, and log p(X)."""
    log_density, diff = component_log_density(params, data.X, covariance_type)
    weighted = log_density + jnp.log(params.weights)
    row_loglik = logsumexp(weighted, axis=1)
    resp = jnp.exp(weighted - row_loglik[:, None]) * data.row_mask[:, None]
    loglik = jnp.sum(jnp.where(data.row_mask > 0, row_loglik, 0.0))
    return _moments(resp, diff, covariance_type), loglik


# ----------------------------------------------------------------------------- M-step


def m_step(stats: MixtureStats, params: Params, hyper: Hyper, *, covariance_type: str) -> Params:
    """PRML 9.24-9.26 from statistics about the old means mu_k.

    With delta_k = sum_i r_ik (x_i - mu_k) / N_k, the new mean is mu_k + delta_k and the
    new covariance ``S_k / N_k - delta_k delta_k^T + reg_covar I`` (S_k about mu_k):
    delta_k -> 0 as EM converges, so nothing cancels.  A component whose N_k is
    (numerically) zero keeps its old mean and covariance.
    """
    dtype = stats.count.dtype
    tiny = 10.0 * jnp.finfo(dtype).eps
    count = stats.count + tiny  # as scikit-learn: no division by zero
    weights = count / jnp.sum(count)
    delta = stats.sum_dx / count[:, None]
    means = params.means + delta
    empty = stats.count < tiny * jnp.maximum(jnp.sum(stats.count), 1.0)
    reg = hyper.reg_covar
    d = means.shape[1]
    eye = jnp.eye(d, dtype=dtype)
    if covariance_type == "full":
        cov = stats.sum_dxx / count[:, None, None] - delta[:, :, None] * delta[:, None, :]
        scale = jnp.linalg.cholesky(cov + reg * eye)
        scale = jnp.where(empty[:, None, None], params.scale, scale)
    elif covariance_type == "tied":
        scatter = stats.sum_dxx - count[:, None, None] * delta[:, :, None] * delta[:, None, :]
        cov = jnp.sum(scatter, axis=0) / jnp.sum(count)
        scale = jnp.linalg.cholesky(cov + reg * eye)
    else:
        var = jnp.maximum(stats.sum_dxx / count[:, None] - delta**2, 0.0) + reg
        if covariance_type == "diag":
            scale = jnp.where(empty[:, None], params.scale, jnp.sqrt(var))
        else:
            scale = jnp.where(empty, params.scale, jnp.sqrt(jnp.mean(var, axis=1)))
    means = jnp.where(empty[:, None], params.means, means)
    return Params(weights=weights, means=means, scale=scale)


_STEPS = {
    t: (partial(e_step, covariance_type=t), partial(m_step, covariance_type=t))
    for t in COVARIANCE_TYPES
}


def step_functions(covariance_type: str):
    """``(e_step, m_step)`` with the covariance type bound; the same objects every call,
    so the jit'd EM driver compiles once per shape."""
    return _STEPS[covariance_type]


# ----------------------------------------------------------------------------- starts


def params_from_responsibilities(X, row_mask, resp, reg_covar, *, covariance_type: str) -> Params:
    """The M-step from given responsibilities (n, K): how every start is made."""
    resp = resp * row_mask[:, None]
    count = jnp.sum(resp, axis=0) + 10.0 * jnp.finfo(X.dtype).eps
    means = resp.T @ X / count[:, None]
    diff = X[None, :, :] - means[:, None, :]
    stats = _moments(resp, diff, covariance_type)
    K, d = means.shape
    placeholder = {
        "full": jnp.broadcast_to(jnp.eye(d, dtype=X.dtype), (K, d, d)),
        "tied": jnp.eye(d, dtype=X.dtype),
        "diag": jnp.ones((K, d), X.dtype),
        "spherical": jnp.ones((K,), X.dtype),
    }[covariance_type]
    start = Params(jnp.full((K,), 1.0 / K, X.dtype), means, placeholder)
    return m_step(
        stats, start, Hyper(jnp.asarray(reg_covar, X.dtype)), covariance_type=covariance_type
    )


def init_params(key, X, row_mask, n_components: int, reg_covar, *, covariance_type: str) -> Params:
    """Random start as scikit-learn's ``init_params="random"``: uniform responsibilities."""
    resp = jax.random.uniform(key, (X.shape[0], n_components), X.dtype)
    resp = resp / jnp.sum(resp, axis=1, keepdims=True)
    return params_from_responsibilities(
        X, row_mask, resp, reg_covar, covariance_type=covariance_type
    )
