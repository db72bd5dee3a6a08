"""pLSA's chunked route, the host side: count matrices read in row chunks (memmap,
h5py, zarr, ``scipy.sparse`` wrapped in :class:`~latentlab.inference.chunked.RowChunks`)
or held as a Dask array, and the model's E-steps run on them.

What Dask workers run, so outside :mod:`latentlab.estimators` (as
:mod:`latentlab._chunk_tasks`): importing anything there first imports every estimator
(scikit-learn, SciPy, pandas), about a second per worker process; this module needs
NumPy, SciPy, JAX and the model.

A first pass validates the counts (non-negative integers, no empty documents) and
collects the documents' lengths, the words' totals, the multinomial coefficient and
the largest number of nonzeros in a chunk, which fixes the shapes of the jitted chunk
functions.  :class:`CountsPass` answers the compiled program's requests
(:func:`latentlab.inference.chunked.host_sum`): EM's E-step over every chunk, and
fold-in's E-step over a batch of documents.  The program side is
:mod:`latentlab.models.plsa_programs` (its chunked route).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from latentlab.inference.chunked import RowChunks
from latentlab.inference.programs import Program
from latentlab.models import plsa
from latentlab.models.plsa import DocTopics

__all__ = [
    "CountSummary",
    "CountsPass",
    "Layout",
    "map_chunks",
    "new_block_summary",
    "check_counts",
    "read_counts",
    "summarise_counts",
    "without_words",
]

# ----------------------------------------------------------------------------- first pass


def read_counts(source: RowChunks, start: int, stop: int) -> sp.csr_matrix:
    """Rows ``start:stop`` of ``source`` as a canonical float64 CSR matrix."""
    if sp.issparse(source.source):
        block = sp.csr_matrix(source.source[start:stop], dtype=np.float64)
    else:
        block = sp.csr_matrix(source.read(start, stop))
    block.sum_duplicates()
    block.sort_indices()
    return block


def check_counts(csr: sp.csr_matrix, offset: int = 0, allow_empty: bool = False):
    """The checks on pLSA's counts, in memory and for each chunk (rows numbered from
    ``offset``): finite, non-negative integers, and no empty document unless
    ``allow_empty``.  Drops explicit zeros from ``csr`` in place."""
    data = csr.data
    if not np.all(np.isfinite(data)):
        raise ValueError("Input X contains NaN or infinity; PLSA models word counts")
    for bad, what in ((data < 0, "negative"), (data != np.round(data), "non-integer")):
        if bad.any():
            raise ValueError(
                f"X contains {bad.sum()} {what} count(s) (e.g. {data[bad][0]:g}); "
                "PLSA models non-negative integer word counts"
            )
    csr.eliminate_zeros()
    empty = offset + np.flatnonzero(np.diff(csr.indptr) == 0)
    if empty.size and not allow_empty:
        shown = ", ".join(map(str, empty[:10])) + (" ..." if empty.size > 10 else "")
        raise ValueError(
            f"X has {empty.size} empty document(s) (rows without counts): rows {shown}. "
            "Drop them; a document needs at least one token."
        )


def _block_summary(block: sp.csr_matrix, offset: int):
    check_counts(block, offset)
    lengths = np.asarray(block.sum(axis=1)).ravel()
    totals = np.asarray(block.sum(axis=0)).ravel()
    coefficient = float(np.sum(gammaln(lengths + 1.0)) - np.sum(gammaln(block.data + 1.0)))
    return lengths, totals, block.nnz, coefficient


class CountSummary(NamedTuple):
    doc_lengths: np.ndarray  # (n_documents,) tokens per document
    word_totals: np.ndarray  # (n_words,) tokens per word
    nnz: int  # nonzero counts in all
    max_chunk_nnz: int  # most nonzeros in one chunk (Dask: one block)
    log_coefficient: float  # sum_d log N_d! - sum_dw log x_dw!

    def tolerance_scale(self) -> float:
        """``|l_1|`` of :func:`latentlab.models.plsa_programs.tolerance_scale`,
        from the words' totals: ``-sum_w N_w log(N_w / N)``."""
        totals = self.word_totals[self.word_totals > 0]
        return max(float(-np.sum(totals * np.log(totals / totals.sum()))), 1.0)


