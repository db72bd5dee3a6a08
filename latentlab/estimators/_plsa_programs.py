"""pLSA's fold-in program, its inputs (the padded corpus, the hyperparameters) and
corpus preparation, for :class:`latentlab.PLSA`.

The estimator's fit (:func:`latentlab.inference.em.fit_em` with the last fold-in as
its finish: :func:`latentlab.models.plsa.em_model`) and fold-in each run as one
jit-compiled program, with the topic axis padded to buckets and the documents to
row buckets so that searches over K and cross-validation folds share programs.  The
count matrix is handed to them as a padded :class:`~latentlab.models.plsa.Corpus`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from latentlab._shapes import bucket, fold_in_rows, topics
from latentlab.estimators.base import to_numpy
from latentlab.inference.programs import Program
from latentlab.models import plsa

FOLD_IN_TOL = plsa.FOLD_IN_TOL
FOLD_IN_MAX_ITER = plsa.FOLD_IN_MAX_ITER


def fold_in_tol(dtype) -> float:
    """Fold-in's stopping tolerance in ``dtype``: :data:`FOLD_IN_TOL`, or 100 ulps
    where that is coarser (float32)."""
    return max(FOLD_IN_TOL, 100 * float(np.finfo(dtype).eps))


def hyperparameters(
    doc_topic_prior, topic_word_prior, use_prior: bool, tempering, dtype
) -> plsa.Hyper:
    """The settings as the programs' :class:`~latentlab.models.plsa.Hyper` of NumPy
    scalars in ``dtype``; a prior of None is 1 (flat)."""
    alpha = 1.0 if doc_topic_prior is None else float(doc_topic_prior)
    beta = 1.0 if topic_word_prior is None else float(topic_word_prior)
    values = (alpha, beta, float(use_prior), float(tempering))
    dtype = np.dtype(dtype)
    return plsa.Hyper(*(np.asarray(v, dtype) for v in values))


def with_topics(hyper: plsa.Hyper, K: int, n_topics: int) -> plsa.Hyper:
    """``hyper`` with the topic mask of K real topics padded to ``n_topics``."""
    mask = (np.arange(n_topics) < K).astype(hyper.tempering.dtype)
    return hyper._replace(topic_mask=mask)


def _fold_in_program(theta, corpus, phi, hyper, tol, *, max_iter, tempered):
    """Fold-in with topics ``phi``, from ``theta`` (None: uniform), as one program:
    ``(theta, per-document sum x log p, objective, converged)``."""
    if theta is None:
        uniform = plsa.uniform_topics(hyper, phi.shape[0], phi.dtype)
        theta = jnp.broadcast_to(uniform, (corpus.doc_mask.shape[0], phi.shape[0]))
    theta, stats, objective, _, converged = plsa.fold_in(
        theta,
        corpus,
        plsa.fold_in_hyper(phi, corpus, hyper),
        tol,
        max_iter=max_iter,
        tempered=tempered,
    )
    return theta, stats.doc_loglik, objective, converged


# Small corpora run the quick-compile variant (see latentlab.inference.programs).
_FOLD_IN = Program(_fold_in_program, static_argnames=("max_iter", "tempered"))


def run_fold_in(corpus: plsa.Corpus, phi, hyper: plsa.Hyper, *, tempered: bool, theta=None):
    """Fold-in at the topics ``phi`` (n_topics, W) from ``theta`` (n_docs_padded,
    n_topics), uniform by default, by the compiled program for this corpus size: theta,
    the per-document sum x log p (no coefficient), the fit objective at (theta, phi)
    and whether fold-in converged; NumPy outputs."""
    dtype = np.dtype(corpus.doc_mask.dtype)
    n_topics = phi.shape[0]
    if theta is not None:
        theta = np.asarray(theta, dtype)
    theta, doc_loglik, objective, converged = _fold_in_driver(corpus, n_topics)(
        theta,
        corpus,
        np.asarray(phi, dtype),
        hyper,
        np.asarray(fold_in_tol(dtype), dtype),
        max_iter=FOLD_IN_MAX_ITER,
        tempered=tempered,
    )
    return to_numpy(theta), to_numpy(doc_loglik), float(objective), bool(converged)


def _work(corpus: plsa.Corpus, n_components: int) -> int:
    """Elements an E-step touches: (D, W, K) products dense, (nnz, K) at the nonzeros."""
    if corpus.dense is not None:
        return corpus.dense.size * n_components
    return corpus.count.shape[0] * n_components


def _fold_in_driver(corpus: plsa.Corpus, n_components: int):
    """The compiled fold-in program for this corpus size."""
    return _FOLD_IN.for_work(_work(corpus, n_components))


def _padded_topics(corpus: plsa.Corpus, n_components: int) -> int:
    """The number of topics to compute with for ``corpus`` (:func:`latentlab._shapes.topics`)."""
    return topics(n_components, _work(corpus, 1))


def _pad_topics(theta, phi, n_topics):
    """theta (..., D, K) with zero columns and phi (..., K, W) with uniform rows, up to
    ``n_topics``: padding topics that nothing uses."""
    pad = n_topics - theta.shape[-1]
    if pad == 0:
        return theta, phi
    zeros = np.zeros((*theta.shape[:-1], pad))
    uniform = np.full((*phi.shape[:-2], pad, phi.shape[-1]), 1.0 / phi.shape[-1])
    return np.concatenate([theta, zeros], -1), np.concatenate([phi, uniform], -2)


# The EM E-step uses dense matrix products (O(D W K) multiply-adds) instead of gathers
# and scatters at the nonzeros (O(nnz K), each several times dearer on CPU) when the
# corpus has at least this share of nonzeros, and the dense matrix stays small.
# Measured per EM step: digits (51% nonzero) 1.4-2.3 ms dense against 2.8-4.9 ms at
# the nonzeros; a 2,000 x 1,000 corpus with 10% nonzeros 31-39 ms against 8-13 ms.
DENSE_MIN_DENSITY = 0.3
DENSE_MAX_ENTRIES = 1 << 24


def takes_dense(nnz: int, n_documents: int, n_words: int, n_rows: int) -> bool:
    """Whether the E-step runs on the dense matrix: the density of the real documents
    (padding must not flip the choice) and the size of the padded ``n_rows`` matrix."""
    density = nnz / max(n_documents * n_words, 1)
    return density >= DENSE_MIN_DENSITY and n_rows * n_words <= DENSE_MAX_ENTRIES


def _tolerance_scale(csr) -> float:
    """``|l_1|``: minus the log-likelihood, without the multinomial coefficient, of one
    topic (every document drawn from the corpus's word frequencies), at least 1.

    The scale of EM's relative stopping rule.  Every fit with K >= 1 topics lies
    between it and 0, and (unlike the log-likelihood itself) it does not move with the
    constant multinomial coefficient, which can be many times larger than the part
    that EM changes (digits: +1.76e6 against -1.95e6).
    """
    frequencies = np.asarray(csr.sum(axis=0)).ravel() / csr.sum()
    return max(float(-np.sum(csr.data * np.log(frequencies[csr.indices]))), 1.0)


def _corpus(csr, dtype, dense=None, *, nonzeros=None, new_documents=False) -> plsa.Corpus:
    """The counts of ``csr`` as a padded :class:`~latentlab.models.plsa.Corpus` of NumPy
    arrays (handed to the jitted programs as they are: ``jnp.asarray`` of an integer
    array compiles a program per shape).

    ``dense``: carry the dense count matrix (None: decided by the density).
    ``nonzeros``: carry the nonzero entries (None: unless the matrix is carried; the
    untempered steps never read them then, and leaving them out keeps the programs'
    shapes independent of the number of nonzeros).  ``new_documents``: documents to
    fold in, padded to the coarser buckets of :func:`latentlab._shapes.fold_in_rows`.
    """
    D, nnz = csr.shape[0], csr.nnz
    n_docs = fold_in_rows(D) if new_documents else bucket(D, 32)
    dtype = np.dtype(dtype)
    if dense is None:
        dense = takes_dense(nnz, D, csr.shape[1], n_docs)
    nonzeros = not dense if nonzeros is None else nonzeros
    matrix = plsa.padded_rows(csr, n_docs, dtype) if dense else None
    if nonzeros:
        capacity = fold_in_rows(nnz) if new_documents else bucket(nnz, 256)
        doc, word, count = plsa.padded_entries(csr, n_docs, capacity, dtype)
    else:
        doc, word, count = np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, dtype)
    doc_mask = np.concatenate([np.ones(D), np.zeros(n_docs - D)]).astype(dtype)
    log_coefficient = np.asarray(plsa.log_coefficients(csr).sum(), dtype)
    return plsa.Corpus(doc, word, count, doc_mask, log_coefficient, matrix)
