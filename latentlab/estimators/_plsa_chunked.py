"""pLSA on the chunked route: count matrices read in row chunks (memmap, h5py, zarr,
``scipy.sparse`` wrapped in :class:`~latentlab.inference.chunked.RowChunks`) or held
as a Dask array (issue 20).

pLSA's E-step gives the topic-word counts ``n_kw`` as a sum over documents, but each
document's topic proportions ``theta_d`` are its own parameters.  ``theta`` is small
(n_documents x K) and stays in the compiled program, exactly as in memory; only the
counts live outside it.  Each E-step hands ``(theta, Phi)`` to the host through
:func:`latentlab.inference.chunked.host_sum`, which reads the counts chunk by chunk,
runs the model's own E-step (:func:`latentlab.models.plsa.e_step`) on each chunk with
its rows of ``theta``, and returns the documents' expected topic counts side by side,
the topic-word counts and ``sum x log p`` summed.  The EM driver, its starts, its
SQUAREM arithmetic, the lazy objective and the last (blockwise) fold-in are those of
the in-memory fit, so parameters and trace equal it to round-off.

A first pass validates the counts (non-negative integers, no empty documents) and
collects the documents' lengths, the words' totals, the multinomial coefficient and
the largest number of nonzeros in a chunk, which fixes the shapes of the one jitted
chunk function.

About 450 lines: the first pass, the host's chunk E-steps, the program and the fit's
attributes are one route, read together.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from latentlab.estimators._plsa_programs import (
    DENSE_MAX_ENTRIES,
    DENSE_MIN_DENSITY,
    FOLD_IN_MAX_ITER,
    PAD_TOPICS_MAX_WORK,
    _pad_topics,
    em_then_last_fold_in,
    topic_bucket,
)
from latentlab.estimators.base import warn_not_converged
from latentlab.inference.chunked import RowChunks, host_sum, register
from latentlab.inference.em import run_em
from latentlab.inference.programs import Program
from latentlab.inference.summaries import bucket
from latentlab.models import plsa
from latentlab.models._plsa_algebra import log_dirichlet, onto_simplex, onto_topics, topic_mask
from latentlab.models._plsa_fold_in import DocTopics, FoldInStats

__all__ = ["CountSummary", "summarise_counts", "read_counts", "fit_chunked"]


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


def _check_block(block: sp.csr_matrix, offset: int):
    """The checks of ``PLSA._counts`` for one chunk (rows numbered from ``offset``)."""
    data = block.data
    if not np.all(np.isfinite(data)):
        raise ValueError("Input X contains NaN or infinity; PLSA models word counts")
    for bad, what in ((data < 0, "negative"), (data != np.round(data), "non-integer")):
        if bad.any():
            raise ValueError(
                f"X contains {bad.sum()} {what} count(s) (e.g. {data[bad][0]:g}); "
                "PLSA models non-negative integer word counts"
            )
    block.eliminate_zeros()
    empty = offset + np.flatnonzero(np.diff(block.indptr) == 0)
    if empty.size:
        shown = ", ".join(map(str, empty[:10])) + (" ..." if empty.size > 10 else "")
        raise ValueError(
            f"X has {empty.size} empty document(s) (rows without counts): rows {shown}. "
            "Drop them; a document needs at least one token."
        )


def _block_summary(block: sp.csr_matrix, offset: int):
    _check_block(block, offset)
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
        """``|l_1|`` of :func:`latentlab.estimators._plsa_programs._tolerance_scale`,
        from the words' totals: ``-sum_w N_w log(N_w / N)``."""
        totals = self.word_totals[self.word_totals > 0]
        return max(float(-np.sum(totals * np.log(totals / totals.sum()))), 1.0)


def _chunk_ranges(source: RowChunks):
    if source.dask:
        edges = np.concatenate([[0], np.cumsum(source.source.chunks[0])])
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return source.slices()


def _dask_block(block, offset, fn):
    block = sp.csr_matrix(np.asarray(block, np.float64))
    block.sort_indices()
    return fn(block, offset)


def _map_chunks(source: RowChunks, fn):
    """``[fn(csr_chunk, offset) for every chunk]`` in row order (Dask: in parallel)."""
    if source.dask:
        import dask

        blocks = source.source.to_delayed().ravel()
        offsets = [start for start, _ in _chunk_ranges(source)]
        tasks = [dask.delayed(_dask_block)(b, o, fn) for b, o in zip(blocks, offsets, strict=True)]
        return list(dask.compute(*tasks))
    return [fn(read_counts(source, start, stop), start) for start, stop in source.slices()]


