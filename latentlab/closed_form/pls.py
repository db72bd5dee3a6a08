"""Partial least squares (Wold 1975; Wegelin 2000): NIPALS with deflation, and PLS-SVD.

Component k takes the first singular pair (w, c) of the deflated cross-covariance
``X_k^T Y_k`` -- by power iteration ("nipals") or a full SVD ("svd") -- with scores
``t = X_k w``, ``u = Y_k c / c^T c``, then removes the rank-one part of each view:
``X_{k+1} = X_k - t p^T`` with loadings ``p = X_k^T t / t^T t``, and either
``Y_{k+1} = Y_k - t q^T`` (regression, PLS2) or ``Y_{k+1} = Y_k - u q^T`` (canonical).

Everything X-sided runs on the p x p covariance: ``X_k^T X_k`` deflates to
``X_k^T X_k - (t^T t) p p^T`` (because ``X_k^T t = (t^T t) p``), and the power
iteration only needs ``X_k^T X_k`` and ``X_k^T Y_k``.  So the rows of X are read once
for ``X^T X`` and once per component for ``X^T Y_k`` and the scores, instead of twice
per power iteration.  Y_k (n x q, q small) is kept explicitly: the thresholds that decide
when a target's residual counts as zero act on its entries, as scikit-learn's do.

PLS-SVD is one SVD of ``X^T Y`` without deflation; with CCA's notation it is the
``reg -> inf`` end of :func:`latentlab.closed_form.cca.fit_cca`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from latentlab.closed_form.cca import _orient, _safe_divide, _standardise
from latentlab.inference.programs import program

__all__ = ["PLSFit", "PLSSVDFit", "fit_pls", "fit_pls_svd"]


class PLSFit(NamedTuple):
    x_mean: jax.Array  # (p,) round-off left by the caller's centring
    x_scale: jax.Array  # (p,) column standard deviations (ones when not scaling)
    y_mean: jax.Array  # (q,)
    y_scale: jax.Array  # (q,)
    x_weights: jax.Array  # (p, k) unit vectors on the deflated, scaled X
    y_weights: jax.Array  # (q, k)
    x_loadings: jax.Array  # (p, k)
    y_loadings: jax.Array  # (q, k)
    x_scores: jax.Array  # (n, k)
    y_scores: jax.Array  # (n, k)
    x_rotations: jax.Array  # (p, k): x_scores = X_scaled @ x_rotations
    y_rotations: jax.Array  # (q, k)
    coef: jax.Array  # (q, p) on the caller's (centred, unscaled) X and Y
    n_iter: jax.Array  # (k,) power iterations per component (0 for "svd")
    n_fitted: jax.Array  # components found before Y's residual became zero


class PLSSVDFit(NamedTuple):
    x_mean: jax.Array
    x_scale: jax.Array
    y_mean: jax.Array
    y_scale: jax.Array
    x_weights: jax.Array  # (p, min(p, q)) left singular vectors of X_s^T Y_s
    y_weights: jax.Array  # (q, min(p, q))
    singular_values: jax.Array


def _power_iteration(Sxx, Sxy, Syy, start, tol, max_iter, stopped, normalise_y: bool):
    """First singular pair of ``X_k^T Y_k`` by the NIPALS alternation, in covariances.

    The y score is carried as coefficients b on Y_k's columns (``u = Y_k b``), starting
    at the first target whose residual is not zero, so that each step is
    ``w = X^T u / u^T u = Sxy b / b^T Syy b`` and ``c = Y^T t / t^T t = Sxy^T w /
    w^T Sxx w``.  The ``eps`` guards are where scikit-learn puts them, so the iterates
    are the same numbers.  Stops when ``|w - w_old|^2 < tol``, after one step for a
    single target (then it is exact), or at ``max_iter``.
    """
    eps = jnp.finfo(Sxx.dtype).eps
    p, q = Sxy.shape

    def step(state):
        i, b, _, _, w_old, _ = state
        w = Sxy @ b / (b @ Syy @ b)
        w = w / (jnp.sqrt(w @ w) + eps)
        c = Sxy.T @ w / (w @ Sxx @ w)
        if normalise_y:
            c = c / (jnp.sqrt(c @ c) + eps)
        b = c / (c @ c + eps)
        diff = w - w_old
        done = (diff @ diff < tol) | (q == 1)
        return i + 1, b, w, c, w, done

    def not_done(state):
        i, *_, done = state
        return (i < max_iter) & ~done

    zeros_p, zeros_q = jnp.zeros(p, Sxx.dtype), jnp.zeros(q, Sxx.dtype)
    init = (jnp.asarray(0), start, zeros_p, zeros_q, jnp.full(p, 100.0, Sxx.dtype), stopped)
    n_iter, _, w, c, _, _ = lax.while_loop(not_done, step, init)
    return w, c, n_iter


@program(static_argnames=("n_components", "deflation", "algorithm", "scale"))
def fit_pls(
    X, Y, tol, max_iter, *, n_components: int, deflation: str, algorithm: str, scale: bool
) -> PLSFit:
    """PLS on X (n, p) and Y (n, q), both centred by the caller, ddof=1 scaling.

    ``deflation="regression"`` is PLS2 (scikit-learn's ``PLSRegression``), with y weights
    left unnormalised; ``"canonical"`` deflates Y on its own scores and normalises the y
    weights (``PLSCanonical``).  ``algorithm`` is "nipals" (power iteration with
    ``tol``/``max_iter``) or "svd".  A component whose Y residual is zero (every entry
    below machine epsilon) ends the fit: it and the later ones are left at zero, and
    ``n_fitted`` says how many were found.
    """
    n, p = X.shape
    q = Y.shape[1]
    K = n_components
    dtype = X.dtype
    eps = jnp.finfo(dtype).eps
    Xs, x_mean, x_scale = _standardise(X, scale)
    Ys, y_mean, y_scale = _standardise(Y, scale)
    canonical = deflation == "canonical"
    zeros = lambda *shape: jnp.zeros(shape, dtype)  # noqa: E731

    def component(k, state):
        Sxx, Yk, W, C, P, Q, T, U, n_iter, stopped = state
        if algorithm == "nipals":
            # targets whose residual is round-off are set to exactly zero
            Yk = jnp.where(jnp.all(jnp.abs(Yk) < 10 * eps, axis=0), 0.0, Yk)
            live = jnp.any(jnp.abs(Yk) > eps, axis=0)
            stopped = stopped | ~jnp.any(live)
        # X_k^T Y_k with X_k = X_s - T P^T (not-yet-found columns of T, P are zero)
        Sxy = Xs.T @ Yk - P @ (T.T @ Yk)
        if algorithm == "nipals":
            start = jax.nn.one_hot(jnp.argmax(live), q, dtype=dtype)
            w, c, iterations = _power_iteration(
                Sxx, Sxy, Yk.T @ Yk, start, tol, max_iter, stopped, canonical
            )
        else:
            A, _, Bt = jnp.linalg.svd(Sxy, full_matrices=False)
            w, c, iterations = A[:, 0], Bt[0], jnp.asarray(0)
        # sign: the largest-magnitude x weight is positive (scikit-learn's svd_flip)
        sign = jnp.sign(w[jnp.argmax(jnp.abs(w))])
        w = jnp.where(stopped, 0.0, w * sign)
        c = jnp.where(stopped, 0.0, c * sign)
        t = Xs @ w - T @ (P.T @ w)
        u = _safe_divide(Yk @ c, 1.0 if canonical else c @ c)
        tt = t @ t
        loading_x = _safe_divide(Sxx @ w, tt)  # X_k^T t / t^T t, as X_k^T t = Sxx w
        Sxx = Sxx - tt * jnp.outer(loading_x, loading_x)
        deflator = u if canonical else t
        loading_y = _safe_divide(Yk.T @ deflator, deflator @ deflator)
        Yk = Yk - jnp.outer(deflator, loading_y)
        put = lambda M, v: M.at[:, k].set(v)  # noqa: E731
        return (
            Sxx,
            Yk,
            put(W, w),
            put(C, c),
            put(P, loading_x),
            put(Q, loading_y),
            put(T, t),
            put(U, u),
            n_iter.at[k].set(iterations),
            stopped,
        )

    init = (
        Xs.T @ Xs,
        Ys,
        zeros(p, K),
        zeros(q, K),
        zeros(p, K),
        zeros(q, K),
        zeros(n, K),
        zeros(n, K),
        jnp.zeros(K, jnp.int32),
        jnp.asarray(False),
    )
    _, _, W, C, P, Q, T, U, n_iter, _ = lax.fori_loop(0, K, component, init)
    n_fitted = jnp.sum(jnp.any(W != 0, axis=0))
    # T = X_s R with R = W (P^T W)^+ (Wegelin 2000); pinv cut-off as scipy.linalg.pinv
    rtol = K * eps
    x_rotations = W @ jnp.linalg.pinv(P.T @ W, rtol=rtol)
    y_rotations = C @ jnp.linalg.pinv(Q.T @ C, rtol=rtol)
    coef = ((x_rotations @ Q.T) * y_scale).T / x_scale
    return PLSFit(
        x_mean=x_mean,
        x_scale=x_scale,
        y_mean=y_mean,
        y_scale=y_scale,
        x_weights=W,
        y_weights=C,
        x_loadings=P,
        y_loadings=Q,
        x_scores=T,
        y_scores=U,
        x_rotations=x_rotations,
        y_rotations=y_rotations,
        coef=coef,
        n_iter=n_iter,
        n_fitted=n_fitted,
    )


@program(static_argnames=("scale",))
def fit_pls_svd(X, Y, *, scale: bool) -> PLSSVDFit:
    """PLS-SVD: the singular vectors of the scaled cross-product ``X_s^T Y_s``, all
    ``min(p, q)`` pairs, largest first, the largest-magnitude x weight of each positive."""
    k = min(X.shape[1], Y.shape[1])
    Xs, x_mean, x_scale = _standardise(X, scale)
    Ys, y_mean, y_scale = _standardise(Y, scale)
    A, s, Bt = jnp.linalg.svd(Xs.T @ Ys, full_matrices=False)
    x_weights, y_weights = _orient(A[:, :k], Bt[:k].T)
    return PLSSVDFit(x_mean, x_scale, y_mean, y_scale, x_weights, y_weights, s[:k])
