"""Confirmatory factor analysis, declared once.

Generative story::

    f_i ~ N(0, Phi)                                   (K factors; Phi diagonal if orthogonal)
    x_i | f_i ~ N(Lambda f_i + mu, diag(psi))    =>   x_i ~ N(mu, Lambda Phi Lambda^T + diag(psi))

The hypothesis is the pattern of ``Lambda``: loading (j, k) is free only where the
pattern says indicator j measures factor k, and zero elsewhere (Joreskog 1969).  Each
factor's scale is set by a marker, its first indicator, whose loading is fixed at 1
(lavaan's default identification); the estimator also reports the standardised
solution (unit factor variances).  ``Phi = C C^T`` is declared by its Cholesky factor.

EM (Rubin & Thayer 1982, with a restricted M-step).  With ``f = C z`` the model is a
Gaussian-latent one in ``z ~ N(0, I)`` with loadings ``W = Lambda C``, so the E-step is
the shared one (:func:`latentlab.models.gaussian_latent.expected_stats`, exact for
NaN entries) plus the latent second moments summed over every row; the statistics
are carried to ``f`` by ``C``.  The M-step is, per indicator, least squares of x_j on
its free factors and the intercept (the fixed loadings moved to the left-hand side),
psi_j the expected residual variance, and ``Phi`` the average ``E[f f^T]`` (its
diagonal for orthogonal factors): each block maximises the expected complete-data
log-likelihood, so the observed-data log-likelihood never decreases.
"""

from __future__ import annotations

from functools import cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro import handlers

from latentlab.models.gaussian_latent import (
    GaussianData,
    RegressionStats,
    complete_posterior_operator,
    detect_missing,
    expected_stats,
    observe_rows,
    row_posteriors,
)

__all__ = [
    "Params",
    "Hyper",
    "Stats",
    "cfa_model",
    "model",
    "loadings_of",
    "frame_loadings",
    "init_params",
    "e_step",
    "m_step",
    "n_parameters",
]


# ----------------------------------------------------------------------------- parameters


class Params(NamedTuple):
    loadings: jax.Array  # (d, K) the free loadings (0 where fixed: see loadings_of)
    phi_chol: jax.Array  # (K, K) lower Cholesky factor of the factor covariance Phi
    mu: jax.Array  # (d,)
    psi: jax.Array  # (d,) unique variances


class Hyper(NamedTuple):
    free: jax.Array  # (d, K) 1 where a loading is free
    fixed: jax.Array  # (d, K) the fixed loadings' values (1 at markers, else 0)
    orthogonal: jax.Array  # () 1.0 for uncorrelated factors
    variance_floor: jax.Array  # (d,) lower bound on psi
    n_rows: jax.Array  # () the rows (Phi's M-step averages over every one)


class Stats(NamedTuple):
    regression: RegressionStats  # per indicator, in z = C^-1 f coordinates
    latent: jax.Array  # (K, K) sum over rows of E[z z^T | x]


def loadings_of(params: Params, hyper: Hyper):
    """The whole loadings matrix Lambda: free entries from ``params``, fixed ones from
    ``hyper``."""
    return hyper.free * params.loadings + hyper.fixed


def frame_loadings(params: Params, hyper: Hyper):
    """``W = Lambda C``: the loadings of uncorrelated unit-variance latents ``z``."""
    return loadings_of(params, hyper) @ jnp.tril(params.phi_chol)


# ----------------------------------------------------------------------------- declaration


