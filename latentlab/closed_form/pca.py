"""Principal component analysis as pure jit-compiled functions.

Three ways to the same decomposition of the centred data ``Xc = U S V^T``:

``pca_full``            thin SVD of Xc, O(n d min(n, d)); the reference.
``pca_covariance_eigh`` eigh of the d x d scatter Xc^T Xc; O(n d^2), best when n >> d
                        (it squares the condition number, harmless in float64 for PCA).
                        The scatter comes from :func:`scatter_about_mean`; a caller that
                        forms it elsewhere (on the host) uses :func:`pca_from_scatter`.
``pca_randomized``      Halko, Martinsson & Tropp (2011), Alg. 4.4 + 5.1: a Gaussian
                        sketch, power iterations re-orthonormalised by QR, and an SVD of
                        the small projected matrix; O(n d k).
``pca_lanczos``         block Lanczos (:func:`block_lanczos_eigh`, shared with kernel
                        PCA) on the scatter operator, run to a residual tolerance;
                        ``pca_lanczos_sparse`` the same for a sparse X, centred
                        implicitly.

All return a :class:`PCADecomposition` with components as rows, signed so that the
largest-magnitude entry of each component is positive (scikit-learn's convention).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from latentlab.closed_form._linalg import eigh_descending, flip_signs_by_largest
from latentlab.inference.programs import program

__all__ = [
    "PCADecomposition",
    "flip_component_signs",
    "pca_full",
    "pca_covariance_eigh",
    "pca_from_scatter",
    "pca_randomized",
    "pca_lanczos",
    "pca_lanczos_sparse",
    "SparseRows",
    "scatter_about_mean",
    "shifted_gram_is_safe",
    "SHIFTED_GRAM_MAX_RATIO",
    "CENTRING_METHODS",
    "randomized_range_finder",
    "TopEigh",
    "block_lanczos_eigh",
    "pca_transform",
    "pca_inverse_transform",
    "ppca_score_samples",
]


class PCADecomposition(NamedTuple):
    mean: jax.Array  # (d,)
    components: jax.Array  # (r, d) orthonormal rows, by decreasing variance
    singular_values: jax.Array  # (r,) of the centred data
    explained_variance: jax.Array  # (r,) = singular_values**2 / (n - 1)
    total_variance: jax.Array  # () sum of the ddof=1 column variances


def flip_component_signs(components):
    """Make the largest-magnitude entry of each row positive (deterministic signs)."""
    return flip_signs_by_largest(components, axis=1)[0]


def _centre(X):
    mean = jnp.mean(X, axis=0)
    return mean, X - mean


def _decomposition(mean, Vt, singular_values, total_variance, n):
    return PCADecomposition(
        mean=mean,
        components=flip_component_signs(Vt),
        singular_values=singular_values,
        explained_variance=singular_values**2 / (n - 1),
        total_variance=total_variance,
    )


@program
def pca_full(X) -> PCADecomposition:
    """PCA by the thin SVD of the centred data; ``min(n, d)`` components."""
    mean, Xc = _centre(X)
    _, s, Vt = jnp.linalg.svd(Xc, full_matrices=False)
    total_variance = jnp.sum(s * s) / (X.shape[0] - 1)  # the full spectrum is at hand
    return _decomposition(mean, Vt, s, total_variance, X.shape[0])


SHIFTED_GRAM_MAX_RATIO = 1e4
"""Largest ``n mu_j^2 / S_jj`` (S the centred scatter) for which the float64 scatter may
be formed as ``X^T X - n mu mu^T``: the subtraction then loses at most ~1e4 eps ~ 2e-12
of each diagonal entry's relative accuracy (the guard of ``models/gaussian_latent.py``
``_scatter_about``).  Other precisions keep the same absolute loss, see
:func:`shifted_gram_is_safe`."""

CENTRING_METHODS = ("auto", "gram", "exact")


def shifted_gram_is_safe(n, mean, diagonal):
    """Whether ``X^T X - n mean mean^T`` is an accurate scatter matrix of X (n rows).

    ``diagonal`` is that matrix's diagonal, ``sum_i x_ij**2 - n mean_j**2`` (computed the
    same way, so it can be had without the product).  The test is
    ``all(n mean**2 < ratio * diagonal)``, ``ratio`` = :data:`SHIFTED_GRAM_MAX_RATIO` in
    float64 and scaled by ``eps(float64) / eps(dtype)`` otherwise (so in float32 only
    essentially centred data pass): the subtraction's rounding error is about
    ``eps n mean**2``, so every diagonal entry that passed (and through Cauchy-Schwarz
    every off-diagonal one) lost at most ~2e-12 relative, and the computed diagonal is
    accurate enough to be trusted by the test itself.  A constant column fails (unless
    its mean is 0).  Works on NumPy and JAX arrays alike.
    """
    eps = float(jnp.finfo(diagonal.dtype).eps)  # the array's own dtype, x64 mode or not
    ratio = SHIFTED_GRAM_MAX_RATIO * float(jnp.finfo(jnp.float64).eps) / eps
    return (n * mean**2 < ratio * diagonal).all()


@program(static_argnames=("method",))
def scatter_about_mean(X, *, method: str = "auto"):
    """``(mean, Xc^T Xc)`` of X (n, d), with Xc the column-centred data.

    ``method="exact"`` centres X and then forms the product: always accurate, but XLA
    is slow at it (it writes the centred copy first: ~2x the plain product on CPU).
    ``"gram"`` forms ``X^T X - n mean mean^T`` as scikit-learn does, which cancels
    catastrophically when the means are large against the spreads.  ``"auto"``
    (default) checks :func:`shifted_gram_is_safe` on the column sums of squares (one
    cheap pass) and then takes one of the two (``lax.cond``: only one product is formed).
    """
    if method not in CENTRING_METHODS:
        raise ValueError(f"method must be one of {CENTRING_METHODS}, got {method!r}")
    n = X.shape[0]
    mean = jnp.mean(X, axis=0)

    def exact(X, mean):
        Xc = X - mean
        return Xc.T @ Xc

    def shifted_gram(X, mean):
        return X.T @ X - n * jnp.outer(mean, mean)

    if method == "exact":
        return mean, exact(X, mean)
    if method == "gram":
        return mean, shifted_gram(X, mean)
    diagonal = jnp.sum(X * X, axis=0) - n * mean**2
    safe = shifted_gram_is_safe(n, mean, diagonal)
    return mean, jax.lax.cond(safe, shifted_gram, exact, X, mean)


@program
def pca_from_scatter(mean, scatter, n) -> PCADecomposition:
    """PCA from the (d, d) scatter matrix ``Xc^T Xc`` of ``n`` rows about ``mean``.

    ``n`` may be a traced scalar, so data sets of any length with the same number of
    features share one compiled program.
    """
    total_variance = jnp.trace(scatter) / (n - 1)
    eigenvalues, V = eigh_descending(scatter)
    s = jnp.sqrt(jnp.maximum(eigenvalues, 0.0))  # round-off can make them slightly < 0
    return _decomposition(mean, V.T, s, total_variance, n)


@program(static_argnames=("centring",))
def pca_covariance_eigh(X, *, centring: str = "auto") -> PCADecomposition:
    """PCA by the eigendecomposition of the scatter matrix Xc^T Xc; ``d`` components.

    The scatter is ``X^T X - n mu mu^T`` when that is accurate (column means not huge
    against the spreads), else that of the explicitly centred data; see
    :func:`scatter_about_mean` for ``centring``.
    """
    mean, scatter = scatter_about_mean(X, method=centring)
    return pca_from_scatter(mean, scatter, X.shape[0])


def randomized_range_finder(matvec, rmatvec, key, n, d, size: int, n_iter: int, dtype):
    """Orthonormal Q (n, size) whose range approximates that of an n x d operator A.

    ``matvec(M) = A M`` and ``rmatvec(M) = A^T M``; QR after every product keeps the
    power iterations from collapsing onto the top singular vector (HMT Alg. 4.4).
    """
    omega = jax.random.normal(key, (d, size), dtype=dtype)
    Q, _ = jnp.linalg.qr(matvec(omega))

    def power_step(_, Q):
        Z, _ = jnp.linalg.qr(rmatvec(Q))
        Q, _ = jnp.linalg.qr(matvec(Z))
        return Q

    return jax.lax.fori_loop(0, n_iter, power_step, Q)


class TopEigh(NamedTuple):
    eigenvalues: jax.Array  # (k,) Ritz values, decreasing
    eigenvectors: jax.Array  # (n, k) orthonormal Ritz vectors
    residual: jax.Array  # () max_i ||A v_i - theta_i v_i|| / max(theta_1, tiny)
    converged: jax.Array  # () bool: residual <= tol
    n_products: jax.Array  # () number of block products A @ (n, block_size)


def block_lanczos_eigh(
    matmat,
    n: int,
    key,
    *,
    n_components: int,
    block_size: int,
    max_blocks: int,
    max_products: int,
    tol,
    dtype,
) -> TopEigh:
    """Largest eigenpairs of a symmetric n x n operator by restarted block Lanczos.

    ``matmat(M) = A M`` for M of shape (n, block_size).  The Krylov basis
    ``[Q_0, A Q_0, A^2 Q_0, ...]`` (Q_0 a random orthonormal block) is orthonormalised
    block by block with full reorthogonalisation (classical Gram-Schmidt twice), and its
    coefficients are the projected matrix ``T = Q^T A Q``, so the Ritz pairs cost no
    extra product with A.  The residual of Ritz pair i is exact and free too:
    ``A Q = Q T + Q_next R E^T`` gives ``||A y_i - theta_i y_i|| = ||R s_i[last block]||``.

    After every block the top ``n_components`` Ritz pairs are checked: the iteration
    stops when every residual is at most ``tol * theta_1``.  A full basis
    (``max_blocks`` blocks) is thick-restarted from its best Ritz vectors (half the
    basis) and the newest block; after
    ``max_products`` block products it stops with ``converged=False`` (the caller then
    falls back to a dense solver).  Residual ``r`` bounds each eigenvalue's error by
    ``r`` (Bauer-Fike) and, away from clusters, by ``r^2 / gap`` (Kato-Temple).

    A Krylov space that A exhausts (rank below the basis size) continues in directions
    made of round-off, orthogonalised like any other (and coupled to the basis at
    round-off level), so low-rank operators are handled too.
    """
    b, m, k = block_size, max_blocks, n_components
    dim = b * m
    kept = b * max(1, m // 2)  # Ritz vectors kept at a restart: half the basis
    Q0, _ = jnp.linalg.qr(jax.random.normal(key, (n, b), dtype=dtype))
    active = jnp.arange(dim) // b  # block index of every basis column
    blocks = jnp.arange(dim).reshape(m, b)

    def ritz(T, j):
        # Ritz pairs of the leading (j + 1) blocks; the inactive rest of T is pushed
        # below every real Ritz value so that it never enters the top k
        on = active <= j
        scale = jnp.sum(jnp.abs(T)) + 1.0
        Tm = jnp.where(on[:, None] & on[None, :], T, 0.0) - jnp.diag(jnp.where(on, 0.0, scale))
        return eigh_descending(Tm)

    def start(Q0):
        Q = jnp.zeros((n, dim), dtype).at[:, :b].set(Q0)
        return Q, jnp.zeros((dim, dim), dtype)

    def body(state):
        Q, T, j, products, *_ = state
        Qj = jax.lax.dynamic_slice_in_dim(Q, j * b, b, axis=1)
        W = matmat(Qj)
        C = Q.T @ W  # zeros for the blocks not yet filled
        Z = W - Q @ C
        C2 = Q.T @ Z  # the second pass ("twice is enough")
        Z = Z - Q @ C2
        C = C + C2
        Qn, R = jnp.linalg.qr(Z)
        # Z's directions far below ||W|| (A exhausting the Krylov space) come out of
        # the QR amplified together with their round-off inside the basis; one more
        # pass on the unit columns of Qn makes them orthogonal to it again, and the
        # removed part (A's couplings at round-off level) is kept in T.  Only needed
        # (and paid for) when R's diagonal spans more than 1e4.
        diagonal = jnp.abs(jnp.diag(R))

        def third_pass(operands):
            Qn, R, C = operands
            D = Q.T @ Qn
            Qn, R2 = jnp.linalg.qr(Qn - Q @ D)
            return Qn, R2 @ R, C + D @ R

        Qn, R, C = jax.lax.cond(
            jnp.min(diagonal) < 1e-4 * jnp.max(diagonal),
            third_pass,
            lambda operands: operands,
            (Qn, R, C),
        )
        T = jax.lax.dynamic_update_slice_in_dim(T, C, j * b, axis=1)
        T = jax.lax.dynamic_update_slice_in_dim(T, C.T, j * b, axis=0)
        theta, S = ritz(T, j)
        last = jnp.take(S, blocks[j], axis=0)  # (b, dim): rows of the newest block
        residuals = jnp.linalg.norm(R @ last[:, :k], axis=0)
        residual = jnp.max(residuals) / jnp.maximum(theta[0], jnp.finfo(dtype).tiny)
        full = j + 1 == m

        def extend(_):
            # (T's couplings of the new block are written by the next step, from
            # Q^T A Q_next, which equals R^T up to round-off)
            Q2 = jax.lax.dynamic_update_slice_in_dim(Q, Qn, (j + 1) * b, axis=1)
            return Q2, T, j + 1

        def restart(_):
            # thick restart (Wu & Simon 2000): keep the best `kept` Ritz vectors Y, for
            # which A Y = Y Theta + Qn (R S_last), and continue the Krylov space from Qn
            Y = Q @ S[:, :kept]
            B = R @ last[:, :kept]  # (b, kept) couplings of Qn with Y
            Q2 = jnp.zeros_like(Q).at[:, :kept].set(Y).at[:, kept : kept + b].set(Qn)
            T2 = jnp.zeros_like(T).at[:kept, :kept].set(jnp.diag(theta[:kept]))
            T2 = T2.at[kept : kept + b, :kept].set(B).at[:kept, kept : kept + b].set(B.T)
            return Q2, T2, jnp.asarray(kept // b, j.dtype)

        Qnext, Tnext, jnext = jax.lax.cond(full, restart, extend, None)
        products = products + 1
        last_step = (residual <= tol) | (products >= max_products)
        # the Ritz vectors are only needed once, at the end
        Y = jax.lax.cond(last_step, lambda _: Q @ S[:, :k], lambda _: state[5], None)
        return Qnext, Tnext, jnext, products, theta[:k], Y, residual

    def not_done(state):
        *_, products, _, _, residual = state
        return (residual > tol) & (products < max_products)

    Q, T = start(Q0)
    init = (
        Q,
        T,
        jnp.zeros((), jnp.int32),
        jnp.zeros((), jnp.int32),
        jnp.zeros((k,), dtype),
        jnp.zeros((n, k), dtype),
        jnp.asarray(jnp.inf, dtype),
    )
    *_, products, theta, Y, residual = jax.lax.while_loop(not_done, body, init)
    return TopEigh(theta, Y, residual, residual <= tol, products)


@program(static_argnames=("n_components", "n_oversamples", "n_iter"))
def pca_randomized(
    X, key, *, n_components: int, n_oversamples: int = 10, n_iter: int = 4
) -> PCADecomposition:
    """Randomized PCA (Halko, Martinsson & Tropp 2011): the top ``n_components``."""
    n, d = X.shape
    mean, Xc = _centre(X)
    total_variance = jnp.sum(Xc * Xc) / (n - 1)
    size = min(n_components + n_oversamples, n, d)
    Q = randomized_range_finder(
        lambda M: Xc @ M, lambda M: Xc.T @ M, key, n, d, size, n_iter, X.dtype
    )
    _, _, Vt = jnp.linalg.svd(Q.T @ Xc, full_matrices=False)  # B = Q^T A, (size, d)
    V = Vt[:n_components]
    # Report the Rayleigh-Ritz values of the returned axes, ||Xc v||, not B's singular
    # values (which miss the part of Xc v outside range(Q)): explained_variance_ is then
    # the variance of the projections fit_transform returns, to round-off.
    s = jnp.linalg.norm(Xc @ V.T, axis=0)
    order = jnp.argsort(-s)
    return _decomposition(mean, V[order], s[order], total_variance, n)


@program(static_argnames=("n_components", "block_size", "max_blocks", "max_products"))
def pca_lanczos(
    X, key, tol, *, n_components: int, block_size: int, max_blocks: int, max_products: int
):
    """PCA by block Lanczos (:func:`block_lanczos_eigh`) on the scatter operator
    ``M -> Xc^T (Xc M)``, without forming the d x d scatter: the top ``n_components``.

    Returns ``(PCADecomposition, converged)``; not converged (residuals above ``tol``
    times the largest eigenvalue after ``max_products`` products) means the caller
    should use an exact solver.  Singular values are ``||Xc v||`` of the returned axes
    (Rayleigh-Ritz values, as :func:`pca_randomized`).
    """
    n, d = X.shape
    mean, Xc = _centre(X)
    total_variance = jnp.sum(Xc * Xc) / (n - 1)
    return _lanczos_decomposition(
        lambda M: Xc @ M,
        lambda M: Xc.T @ (Xc @ M),
        mean,
        total_variance,
        n,
        key,
        tol,
        n_components=n_components,
        block_size=block_size,
        max_blocks=max_blocks,
        max_products=max_products,
    )


def _lanczos_decomposition(
    centred_product, scatter_product, mean, total_variance, n, key, tol, **settings
):
    """PCA of the centred X behind ``centred_product`` (M -> Xc M) and
    ``scatter_product`` (M -> Xc^T Xc M) by block Lanczos on the scatter, and whether it
    converged.  Singular values are ``||Xc v||`` of the returned axes."""
    top = block_lanczos_eigh(
        scatter_product, mean.shape[0], key, tol=tol, dtype=mean.dtype, **settings
    )
    V = top.eigenvectors.T
    s = jnp.linalg.norm(centred_product(top.eigenvectors), axis=0)
    order = jnp.argsort(-s)
    return _decomposition(mean, V[order], s[order], total_variance, n), top.converged


class SparseRows(NamedTuple):
    """An n x d matrix in coordinate form; padding entries have value 0."""

    rows: jax.Array  # (nnz,) int32, in row order
    cols: jax.Array  # (nnz,) int32
    values: jax.Array  # (nnz,)

    def matmat(self, M, n: int):
        """``X M`` for dense M (d, b)."""
        terms = self.values[:, None] * M[self.cols]
        return jax.ops.segment_sum(terms, self.rows, num_segments=n, indices_are_sorted=True)

    def rmatmat(self, Y, d: int):
        """``X^T Y`` for dense Y (n, b)."""
        return jax.ops.segment_sum(self.values[:, None] * Y[self.rows], self.cols, num_segments=d)


@program(
    static_argnames=(
        "n_samples",
        "n_features",
        "n_components",
        "block_size",
        "max_blocks",
        "max_products",
    )
)
def pca_lanczos_sparse(
    X: SparseRows,
    mean,
    total_variance,
    key,
    tol,
    *,
    n_samples: int,
    n_features: int,
    n_components: int,
    block_size: int,
    max_blocks: int,
    max_products: int,
):
    """:func:`pca_lanczos` for a sparse X, centred implicitly (X is never densified).

    Each scatter product is ``Xc^T (Xc M)`` with ``Xc M = X M - 1 (mean^T M)`` formed
    as an (n, b) dense block, then ``Xc^T Y = X^T Y - mean (1^T Y)``: the centring
    acts on the products, so nothing cancels as in ``X^T X - n mean mean^T``.
    ``mean`` and ``total_variance`` come from the host (exact sums over the non-zeros).
    Returns ``(PCADecomposition, converged)``.
    """
    n, d = n_samples, n_features

    def centred_product(M):  # Xc M
        return X.matmat(M, n) - mean @ M

    def scatter_product(M):  # Xc^T Xc M
        Y = centred_product(M)
        return X.rmatmat(Y, d) - jnp.outer(mean, jnp.sum(Y, axis=0))

    return _lanczos_decomposition(
        centred_product,
        scatter_product,
        mean,
        total_variance,
        n,
        key,
        tol,
        n_components=n_components,
        block_size=block_size,
        max_blocks=max_blocks,
        max_products=max_products,
    )


@program
def pca_transform(X, mean, components, scale):
    """Project onto the components: ``(X - mean) V^T / scale`` (scale 1 or sqrt(var)).

    Computed as ``X V^T - mean V^T`` (as scikit-learn does): centring inside the product
    would make XLA write a centred copy of X first.
    """
    return (X @ components.T - mean @ components.T) / scale


@program
def pca_inverse_transform(Z, mean, components, scale):
    """Back to data space: ``(Z * scale) V + mean``."""
    return (Z * scale) @ components + mean


@program
def ppca_score_samples(X, mean, components, explained_variance, noise_variance):
    """Per-row log-density under the probabilistic PCA model of a fitted PCA.

    Covariance ``V^T diag(max(lambda, sigma2) - sigma2) V + sigma2 I`` (Tipping & Bishop
    1999, eq. (7) at the ML loadings), as scikit-learn's ``PCA.get_covariance``.  With
    orthonormal rows V, its inverse and log-determinant are diagonal in the
    (component, residual) split, so no d x d matrix is formed.
    """
    d = X.shape[1]
    k = components.shape[0]
    Xc = X - mean
    scores = Xc @ components.T
    residual = Xc - scores @ components
    variance = jnp.maximum(explained_variance, noise_variance)
    has_noise = noise_variance > 0
    safe_noise = jnp.where(has_noise, noise_variance, 1.0)
    mahalanobis = jnp.sum(scores**2 / variance, axis=1) + jnp.where(
        has_noise, jnp.sum(residual**2, axis=1) / safe_noise, 0.0
    )
    log_det = jnp.sum(jnp.log(variance)) + jnp.where(has_noise, (d - k) * jnp.log(safe_noise), 0.0)
    return -0.5 * (d * jnp.log(2.0 * jnp.pi) + log_det + mahalanobis)
