"""One partial symmetric eigensolver for the spectral methods (Isomap, LLE, Laplacian
eigenmaps, spectral clustering): the top or bottom K eigenpairs of a symmetric matrix,
given as a dense array or as a ``matmat`` operator.

Two solvers, chosen by size on the host (:func:`eigen_settings`):

* ``"dense"``: full eigh (LAPACK through XLA; subset eigh is not offered by XLA on CPU
  or GPU), then the wanted end of the spectrum.  Exact, O(n^3).
* ``"lanczos"``: restarted block Lanczos,
  :func:`latentlab.closed_form.pca.block_lanczos_eigh`, which finds the *largest*
  eigenpairs.  The bottom end is found as the top end of ``shift I - A``: with
  ``shift >= lambda_max(A)`` the map ``lambda -> shift - lambda`` reverses the order of
  the spectrum and keeps every gap, and ``shift I - A`` is positive semi-definite, so
  the solver's stopping rule (residuals relative to its largest Ritz value) is relative
  to the width of A's spectrum.  For a dense array without a ``shift`` the Gershgorin
  bound ``max_i sum_j |A_ij|`` is used.  (A normalized Laplacian ``I - S`` needs no
  fold: its bottom pairs are the top pairs of S, which the callers pass instead.)

Lanczos converges quickly when the wanted eigenvalues are separated from the rest
relative to the spectrum's width (kernel / MDS spectra, affinity spectra of wide
kernels); when they are not (the bottom of LLE's ``(I - W)^T (I - W)``: eigenvalues
~1e-7 apart in a spectrum of width ~1) the fold converges slowly, and
``"shift_invert"`` (Cholesky of ``A - shift I`` once, then Lanczos on its inverse)
separates them.  An unconverged Lanczos run makes the caller fall back to
``"dense"`` (:func:`solve_with_fallback`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.closed_form._linalg import flip_signs_by_largest
from latentlab.closed_form.pca import block_lanczos_eigh

__all__ = [
    "PartialEigh",
    "partial_eigh",
    "eigen_settings",
    "solve_with_fallback",
    "LANCZOS_MIN_SAMPLES",
]

WHICH = ("top", "bottom")
SOLVERS = ("dense", "lanczos", "shift_invert")

# Below this many rows dense eigh is cheap next to compiling a Lanczos loop, and exact.
LANCZOS_MIN_SAMPLES = 500
_MAX_BLOCK = 16
_MIN_BLOCKS = 10
_MAX_BASIS = 400


class PartialEigh(NamedTuple):
    eigenvalues: jax.Array  # (k,) decreasing for "top", increasing for "bottom"
    eigenvectors: jax.Array  # (n, k) unit columns, largest-magnitude entry positive
    converged: jax.Array  # () bool; False only when "lanczos" missed its tolerance


def eigen_settings(n: int, n_components: int, solver: str = "auto", dtype=np.float64):
    """Host-side choice of solver: ``(solver, settings)`` for :func:`partial_eigh`.

    ``"auto"`` takes Lanczos when ``n > LANCZOS_MIN_SAMPLES`` and its Krylov basis fits
    (blocks of ``n_components + 6`` vectors between 8 and 16, a basis of at least 10
    blocks and at most 400 columns: the block sizes kernel PCA measured), else dense.
    ``settings`` holds ``block_size``, ``max_blocks``, ``max_products`` and ``tol``
    (every residual at most ``tol`` times the largest Ritz value: 1e-11 in float64).
    """
    if solver not in ("auto", *SOLVERS):
        raise ValueError(f"Unknown eigen_solver={solver!r}; expected 'auto', 'dense' or 'lanczos'")
    block = max(8, min(n_components + 6, _MAX_BLOCK))
    blocks = max(_MIN_BLOCKS, 2 * -(-(n_components + block) // block))
    blocks = min(blocks, _MAX_BASIS // block, n // block)
    fits = blocks >= 4 and block * (blocks // 2) > n_components
    if solver == "auto":
        solver = "lanczos" if n > LANCZOS_MIN_SAMPLES and fits else "dense"
    if solver == "lanczos" and not fits:
        solver = "dense"
    if solver == "dense":
        return "dense", {}
    tol = max(1e-11, 1e3 * float(np.finfo(dtype).eps))
    return "lanczos", dict(
        block_size=block, max_blocks=blocks, max_products=max(60, n // 10), tol=tol
    )


def _operator(A):
    """(matmat, n, dtype) of a dense array or an object with ``matmat``/``shape``/``dtype``."""
    if hasattr(A, "matmat"):
        return A.matmat, A.shape[0], A.dtype
    return (lambda M: A @ M), A.shape[0], A.dtype


def partial_eigh(
    A,
    key=None,
    *,
    n_components: int,
    which: str = "top",
    solver: str = "dense",
    shift=None,
    deflate=None,
    block_size: int = 0,
    max_blocks: int = 0,
    max_products: int = 0,
    tol=0.0,
) -> PartialEigh:
    """The ``n_components`` largest (``which="top"``) or smallest (``"bottom"``)
    eigenpairs of a symmetric matrix; call inside ``jax.jit``.

    ``A`` is an (n, n) array, or (``solver="lanczos"`` only) an operator with
    ``matmat(M) = A @ M``, ``shape`` and ``dtype``.  ``shift`` (bottom end with
    Lanczos) is an upper bound of A's spectrum; required for an operator, the
    Gershgorin bound for an array by default.  ``key`` seeds Lanczos' start block.
    ``solver="shift_invert"`` (bottom end of an array): block Lanczos on
    ``P (A - shift I)^{-1} P`` with ``shift < lambda_min`` (A - shift I is factored
    once by Cholesky; each product is two triangular solves) and P the projection
    off the orthonormal columns ``deflate`` (n, m) -- known eigenvectors to skip, such
    as LLE's constant vector.  Eigenvalues ``lambda`` near ``shift`` become the
    largest, ``1 / (lambda - shift)``, and far apart relative to the rest: the cure
    for tiny, clustered bottom eigenvalues that the fold ``shift I - A`` leaves
    clustered.  Cholesky is backward stable, so A is resolved to ~eps ||A|| however
    close ``shift`` is to lambda_min.
    Signs: the largest-magnitude entry of every eigenvector is positive.
    """
    if which not in WHICH:
        raise ValueError(f"Unknown which={which!r}; expected 'top' or 'bottom'")
    if solver not in SOLVERS:
        raise ValueError(f"Unknown solver={solver!r}; expected 'dense' or 'lanczos'")
    k = n_components
    if solver == "dense":
        if hasattr(A, "matmat"):
            raise ValueError("solver='dense' needs the matrix itself, not an operator")
        V, w = jax.lax.linalg.eigh(A, symmetrize_input=True, sort_eigenvalues=True)  # ascending
        if which == "top":
            w, V = w[::-1][:k], V[:, ::-1][:, :k]
        else:
            w, V = w[:k], V[:, :k]
        converged = jnp.asarray(True)
    else:
        # Both Lanczos variants find the top of a transformed operator; ``recover`` maps
        # its eigenvalues back to A's.
        if solver == "shift_invert":
            if which != "bottom" or shift is None or hasattr(A, "matmat"):
                raise ValueError(
                    "solver='shift_invert' finds the bottom end of a matrix (not an "
                    "operator) and needs shift < lambda_min"
                )
            n, dtype = A.shape[0], A.dtype
            shift = jnp.asarray(shift, dtype)
            factor = jax.lax.linalg.cholesky(0.5 * (A + A.T) - shift * jnp.eye(n, dtype=dtype))

            def matmat(M):
                M = M if deflate is None else M - deflate @ (deflate.T @ M)
                Z = jax.lax.linalg.triangular_solve(factor, M, left_side=True, lower=True)
                Z = jax.lax.linalg.triangular_solve(
                    factor, Z, left_side=True, lower=True, transpose_a=True
                )
                return Z if deflate is None else Z - deflate @ (deflate.T @ Z)

            def recover(w):
                return shift + 1.0 / w
        else:
            matmat, n, dtype = _operator(A)
            if which == "bottom":
                if shift is None:
                    if hasattr(A, "matmat"):
                        raise ValueError("the bottom end of an operator needs shift >= lambda_max")
                    shift = jnp.max(jnp.sum(jnp.abs(A), axis=1))  # Gershgorin: >= lambda_max
                shift = jnp.asarray(shift, dtype)
                base = matmat
                matmat = lambda M: shift * M - base(M)  # noqa: E731

            def recover(w):
                return shift - w if which == "bottom" else w

        top = block_lanczos_eigh(
            matmat,
            n,
            jax.random.PRNGKey(0) if key is None else key,
            n_components=k,
            block_size=block_size,
            max_blocks=max_blocks,
            max_products=max_products,
            tol=tol,
            dtype=dtype,
        )
        w, V, converged = recover(top.eigenvalues), top.eigenvectors, top.converged
    return PartialEigh(w, flip_signs_by_largest(V, axis=0)[0], converged)


def solve_with_fallback(
    solve,
    n: int,
    n_components: int,
    solver: str = "auto",
    dtype=np.float64,
    shift_invert: bool = False,
):
    """Run ``solve(solver=..., **settings)`` (a jit'd function that calls
    :func:`partial_eigh` and returns something with a ``converged`` field) with the
    solver :func:`eigen_settings` picks; rerun with ``"dense"`` if Lanczos stopped
    unconverged.  ``shift_invert``: run ``"shift_invert"`` where Lanczos was chosen.
    Returns ``(result, solver_used)``."""
    chosen, settings = eigen_settings(n, n_components, solver, dtype)
    if chosen == "lanczos" and shift_invert:
        chosen = "shift_invert"
    result = solve(solver=chosen, **settings)
    if chosen != "dense" and not bool(result.converged):
        chosen = "dense"
        result = solve(solver="dense")
    return result, chosen
