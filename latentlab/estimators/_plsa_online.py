"""Stepwise (online) EM for pLSA, as functions: the statistics behind
``PLSA.partial_fit`` on a stream of documents.

pLSA's parameters are of two kinds.  The topics ``Phi`` are shared: their sufficient
statistics are the expected topic-word counts ``n_kw``, a sum over documents.  Each
document's proportions ``theta_d`` are its own, so a chunk's documents are *folded
in* (``theta`` maximised with the topics fixed, as ``transform`` does) and then
forgotten.  Cappe & Moulines' (2009) stepwise EM then runs on ``n_kw``, as
:func:`latentlab.inference.online.stepwise_update` does for every model:

    s_hat <- (1 - eta_t) s_hat + eta_t n_kw(chunk_t) / n_docs(chunk_t),
    eta_t = (t + 1)^(-kappa)   (eta_0 = 1),

with the M-step ``phi_k ∝ N s_hat_k + (prior - 1)`` after every chunk, ``N`` the
documents seen so far (``n_samples_seen_``; it only weighs the Dirichlet
pseudo-counts, so maximum-likelihood topics do not depend on it).  This is the
structure of online LDA (Hoffman, Blei & Bach 2010; scikit-learn's
``LatentDirichletAllocation(learning_method="online")``): a local step per document,
a stepwise update of the global topic statistics.

The first chunk starts the stream as ``fit`` would fit it alone (random starts,
``n_init``, ``topic_word_init``): random topics would need many chunks to come near
an optimum, while ``fit`` on a chunk costs about one pass of fold-ins.

A word the stream has not shown before has probability 0 under every topic, and
multiplicative EM updates would keep it there.  Its tokens are shared out by the
documents' topic proportions (the limit of the responsibilities when the topics are
equally silent on it), so it enters the topics from the chunk where it first appears.
"""

from __future__ import annotations

import jax
import numpy as np

from latentlab.estimators._plsa_fold_in import known_words
from latentlab.estimators._plsa_programs import (
    _corpus,
    _pad_topics,
    _padded_topics,
    run_fold_in,
    with_topics,
)
from latentlab.models import plsa
from latentlab.models._plsa_algebra import update_phi

__all__ = ["chunk_statistics", "update_topics"]


@jax.jit
def _word_counts(theta, phi, corpus, hyper):
    """n_kw of the model's E-step at (theta, phi) (untempered)."""
    stats, _ = plsa.e_step(plsa.Params(theta, phi), corpus, hyper, with_objective=False)
    return stats.word_counts


@jax.jit
def _word_counts_tempered(theta, phi, corpus, hyper):
    stats, _ = plsa.e_step(plsa.Params(theta, phi), corpus, hyper, tempered=True)
    return stats.word_counts


@jax.jit
def _m_step(word_counts, phi, hyper):
    return update_phi(word_counts, phi, hyper)


def chunk_statistics(csr, phi, hyper: plsa.Hyper, *, tempered: bool):
    """Fold in a chunk's documents at the topics ``phi`` (K, W) with the K topics'
    ``hyper``: their theta (n, K), sum x log p per document (no coefficient; -inf
    where a document has a word the stream had not shown), and the expected
    topic-word counts n_kw (K, W).  Call it in the estimator's precision."""
    known, unseen, hit, impossible = known_words(csr, phi)
    n = csr.shape[0]
    K = phi.shape[0]
    dtype = hyper.tempering.dtype
    corpus = _corpus(known, dtype, nonzeros=True if tempered else None, new_documents=True)
    n_topics = _padded_topics(corpus, K)
    _, phi_padded = _pad_topics(np.zeros((0, K)), phi, n_topics)
    hyper = with_topics(hyper, K, n_topics)
    theta, doc_loglik, _, _ = run_fold_in(corpus, phi_padded, hyper, tempered=tempered)
    # the E-step's n_kw at the folded-in theta (the priors enter only the M-step)
    counts = _word_counts_tempered if tempered else _word_counts
    word_counts = counts(
        np.asarray(theta, dtype),
        np.asarray(phi_padded, dtype),
        corpus,
        hyper._replace(prior_weight=np.zeros((), dtype)),
    )
    word_counts = np.array(word_counts, np.float64)[:K]
    theta = np.array(theta[:n, :K], np.float64)
    if hit.any():  # new words: their tokens by the documents' topic proportions
        new = np.flatnonzero(unseen)
        word_counts[:, new] += theta.T @ csr[:, new].toarray()
    doc_loglik = np.where(impossible, -np.inf, np.asarray(doc_loglik[:n], np.float64))
    return theta, doc_loglik, word_counts


def update_topics(word_stats, n_seen: int, phi, hyper: plsa.Hyper) -> np.ndarray:
    """The M-step for the topics from the running per-document statistics, scaled to
    the ``n_seen`` documents of the stream (which only weighs the prior's
    pseudo-counts); float64.  Call it in the estimator's precision."""
    dtype = hyper.tempering.dtype
    return np.asarray(
        _m_step(np.asarray(n_seen * word_stats, dtype), np.asarray(phi, dtype), hyper),
        np.float64,
    )
