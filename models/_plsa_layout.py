"""How a count matrix is laid out for pLSA's compiled programs (host side, NumPy).

The nonzero entries are padded to a fixed count and the dense rows to a fixed row
count, so that corpora (and chunks) of nearby sizes share one compiled program.  The
in-memory corpus and every chunk of the chunked routes are built by these two
functions.
"""

from __future__ import annotations

import numpy as np

# no __all__: a private module; the pLSA estimators' corpus builders import from it


def padded_entries(csr, n_rows: int, capacity: int, dtype):
    """The nonzeros of the CSR matrix ``csr`` as (document, word, count) arrays of
    ``capacity`` entries.  Padding entries (count 0) sit in the last of ``n_rows`` rows,
    so the document index stays sorted."""
    nnz = csr.nnz
    doc = np.full(capacity, n_rows - 1, np.int32)
    doc[:nnz] = np.repeat(np.arange(csr.shape[0], dtype=np.int32), np.diff(csr.indptr))
    word = np.zeros(capacity, np.int32)
    word[:nnz] = csr.indices
    count = np.zeros(capacity, dtype)
    count[:nnz] = csr.data
    return doc, word, count


def padded_rows(csr, n_rows: int, dtype) -> np.ndarray:
    """``csr`` as a dense (n_rows, n_words) matrix, zero rows below its own."""
    matrix = np.zeros((n_rows, csr.shape[1]), dtype)
    matrix[: csr.shape[0]] = csr.toarray()
    return matrix
