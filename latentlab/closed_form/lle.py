"""Locally linear embedding (Roweis & Saul 2000) as pure jit-compiled functions.

1. Reconstruction weights: for each point x with neighbours ``x_j`` (j in N(x)),
   minimise ``|x - sum_j w_j x_j|^2`` subject to ``sum_j w_j = 1``: with the local Gram
   matrix ``G = C C^T`` (C the rows ``x_j - x``) the solution is ``w = G^{-1} 1``,
   normalised to sum to 1.  G is singular whenever there are more neighbours than
   dimensions, so ``reg * trace(G)`` is added to its diagonal (``reg`` when the trace
   is 0), as in Roweis & Saul's note and scikit-learn.
2. Embedding: the bottom eigenvectors of ``M = (I - W)^T (I - W)``, skipping the
   constant vector (eigenvalue 0 since every row of W sums to 1).  M is assembled
   from the n k^2 weight products, never by an n x n x n product.
3. New points: their weights on their training neighbours, applied to those
   neighbours' coordinates.

M has ``O(n k^2)`` non-zeros: :func:`fit_lle_sparse` keeps it sparse on the host and
finds the bottom eigenvectors by sparse LU and ARPACK
(:func:`~latentlab.closed_form.eigensolvers.sparse_partial_eigh`); :func:`fit_lle`
forms the dense n x n matrix on the device (exact dense eigh, or shift-invert Lanczos).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.closed_form._linalg import solve_psd
from latentlab.closed_form.eigensolvers import partial_eigh, sparse_partial_eigh
from latentlab.inference.programs import program

__all__ = [
    "LLEFit",
    "barycenter_weights",
    "lle_matrix",
    "fit_lle",
    "lle_transform",
    "reconstruction_weights",
    "sparse_lle_matrix",
    "fit_lle_sparse",
]


class LLEFit(NamedTuple):
    embedding: jax.Array  # (n, k) unit columns (bottom eigenvectors 2..k+1 of M)
    eigenvalues: jax.Array  # (k,) increasing
    weights: jax.Array  # (n, n_neighbors) reconstruction weights, rows sum to 1
    converged: jax.Array  # ()


def barycenter_weights(Q, R, indices, reg):
    """Regularised reconstruction weights (m, k) of the rows of Q from their
    neighbours ``R[indices]`` (m, k)."""
    C = R[indices] - Q[:, None, :]  # (m, k, d)
    G = C @ jnp.swapaxes(C, 1, 2)  # (m, k, k)
    trace = jnp.trace(G, axis1=1, axis2=2)
    ridge = jnp.where(trace > 0, reg * trace, reg)
    k = indices.shape[1]
    G = G + ridge[:, None, None] * jnp.eye(k, dtype=G.dtype)
    w = solve_psd(G, jnp.ones((Q.shape[0], k, 1), G.dtype))[..., 0]
    return w / jnp.sum(w, axis=1, keepdims=True)


def lle_matrix(weights, indices):
    """``M = (I - W)^T (I - W) = I - W - W^T + W^T W`` for the sparse W given by rows
    ``weights`` at columns ``indices``; ``W^T W`` is the sum over rows i of the outer
    products of row i's weights, scattered to (idx_i, idx_i)."""
    n, k = weights.shape
    rows = jnp.repeat(jnp.arange(n), k)
    W = jnp.zeros((n, n), weights.dtype).at[rows, indices.ravel()].add(weights.ravel())
    outer = weights[:, :, None] * weights[:, None, :]  # (n, k, k)
    a = jnp.broadcast_to(indices[:, :, None], outer.shape).ravel()
    b = jnp.broadcast_to(indices[:, None, :], outer.shape).ravel()
    M = -W - W.T
    M = M.at[a, b].add(outer.ravel())
    return M + jnp.eye(n, dtype=M.dtype)


@program(static_argnames=("n_components", "solver", "block_size", "max_blocks", "max_products"))
def fit_lle(
    X,
    indices,
    reg,
    key,
    *,
    n_components: int,
    solver: str = "dense",
    **settings,
) -> LLEFit:
    """Standard LLE of X (n, d) with neighbour indices (n, n_neighbors) (self excluded).

    ``settings``: the Lanczos settings of :func:`~latentlab.closed_form.eigensolvers.partial_eigh`
    (``block_size``, ``max_blocks``, ``max_products``, ``tol``)."""
    weights = barycenter_weights(X, X, indices, reg)
    M = lle_matrix(weights, indices)
    n = X.shape[0]
    if solver == "shift_invert":
        # The constant vector is an exact null vector (rows of W sum to 1): deflate it
        # rather than find it.  The shift only has to keep M - shift I positive
        # definite; Cholesky resolves M to ~eps ||M|| whatever its size, so a tiny one
        # leaves the wanted eigenvalues (~1e-8 .. 1e-5 of trace(M) / n) far apart.
        shift = -1e-9 * jnp.trace(M) / n
        constant = jnp.full((n, 1), 1.0 / jnp.sqrt(n), M.dtype)
        eig = partial_eigh(
            M,
            key,
            n_components=n_components,
            which="bottom",
            solver=solver,
            shift=shift,
            deflate=constant,
            **settings,
        )
        return LLEFit(eig.eigenvectors, eig.eigenvalues, weights, eig.converged)
    eig = partial_eigh(
        M, key, n_components=n_components + 1, which="bottom", solver=solver, **settings
    )
    return LLEFit(eig.eigenvectors[:, 1:], eig.eigenvalues[1:], weights, eig.converged)


@program
def lle_transform(Q, R, indices, reg, embedding):
    """Coordinates of new points Q: their weights on their neighbours ``R[indices]``
    times those neighbours' coordinates."""
    weights = barycenter_weights(Q, R, indices, reg)
    return jnp.einsum("mk,mkc->mc", weights, embedding[indices])


@program
def reconstruction_weights(X, indices, reg):
    """The training points' reconstruction weights (n, n_neighbors) on their
    neighbours (:func:`barycenter_weights` of X on itself)."""
    return barycenter_weights(X, X, indices, reg)


# -- host side: the sparse eigenproblem -------------------------------------------------


def sparse_lle_matrix(weights, indices):
    """``M = (I - W)^T (I - W)`` as a ``scipy.sparse`` CSC matrix, W the sparse matrix
    with rows ``weights`` at columns ``indices``."""
    from scipy import sparse

    weights, indices = np.asarray(weights, np.float64), np.asarray(indices)
    n, k = weights.shape
    W = sparse.csr_matrix((weights.ravel(), indices.ravel(), np.arange(0, n * k + 1, k)), (n, n))
    residual = sparse.identity(n, format="csr") - W
    return (residual.T @ residual).tocsc()


def fit_lle_sparse(weights, indices, *, n_components: int, seed: int = 0) -> LLEFit:
    """The embedding of :func:`fit_lle` from the reconstruction weights, by sparse LU and
    ARPACK on the host (NumPy results).  As in ``fit_lle``'s shift-invert route, the
    constant null vector is deflated rather than found, and the shift only has to keep
    ``M - shift I`` positive definite: a tiny one (``-1e-9 trace(M) / n``) leaves the
    wanted eigenvalues (~1e-8 .. 1e-5 of ``trace(M) / n``) far apart."""
    M = sparse_lle_matrix(weights, indices)
    n = M.shape[0]
    constant = np.full((n, 1), 1.0 / np.sqrt(n))
    eig = sparse_partial_eigh(M, n_components, which="bottom", deflate=constant, seed=seed)
    return LLEFit(eig.eigenvectors, eig.eigenvalues, np.asarray(weights), eig.converged)
