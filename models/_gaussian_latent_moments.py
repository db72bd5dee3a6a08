"""Posterior moments of z, the E-step's row sums and the regression M-step of the
Gaussian latent models (:mod:`latentlab.models.gaussian_latent`, which re-exports
these names).

EM treats z as the only latent variable and missing coordinates as simply absent,
so the M-step is a per-coordinate linear regression of x_j on z~ = [z, 1] over the
rows where x_j is observed.  Its sufficient statistics are sums over rows:

    count[j]  = sum_i o_ij
    sum_x2[j] = sum_i o_ij x_ij^2
    sum_xz[j] = sum_i o_ij x_ij E[z~_i]               (d, K+1)
    sum_zz[j] = sum_i o_ij E[z~_i z~_i^T]             (d, K+1, K+1)

Rows without missing entries depend on the data only through (n, sum x, sum x x^T),
so they are summarised once per fit and every EM iteration costs O(d^2 K) for them.
Only rows with missing entries are processed one by one, in fixed-size chunks.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from latentlab.models._linalg import solve_refined, spd_inverse_columns

# no __all__: a private module; latentlab.models.gaussian_latent re-exports its names

LOG_2PI = math.log(2.0 * math.pi)


class CompleteSummary(NamedTuple):
    """Row sums of the rows with no missing entry."""

    n: jax.Array  # scalar
    sum_x: jax.Array  # (d,)
    sum_xx: jax.Array  # (d, d)


class GaussianData(NamedTuple):
    """A data set prepared for the Gaussian latent E-step.

    ``complete`` summarises the fully observed rows.  ``X``/``mask`` hold the rows
    with missing entries as ``(n_chunks, chunk_size, d)`` blocks; missing entries
    (and padding rows) have mask 0 and X 0, so they contribute nothing.
    """

    complete: CompleteSummary
    X: jax.Array  # (n_chunks, chunk, d)
    mask: jax.Array  # (n_chunks, chunk, d)
    # rows with missing entries kept outside the program (out of core, Dask): their
    # statistics come from the host each E-step (latentlab.inference.chunked)
    rows: OutOfCoreRows | None = None


class OutOfCoreRows(NamedTuple):
    """Handle of the rows with missing entries that stay in their source.

    The host reads them in chunks, takes ``(x - shift) / scale`` on the observed
    entries (``shift`` lives with the source), and adds :func:`_chunk_stats` over
    them.  ``start_sum_x``/``start_sum_xx`` are their sums with every missing entry
    at its column's observed mean (for :func:`mean_imputed_pca`), ``count`` their
    observed entries per feature.
    """

    token: jax.Array  # int32 scalar (latentlab.inference.chunked.register)
    n_rows: jax.Array  # int scalar: how many rows (sizes the padding of W's columns)
    scale: jax.Array  # (d,)
    count: jax.Array  # (d,)
    start_sum_x: jax.Array  # (d,)
    start_sum_xx: jax.Array  # (d, d)

    def scaled(self, scale):
        """The handle for the data divided column-wise by ``scale`` (d,)."""
        return self._replace(
            scale=self.scale * scale,
            start_sum_x=self.start_sum_x / scale,
            start_sum_xx=self.start_sum_xx / (scale[:, None] * scale[None, :]),
        )


class RegressionStats(NamedTuple):
    """Per-coordinate sufficient statistics of the regression of x_j on [z, 1]."""

    count: jax.Array  # (d,)
    sum_x2: jax.Array  # (d,)
    sum_xz: jax.Array  # (d, K+1)
    sum_zz: jax.Array  # (d, K+1, K+1)


def _tree_add(a, b):
    return jax.tree.map(jnp.add, a, b)


# ----------------------------------------------------------------------------- posterior


def _posterior_columns(W, mu, noise_precision, X, mask):
    """:func:`row_posteriors` with the row axis last: mean (K, n), cov (K, K, n)."""
    d, K = W.shape
    prec = mask * noise_precision  # (n, d): Psi^{-1} restricted to observed coordinates
    resid = mask * (X - mu)
    # M_n = I + W^T diag(prec_n) W for every row at once: one (K^2, d) x (d, n) product
    outer = (W[:, :, None] * W[:, None, :]).reshape(d, K * K)
    M = jnp.eye(K, dtype=W.dtype)[:, :, None] + (outer.T @ prec.T).reshape(K, K, -1)
    cov, logdet_M = spd_inverse_columns(M)
    b = W.T @ (prec * resid).T  # (K, n): W_O^T Psi_O^{-1} (x_O - mu_O)
    mean = solve_refined(M, cov, b)
    # Woodbury: r^T C^{-1} r = r^T Psi^{-1} r - b^T M^{-1} b;  log|C| = log|M| + log|Psi|
    log_noise = jnp.where(mask > 0, jnp.log(noise_precision), 0.0)
    quad = jnp.sum(prec * resid**2, axis=1) - jnp.sum(b * mean, axis=0)
    loglik = -0.5 * (jnp.sum(mask, axis=1) * LOG_2PI - jnp.sum(log_noise, axis=1) + logdet_M + quad)
    return mean, cov, loglik


def row_posteriors(W, mu, noise_precision, X, mask):
    """Posterior of z for each row given its observed coordinates.

    Parameters
    ----------
    W : (d, K) loadings.  mu : (d,) mean.  noise_precision : (d,) 1 / Psi.
    X : (n, d) data, any value where ``mask`` is 0.  mask : (n, d) 1 where observed.

    Returns
    -------
    mean : (n, K) E[z | x_O].   cov : (n, K, K) Cov[z | x_O].
    loglik : (n,) log N(x_O | mu_O, W_O W_O^T + Psi_O)  (0 for a row with nothing observed).
    """
    mean, cov, loglik = _posterior_columns(W, mu, noise_precision, X, mask)
    return mean.T, jnp.moveaxis(cov, -1, 0), loglik


def complete_posterior_operator(W, noise_precision):
    """For fully observed rows: E[z|x] = B (x - mu) with B = M^{-1} W^T Psi^{-1}, Cov = M^{-1}.

    Returns ``(B, cov, logdet_M)``.
    """
    K = W.shape[1]
    M = jnp.eye(K, dtype=W.dtype) + (W.T * noise_precision) @ W
    chol = jnp.linalg.cholesky(M)
    B = cho_solve((chol, True), W.T * noise_precision)
    cov = cho_solve((chol, True), jnp.eye(K, dtype=W.dtype))
    logdet_M = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
    return B, cov, logdet_M


def marginal_loglik_rows(W, mu, noise_precision, X, mask):
    """Per-row observed-data log-likelihood (used by ``score_samples``)."""
    return row_posteriors(W, mu, noise_precision, X, mask)[2]


def conditional_missing(W, mu, noise_precision, X, mask):
    """Gaussian conditional of every coordinate given a row's observed coordinates.

    Returns ``(mean, var, z_mean, z_cov)``: for observed coordinates ``mean`` is x and
    ``var`` 0; for missing ones ``mean = W_j E[z] + mu_j`` and
    ``var = W_j Cov[z] W_j^T + Psi_j`` (PRML 2.81 through the latent variable).
    """
    z_mean, z_cov, _ = row_posteriors(W, mu, noise_precision, X, mask)
    pred = z_mean @ W.T + mu
    var = jnp.einsum("jk,nkl,jl->nj", W, z_cov, W) + 1.0 / noise_precision
    observed = mask > 0
    return jnp.where(observed, X, pred), jnp.where(observed, 0.0, var), z_mean, z_cov


# ----------------------------------------------------------------------------- E-step


def _complete_stats(W, mu, noise_precision, summary: CompleteSummary):
    d, K = W.shape
    n, sum_x, sum_xx = summary
    B, cov, logdet_M = complete_posterior_operator(W, noise_precision)
    # scatter about mu: sum (x - mu)(x - mu)^T
    scatter = sum_xx - jnp.outer(sum_x, mu) - jnp.outer(mu, sum_x) + n * jnp.outer(mu, mu)
    sum_ez = B @ (sum_x - n * mu)  # (K,)
    sum_ezz = n * cov + B @ scatter @ B.T  # (K, K)
    zz = jnp.zeros((K + 1, K + 1), W.dtype)
    zz = zz.at[:K, :K].set(sum_ezz).at[:K, K].set(sum_ez).at[K, :K].set(sum_ez).at[K, K].set(n)
    # sum_i x_ij E[z_i] = [(sum_xx - sum_x mu^T) B^T]_j
    xz = jnp.concatenate([(sum_xx - jnp.outer(sum_x, mu)) @ B.T, sum_x[:, None]], axis=1)
    stats = RegressionStats(
        count=jnp.full((d,), n, W.dtype),
        sum_x2=jnp.diagonal(sum_xx),
        sum_xz=xz,
        sum_zz=jnp.broadcast_to(zz, (d, K + 1, K + 1)),
    )
    # Woodbury again, on the scatter matrix: sum_i r_i^T C^{-1} r_i
    quad = jnp.sum(noise_precision * jnp.diagonal(scatter)) - jnp.trace(
        B @ scatter @ (W * noise_precision[:, None])
    )
    loglik = -0.5 * (n * d * LOG_2PI - n * jnp.sum(jnp.log(noise_precision)) + n * logdet_M + quad)
    return stats, loglik


def _chunk_stats(W, mu, noise_precision, X, mask):
    d, K = W.shape
    n = X.shape[0]
    mean, cov, loglik = _posterior_columns(W, mu, noise_precision, X, mask)
    z_tilde = jnp.concatenate([mean, jnp.ones((1, n), W.dtype)], axis=0)  # (K+1, n)
    zz = (z_tilde[:, None, :] * z_tilde[None, :, :]).at[:K, :K].add(cov)  # (K+1, K+1, n)
    Xm = mask * X
    stats = RegressionStats(
        count=jnp.sum(mask, axis=0),
        sum_x2=jnp.sum(Xm * X, axis=0),
        sum_xz=Xm.T @ z_tilde.T,
        # sum_n mask[n, j] E[z~ z~^T]_n as one (K+1)^2 x n x d product
        sum_zz=(zz.reshape((K + 1) ** 2, n) @ mask).T.reshape(d, K + 1, K + 1),
    )
    return stats, jnp.sum(loglik)


def expected_stats(W, mu, noise_precision, data: GaussianData):
    """E-step: regression statistics and the observed-data log-likelihood (a scalar).

    The log-likelihood's gradient in (W, mu, noise_precision) is Fisher's identity,
    the gradient of the expected complete-data log-likelihood at the statistics held
    fixed (:func:`_fisher_gradient`): exact, costs O(d K^2) beyond the E-step, and
    exists for rows summed outside the program (host callbacks have no derivative).
    Only first derivatives are right; nothing takes second ones of it.
    """
    W0, mu0, precision0 = (jax.lax.stop_gradient(a) for a in (W, mu, noise_precision))
    stats, loglik = _e_step_sums(W0, mu0, precision0, data)
    return stats, loglik + _fisher_gradient(W, mu, noise_precision, stats)


def _fisher_gradient(W, mu, noise_precision, stats: RegressionStats):
    """Zero, with the observed-data log-likelihood's gradient (Fisher's identity):
    Q(theta) - stop_gradient(Q(theta)), Q the expected complete-data log-likelihood
    sum_j [count_j log(lambda_j) - lambda_j E||x_j - c_j' z~||^2] / 2 (lambda the noise
    precision, c_j = [W_j, mu_j]) at the E-step's statistics, which equals the
    log-likelihood's gradient where they were computed."""
    coef = jnp.concatenate([W, mu[:, None]], axis=1)  # (d, K+1)
    residual = (
        stats.sum_x2
        - 2.0 * jnp.sum(coef * stats.sum_xz, axis=1)
        + jnp.einsum("ja,jab,jb->j", coef, stats.sum_zz, coef)
    )
    q = 0.5 * jnp.sum(stats.count * jnp.log(noise_precision) - noise_precision * residual)
    return q - jax.lax.stop_gradient(q)


