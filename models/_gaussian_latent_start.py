"""Where EM starts and what it runs on, for the Gaussian latent models
(:mod:`latentlab.models.gaussian_latent`, which re-exports these names): the PCA
start, the padding of the latent dimension to shape buckets, and the preparation of
NumPy data for the E-step.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab._shapes import chunked, em_rows
from latentlab.inference.summaries import scatter_about_mean
from latentlab.models._gaussian_latent_moments import CompleteSummary, GaussianData

# no __all__: a private module; latentlab.models.gaussian_latent re-exports its names


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
    that lets one compiled program serve several K
    (see :func:`latentlab._shapes.gaussian_latent_columns`).
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
# K of a bucket (a rank search compiles once per bucket, not once per K).  Which
# bucket a fit uses is decided in latentlab._shapes (gaussian_latent_columns).


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


def missing_row_blocks(X, mask, chunk_size):
    """The rows with missing entries as (n_chunks, rows per chunk, d) blocks; no rows
    give no chunks (complete data skip the per-row E-step altogether)."""
    if X.shape[0] == 0:
        return np.zeros((0, 32, X.shape[1])), np.zeros((0, 32, X.shape[1]))
    return chunked(X, chunk_size, em_rows), chunked(mask, chunk_size, em_rows)


def summarise(X, shift, mask=None, chunk_size: int = 1024, dtype=None):
    """Prepare NumPy data for the E-step, in coordinates shifted by ``shift``.

    Rows without missing entries are reduced to (n, sum x, sum x x^T); rows with
    missing entries (``mask`` 0, X NaN there) are kept, padded with fully masked rows
    up to a bucket size (:func:`~latentlab._shapes.em_rows`, then a multiple
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
    X_inc, m_inc = missing_row_blocks(X_inc, m_inc, chunk_size)
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


def global_scale(column_variance) -> float:
    """One scale for a whole data set: the square root of its mean feature variance
    (the MAP/SVI fits and posterior draws work on data divided by it, where Adam's
    step size and the declared priors make sense)."""
    mean_variance = float(np.mean(column_variance))
    return float(np.sqrt(mean_variance)) if mean_variance > 0 else 1.0
