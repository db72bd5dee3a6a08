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


# -- host side: Hessian LLE, modified LLE and LTSA ----------------------------------------


def _local_bases(X, neighbourhoods):
    """Eigen-decompositions of the local Gram matrices of the centred neighbourhoods
    ``X[neighbourhoods] - mean`` (n, p, D): (eigenvalues (n, p) decreasing, their
    orthonormal eigenvectors (n, p, p) as columns).  The Gram (p x p) form gives a full
    basis of R^p even when D < p."""
    P = X[neighbourhoods]
    P = P - P.mean(axis=1, keepdims=True)
    G = P @ np.swapaxes(P, 1, 2)
    values, vectors = np.linalg.eigh(G)
    return values[:, ::-1], vectors[:, :, ::-1]


def _assemble(neighbourhoods, blocks, n):
    """``sum_i S_i B_i S_i^T`` as a CSR matrix: block i (p, p) added at the rows and
    columns ``neighbourhoods[i]`` (p,)."""
    from scipy import sparse

    p = neighbourhoods.shape[1]
    rows = np.broadcast_to(neighbourhoods[:, :, None], (len(neighbourhoods), p, p))
    cols = np.broadcast_to(neighbourhoods[:, None, :], (len(neighbourhoods), p, p))
    M = sparse.coo_matrix((blocks.ravel(), (rows.ravel(), cols.ravel())), shape=(n, n))
    return M.tocsr()  # duplicates summed


def ltsa_matrix(X, indices, n_components: int):
    """Local tangent space alignment (Zhang & Zha 2004): each neighbourhood (the point
    and its neighbours ``indices``, p = k + 1 points) contributes ``I - G_i G_i^T``,
    G_i the orthonormal columns ``[1 / sqrt(p), top n_components local principal
    directions]``: the embedding's neighbourhood coordinates must be an affine image of
    its local tangent coordinates."""
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    neighbourhoods = np.concatenate([np.arange(n)[:, None], np.asarray(indices)], axis=1)
    p = neighbourhoods.shape[1]
    _, vectors = _local_bases(X, neighbourhoods)
    G = np.concatenate([np.full((n, p, 1), 1.0 / np.sqrt(p)), vectors[:, :, :n_components]], 2)
    blocks = np.eye(p)[None] - G @ np.swapaxes(G, 1, 2)
    return _assemble(neighbourhoods, blocks, n)


