"""Folding documents into a fitted pLSA: theta for new documents with the topics
fixed (EM on theta alone, as Hofmann 1999), and the document-completion scores that
fold in on part of each document and score the rest."""

from __future__ import annotations

import warnings

import jax
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab.estimators._plsa_programs import (
    FOLD_IN_MAX_ITER,
    FOLD_IN_TOL,
    _corpus,
    _fold_in_driver,
    _pad_topics,
    _padded_topics,
)
from latentlab.estimators.base import LATENTLAB_FILES, to_numpy
from latentlab.models import plsa

__all__ = ["FoldInMixin"]


class FoldInMixin:
    """Fold-in and completion for :class:`latentlab.PLSA` (which supplies
    ``_counts``, ``_hyper`` and the fitted ``params_``)."""

    @staticmethod
    def _fold_in_tol(dtype) -> float:
        return max(FOLD_IN_TOL, 100 * float(np.finfo(dtype).eps))

    def _fold_in(self, corpus, phi, hyper, theta=None):
        """Fold-in from ``theta`` (n_docs_padded, K), uniform by default: returns theta,
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
            np.asarray(self._fold_in_tol(dtype), dtype),
            max_iter=FOLD_IN_MAX_ITER,
            tempered=self.tempering != 1,
        )
        return to_numpy(theta), to_numpy(doc_loglik), float(objective), bool(converged)

    def _fold_in_new(self, csr):
        """Fold in the documents of ``csr``: (theta (n, K), sum x log p per document).

        Words the topics give probability 0 (absent from the training corpus) carry no
        information about theta; they are left out of fold-in and make their
        documents' log-likelihood -inf.
        """
        phi = self.params_["phi"]
        impossible_words = phi.sum(axis=0) <= 0
        hit = impossible_words[csr.indices]
        impossible_docs = plsa.doc_sums(hit.astype(float), csr) > 0
        if hit.any():
            csr = csr.copy()
            csr.data[hit] = 0.0
            csr.eliminate_zeros()
        K = self.n_components_
        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            nonzeros = True if self.tempering != 1 else None
            corpus = _corpus(csr, dtype, nonzeros=nonzeros, new_documents=True)
            # padded topics (exact, as in the fit): K-searches share fold-in programs
            n_topics = _padded_topics(corpus, K)
            _, phi = _pad_topics(np.zeros((0, K)), phi, n_topics)
            hyper = self._hyper(dtype, K, n_topics)
            theta, doc_loglik, _, converged = self._fold_in(corpus, phi, hyper)
        n = csr.shape[0]
        return self._fold_in_result(theta[:n, :K], doc_loglik[:n], impossible_docs, converged)

    def _fold_in_source(self, source):
        """:meth:`_fold_in_new` for a chunked source (memmap, h5py, zarr, Dask): theta
        (n, K), sum x log p and the multinomial coefficient per document, and the
        number of tokens; the same fold-in program as in memory, the counts read in
        chunks."""
        from latentlab.estimators._plsa_chunked import fold_in_source

        check_is_fitted(self)
        theta, doc_loglik, coefficients, impossible_docs, converged, tokens = fold_in_source(
            self, source
        )
        theta, doc_loglik = self._fold_in_result(theta, doc_loglik, impossible_docs, converged)
        return theta, doc_loglik, coefficients, tokens

    @staticmethod
    def _fold_in_result(theta, doc_loglik, impossible_docs, converged):
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

    def _completion(self, X, fraction, random_state):
        check_is_fitted(self)
        if not 0 < fraction < 1:
            raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
        csr = self._counts(X, reset=False)
        held = check_random_state(random_state).binomial(csr.data.astype(np.int64), fraction)
        scored = csr.copy()
        scored.data = held.astype(np.float64)
        observed = csr.copy()
        observed.data = csr.data - scored.data
        observed.eliminate_zeros()
        with warnings.catch_warnings():
            # unseen words are dealt with below, for the tokens that are scored
            warnings.filterwarnings("ignore", message=".*probability 0 under", category=UserWarning)
            theta, _ = self._fold_in_new(observed)
        scored.eliminate_zeros()
        doc = np.repeat(np.arange(csr.shape[0]), np.diff(scored.indptr))
        phi = self.params_["phi"]
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
            floor = 1.0 / (self.doc_lengths_.sum() + phi.shape[1])
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

    def completion_log_likelihood(self, X, *, fraction=0.5, random_state=None) -> np.ndarray:
        """Held-out log-likelihood by document completion; shape (n_documents,).

        Each token of each document is held out with probability ``fraction``
        (binomial thinning of the counts); theta is folded in on the other tokens and
        the held-out counts are scored, multinomial coefficient of that part included.
        Folding in on the very words scored would be optimistic.  A document left with
        no tokens to fold in on gets uniform topic proportions; one with none held out
        scores 0.

        Held-out tokens of words absent from the training corpus (probability 0 under
        maximum-likelihood topics, so -inf, as :meth:`score_samples` reports) are
        scored at the documented floor ``1 / (N + W)``, the add-one estimate of an
        unseen word's frequency from N training tokens over W words, with the other
        words' probabilities scaled by ``1 - m / (N + W)`` for m unseen words so that
        each document's distribution sums to 1 (a ``UserWarning`` says how many tokens).
        This keeps cross-validated comparisons (:func:`latentlab.compare`) finite when a
        rare word falls only in a held-out fold; it is the same for every number of
        topics.  Without unseen words nothing changes.
        """
        loglik, coefficient, _ = self._completion(X, fraction, random_state)
        return loglik + coefficient

    def completion_perplexity(self, X, *, fraction=0.5, random_state=None) -> float:
        """Perplexity of the held-out tokens of :meth:`completion_log_likelihood`."""
        loglik, _, tokens = self._completion(X, fraction, random_state)
        return float(np.exp(-loglik.sum() / tokens.sum()))
