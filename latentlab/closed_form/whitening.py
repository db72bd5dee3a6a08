"""Whitening: linear maps W with ``cov((X - mean) W) = I`` (Kessy, Lewin & Strimmer 2018).

``"pca"``  W = V Λ^{-1/2}: rotate onto the principal axes, then rescale.
``"zca"``  W = Σ^{-1/2} (symmetric): the whitened data stay as close as possible to X.
``"cholesky"``  W = L^{-T} with Σ = L L^T: lower-triangular structure, no eigensolver.

:func:`principal_whitening` is ``"pca"`` from the data, keeping only the leading
principal axes (W is d x k): ICA's pre-processing, by eigh of the scatter or by the SVD
of the centred data.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from latentlab.closed_form._linalg import eigh_descending, eigh_unordered, flip_signs_by_largest
from latentlab.closed_form.pca import scatter_about_mean
from latentlab.inference.programs import program

__all__ = [
    "WHITENING_METHODS",
    "WHITENING_SOLVERS",
    "Whitened",
    "inverse_sqrt_psd",
    "principal_whitening",
    "sample_covariance",
    "whitening_matrix",
    "whiten",
]

WHITENING_METHODS = ("pca", "zca", "cholesky")
WHITENING_SOLVERS = ("eigh", "svd")


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


def _scaled_principal_axes(eigenvalues, V):
    """Signed axes (largest-magnitude entry positive) and ``V Λ^{-1/2}``."""
    V = flip_signs_by_largest(V, axis=0)[0]
    return V, V / jnp.sqrt(eigenvalues)


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
    V, W = _scaled_principal_axes(eigenvalues, V)
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


def principal_whitening(X, n_components: int, *, solver: str = "eigh", ddof: int = 1) -> Whitened:
    """PCA whitening of the rows of X (n, d) onto its ``n_components`` leading principal
    axes: ``W = V_k Λ_k^{-1/2}`` (d, k), Λ the eigenvalues of the covariance with
    ``ddof``, so the whitened data have identity covariance (with that ``ddof``).

    ``solver="eigh"`` decomposes the d x d scatter (O(n d^2), cheap for n >> d);
    ``"svd"`` takes the thin SVD of the centred data (through its QR factor when
    n > d), which does not square the condition number.  Eigenvalues are floored at
    ``eps^2`` times the largest (the round-off level of squared singular values), so
    rank-deficient data give large but finite whitened coordinates instead of inf.
    Traceable: call it inside a jit-compiled program (``n_components``, ``solver`` and
    ``ddof`` static).
    """
    if solver not in WHITENING_SOLVERS:
        raise ValueError(
            f"Unknown whitening solver={solver!r}; expected one of {WHITENING_SOLVERS}"
        )
    n = X.shape[0]
    if solver == "svd":
        mean = jnp.mean(X, axis=0)
        Xc = X - mean
        # tall X: the SVD of R from Xc = QR (Chan 1982) is Xc's, with Xc's stability,
        # and on CPU several times faster than XLA's SVD of the tall matrix itself
        R = jnp.linalg.qr(Xc, mode="r") if n > X.shape[1] else Xc
        _, s, Vt = jnp.linalg.svd(R, full_matrices=False)
        eigenvalues, V = s * s, Vt.T
    else:
        mean, scatter = scatter_about_mean(X)  # without a centred copy where accurate
        eigenvalues, V = eigh_descending(scatter)
    eigenvalues = eigenvalues[:n_components] / (n - ddof)
    eps = jnp.finfo(X.dtype).eps
    floor = jnp.maximum(eps * eps * eigenvalues[0], jnp.finfo(X.dtype).tiny)
    _, W = _scaled_principal_axes(jnp.maximum(eigenvalues, floor), V[:, :n_components])
    return Whitened(X=X @ W - mean @ W, mean=mean, matrix=W)
