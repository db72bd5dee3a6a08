"""Isomap (Tenenbaum, de Silva & Langford 2000) as pure jit-compiled functions.

Classical (Torgerson) MDS of the geodesic distance matrix D: the top eigenpairs of
``H (-D**2 / 2) H`` (H the centring matrix); a point's coordinates are
``sqrt(lambda_k) v_k``.  The shortest paths are computed on the host (SciPy) and the
eigenproblem is :func:`latentlab.closed_form.mds.classical_mds` of ``D**2``; here is
the out-of-sample extension: a new point's geodesic distances run through its graph
neighbours, ``g(x)_j = min_i (|x - x_i| + D_ij)``, and its coordinates are the centred
kernel vector of ``-g**2 / 2`` times ``v_k / sqrt(lambda_k)`` (the Nystrom /
landmark-MDS extension; de Silva & Tenenbaum 2004), which reproduces a training point
exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from latentlab.closed_form.kernels import center_test_kernel
from latentlab.closed_form.mds import ClassicalMDS, classical_mds
from latentlab.inference.programs import program

__all__ = ["geodesic_mds", "isomap_transform", "geodesic_kernel_rows"]


@program(static_argnames=("n_components", "solver", "block_size", "max_blocks", "max_products"))
def geodesic_mds(
    D,
    key=None,
    *,
    n_components: int,
    solver: str = "dense",
    block_size: int = 0,
    max_blocks: int = 0,
    max_products: int = 0,
    tol=0.0,
) -> ClassicalMDS:
    """:func:`~latentlab.closed_form.mds.classical_mds` of the geodesic distances D
    (n, n) themselves: squaring them inside the program fuses it into the kernel
    ``-D**2 / 2`` and its column means (one pass over D, no host copy of ``D**2``)."""
    return classical_mds(
        D * D,
        key,
        n_components=n_components,
        solver=solver,
        block_size=block_size,
        max_blocks=max_blocks,
        max_products=max_products,
        tol=tol,
    )


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