def _chunk_ranges(source: RowChunks):
    if source.dask:
        edges = np.concatenate([[0], np.cumsum(source.source.chunks[0])])
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return source.slices()


def _csr_block(block) -> sp.csr_matrix:
    """A Dask block (NumPy, SciPy sparse or pydata ``sparse``) as float64 CSR."""
    if hasattr(block, "tocsr") and not sp.issparse(block):  # pydata sparse
        block = block.tocsr()
    if sp.issparse(block):
        block = sp.csr_matrix(block, dtype=np.float64)
        block.sum_duplicates()
    else:
        block = sp.csr_matrix(np.asarray(block, np.float64))
    block.sort_indices()
    return block


def _dask_block(block, offset, fn):
    return fn(_csr_block(block), offset)


def map_chunks(source: RowChunks, fn, which=None):
    """``[fn(csr_chunk, offset) for every chunk]`` in row order (Dask: in parallel);
    ``which``: the indices of the chunks to visit (default all)."""
    ranges = _chunk_ranges(source)
    which = range(len(ranges)) if which is None else which
    if source.dask:
        import dask

        blocks = source.source.to_delayed().ravel()
        tasks = [dask.delayed(_dask_block)(blocks[i], ranges[i][0], fn) for i in which]
        return list(dask.compute(*tasks))
    return [fn(read_counts(source, *ranges[i]), ranges[i][0]) for i in which]


def summarise_counts(source: RowChunks) -> CountSummary:
    """One pass over ``source``: validation and what the fit needs besides the counts."""
    parts = map_chunks(source, _block_summary)
    lengths = np.concatenate([p[0] for p in parts])
    totals = np.sum([p[1] for p in parts], axis=0)
    nnz = [p[2] for p in parts]
    return CountSummary(lengths, totals, int(sum(nnz)), max(nnz), float(sum(p[3] for p in parts)))


def new_block_summary(block: sp.csr_matrix, offset: int, drop: np.ndarray):
    """A chunk of documents to fold in: checks, each document's multinomial
    coefficient, whether it holds a word of probability 0 (``drop``), and its tokens
    and nonzeros once those words are left out."""
    check_counts(block, offset)
    coefficients = plsa.log_coefficients(block)
    hit = np.zeros(block.shape[0], bool)
    hit[np.repeat(np.arange(block.shape[0]), np.diff(block.indptr))[drop[block.indices]]] = True
    kept = without_words(block, drop)
    tokens = float(block.sum())
    return np.asarray(kept.sum(axis=1)).ravel(), hit, coefficients, kept.nnz, tokens


# ----------------------------------------------------------------------------- chunk E-steps


class Layout(NamedTuple):
    """Fixed shapes of a chunk's :class:`~latentlab.models.plsa.Corpus` (one compile)."""

    rows: int  # documents per chunk, padded
    n_words: int
    dense: bool  # carry the dense matrix (the in-memory rule, on the whole corpus)
    capacity: int  # nonzero entries per chunk, padded (0: not carried)


def without_words(block: sp.csr_matrix, drop: np.ndarray) -> sp.csr_matrix:
    """``block`` with the words ``drop`` removed (as ``models.plsa_programs.known_words``)."""
    block = block.copy()
    block.data[drop[block.indices]] = 0.0
    block.eliminate_zeros()
    return block


def chunk_corpus(block: sp.csr_matrix, shape: Layout, dtype) -> plsa.Corpus:
    """One chunk's counts as a Corpus of fixed shapes; no multinomial coefficient."""
    m = block.shape[0]
    doc_mask = np.zeros(shape.rows, dtype)
    doc_mask[:m] = 1.0
    matrix = plsa.padded_rows(block, shape.rows, dtype) if shape.dense else None
    if shape.capacity == 0:  # the dense matrix only (untempered steps never read more)
        empty = np.zeros(0, np.int32)
        return plsa.Corpus(empty, empty, np.zeros(0, dtype), doc_mask, np.zeros((), dtype), matrix)
    doc, word, count = plsa.padded_entries(block, shape.rows, shape.capacity, dtype)
    return plsa.Corpus(doc, word, count, doc_mask, np.zeros((), dtype), matrix)


