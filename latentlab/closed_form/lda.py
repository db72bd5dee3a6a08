"""Fisher's linear discriminant analysis as pure jit-compiled functions.

The discriminant directions solve the generalised eigenproblem ``S_b w = lambda S_w w``
of between- and within-class scatter (Fisher 1936; Rao 1948 for several classes;
Hastie, Tibshirani & Friedman, ESL 4.3.3).  With Gaussian classes sharing the
covariance ``S_w``, the Bayes rule is linear: ``delta_k(x) = x^T S_w^{-1} mu_k
- 1/2 mu_k^T S_w^{-1} mu_k + log pi_k`` (ESL eq. 4.10), which is what ``coef`` and
``intercept`` hold.

Three solvers, the same model:

* ``"svd"``: whiten the within-class scatter (its eigendecomposition on the
  standardised, class-centred data), then take the principal axes of the whitened,
  prior-weighted class means (ESL 4.3.2's "sphere, then PCA of the centroids").
  Directions whose within-class spread is below ``tol`` are dropped, so singular
  within-class scatter is fine.  The scatter is formed (d x d) when ``n >= d``, far
  cheaper than the thin SVD of the n x d data; with ``n < d`` the thin SVD is used.
* ``"eigen"``: the generalised eigenproblem by Cholesky of ``S_w``, with optional
  shrinkage of the covariances.
* ``"lsqr"``: only the classifier, ``coef = S_w^{-1} mu`` by least squares.

"eigen" and "lsqr" read X once, on the host, for its moments (:func:`pooled_moments`:
class means and the pooled scatter from one Gram matrix; :func:`class_moments`: every
class covariance, for per-class shrinkage or priors other than the class
frequencies); the d x d algebra after them is jit-compiled (:func:`fit_lda_pooled`,
:func:`fit_lda_classes`).  "svd" runs whole in JAX (:func:`fit_lda_svd`).

Shrinkage: a float alpha gives ``(1 - alpha) S + alpha tr(S)/d I``; ``"auto"`` takes
Ledoit & Wolf's (2004) alpha on the standardised data and scales back, per class
covariance and for the total covariance.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.closed_form._linalg import eigh_descending, eigh_unordered, flip_signs_by_largest
from latentlab.closed_form.eigensolvers import one_blas_thread
from latentlab.inference.programs import program

__all__ = [
    "LDAFit",
    "fit_lda_svd",
    "fit_lda_pooled",
    "fit_lda_classes",
    "pooled_moments",
    "class_moments",
    "lda_decision",
    "lda_transform",
    "shrunk_covariance",
]

SOLVERS = ("svd", "eigen", "lsqr")
SHRINKAGE_MODES = ("none", "fixed", "auto")


class LDAFit(NamedTuple):
    means: jax.Array  # (C, d) class means
    xbar: jax.Array  # (d,) prior-weighted mean of the class means
    scalings: jax.Array  # (d, m) discriminant directions (zero columns beyond `rank`)
    eigenvalues: jax.Array  # (m,) between/within variance along each direction, decreasing
    rank: jax.Array  # () number of meaningful directions
    coef: jax.Array  # (C, d)
    intercept: jax.Array  # (C,)
    covariance: jax.Array  # (d, d) prior-weighted within-class covariance (shrunk)
    within_rank: jax.Array  # () rank of the within-class scatter ("svd"; d otherwise)
    ok: jax.Array  # () bool; False when "eigen" found S_w not positive definite


def shrunk_covariance(S, alpha):
    """``(1 - alpha) S + alpha mu I`` with ``mu = tr(S) / d`` (Ledoit & Wolf's target)."""
    d = S.shape[0]
    mu = jnp.trace(S) / d
    return (1.0 - alpha) * S + alpha * mu * jnp.eye(d, dtype=S.dtype)


def _shrink(S, fourth_moment, count, mode, alpha):
    """Covariance S (ddof=0) of ``count`` centred rows z, shrunk as ``mode`` says.

    ``fourth_moment`` is ``sum_n ||z_n / scale||^4`` with ``scale = sqrt(diag S)``
    (constant columns scale 1), read by ``"auto"`` only: Ledoit & Wolf's (2004)
    alpha on standardised columns, as scikit-learn computes it.
    """
    if mode == "fixed":
        return shrunk_covariance(S, alpha)
    if mode == "none":
        return S
    d = S.shape[0]
    scale = _scale(S)
    emp = S / jnp.outer(scale, scale)
    mu = jnp.trace(emp) / d
    sum_sq = jnp.sum(emp * emp)  # ||emp||_F^2
    beta = (fourth_moment / count - sum_sq) / (d * count)
    delta = (sum_sq - 2.0 * mu * jnp.trace(emp) + d * mu * mu) / d
    beta = jnp.minimum(beta, delta)
    shrinkage = jnp.where(beta == 0, 0.0, beta / jnp.where(delta == 0, 1.0, delta))
    return shrunk_covariance(emp, shrinkage) * jnp.outer(scale, scale)


def _scale(S):
    scale = jnp.sqrt(jnp.diag(S))
    return jnp.where(scale > 0, scale, 1.0)


def _classifier(means, log_priors, coef):
    intercept = -0.5 * jnp.sum(means * coef, axis=1) + log_priors
    return coef, intercept


# The pooled scatter from the raw Gram ``X^T X - sum_k n_k m_k m_k^T`` loses about
# log10 of this ratio (raw second moment over within-class variance, per feature) in
# digits to cancellation; above it the class-centred product is used instead.
_MAX_CANCELLATION = 1e3


def _class_sums(X, labels, n_classes: int) -> np.ndarray:
    """(n_classes, d) sums of X's rows by class, one BLAS product with the one-hot
    indicator (sparse when it would be larger than X)."""
    n = X.shape[0]
    if n_classes <= X.shape[1]:
        onehot = np.zeros((n_classes, n))
        onehot[labels, np.arange(n)] = 1.0
        return onehot @ X
    from scipy import sparse

    order = np.argsort(labels, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=n_classes))])
    return np.asarray(sparse.csr_matrix((np.ones(n), order, indptr), shape=(n_classes, n)) @ X)


