"""SciPy sparse input for PCA, KernelPCA and the random projections: recognised and
validated here, never densified; the algebra on it is
:mod:`latentlab.closed_form.sparse`."""

from __future__ import annotations

import scipy.sparse as sp

from latentlab._validation import check_data

__all__ = ["is_sparse", "check_sparse_data"]


def is_sparse(X) -> bool:
    return sp.issparse(X)


def check_sparse_data(estimator, X, *, reset: bool, min_samples: int = 1):
    """A float64 CSR/CSC copy-free view of sparse X (other formats are converted),
    validated by :func:`latentlab._validation.check_data` as dense data are."""
    return check_data(
        estimator,
        X,
        reset=reset,
        allow_nan=False,
        min_samples=min_samples,
        accept_sparse=("csr", "csc"),
    )
