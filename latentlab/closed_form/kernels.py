"""Kernel functions k(A, B) -> Gram matrix, and the centring that kernel methods need.

Every kernel maps arrays of shape (n, d) and (m, d) to an (n, m) matrix.  User
kernels follow the same convention; they must be traceable by ``jax.jit``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "KERNELS",
    "KernelParams",
    "linear_kernel",
    "rbf_kernel",
    "polynomial_kernel",
    "sigmoid_kernel",
    "cosine_kernel",
    "kernel_matrix",
    "center_kernel",
    "center_test_kernel",
]


class KernelParams(NamedTuple):
    """Hyper-parameters shared by the built-in kernels (unused ones are ignored)."""

    gamma: jax.Array | float = 1.0
    coef0: jax.Array | float = 1.0


DEFAULT_PARAMS = KernelParams()


def _squared_distances(A, B):
    # ||a||^2 + ||b||^2 - 2 a.b, clipped: round-off can make it slightly negative.
    sq = jnp.sum(A * A, axis=1)[:, None] + jnp.sum(B * B, axis=1)[None, :] - 2.0 * A @ B.T
    return jnp.maximum(sq, 0.0)


def linear_kernel(A, B, params: KernelParams = DEFAULT_PARAMS, degree: int = 3):
    """``a . b``."""
    return A @ B.T


def rbf_kernel(A, B, params: KernelParams = DEFAULT_PARAMS, degree: int = 3):
    """``exp(-gamma ||a - b||^2)``."""
    return jnp.exp(-params.gamma * _squared_distances(A, B))


def polynomial_kernel(A, B, params: KernelParams = DEFAULT_PARAMS, degree: int = 3):
    """``(gamma a . b + coef0) ** degree`` (integer degree, so negative bases are fine)."""
    return jax.lax.integer_pow(params.gamma * (A @ B.T) + params.coef0, degree)


def sigmoid_kernel(A, B, params: KernelParams = DEFAULT_PARAMS, degree: int = 3):
    """``tanh(gamma a . b + coef0)``."""
    return jnp.tanh(params.gamma * (A @ B.T) + params.coef0)


def cosine_kernel(A, B, params: KernelParams = DEFAULT_PARAMS, degree: int = 3):
    """``a . b / (||a|| ||b||)``; zero rows are left at zero (as scikit-learn does)."""

    def unit_rows(M):
        norm = jnp.linalg.norm(M, axis=1, keepdims=True)
        return M / jnp.where(norm > 0, norm, 1.0)

    return unit_rows(A) @ unit_rows(B).T


KERNELS: dict[str, Callable] = {
    "linear": linear_kernel,
    "rbf": rbf_kernel,
    "poly": polynomial_kernel,
    "sigmoid": sigmoid_kernel,
    "cosine": cosine_kernel,
}


def kernel_matrix(kernel, A, B, params: KernelParams, degree: int = 3):
    """Gram matrix ``k(A, B)`` for a built-in kernel name or a user callable ``k(A, B)``."""
    if callable(kernel):
        return kernel(A, B)
    return KERNELS[kernel](A, B, params, degree)


def center_kernel(K):
    """Double centring ``H K H`` with ``H = I - 11^T/n``; also returns the statistics
    that :func:`center_test_kernel` needs (column means and grand mean of K)."""
    column_means = jnp.mean(K, axis=0)
    grand_mean = jnp.mean(column_means)
    Kc = K - column_means[None, :] - column_means[:, None] + grand_mean
    return 0.5 * (Kc + Kc.T), column_means, grand_mean


def center_test_kernel(K_new, column_means, grand_mean):
    """Centre ``k(X_new, X_train)`` consistently with the training kernel.

    Feature vectors are centred at the *training* mean in feature space, so the raw
    test kernel is not enough (Schölkopf, Smola & Müller 1998, eq. (B.2)):
    ``K~_new = K_new - 1_m k_bar^T - K_new 1_n 1_n^T / n + grand_mean``.
    """
    row_means = jnp.mean(K_new, axis=1, keepdims=True)
    return K_new - column_means[None, :] - row_means + grand_mean
