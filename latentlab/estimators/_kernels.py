"""Kernel helpers shared by the kernel estimators (KernelPCA, KernelCCA) and the
Lanczos settings that PCA, MDS and kernel PCA share: the kernel settings table, the
kernel check, the shift that keeps shift-invariant kernels exact, the Gram check."""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np

from latentlab._settings import Callable, Integer, Options, Real
from latentlab.closed_form.eigensolvers import lanczos_block_settings
from latentlab.closed_form.kernels import KERNELS, KernelParams

__all__ = [
    "SHIFT_INVARIANT_KERNELS",
    "check_gram",
    "kernel_offset",
    "kernel_settings",
    "lanczos_settings",
    "precomputed_kernel",
    "resolve_kernel",
]


def lanczos_settings(n, n_components, dtype):
    """(block_size, max_blocks, max_products, tol) of the block Lanczos solver for the
    top ``n_components`` eigenpairs of an n x n symmetric operator (a centred kernel
    here, a scatter matrix for ``PCA(svd_solver="arpack")``), or None when n is too
    small for its Krylov basis (dense eigh is then cheap and exact).

    The block sizes and ``tol`` are the shared eigensolver's
    (:func:`~latentlab.closed_form.eigensolvers.lanczos_block_settings`, measured
    single-threaded on rbf kernels: n = 3000 with n_components = 10 against blocks of
    10-30 and bases of 8-24 blocks; n = 2000 with n_components = 2-150); at most
    ``max(30, n / 20)`` products before the caller falls back to dense eigh.  "auto"
    takes Lanczos when n_samples > LANCZOS_MIN_SAMPLES and the basis fits.
    """
    settings = lanczos_block_settings(n, n_components, dtype)
    if settings is None:
        return None
    block, blocks, tol = settings
    return block, blocks, max(30, n // 20), tol


# Kernels whose *centred* Gram matrix (and consistently centred test kernel) does not
# change when every point is shifted by the same vector: rbf depends on differences
# only, and the centred linear kernel is the Gram matrix of centred data.
SHIFT_INVARIANT_KERNELS = ("linear", "rbf")


def kernel_settings(*, precomputed: bool = True) -> dict:
    """The settings table of a kernel and its parameters (:func:`resolve_kernel`
    checks them again, with the data's number of features, on a loaded model too)."""
    names = sorted(KERNELS) + (["precomputed"] if precomputed else [])
    return {
        "kernel": Options(*names) | Callable(),
        "gamma": Real(0, None, closed="neither", finite=True) | None,
        "degree": Integer(0, None),
        "coef0": Real(finite=True),
    }


def precomputed_kernel(A, B):
    """The "kernel" of ``kernel="precomputed"``: the input rows already are kernel rows
    (``A`` is ``k(X_new, X_fit)``), so the Gram matrix is A itself."""
    return A


class PairwiseKernel:
    """A user kernel written as scikit-learn's callables are: ``k(x, y)`` of two rows
    returning a number, evaluated pair by pair on the host (NumPy code need not be
    traceable by JAX).  Called with two row arrays it gives their Gram matrix; the
    estimator then treats that matrix as a precomputed kernel."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, A, B):
        from sklearn.metrics.pairwise import pairwise_kernels

        A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
        return np.asarray(pairwise_kernels(A, B, metric=self.fn), np.float64)


def _is_pairwise(kernel, n_features) -> bool:
    """Whether ``kernel`` is a NumPy function of two rows returning a number, and not
    a NumPy function of two row arrays returning their Gram matrix (which is a
    ``k(A, B)`` that JAX could not trace: refused by name instead)."""
    try:
        value = kernel(np.ones(n_features), np.ones(n_features))
    except Exception:  # not a function of two rows either
        return False
    try:
        gram = np.shape(kernel(np.ones((3, n_features)), np.ones((2, n_features))))
    except Exception:  # a function of rows only: scikit-learn's form
        gram = None
    return gram != (3, 2) and np.ndim(value) == 0 and np.isfinite(float(value))


def resolve_kernel(
    kernel,
    gamma,
    degree,
    coef0,
    n_features,
    name="kernel",
    allow_precomputed=False,
    allow_pairwise=False,
):
    """Check kernel settings; return (kernel for the jit'd functions, KernelParams, degree).

    ``kernel`` is a built-in name or a jit-compatible callable ``k(A, B)`` mapping arrays
    of shape (n, d) and (m, d) to an (n, m) Gram matrix; with ``allow_precomputed``
    also ``"precomputed"`` (the input is the kernel matrix:
    :func:`precomputed_kernel`).  With ``allow_pairwise``, a callable that JAX cannot
    trace as ``k(A, B)`` but that maps two rows to a number (scikit-learn's form of a
    callable kernel) comes back as a :class:`PairwiseKernel`, which the caller
    evaluates on the host.  ``gamma=None`` means ``1 / n_features``, as in
    scikit-learn.
    """
    if allow_precomputed and isinstance(kernel, str) and kernel == "precomputed":
        kernel = precomputed_kernel
    elif isinstance(kernel, PairwiseKernel):
        pass
    elif callable(kernel):
        probe_a = jax.ShapeDtypeStruct((3, n_features), jnp.float64)
        probe_b = jax.ShapeDtypeStruct((2, n_features), jnp.float64)
        try:
            with jax.enable_x64(True):
                out = jax.eval_shape(kernel, probe_a, probe_b)
        except Exception as error:  # any tracing failure is the user's callable
            if allow_pairwise and _is_pairwise(kernel, n_features):
                return resolve_kernel(
                    PairwiseKernel(kernel), gamma, degree, coef0, n_features, name
                )
            raise ValueError(
                f"The {name} callable could not be traced by JAX on arrays of shape "
                f"(3, {n_features}) and (2, {n_features}): {error}. It must be a "
                "jit-compatible function k(A, B) of two 2-D arrays."
            ) from error
        shape = getattr(out, "shape", None)
        if shape != (3, 2):
            raise ValueError(
                f"The {name} callable must map arrays of shape (n, d) and (m, d) to an "
                f"(n, m) Gram matrix, but for (3, {n_features}) and (2, {n_features}) it "
                f"returned shape {shape}. (For a function of two vectors, use "
                "jax.vmap(jax.vmap(k, (None, 0)), (0, None)).)"
            )
    elif not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(
            f"Unknown {name}={kernel!r}; expected one of "
            f"{sorted(KERNELS) + (['precomputed'] if allow_precomputed else [])} or a "
            "callable k(A, B) -> (n, m) Gram matrix"
        )
    if gamma is None:
        gamma = 1.0 / n_features
    if not isinstance(gamma, numbers.Real) or not np.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be a positive number or None, got {gamma!r}")
    if isinstance(degree, bool) or not isinstance(degree, numbers.Integral) or degree < 0:
        raise ValueError(f"degree must be a non-negative integer, got {degree!r}")
    if not isinstance(coef0, numbers.Real) or not np.isfinite(coef0):
        raise ValueError(f"coef0 must be a finite number, got {coef0!r}")
    return kernel, KernelParams(gamma=float(gamma), coef0=float(coef0)), int(degree)


def kernel_offset(kernel, X):
    """The point subtracted from every sample before the kernel is evaluated.

    For a shift-invariant kernel it is the training mean, computed in float64 on the
    host: ``||a||^2 + ||b||^2 - 2 a.b`` cancels catastrophically for data far from the
    origin (a shift of 1e8 leaves nothing of the spread in float64, let alone float32),
    while the centred data give the same kernel exactly.  Other kernels (poly,
    sigmoid, cosine, callables) depend on the origin: zeros.
    """
    if isinstance(kernel, str) and kernel in SHIFT_INVARIANT_KERNELS:
        return np.mean(np.asarray(X, dtype=np.float64), axis=0)
    return np.zeros(np.shape(X)[1])


def check_gram(K, n_rows, n_cols, name="kernel"):
    """A user kernel must give a finite Gram matrix of the right shape on real data too."""
    if K.shape != (n_rows, n_cols):
        raise ValueError(
            f"The {name} callable returned shape {K.shape}; expected ({n_rows}, {n_cols})"
        )
