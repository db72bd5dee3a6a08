"""Fold-in for pLSA (Hofmann 1999): the topic proportions theta of documents, with
the topics Phi held fixed (:mod:`latentlab.models.plsa` re-exports every name here).

Every document is its own concave problem in theta_d, and the EM driver
(:func:`latentlab.inference.em.run_em`) runs SQUAREM in its ``blockwise`` mode, one step
length and stop rule per document; its objective is the full fit objective at (theta,
Phi), so the fold-in of the training corpus reports the fit's objective.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp

from latentlab._shapes import MIN_STAGE_ROWS
from latentlab.closed_form.nmf import kl_multiplicative_terms
from latentlab.inference.em import run_em
from latentlab.models._plsa_algebra import (
    doc_sum,
    log_dirichlet,
    log_dirichlet_rows,
    onto_topics,
    token_terms,
    topic_mask,
    update_theta,
)

if TYPE_CHECKING:  # the model module imports this one: its types only for annotations
    from latentlab.models.plsa import Corpus, Hyper

__all__ = [
    "DocTopics",
    "FoldInStats",
    "FoldInHyper",
    "fold_in_hyper",
    "fold_in_e_step",
    "fold_in_m_step",
    "fold_in",
    "fold_in_batch_sizes",
    "in_shrinking_batches",
]


class DocTopics(NamedTuple):
    """What fold-in fits: the document-topic proportions alone, ``phi`` held fixed."""

    theta: jax.Array  # (D, K)


class FoldInStats(NamedTuple):
    doc_counts: jax.Array  # (D, K)
    doc_loglik: jax.Array  # (D,) sum_w x_dw log (theta_d Phi)_w, untempered, no coefficient
    doc_objective: jax.Array  # (D,) each document's part of the objective that theta_d moves


class FoldInHyper(NamedTuple):
    """What fold-in holds fixed: the topics, read at the corpus's nonzeros once."""

    phi_entries: jax.Array  # (nnz, K) phi_kw at every entry's word: (phi^T)[corpus.word]
    phi_log_prior: jax.Array  # () log p(phi), a constant of the MAP objective
    hyper: Hyper
    phi: jax.Array | None = None  # (K, W) the topics, for a corpus with a dense matrix


def fold_in_hyper(phi, corpus: Corpus, hyper: Hyper) -> FoldInHyper:
    """Fold-in's fixed part for ``corpus``: the topics at its entries and their log prior."""
    topics = topic_mask(hyper, phi.shape[0], phi.dtype)
    phi_log_prior = log_dirichlet(phi, hyper.topic_word_prior, topics)
    phi_dense = phi if corpus.dense is not None else None
    return FoldInHyper(phi.T[corpus.word], phi_log_prior, hyper, phi_dense)


def fold_in_e_step(
    params: DocTopics, corpus: Corpus, fixed: FoldInHyper, *, tempered: bool = False
):
    """E-step for theta alone (Hofmann's folding-in): the topics stay fixed.

    Its objective is the full fit objective at (theta, phi), so the fold-in of the
    training corpus reports the fit's objective.
    """
    theta = onto_topics(params.theta, fixed.hyper)
    n_docs = theta.shape[0]
    if corpus.dense is not None and fixed.phi is not None and not tempered:
        # the model's dense E-step (KL-NMF's update), of which fold-in needs n_dk only
        doc_counts, _, safe = kl_multiplicative_terms(theta, fixed.phi, corpus.dense)
        doc_loglik = doc_data = jnp.sum(corpus.dense * jnp.log(safe), axis=1)
    else:
        expected, log_total, log_probability = token_terms(
            theta, fixed.phi_entries, corpus, fixed.hyper.tempering, tempered
        )
        doc_counts = doc_sum(expected, corpus, n_docs)
        doc_loglik = doc_sum(corpus.count * log_probability, corpus, n_docs)
        doc_data = doc_sum(log_total, corpus, n_docs)
    use_prior = fixed.hyper.prior_weight > 0
    topics = topic_mask(fixed.hyper, theta.shape[1], theta.dtype)
    doc_prior = jax.lax.cond(  # a branch: ML fold-in skips the D x K logarithms
        use_prior,
        lambda: log_dirichlet_rows(theta, fixed.hyper.doc_topic_prior, topics) * corpus.doc_mask,
        lambda: jnp.zeros_like(doc_data),
    )
    doc_objective = doc_data + doc_prior
    objective = corpus.log_coefficient + jnp.sum(doc_objective)
    objective += jnp.where(use_prior, fixed.phi_log_prior, 0.0)
    return FoldInStats(doc_counts, doc_loglik, doc_objective), objective


def fold_in_m_step(stats: FoldInStats, params: DocTopics, fixed: FoldInHyper) -> DocTopics:
    return DocTopics(update_theta(stats.doc_counts, fixed.hyper))


def _doc_objectives(params: DocTopics, corpus: Corpus, fixed: FoldInHyper, *, tempered: bool):
    """:func:`fold_in_e_step` with each document's objective as the objective: the
    blocks of the EM driver's ``blockwise`` mode."""
    stats, _ = fold_in_e_step(params, corpus, fixed, tempered=tempered)
    return stats, stats.doc_objective