def pooled_moments(X, labels, n_classes: int):
    """``(counts, means, pooled)`` of X (n, d) with integer labels, on the host: class
    counts, class means and the pooled within-class scatter ``sum_k (n_k / n) S_k``
    (S_k the ddof=0 class covariances), from one Gram matrix ``X^T X`` less the class
    means' part.

    NumPy on purpose (DESIGN has closed forms in JAX; the compile budget allows host NumPy for
    small eager steps, and this is the one dominant product of an "eigen"/"lsqr" fit):
    NumPy's BLAS forms the float64 Gram in about half XLA's time (0.016 s against
    0.032 s at 100,000 x 50), and X, which arrives as a NumPy array, is not copied into
    an aligned device buffer (0.024 s).  The d x d algebra after it stays in JAX
    (:func:`fit_lda_pooled`).  When the features' means are large next to their
    within-class spread the difference cancels, and the class-centred product (one
    more pass) is taken.

    The products run on one BLAS thread: a Gram of a tall, narrow X is bound by
    reading X, and OpenBLAS' threads thrash on a busy machine (at load 11 on 2 cores
    the 100,000 x 50 Gram took a median 7.7 s on 2 threads, 72 ms on one, 172 ms in
    XLA).
    """
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels)
    n = X.shape[0]
    counts = np.bincount(labels, minlength=n_classes).astype(np.float64)
    with one_blas_thread():
        sums = _class_sums(X, labels, n_classes)
        means = sums / counts[:, None]
        raw = X.T @ X
        scatter = (raw - sums.T @ means) / n
        within = np.diag(scatter)
        if not (np.all(within > 0) and np.all(np.diag(raw) / n <= _MAX_CANCELLATION * within)):
            centred = X - means[labels]
            scatter = centred.T @ centred / n
    return counts, means, 0.5 * (scatter + scatter.T)


