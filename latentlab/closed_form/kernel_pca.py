"""Kernel PCA (Schölkopf, Smola & Müller 1998) as pure jit-compiled functions.

PCA in the feature space of a kernel: eigendecompose the doubly centred Gram matrix
``K~ = H K H``.  A training point's k-th coordinate is ``sqrt(lambda_k) v_k``; a new
point's is ``k~(x)^T v_k / sqrt(lambda_k)`` with its kernel vector centred against the
training data (:func:`~latentlab.closed_form.kernels.center_test_kernel`).  The
pre-image map is kernel ridge regression from coordinates back to X (Bakır, Weston &
Schölkopf 2004), as in scikit-learn.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from latentlab.closed_form._linalg import eigh_descending, flip_signs_by_largest, solve_psd
from latentlab.closed_form.eigensolvers import partial_eigh
from latentlab.closed_form.kernels import (
    KernelParams,
    center_kernel,
    center_test_kernel,
    kernel_matrix,
)
from latentlab.closed_form.pca import randomized_range_finder
from latentlab.inference.programs import program

__all__ = [
    "KernelPCAFit",
    "kernel_eigh",
    "centred_kernel",
    "fit_kernel_pca",
    "kernel_pca_transform",
    "fit_preimage",
    "preimage",
]

EIGEN_SOLVERS = ("dense", "lanczos", "randomized")


class KernelPCAFit(NamedTuple):
    eigenvalues: jax.Array  # (k,) of the centred Gram matrix, decreasing
    eigenvectors: jax.Array  # (n, k) unit columns, largest-magnitude entry positive
    column_means: jax.Array  # (n,) of the uncentred training Gram matrix
    grand_mean: jax.Array  # ()
    rank_tolerance: jax.Array  # () eigenvalues at or below this are numerically zero
    converged: jax.Array  # () bool; False only when "lanczos" missed its tolerance


class CenteredKernel(NamedTuple):
    """``H K H`` (H the centring matrix) as an operator, without forming it."""

    K: jax.Array  # (n, n) uncentred Gram matrix
    column_means: jax.Array  # (n,)
    grand_mean: jax.Array  # ()

    @property
    def shape(self):
        return self.K.shape

    @property
    def dtype(self):
        return self.K.dtype

    def matmat(self, M):
        sums = jnp.sum(M, axis=0)
        return (
            self.K @ M
            - (self.column_means @ M)[None, :]
            - self.column_means[:, None] * sums
            + self.grand_mean * sums
        )


def centred_kernel(K, solver: str):
    """``(H K H, column_means, grand_mean)`` of a Gram matrix K for :func:`kernel_eigh`
    with ``solver``: for ``"lanczos"`` a :class:`CenteredKernel` that applies it
    implicitly, else the dense centred matrix."""
    if solver != "lanczos":
        return center_kernel(K)
    # H K H M = K M - 1 (k^T M) - k (1^T M) + g 1 (1^T M): forming (and symmetrising)
    # H K H costs two more passes over the n^2 entries, measured at ~40 ms of a
    # ~150 ms kernel PCA fit for n = 3000
    column_means = jnp.mean(K, axis=0)
    grand_mean = jnp.mean(column_means)
    return CenteredKernel(K, column_means, grand_mean), column_means, grand_mean


def kernel_eigh(
    Kc,
    key,
    n_components: int | None,
    solver: str,
    n_oversamples: int,
    n_iter: int,
    block_size: int = 0,
    max_blocks: int = 0,
    max_products: int = 0,
    tol=0.0,
):
    """Eigenpairs of a symmetric matrix, largest first, unit eigenvectors as columns
    (largest-magnitude entry positive), and whether they are converged.  ``Kc`` is an
    array or, for ``"lanczos"``, also a :class:`CenteredKernel`.

    ``"dense"`` and ``"lanczos"`` are the shared
    :func:`~latentlab.closed_form.eigensolvers.partial_eigh`: ``"dense"`` returns all n
    pairs (``n_components`` is ignored, so one compiled program serves every
    ``n_components``); ``"lanczos"`` the top ``n_components`` by block Lanczos
    (``block_size``, ``max_blocks``, ``max_products``, residual ``tol``; not converged
    means the caller should fall back to ``"dense"``).  ``"randomized"``: the top
    ``n_components`` by the HMT range finder on Kc and the Rayleigh-Ritz step
    ``eigh(Q^T Kc Q)`` (Halko, Martinsson & Tropp 2011, Alg. 5.3).
    """
    n = Kc.shape[0]
    if solver in ("dense", "lanczos"):
        eig = partial_eigh(
            Kc,
            key,
            n_components=n if solver == "dense" else n_components,
            which="top",
            solver=solver,
            block_size=block_size,
            max_blocks=max_blocks,
            max_products=max_products,
            tol=tol,
        )
        return eig.eigenvalues, eig.eigenvectors, eig.converged
    size = min(n_components + n_oversamples, n)
    Q = randomized_range_finder(
        lambda M: Kc @ M, lambda M: Kc @ M, key, n, n, size, n_iter, Kc.dtype
    )
    eigenvalues, S = eigh_descending(Q.T @ Kc @ Q)
    eigenvalues, V = eigenvalues[:n_components], (Q @ S)[:, :n_components]
    return eigenvalues, flip_signs_by_largest(V, axis=0)[0], jnp.asarray(True)


@program(
    static_argnames=(
        "kernel",
        "degree",
        "n_components",
        "solver",
        "n_oversamples",
        "n_iter",
        "block_size",
        "max_blocks",
        "max_products",
    )
)
def fit_kernel_pca(
    X,
    params: KernelParams,
    key,
    *,
    kernel,
    degree: int = 3,
    n_components: int | None = None,
    solver: str = "dense",
    n_oversamples: int = 10,
    n_iter: int = 4,
    block_size: int = 0,
    max_blocks: int = 0,
    max_products: int = 0,
    tol=0.0,
) -> KernelPCAFit:
    """Eigendecomposition of the doubly centred Gram matrix of X (all pairs for
    ``solver="dense"``, the top ``n_components`` for ``"lanczos"`` and ``"randomized"``;
    see :func:`kernel_eigh`)."""
    K = kernel_matrix(kernel, X, X, params, degree)
    Kc, column_means, grand_mean = centred_kernel(K, solver)
    eigenvalues, V, converged = kernel_eigh(
        Kc,
        key,
        n_components,
        solver,
        n_oversamples,
        n_iter,
        block_size,
        max_blocks,
        max_products,
        tol,
    )
    n = X.shape[0]
    # numpy.linalg.matrix_rank's default, sigma_max * max(shape) * eps, with sigma_max
    # at least the *uncentred* kernel's largest entry: centring cancels entries of that
    # size, and what it leaves below this is round-off (a kernel of values ~3000 with
    # differences ~1e-8 left an "eigenvalue" 8e-13 that is exactly ~1e-30).
    top = jnp.maximum(jnp.max(jnp.abs(eigenvalues)), jnp.max(jnp.abs(K)))
    tolerance = top * n * jnp.finfo(Kc.dtype).eps
    return KernelPCAFit(eigenvalues, V, column_means, grand_mean, tolerance, converged)


@program(static_argnames=("kernel", "degree"))
def kernel_pca_transform(
    X_new, X_fit, params, eigenvalues, eigenvectors, column_means, grand_mean, *, kernel, degree=3
):
    """Coordinates of new points: centred test kernel times ``v_k / sqrt(lambda_k)``.

    A component kept with eigenvalue 0 (no variance) projects every point to 0.
    """
    K_new = center_test_kernel(
        kernel_matrix(kernel, X_new, X_fit, params, degree), column_means, grand_mean
    )
    positive = eigenvalues > 0
    scale = jnp.where(positive, 1.0 / jnp.sqrt(jnp.where(positive, eigenvalues, 1.0)), 0.0)
    return K_new @ (eigenvectors * scale)


@program(static_argnames=("kernel", "degree"))
def fit_preimage(Z_fit, X_fit, params, alpha, *, kernel, degree=3):
    """Dual coefficients of the kernel ridge map ``z -> x``: ``(k(Z, Z) + alpha I)^{-1} X``."""
    K = kernel_matrix(kernel, Z_fit, Z_fit, params, degree)
    K = 0.5 * (K + K.T) + alpha * jnp.eye(K.shape[0], dtype=K.dtype)
    return solve_psd(K, X_fit)


@program(static_argnames=("kernel", "degree"))
def preimage(Z, Z_fit, dual_coef, params, *, kernel, degree=3):
    """Approximate pre-images of coordinates Z: ``k(Z, Z_fit) @ dual_coef``."""
    return kernel_matrix(kernel, Z, Z_fit, params, degree) @ dual_coef