def _chunk_e_step(theta, phi, corpus, hyper, *, tempered, with_objective):
    """The model's E-step on one chunk: (n_dk, n_kw, sum x log p); ``hyper`` has no
    prior (the program adds the log priors) and ``corpus`` no coefficient."""
    stats, data_term = plsa.e_step(
        plsa.Params(theta, phi), corpus, hyper, tempered=tempered, with_objective=with_objective
    )
    return stats.doc_counts, stats.word_counts, data_term


def _chunk_fold_in(theta, phi, corpus, hyper, *, tempered):
    """The model's fold-in E-step on one chunk: (n_dk, doc_loglik, doc_objective)."""
    fixed = plsa.fold_in_hyper(phi, corpus, hyper)
    stats, _ = plsa.fold_in_e_step(DocTopics(theta), corpus, fixed, tempered=tempered)
    return stats.doc_counts, stats.doc_loglik, stats.doc_objective


# Small problems run the quick-compile variants, as in memory (latentlab.inference.programs).
_CHUNK_E_STEP = Program(_chunk_e_step, static_argnames=("tempered", "with_objective"))
_CHUNK_FOLD_IN = Program(_chunk_fold_in, static_argnames=("tempered",))


def _chunk_work(shape: Layout, n_topics: int) -> int:
    """Elements a chunk's E-step touches (as ``models.plsa_programs._work``)."""
    return (shape.rows * shape.n_words if shape.dense else shape.capacity) * n_topics


