"""Whitening: linear maps W with ``cov((X - mean) W) = I`` (Kessy, Lewin & Strimmer 2018).

``"pca"``  W = V Λ^{-1/2}: rotate onto the principal axes, then rescale.
``"zca"``  W = Σ^{-1/2} (symmetric): the whitened data stay as close as possible to X.
``"cholesky"``  W = L^{-T} with Σ = L L^T: lower-triangular structure, no eigensolver.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from latentlab.closed_form._linalg import eigh_descending, eigh_unordered, flip_signs_by_largest
from latentlab.inference.programs import program

__all__ = [
    "WHITENING_METHODS",
    "Whitened",
    "inverse_sqrt_psd",
    "sample_covariance",
    "whitening_matrix",
    "whiten",
]

WHITENING_METHODS = ("pca", "zca", "cholesky")


class Whitened(NamedTuple):
    X: jax.Array  # (n, d) whitened data
    mean: jax.Array  # (d,)
    matrix: jax.Array  # (d, d) W with X_white = (X - mean) @ W


def sample_covariance(X):
    """Unbiased (ddof=1) covariance of the rows of X, computed from centred data."""
    Xc = X - jnp.mean(X, axis=0)
    return Xc.T @ Xc / (X.shape[0] - 1)


def inverse_sqrt_psd(C, eps=0.0):
    """``(C + eps I)^{-1/2}`` of a symmetric PSD matrix, and the eigenvalues of ``C``.

    Eigenvalues at or below zero (after ``eps``) give ``inf``; callers that may meet a
    singular matrix check the returned eigenvalues first.
    """
    eigenvalues, V = eigh_unordered(C)
    scale = 1.0 / jnp.sqrt(eigenvalues + eps)
    return (V * scale) @ V.T, eigenvalues


@program(static_argnames=("method",))
def whitening_matrix(cov, method: str = "zca", eps=0.0):
    """W with ``W^T (cov + eps I) W = I`` for ``method`` in ``WHITENING_METHODS``."""
    d = cov.shape[0]
    cov = 0.5 * (cov + cov.T) + eps * jnp.eye(d, dtype=cov.dtype)
    if method == "cholesky":
        L = jax.lax.linalg.cholesky(cov)
        identity = jnp.eye(d, dtype=cov.dtype)
        return jax.lax.linalg.triangular_solve(L, identity, left_side=True, lower=True).T
    eigenvalues, V = eigh_descending(cov)  # principal axes first
    V = flip_signs_by_largest(V, axis=0)[0]
    W = V / jnp.sqrt(eigenvalues)
    if method == "pca":
        return W
    if method == "zca":
        return W @ V.T
    raise ValueError(f"Unknown whitening method={method!r}; expected one of {WHITENING_METHODS}")


@program(static_argnames=("method",))
def whiten(X, method: str = "zca", eps=0.0) -> Whitened:
    """Whiten the rows of X (n, d) with the ddof=1 sample covariance plus ``eps I``."""
    mean = jnp.mean(X, axis=0)
    W = whitening_matrix(sample_covariance(X), method, eps)
    return Whitened(X=(X - mean) @ W, mean=mean, matrix=W)
