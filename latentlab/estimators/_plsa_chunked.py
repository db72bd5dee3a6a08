"""pLSA on the chunked route: count matrices read in row chunks (memmap, h5py, zarr,
``scipy.sparse`` wrapped in :class:`~latentlab.inference.chunked.RowChunks`) or held
as a Dask array.

pLSA's E-step gives the topic-word counts ``n_kw`` as a sum over documents, but each
document's topic proportions ``theta_d`` are its own parameters.  ``theta`` is small
(n_documents x K) and stays in the compiled program, exactly as in memory; only the
counts live outside it.  Each E-step hands ``(theta, Phi)`` to the host through
:func:`latentlab.inference.chunked.host_sum`, where
:class:`~latentlab._plsa_chunk_tasks.CountsPass` reads the counts chunk by
chunk, runs the model's own E-step (:func:`latentlab.models.plsa.e_step`) on each
chunk with its rows of ``theta``, and returns the documents' expected topic counts side
by side, the topic-word counts and ``sum x log p`` summed.  The fit program is the
in-memory one (its starts, SQUAREM arithmetic and lazy objective), with this E-step
and a last fold-in that follows the in-memory schedule of shrinking batches
(:func:`chunked_fold_in`), so parameters and trace equal it to round-off.  The same
fold-in serves ``transform`` and the scores of chunked and Dask inputs.
"""

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab._plsa_chunk_tasks import (
    CountsPass,
    CountSummary,
    Layout,
    map_chunks,
    new_block_summary,
)
from latentlab._shapes import bucket, fold_in_rows, topics
from latentlab.estimators._plsa_fitting import draw_starts, fit_em_program
from latentlab.estimators._plsa_programs import (
    FOLD_IN_MAX_ITER,
    _pad_topics,
    fold_in_tol,
    takes_dense,
    with_topics,
)
from latentlab.inference.chunked import RowChunks, host_sum, register
from latentlab.inference.em import run_em
from latentlab.inference.programs import Program
from latentlab.models import plsa
from latentlab.models._plsa_algebra import log_dirichlet, onto_simplex, onto_topics, topic_mask
from latentlab.models._plsa_fold_in import STAGE_CYCLES, DocTopics, FoldInStats

# ----------------------------------------------------------------------------- program


class ChunkedCorpus(NamedTuple):
    """What the compiled program holds of a chunked corpus (the counts stay outside)."""

    token: jax.Array  # () int32: the registered CountsPass
    doc_mask: jax.Array  # (D_padded,) 1 for a document, 0 for padding
    tokens: jax.Array  # (D_padded,) tokens per document, at least 1 (fold-in's scales)
    log_coefficient: jax.Array  # () sum_d log N_d! - sum_dw log x_dw!
    rows: jax.Array  # (D_padded,) int32: which documents fold-in's E-step reads (a batch)


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
        "plsa_fold_in", data.token, (theta, fixed.phi, data.rows), like
    )
    return FoldInStats(doc_counts, doc_loglik, doc_objective), doc_objective


def _fold_in_m_step(stats, params, fixed: ChunkedFoldIn):
    return plsa.fold_in_m_step(stats, params, fixed)


def chunked_fold_in(theta, data: ChunkedCorpus, phi, hyper, tol, *, max_iter, staged):
    """:func:`latentlab.models.plsa.fold_in` with the counts on the host: the same
    blockwise SQUAREM and, with ``staged`` (where the in-memory fold-in stages: a dense
    untempered corpus of more than one batch size), the same shrinking batches, each
    batch's counts read from the chunks that hold its documents.

    Returns ``(theta, stats, objective, converged)``, statistics and fit objective at
    the returned theta."""
    fixed = ChunkedFoldIn(phi, hyper)

    def run_batch(rows, theta_rows, cycles):
        batch = data._replace(rows=rows, doc_mask=data.doc_mask[rows], tokens=data.tokens[rows])
        return run_em(
            _chunked_fold_in_e_step,
            _fold_in_m_step,
            DocTopics(theta_rows[None]),
            batch,
            fixed,
            batch.tokens,
            tol,
            max_iter=cycles,
            blockwise=True,
        )

    if staged:
        theta, converged, _ = plsa.in_shrinking_batches(
            partial(run_batch, cycles=STAGE_CYCLES), theta, data.doc_mask, max_iter=max_iter
        )
        stats, _ = _chunked_fold_in_e_step(DocTopics(theta), data, fixed)
    else:
        folded = run_batch(data.rows, theta, max_iter)
        theta, stats, converged = folded.params.theta, folded.stats, folded.converged
    topics = topic_mask(hyper, theta.shape[-1], theta.dtype)
    objective = data.log_coefficient + jnp.sum(stats.doc_objective)
    phi_prior = log_dirichlet(phi, hyper.topic_word_prior, topics)
    objective += jnp.where(hyper.prior_weight > 0, phi_prior, 0.0)
    return theta, stats, objective, converged