class CountsPass:
    """The host side of the chunked E-steps (see :func:`host_sum`): every chunk of
    counts, every E-step, with its rows of ``theta``."""

    def __init__(
        self,
        source: RowChunks,
        shape: Layout,
        hyper: plsa.Hyper,
        tempered,
        dtype,
        *,
        program_work: int,
        drop=None,
    ):
        self.source = source
        self.drop = drop  # (W,) bool: words left out of fold-in (transform), or None
        # Fold-in with dense products gathers each batch's rows into one matrix, as the
        # in-memory fold-in holds them (the dense layout bounds it by DENSE_MAX_ENTRIES):
        # the same products on the same shapes round alike, and a rounding difference
        # can flip a document's SQUAREM step or stop and move its theta by 1e-9.
        self.gather = shape.dense and not tempered
        self.program_work = int(program_work)  # the in-memory program's variant
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.tempered = bool(tempered)
        self.hyper = jax.tree.map(lambda a: np.asarray(a, self.dtype), hyper)
        # the E-step's chunks carry no prior: the program adds log p(theta) + log p(phi)
        self.e_hyper = self.hyper._replace(prior_weight=np.zeros((), self.dtype))
        self.work = _chunk_work(shape, len(hyper.topic_mask))  # fit passes a topic mask

    def _theta_rows(self, theta, start, m):
        rows = np.zeros((self.shape.rows, theta.shape[1]), self.dtype)
        rows[:m] = theta[start : start + m]
        return rows

    def _e_chunk(self, block, start, theta, phi, with_objective):
        m = block.shape[0]
        corpus = chunk_corpus(block, self.shape, self.dtype)
        with jax.enable_x64(self.dtype == np.float64), jax.default_matmul_precision("highest"):
            out = _CHUNK_E_STEP.for_work(self.work)(
                self._theta_rows(theta, start, m),
                phi,
                corpus,
                self.e_hyper,
                tempered=self.tempered,
                with_objective=with_objective,
            )
            doc_counts, word_counts, data_term = (np.asarray(a, np.float64) for a in out)
        return doc_counts[:m], word_counts, data_term

    def _batch_rows(self, block, start, docs, where):
        """The documents ``docs`` (sorted) that lie in this chunk, and ``where``: their
        places in the host call's batch."""
        lo, hi = np.searchsorted(docs, [start, start + block.shape[0]])
        local, where = docs[lo:hi] - start, where[lo:hi]
        if len(local) < block.shape[0]:  # a batch of the documents still moving
            block = block[local]
        if self.drop is not None:
            block = without_words(block, self.drop)
        return where, block

    def _fold_chunk(self, block, start, theta, phi, docs, where):
        """Fold-in's E-step on the batch's documents in this chunk (``theta``: the
        batch's rows)."""
        where, block = self._batch_rows(block, start, docs, where)
        m = block.shape[0]
        rows = np.zeros((self.shape.rows, theta.shape[1]), self.dtype)
        rows[:m] = theta[where]
        corpus = chunk_corpus(block, self.shape, self.dtype)
        with jax.enable_x64(self.dtype == np.float64), jax.default_matmul_precision("highest"):
            out = _CHUNK_FOLD_IN.for_work(self.work)(
                rows, phi, corpus, self.hyper, tempered=self.tempered
            )
            return where, *(np.asarray(a, np.float64)[:m] for a in out)

    def _fold_rows(self, theta, phi, rows):
        """Fold-in's E-step on the batch ``rows`` of the program's documents (indices
        past the corpus are padding: zeros), reading only the chunks that hold them."""
        real = np.flatnonzero(rows < self.source.shape[0])
        where = real[np.argsort(rows[real], kind="stable")]
        docs = rows[where]
        starts = np.array([a for a, _ in _chunk_ranges(self.source)])
        which = np.unique(np.searchsorted(starts, docs, side="right") - 1).tolist()
        if self.gather:
            return self._fold_gathered(theta, phi, rows, docs, where, which)
        fn = partial(self._fold_chunk, theta=theta, phi=phi, docs=docs, where=where)
        out = (np.zeros(theta.shape), np.zeros(len(rows)), np.zeros(len(rows)))
        for where, *parts in map_chunks(self.source, fn, which):
            for full, part in zip(out, parts, strict=True):
                full[where] = part
        return out

    def reduce(self, name, theta, phi, flag=None):
        theta = np.asarray(theta, self.dtype)
        phi = np.asarray(phi, self.dtype)
        if name == "plsa_e_step":
            fn = partial(self._e_chunk, theta=theta, phi=phi, with_objective=bool(flag))
            parts = map_chunks(self.source, fn)
            doc_counts = self._padded(np.concatenate([p[0] for p in parts]), theta)
            word_counts = np.sum([p[1] for p in parts], axis=0)
            data_term = np.sum([p[2] for p in parts]) if flag else np.zeros(())
            return (doc_counts, word_counts), data_term
        assert name == "plsa_fold_in"
        return self._fold_rows(theta, phi, np.asarray(flag, np.int64))

    def _fold_gathered(self, theta, phi, rows, docs, where, which):
        """Fold-in's E-step on the batch as one dense matrix in the batch's row order."""
        dense = np.zeros((len(rows), self.shape.n_words), self.dtype)
        fn = partial(self._batch_rows, docs=docs, where=where)
        for places, block in map_chunks(self.source, fn, which):
            dense[places] = block.toarray()
        empty = np.zeros(0, np.int32)
        doc_mask = (rows < self.source.shape[0]).astype(self.dtype)
        zero = np.zeros((), self.dtype)
        corpus = plsa.Corpus(empty, empty, np.zeros(0, self.dtype), doc_mask, zero, dense)
        with jax.enable_x64(self.dtype == np.float64), jax.default_matmul_precision("highest"):
            out = _CHUNK_FOLD_IN.for_work(self.program_work)(
                theta, phi, corpus, self.hyper, tempered=False
            )
            return tuple(np.asarray(a, np.float64) for a in out)

    def _padded(self, rows, theta):
        """Per-document rows, with the program's padding rows (zeros) after them."""
        full = np.zeros((theta.shape[0], *rows.shape[1:]))
        full[: self.source.shape[0]] = rows
        return full
