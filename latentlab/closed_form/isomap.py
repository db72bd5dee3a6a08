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
from latentlab.inference.programs import program

__all__ = ["isomap_transform", "geodesic_kernel_rows"]


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