def _e_step_sums(W, mu, noise_precision, data: GaussianData):
    stats, loglik = _complete_stats(W, mu, noise_precision, data.complete)
    if data.rows is not None:  # rows outside the program: summed on the host
        from latentlab.inference.chunked import host_sum

        arrays = (W, mu, noise_precision, data.rows.scale)
        more, more_ll = host_sum("gaussian_rows", data.rows.token, arrays, (stats, loglik))
        stats, loglik = _tree_add(stats, more), loglik + more_ll
    if data.X.shape[0] == 0:  # complete data: no per-row machinery to trace or run
        return stats, loglik

    def add_chunk(carry, chunk):
        X, mask = chunk
        s, ll = _chunk_stats(W, mu, noise_precision, X, mask)
        return (_tree_add(carry[0], s), carry[1] + ll), None

    (stats, loglik), _ = jax.lax.scan(add_chunk, (stats, loglik), (data.X, data.mask))
    return stats, loglik


# ----------------------------------------------------------------------------- M-step


def solve_regression(stats: RegressionStats, w_penalty=None):
    """Per-coordinate least squares of x_j on [z, 1] (the exact EM M-step for W and mu).

    ``w_penalty`` (K,) adds a ridge term on the W block only (Bayesian PCA's
    sigma^2 * alpha_k).  Returns ``(W, mu, residual)`` where ``residual[j]`` is the
    expected residual sum of squares of coordinate j at the new (W, mu).
    """
    sum_zz = stats.sum_zz
    K = sum_zz.shape[-1] - 1
    if w_penalty is not None:
        penalty = jnp.concatenate([w_penalty, jnp.zeros((1,), sum_zz.dtype)])
        sum_zz = sum_zz + jnp.diag(penalty)
    chol = jnp.linalg.cholesky(sum_zz)
    coef = jax.vmap(lambda c, v: cho_solve((c, True), v))(chol, stats.sum_xz)  # (d, K+1)
    residual = (
        stats.sum_x2
        - 2.0 * jnp.sum(coef * stats.sum_xz, axis=1)
        + jnp.einsum("ja,jab,jb->j", coef, stats.sum_zz, coef)
    )
    return coef[:, :K], coef[:, K], jnp.maximum(residual, 0.0)
