"""Folding documents into a fitted pLSA: theta for new documents with the topics
fixed (EM on theta alone, as Hofmann 1999), and document completion, which folds in
on part of each document and scores the rest.  Functions of the counts, the topics
and the hyperparameters; :class:`latentlab.PLSA` supplies them."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_random_state

from latentlab.estimators._plsa_programs import (
    _corpus,
    _pad_topics,
    _padded_topics,
    run_fold_in,
    with_topics,
)
from latentlab.estimators.base import LATENTLAB_FILES
from latentlab.models import plsa

__all__ = [
    "completion_scores",
    "fold_in_documents",
    "fold_in_result",
    "known_words",
    "thin_counts",
]


def known_words(csr, phi):
    """The counts without the words that the topics ``phi`` (K, W) give probability 0
    (words absent from the training corpus, or a stream so far): ``(known counts,
    unseen (W,), hit (nnz,) entries of unseen words, documents holding one (n,))``.
    ``csr`` itself is returned when every word is known."""
    unseen = phi.sum(axis=0) <= 0
    hit = unseen[csr.indices]
    impossible_docs = plsa.doc_sums(hit.astype(float), csr) > 0
    known = csr
    if hit.any():
        known = csr.copy()
        known.data[hit] = 0.0
        known.eliminate_zeros()
    return known, unseen, hit, impossible_docs


def fold_in_documents(csr, phi, hyper: plsa.Hyper, *, tempered: bool):
    """Fold in the documents of ``csr`` at the topics ``phi`` (K, W) with the K topics'
    ``hyper``: ``(theta (n, K), sum x log p per document, documents with a word of
    probability 0, converged)``, NumPy.  Call it in the estimator's precision.

    Words the topics give probability 0 (absent from the training corpus) carry no
    information about theta; they are left out of fold-in (their documents'
    log-likelihood is made -inf by :func:`fold_in_result`).
    """
    csr, _, _, impossible_docs = known_words(csr, phi)
    K = phi.shape[0]
    dtype = hyper.tempering.dtype
    nonzeros = True if tempered else None
    corpus = _corpus(csr, dtype, nonzeros=nonzeros, new_documents=True)
    # padded topics (exact, as in the fit): K-searches share fold-in programs
    n_topics = _padded_topics(corpus, K)
    _, phi = _pad_topics(np.zeros((0, K)), phi, n_topics)
    hyper = with_topics(hyper, K, n_topics)
    theta, doc_loglik, _, converged = run_fold_in(corpus, phi, hyper, tempered=tempered)
    n = csr.shape[0]
    return theta[:n, :K], doc_loglik[:n], impossible_docs, converged


def fold_in_result(theta, doc_loglik, impossible_docs, converged):
    """Warnings for a fold-in, and -inf for the documents it cannot explain."""
    if not converged:
        warnings.warn(
            "PLSA fold-in did not converge",
            ConvergenceWarning,
            skip_file_prefixes=LATENTLAB_FILES,
        )
    doc_loglik = np.where(impossible_docs, -np.inf, doc_loglik)
    if impossible_docs.any():
        warnings.warn(
            f"{impossible_docs.sum()} document(s) contain words with probability 0 under "
            "the fitted topics (absent from the training corpus); their log-likelihood "
            "is -inf.  Fit with topic_word_prior > 1 to smooth the topics.",
            UserWarning,
            skip_file_prefixes=LATENTLAB_FILES,
        )
    return theta.copy(), doc_loglik


def thin_counts(csr, fraction: float, random_state):
    """Binomial thinning: each token held out with probability ``fraction``;
    ``(observed, scored)`` counts, both canonical CSR without explicit zeros."""
    held = check_random_state(random_state).binomial(csr.data.astype(np.int64), fraction)
    scored = csr.copy()
    scored.data = held.astype(np.float64)
    observed = csr.copy()
    observed.data = csr.data - scored.data
    observed.eliminate_zeros()
    scored.eliminate_zeros()
    return observed, scored


def completion_scores(scored, theta, phi, n_training_tokens: float):
    """Score the held-out counts ``scored`` (n, W) at the topic proportions ``theta``
    (n, K) folded in on the rest: per document, sum x log p (no coefficient), the
    multinomial coefficient of the scored part, and its number of tokens.

    ``n_training_tokens`` (N) sets the add-one floor of words absent from the training
    corpus (see ``PLSA.completion_log_likelihood``)."""
    doc = np.repeat(np.arange(scored.shape[0]), np.diff(scored.indptr))
    probability = np.einsum("ik,ik->i", theta[doc], phi.T[scored.indices])
    unseen = phi.sum(axis=0) <= 0  # words absent from the training corpus
    if unseen.any():
        # The ML topics give such a word probability 0, and any held-out token of it
        # would score -inf, whatever the model: which words a training split happens
        # to miss says nothing about the number of topics.  Score them at the
        # add-one (Laplace) estimate of an unseen word's frequency, 1 / (N + W) for
        # N training tokens, and scale the other words' probabilities by
        # 1 - m / (N + W) (m unseen words), so each document's distribution still
        # sums to 1.  A corpus without unseen words is scored exactly as before.
        floor = 1.0 / (n_training_tokens + phi.shape[1])
        hit = unseen[scored.indices]
        probability = np.where(hit, floor, probability * (1.0 - unseen.sum() * floor))
        if hit.any():
            warnings.warn(
                f"{int(scored.data[hit].sum())} held-out token(s) are words absent from "
                f"the training corpus (probability 0 under the ML topics); they are scored "
                f"at the add-one floor 1/(N + W) = {floor:.3g}.  Fit with "
                "topic_word_prior > 1 to smooth the topics instead.",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
    if np.any(probability <= 0):
        warnings.warn(
            "some held-out tokens have probability 0 under the fitted topics and "
            "folded-in proportions; their documents score -inf.",
            UserWarning,
            skip_file_prefixes=LATENTLAB_FILES,
        )
    with np.errstate(divide="ignore"):
        loglik = plsa.doc_sums(scored.data * np.log(probability), scored)
    return loglik, plsa.log_coefficients(scored), np.asarray(scored.sum(axis=1)).ravel()