def cfa_model(
    X=None,
    *,
    free,
    fixed,
    orthogonal: bool = False,
    n_features: int | None = None,
    n_samples: int | None = None,
    use_prior: bool = False,
    has_missing: bool | None = None,
    subsample_size: int | None = None,
):
    """Confirmatory factor analysis.  ``X`` (n, d) may hold NaN for missing entries;
    ``free`` and ``fixed`` (d, K) are the pattern (see :class:`Hyper`).

    Priors (only with ``use_prior=True``; for standardised data): free loadings and
    the Cholesky factor's entries N(0, 1), ``mu_j ~ N(0, 10^2)``,
    ``psi_j ~ LogNormal(0, 2)``.
    """
    free, fixed = jnp.asarray(free), jnp.asarray(fixed)
    if X is not None:
        n_samples, n_features = X.shape
    d, K = free.shape
    has_missing = detect_missing(X, has_missing)
    with handlers.mask(mask=use_prior):
        loadings = numpyro.sample("loadings", dist.Normal(0.0, 1.0).expand([d, K]).to_event(2))
        phi_chol = numpyro.sample("phi_chol", dist.Normal(0.0, 1.0).expand([K, K]).to_event(2))
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0).expand([d]).to_event(1))
        psi = numpyro.sample("psi", dist.LogNormal(0.0, 2.0).expand([d]).to_event(1))
    C = jnp.tril(phi_chol)
    if orthogonal:
        C = C * jnp.eye(K, dtype=C.dtype)
    W = (free * loadings + fixed) @ C
    observe_rows(
        X,
        W,
        mu,
        psi,
        n_samples=n_samples,
        has_missing=has_missing,
        explicit_latent=False,
        subsample_size=subsample_size,
    )


model = cfa_model


# ----------------------------------------------------------------------------- init


def init_params(covariance, mean, hyper: Hyper, markers) -> Params:
    """A start from the sample covariance S (NumPy, host): each factor's variance half
    its marker's, the factor covariances half the markers' covariances, each free
    loading the slope of its indicator on its factor's marker, psi half of each
    variance.  ``markers`` (K,) are the markers' indices."""
    S = np.asarray(covariance)
    m = np.asarray(markers)
    phi = 0.5 * S[np.ix_(m, m)]
    if float(hyper.orthogonal):
        phi = np.diag(np.diag(phi))
    slopes = S[:, m] / np.diag(S)[m]
    return Params(
        loadings=np.asarray(hyper.free) * slopes,
        phi_chol=np.linalg.cholesky(phi),
        mu=np.asarray(mean),
        psi=np.maximum(0.5 * np.diag(S), np.asarray(hyper.variance_floor)),
    )


# ----------------------------------------------------------------------------- EM


def _latent_moments(W, mu, noise_precision, data: GaussianData):
    """sum over rows of E[z z^T | x] (K, K): the complete rows' in closed form from
    their summary, then the rows with missing entries (padding rows, with no observed
    entry, left out)."""
    n, sum_x, sum_xx = data.complete
    B, cov, _ = complete_posterior_operator(W, noise_precision)
    scatter = sum_xx - jnp.outer(sum_x, mu) - jnp.outer(mu, sum_x) + n * jnp.outer(mu, mu)
    total = n * cov + B @ scatter @ B.T
    if data.X.shape[0] == 0:
        return total

    def add_chunk(carry, chunk):
        X, mask = chunk
        mean, cov, _ = row_posteriors(W, mu, noise_precision, X, mask)
        real = jnp.any(mask > 0, axis=1).astype(W.dtype)
        moments = cov + mean[:, :, None] * mean[:, None, :]
        return carry + jnp.einsum("n,nkl->kl", real, moments), None

    total, _ = jax.lax.scan(add_chunk, total, (data.X, data.mask))
    return total


def e_step(params: Params, data: GaussianData, hyper: Hyper):
    """The posterior moments of z = C^-1 f as row sums, and log p(X)."""
    if data.rows is not None:
        raise ValueError("confirmatory factor analysis needs its rows in memory")
    W = frame_loadings(params, hyper)
    precision = 1.0 / params.psi
    regression, loglik = expected_stats(W, params.mu, precision, data)
    latent = _latent_moments(*(jax.lax.stop_gradient(a) for a in (W, params.mu, precision)), data)
    return Stats(regression, latent), loglik