def class_moments(X, labels, n_classes: int, fourth: bool = False, total_fourth: bool = False):
    """``(counts, means, covariances, fourth_moments, total_fourth_moment)`` of X (n, d)
    by class, on the host: every class covariance S_k (ddof=0, (C, d, d)), for
    per-class shrinkage and priors other than the class frequencies.

    ``fourth``: also every class's ``sum_n ||z_n / scale_k||^4`` (z the class-centred
    rows, ``scale_k = sqrt(diag S_k)``; Ledoit-Wolf's alpha, see :func:`_shrink`),
    else zeros; ``total_fourth``: the same of the rows centred by the total mean and
    scaled by the total covariance's diagonal ("eigen" with "auto" shrinkage), else 0.

    The rows are grouped by class with one gather; each class block is centred exactly
    (no cancellation whatever the offset) and its covariance is one BLAS product, the
    fourth moments read the block while it is in cache.  NumPy on one BLAS thread for
    the same reasons as :func:`pooled_moments` (the batched per-class products cost
    XLA 48 ms of CPU against 30 ms here at 100,000 x 50, 10 classes, and X is not
    copied to the device).
    """
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels)
    sizes = np.bincount(labels, minlength=n_classes)
    grouped = X[np.argsort(labels, kind="stable")]  # our copy: centred in place
    with one_blas_thread():
        return _class_blocks(grouped, sizes, n_classes, fourth, total_fourth)


def _class_blocks(grouped, sizes, n_classes, fourth, total_fourth):
    """:func:`class_moments` of rows already grouped by class (``sizes`` rows each)."""
    n, d = grouped.shape
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    means = np.empty((n_classes, d))
    covariances = np.empty((n_classes, d, d))
    fourths = np.zeros(n_classes)
    for k in range(n_classes):
        Z = grouped[bounds[k] : bounds[k + 1]]
        means[k] = Z.mean(axis=0)
        Z -= means[k]
        S = Z.T @ Z / sizes[k]
        covariances[k] = 0.5 * (S + S.T)
        if fourth:
            fourths[k] = _fourth_moment(Z, covariances[k])
    counts = sizes.astype(np.float64)
    total = 0.0
    if total_fourth:
        weights = counts / n
        spread = means - weights @ means
        St = np.tensordot(weights, covariances, axes=1) + (spread * weights[:, None]).T @ spread
        for k in range(n_classes):
            total += _fourth_moment(grouped[bounds[k] : bounds[k + 1]] + spread[k], St)
    return counts, means, covariances, fourths, np.float64(total)


def _fourth_moment(Z, S):
    """``sum_n ||z_n / scale||^4`` over the rows of Z (n, d), ``scale = sqrt(diag S)``
    (constant columns scale 1), on the host."""
    scale = np.sqrt(np.diag(S))
    scaled = Z / np.where(scale > 0, scale, 1.0)
    norms = np.einsum("ij,ij->i", scaled, scaled)
    return float(norms @ norms)


