"""PCA's decompositions: dense (full SVD, covariance eigh, randomized, block
Lanczos) and sparse (Lanczos on implicit centring, or the sparse scatter's eigh).

Pure functions of the data and the settings they are given, called by
:class:`latentlab.PCA` inside its precision context; each ``decompose_*`` returns
``(solver used, PCADecomposition, shift)``."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from latentlab.closed_form import pca as cf
from latentlab.closed_form.sparse import sparse_coordinates, sparse_moments, sparse_scatter
from latentlab.estimators._dispatch import call, to_device
from latentlab.estimators._kernels import lanczos_settings
from latentlab.estimators.base import jax_key
from latentlab.inference.summaries import scatter_about_mean

__all__ = ["decompose_dense", "decompose_sparse"]


def decompose_dense(X, solver, K, *, dtype, random_state, n_oversamples, iterated_power):
    """(solver used, PCADecomposition of X - shift, shift) for dense X; ``dtype``,
    ``random_state``, ``n_oversamples`` and ``iterated_power`` are PCA's settings."""
    n, d = X.shape
    # Centre in float64 on the host before any cast: float32 cannot hold an offset
    # such as 1e8 together with the unit-scale structure on top of it.  (The
    # float64 scatter path guards against cancellation itself, without a copy.)
    scatter_path = solver == "covariance_eigh" and dtype == "float64"
    shift = np.zeros(d) if scatter_path else X.mean(axis=0)
    Xc = X if scatter_path else X - shift
    result = None
    if solver == "arpack":
        result = _fit_lanczos(Xc, K, dtype=dtype, random_state=random_state)
    if solver == "arpack" and result is None:
        solver = "full"  # exact, and cheap where n_features is too small for Krylov
    if result is not None:
        pass
    elif scatter_path:
        mean, scatter = scatter_about_mean(X)  # NumPy: see its docstring
        result = call(cf.pca_from_scatter, d * d, jnp.asarray(mean), jnp.asarray(scatter), n)
    elif solver == "covariance_eigh":
        result = call(cf.pca_covariance_eigh, X.size, to_device(Xc))
    elif solver == "full":
        result = call(cf.pca_full, X.size, to_device(Xc))
    else:
        power = iterated_power
        if power == "auto":
            power = 7 if K < 0.1 * min(n, d) else 4
        result = call(
            cf.pca_randomized,
            X.size,
            to_device(Xc),
            jax_key(random_state),
            n_components=K,
            n_oversamples=int(n_oversamples),
            n_iter=int(power),
        )
    return solver, result, shift


def decompose_sparse(X, solver, K, *, dtype, random_state):
    """As :func:`decompose_dense` for SciPy sparse X, centred implicitly: block
    Lanczos on the sparse products ("arpack"), or eigh of the scatter formed from
    the sparse ``X^T X`` ("covariance_eigh", and arpack's exact fallback)."""
    n, d = X.shape
    mean, total_variance = sparse_moments(X)
    result = None
    settings = lanczos_settings(d, K, np.dtype(dtype)) if solver == "arpack" else None
    if settings is not None:
        block, blocks, products, tol = settings
        rows, cols, values = sparse_coordinates(X)
        coordinates = cf.SparseRows(jnp.asarray(rows), jnp.asarray(cols), jnp.asarray(values))
        result, converged = call(
            cf.pca_lanczos_sparse,
            len(values) * block,
            coordinates,
            jnp.asarray(mean),
            jnp.asarray(total_variance),
            jax_key(random_state),
            tol,
            n_samples=n,
            n_features=d,
            n_components=K,
            block_size=block,
            max_blocks=blocks,
            max_products=products,
        )
        result = result if bool(converged) else None
    if result is None:
        solver = "covariance_eigh"  # exact; d x d, which Krylov would not beat here
        scatter = sparse_scatter(X, mean)
        result = call(cf.pca_from_scatter, d * d, jnp.asarray(mean), jnp.asarray(scatter), n)
    return solver, result, np.zeros(d)


def _fit_lanczos(Xc, K, *, dtype, random_state):
    """The block Lanczos decomposition of centred X, or None where n_features is too
    small for its Krylov basis or it did not converge (the caller then goes exact)."""
    settings = lanczos_settings(Xc.shape[1], K, np.dtype(dtype))
    if settings is None:
        return None
    block, blocks, products, tol = settings
    result, converged = call(
        cf.pca_lanczos,
        Xc.size,
        to_device(Xc),
        jax_key(random_state),
        tol,
        n_components=K,
        block_size=block,
        max_blocks=blocks,
        max_products=products,
    )
    return result if bool(converged) else None
