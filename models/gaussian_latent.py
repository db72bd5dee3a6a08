"""Posterior-moment algebra shared by the Gaussian latent-variable models.

Every model here (PPCA, Bayesian PCA, factor analysis, supervised PCA) is

    z ~ N(0, I_K),    x | z ~ N(W z + mu, diag(1 / noise_precision)),

with the models differing only in how ``noise_precision`` is tied (one value for
PPCA, one per coordinate for FA, an alpha-weighted block for supervised PCA) and in
the prior on ``W``.  The marginal is ``N(mu, W W^T + Psi)`` (Tipping & Bishop 1999,
eq. 3-4); the posterior of z given the observed coordinates O of a row is Gaussian
with precision ``M = I + W_O^T Psi_O^{-1} W_O`` and mean
``M^{-1} W_O^T Psi_O^{-1} (x_O - mu_O)`` (PRML 12.42).

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
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.linalg import cho_solve

from latentlab.inference.linalg import solve_refined, spd_inverse_columns
from latentlab.inference.summaries import chunked, scatter_about_mean

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
    """E-step: regression statistics and the observed-data log-likelihood (a scalar)."""
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


# ----------------------------------------------------------------------------- PCA start


class PCAStart(NamedTuple):
    """The Tipping-Bishop PPCA solution of a covariance, for starting EM."""

    W: jax.Array  # (d, K) U_K (L_K - sigma2)^{1/2}
    mu: jax.Array  # (d,)
    sigma2: jax.Array  # () mean of the discarded eigenvalues
    residual: jax.Array  # (d,) each feature's variance left unexplained by W W^T


def pca_solution(n, sum_x, sum_xx, n_columns: int, n_components=None) -> PCAStart:
    """Tipping & Bishop (1999) eq. 7-8 from row sums (n, sum x, sum x x^T).

    With S the ML (ddof=0) covariance and eigenvalues l_1 >= ... >= l_d:
    sigma2 = mean(l_{K+1..d}),  W = U_K (L_K - sigma2 I)^{1/2}.

    ``W`` has ``n_columns`` (static) columns: the first ``n_components`` (K; may be a
    traced value, default ``n_columns``) are the solution, the rest zero -- padding
    that lets one compiled program serve several K (see :func:`padded_columns`).
    """
    mu = sum_x / n
    cov = sum_xx / n - jnp.outer(mu, mu)  # callers pass data already centred near 0
    eigvals, eigvecs = jnp.linalg.eigh(cov)
    eigvals, eigvecs = eigvals[::-1], eigvecs[:, ::-1]
    d = eigvals.shape[0]
    K = n_columns if n_components is None else n_components
    index = jnp.arange(d)
    n_discarded = d - K
    # no eigenvalue left over (K = d, as factor analysis allows): no isotropic noise
    sigma2 = jnp.where(
        n_discarded > 0,
        jnp.sum(jnp.where(index >= K, eigvals, 0.0)) / jnp.maximum(n_discarded, 1),
        0.0,
    )
    kept = min(n_columns, d)
    scale = jnp.sqrt(jnp.maximum(eigvals[:kept] - sigma2, 0.0))
    W = eigvecs[:, :kept] * jnp.where(index[:kept] < K, scale, 0.0)
    W = jnp.pad(W, ((0, 0), (0, n_columns - kept)))
    residual = jnp.maximum(jnp.diagonal(cov) - jnp.sum(W**2, axis=1), 0.0)
    return PCAStart(W=W, mu=mu, sigma2=sigma2.astype(eigvals.dtype), residual=residual)


def mean_imputed_pca(data: GaussianData, n, n_columns: int, n_components=None) -> PCAStart:
    """:func:`pca_solution` of the data with every missing entry at its column's
    observed mean, a deterministic EM start near the optimum.

    ``data`` comes from :func:`summarise`, so missing entries (and padding rows) are
    already 0, the observed column means; ``n`` is the number of real rows.  Random
    starts alone can settle in worse local optima when data are missing (seen with
    monotone patterns).  For complete data this is the ML solution itself.
    """
    d = data.X.shape[-1]
    X = data.X.reshape(-1, d)
    sum_x = data.complete.sum_x + jnp.sum(X, axis=0)
    sum_xx = data.complete.sum_xx + X.T @ X
    if data.rows is not None:
        sum_x, sum_xx = sum_x + data.rows.start_sum_x, sum_xx + data.rows.start_sum_xx
    return pca_solution(n, sum_x, sum_xx, n_columns, n_components)


# ----------------------------------------------------------------------------- padding
#
# A loadings column held at exactly zero is a fixed point of every EM update here:
# its posterior mean is 0 and its posterior variance 1, independent of the other
# columns (the posterior precision I + W^T Psi^{-1} W is block diagonal), so its
# regression coefficient stays 0, and it adds nothing to the likelihood (its block of
# log|M| is log 1).  Fitting K components with W padded by zero columns to a
# bucket size therefore gives the K-column fit, and one compiled program serves every
# K of a bucket (a rank search compiles once per bucket, not once per K).

SMALLEST_BUCKET = 4
# Small problems share one bucket for every K up to this: a rank search (Imputer,
# compare, GridSearchCV) then compiles one program, and the padded arithmetic costs
# at most SMALL_WORK multiply-adds per EM iteration (~1 ms).
SHARED_BUCKET = 16
SMALL_WORK = 1 << 22
# Padding stops paying when its extra arithmetic outweighs a compile (~0.5 s): at
# about this many multiply-adds per EM iteration, the fit uses exactly K columns.
PADDING_MAX_WORK = 1 << 26


def _iteration_work(n_columns: int, n_features: int, n_missing_rows: int) -> int:
    """Multiply-adds of one EM iteration, roughly: ``d^2 K`` for the complete rows'
    summary, ``n d K^2`` for rows with missing entries, ``d K^3`` for the M-step."""
    d, K = n_features, n_columns
    return d * d * K + (n_missing_rows + 1) * d * K * K + d * K**3


def padded_columns(n_components: int, n_features: int, n_missing_rows: int = 0) -> int:
    """Number of loadings columns to fit K = ``n_components`` with.

    Small problems: :data:`SHARED_BUCKET` for every K up to it.  Otherwise K rounded
    up to a power of two (at least :data:`SMALLEST_BUCKET`), or K itself when that
    padded work would be large (:func:`_iteration_work` over
    :data:`PADDING_MAX_WORK`).
    """
    K, d, m = int(n_components), int(n_features), int(n_missing_rows)
    if K <= SHARED_BUCKET and _iteration_work(SHARED_BUCKET, d, m) <= SMALL_WORK:
        return SHARED_BUCKET
    padded = max(SMALLEST_BUCKET, 1 << (K - 1).bit_length())
    return padded if _iteration_work(padded, d, m) <= PADDING_MAX_WORK else K


def column_normals(key, n_features: int, n_columns: int, dtype):
    """Standard normal (d, n_columns) loadings whose column k is drawn from
    ``fold_in(key, k)``: a column's draw does not depend on how many columns follow,
    so padded and unpadded random starts agree on their real columns."""

    def column(k):
        return jax.random.normal(jax.random.fold_in(key, k), (n_features,), dtype)

    return jax.vmap(column)(jnp.arange(n_columns)).T


# ----------------------------------------------------------------------------- data prep


def _scatter_about(X, shift):
    """(sum (x - shift), sum (x - shift)(x - shift)^T) over the rows of a complete X."""
    n = X.shape[0]
    mean, scatter = scatter_about_mean(X)
    delta = mean - shift
    return n * delta, scatter + n * np.outer(delta, delta)


def _pad_rows(X, mask, chunk_size):
    """The rows with missing entries as (n_chunks, rows per chunk, d) blocks; no rows
    give no chunks (complete data skip the per-row E-step altogether)."""
    if X.shape[0] == 0:
        return np.zeros((0, 32, X.shape[1])), np.zeros((0, 32, X.shape[1]))
    return chunked(X, chunk_size), chunked(mask, chunk_size)


def summarise(X, shift, mask=None, chunk_size: int = 1024, dtype=None):
    """Prepare NumPy data for the E-step, in coordinates shifted by ``shift``.

    Rows without missing entries are reduced to (n, sum x, sum x x^T); rows with
    missing entries (``mask`` 0, X NaN there) are kept, padded with fully masked rows
    up to a bucket size (:func:`~latentlab.inference.summaries.bucket`, then a multiple
    of ``chunk_size``) so that
    fits on data sets of similar size reuse one compiled program.  ``mask=None``
    means X is complete.

    Returns ``(data, column_variance)``, the latter the (d,) variance of each
    feature's observed entries (a scale for initialisation and variance floors).
    """
    n, d = X.shape
    if mask is None:
        X_inc, m_inc = np.zeros((0, d)), np.zeros((0, d))
        n_complete = n
        sum_x, sum_xx = _scatter_about(X, shift)
        count, col_sum, col_sq = n, sum_x, np.diag(sum_xx)
    else:
        Xz = np.where(mask, X - shift, 0.0)
        complete = mask.all(axis=1)
        Xc = Xz[complete]
        n_complete = Xc.shape[0]
        sum_x, sum_xx = Xc.sum(axis=0), Xc.T @ Xc
        X_inc, m_inc = Xz[~complete], mask[~complete].astype(float)
        count, col_sum, col_sq = mask.sum(axis=0), Xz.sum(axis=0), (Xz * Xz).sum(axis=0)
    column_variance = np.maximum(col_sq / count - (col_sum / count) ** 2, 0.0)
    X_inc, m_inc = _pad_rows(X_inc, m_inc, chunk_size)
    # NumPy arrays in JAX's working precision: handed to a compiled program as they
    # are (jnp.asarray would compile a small staging program per shape)
    dtype = jax.dtypes.canonicalize_dtype(np.float64 if dtype is None else dtype)
    summary = CompleteSummary(
        n=np.asarray(float(n_complete), dtype),
        sum_x=np.asarray(sum_x, dtype),
        sum_xx=np.asarray(sum_xx, dtype),
    )
    data = GaussianData(summary, np.asarray(X_inc, dtype), np.asarray(m_inc, dtype))
    return data, column_variance


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


def marginal_covariance(W, noise_variance) -> np.ndarray:
    """The model covariance of x, ``W W^T + diag(noise_variance)`` (NumPy)."""
    W = np.asarray(W)
    return W @ W.T + np.diag(noise_variance)


def marginal_precision(W, noise_variance) -> np.ndarray:
    """Inverse of :func:`marginal_covariance` by the Woodbury identity, O(d^2 K):
    ``Psi^{-1} - Psi^{-1} W M^{-1} W^T Psi^{-1}`` with ``M = I + W^T Psi^{-1} W``
    (the posterior precision of z)."""
    W = np.asarray(W)
    psi_inv = 1.0 / np.asarray(noise_variance)
    M = np.eye(W.shape[1]) + (W.T * psi_inv) @ W
    B = np.linalg.solve(M, W.T * psi_inv)
    return np.diag(psi_inv) - (W * psi_inv[:, None]) @ B


def draw_rows(z_mean, z_cov, W, mu, noise_variance, rng) -> np.ndarray:
    """One draw of every row from the model given its posterior of z: z ~ N(z_mean,
    z_cov) (n, K) and (n, K, K), then x | z ~ N(W z + mu, diag(noise_variance)), so the
    coordinates keep their correlations (NumPy, ``rng`` a ``RandomState``)."""
    chol = np.linalg.cholesky(z_cov)
    z = z_mean + np.einsum("nkl,nl->nk", chol, rng.standard_normal(z_mean.shape))
    n, d = z.shape[0], np.shape(W)[0]
    return z @ np.asarray(W).T + mu + np.sqrt(noise_variance) * rng.standard_normal((n, d))


def orient_columns(W, *columns_along):
    """Loadings ``W`` (d, K) with columns by decreasing sum of squares, each with its
    largest-magnitude entry positive (as scikit-learn's ``svd_flip``), in NumPy.

    Arrays in ``columns_along`` (one entry per column, e.g. Bayesian PCA's alpha) are
    reordered with the columns.  Returns ``W`` alone, or ``(W, *columns_along)``.
    """
    W = np.asarray(W)
    order = np.argsort(-np.sum(W**2, axis=0), kind="stable")
    W = W[:, order]
    signs = np.sign(W[np.abs(W).argmax(axis=0), np.arange(W.shape[1])])
    W = W * np.where(signs == 0, 1.0, signs)
    if not columns_along:
        return W
    return (W, *(np.asarray(a)[order] for a in columns_along))


def canonical_loadings(W) -> np.ndarray:
    """Rotate loadings to their principal axes and fix each column's sign (NumPy).

    The likelihood depends on W only through W W^T, so W R for any orthogonal R is
    equally good.  Reporting W = U S (from W = U S V^T) makes the columns orthogonal
    and ordered by norm, and :func:`orient_columns` makes the result deterministic.
    Computed on the host: a d x K SVD costs microseconds, a compiled program for it a
    compile.
    """
    U, S, _ = np.linalg.svd(np.asarray(W), full_matrices=False)
    return orient_columns(U * S)


# ----------------------------------------------------------------------------- declaration


def detect_missing(X, has_missing):
    """Whether X holds NaN; X must be concrete unless ``has_missing`` is given.

    Traced callers (SVI, NUTS) pass ``has_missing`` explicitly.
    """
    if has_missing is not None or X is None:
        return bool(has_missing)
    return bool(np.isnan(np.asarray(X)).any())


def sample_loadings_and_mean(n_features: int, n_components: int):
    """The sites ``W`` (d, K) ~ N(0, 1) and ``mu`` (d,) ~ N(0, 10^2) (priors for
    standardised data; callers wrap them in ``handlers.mask`` to switch them off)."""
    W = numpyro.sample("W", dist.Normal(0.0, 1.0).expand([n_features, n_components]).to_event(2))
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0).expand([n_features]).to_event(1))
    return W, mu


# The variance whose normal density at its own mean is exactly 1.  ``handlers.mask``
# can only drop whole rows; the declarations instead put a missing coordinate at its
# mean, cut it from every covariance term and give it this variance, so it contributes
# a factor N(0 | 0, 1/(2 pi)) = 1 and a row's log-density is exactly its marginal over
# the observed coordinates (used by every model with NaN entries).
UNIT_DENSITY_VARIANCE = 1.0 / (2.0 * math.pi)


def masked_low_rank(observed, loc, value, cov_factor, cov_diag):
    """``(value filled, cov_factor, cov_diag)`` of a LowRankMultivariateNormal(loc,
    cov_factor, cov_diag) whose density at the filled value is the marginal of the
    ``observed`` coordinates (see :data:`UNIT_DENSITY_VARIANCE`)."""
    return (
        jnp.where(observed, value, loc),
        cov_factor * observed[..., None],
        jnp.where(observed, cov_diag, UNIT_DENSITY_VARIANCE),
    )


def _observed_marginal(X, W, mu, noise_var, has_missing):
    """The marginal of x over z as a LowRankMultivariateNormal, exact for missing
    entries (:func:`masked_low_rank`).  ``noise_var`` is (d,)."""
    if not has_missing:
        return dist.LowRankMultivariateNormal(mu, W, noise_var), X
    x_filled, cov_factor, cov_diag = masked_low_rank(~jnp.isnan(X), mu, X, W, noise_var)
    return dist.LowRankMultivariateNormal(mu, cov_factor, cov_diag), x_filled


def observe_rows(X, W, mu, noise_var, *, n_samples, has_missing, explicit_latent, subsample_size):
    """The local part of every Gaussian latent declaration: a plate over rows with
    ``x ~ N(mu, W W^T + diag(noise_var))`` (or z sampled explicitly, then x | z)."""
    K = W.shape[1]
    with numpyro.plate("rows", n_samples, subsample_size=subsample_size):
        X_batch = None if X is None else numpyro.subsample(X, event_dim=1)
        if explicit_latent:
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([K]).to_event(1))
            loc = z @ W.T + mu
            likelihood = dist.Normal(loc, jnp.sqrt(noise_var))
            if has_missing:
                observed = ~jnp.isnan(X_batch)
                X_batch = jnp.where(observed, X_batch, loc)
                likelihood = likelihood.mask(observed)
            numpyro.sample("x", likelihood.to_event(1), obs=X_batch)
        elif X_batch is None:
            numpyro.sample("x", dist.LowRankMultivariateNormal(mu, W, noise_var))
        else:
            marginal, obs = _observed_marginal(X_batch, W, mu, noise_var, has_missing)
            numpyro.sample("x", marginal, obs=obs)
