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
from latentlab.inference.programs import program

__all__ = [
    "LDAFit",
    "fit_lda",
    "class_row_index",
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


def _fourth_moment(Zc, S):
    """``sum_n ||z_n / scale||^4`` over the rows of Zc (..., d), scale from S."""
    norms = jnp.sum((Zc / _scale(S)) ** 2, axis=-1)
    return jnp.sum(norms * norms)


def class_row_index(labels, n_classes: int):
    """(n_classes, max class count) array of each class's row indices, padded with
    ``len(labels)``: a layout for batched per-class products.  NumPy, on the host."""
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=n_classes)
    index = np.full((n_classes, max(int(counts.max()), 1)), len(labels), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for k in range(n_classes):
        index[k, : counts[k]] = order[starts[k] : starts[k] + counts[k]]
    return index


def _classifier(means, log_priors, coef):
    intercept = -0.5 * jnp.sum(means * coef, axis=1) + log_priors
    return coef, intercept


# The pooled scatter from the raw Gram ``X^T X - sum_k n_k m_k m_k^T`` loses about
# log10 of this ratio (raw second moment over within-class variance, per feature) in
# digits to cancellation; above it the class-centred product is used instead.
_MAX_CANCELLATION = 1e3


def _pooled_scatter(X, labels, means, counts, with_traces: bool):
    """``sum_k (n_k / n) S_k`` (S_k the ddof=0 class covariances) and, if asked, every
    ``tr(S_k)``, in one pass over X: the Gram ``X^T X`` less the class means' part.

    X is read once by the product (the class sums behind ``means`` are the caller's);
    when the features' means are large next to their within-class spread the
    difference cancels, and the class-centred product (one more pass) is taken.
    """
    n, d = X.shape
    raw = X.T @ X
    weighted_means = means * counts[:, None]
    scatter = (raw - weighted_means.T @ means) / n
    scatter = 0.5 * (scatter + scatter.T)
    within = jnp.diag(scatter)
    second = jnp.diag(raw) / n
    accurate = jnp.all(within > 0) & jnp.all(second <= _MAX_CANCELLATION * within)

    def traces_of(row_sq_norms, centred):
        if not with_traces:
            return jnp.zeros(counts.shape, X.dtype)
        per_class = jax.ops.segment_sum(row_sq_norms, labels, counts.shape[0]) / counts
        return per_class if centred else per_class - jnp.sum(means * means, axis=1)

    def from_gram(_):
        return scatter, traces_of(jnp.sum(X * X, axis=1) if with_traces else None, False)

    def from_centred(_):
        Xc = X - means[labels]
        S = Xc.T @ Xc / n
        return 0.5 * (S + S.T), traces_of(jnp.sum(Xc * Xc, axis=1) if with_traces else None, True)

    return jax.lax.cond(accurate, from_gram, from_centred, None)


@program(static_argnames=("n_classes", "solver", "shrinkage_mode", "store_covariance", "per_class"))
def fit_lda(
    X,
    labels,
    class_rows,
    priors,
    shrinkage,
    tol,
    *,
    n_classes: int,
    solver: str,
    shrinkage_mode: str,
    store_covariance: bool = True,
    per_class: bool = True,
) -> LDAFit:
    """Fit LDA to X (n, d) with integer labels in ``[0, n_classes)`` and class priors.

    ``class_rows`` (n_classes, m): the row indices of each class, padded with n (see
    :func:`class_row_index`); read by "eigen" and "lsqr" with ``per_class`` only.
    ``per_class``: form every class covariance (needed by ``shrinkage_mode="auto"``,
    which shrinks each by its own Ledoit-Wolf alpha, and by priors other than the class
    frequencies); without it ("eigen"/"lsqr", priors equal to ``counts / n``) the
    pooled within-class scatter comes from one Gram matrix of X.

    ``shrinkage`` (the float alpha) is read for ``shrinkage_mode="fixed"`` only;
    ``tol`` is the ``"svd"`` solver's rank threshold on the standardised within-class
    singular values.  ``store_covariance=False`` skips the within-class covariance of
    the ``"svd"`` solver (zeros are returned), which it does not need.  Every class
    must occur in ``labels`` (the caller checks).
    """
    n, d = X.shape
    C = n_classes
    dtype = X.dtype
    # class sums by a scatter-add: one read of X (a one-hot product costs a C-wide GEMM)
    counts = jax.ops.segment_sum(jnp.ones(n, dtype), labels, C)
    means = jax.ops.segment_sum(X, labels, C) / counts[:, None]
    xbar = priors @ means
    log_priors = jnp.log(priors)

    if solver == "svd":
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

    weights = counts / n
    if per_class:
        # class covariances in one batched product over the rows grouped by class
        # (``class_rows``: row indices per class, padded with n), not one pass per class
        grouped = jnp.take(X, class_rows, axis=0, mode="fill", fill_value=0.0)
        valid = (class_rows < n)[..., None]
        grouped = jnp.where(valid, grouped - means[:, None, :], 0.0)
        S_k = jnp.einsum("cmi,cmj->cij", grouped, grouped) / counts[:, None, None]
        S_k = 0.5 * (S_k + jnp.swapaxes(S_k, 1, 2))
        if shrinkage_mode == "auto":
            fourth = jax.vmap(_fourth_moment)(grouped, S_k)
        else:
            fourth = jnp.zeros(C, dtype)
        shrunk = jax.vmap(lambda S, f, c: _shrink(S, f, c, shrinkage_mode, shrinkage))(
            S_k, fourth, counts
        )
        Sw = jnp.tensordot(priors, shrunk, axes=1)
        pooled = jnp.tensordot(weights, S_k, axes=1)
    else:
        # priors = weights: sum_k pi_k S_k is the pooled scatter, and a fixed shrinkage
        # of every S_k adds up to (1 - a) pooled + a sum_k pi_k tr(S_k) / d I
        pooled, traces = _pooled_scatter(X, labels, means, counts, shrinkage_mode == "fixed")
        Sw = pooled
        if shrinkage_mode == "fixed":
            target = (priors @ traces) / d * jnp.eye(d, dtype=dtype)
            Sw = (1.0 - shrinkage) * pooled + shrinkage * target
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
    # total covariance = within + between, both with the empirical class weights
    total_mean = weights @ means
    spread = means - total_mean
    St = pooled + (spread * weights[:, None]).T @ spread
    St = 0.5 * (St + St.T)
    fourth_total = (
        _fourth_moment(X - total_mean, St) if shrinkage_mode == "auto" else jnp.zeros((), dtype)
    )
    St = _shrink(St, fourth_total, n, shrinkage_mode, shrinkage)
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