def summarise_counts(source: RowChunks) -> CountSummary:
    """One pass over ``source``: validation and what the fit needs besides the counts."""
    parts = _map_chunks(source, _block_summary)
    lengths = np.concatenate([p[0] for p in parts])
    totals = np.sum([p[1] for p in parts], axis=0)
    nnz = [p[2] for p in parts]
    return CountSummary(lengths, totals, int(sum(nnz)), max(nnz), float(sum(p[3] for p in parts)))


# ----------------------------------------------------------------------------- chunk E-steps


class Layout(NamedTuple):
    """Fixed shapes of a chunk's :class:`~latentlab.models.plsa.Corpus` (one compile)."""

    rows: int  # documents per chunk, padded
    n_words: int
    dense: bool  # carry the dense matrix (the in-memory rule, on the whole corpus)
    capacity: int  # nonzero entries per chunk, padded (0: not carried)


def layout(summary: CountSummary, chunk_rows: int, n_words: int, tempered: bool) -> Layout:
    """The in-memory route's choice of E-step (dense products or nonzeros), made on the
    whole corpus, with every chunk padded to the same shapes."""
    D = len(summary.doc_lengths)
    density = summary.nnz / max(D * n_words, 1)
    dense = density >= DENSE_MIN_DENSITY and bucket(D, 32) * n_words <= DENSE_MAX_ENTRIES
    nonzeros = tempered or not dense
    capacity = bucket(summary.max_chunk_nnz, 256) if nonzeros else 0
    return Layout(int(chunk_rows), int(n_words), bool(dense), int(capacity))


def chunk_corpus(block: sp.csr_matrix, shape: Layout, dtype) -> plsa.Corpus:
    """One chunk's counts as a Corpus of fixed shapes; no multinomial coefficient."""
    m = block.shape[0]
    doc_mask = np.zeros(shape.rows, dtype)
    doc_mask[:m] = 1.0
    matrix = None
    if shape.dense:
        matrix = np.zeros((shape.rows, shape.n_words), dtype)
        matrix[:m] = block.toarray()
    if shape.capacity == 0:  # the dense matrix only (untempered steps never read more)
        empty = np.zeros(0, np.int32)
        return plsa.Corpus(empty, empty, np.zeros(0, dtype), doc_mask, np.zeros((), dtype), matrix)
    pad = shape.capacity - block.nnz
    # padding entries (count 0) sit in the last row so the document index stays sorted
    doc = np.full(shape.capacity, shape.rows - 1, np.int32)
    doc[: block.nnz] = np.repeat(np.arange(m, dtype=np.int32), np.diff(block.indptr))
    word = np.concatenate([block.indices.astype(np.int32), np.zeros(pad, np.int32)])
    count = np.concatenate([block.data, np.zeros(pad)]).astype(dtype)
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
    """Elements a chunk's E-step touches (as ``_plsa_programs._work``)."""
    return (shape.rows * shape.n_words if shape.dense else shape.capacity) * n_topics


class CountsPass:
    """The host side of the chunked E-steps (see :func:`host_sum`): every chunk of
    counts, every E-step, with its rows of ``theta``."""

    def __init__(self, source: RowChunks, shape: Layout, hyper: plsa.Hyper, tempered, dtype):
        self.source = source
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

    def _fold_chunk(self, block, start, theta, phi):
        m = block.shape[0]
        corpus = chunk_corpus(block, self.shape, self.dtype)
        with jax.enable_x64(self.dtype == np.float64), jax.default_matmul_precision("highest"):
            out = _CHUNK_FOLD_IN.for_work(self.work)(
                self._theta_rows(theta, start, m), phi, corpus, self.hyper, tempered=self.tempered
            )
            return tuple(np.asarray(a, np.float64)[:m] for a in out)

    def reduce(self, name, theta, phi, flag=None):
        theta = np.asarray(theta, self.dtype)
        phi = np.asarray(phi, self.dtype)
        if name == "plsa_e_step":
            fn = partial(self._e_chunk, theta=theta, phi=phi, with_objective=bool(flag))
            parts = _map_chunks(self.source, fn)
            doc_counts = self._padded(np.concatenate([p[0] for p in parts]), theta)
            word_counts = np.sum([p[1] for p in parts], axis=0)
            data_term = np.sum([p[2] for p in parts]) if flag else np.zeros(())
            return (doc_counts, word_counts), data_term
        assert name == "plsa_fold_in"
        parts = _map_chunks(self.source, partial(self._fold_chunk, theta=theta, phi=phi))
        return tuple(self._padded(np.concatenate(part), theta) for part in zip(*parts, strict=True))

    def _padded(self, rows, theta):
        """Per-document rows, with the program's padding rows (zeros) after them."""
        full = np.zeros((theta.shape[0], *rows.shape[1:]))
        full[: self.source.shape[0]] = rows
        return full