@program(static_argnames=("n_classes", "store_covariance"))
def fit_lda_svd(
    X,
    labels,
    priors,
    tol,
    *,
    n_classes: int,
    store_covariance: bool = True,
) -> LDAFit:
    """Fit LDA by the "svd" solver to X (n, d) with integer labels in
    ``[0, n_classes)`` and class priors.

    ``tol`` is the rank threshold on the standardised within-class singular values.
    ``store_covariance=False`` skips the within-class covariance (zeros are returned),
    which the solver does not need.  Every class must occur in ``labels`` (the caller
    checks).  The "eigen" and "lsqr" solvers start from host moments:
    :func:`pooled_moments` + :func:`fit_lda_pooled`, or :func:`class_moments` +
    :func:`fit_lda_classes`.
    """
    n, d = X.shape
    C = n_classes
    dtype = X.dtype
    # class sums by a scatter-add: one read of X (a one-hot product costs a C-wide GEMM)
    counts = jax.ops.segment_sum(jnp.ones(n, dtype), labels, C)
    means = jax.ops.segment_sum(X, labels, C) / counts[:, None]
    xbar = priors @ means
    log_priors = jnp.log(priors)
    Xc = X - means[labels]  # class-centred rows
    # within-class scatter of the standardised, class-centred data, scaled so that
    # its squared singular values are the pooled (ddof=0) within-class variances,
    # as the eigen solver's covariance with empirical priors
    std = jnp.sqrt(jnp.mean(Xc * Xc, axis=0))
    std = jnp.where(std > 0, std, 1.0)
    factor = 1.0 / n
    Xs = Xc / std * jnp.sqrt(factor)
    if n >= d:
        w, V = eigh_unordered(Xs.T @ Xs)
        S = jnp.sqrt(jnp.maximum(w, 0.0))
    else:
        _, S, Vt = jnp.linalg.svd(Xs, full_matrices=False)
        V = Vt.T
    keep = S > tol
    whiten = jnp.where(keep, 1.0 / jnp.where(keep, S, 1.0), 0.0)
    sphere = (V / std[:, None]) * whiten[None, :]  # (d, r), zero columns dropped
    between_factor = 1.0 / max(C - 1, 1)
    centroids = (jnp.sqrt(n * priors * between_factor)[:, None] * (means - xbar)) @ sphere
    _, S2, Vt2 = jnp.linalg.svd(centroids, full_matrices=False)
    rank = jnp.sum(S2 > tol * S2[0])
    scalings = sphere @ Vt2.T  # (d, min(C, r))
    scalings = scalings * (jnp.arange(scalings.shape[1]) < rank)[None, :]
    scalings = flip_signs_by_largest(scalings, axis=0)[0]
    eigenvalues = S2 * S2
    coef_reduced = (means - xbar) @ scalings
    coef = coef_reduced @ scalings.T
    intercept = -0.5 * jnp.sum(coef_reduced**2, axis=1) + log_priors - xbar @ coef.T
    covariance = (
        _within_covariance(X, means, counts, priors, labels)
        if store_covariance
        else jnp.zeros((d, d), dtype)
    )
    return LDAFit(
        means,
        xbar,
        scalings,
        eigenvalues,
        rank,
        coef,
        intercept,
        covariance,
        jnp.sum(keep),
        jnp.asarray(True),
    )


@program(static_argnames=("solver", "shrinkage_mode"))
def fit_lda_classes(
    means,
    counts,
    covariances,
    fourth,
    total_fourth,
    priors,
    shrinkage,
    *,
    solver: str,
    shrinkage_mode: str,
):
    """The "eigen" or "lsqr" fit from :func:`class_moments`: every class covariance
    shrunk by itself (``shrinkage_mode="auto"``: its own Ledoit-Wolf alpha from
    ``fourth``) and weighted by the priors, as scikit-learn does."""
    shrunk = jax.vmap(lambda S, f, c: _shrink(S, f, c, shrinkage_mode, shrinkage))(
        covariances, fourth, counts
    )
    Sw = jnp.tensordot(priors, shrunk, axes=1)
    pooled = jnp.tensordot(counts / jnp.sum(counts), covariances, axes=1)
    return _discriminants(
        means, counts, priors, pooled, Sw, total_fourth, shrinkage, solver, shrinkage_mode
    )


@program(static_argnames=("solver", "shrinkage_mode"))
def fit_lda_pooled(means, counts, pooled, priors, shrinkage, *, solver: str, shrinkage_mode: str):
    """The "eigen" or "lsqr" fit from :func:`pooled_moments`' class means, counts and
    pooled within-class scatter, for priors equal to ``counts / n`` and
    ``shrinkage_mode`` "none" or "fixed" (a fixed shrinkage of every class covariance
    adds up to the same shrinkage of the pooled one: ``sum_k pi_k tr(S_k) = tr(pooled)``
    when ``pi_k = n_k / n``)."""
    if shrinkage_mode not in ("none", "fixed") or solver not in ("eigen", "lsqr"):
        raise ValueError("fit_lda_pooled takes solver 'eigen'/'lsqr' without 'auto' shrinkage")
    Sw = _shrink(pooled, None, None, shrinkage_mode, shrinkage)
    return _discriminants(
        means, counts, priors, pooled, Sw, None, shrinkage, solver, shrinkage_mode
    )


