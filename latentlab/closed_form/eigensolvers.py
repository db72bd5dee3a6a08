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

Sparse matrices (LLE's ``(I - W)^T (I - W)``, a k-NN graph's Laplacian: O(n k) entries)
take ``"arpack"``, :func:`sparse_partial_eigh`, on the host: SciPy's sparse LU of
``A - shift I`` and ARPACK on its inverse, as scikit-learn does.  Measured on the
S-curve against the device alternatives (n = 3,000 LLE and n = 5,000 k-NN Laplacian,
k = 10, 2 components): the LU takes ~0.02 s and ARPACK ~0.03 s, where LOBPCG on
``c I - M`` (BCOO products) had not converged after 2,000 iterations (3.5 s) and block
Lanczos on the normalized affinity with BCOO products took 1.2-2.8 s: the wanted
eigenvalues are clustered, and only the factorisation (which JAX offers for dense
matrices only) separates them.
"""

from __future__ import annotations

import functools
from contextlib import nullcontext
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.closed_form._linalg import eigh_unordered, flip_signs_by_largest
from latentlab.closed_form.pca import block_lanczos_eigh

__all__ = [
    "PartialEigh",
    "partial_eigh",
    "sparse_partial_eigh",
    "flip_column_signs",
    "eigen_settings",
    "lanczos_block_settings",
    "solve_with_fallback",
    "solver_threads",
    "one_blas_thread",
    "LANCZOS_MIN_SAMPLES",
    "SPARSE_MIN_SAMPLES",
]

WHICH = ("top", "bottom")
SOLVERS = ("dense", "lanczos", "shift_invert")

# Below this many rows dense eigh is cheap next to compiling a Lanczos loop, and exact.
LANCZOS_MIN_SAMPLES = 500
# Below this many rows a sparse graph's dense eigh is as fast as a sparse LU and
# exact (scikit-learn's LLE draws its "auto" line at the same size).
SPARSE_MIN_SAMPLES = 200
_MAX_BLOCK = 16
_MIN_BLOCKS = 10
_MAX_BASIS = 400


class PartialEigh(NamedTuple):
    eigenvalues: jax.Array  # (k,) decreasing for "top", increasing for "bottom"
    eigenvectors: jax.Array  # (n, k) unit columns, largest-magnitude entry positive
    converged: jax.Array  # () bool; False only when "lanczos" missed its tolerance


def lanczos_block_settings(n: int, n_components: int, dtype=np.float64):
    """``(block_size, max_blocks, tol)`` of block Lanczos for ``n_components`` pairs of
    an n x n operator, or None when its Krylov basis does not fit in n columns.

    Blocks of ``n_components + 6`` vectors between 8 and 16 (a product with a few
    columns costs about what one column does, as the matrix is read from memory either
    way), a basis of at least 10 blocks and twice ``n_components + block`` (a thick
    restart keeps half of it), at most 400 columns (a larger one makes every Ritz step
    dearer): the sizes kernel PCA measured.  ``tol`` bounds every residual relative to
    the largest Ritz value: 1e-11 in float64 (eigenvalues to ~1e-14 relative, above the
    round-off floor), 1000 eps in float32.
    """
    block = max(8, min(n_components + 6, _MAX_BLOCK))
    blocks = max(_MIN_BLOCKS, 2 * -(-(n_components + block) // block))
    blocks = min(blocks, _MAX_BASIS // block, n // block)
    if blocks < 4 or block * (blocks // 2) <= n_components:
        return None
    return block, blocks, max(1e-11, 1e3 * float(np.finfo(dtype).eps))


def eigen_settings(
    n: int, n_components: int, solver: str = "auto", dtype=np.float64, sparse: bool = False
):
    """Host-side choice of solver: ``(solver, settings)`` for :func:`partial_eigh`.

    ``"auto"`` takes Lanczos when ``n > LANCZOS_MIN_SAMPLES`` and its Krylov basis fits
    (:func:`lanczos_block_settings`), else dense.  ``settings`` holds ``block_size``,
    ``max_blocks``, ``max_products`` and ``tol``.

    ``sparse``: the caller can give the matrix as a ``scipy.sparse`` matrix, and
    ``"auto"`` takes ``"arpack"`` (:func:`sparse_partial_eigh`, no settings) when
    ``n > SPARSE_MIN_SAMPLES``.  Without ``sparse``, ``"arpack"`` means the iterative
    solver, ``"lanczos"`` (as KernelPCA reads scikit-learn's name).
    """
    if solver not in ("auto", "arpack", *SOLVERS):
        raise ValueError(
            f"Unknown eigen_solver={solver!r}; expected 'auto', 'dense', 'lanczos' or 'arpack'"
        )
    if sparse and solver in ("auto", "arpack"):
        # ARPACK needs n_components < n (and its basis, ~2 n_components, to fit)
        fits = n > 2 * n_components + 2
        if solver == "auto":
            solver = "arpack" if n > SPARSE_MIN_SAMPLES and fits else "dense"
        if solver == "arpack":
            return ("arpack", {}) if fits else ("dense", {})
    if solver == "arpack":
        solver = "lanczos"
    lanczos = lanczos_block_settings(n, n_components, dtype)
    if solver == "auto":
        solver = "lanczos" if n > LANCZOS_MIN_SAMPLES and lanczos is not None else "dense"
    if solver == "lanczos" and lanczos is None:
        solver = "dense"
    if solver == "dense":
        return "dense", {}
    block, blocks, tol = lanczos
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
        # unsorted eigh and one argsort: eigh's own sort is a variadic sort that
        # roughly triples XLA's compile time on CPU (see closed_form._linalg)
        w, V = eigh_unordered(A)
        order = jnp.argsort(-w if which == "top" else w)[:k]
        w, V = w[order], V[:, order]
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


# Solvers whose host BLAS/LAPACK calls are all small (see solver_threads).
_SMALL_HOST_CALLS = ("lanczos", "arpack")


@functools.cache
def _blas_controller():
    """threadpoolctl's view of the loaded BLAS libraries, built once: creating it scans
    every loaded library (~3 ms on a busy machine), a limit through it costs ~10 us.
    SciPy's BLAS (which also serves jaxlib's LAPACK kernels) is loaded first."""
    import scipy.linalg  # noqa: F401
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread():
    """A context manager that runs NumPy's and SciPy's BLAS/LAPACK (which also serve
    jaxlib's LAPACK kernels on CPU) on one thread, restoring the settings after."""
    return _blas_controller().limit(limits=1, user_api="blas")


def solver_threads(solver: str):
    """A context manager that runs ``solver``'s host BLAS/LAPACK calls on one thread.

    The iterative solvers' host calls are all small: Lanczos' Ritz eigh and thin QRs
    (its products with the operator are XLA's own), ARPACK's vector updates and
    SuperLU's supernode kernels.  Threads only contend on them: on a busy 2-core
    machine one 80 x 80 LAPACK eigh took 0.14 s threaded and 1 ms on one thread, and
    the k-NN spectral embedding at n = 5,000 (SuperLU + ARPACK) 0.16 s against 0.07 s.
    ``"dense"`` (a full n x n eigh) and ``"shift_invert"`` (a dense n x n Cholesky)
    keep the threads.  Run the solve to completion inside the context
    (``jax.block_until_ready``): JAX dispatches asynchronously.
    """
    return one_blas_thread() if solver in _SMALL_HOST_CALLS else nullcontext()


def solve_with_fallback(
    solve,
    n: int,
    n_components: int,
    solver: str = "auto",
    dtype=np.float64,
    shift_invert: bool = False,
    sparse: bool = False,
):
    """Run ``solve(solver=..., **settings)`` (a jit'd function that calls
    :func:`partial_eigh`, or for ``"arpack"`` a host function that calls
    :func:`sparse_partial_eigh`, returning something with a ``converged`` field) with
    the solver :func:`eigen_settings` picks; rerun with ``"dense"`` if the iterative
    solver stopped unconverged.  ``shift_invert``: run ``"shift_invert"`` where Lanczos
    was chosen.  ``sparse``: see :func:`eigen_settings`.
    The iterative solvers run with one BLAS thread (:func:`solver_threads`).
    Returns ``(result, solver_used)``."""
    chosen, settings = eigen_settings(n, n_components, solver, dtype, sparse)
    if chosen == "lanczos" and shift_invert:
        chosen = "shift_invert"
    with solver_threads(chosen):
        result = jax.block_until_ready(solve(solver=chosen, **settings))
    if chosen != "dense" and not bool(result.converged):
        chosen = "dense"
        result = solve(solver="dense")
    return result, chosen


# -- host side: sparse matrices ---------------------------------------------------------


def flip_column_signs(V: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`flip_signs_by_largest` (columns): the largest-magnitude
    entry of every column positive."""
    if V.shape[1] == 0:
        return V
    signs = np.sign(V[np.argmax(np.abs(V), axis=0), np.arange(V.shape[1])])
    return V * np.where(signs == 0, 1.0, signs)


def sparse_partial_eigh(
    A,
    n_components: int,
    *,
    which: str = "bottom",
    shift=None,
    deflate=None,
    tol: float = 0.0,
    seed: int = 0,
    maxiter: int | None = None,
) -> PartialEigh:
    """The ``n_components`` smallest (``which="bottom"``) or largest (``"top"``)
    eigenpairs of a sparse symmetric matrix, on the host (NumPy results).

    ``"bottom"`` is shift-invert: SuperLU factors ``A - shift I`` once (minimum-degree
    ordering of ``A + A^T``, diagonal pivots preferred: the matrix is symmetric) and
    ARPACK's Lanczos runs on ``P (A - shift I)^{-1} P``, P the projection off the
    orthonormal columns ``deflate`` (n, m), known eigenvectors to skip (LLE's constant
    vector, a Laplacian's ``sqrt(degree)``).  Eigenvalues ``lambda`` just above
    ``shift`` become the largest, ``1 / (lambda - shift)``, and far apart: the cure for
    tiny clustered bottom eigenvalues.  ``shift`` must lie below the spectrum; by
    default ``-1e-9 * trace(A) / n`` (A positive semi-definite).  ``"top"``: ARPACK on A
    itself (``deflate`` and ``shift`` unused).

    ``tol``: ARPACK's relative accuracy of the Ritz values (0: machine precision).
    ``seed`` fixes its start vector.  ``converged`` is False when ARPACK stopped at
    ``maxiter`` (the eigenpairs are then NaN): the caller falls back to dense.
    Signs: the largest-magnitude entry of every eigenvector is positive.
    """
    from scipy import sparse
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh, splu

    if which not in WHICH:
        raise ValueError(f"Unknown which={which!r}; expected 'top' or 'bottom'")
    A = sparse.csc_matrix(A, dtype=np.float64)
    n, k = A.shape[0], n_components
    if A.shape != (n, n):
        raise ValueError(f"sparse_partial_eigh needs a square matrix, got shape {A.shape}")
    m = 0 if deflate is None else np.shape(deflate)[1]
    if not 1 <= k < n - m - 1:
        raise ValueError(f"n_components={k} is out of range for ARPACK on an n={n} matrix")
    v0 = np.random.default_rng(seed).uniform(-1.0, 1.0, n)
    if which == "top":
        operator, recover = A, (lambda w: w)
        order = slice(None, None, -1)  # eigsh returns ascending values
    else:
        if shift is None:
            shift = -1e-9 * A.diagonal().sum() / n
        shift = float(shift)
        lu = splu(
            (A - shift * sparse.identity(n, format="csc")).tocsc(),
            permc_spec="MMD_AT_PLUS_A",
            options=dict(SymmetricMode=True),
        )
        Q = None if deflate is None else np.asarray(deflate, dtype=np.float64)

        def project(x):
            return x if Q is None else x - Q @ (Q.T @ x)

        operator = LinearOperator(
            (n, n), matvec=lambda x: project(lu.solve(project(np.ravel(x)))), dtype=np.float64
        )
        v0 = project(v0)

        def recover(w):
            return shift + 1.0 / w

        order = slice(None, None, -1)  # largest 1 / (lambda - shift) first
    try:
        w, V = eigsh(
            operator, k, which="LA" if which == "top" else "LM", tol=tol, v0=v0, maxiter=maxiter
        )
    except ArpackNoConvergence:
        nan = np.full((n, k), np.nan)
        return PartialEigh(np.full(k, np.nan), nan, np.asarray(False))
    w, V = recover(w[order]), V[:, order]
    return PartialEigh(w, flip_column_signs(V), np.asarray(True))