# ----------------------------------------------------------------------------- program


class ChunkedCorpus(NamedTuple):
    """What the compiled program holds of a chunked corpus (the counts stay outside)."""

    token: jax.Array  # () int32: the registered CountsPass
    doc_mask: jax.Array  # (D_padded,) 1 for a document, 0 for padding
    tokens: jax.Array  # (D_padded,) tokens per document, at least 1 (fold-in's scales)
    log_coefficient: jax.Array  # () sum_d log N_d! - sum_dw log x_dw!


def chunked_e_step(params, data: ChunkedCorpus, hyper, *, tempered=False, with_objective=True):
    """:func:`latentlab.models.plsa.e_step` with the counts summed on the host."""
    theta, phi = onto_topics(params.theta, hyper), onto_simplex(params.phi)
    flag = jnp.asarray(with_objective, jnp.int32)
    like = ((theta, phi), jnp.zeros((), theta.dtype))
    (doc_counts, word_counts), data_term = host_sum(
        "plsa_e_step", data.token, (theta, phi, flag), like
    )

    def objective():
        value = data.log_coefficient + data_term
        topics = topic_mask(hyper, theta.shape[1], theta.dtype)

        def log_prior():
            prior = log_dirichlet(theta, hyper.doc_topic_prior, data.doc_mask, topics)
            return prior + log_dirichlet(phi, hyper.topic_word_prior, topics)

        zero = jnp.zeros((), value.dtype)
        return value + jax.lax.cond(hyper.prior_weight > 0, log_prior, lambda: zero)

    if with_objective is True:
        return plsa.TopicStats(doc_counts, word_counts), objective()
    nan = jnp.asarray(jnp.nan, theta.dtype)
    return plsa.TopicStats(doc_counts, word_counts), jax.lax.cond(
        with_objective, objective, lambda: nan
    )


class ChunkedFoldIn(NamedTuple):
    phi: jax.Array  # (K, W) the fixed topics
    hyper: plsa.Hyper


def _chunked_fold_in_e_step(params: DocTopics, data: ChunkedCorpus, fixed: ChunkedFoldIn):
    """Fold-in's E-step with the counts on the host; per-document objectives (the
    blocks of the EM driver's ``blockwise`` mode, as in memory)."""
    theta = onto_topics(params.theta, fixed.hyper)
    D = theta.shape[0]
    like = (theta, jnp.zeros(D, theta.dtype), jnp.zeros(D, theta.dtype))
    doc_counts, doc_loglik, doc_objective = host_sum(
        "plsa_fold_in", data.token, (theta, fixed.phi), like
    )
    return FoldInStats(doc_counts, doc_loglik, doc_objective), doc_objective


def _fold_in_m_step(stats, params, fixed: ChunkedFoldIn):
    return plsa.fold_in_m_step(stats, params, fixed)


_E_STEPS = {t: partial(chunked_e_step, tempered=t) for t in (False, True)}


def _fit_program(
    starts, data, hyper, scale, tol, fold_in_tol, *, max_iter, accelerate, verbose, tempered
):
    """EM from ``starts``, then the last fold-in at the fitted topics (as
    :func:`latentlab.estimators._plsa_programs._fit_program`, the counts on the host)."""

    def last_fold_in(theta, phi):
        folded = run_em(
            _chunked_fold_in_e_step,
            _fold_in_m_step,
            DocTopics(theta[None]),
            data,
            ChunkedFoldIn(phi, hyper),
            data.tokens,
            fold_in_tol,
            max_iter=FOLD_IN_MAX_ITER,
            blockwise=True,
        )
        topics = topic_mask(hyper, theta.shape[-1], theta.dtype)
        objective = data.log_coefficient + jnp.sum(folded.stats.doc_objective)
        phi_prior = log_dirichlet(phi, hyper.topic_word_prior, topics)
        return folded.params.theta, objective + jnp.where(hyper.prior_weight > 0, phi_prior, 0.0)

    return em_then_last_fold_in(
        _E_STEPS[tempered],
        plsa.m_step,
        starts,
        data,
        hyper,
        scale,
        tol,
        max_iter=max_iter,
        accelerate=accelerate,
        verbose=verbose,
        fold_in=last_fold_in,
    )


