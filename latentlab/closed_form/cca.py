"""Canonical correlation analysis (Hotelling 1936), linear and kernel, in closed form.

Regularized CCA maximises ``u^T C_xy v / sqrt(u^T (C_xx + r_x I) u  v^T (C_yy + r_y I) v)``.
Whitening each view, ``a = (C_xx + r_x I)^{1/2} u``, turns it into the SVD of
``M = (C_xx + r_x I)^{-1/2} C_xy (C_yy + r_y I)^{-1/2}``: the singular values are the
(regularized) canonical correlations and the weights are ``u = (C_xx + r_x I)^{-1/2} a``.
``r = 0`` is classical CCA; ``r -> inf`` turns the weights into the singular vectors of
``C_xy`` (maximum covariance, PLS-SVD).

Kernel CCA is the same problem on kernel PCA coordinates of each view (the "modular"
construction): with ``K~ = V diag(lambda) V^T`` the feature covariance is diagonal, so
the whitening is too, and the weights come back as dual coefficients on the centred
training kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from latentlab.closed_form._linalg import eigh_unordered, flip_signs_by_largest
from latentlab.closed_form.kernels import (
    KernelParams,
    center_kernel,
    center_test_kernel,
    kernel_matrix,
)
from latentlab.closed_form.whitening import inverse_sqrt_psd
from latentlab.inference.programs import program

__all__ = [
    "CCAFit",
    "KernelCCAFit",
    "fit_cca",
    "fit_kernel_cca",
    "cca_transform",
    "kernel_cca_transform",
    "score_correlations",
]


class CCAFit(NamedTuple):
    x_mean: jax.Array  # (p,)
    x_scale: jax.Array  # (p,) column standard deviations (ones when not scaling)
    y_mean: jax.Array  # (q,)
    y_scale: jax.Array  # (q,)
    x_weights: jax.Array  # (p, k) on the centred, scaled X
    y_weights: jax.Array  # (q, k)
    x_loadings: jax.Array  # (p, k) regression of X on its canonical scores
    y_loadings: jax.Array  # (q, k)
    singular_values: jax.Array  # (k,) regularized canonical correlations
    correlations: jax.Array  # (k,) correlations of the training scores
    x_eigenvalues: jax.Array  # (p,) of the unregularized C_xx (singularity checks)
    y_eigenvalues: jax.Array  # (q,)


class KernelCCAFit(NamedTuple):
    x_dual_coef: jax.Array  # (n, k): x scores = centred K_x(new, train) @ x_dual_coef
    y_dual_coef: jax.Array  # (n, k)
    x_column_means: jax.Array  # (n,) training Gram statistics for centring test kernels
    x_grand_mean: jax.Array
    y_column_means: jax.Array
    y_grand_mean: jax.Array
    singular_values: jax.Array  # (k,) regularized canonical correlations
    correlations: jax.Array  # (k,) correlations of the training scores


def _standardise(X, scale: bool):
    mean = jnp.mean(X, axis=0)
    Xc = X - mean
    std = jnp.sqrt(jnp.sum(Xc * Xc, axis=0) / (X.shape[0] - 1))
    std = jnp.where(std > 0, std, 1.0) if scale else jnp.ones_like(std)
    return Xc / std, mean, std


def _orient(x_weights, y_weights):
    """Sign convention: the largest-magnitude x weight of each pair is positive."""
    x_weights, signs = flip_signs_by_largest(x_weights, axis=0)
    return x_weights, y_weights * signs


def score_correlations(T, U):
    """Pearson correlation of matching columns of two score matrices."""
    T = T - jnp.mean(T, axis=0)
    U = U - jnp.mean(U, axis=0)
    denominator = jnp.sqrt(jnp.sum(T * T, axis=0) * jnp.sum(U * U, axis=0))
    return jnp.sum(T * U, axis=0) / jnp.where(denominator > 0, denominator, 1.0)


def _safe_divide(a, b):
    return a / jnp.where(b > 0, b, 1.0)


@program(static_argnames=("scale",))
def fit_cca(X, Y, reg_x=0.0, reg_y=0.0, *, scale: bool = True) -> CCAFit:
    """Regularized linear CCA of views X (n, p) and Y (n, q), ddof=1 covariances.

    Returns all ``min(p, q)`` pairs, strongest first; keep the leading ones.  Everything
    after the joint covariance is computed from it (d x d work, no further pass over
    the rows): score variances ``w^T C w``, score correlations, and loadings
    ``C_xx w / (w^T C_xx w)`` (the regression of each variable on each score).
    """
    n, p = X.shape
    k = min(p, Y.shape[1])
    Z, mean, std = _standardise(jnp.concatenate([X, Y], axis=1), scale)
    C = Z.T @ Z / (n - 1)
    Cxx, Cyy, Cxy = C[:p, :p], C[p:, p:], C[:p, p:]
    Wx, x_eigenvalues = inverse_sqrt_psd(Cxx, reg_x)
    Wy, y_eigenvalues = inverse_sqrt_psd(Cyy, reg_y)
    A, s, Bt = jnp.linalg.svd(Wx @ Cxy @ Wy, full_matrices=False)
    x_weights, y_weights = _orient(Wx @ A[:, :k], Wy @ Bt[:k].T)
    Cxx_w, Cyy_w = Cxx @ x_weights, Cyy @ y_weights
    x_variance = jnp.sum(x_weights * Cxx_w, axis=0)
    y_variance = jnp.sum(y_weights * Cyy_w, axis=0)
    covariance = jnp.sum(x_weights * (Cxy @ y_weights), axis=0)
    return CCAFit(
        x_mean=mean[:p],
        x_scale=std[:p],
        y_mean=mean[p:],
        y_scale=std[p:],
        x_weights=x_weights,
        y_weights=y_weights,
        x_loadings=_safe_divide(Cxx_w, x_variance),
        y_loadings=_safe_divide(Cyy_w, y_variance),
        singular_values=s[:k],
        correlations=_safe_divide(covariance, jnp.sqrt(x_variance * y_variance)),
        x_eigenvalues=x_eigenvalues,
        y_eigenvalues=y_eigenvalues,
    )


def _kernel_coordinates(K, reg, n):
    """Eigenpairs of a centred Gram matrix and the diagonal whitening of its features."""
    Kc, column_means, grand_mean = center_kernel(K)
    eigenvalues, V = eigh_unordered(Kc)
    eigenvalues = jnp.maximum(eigenvalues, 0.0)
    tolerance = jnp.max(eigenvalues) * n * jnp.finfo(K.dtype).eps
    kept = eigenvalues > tolerance
    root = jnp.sqrt(jnp.where(kept, eigenvalues, 1.0))
    # Features Phi = V diag(sqrt(lambda)); Phi^T Phi / (n - 1) = diag(lambda / (n - 1)).
    features = jnp.where(kept, root, 0.0)
    whitening = 1.0 / jnp.sqrt(jnp.where(kept, eigenvalues, 0.0) / (n - 1) + reg)
    # Dual map from a centred kernel row to whitened features: V diag(1 / sqrt(lambda)).
    to_features = V * jnp.where(kept, 1.0 / root, 0.0)
    return V, features, whitening, to_features, column_means, grand_mean


@program(static_argnames=("x_kernel", "y_kernel", "x_degree", "y_degree"))
def fit_kernel_cca(
    X,
    Y,
    x_params: KernelParams,
    y_params: KernelParams,
    reg_x,
    reg_y,
    *,
    x_kernel,
    y_kernel,
    x_degree: int = 3,
    y_degree: int = 3,
) -> KernelCCAFit:
    """Regularized kernel CCA (Bach & Jordan 2002; Hardoon, Szedmak & Shawe-Taylor 2004).

    Needs ``reg > 0``: without it any Gram matrix of full rank gives correlation 1.
    Returns all n pairs, strongest first; keep the leading ones.
    """
    n = X.shape[0]
    Vx, fx, wx, to_fx, x_cm, x_gm = _kernel_coordinates(
        kernel_matrix(x_kernel, X, X, x_params, x_degree), reg_x, n
    )
    Vy, fy, wy, to_fy, y_cm, y_gm = _kernel_coordinates(
        kernel_matrix(y_kernel, Y, Y, y_params, y_degree), reg_y, n
    )
    # C_xy in feature coordinates, whitened on both sides.
    G = Vx.T @ Vy
    M = (wx * fx)[:, None] * G * (fy * wy)[None, :] / (n - 1)
    A, s, Bt = jnp.linalg.svd(M, full_matrices=False)
    # Training scores are Vx a and Vy b (orthonormal V, centred): their correlations
    # follow from a, b and G without forming the n x n score matrices.
    a, b = (fx * wx)[:, None] * A, (fy * wy)[:, None] * Bt.T
    correlations = jnp.sum(a * (G @ b), axis=0) / jnp.sqrt(
        jnp.maximum(jnp.sum(a * a, axis=0) * jnp.sum(b * b, axis=0), jnp.finfo(G.dtype).tiny)
    )
    x_dual, y_dual = _orient(to_fx @ (wx[:, None] * A), to_fy @ (wy[:, None] * Bt.T))
    return KernelCCAFit(
        x_dual_coef=x_dual,
        y_dual_coef=y_dual,
        x_column_means=x_cm,
        x_grand_mean=x_gm,
        y_column_means=y_cm,
        y_grand_mean=y_gm,
        singular_values=s,
        correlations=correlations,
    )


@program
def cca_transform(Xc, scale, weights):
    """Canonical scores of one view already centred at its training mean:
    ``(Xc / scale) @ weights``.  (Centring is left to the caller, so that it can be
    done in float64 before data far from the origin are cast to float32.)"""
    return (Xc / scale) @ weights


@program(static_argnames=("kernel", "degree"))
def kernel_cca_transform(
    X_new, X_fit, params, dual_coef, column_means, grand_mean, *, kernel, degree=3
):
    """Kernel canonical scores of one view: centred ``k(X_new, X_fit) @ dual_coef``."""
    K_new = kernel_matrix(kernel, X_new, X_fit, params, degree)
    return center_test_kernel(K_new, column_means, grand_mean) @ dual_coef