def m_step(stats: Stats, params: Params, hyper: Hyper) -> Params:
    """Per indicator: least squares of x_j - (fixed loadings) f on its free factors
    and 1; psi_j the expected residual variance; Phi the average E[f f^T]."""
    d, K = hyper.free.shape
    C = jnp.tril(params.phi_chol)
    T = jnp.zeros((K + 1, K + 1), C.dtype).at[:K, :K].set(C).at[K, K].set(1.0)
    s = stats.regression
    A = jnp.einsum("ab,jbc,dc->jad", T, s.sum_zz, T)  # sum E[f~ f~^T], f~ = [f, 1]
    b = s.sum_xz @ T.T  # sum x_j E[f~]
    free = jnp.concatenate([hyper.free, jnp.ones((d, 1), C.dtype)], axis=1)
    fixed = jnp.concatenate([hyper.fixed, jnp.zeros((d, 1), C.dtype)], axis=1)
    target = (b - jnp.einsum("jab,jb->ja", A, fixed)) * free
    # the free block's normal equations; fixed coordinates solve to exactly 0
    system = A * free[:, :, None] * free[:, None, :] + jax.vmap(jnp.diag)(1.0 - free)
    coef = jnp.linalg.solve(system, target[..., None])[..., 0] * free + fixed
    residual = (
        s.sum_x2 - 2.0 * jnp.sum(coef * b, axis=1) + jnp.einsum("ja,jab,jb->j", coef, A, coef)
    )
    psi = jnp.maximum(jnp.maximum(residual, 0.0) / s.count, hyper.variance_floor)
    phi = C @ stats.latent @ C.T / hyper.n_rows
    phi = jnp.where(hyper.orthogonal > 0, jnp.diag(jnp.diag(phi)), phi)
    return Params(
        loadings=coef[:, :K] * hyper.free,
        phi_chol=jnp.linalg.cholesky(phi),
        mu=coef[:, K],
        psi=psi,
    )


# ----------------------------------------------------------------------------- host algebra


def n_parameters(free, orthogonal: bool) -> int:
    """Free loadings, the factor (co)variances, d unique variances and d means."""
    free = np.asarray(free)
    d, K = free.shape
    covariances = K if orthogonal else K * (K + 1) // 2
    return int(free.sum()) + covariances + 2 * d


@cache  # one sigma per shape, so the derivative programs compile once per shape
def _covariance_structure(d: int, K: int):
    """``(sigma(theta), unpack)``: Sigma = Lambda Phi Lambda^T + Psi as a function of
    theta = (every loading, Phi's lower triangle, Psi's lower triangle), so that any
    loading, factor covariance or residual covariance can be freed or tested."""
    phi_rows, phi_cols = np.tril_indices(K)
    psi_rows, psi_cols = np.tril_indices(d)

    def symmetric(values, rows, cols, size):
        M = jnp.zeros((size, size), values.dtype).at[rows, cols].set(values)
        return M + M.T - jnp.diag(jnp.diag(M))

    def sigma(theta):
        L = theta[: d * K].reshape(d, K)
        phi = symmetric(theta[d * K : d * K + len(phi_rows)], phi_rows, phi_cols, K)
        psi = symmetric(theta[d * K + len(phi_rows) :], psi_rows, psi_cols, d)
        return L @ phi @ L.T + psi

    return sigma, (phi_rows, phi_cols), (psi_rows, psi_cols)