_FIT = Program(_fit_program, static_argnames=("max_iter", "accelerate", "verbose", "tempered"))

# ----------------------------------------------------------------------------- fit


def fit_chunked(est, source: RowChunks):
    """``PLSA.fit`` on a chunked source: exact EM, the counts read chunk by chunk."""
    if est.method != "em":
        raise ValueError(
            f"PLSA(method={est.method!r}) needs X in memory; out-of-core and Dask inputs "
            "are fitted by method='em'"
        )
    K = est._check_settings()
    D, W = source.shape
    if est.vocabulary is not None and len(est.vocabulary) != W:
        raise ValueError(f"vocabulary has {len(est.vocabulary)} words but X has {W} columns")
    summary = summarise_counts(source)
    unseen = np.flatnonzero(summary.word_totals == 0)
    if unseen.size:
        shown = ", ".join(map(str, unseen[:10])) + (" ..." if unseen.size > 10 else "")
        warnings.warn(
            f"{unseen.size} word(s) never occur in X (columns {shown}); they get "
            "probability 0 in every topic (only prior mass with topic_word_prior > 1)",
            UserWarning,
            stacklevel=3,
        )
    est.n_features_in_ = W
    est.__dict__.pop("feature_names_in_", None)
    theta0 = est._user_init("doc_topic_init", (D, K))
    phi0 = est._user_init("topic_word_init", (K, W))
    tempered = est.tempering != 1
    chunk_rows = int(source.chunk_size)
    shape = layout(summary, bucket(chunk_rows, 8), W, tempered)
    n_docs = bucket(D, 32)  # the in-memory fit's padded rows: the same random starts
    # the in-memory rule for padding the topic axis (_plsa_programs._padded_topics)
    work = (n_docs * W if shape.dense else bucket(summary.nnz, 256)) * topic_bucket(K)
    n_topics = topic_bucket(K) if work <= PAD_TOPICS_MAX_WORK else K
    with est._precision():
        dtype = np.dtype(jax.dtypes.canonicalize_dtype(np.float64))
        starts = est._starts(n_docs, D, W, K, theta0, phi0, dtype)
        starts = plsa.Params(*(a.astype(dtype) for a in _pad_topics(*starts, n_topics)))
        hyper = est._hyper(dtype, K, n_topics)
        tokens = np.ones(n_docs, dtype)
        tokens[:D] = np.maximum(summary.doc_lengths, 1.0)
        doc_mask = (np.arange(n_docs) < D).astype(dtype)
        with register(CountsPass(source, shape, hyper, tempered, dtype)) as token:
            data = ChunkedCorpus(
                token, doc_mask, tokens, np.asarray(summary.log_coefficient, dtype)
            )
            out = _FIT.for_work(work // topic_bucket(K) * n_topics)(
                starts,
                data,
                hyper,
                np.asarray(summary.tolerance_scale(), dtype),
                np.asarray(est.tol, dtype),
                np.asarray(est._fold_in_tol(dtype), dtype),
                max_iter=int(est.max_iter),
                accelerate=bool(est.accelerate),
                verbose=int(est.verbose),
                tempered=tempered,
            )
            theta, phi, trace, n_iter, converged, objective = jax.device_get(out)
    return _store(est, theta, phi, trace, int(n_iter), bool(converged), float(objective), summary)


def _store(est, theta, phi, trace, n_iter, converged, objective, summary: CountSummary):
    """The fitted attributes, as ``PLSA.fit`` sets them in memory."""
    K = est._check_settings()
    D = len(summary.doc_lengths)
    trace = np.array(trace[:n_iter], dtype=np.float64)
    trace[-1] = objective  # the last entry is at the returned parameters
    est._end_fit(
        {"theta": np.array(theta[:D, :K], np.float64), "phi": np.array(phi[:K], np.float64)},
        trace,
        n_iter,
        converged,
        objective=objective,
        advice="the counts may be degenerate for this model (try fewer topics)",
    )
    est.n_components_ = K
    est.doc_lengths_ = np.array(summary.doc_lengths, np.float64)
    est.vocabulary_ = (
        None if est.vocabulary is None else np.asarray(list(est.vocabulary), dtype=object)
    )
    if not est.converged_:
        warn_not_converged(est)
    return est
