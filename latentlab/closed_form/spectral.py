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