_E_STEPS = {t: partial(chunked_e_step, tempered=t) for t in (False, True)}


def _last_fold_in(theta, data, phi, hyper, tol, *, staged):
    """The fit's last fold-in (the ``fold_in`` hook of the in-memory fit program)."""
    theta, _, objective, _ = chunked_fold_in(
        theta, data, phi, hyper, tol, max_iter=FOLD_IN_MAX_ITER, staged=staged
    )
    return theta, objective


# the same objects every fit: the fit program takes them as static arguments
_LAST_FOLD_IN = {staged: partial(_last_fold_in, staged=staged) for staged in (False, True)}


def layout(
    summary: CountSummary, chunk_rows: int, n_words: int, tempered: bool, n_docs: int
) -> Layout:
    """The in-memory route's choice of E-step (dense products or nonzeros), made on the
    whole corpus (padded to ``n_docs`` rows), with every chunk padded to the same
    shapes."""
    dense = takes_dense(summary.nnz, len(summary.doc_lengths), n_words, n_docs)
    nonzeros = tempered or not dense
    capacity = bucket(summary.max_chunk_nnz, 256) if nonzeros else 0
    return Layout(int(chunk_rows), int(n_words), bool(dense), int(capacity))


def _staged(shape: Layout, tempered: bool, n_docs: int) -> bool:
    """Whether the in-memory fold-in of this corpus runs in shrinking batches."""
    return shape.dense and not tempered and len(plsa.fold_in_batch_sizes(n_docs)) > 1


# ----------------------------------------------------------------------------- fit


def fit_chunked(
    source: RowChunks,
    summary: CountSummary,
    K: int,
    hyper: plsa.Hyper,
    *,
    tempered: bool,
    theta0,
    phi0,
    random_state,
    n_init: int,
    tol,
    max_iter: int,
    accelerate: bool,
    verbose: int,
):
    """Exact EM on a chunked source (its ``summary`` from
    :func:`~latentlab._plsa_chunk_tasks.summarise_counts`), the counts read chunk by
    chunk: the outputs of :func:`~latentlab.estimators._plsa_fitting.fit_em_program`,
    with the in-memory fit's padding, starts and schedule.  ``hyper``: the K topics'
    hyperparameters (their dtype is the program's).  Call it in the estimator's
    precision."""
    D, W = source.shape
    chunk_rows = int(source.chunk_size)
    n_docs = bucket(D, 32)  # the in-memory fit's padded rows: the same random starts
    shape = layout(summary, bucket(chunk_rows, 8), W, tempered, n_docs)
    staged = _staged(shape, tempered, n_docs)
    # the in-memory rule for padding the topic axis
    per_topic = n_docs * W if shape.dense else bucket(summary.nnz, 256)
    n_topics = topics(K, per_topic)
    dtype = np.dtype(hyper.tempering.dtype)
    starts = draw_starts(random_state, n_init, n_docs, D, W, K, theta0, phi0, dtype)
    tokens = np.ones(n_docs, dtype)
    tokens[:D] = np.maximum(summary.doc_lengths, 1.0)
    doc_mask = (np.arange(n_docs) < D).astype(dtype)
    program_work = per_topic * n_topics
    program_hyper = with_topics(hyper, K, n_topics)
    counts = CountsPass(source, shape, program_hyper, tempered, dtype, program_work=program_work)
    with register(counts) as token:
        data = ChunkedCorpus(
            token,
            doc_mask,
            tokens,
            np.asarray(summary.log_coefficient, dtype),
            np.arange(n_docs, dtype=np.int32),
        )
        # the in-memory fit's program, its E-step and last fold-in on the host
        route = (_E_STEPS[tempered], n_topics, program_work, _LAST_FOLD_IN[staged])
        return fit_em_program(
            data,
            starts,
            summary.tolerance_scale(),
            K,
            hyper,
            tol=tol,
            max_iter=max_iter,
            accelerate=accelerate,
            verbose=verbose,
            tempered=tempered,
            chunked=route,
        )


