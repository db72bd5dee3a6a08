"""Laplacian eigenmaps (Belkin & Niyogi 2003) and spectral clustering (Ng, Jordan &
Weiss 2002; Shi & Malik 2000) as pure jit-compiled functions.

With the affinity A (self-affinities ignored), degrees ``d = A 1`` and the normalized
Laplacian ``L = I - D^{-1/2} A D^{-1/2}``, the embedding is the bottom eigenvectors
``u`` of L divided by ``sqrt(d)`` (the generalized eigenvectors of ``L_rw``), as
scikit-learn's ``spectral_embedding``.  L's spectrum lies in [0, 2] and its bottom
eigenpairs are the *top* eigenpairs of ``S = D^{-1/2} A D^{-1/2}`` (eigenvalue
``1 - lambda``), so the shared eigensolver runs on S directly: no shift or fold, and
its residual tolerance is relative to S's largest eigenvalue, 1.  For sparse (k-NN)
affinities, whose bottom Laplacian eigenvalues crowd near 0, ``solver="shift_invert"``
runs Lanczos on ``(L + 1e-9 I)^{-1}`` instead.  An isolated node (degree 0) has L's
diagonal 0 (SciPy's convention), i.e. S's diagonal 1.

A k-NN affinity has O(n k) non-zeros: :func:`sparse_spectral_embedding` keeps it (and
L) sparse on the host and runs the same shift-invert by sparse LU and ARPACK
(:func:`~latentlab.closed_form.eigensolvers.sparse_partial_eigh`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.closed_form._linalg import flip_signs_by_largest
from latentlab.closed_form.eigensolvers import (
    PartialEigh,
    flip_column_signs,
    partial_eigh,
    sparse_partial_eigh,
)
from latentlab.closed_form.neighbors import _squared_distances
from latentlab.inference.programs import program

__all__ = [
    "SpectralFit",
    "rbf_affinity",
    "knn_affinity",
    "spectral_embedding",
    "fit_spectral_embedding",
    "fit_rbf_spectral_embedding",
    "fit_knn_spectral_embedding",
    "knn_affinity_program",
    "sparse_knn_affinity",
    "sparse_spectral_embedding",
    "rbf_affinity_program",
    "normalized_laplacian",
    "lobpcg_spectral_embedding",
    "discretize",
    "cluster_qr",
]


class SpectralFit(NamedTuple):
    embedding: jax.Array  # (n, k)
    eigenvalues: jax.Array  # (k,) of the normalized Laplacian, increasing
    converged: jax.Array  # ()


def rbf_affinity(X, gamma):
    """``exp(-gamma |x_i - x_j|^2)``, from data centred first (the expanded squared
    distance cancels less)."""
    Xc = X - jnp.mean(X, axis=0)
    return jnp.exp(-gamma * _squared_distances(Xc, Xc, jnp.sum(Xc * Xc, axis=1)))


def knn_affinity(indices):
    """The symmetrised connectivity ``(C + C^T) / 2`` of the graph in which row i links
    to ``indices[i]`` (scikit-learn's ``affinity="nearest_neighbors"``)."""
    n, k = indices.shape
    rows = jnp.repeat(jnp.arange(n), k)
    C = jnp.zeros((n, n), jnp.result_type(float)).at[rows, indices.ravel()].set(1.0)
    return 0.5 * (C + C.T)


def spectral_embedding(
    A,
    key,
    *,
    n_components: int,
    drop_first: bool,
    solver: str,
    **settings,
) -> SpectralFit:
    """Laplacian eigenmap of a symmetric affinity matrix A (n, n).

    ``settings``: the Lanczos settings of :func:`~latentlab.closed_form.eigensolvers.partial_eigh`
    (``block_size``, ``max_blocks``, ``max_products``, ``tol``)."""
    n = A.shape[0]
    A = jnp.where(jnp.eye(n, dtype=bool), 0.0, 0.5 * (A + A.T))
    degree = jnp.sum(A, axis=1)
    isolated = degree == 0
    scale = jnp.where(isolated, 1.0, jnp.sqrt(degree))
    S = A / scale[:, None] / scale[None, :] + jnp.diag(isolated.astype(A.dtype))
    wanted = n_components + 1 if drop_first else n_components
    if solver == "shift_invert":
        # sparse (k-NN) affinities: S's top eigenvalues crowd within ~1e-3 of 1 in a
        # spectrum of width 2, where plain Lanczos crawls; L - shift I (L's spectrum
        # is in [0, 2], Cholesky resolves it to ~eps) spreads them apart.  L's null
        # vector sqrt(d) is known: deflated, not found (left in, its 1 / (0 + 1e-9)
        # would set the scale of the solver's tolerance).
        L = jnp.eye(n, dtype=A.dtype) - S
        null = (scale / jnp.linalg.norm(scale))[:, None]
        if wanted == 1:
            eig = PartialEigh(jnp.zeros((1,), A.dtype), null, jnp.asarray(True))
        else:
            rest = partial_eigh(
                L,
                key,
                n_components=wanted - 1,
                which="bottom",
                solver=solver,
                shift=-1e-9,
                deflate=null,
                **settings,
            )
            eig = PartialEigh(
                jnp.concatenate([jnp.zeros((1,), A.dtype), rest.eigenvalues]),
                jnp.concatenate([null, rest.eigenvectors], axis=1),
                rest.converged,
            )
        eigenvalues = eig.eigenvalues
    else:
        eig = partial_eigh(S, key, n_components=wanted, which="top", solver=solver, **settings)
        eigenvalues = 1.0 - eig.eigenvalues
    embedding, _ = flip_signs_by_largest(eig.eigenvectors / scale[:, None], axis=0)
    if drop_first:
        embedding, eigenvalues = embedding[:, 1:], eigenvalues[1:]
    return SpectralFit(embedding, eigenvalues, eig.converged)


_STATIC = ("n_components", "drop_first", "solver", "block_size", "max_blocks", "max_products")

# The programs below take :func:`spectral_embedding`'s keyword settings unchanged.


@program(static_argnames=_STATIC)
def fit_spectral_embedding(A, key, **settings) -> SpectralFit:
    """:func:`spectral_embedding` of a precomputed affinity matrix."""
    return spectral_embedding(A, key, **settings)


@program(static_argnames=_STATIC)
def fit_rbf_spectral_embedding(X, gamma, key, **settings) -> SpectralFit:
    """:func:`spectral_embedding` of the rbf affinity of X (one program: the n x n
    affinity never leaves the device)."""
    return spectral_embedding(rbf_affinity(X, gamma), key, **settings)


@program(static_argnames=_STATIC)
def fit_knn_spectral_embedding(indices, key, **settings) -> SpectralFit:
    """:func:`spectral_embedding` of the symmetrised k-NN connectivity."""
    return spectral_embedding(knn_affinity(indices), key, **settings)


knn_affinity_program = program(knn_affinity)


# -- host side: sparse affinities -------------------------------------------------------


def sparse_knn_affinity(indices):
    """:func:`knn_affinity` as a ``scipy.sparse`` CSR matrix (scikit-learn's
    ``affinity_matrix_`` for ``affinity="nearest_neighbors"``)."""
    from scipy import sparse

    indices = np.asarray(indices)
    n, k = indices.shape
    C = sparse.csr_matrix(
        (np.ones(n * k), indices.ravel(), np.arange(0, n * k + 1, k)), shape=(n, n)
    )
    C.sum_duplicates()
    C.data[:] = 1.0  # a connectivity: a repeated neighbour is still one edge
    return (0.5 * (C + C.T)).tocsr()


def sparse_spectral_embedding(
    A, *, n_components: int, drop_first: bool, seed: int = 0
) -> SpectralFit:
    """:func:`spectral_embedding` of a sparse symmetric affinity A (NumPy results):
    the shift-invert route with ``L - shift I`` factored by sparse LU."""
    from scipy import sparse

    A = sparse.csr_matrix(A, dtype=np.float64, copy=True)
    A.setdiag(0.0)  # self-affinities ignored
    A.eliminate_zeros()
    degree = np.asarray(A.sum(axis=1)).ravel()
    isolated = degree == 0
    scale = np.where(isolated, 1.0, np.sqrt(degree))
    inverse = sparse.diags(1.0 / scale)
    L = sparse.diags((~isolated).astype(np.float64)) - inverse @ A @ inverse
    null = (scale / np.linalg.norm(scale))[:, None]
    wanted = n_components + 1 if drop_first else n_components
    eigenvalues, vectors, converged = np.zeros(1), null, np.asarray(True)
    if wanted > 1:
        # L's null vector sqrt(d) is deflated, not found (see spectral_embedding)
        rest = sparse_partial_eigh(
            L, wanted - 1, which="bottom", shift=-1e-9, deflate=null, seed=seed
        )
        eigenvalues = np.concatenate([eigenvalues, rest.eigenvalues])
        vectors = np.concatenate([null, rest.eigenvectors], axis=1)
        converged = rest.converged
    embedding = flip_column_signs(vectors / scale[:, None])
    if drop_first:
        embedding, eigenvalues = embedding[:, 1:], eigenvalues[1:]
    return SpectralFit(embedding, eigenvalues, converged)


rbf_affinity_program = program(rbf_affinity)


def normalized_laplacian(A):
    """``L = I - D^{-1/2} A D^{-1/2}`` of an affinity (dense ndarray or sparse), its
    diagonal ignored, with SciPy's convention for isolated nodes (diagonal 0); returns
    ``(L, sqrt(degree))`` (isolated nodes' scale 1)."""
    from scipy import sparse

    if sparse.issparse(A):
        A = sparse.csr_matrix(A, dtype=np.float64, copy=True)
        A.setdiag(0.0)
        A.eliminate_zeros()
        degree = np.asarray(A.sum(axis=1)).ravel()
    else:
        A = np.array(A, dtype=np.float64, copy=True)
        np.fill_diagonal(A, 0.0)
        degree = A.sum(axis=1)
    isolated = degree == 0
    scale = np.where(isolated, 1.0, np.sqrt(degree))
    if sparse.issparse(A):
        inverse = sparse.diags(1.0 / scale)
        L = (sparse.diags((~isolated).astype(np.float64)) - inverse @ A @ inverse).tocsr()
    else:
        L = np.diag((~isolated).astype(np.float64)) - A / scale[:, None] / scale[None, :]
    return L, scale


def lobpcg_spectral_embedding(
    A, *, n_components: int, drop_first: bool, seed: int = 0, tol=None, maxiter: int = 2000
) -> SpectralFit:
    """:func:`spectral_embedding` of a host affinity A (dense or sparse) by SciPy's
    LOBPCG on the normalized Laplacian (Knyazev 2001), the known null vector
    ``sqrt(degree)`` given as a constraint rather than found.  ``tol``: LOBPCG's
    residual tolerance (None: SciPy's default, ``n sqrt(eps)``).  ``converged`` is
    False when some residual ``||L v - lambda v||`` ends above ``tol`` (the caller then
    falls back to dense); for fewer than ``5 (n_components + 1)`` nodes LOBPCG does
    not apply and dense eigh runs instead."""
    from scipy import sparse
    from scipy.sparse.linalg import lobpcg

    L, scale = normalized_laplacian(A)
    n = L.shape[0]
    null = (scale / np.linalg.norm(scale))[:, None]
    wanted = n_components + 1 if drop_first else n_components
    rest = wanted - 1
    eigenvalues, vectors, converged = np.zeros(1), null, np.asarray(True)
    if rest > 0:
        if n < 5 * (rest + 1):
            dense = L.toarray() if sparse.issparse(L) else L
            projector = np.eye(n) - null @ null.T
            w, V = np.linalg.eigh(projector @ dense @ projector + 3.0 * (null @ null.T))
            w, V = w[:rest], V[:, :rest]
        else:
            rng = np.random.default_rng(seed)
            X0 = rng.standard_normal((n, rest))
            X0 -= null @ (null.T @ X0)
            used_tol = float(n * np.sqrt(np.finfo(np.float64).eps)) if tol is None else tol
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # its own "not reached" note
                w, V = lobpcg(L, X0, Y=null, tol=used_tol, maxiter=maxiter, largest=False)
            order = np.argsort(w)
            w, V = w[order], V[:, order]
            residual = np.linalg.norm(L @ V - V * w, axis=0)
            converged = np.asarray(bool(np.all(residual <= max(used_tol, 1e-12) * 10)))
        eigenvalues = np.concatenate([eigenvalues, w])
        vectors = np.concatenate([null, V], axis=1)
    embedding = flip_column_signs(vectors / scale[:, None])
    if drop_first:
        embedding, eigenvalues = embedding[:, 1:], eigenvalues[1:]
    return SpectralFit(embedding, eigenvalues, converged)


# -- host side: label assignment ---------------------------------------------------------


def discretize(vectors, *, seed: int = 0, max_iter: int = 30, max_restarts: int = 30):
    """Labels from a spectral embedding by Yu & Shi's (2003) multiclass discretisation:
    the rows, normalised to unit length, are rotated by the orthogonal R that brings
    them closest (in Frobenius norm) to a 0/1 cluster-indicator matrix, alternating
    the indicator (each row's largest rotated coordinate) and R (the polar factor of
    ``indicator^T rows``, by SVD) until the objective stops rising.  R starts from
    mutually most-orthogonal rows, the first drawn at random (``seed``)."""
    V = np.asarray(vectors, dtype=np.float64)
    n, k = V.shape
    norms = np.linalg.norm(V, axis=1, keepdims=True)
    X = V / np.where(norms > 0, norms, 1.0)
    rng = np.random.default_rng(seed)
    best_labels, best_value = None, -np.inf
    for _ in range(max_restarts):
        R = np.zeros((k, k))
        R[:, 0] = X[rng.integers(n)]
        closeness = np.zeros(n)
        for j in range(1, k):
            closeness += np.abs(X @ R[:, j - 1])
            R[:, j] = X[np.argmin(closeness)]
        previous = -np.inf
        labels = None
        for _ in range(max_iter):
            labels = np.argmax(X @ R, axis=1)
            indicator = np.zeros((n, k))
            indicator[np.arange(n), labels] = 1.0
            try:
                U, S, Wt = np.linalg.svd(indicator.T @ X)
            except np.linalg.LinAlgError:
                break
            value = float(S.sum())
            if value - previous <= 1e-12 * max(abs(value), 1.0):
                break
            previous = value
            R = Wt.T @ U.T
        if labels is not None and previous > best_value:
            best_labels, best_value = labels, previous
            if len(np.unique(labels)) == k:
                break
    return np.asarray(best_labels, dtype=np.int64)


def cluster_qr(vectors):
    """Labels from a spectral embedding by Damle, Minden & Ying's (2019) CPQR method:
    column-pivoted QR of ``V^T`` picks k representative rows; the orthogonal polar
    factor of those rows (by SVD) rotates V, and each point joins the cluster of its
    largest rotated coordinate in absolute value.  Deterministic, no iterations."""
    from scipy.linalg import qr

    V = np.asarray(vectors, dtype=np.float64)
    k = V.shape[1]
    _, _, pivots = qr(V.T, pivoting=True, mode="economic")
    U, _, Wt = np.linalg.svd(V[pivots[:k]].T)
    return np.argmax(np.abs(V @ (U @ Wt)), axis=1).astype(np.int64)
