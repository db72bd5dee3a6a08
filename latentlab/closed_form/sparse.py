"""SciPy sparse algebra for PCA and KernelPCA, never densifying the training data
(host NumPy/SciPy; the estimators validate the input, see
:mod:`latentlab.estimators._sparse`).

PCA centres implicitly (as scikit-learn 1.4+): the mean, column variances and
scatter come from the non-zero entries, and the Lanczos solver multiplies by the
sparse matrix and subtracts the mean's part of each product.  Kernel PCA's built-in
kernels need only ``A B^T`` and row norms, which SciPy forms from the sparse rows.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from latentlab._shapes import ROW_BLOCK, bucket

__all__ = ["sparse_moments", "sparse_scatter", "sparse_coordinates", "host_kernel"]

# Column means at most this large against the column's spread keep X^T X - n mu mu^T
# accurate (the guard of latentlab.inference.summaries.scatter_about_mean).
SAFE_RATIO = 1e4


def sparse_moments(X):
    """``(mean, total_variance)`` of sparse X: column means and the sum of the ddof=1
    column variances, from the non-zero entries with exact centring:
    ``sum_i (x_ij - m_j)^2 = sum_{x_ij != 0} (x_ij - m_j)^2 + (n - nnz_j) m_j^2``."""
    n, d = X.shape
    C = sp.csc_array(X)
    mean = np.asarray(C.sum(axis=0)).ravel() / n
    nnz = np.diff(C.indptr)
    column = np.repeat(np.arange(d), nnz)
    centred = C.data - mean[column]
    sum_sq = np.bincount(column, weights=centred * centred, minlength=d)
    sum_sq += (n - nnz) * mean**2
    return mean, float(sum_sq.sum()) / (n - 1)


def sparse_scatter(X, mean):
    """The (d, d) scatter ``Xc^T Xc`` of sparse X about ``mean``, as a dense array.

    ``X^T X - n mu mu^T`` from the sparse product when the means are small against
    the spreads (always, for data that are sparse because they are mostly 0);
    otherwise the rows are centred block by block (dense blocks of ROW_BLOCK rows,
    never the whole matrix).
    """
    n = X.shape[0]
    R = sp.csr_array(X)
    gram = (R.T @ R).toarray()
    if np.all(n * mean**2 < SAFE_RATIO * (np.diag(gram) - n * mean**2)):
        return gram - n * np.outer(mean, mean)
    scatter = np.zeros_like(gram)
    for start in range(0, n, ROW_BLOCK):
        B = R[start : start + ROW_BLOCK].toarray() - mean
        scatter += B.T @ B
    return scatter


def sparse_coordinates(X):
    """``(rows, cols, values)`` of sparse X in row order, padded with zero entries at
    (0, 0) to a bucket of lengths so that matrices with similar numbers of non-zeros
    share one compiled program."""
    C = sp.coo_array(sp.csr_array(X))
    size = bucket(max(C.nnz, 1), smallest=64)
    rows = np.zeros(size, np.int32)
    cols = np.zeros(size, np.int32)
    values = np.zeros(size)
    rows[: C.nnz], cols[: C.nnz], values[: C.nnz] = C.row, C.col, C.data
    return rows, cols, values


def _product(A, B):
    """``A B^T`` as a dense float64 array, for any mix of sparse and dense A, B."""
    P = A @ B.T
    return P.toarray() if sp.issparse(P) else np.asarray(P, dtype=np.float64)


def _row_sq_norms(A):
    if sp.issparse(A):
        return np.asarray(A.multiply(A).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", A, A)


def host_kernel(kernel: str, A, B, gamma: float, degree: int, coef0: float):
    """Built-in kernel ``k(A, B)`` (n, m) in float64 with SciPy/NumPy, where A or B
    may be sparse: every built-in kernel is a function of ``A B^T`` and row norms.
    A host callable (a pairwise kernel of NumPy rows) is called."""
    if callable(kernel):
        return kernel(A.toarray() if sp.issparse(A) else A, B.toarray() if sp.issparse(B) else B)
    if kernel == "cosine":
        a, b = np.sqrt(_row_sq_norms(A)), np.sqrt(_row_sq_norms(B))
        P = _product(A, B)
        return P / np.where(a > 0, a, 1.0)[:, None] / np.where(b > 0, b, 1.0)[None, :]
    P = _product(A, B)
    if kernel == "linear":
        return P
    if kernel == "rbf":
        sq = _row_sq_norms(A)[:, None] + _row_sq_norms(B)[None, :] - 2.0 * P
        return np.exp(-gamma * np.maximum(sq, 0.0))
    if kernel == "poly":
        return (gamma * P + coef0) ** degree
    if kernel == "sigmoid":
        return np.tanh(gamma * P + coef0)
    raise ValueError(f"no host form for kernel {kernel!r}")
