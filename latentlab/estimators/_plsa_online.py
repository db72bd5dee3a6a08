"""Stepwise (online) EM for pLSA: ``PLSA.partial_fit`` on a stream of documents.

pLSA's parameters are of two kinds.  The topics ``Phi`` are shared: their sufficient
statistics are the expected topic-word counts ``n_kw``, a sum over documents.  Each
document's proportions ``theta_d`` are its own, so a chunk's documents are *folded
in* (``theta`` maximised with the topics fixed, as ``transform`` does) and then
forgotten.  Cappe & Moulines' (2009) stepwise EM then runs on ``n_kw``, as
:mod:`latentlab.estimators._online` does for PPCA and the GMM:

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
from sklearn.base import clone

from latentlab.estimators._online import check_learning_decay, step_size
from latentlab.estimators._plsa_programs import (
    _corpus,
    _pad_topics,
    _padded_topics,
)
from latentlab.models import plsa
from latentlab.models._plsa_algebra import update_phi

__all__ = ["OnlinePLSAMixin"]


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


class OnlinePLSAMixin:
    """``partial_fit`` by stepwise EM for :class:`latentlab.PLSA`."""

    def partial_fit(self, X, y=None):
        """Update the topics with one chunk of documents by stepwise (online) EM.

        The first call fits its chunk as ``fit`` would (random starts, ``n_init``,
        ``topic_word_init``).  Every call then folds in the chunk's documents at the
        current topics (as :meth:`transform`), forms their expected topic-word counts
        per document, mixes them into the running average with weight
        ``(t + 2) ** -learning_decay`` and takes the M-step for the topics from the
        average (Cappe & Moulines 2009; the local/global split of online LDA,
        Hoffman, Blei & Bach 2010).  ``fit`` ends a stream: a later ``partial_fit``
        starts a new one from its chunk.

        Online EM assumes exchangeable chunks (documents in random order).  A stream
        sorted by topic or time is fitted toward its recent chunks: shuffle such a
        source, or use ``fit`` on it (exact EM over row chunks,
        :class:`~latentlab.inference.chunked.RowChunks`).

        After each call ``params_["theta"]`` and ``doc_lengths_`` are those of the
        chunk's documents, ``log_likelihoods_`` holds each chunk's log-likelihood per
        document under the topics before its update (-inf where a chunk brings a word
        the stream had not shown: the topics gave it probability 0),
        ``n_samples_seen_`` counts documents and ``online_state_`` holds the running
        statistics, so a saved model continues the stream exactly.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_documents, n_words)
            One chunk of the stream (counts); later chunks must have the same words.
        y : ignored

        Returns
        -------
        self
        """
        decay = check_learning_decay(self.learning_decay)
        first = not hasattr(self, "online_state_")
        if self.method != "em":
            raise ValueError(f"PLSA.partial_fit is online EM; got method={self.method!r}")
        if first:
            start = clone(self).fit(X)  # validates X and the settings
            csr = self._counts(X, reset=True)
            K, phi, step, seen = start.n_components_, start.params_["phi"], 0, 0
            self.vocabulary_ = start.vocabulary_
            state = None
        else:
            csr = self._counts(X, reset=False)
            state = self.online_state_
            K, phi = self.n_components_, np.asarray(state["phi"], np.float64)
            step, seen = int(self.n_iter_), int(self.n_samples_seen_)
        n_docs = csr.shape[0]
        with self._precision():
            theta, doc_loglik, word_counts = self._chunk_statistics(csr, phi, K)
        stats = word_counts / n_docs
        if not first:
            eta = step_size(step, decay)
            stats = (1.0 - eta) * np.asarray(state["word_stats"], np.float64) + eta * stats
        seen += n_docs
        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            hyper = self._hyper(dtype, K)
            phi = np.asarray(
                _m_step(np.asarray(seen * stats, dtype), np.asarray(phi, dtype), hyper),
                np.float64,
            )
        self.online_state_ = {"word_stats": stats, "phi": phi}
        self.params_ = {"theta": theta, "phi": phi.copy()}
        self.n_components_ = K
        self.doc_lengths_ = np.asarray(csr.sum(axis=1), np.float64).ravel()
        self.n_samples_seen_ = seen
        self.n_iter_ = step + 1
        loglik = float(np.sum(doc_loglik + plsa.log_coefficients(csr))) / n_docs
        previous = np.zeros(0) if first else self.log_likelihoods_
        self.log_likelihoods_ = np.append(previous, loglik)
        self.converged_ = False  # online EM has no convergence test
        return self

    def _chunk_statistics(self, csr, phi, K):
        """Fold in the chunk's documents at ``phi``: their theta (n, K), sum x log p per
        document (no coefficient), and the expected topic-word counts n_kw (K, W)."""
        unseen = phi.sum(axis=0) <= 0  # words the stream had not shown: probability 0
        hit = unseen[csr.indices]
        impossible = plsa.doc_sums(hit.astype(float), csr) > 0
        known = csr
        if hit.any():
            known = csr.copy()
            known.data[hit] = 0.0
            known.eliminate_zeros()
        n = csr.shape[0]
        dtype = jax.dtypes.canonicalize_dtype(np.float64)
        tempered = self.tempering != 1
        corpus = _corpus(known, dtype, nonzeros=True if tempered else None, new_documents=True)
        n_topics = _padded_topics(corpus, K)
        _, phi_padded = _pad_topics(np.zeros((0, K)), phi, n_topics)
        hyper = self._hyper(dtype, K, n_topics)
        theta, doc_loglik, _, _ = self._fold_in(corpus, phi_padded, hyper)
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
