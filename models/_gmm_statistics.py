"""The E-step of the Gaussian mixture (:func:`latentlab.models.gmm.e_step`): the
chunked rows it reads (``GMMData``), the row sums it returns (``MixtureStats``), and
how they are taken -- responsibilities in log space (PRML 9.23) and the moments about
the current means, one fixed-size chunk of rows at a time, for complete rows and for
rows with missing entries (exact conditional moments).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from latentlab.models._gmm_covariances import (
    component_log_density,
    conditional_components,
    missing_block_components,
)

# no __all__: a private module; latentlab.models.gmm re-exports its public names


class GMMData(NamedTuple):
    """Rows in fixed-size chunks, so an E-step never holds more than one chunk's
    (K, chunk, d) residuals and every chunk reuses one compiled body.

    Complete rows and rows with missing entries are kept apart: only the latter pay
    for per-row conditional Gaussians.  Padding rows have ``row_mask`` 0 (complete
    part) or an all-zero ``observed`` mask (missing part).
    """

    X: jax.Array  # (n_chunks, chunk, d) complete rows
    row_mask: jax.Array  # (n_chunks, chunk) 1 for a real row, 0 for padding
    X_missing: jax.Array  # (m_chunks, m_chunk, d) rows with NaN, zeros where missing
    observed: jax.Array  # (m_chunks, m_chunk, d) 1 where observed, 0 missing or padding
    # int32 token of rows kept outside the program (out of core, Dask), whose
    # statistics the host adds each E-step (latentlab.inference.chunked.host_sum)
    rows: jax.Array | None = None
    # for full/tied covariances where blocks are smaller than d (see
    # _missing_block_chunk): the rows with missing entries sorted into groups by how
    # many they miss, each group's chunks after the previous group's in X_missing, and
    # here one (group chunks, m_chunk, s) int32 array per group, each row's missing
    # coordinates first (s the group's slots); None otherwise
    missing_index: tuple[jax.Array, ...] | None = None


class MixtureStats(NamedTuple):
    """Row sums, taken about the means the E-step was evaluated at."""

    count: jax.Array  # (K,)     N_k = sum_i r_ik
    sum_dx: jax.Array  # (K, d)  sum_i r_ik (x_i - mu_k)
    sum_dxx: jax.Array  # (K, d, d) for full/tied, (K, d) (diagonal only) for diag/spherical


def _moments(resp, diff, covariance_type: str) -> MixtureStats:
    """Row sums of r_ik, r_ik (x_i - mu_k) and the second moments about mu_k."""
    count = jnp.sum(resp, axis=0)
    sum_dx = jnp.einsum("nk,knd->kd", resp, diff)
    if covariance_type in ("full", "tied"):
        sum_dxx = jnp.einsum("knd,kne->kde", resp.T[:, :, None] * diff, diff)
    else:
        sum_dxx = jnp.einsum("nk,knd->kd", resp, diff**2)
    return MixtureStats(count, sum_dx, sum_dxx)


def _responsibilities(log_density, weights, row_mask):
    """Responsibilities (PRML 9.23) in log space, and the summed log-likelihood."""
    weighted = log_density + jnp.log(weights)
    row_loglik = logsumexp(weighted, axis=1)
    resp = jnp.exp(weighted - row_loglik[:, None]) * row_mask[:, None]
    return resp, jnp.sum(jnp.where(row_mask > 0, row_loglik, 0.0))


# The chunk statistics and the M-step are jitted functions of their own: called
# inside the EM program (several times: the starts, each SQUAREM sub-step, the
# carries' shapes) they are traced and lowered once and reused, which halves the
# time a fresh process spends before the first fit; the compiled numbers are the same.
@partial(jax.jit, static_argnames="covariance_type")
def _complete_chunk(params, X, row_mask, covariance_type):
    log_density, diff = component_log_density(params, X, covariance_type)
    resp, loglik = _responsibilities(log_density, params.weights, row_mask)
    return _moments(resp, diff, covariance_type), loglik


@partial(jax.jit, static_argnames="covariance_type")  # see _complete_chunk
def _missing_chunk(params, X, observed, covariance_type):
    """Statistics of rows with missing entries: expected moments under each component's
    conditional, E[(x - mu_k)(x - mu_k)^T | x_o, k] = dx dx^T + cond_cov."""
    log_density, dx, cond_cov = conditional_components(params, X, observed, covariance_type)
    row_mask = (jnp.sum(observed, axis=1) > 0).astype(X.dtype)
    resp, loglik = _responsibilities(log_density, params.weights, row_mask)
    count = jnp.sum(resp, axis=0)
    sum_dx = jnp.einsum("nk,nkd->kd", resp, dx)
    if covariance_type in ("full", "tied"):
        outer = jnp.einsum("nkd,nke->nkde", dx, dx) + cond_cov
        sum_dxx = jnp.einsum("nk,nkde->kde", resp, outer)
    else:
        sum_dxx = jnp.einsum("nk,nkd->kd", resp, dx**2 + cond_cov)
    return MixtureStats(count, sum_dx, sum_dxx), loglik


@partial(jax.jit, static_argnames="covariance_type")  # see _complete_chunk
def _missing_block_chunk(params, X, observed, index, covariance_type):
    """:func:`_missing_chunk` for full/tied covariances through each row's missing block
    (:func:`~latentlab.models._gmm_covariances.missing_block_components`); the
    conditional covariances are added into the (K, d, d) sums at the rows' missing
    coordinates, never formed as d x d matrices."""
    log_density, dx, cond_block = missing_block_components(
        params, X, observed, index, covariance_type
    )
    row_mask = (jnp.sum(observed, axis=1) > 0).astype(X.dtype)
    resp, loglik = _responsibilities(log_density, params.weights, row_mask)
    K, d = params.means.shape
    count = jnp.sum(resp, axis=0)
    sum_dx = jnp.einsum("nk,nkd->kd", resp, dx)
    weighted = resp.T[:, :, None, None] * jnp.swapaxes(cond_block, 0, 1)  # (K, n, s, s)
    components = jnp.arange(K)[:, None, None, None]
    cond = (
        jnp.zeros((K, d, d), X.dtype)
        .at[components, index[None, :, :, None], index[None, :, None, :]]
        .add(weighted)
    )  # cond_block is 0 off each row's block: padding slots add 0
    sum_dxx = (
        jnp.einsum(
            "knd,kne->kde", resp.T[:, :, None] * jnp.swapaxes(dx, 0, 1), jnp.swapaxes(dx, 0, 1)
        )
        + cond
    )
    return MixtureStats(count, sum_dx, sum_dxx), loglik


def _sum_over_chunks(chunk_stats, params, arrays):
    """Add ``chunk_stats(params, *chunk)`` over the leading (chunk) axis of ``arrays``."""
    first = jax.eval_shape(chunk_stats, params, *(a[0] for a in arrays))
    zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), first)

    def add(total, chunk):
        return jax.tree.map(jnp.add, total, chunk_stats(params, *chunk)), None

    return jax.lax.scan(add, zero, arrays)[0]