def hessian_matrix(X, indices, n_components: int, tol: float):
    """Hessian eigenmaps (Donoho & Grimes 2003): the quadratic form ``sum_i ||H_i
    f(N_i)||^2`` of the local Hessian estimators.  In each neighbourhood (the point and
    its neighbours, p points) with local tangent coordinates U (its top
    ``n_components`` principal directions), the estimator's rows are an orthonormal
    basis of the part of the quadratic monomials ``U_a U_b`` (a <= b) orthogonal to the
    constant and to U, i.e. functionals that vanish on every affine function of the
    tangent coordinates.  ``tol``: directions of that part with singular values below
    ``tol`` times the largest are dropped (a degenerate neighbourhood)."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape[0], n_components
    neighbourhoods = np.concatenate([np.arange(n)[:, None], np.asarray(indices)], axis=1)
    p = neighbourhoods.shape[1]
    _, vectors = _local_bases(X, neighbourhoods)
    U = vectors[:, :, :d]  # (n, p, d)
    a, b = np.triu_indices(d)
    quadratic = U[:, :, a] * U[:, :, b]  # (n, p, d (d + 1) / 2)
    affine = np.concatenate([np.full((n, p, 1), 1.0 / np.sqrt(p)), U], axis=2)
    Q, _ = np.linalg.qr(affine)  # orthonormal basis of the affine functions
    residual = quadratic - Q @ (np.swapaxes(Q, 1, 2) @ quadratic)
    left, singular, _ = np.linalg.svd(residual, full_matrices=False)
    keep = singular > tol * np.maximum(singular[:, :1], np.finfo(np.float64).tiny)
    H = left * keep[:, None, :]  # (n, p, r): the dropped directions zeroed
    blocks = H @ np.swapaxes(H, 1, 2)
    return _assemble(neighbourhoods, blocks, n)


def modified_matrix(X, indices, n_components: int, reg: float, tol: float):
    """Modified LLE (Zhang & Wang 2007): several linearly independent weight vectors
    per point.  With the local Gram matrix of the differences to the neighbours (k of
    them) and its eigenvalues ``lambda_1 >= ... >= lambda_k`` (floored at ``tol``
    times the largest), point i uses the eigenvectors of its ``s_i`` smallest ones,
    ``s_i`` the largest ``s <= k - n_components`` whose tail ratio ``sum of the s
    smallest / sum of the others`` is at most eta, the median over the points of
    ``sum_{j > d} lambda_j / sum_{j <= d} lambda_j``.  Its weight vectors are the
    columns of ``W_i = (1 - alpha_i) w_i 1^T + V_i H_i`` (``w_i`` the regularised LLE
    weights, ``V_i`` those eigenvectors, ``H_i`` the Householder reflection taking
    ``V_i^T 1`` to ``alpha_i 1``, ``alpha_i = ||V_i^T 1|| / sqrt(s_i)``), each summing
    to one; the cost is ``sum_i sum_l ||y_i - sum_j (W_i)_{jl} y_{N_i(j)}||^2``."""
    X = np.asarray(X, dtype=np.float64)
    indices = np.asarray(indices)
    n, k = indices.shape
    d = n_components
    C = X[indices] - X[:, None, :]  # (n, k, D)
    G = C @ np.swapaxes(C, 1, 2)
    values, vectors = np.linalg.eigh(G)
    values, vectors = values[:, ::-1], vectors[:, :, ::-1]  # decreasing
    values = np.maximum(values, tol * np.maximum(values[:, :1], np.finfo(np.float64).tiny))
    # the regularised LLE weights (as in the standard method)
    trace = np.trace(G, axis1=1, axis2=2)
    ridge = np.where(trace > 0, reg * trace, reg)
    w = np.linalg.solve(G + ridge[:, None, None] * np.eye(k), np.ones((n, k, 1)))[..., 0]
    w = w / w.sum(axis=1, keepdims=True)
    eta = np.median(values[:, d:].sum(axis=1) / values[:, :d].sum(axis=1))
    # tail[i, s] = sum of the s smallest / sum of the others, s = 1 .. k - d
    suffix = np.cumsum(values[:, ::-1], axis=1)[:, : k - d]  # s smallest
    total = values.sum(axis=1, keepdims=True)
    tail = suffix / (total - suffix)
    s_all = np.maximum(1, np.sum(tail <= eta, axis=1))  # tail is increasing in s
    neighbourhoods = np.concatenate([np.arange(n)[:, None], indices], axis=1)
    blocks = np.zeros((n, k + 1, k + 1))
    for i in range(n):
        s = int(s_all[i])
        V = vectors[i, :, k - s :]  # (k, s): the s smallest
        v = V.sum(axis=0)  # V^T 1
        alpha = np.linalg.norm(v) / np.sqrt(s)
        h = alpha * np.ones(s) - v
        norm = h @ h
        H = np.eye(s) - 2.0 * np.outer(h, h) / norm if norm > 1e-14 * s else np.eye(s)
        W = (1.0 - alpha) * w[i][:, None] + V @ H  # (k, s), columns sum to 1
        A = np.concatenate([np.ones((1, s)), -W], axis=0)  # y_i - sum_j W_jl y_j
        blocks[i] = A @ A.T
    return _assemble(neighbourhoods, blocks, n)


def bottom_embedding(M, n_components: int, solver: str, seed: int = 0) -> LLEFit:
    """The bottom ``n_components`` eigenvectors of the alignment matrix M (sparse,
    n x n, positive semi-definite with the constant vector in its null space),
    skipping the constant: ``"arpack"`` by shift-invert ARPACK with the constant
    deflated (:func:`sparse_partial_eigh`), ``"dense"`` by eigh of the dense M with the
    constant direction lifted above the spectrum.  ``weights`` is empty."""
    n = M.shape[0]
    constant = np.full((n, 1), 1.0 / np.sqrt(n))
    if solver == "arpack":
        eig = sparse_partial_eigh(M, n_components, which="bottom", deflate=constant, seed=seed)
        return LLEFit(eig.eigenvectors, eig.eigenvalues, np.zeros((n, 0)), eig.converged)
    from latentlab.closed_form.eigensolvers import flip_column_signs

    dense = M.toarray()
    dense = 0.5 * (dense + dense.T)
    lift = max(np.trace(dense), 1.0)
    values, vectors = np.linalg.eigh(dense + lift * (constant @ constant.T))
    return LLEFit(
        flip_column_signs(vectors[:, :n_components]),
        values[:n_components],
        np.zeros((n, 0)),
        np.asarray(True),
    )