def modification_indices(loadings, phi, psi, mean, free, orthogonal, S=None, X=None):
    """Score tests of the parameters a CFA fixes (Sorbom 1989): for each fixed
    parameter, the chi-square (1 df) by which freeing it alone would lower the model's
    chi-square to first order, and its expected change.

    ``MI_k = g_k^2 / V_k`` and ``EPC_k = g_k / V_k`` with ``g`` the log-likelihood's
    gradient at the fit and ``V_k = I_kk - I_kF I_FF^-1 I_Fk`` (I the information,
    F the free parameters).  Complete data (``S = (n, ML covariance)``): the
    expected information ``n/2 tr(Sigma^-1 dSigma_i Sigma^-1 dSigma_j)``, lavaan's
    default.  With NaN entries (``X``): the gradient of the exact observed-data
    log-likelihood and its expected information summed over each row's observed
    block (the observed information, minus the Hessian, can be indefinite at a
    misspecified fit: it gave negative indices).  JAX takes every derivative.

    Returns ``(candidates, mi, epc)``: candidates as (kind, i, j) with kind "loading"
    (indicator i, factor j), "residual" (indicators i, j) or "factor" (factors i, j).
    """
    d, K = np.shape(loadings)
    sigma, (phi_rows, phi_cols), (psi_rows, psi_cols) = _covariance_structure(d, K)
    theta = np.concatenate(
        [
            np.ravel(loadings),
            np.asarray(phi)[phi_rows, phi_cols],
            np.asarray(psi)[psi_rows, psi_cols],
        ]
    )
    # which entries of theta are free, and which fixed ones are tested
    free_loading = np.asarray(free, bool).ravel()
    fixed_loading = ~free_loading & (np.ravel(loadings) == 0)
    phi_free = np.ones(len(phi_rows), bool) if not orthogonal else phi_rows == phi_cols
    psi_free = psi_rows == psi_cols
    is_free = np.concatenate([free_loading, phi_free, psi_free])
    tested = np.concatenate([fixed_loading, ~phi_free, ~psi_free])
    candidates = (
        [("loading", j, k) for j in range(d) for k in range(K)]
        + [("factor", r, c) for r, c in zip(phi_rows, phi_cols, strict=True)]
        + [("residual", r, c) for r, c in zip(psi_rows, psi_cols, strict=True)]
    )
    with jax.enable_x64(True):
        if X is None:
            n, S = S
            gradient, information = _expected_derivatives(sigma, theta, np.asarray(S), float(n))
        else:
            gradient, information = _fiml_derivatives(
                sigma, theta, np.asarray(mean, np.float64), np.asarray(X, np.float64)
            )
    gradient, information = np.asarray(gradient), np.asarray(information)
    F = np.flatnonzero(is_free)
    T = np.flatnonzero(tested)
    # V_k = I_kk - I_kF I_FF^-1 I_Fk for every tested k at once
    solved = np.linalg.solve(information[np.ix_(F, F)], information[np.ix_(F, T)])
    V = information[T, T] - np.einsum("ft,ft->t", information[np.ix_(F, T)], solved)
    mi, epc = gradient[T] ** 2 / V, gradient[T] / V
    return [candidates[k] for k in T], mi, epc


@partial(jax.jit, static_argnums=0)
def _expected_derivatives(sigma, theta, S, n):
    """Gradient and expected information (complete rows, ML covariance S)."""

    def loglik(t):
        C = sigma(t)
        return -0.5 * n * (jnp.linalg.slogdet(C)[1] + jnp.trace(jnp.linalg.solve(C, S)))

    C = sigma(theta)
    jac = jax.jacobian(lambda t: sigma(t).ravel())(theta)  # (d*d, p)
    inverse = jnp.linalg.inv(C)
    return jax.grad(loglik)(theta), 0.5 * n * jac.T @ jnp.kron(inverse, inverse) @ jac


@partial(jax.jit, static_argnums=0)
def _fiml_derivatives(sigma, theta, mu, X):
    """Gradient of the exact observed-data log-likelihood in theta (at the means
    ``mu``) and its expected information, each row's observed block's
    ``1/2 tr(S_oo^-1 dS_oo S_oo^-1 dS_oo)`` summed (the means' block is orthogonal)."""
    d = X.shape[1]
    observed = ~jnp.isnan(X)
    resid = jnp.where(observed, X - mu, 0.0)
    both = observed[:, :, None] & observed[:, None, :]
    alone = jnp.where(~observed, 1.0, 0.0)[:, :, None] * jnp.eye(d, dtype=X.dtype)

    def blocks_of(t):  # each row's observed block, a missing coordinate its own unit block
        return jnp.where(both, sigma(t), 0.0) + alone

    def loglik(t):
        blocks = blocks_of(t)
        logdet = jnp.linalg.slogdet(blocks)[1]
        quad = jnp.einsum("ni,ni->n", resid, jnp.linalg.solve(blocks, resid[..., None])[..., 0])
        return -0.5 * jnp.sum(logdet + quad)

    inverse = jnp.linalg.inv(blocks_of(theta))  # (n, d, d)
    jac = jax.jacobian(sigma)(theta)  # (d, d, p)
    masked = both[..., None] * jac[None]  # (n, d, d, p)
    left = jnp.einsum("nij,njkp->nikp", inverse, masked)
    information = 0.5 * jnp.einsum("nikp,nkiq->pq", left, left)
    return jax.grad(loglik)(theta), information
