"""Isomap (Tenenbaum, de Silva & Langford 2000) as pure jit-compiled functions.

Classical (Torgerson) MDS of the geodesic distance matrix D: the top eigenpairs of
``H (-D**2 / 2) H`` (H the centring matrix); a point's coordinates are
``sqrt(lambda_k) v_k``.  The shortest paths themselves are computed on the host
(SciPy); here are the eigenproblem and the out-of-sample extension: a new point's
geodesic distances run through its graph neighbours,
``g(x)_j = min_i (|x - x_i| + D_ij)``, and its coordinates are the centred kernel
vector of ``-g**2 / 2`` times ``v_k / sqrt(lambda_k)`` (the Nystrom / landmark-MDS
extension; de Silva & Tenenbaum 2004), which reproduces a training point exactly.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from latentlab.closed_form.eigensolvers import partial_eigh
from latentlab.closed_form.kernel_pca import CenteredKernel
from latentlab.closed_form.kernels import center_test_kernel
from latentlab.inference.programs import program

__all__ = ["IsomapFit", "fit_isomap", "isomap_transform", "geodesic_kernel_rows"]


class IsomapFit(NamedTuple):
    eigenvalues: jax.Array  # (k,) of the centred kernel H (-D^2/2) H, decreasing
    eigenvectors: jax.Array  # (n, k) unit columns
    column_means: jax.Array  # (n,) of -D^2/2
    grand_mean: jax.Array  # ()
    converged: jax.Array  # ()


@program(static_argnames=("n_components", "solver", "block_size", "max_blocks", "max_products"))
def fit_isomap(
    D,
    key,
    *,
    n_components: int,
    solver: str = "dense",
    block_size: int = 0,
    max_blocks: int = 0,
    max_products: int = 0,
    tol=0.0,
) -> IsomapFit:
    """Classical MDS of the (n, n) geodesic distance matrix D."""
    G = -0.5 * D * D
    column_means = jnp.mean(G, axis=0)
    grand_mean = jnp.mean(column_means)
    if solver == "lanczos":  # the centred kernel as an operator: no second n x n array
        A = CenteredKernel(G, column_means, grand_mean)
    else:
        A = G - column_means[None, :] - column_means[:, None] + grand_mean
    eig = partial_eigh(
        A,
        key,
        n_components=n_components,
        which="top",
        solver=solver,
        block_size=block_size,
        max_blocks=max_blocks,
        max_products=max_products,
        tol=tol,
    )
    return IsomapFit(eig.eigenvalues, eig.eigenvectors, column_means, grand_mean, eig.converged)


def geodesic_kernel_rows(distances, indices, D):
    """``-g**2 / 2`` for new points whose graph neighbours are ``indices`` (m, k) at
    ``distances`` (m, k; ``inf`` marks padding): ``g_j = min_i (d_i + D[idx_i, j])``."""

    def one(row):
        d, idx = row
        g = jnp.min(d[:, None] + D[idx], axis=0)
        return -0.5 * g * g

    return jax.lax.map(one, (distances, indices), batch_size=64)


@program
def isomap_transform(distances, indices, D, eigenvalues, eigenvectors, column_means, grand_mean):
    """Coordinates (m, k) of new points from their neighbours in the training graph."""
    K_new = center_test_kernel(
        geodesic_kernel_rows(distances, indices, D), column_means, grand_mean
    )
    return K_new @ (eigenvectors / jnp.sqrt(eigenvalues))
