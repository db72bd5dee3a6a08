"""Metric multidimensional scaling as pure jit-compiled functions.

Classical (Torgerson 1952; Gower 1966) MDS: the double-centred matrix
``B = -1/2 H D2 H`` of squared distances D2 is the Gram matrix of a centred
configuration when the distances are Euclidean, and its top eigenpairs give the
configuration ``Y = V_k Lambda_k^{1/2}``.  This is kernel PCA of the "kernel"
``-1/2 D2``, so the eigenproblem is :func:`~latentlab.closed_form.kernel_pca.kernel_eigh`'s
(dense eigh, or block Lanczos on the implicitly centred operator).

Out-of-sample points use the landmark / Nystrom formula of de Silva & Tenenbaum (2004):
``y = -1/2 L^# (delta - mean_j D2[:, j])`` with ``L^# = Lambda^{-1/2} V^T`` (the
pseudo-inverse of the landmark configuration), which reproduces the training
configuration exactly.  SMACOF (de Leeuw 1977; Borg & Groenen 2005, ch. 8) refines a
configuration by Guttman transforms, which never increase the raw stress.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.closed_form.kernel_pca import centred_kernel, kernel_eigh
from latentlab.inference.programs import program

__all__ = [
    "ClassicalMDS",
    "classical_mds",
    "squared_distances",
    "pairwise_squared_distances",
    "landmark_transform",
    "landmark_transform_data",
    "kruskal_stress",
    "smacof",
    "nonmetric_smacof",
    "raw_stress",
    "normalized_stress",
]


class ClassicalMDS(NamedTuple):
    eigenvalues: jax.Array  # (k,) of B = -1/2 H D2 H, decreasing (negative if not Euclidean)
    eigenvectors: jax.Array  # (n, k) unit columns, largest-magnitude entry positive
    embedding: jax.Array  # (n, k) V sqrt(max(eigenvalues, 0))
    column_means: jax.Array  # (n,) column means of -1/2 D2, for the landmark formula
    grand_mean: jax.Array  # () mean of -1/2 D2
    converged: jax.Array  # () bool; False only when "lanczos" missed its tolerance


@program(static_argnames=("n_components", "solver", "block_size", "max_blocks", "max_products"))
def classical_mds(
    D2,
    key=None,
    *,
    n_components: int,
    solver: str = "dense",
    block_size: int = 0,
    max_blocks: int = 0,
    max_products: int = 0,
    tol=0.0,
) -> ClassicalMDS:
    """Classical (Torgerson) MDS of an (n, n) symmetric matrix of *squared* distances.

    Parameters
    ----------
    D2 : array (n, n)
        Squared dissimilarities, symmetric with a zero diagonal (not checked here).
    key : PRNG key or None
        Start of the Lanczos iteration (None: ``PRNGKey(0)``); unused by ``"dense"``.
    n_components : int (static)
        Dimension of the configuration.
    solver : {"dense", "lanczos"} (static)
        ``"dense"``: full eigh of the centred matrix.  ``"lanczos"``: the top
        ``n_components`` pairs by block Lanczos on ``H (-1/2 D2) H`` applied implicitly
        (``block_size``, ``max_blocks``, ``max_products``, ``tol``: see
        :func:`~latentlab.closed_form.kernel_pca.kernel_eigh`); check ``converged``.

    Returns
    -------
    ClassicalMDS
        Directions with negative eigenvalues (non-Euclidean dissimilarities) get zero
        coordinates in ``embedding``.
    """
    K = -0.5 * D2
    if key is None:
        key = jax.random.PRNGKey(0)
    B, column_means, grand_mean = centred_kernel(K, solver)
    eigenvalues, V, converged = kernel_eigh(
        B, key, n_components, solver, 0, 0, block_size, max_blocks, max_products, tol
    )
    eigenvalues, V = eigenvalues[:n_components], V[:, :n_components]
    embedding = V * jnp.sqrt(jnp.maximum(eigenvalues, 0.0))
    return ClassicalMDS(eigenvalues, V, embedding, column_means, grand_mean, converged)


@program
def squared_distances(A, B):
    """Squared Euclidean distances between the rows of A (n, d) and B (m, d), >= 0.

    By the Gram expansion; centre both by the same point first (the estimators use the
    training mean) so that it does not cancel for data far from the origin.
    """
    sq = jnp.sum(A * A, axis=1)[:, None] + jnp.sum(B * B, axis=1)[None, :] - 2.0 * A @ B.T
    return jnp.maximum(sq, 0.0)


@program
def pairwise_squared_distances(X):
    """Squared distances between the rows of X, exactly symmetric with a zero diagonal."""
    D2 = squared_distances(X, X)
    D2 = 0.5 * (D2 + D2.T)
    return D2 * (1.0 - jnp.eye(X.shape[0], dtype=X.dtype))


@program
def landmark_transform(D2_new, column_means, projection):
    """de Silva & Tenenbaum's (2004) landmark formula for new points.

    ``D2_new`` (m, n_landmarks): squared distances of new points to the landmarks;
    ``column_means``: column means of ``-1/2 D2`` over the landmarks; ``projection``
    (n_landmarks, k): ``L^#`` transposed, i.e. ``V Lambda^{-1/2}`` for a classical fit,
    ``pinv(Y_centred)^T`` for any centred configuration Y.
    """
    return (-0.5 * D2_new - column_means[None, :]) @ projection


@program
def landmark_transform_data(X_new, landmarks, column_means, projection):
    """:func:`landmark_transform` of new data points, from their squared Euclidean
    distances to the landmark points (both offset by the same point)."""
    return landmark_transform(squared_distances(X_new, landmarks), column_means, projection)


def _distances_of(Y):
    D2 = squared_distances(Y, Y) * (1.0 - jnp.eye(Y.shape[0], dtype=Y.dtype))
    # sqrt has an infinite derivative at 0, but nothing differentiates this; the
    # where keeps exact zeros (the diagonal, coincident points) exactly zero
    return jnp.sqrt(jnp.where(D2 > 0, D2, 0.0))


@program
def kruskal_stress(D, Y):
    """Kruskal's stress-1 of configuration Y (n, k) against dissimilarities D (n, n):
    ``sqrt(sum_{i<j} (d_ij - ||y_i - y_j||)^2 / sum_{i<j} d_ij^2)``."""
    residual = D - _distances_of(Y)
    denominator = jnp.sum(D * D)
    return jnp.sqrt(jnp.sum(residual * residual) / jnp.where(denominator > 0, denominator, 1.0))


class SmacofResult(NamedTuple):
    embedding: jax.Array  # (n, k), centred
    raw_stress: jax.Array  # () sum_{i<j} (d_ij - ||y_i - y_j||)^2
    n_iter: jax.Array  # () Guttman transforms run
    converged: jax.Array  # () bool


@program(static_argnames=("max_iter",))
def smacof(D, Y0, eps, *, max_iter: int) -> SmacofResult:
    """SMACOF with unit weights: iterate the Guttman transform ``Y <- B(Y) Y / n``.

    ``B(Y)_ij = -d_ij / ||y_i - y_j||`` off the diagonal (0 where the points coincide)
    and rows summing to zero.  Each step minimises a majorizer of the raw stress, so
    the stress never increases (de Leeuw 1977).  Stops when the relative decrease of
    the raw stress falls below ``eps`` or after ``max_iter`` transforms.
    """
    n = D.shape[0]

    def raw_stress(Y):
        residual = D - _distances_of(Y)
        return 0.5 * jnp.sum(residual * residual)

    def guttman(Y):
        dist = _distances_of(Y)
        ratio = jnp.where(dist > 0, D / jnp.where(dist > 0, dist, 1.0), 0.0)
        B = -ratio
        B = B - jnp.diag(jnp.sum(B, axis=1))  # rows of B sum to zero
        return B @ Y / n

    def cond(state):
        _, _, it, done = state
        return (it < max_iter) & ~done

    def body(state):
        Y, stress, it, _ = state
        Y_new = guttman(Y)
        new = raw_stress(Y_new)
        done = (stress - new) <= eps * jnp.maximum(stress, jnp.finfo(D.dtype).tiny)
        return Y_new, new, it + 1, done

    Y0 = Y0 - jnp.mean(Y0, axis=0)
    Y, stress, it, done = jax.lax.while_loop(
        cond, body, (Y0, raw_stress(Y0), jnp.asarray(0), jnp.asarray(False))
    )
    return SmacofResult(Y, stress, it, done)


# -- host side: non-metric SMACOF --------------------------------------------------------


def _upper_distances(Y, rows, cols):
    return np.sqrt(np.sum((Y[rows] - Y[cols]) ** 2, axis=1))


def _nonmetric_disparities(order, distances, total):
    """Kruskal's disparities: the isotonic (non-decreasing in the dissimilarities' order)
    least-squares fit to the configuration's distances, scaled so that their squares
    sum to ``total``."""
    from scipy.optimize import isotonic_regression  # pool adjacent violators

    fitted = np.empty_like(distances)
    fitted[order] = isotonic_regression(distances[order], increasing=True).x
    norm = np.sum(fitted * fitted)
    return fitted * np.sqrt(total / norm) if norm > 0 else fitted


def nonmetric_smacof(D, Y0, eps: float, max_iter: int):
    """Non-metric (ordinal) MDS by SMACOF (Kruskal 1964; de Leeuw 1977; Borg & Groenen
    2005, ch. 9), on the host in NumPy.

    Each iteration replaces the dissimilarities by disparities: the monotone
    (isotonic) regression of the configuration's distances on the dissimilarities'
    rank order over all pairs i < j (ties ordered by their position), normalised so
    that ``sum_{i<j} dhat_ij^2 = n (n - 1) / 2`` (which fixes the otherwise free
    scale); then a Guttman transform ``Y <- B(Y) Y / n`` towards them.  The first
    step uses the (normalised) dissimilarities themselves.  Stops when Kruskal's
    stress-1 ``sqrt(sum (dist - dhat)^2 / sum dist^2)``, which does not depend on the
    scale of D, falls by less than ``eps`` (relative), reaches round-off level (a
    perfect ordinal fit), or after ``max_iter`` steps.

    Returns ``(Y, raw_stress, stress_1, n_iter, converged)``: the stresses of the final
    configuration against its own disparities.
    """
    D = np.asarray(D, dtype=np.float64)
    n = D.shape[0]
    rows, cols = np.triu_indices(n, 1)
    dissimilarities = D[rows, cols]
    order = np.argsort(dissimilarities, kind="stable")
    total = n * (n - 1) / 2.0
    Y = np.asarray(Y0, dtype=np.float64)
    Y = Y - Y.mean(axis=0)
    norm = np.sum(dissimilarities**2)
    disparities = dissimilarities * np.sqrt(total / norm) if norm > 0 else dissimilarities

    def stresses(Y, disparities):
        distances = _upper_distances(Y, rows, cols)
        raw = float(np.sum((distances - disparities) ** 2))
        scale = float(np.sum(distances**2))
        return raw, np.sqrt(raw / scale) if scale > 0 else 0.0, distances

    previous, converged, it = None, False, 0
    while it < max_iter:
        it += 1
        distances = _upper_distances(Y, rows, cols)
        ratio = np.zeros((n, n))
        safe = np.where(distances > 0, distances, 1.0)
        ratio[rows, cols] = np.where(distances > 0, disparities / safe, 0.0)
        ratio = ratio + ratio.T
        B = -ratio
        B[np.diag_indices(n)] = ratio.sum(axis=1)
        Y = B @ Y / n
        distances = _upper_distances(Y, rows, cols)
        disparities = _nonmetric_disparities(order, distances, total)
        _, stress_1, _ = stresses(Y, disparities)
        # stress-1 at round-off level is a perfect ordinal fit: its relative decrease
        # would be noise
        perfect = stress_1 <= 64 * np.finfo(np.float64).eps
        if perfect or (previous is not None and previous - stress_1 <= eps * previous):
            converged = True
            break
        previous = stress_1
    raw, stress_1, _ = stresses(Y, disparities)
    return Y, raw, stress_1, it, converged


def raw_stress(D, Y):
    """``sum_{i<j} (d_ij - ||y_i - y_j||)^2`` (NumPy)."""
    rows, cols = np.triu_indices(D.shape[0], 1)
    return float(np.sum((np.asarray(D)[rows, cols] - _upper_distances(Y, rows, cols)) ** 2))


def normalized_stress(D, Y):
    """Kruskal's stress-1, ``sqrt(sum_{i<j} (d_ij - ||y_i - y_j||)^2 / sum_{i<j}
    ||y_i - y_j||^2)`` (the configuration's distances in the denominator, as Kruskal
    (1964) and scikit-learn's ``normalized_stress`` define it)."""
    rows, cols = np.triu_indices(D.shape[0], 1)
    distances = _upper_distances(np.asarray(Y, dtype=np.float64), rows, cols)
    scale = float(np.sum(distances**2))
    raw = float(np.sum((np.asarray(D)[rows, cols] - distances) ** 2))
    return float(np.sqrt(raw / scale)) if scale > 0 else 0.0
