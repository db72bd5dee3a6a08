"""Random projections (Johnson & Lindenstrauss 1984) as plain functions.

A random k x d matrix R with i.i.d. zero-mean entries of variance 1/k keeps every
pairwise distance of n points within a factor ``1 +- eps`` with high probability once
``k >= 4 ln(n) / (eps^2/2 - eps^3/3)`` (Dasgupta & Gupta 2003, the bound scikit-learn
uses).  Entries: Gaussian N(0, 1/k), or the sparse distribution of Achlioptas (2003)
and Li, Hastie & Church (2006), ``sqrt(s/k) * {+1, 0, -1}`` with probabilities
``{1/(2s), 1 - 1/s, 1/(2s)}``, ``s = 1/density``.

The matrices are drawn on the host with NumPy's ``Generator`` (seeded, reproducible,
independent of JAX's PRNG), the sparse one straight into SciPy's CSR form; the dense
projection is one jit-compiled product, the sparse one SciPy's sparse product.
"""

from __future__ import annotations

import numpy as np

from latentlab.inference.programs import program

__all__ = [
    "johnson_lindenstrauss_min_dim",
    "gaussian_random_matrix",
    "sparse_random_matrix",
    "project",
]


def johnson_lindenstrauss_min_dim(n_samples, *, eps=0.1):
    """Smallest dimension that the Johnson-Lindenstrauss lemma guarantees keeps the
    pairwise distances of ``n_samples`` points within a factor ``1 +- eps``:
    ``4 ln(n_samples) / (eps^2 / 2 - eps^3 / 3)``, rounded down (as scikit-learn).

    ``n_samples`` and ``eps`` may be arrays (broadcast); ``eps`` must lie in (0, 1)
    and ``n_samples`` be positive.  Returns an int, or an int64 array.
    """
    eps = np.asarray(eps, dtype=np.float64)
    n = np.asarray(n_samples)
    if np.any(eps <= 0.0) or np.any(eps >= 1.0) or not np.all(np.isfinite(eps)):
        raise ValueError(f"eps must lie strictly between 0 and 1, got {eps}")
    if np.any(n <= 0):
        raise ValueError(f"n_samples must be positive, got {n}")
    denominator = eps**2 / 2.0 - eps**3 / 3.0
    k = (4.0 * np.log(n) / denominator).astype(np.int64)
    return int(k) if k.ndim == 0 else k


def gaussian_random_matrix(rng: np.random.Generator, n_components: int, n_features: int):
    """(n_components, n_features) matrix of i.i.d. N(0, 1 / n_components) entries."""
    R = rng.standard_normal((n_components, n_features))
    R *= 1.0 / np.sqrt(n_components)
    return R


def sparse_random_matrix(
    rng: np.random.Generator, n_components: int, n_features: int, density: float
):
    """(n_components, n_features) ``scipy.sparse`` CSR matrix with entries
    ``+-sqrt(s / n_components)`` with probability ``1 / (2 s)`` each and 0 otherwise,
    ``s = 1 / density``.

    The non-zero positions are drawn by geometric skipping: the gaps between successive
    successes of independent Bernoulli(density) trials are Geometric(density), so their
    cumulative sums are the positions -- the same law as one uniform per entry, in
    O(non-zeros) draws and memory.  They come out in row-major order, which is CSR's.
    """
    from scipy import sparse

    size = n_components * n_features
    value = np.sqrt(1.0 / (density * n_components))
    if density == 1.0:
        positions = np.arange(size)
    else:
        chunks, end = [], -1
        while end < size:
            expected = (size - end) * density
            gaps = rng.geometric(density, size=int(expected + 6.0 * np.sqrt(expected) + 16))
            steps = end + np.cumsum(gaps)
            chunks.append(steps[steps < size])
            end = int(steps[-1])
        positions = np.concatenate(chunks)
    signs = 2.0 * rng.integers(0, 2, size=len(positions)) - 1.0
    rows, columns = np.divmod(positions, n_features)
    index = np.int32 if size < 2**31 else np.int64
    indptr = np.searchsorted(rows, np.arange(n_components + 1)).astype(index)
    return sparse.csr_matrix(
        (value * signs, columns.astype(index), indptr), shape=(n_components, n_features)
    )


@program
def project(X, components):
    """``X components^T``: the projection of the rows of X."""
    return X @ components.T
