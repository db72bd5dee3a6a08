"""FastICA (Hyvärinen & Oja 2000) as one jit-compiled program per fit.

The data are PCA-whitened (:func:`latentlab.closed_form.whitening.principal_whitening`),
so the unmixing matrix W of the whitened data is orthogonal, and W is found by the
fixed-point iteration on a contrast G with derivative g (Hyvärinen, Karhunen & Oja 2001,
Tables 8.3 and 8.4, eq. 8.43):

    w <- E[z g(w^T z)] - E[g'(w^T z)] w

``parallel``: all rows at once, then symmetric decorrelation ``W <- (W W^T)^{-1/2} W``;
``deflation``: one row at a time, Gram-Schmidt against the rows already found, then
normalised.  Both stop when ``max_i | |<w_i, w_i^old>| - 1 |`` falls below ``tol``.
The expectations stream the data in blocks small enough to stay in cache
(:func:`fixed_point_terms`): when the whitening keeps every dimension (k = d) the
iteration runs on X's own rows (:func:`row_blocks`; ``W z = (W M^T)(x - mean)``), so no
whitened copy is written; otherwise on the whitened data in column blocks
(:func:`column_blocks`).

Conventions follow scikit-learn's ``FastICA`` so that, from the same ``w_init``, the
results are scikit-learn's: the whitened data are ``sqrt(n) K Xc^T`` with ``K`` the
principal axes over the (ddof=0) singular values, each axis signed so that its first
entry is positive; ``whitening_ = K``; ``components_ = W K``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from latentlab import _shapes
from latentlab.closed_form._linalg import eigh_descending
from latentlab.closed_form.pca import scatter_about_mean
from latentlab.closed_form.whitening import principal_whitening
from latentlab.inference.programs import program

__all__ = [
    "Blocks",
    "CONTRASTS",
    "RowBlocks",
    "ICAFit",
    "block_sums",
    "column_blocks",
    "contrast",
    "fixed_point_terms",
    "fastica",
    "host_contrast",
    "row_blocks",
    "ica_deflation",
    "ica_parallel",
    "symmetric_decorrelation",
]


class ICAFit(NamedTuple):
    components: jax.Array  # (k, d) unmixing of the data: sources = (X - mean) @ components^T
    mixing: jax.Array  # (d, k) pseudo-inverse of components
    mean: jax.Array  # (d,) column means (zeros without whitening)
    whitening: jax.Array  # (k, d) K (identity without whitening)
    unmixing: jax.Array  # (k, k) W, the rotation of the whitened data
    n_iter: jax.Array  # () iterations (the most any component needed, for deflation)
    converged: jax.Array  # () bool: every component reached tol
    # () bool, whiten_solver="eigh": the scatter has eigenvalues at its round-off level
    small_singular_values: jax.Array


# g and E[g'] over the last axis, for G(u) = log cosh(alpha u) / alpha, -exp(-u^2/2), u^4/4
def _logcosh(u, fun_args):
    alpha = fun_args.get("alpha", 1.0)
    gu = jnp.tanh(alpha * u)
    return gu, jnp.mean(alpha * (1.0 - gu * gu), axis=-1)


def _exp(u, fun_args):
    e = jnp.exp(-0.5 * u * u)
    return u * e, jnp.mean((1.0 - u * u) * e, axis=-1)


def _cube(u, fun_args):
    return u**3, jnp.mean(3.0 * u * u, axis=-1)


CONTRASTS = {"logcosh": _logcosh, "exp": _exp, "cube": _cube}


def contrast(fun: str | Callable) -> Callable:
    """``g(u, fun_args) -> (g(u), mean of g'(u) over the last axis)`` for a named contrast
    or a user function ``fun(u, **fun_args)`` (scikit-learn's signature; it must be
    JAX-traceable).  A user function may return g' per element; it is then averaged."""
    if not callable(fun):
        return CONTRASTS[fun]

    def g(u, fun_args):
        gu, dg = fun(u, **fun_args)
        dg = jnp.asarray(dg)
        return gu, (jnp.mean(dg, axis=-1) if dg.shape == u.shape else dg)

    return g


def host_contrast(fun: Callable, fun_args: dict) -> Callable:
    """A user contrast written with NumPy (not JAX-traceable) as a traceable one with
    the same signature, for :func:`contrast`: ``fun`` runs on the host through
    ``jax.pure_callback`` with the given concrete ``fun_args`` (the traced ones are
    ignored).  The output shapes are found by calling ``fun`` on zeros of the input's
    shape once, at trace time."""
    import numpy as np

    def host(u):
        gu, dg = fun(np.asarray(u), **fun_args)
        return np.asarray(gu, dtype=u.dtype), np.asarray(dg, dtype=u.dtype)

    def wrapped(u, **_traced_args):
        gu, dg = host(np.zeros(u.shape, u.dtype))
        shapes = (jax.ShapeDtypeStruct(gu.shape, u.dtype), jax.ShapeDtypeStruct(dg.shape, u.dtype))
        return jax.pure_callback(host, shapes, u, vmap_method="sequential")

    return wrapped


def symmetric_decorrelation(W):
    """``(W W^T)^{-1/2} W``: the orthogonal matrix nearest to W."""
    s, U = jnp.linalg.eigh(W @ W.T)
    # round-off can make s slightly negative; tiny keeps 1/sqrt finite
    s = jnp.maximum(s, jnp.finfo(W.dtype).tiny)
    return (U / jnp.sqrt(s)) @ (U.T @ W)


class Blocks(NamedTuple):
    """Whitened data (k, n) as ``main`` (n_blocks, k, block) plus ``tail`` (k, rest)."""

    main: jax.Array
    tail: jax.Array

    @property
    def n(self):
        return self.main.shape[0] * self.main.shape[2] + self.tail.shape[1]


def column_blocks(X, M=None, shift=None) -> Blocks:
    """``(X @ M - shift)^T`` (default ``X^T``) cut into column blocks of about
    ``_shapes.BLOCK_ELEMENTS / k`` columns, computed block by block (no transposed copy of X)."""
    n, d = X.shape
    k = d if M is None else M.shape[1]
    block = max(min(_shapes.BLOCK_ELEMENTS // k, n), 1)
    n_main = n // block * block
    rows = X[:n_main].reshape(-1, block, d)
    if M is None:
        return Blocks(jnp.transpose(rows, (0, 2, 1)), X[n_main:].T)
    main = jnp.einsum("dk,jbd->jkb", M, rows) - shift[None, :, None]
    return Blocks(main, (X[n_main:] @ M).T - shift[:, None])


class RowBlocks(NamedTuple):
    """The data through a change of basis, ``z = basis^T (x - mean)``, held as X's own
    rows (n, d), read about ``_shapes.BLOCK_ELEMENTS / d`` rows at a time (no copy of X).
    ``mean`` None: not centred; ``basis`` None: the identity."""

    X: jax.Array
    mean: jax.Array | None = None
    basis: jax.Array | None = None

    @property
    def n(self):
        return self.X.shape[0]


def row_blocks(X, mean=None, basis=None) -> RowBlocks:
    """X (n, d) read in blocks of rows, centred by ``mean`` and mapped by ``basis``."""
    return RowBlocks(X, mean, basis)


def block_sums(fn, blocks: Blocks | RowBlocks, init):
    """``sum over blocks of fn(block)`` (a pytree), a scan over the main blocks; a
    block is (k, columns) for :class:`Blocks`, (rows, d) for :class:`RowBlocks`."""

    def add(total, block):
        return jax.tree_util.tree_map(jnp.add, total, fn(block)), None

    if isinstance(blocks, RowBlocks):
        # blocks sliced from X in the loop: X[:n_main].reshape(...) would copy X
        X = blocks.X
        size = max(min(_shapes.BLOCK_ELEMENTS // X.shape[1], X.shape[0]), 1)
        n_main = X.shape[0] // size * size

        def add_rows(total, start):
            return add(total, jax.lax.dynamic_slice_in_dim(X, start, size, axis=0))[0], None

        total, _ = jax.lax.scan(add_rows, init, jnp.arange(0, n_main, size))
        tail = X[n_main:]
    else:
        total, _ = jax.lax.scan(add, init, blocks.main)
        tail = blocks.tail
    if tail.size:
        total, _ = add(total, tail)
    return total


def fixed_point_terms(W, blocks: Blocks | RowBlocks, g, fun_args):
    """``E[g(W z) z^T]`` (r, k) and ``E[g'(W z)]`` (r,) over the data z of the blocks."""
    r, k = W.shape
    if isinstance(blocks, Blocks):

        def terms(Zt):
            gu, dg = g(W @ Zt, fun_args)
            return gu @ Zt.T, dg * Zt.shape[1]  # dg is a mean over the block

        init = (jnp.zeros((r, k), W.dtype), jnp.zeros((r,), W.dtype))
        Egz, Edg = block_sums(terms, blocks, init)
        return Egz / blocks.n, Edg / blocks.n

    # rows of X: W z = V (x - mean) with V = W basis^T, and E[g z^T] = E[g (x - mean)^T] basis
    V = W if blocks.basis is None else W @ blocks.basis.T

    def row_terms(rows):
        if blocks.mean is not None:
            rows = rows - blocks.mean  # a block in cache, not a centred copy of X
        gu, dg = g(V @ rows.T, fun_args)
        return gu @ rows, dg * rows.shape[0]

    init = (jnp.zeros((r, V.shape[1]), W.dtype), jnp.zeros((r,), W.dtype))
    Egx, Edg = block_sums(row_terms, blocks, init)
    Egz = Egx if blocks.basis is None else Egx @ blocks.basis
    return Egz / blocks.n, Edg / blocks.n


def ica_parallel(blocks, w_init, g, fun_args, max_iter, tol):
    """Parallel FastICA on whitened data (column blocks of (k, n)); returns
    (W, n_iter, converged)."""

    def body(state):
        W, it, _ = state
        Egz, Edg = fixed_point_terms(W, blocks, g, fun_args)
        W1 = symmetric_decorrelation(Egz - Edg[:, None] * W)
        lim = jnp.max(jnp.abs(jnp.abs(jnp.sum(W1 * W, axis=1)) - 1.0))
        return W1, it + 1, lim

    def running(state):
        _, it, lim = state
        return (it < max_iter) & ~(lim < tol)  # NaN keeps running, as in scikit-learn

    dtype = w_init.dtype
    start = (symmetric_decorrelation(w_init), jnp.zeros((), jnp.int32), jnp.asarray(jnp.inf, dtype))
    W, n_iter, lim = jax.lax.while_loop(running, body, start)
    return W, n_iter, lim < tol


def ica_deflation(blocks, w_init, g, fun_args, max_iter, tol):
    """Deflation FastICA on whitened data (column blocks of (k, n)): a scan over the
    rows, each an inner fixed-point loop; returns (W, most iterations of any row, all
    converged)."""
    dtype = w_init.dtype

    def one_row(W, w0):
        def body(state):
            w, it, _ = state
            Egz, Edg = fixed_point_terms(w[None, :], blocks, g, fun_args)
            w1 = Egz[0] - Edg[0] * w
            # rows not found yet are zero, so this is Gram-Schmidt against the found ones
            w1 = w1 - (w1 @ W.T) @ W
            w1 = w1 / jnp.sqrt(jnp.sum(w1 * w1))
            lim = jnp.abs(jnp.abs(jnp.sum(w1 * w)) - 1.0)
            return w1, it + 1, lim

        def running(state):
            _, it, lim = state
            return (it < max_iter) & ~(lim < tol)

        start = (
            w0 / jnp.sqrt(jnp.sum(w0 * w0)),
            jnp.zeros((), jnp.int32),
            jnp.asarray(jnp.inf, dtype),
        )
        w, it, lim = jax.lax.while_loop(running, body, start)
        return W, (w, it, lim < tol)

    k = w_init.shape[0]
    found = jnp.zeros((k, k), dtype)

    def step(W, xs):
        j, w0 = xs
        W, (w, it, ok) = one_row(W, w0)
        return W.at[j].set(w), (it, ok)

    W, (its, oks) = jax.lax.scan(step, found, (jnp.arange(k), w_init))
    return W, jnp.max(its), jnp.all(oks)


@program(static_argnames=("n_components", "algorithm", "whiten", "fun", "whiten_solver"))
def fastica(
    X,
    w_init,
    fun_args,
    max_iter,
    tol,
    *,
    n_components: int,
    algorithm: str = "parallel",
    whiten: str | bool = "unit-variance",
    fun: str | Callable = "logcosh",
    whiten_solver: str = "svd",
) -> ICAFit:
    """FastICA of X (n, d) from ``w_init`` (k, k); one compiled program.

    ``whiten``: "unit-variance" (sources rescaled to unit variance), "arbitrary-variance"
    or False (X is used as it is: not centred, k = d).  ``fun_args`` is a dict of
    numbers passed to the contrast (``alpha`` for logcosh); ``max_iter`` and ``tol`` are
    traced, so changing them does not recompile.

    ``small_singular_values`` (``whiten_solver="eigh"``): some eigenvalue of the
    centred scatter ``Xc^T Xc`` is below ``d eps`` times the largest, the accuracy of
    its eigendecomposition; the singular values of Xc there (their square roots) are
    round-off, and the SVD of Xc would resolve them (scikit-learn warns on the same
    condition, with an absolute threshold ``10 eps``).
    """
    n, d = X.shape
    g = contrast(fun)
    small_singular_values = jnp.asarray(False)
    if whiten:
        white = principal_whitening(X, n_components, solver=whiten_solver, ddof=0)
        if whiten_solver == "eigh":
            # the whitening's own scatter and eigh: XLA computes them once for both
            eigenvalues, _ = eigh_descending(scatter_about_mean(X)[1])
            floor = d * jnp.finfo(X.dtype).eps * jnp.maximum(eigenvalues[0], 0.0)
            small_singular_values = eigenvalues[-1] <= floor
        # scikit-learn's signs: the first entry of every principal axis positive
        signs = jnp.where(white.matrix[0] < 0, -1.0, 1.0).astype(X.dtype)
        matrix, mean = white.matrix * signs, white.mean
        if n_components == d:
            # a square whitening: the iterations read X itself (W z = W M^T (x - mean)),
            # the same products as on the whitened data, without writing it first
            blocks = row_blocks(X, mean, matrix)
        else:  # k < d: the whitened data (k, n) are smaller than X, so they are formed
            blocks = column_blocks(X, matrix, mean @ matrix)  # white.X^T, signed, in blocks
        K = matrix.T / jnp.sqrt(jnp.asarray(n, X.dtype))  # whitening_
    else:
        blocks, K, mean = row_blocks(X), jnp.eye(d, dtype=X.dtype), jnp.zeros((d,), X.dtype)
    iterate = ica_parallel if algorithm == "parallel" else ica_deflation
    W, n_iter, converged = iterate(blocks, w_init.astype(X.dtype), g, fun_args, max_iter, tol)
    if whiten == "unit-variance":
        # sources W K Xc^T = W Zt / sqrt(n): divide each row of W by its sources' std.
        # Zt has identity covariance (ddof=0) by construction of the whitening, so the
        # sources' variances are diag(W W^T): no pass over the data (scikit-learn makes
        # one; the two agree to the whitening's round-off, ~1e-13 relative).  Only axes
        # whose eigenvalue the whitening floored (rank-deficient X) have less variance:
        # there scikit-learn's data pass divides by round-off noise, this does not
        std = jnp.sqrt(jnp.sum(W * W, axis=1))
        W = W * (jnp.sqrt(jnp.asarray(n, X.dtype)) / std)[:, None]
    components = W @ K if whiten else W
    return ICAFit(
        components=components,
        mixing=jnp.linalg.pinv(components),
        mean=mean,
        whitening=K,
        unmixing=W,
        n_iter=n_iter,
        converged=converged,
        small_singular_values=small_singular_values,
    )
