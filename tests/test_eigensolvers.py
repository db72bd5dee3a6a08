"""The shared partial eigensolver against NumPy's full eigh: top and bottom ends, dense
arrays and matmat operators, and the size-based choice of solver."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import sparse

from latentlab.closed_form.eigensolvers import (
    eigen_settings,
    partial_eigh,
    solve_with_fallback,
    sparse_partial_eigh,
)

RNG = np.random.default_rng(0)
N = 240
Q, _ = np.linalg.qr(RNG.normal(size=(N, N)))
# separated ends (as the spectra of MDS kernels and normalized affinities are) and a
# bulk in between
SPECTRUM = np.r_[
    [9.0, 7.5, 6.0, 5.0, 4.2], np.linspace(1.0, 3.0, N - 10), [0.6, 0.4, 0.25, 0.1, 0.0]
]
A = (Q * SPECTRUM) @ Q.T
A = 0.5 * (A + A.T)
W, V = np.linalg.eigh(A)  # the oracle, ascending
K = 4


class Operator:
    """A matmat operator (the protocol the solver accepts besides arrays)."""

    def __init__(self, A):
        self.A = A
        self.shape = A.shape
        self.dtype = A.dtype

    def matmat(self, M):
        return self.A @ M


def _assert_pairs(result, values, vectors, rtol):
    np.testing.assert_allclose(np.asarray(result.eigenvalues), values, rtol=rtol, atol=rtol)
    got = np.asarray(result.eigenvectors)
    signs = np.sign(np.sum(got * vectors, axis=0))
    np.testing.assert_allclose(got * signs, vectors, atol=1e-7)
    assert bool(result.converged)


def _lanczos(n, k):
    solver, settings = eigen_settings(n, k, "lanczos")
    assert solver == "lanczos"
    return settings


@pytest.mark.parametrize("which", ["top", "bottom"])
def test_dense_matches_numpy_eigh(which):
    with jax.enable_x64(True):
        result = jax.jit(partial_eigh, static_argnames=("n_components", "which", "solver"))(
            jnp.asarray(A), n_components=K, which=which, solver="dense"
        )
    values, vectors = (W[::-1][:K], V[:, ::-1][:, :K]) if which == "top" else (W[:K], V[:, :K])
    _assert_pairs(result, values, vectors, 1e-12)


@pytest.mark.parametrize("which", ["top", "bottom"])
@pytest.mark.parametrize("operator", [False, True])
def test_lanczos_matches_numpy_eigh_on_arrays_and_operators(which, operator):
    settings = _lanczos(N, K)

    def run(A, key, tol):
        matrix = Operator(A) if operator else A
        # an operator's bottom end needs an upper bound of the spectrum
        shift = 10.0 if (operator and which == "bottom") else None
        return partial_eigh(
            matrix,
            key,
            n_components=K,
            which=which,
            solver="lanczos",
            shift=shift,
            block_size=settings["block_size"],
            max_blocks=settings["max_blocks"],
            max_products=settings["max_products"],
            tol=tol,
        )

    with jax.enable_x64(True):
        result = jax.jit(run)(jnp.asarray(A), jax.random.PRNGKey(1), settings["tol"])
    values, vectors = (W[::-1][:K], V[:, ::-1][:, :K]) if which == "top" else (W[:K], V[:, :K])
    _assert_pairs(result, values, vectors, 1e-9)


def test_operator_bottom_end_without_shift_is_refused():
    with jax.enable_x64(True), pytest.raises(ValueError, match="shift"):
        partial_eigh(Operator(jnp.asarray(A)), n_components=2, which="bottom", solver="lanczos")


def test_settings_choose_dense_for_small_and_lanczos_for_large_problems():
    assert eigen_settings(200, 3)[0] == "dense"
    solver, settings = eigen_settings(3000, 3)
    assert solver == "lanczos" and settings["tol"] == 1e-11
    # a Krylov basis that cannot hold the wanted pairs: dense even when asked
    assert eigen_settings(40, 30, "lanczos")[0] == "dense"
    with pytest.raises(ValueError, match="eigen_solver"):
        eigen_settings(100, 2, "amg")
    # sparse inputs: ARPACK above 200 samples; without a sparse matrix "arpack" names
    # the iterative solver, Lanczos
    assert eigen_settings(201, 3, sparse=True) == ("arpack", {})
    assert eigen_settings(200, 3, sparse=True)[0] == "dense"
    assert eigen_settings(100, 3, "arpack", sparse=True)[0] == "arpack"
    assert eigen_settings(7, 3, "arpack", sparse=True)[0] == "dense"  # no room for a basis
    assert eigen_settings(3000, 3, "arpack")[0] == "lanczos"


def test_unconverged_lanczos_falls_back_to_dense():
    calls = []

    class Result:
        def __init__(self, converged):
            self.converged = converged

    def solve(solver, **settings):
        calls.append(solver)
        return Result(solver == "dense")

    result, used = solve_with_fallback(solve, 3000, 3)
    assert calls == ["lanczos", "dense"] and used == "dense" and result.converged


def _blas_threads():
    from threadpoolctl import threadpool_info

    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


@pytest.mark.parametrize("sparse_input", [False, True])
def test_iterative_solvers_run_on_one_blas_thread_and_dense_keeps_them(sparse_input):
    from threadpoolctl import threadpool_limits

    seen = {}

    class Result:
        converged = False  # so the dense fallback runs too

    def solve(solver, **settings):
        seen[solver] = _blas_threads()
        return Result()

    # two threads to start from, so that a missing limit shows on any machine
    with threadpool_limits(2, "blas"):
        outside = _blas_threads()
        _, used = solve_with_fallback(solve, 3000, 3, sparse=sparse_input)
        iterative = "arpack" if sparse_input else "lanczos"
        assert used == "dense" and set(seen) == {iterative, "dense"}
        assert seen[iterative] and set(seen[iterative]) == {1}  # the small host solves
        assert seen["dense"] == outside  # a full eigh keeps its threads
        assert _blas_threads() == outside  # and the limit is lifted afterwards


def test_shift_invert_finds_clustered_bottom_pairs_with_deflation():
    # LLE-like: an exact null vector (deflated) and bottom eigenvalues ~1e-7 apart in
    # a spectrum of width ~1, which the fold shift I - A leaves clustered
    spectrum = np.r_[0.0, 1e-7, 2.5e-7, 4e-7, np.linspace(0.5, 1.5, N - 4)]
    B = (Q * spectrum) @ Q.T
    B = 0.5 * (B + B.T)
    w, v = np.linalg.eigh(B)
    settings = _lanczos(N, 3)

    def run(B, null, key, tol):
        return partial_eigh(
            B,
            key,
            n_components=3,
            which="bottom",
            solver="shift_invert",
            shift=-1e-9,
            deflate=null,
            block_size=settings["block_size"],
            max_blocks=settings["max_blocks"],
            max_products=settings["max_products"],
            tol=tol,
        )

    with jax.enable_x64(True):
        result = jax.jit(run)(
            jnp.asarray(B), jnp.asarray(Q[:, :1]), jax.random.PRNGKey(2), settings["tol"]
        )
    np.testing.assert_allclose(np.asarray(result.eigenvalues), w[1:4], rtol=0, atol=1e-13)
    got = np.asarray(result.eigenvectors)
    np.testing.assert_allclose(got * np.sign(np.sum(got * v[:, 1:4], axis=0)), v[:, 1:4], atol=1e-7)
    assert bool(result.converged)


def _sparse_laplacian(n, extra_edges, seed):
    """A connected sparse graph Laplacian (a ring plus random chords): PSD, null vector
    the constant, and bottom eigenvalues that crowd near 0 (~1e-3 apart)."""
    rng = np.random.default_rng(seed)
    rows = np.r_[np.arange(n), rng.integers(0, n, extra_edges)]
    cols = np.r_[(np.arange(n) + 1) % n, rng.integers(0, n, extra_edges)]
    A = sparse.coo_matrix((np.ones(rows.size), (rows, cols)), (n, n)).tocsr()
    A = A + A.T
    A.setdiag(0.0)
    A.eliminate_zeros()
    return sparse.diags(np.asarray(A.sum(axis=1)).ravel()) - A


LAPLACIAN = _sparse_laplacian(N, 12, 0)
LW, LV = np.linalg.eigh(LAPLACIAN.toarray())


def _assert_numpy_pairs(result, values, vectors, atol):
    np.testing.assert_allclose(result.eigenvalues, values, rtol=0, atol=atol)
    got = result.eigenvectors
    np.testing.assert_allclose(got * np.sign(np.sum(got * vectors, axis=0)), vectors, atol=1e-8)
    # the largest-magnitude entry of every eigenvector is positive
    assert np.all(got[np.argmax(np.abs(got), axis=0), np.arange(got.shape[1])] > 0)
    assert bool(result.converged)


def test_sparse_shift_invert_matches_dense_eigh_with_and_without_deflation():
    assert np.all(np.diff(LW[:6]) > 1e-4)  # distinct, so the eigenvectors are defined
    # the null vector found (default shift below the spectrum) ...
    found = sparse_partial_eigh(LAPLACIAN, 4, which="bottom", seed=1)
    _assert_numpy_pairs(found, LW[:4], LV[:, :4], 1e-12)
    # ... or deflated and skipped, as LLE and the spectral embedding do
    constant = np.full((N, 1), 1.0 / np.sqrt(N))
    skipped = sparse_partial_eigh(LAPLACIAN, 3, which="bottom", shift=-1e-9, deflate=constant)
    _assert_numpy_pairs(skipped, LW[1:4], LV[:, 1:4], 1e-12)


def test_sparse_top_end_matches_dense_eigh():
    top = sparse_partial_eigh(LAPLACIAN, 3, which="top", seed=2)
    _assert_numpy_pairs(top, LW[::-1][:3], LV[:, ::-1][:, :3], 1e-10)


def test_sparse_solver_reports_no_convergence_and_refuses_bad_sizes():
    stopped = sparse_partial_eigh(LAPLACIAN, 3, which="top", tol=0.0, maxiter=1)
    assert not bool(stopped.converged) and np.isnan(stopped.eigenvalues).all()
    with pytest.raises(ValueError, match="n_components"):
        sparse_partial_eigh(LAPLACIAN, N - 1)
    with pytest.raises(ValueError, match="which"):
        sparse_partial_eigh(LAPLACIAN, 2, which="middle")