def _fit_objective(stats: FoldInStats, corpus: Corpus, fixed: FoldInHyper):
    """The fit objective from the documents' parts (as :func:`fold_in_e_step`)."""
    objective = corpus.log_coefficient + jnp.sum(stats.doc_objective)
    return objective + jnp.where(fixed.hyper.prior_weight > 0, fixed.phi_log_prior, 0.0)


_DOC_STEPS = {tempered: partial(_doc_objectives, tempered=tempered) for tempered in (False, True)}


# Documents converge at very different speeds: on digits (K = 10 and 20) a third are
# still moving after 20 SQUAREM cycles, a twentieth after 60, the last after ~100, and
# the driver stops only when all have.  With a dense count matrix the documents still
# moving are therefore gathered, every STAGE_CYCLES cycles, into batches of D, D/4,
# D/16, ... rows (down to latentlab._shapes.MIN_STAGE_ROWS), so that the long tail
# costs a fraction of full-batch cycles.
STAGE_CYCLES = 16
STAGE_SHRINK = 4


def fold_in_batch_sizes(n_docs: int) -> list[int]:
    """Row counts of the batches: n_docs, then each a quarter of the one before (a
    multiple of 8), down to MIN_STAGE_ROWS."""
    sizes = [n_docs]
    while sizes[-1] > 2 * MIN_STAGE_ROWS:
        sizes.append(max(MIN_STAGE_ROWS, -(-sizes[-1] // STAGE_SHRINK // 8) * 8))
    return sizes


def fold_in(
    theta,
    corpus: Corpus,
    fixed: FoldInHyper,
    tol,
    *,
    max_iter: int,
    tempered: bool = False,
):
    """Fold in every document of ``corpus``: theta maximising the objective, topics fixed.

    Each document is its own concave problem, so the EM driver runs SQUAREM (Varadhan
    & Roland 2008, S3) in its ``blockwise`` mode, per document: its own step length,
    its own monotone fallback, its own stop rule (objective change per cycle <= ``tol``
    per token).  One global step length, as the coupled fit uses, would be set by the
    slowest document.  With a dense count matrix, the documents not yet converged are
    gathered into ever smaller batches (see ``STAGE_CYCLES``).

    Returns ``(theta, stats, objective, n_iter, converged)``: statistics and objective
    at the returned theta; ``n_iter`` counts cycles of every batch.
    """
    if corpus.dense is not None:  # the nonzeros may be left out of a dense corpus
        tokens = jnp.sum(corpus.dense, axis=1)
    else:
        tokens = doc_sum(corpus.count, corpus, theta.shape[0])
    scale = jnp.maximum(tokens, 1.0)
    steps = (_DOC_STEPS[bool(tempered)], fold_in_m_step)
    sizes = fold_in_batch_sizes(theta.shape[0])
    if corpus.dense is None or fixed.phi is None or tempered or len(sizes) == 1:
        result = run_em(
            *steps,
            DocTopics(theta[None]),
            corpus,
            fixed,
            scale,
            tol,
            max_iter=max_iter,
            blockwise=True,
        )
        stats = result.stats
        return (
            result.params.theta,
            stats,
            _fit_objective(stats, corpus, fixed),
            result.n_iter,
            result.converged,
        )

    def run_batch(rows, theta_rows):
        batch = corpus._replace(dense=corpus.dense[rows], doc_mask=corpus.doc_mask[rows])
        return run_em(
            *steps,
            DocTopics(theta_rows[None]),
            batch,
            fixed,
            scale[rows],
            tol,
            max_iter=STAGE_CYCLES,
            blockwise=True,
        )

    theta, converged, n_iter = in_shrinking_batches(
        run_batch, theta, corpus.doc_mask, max_iter=max_iter
    )
    stats, _ = fold_in_e_step(DocTopics(theta), corpus, fixed, tempered=tempered)
    return theta, stats, _fit_objective(stats, corpus, fixed), n_iter, converged


def in_shrinking_batches(run_batch, theta, doc_mask, *, max_iter: int):
    """Fold-in's batch schedule (see ``STAGE_CYCLES``), whatever holds the counts.

    ``run_batch(rows, theta[rows])`` runs at most STAGE_CYCLES blockwise SQUAREM cycles
    on the documents ``rows`` and returns the driver's result.  Every stage gathers the
    documents not yet converged first (in row order, then the converged ones) into a
    batch of the stage's size.  The in-memory fold-in and the chunked one (counts on
    the host) share this schedule, so they fold in the same documents together and
    agree to round-off.  Returns ``(theta, all converged, cycles)``.
    """
    sizes = fold_in_batch_sizes(theta.shape[0])

    def stage(state, size):
        theta, converged, n_iter = state
        rows = jnp.argsort(converged, stable=True)[:size]  # the unconverged come first
        result = run_batch(rows, theta[rows])
        theta = theta.at[rows].set(result.params.theta)
        converged = converged.at[rows].set(result.block_converged | (doc_mask[rows] == 0))
        return theta, converged, n_iter + result.n_iter

    state = (theta, doc_mask == 0, jnp.asarray(0))
    for level, size in enumerate(sizes):
        # stay at this batch size while more documents move than the next one holds
        following = sizes[level + 1] if level + 1 < len(sizes) else 0

        def moving(state, following=following):
            _, converged, n_iter = state
            return (jnp.sum(~converged) > following) & (n_iter < max_iter)

        state = jax.lax.while_loop(moving, partial(stage, size=size), state)
    theta, converged, n_iter = state
    return theta, jnp.all(converged), n_iter
