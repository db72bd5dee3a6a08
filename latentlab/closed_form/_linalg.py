"""Small dense linear-algebra building blocks shared by the closed-form methods.

They use ``jax.lax.linalg`` directly: ``jnp.linalg.eigh`` sorts eigenpairs with a
variadic sort that roughly triples XLA compile time on CPU, and ``jnp.linalg.solve``
pivots; both matter when every new data shape means a new compile.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["eigh_unordered", "eigh_descending", "solve_psd", "flip_signs_by_largest"]


def eigh_unordered(A):
    """Eigenvalues and eigenvectors of a symmetric matrix in no particular order
    (enough for matrix functions such as ``A^{-1/2}``)."""
    V, w = jax.lax.linalg.eigh(0.5 * (A + A.T), sort_eigenvalues=False)
    return w, V


def eigh_descending(A):
    """Eigenvalues (decreasing) and unit eigenvectors (columns) of a symmetric matrix."""
    w, V = eigh_unordered(A)
    order = jnp.argsort(-w)
    return w[order], V[:, order]


def solve_psd(A, B):
    """``A^{-1} B`` for symmetric positive definite A, by Cholesky."""
    L = jax.lax.linalg.cholesky(A)
    Z = jax.lax.linalg.triangular_solve(L, B, left_side=True, lower=True)
    return jax.lax.linalg.triangular_solve(L, Z, left_side=True, lower=True, transpose_a=True)


def flip_signs_by_largest(V, axis: int):
    """Flip each column (``axis=0``) or row (``axis=1``) of V so that its
    largest-magnitude entry is positive: a deterministic sign for eigen/singular vectors.

    Returns the flipped V and the signs applied.
    """
    index = jnp.argmax(jnp.abs(V), axis=axis)
    if axis == 0:
        signs = jnp.sign(V[index, jnp.arange(V.shape[1])])
    else:
        signs = jnp.sign(V[jnp.arange(V.shape[0]), index])
    signs = jnp.where(signs == 0, 1.0, signs).astype(V.dtype)
    return (V * signs[None, :] if axis == 0 else V * signs[:, None]), signs