def _total_covariance(pooled, means, counts):
    """Total (ddof=0) covariance: within plus between, with the empirical class weights."""
    weights = counts / jnp.sum(counts)
    spread = means - weights @ means
    St = pooled + (spread * weights[:, None]).T @ spread
    return 0.5 * (St + St.T)


@program(static_argnames=("solver",))
def fit_lda_covariances(means, counts, Sw, St, priors, *, solver: str):
    """The "eigen" or "lsqr" fit from given covariances: ``Sw`` the prior-weighted
    within-class covariance and, for "eigen", ``St`` the total covariance (both from a
    user's covariance estimator, as scikit-learn's ``covariance_estimator``)."""
    return _discriminants(means, counts, priors, None, Sw, None, 0.0, solver, "none", St=St)


def _discriminants(
    means, counts, priors, pooled, Sw, fourth_total, shrinkage, solver, shrinkage_mode, St=None
) -> LDAFit:
    """The "lsqr" classifier or the "eigen" directions from the (shrunk) within-class
    covariance Sw; ``pooled`` (unshrunk) and ``fourth_total`` feed the total
    covariance that "eigen" shrinks as scikit-learn does, unless ``St`` gives it."""
    d = means.shape[1]
    dtype = means.dtype
    xbar = priors @ means
    log_priors = jnp.log(priors)
    if solver == "lsqr":
        coef = jnp.linalg.lstsq(Sw, means.T)[0].T
        coef, intercept = _classifier(means, log_priors, coef)
        zeros = jnp.zeros((d, 0), dtype=dtype)
        return LDAFit(
            means,
            xbar,
            zeros,
            jnp.zeros((0,), dtype),
            jnp.asarray(0),
            coef,
            intercept,
            Sw,
            jnp.asarray(d),
            jnp.asarray(True),
        )

    # "eigen": S_b w = lambda S_w w with S_b = S_t - S_w, by Cholesky S_w = L L^T
    if St is None:
        St = _shrink(
            _total_covariance(pooled, means, counts),
            fourth_total,
            jnp.sum(counts),
            shrinkage_mode,
            shrinkage,
        )
    Sb = St - Sw
    L = jax.lax.linalg.cholesky(Sw)
    # singular S_w: Cholesky fails (NaN) or, as round-off goes, leaves a pivot of the
    # size of round-off, which would make every coefficient noise
    pivots = jnp.diag(L) ** 2
    floor = 10.0 * d * jnp.finfo(dtype).eps * jnp.max(jnp.diag(Sw))
    ok = jnp.all(jnp.isfinite(L)) & jnp.all(pivots > floor)
    A = jax.lax.linalg.triangular_solve(L, Sb, left_side=True, lower=True)
    A = jax.lax.linalg.triangular_solve(L, A, left_side=False, lower=True, transpose_a=True)
    eigenvalues, U = eigh_descending(A)
    # w = L^{-T} u: unit Sw-norm directions, as scipy.linalg.eigh(Sb, Sw) returns them
    scalings = jax.lax.linalg.triangular_solve(L, U, left_side=True, lower=True, transpose_a=True)
    scalings = flip_signs_by_largest(scalings, axis=0)[0]
    coef = (means @ scalings) @ scalings.T
    coef, intercept = _classifier(means, log_priors, coef)
    return LDAFit(
        means,
        xbar,
        scalings,
        eigenvalues,
        jnp.asarray(d),
        coef,
        intercept,
        Sw,
        jnp.asarray(d),
        ok,
    )


def _within_covariance(X, means, counts, priors, labels):
    """``sum_k pi_k Sigma_k`` (ddof=0): one weighted pass over the class-centred rows."""
    Xc = X - means[labels]
    row_weight = (priors / counts)[labels]
    S = (Xc * row_weight[:, None]).T @ Xc
    return 0.5 * (S + S.T)


@program
def lda_decision(X, coef, intercept):
    """Linear discriminant scores ``X coef^T + intercept``."""
    return X @ coef.T + intercept


@program
def lda_transform(X, xbar, scalings):
    """Coordinates along the discriminant directions, ``(X - xbar) scalings``."""
    return (X - xbar) @ scalings