# ----------------------------------------------------------------------------- fold-in


def _fold_in_program(theta, data, phi, hyper, tol, *, max_iter, staged):
    theta, stats, objective, converged = chunked_fold_in(
        theta, data, phi, hyper, tol, max_iter=max_iter, staged=staged
    )
    return theta, stats.doc_loglik, objective, converged


_FOLD_IN = Program(_fold_in_program, static_argnames=("max_iter", "staged"))


def fold_in_source(source: RowChunks, phi, hyper: plsa.Hyper, *, tempered: bool):
    """:func:`~latentlab.estimators._plsa_fold_in.fold_in_documents` on a chunked
    source: the in-memory fold-in's program (its padding, topic padding, batches and
    compiled variant) at the topics ``phi`` (K, W) with the K topics' ``hyper``, the
    counts read from the host, so theta equals the in-memory ``transform`` to
    round-off.  Call it in the estimator's precision.

    Returns ``(theta (n, K), sum x log p per document, multinomial coefficient per
    document, impossible documents, converged, tokens in all)``, NumPy; theta (n x K) is held on the
    client, as in the chunked fit."""
    D, W = source.shape
    K = phi.shape[0]
    drop = phi.sum(axis=0) <= 0
    parts = map_chunks(source, partial(new_block_summary, drop=drop))
    lengths = np.concatenate([p[0] for p in parts])
    impossible = np.concatenate([p[1] for p in parts])
    coefficients = np.concatenate([p[2] for p in parts])
    nnz = [p[3] for p in parts]
    summary = CountSummary(lengths, np.zeros(W), int(sum(nnz)), max(nnz), 0.0)
    n_docs = fold_in_rows(D)  # the in-memory fold-in's padded rows
    shape = layout(summary, bucket(int(source.chunk_size), 8), W, tempered, n_docs)
    # the in-memory rule for padding the topic axis
    per_topic = n_docs * W if shape.dense else fold_in_rows(summary.nnz)
    n_topics = topics(K, per_topic)
    dtype = np.dtype(hyper.tempering.dtype)
    _, phi = _pad_topics(np.zeros((0, K)), phi, n_topics)
    hyper = with_topics(hyper, K, n_topics)
    theta = np.broadcast_to(plsa.uniform_topics(hyper, n_topics, dtype), (n_docs, n_topics))
    tokens = np.ones(n_docs, dtype)
    tokens[:D] = np.maximum(lengths, 1.0)
    doc_mask = (np.arange(n_docs) < D).astype(dtype)
    work = per_topic * n_topics
    counts = CountsPass(source, shape, hyper, tempered, dtype, program_work=work, drop=drop)
    with register(counts) as token:
        data = ChunkedCorpus(
            token,
            doc_mask,
            tokens,
            np.zeros((), dtype),  # the objective is not reported
            np.arange(n_docs, dtype=np.int32),
        )
        out = _FOLD_IN.for_work(work)(
            np.asarray(theta, dtype),
            data,
            np.asarray(phi, dtype),
            hyper,
            np.asarray(fold_in_tol(dtype), dtype),
            max_iter=FOLD_IN_MAX_ITER,
            staged=_staged(shape, tempered, n_docs),
        )
        theta, doc_loglik, _, converged = jax.device_get(out)
    theta = np.array(theta[:D, :K], np.float64)
    doc_loglik = np.array(doc_loglik[:D], np.float64)
    tokens = float(sum(p[4] for p in parts))
    return theta, doc_loglik, coefficients, impossible, bool(converged), tokens
