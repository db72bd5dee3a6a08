"""pLSA's compiled programs and host-side passes: how :class:`latentlab.PLSA` fits and
queries the model, with nothing of an estimator in them (the estimator validates the
counts and settings, calls these functions and warns of what they report).  Built on
the declaration and algebra of :mod:`latentlab.models.plsa` (its E- and M-steps,
fold-in and padded layouts), which this module imports; ``plsa.py`` does not import it.

The sections, in reading order:

- settings: the hyperparameters as the programs' :class:`~latentlab.models.plsa.Hyper`
  and fold-in's tolerance;
- corpus: the count matrix as a padded :class:`~latentlab.models.plsa.Corpus` (the
  choice of a dense or a nonzeros E-step, the padding of the topic axis, the scale of
  EM's relative stopping rule);
- fold-in of new documents at fixed topics, as one compiled program;
- EM: the random starts, and EM with the last fold-in as its finish as one compiled
  program (:func:`latentlab.inference.em.fit_em` on
  :func:`latentlab.models.plsa.em_model`), the documents optionally sharded over
  devices;
- MAP / SVI through the shared multi-start driver
  (:func:`latentlab.inference.svi.fit_best_of`);
- document completion, a held-out evaluation: each document's tokens split by
  binomial thinning, and the held-out part scored at the topic proportions folded in
  on the rest;
- online EM: the statistics behind ``PLSA.partial_fit`` (stepwise EM on the
  topic-word counts, each chunk's documents folded in and forgotten);
- the chunked route: count matrices read in row chunks (memmap, h5py, zarr,
  ``scipy.sparse`` wrapped in :class:`~latentlab.inference.chunked.RowChunks`) or held
  as a Dask array, fitted and folded in by the in-memory programs with the counts
  summed on the host (the host side, what Dask workers run, is
  :mod:`latentlab._plsa_chunk_tasks`).

The fit and fold-in programs pad the topic axis to buckets and the documents to row
buckets, so that searches over K and cross-validation folds share programs.  The file
runs to ~900 lines because it holds every route that fits or queries pLSA, in one
public module that the estimator imports.
"""

from __future__ import annotations

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
from latentlab._shapes import DENSE_MAX_ENTRIES, DENSE_MIN_DENSITY, bucket, fold_in_rows, topics
from latentlab.inference.chunked import RowChunks, host_sum, register
from latentlab.inference.em import fit_em, run_em
from latentlab.inference.programs import Program
from latentlab.inference.sharding import pad_axis, row_mesh, shard_fields, shard_rows
from latentlab.models import plsa
from latentlab.models._plsa_algebra import (
    log_dirichlet,
    onto_simplex,
    onto_topics,
    topic_mask,
    update_phi,
)
from latentlab.models._plsa_fold_in import STAGE_CYCLES, DocTopics, FoldInStats

__all__ = [
    # settings
    "FOLD_IN_TOL",
    "FOLD_IN_MAX_ITER",
    "to_numpy",
    "fold_in_tol",
    "hyperparameters",
    "with_topics",
    # corpus
    "padded_topics",
    "pad_topics",
    "takes_dense",
    "tolerance_scale",
    "build_corpus",
    # fold-in
    "run_fold_in",
    "known_words",
    "fold_in_documents",
    # EM, MAP / SVI
    "shard_documents",
    "draw_starts",
    "fit_em_program",
    "fit_gradient",
    # document completion
    "thin_counts",
    "completion_scores",
    # online EM
    "chunk_statistics",
    "update_topics",
    # the chunked route
    "ChunkedCorpus",
    "ChunkedFoldIn",
    "chunked_e_step",
    "chunked_fold_in",
    "layout",
    "fit_chunked",
    "fold_in_source",
]


# ----------------------------------------------------------------------------- settings


FOLD_IN_TOL = plsa.FOLD_IN_TOL
FOLD_IN_MAX_ITER = plsa.FOLD_IN_MAX_ITER


def to_numpy(a) -> np.ndarray:
    """A writable float64 NumPy copy that owns its data (of a JAX array or a slice of
    padded output), as the estimators return."""
    return np.array(a, dtype=np.float64, copy=True)


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


# ----------------------------------------------------------------------------- corpus


def _work(corpus: plsa.Corpus, n_components: int) -> int:
    """Elements an E-step touches: (D, W, K) products dense, (nnz, K) at the nonzeros."""
    if corpus.dense is not None:
        return corpus.dense.size * n_components
    return corpus.count.shape[0] * n_components


def padded_topics(corpus: plsa.Corpus, n_components: int) -> int:
    """The number of topics to compute with for ``corpus`` (:func:`latentlab._shapes.topics`)."""
    return topics(n_components, _work(corpus, 1))


def pad_topics(theta, phi, n_topics):
    """theta (..., D, K) with zero columns and phi (..., K, W) with uniform rows, up to
    ``n_topics``: padding topics that nothing uses."""
    pad = n_topics - theta.shape[-1]
    if pad == 0:
        return theta, phi
    zeros = np.zeros((*theta.shape[:-1], pad))
    uniform = np.full((*phi.shape[:-2], pad, phi.shape[-1]), 1.0 / phi.shape[-1])
    return np.concatenate([theta, zeros], -1), np.concatenate([phi, uniform], -2)


def takes_dense(nnz: int, n_documents: int, n_words: int, n_rows: int) -> bool:
    """Whether the E-step runs on the dense matrix: the density of the real documents
    (padding must not flip the choice) and the size of the padded ``n_rows`` matrix."""
    density = nnz / max(n_documents * n_words, 1)
    return density >= DENSE_MIN_DENSITY and n_rows * n_words <= DENSE_MAX_ENTRIES


def tolerance_scale(csr) -> float:
    """``|l_1|``: minus the log-likelihood, without the multinomial coefficient, of one
    topic (every document drawn from the corpus's word frequencies), at least 1.

    The scale of EM's relative stopping rule.  Every fit with K >= 1 topics lies
    between it and 0, and (unlike the log-likelihood itself) it does not move with the
    constant multinomial coefficient, which can be many times larger than the part
    that EM changes (digits: +1.76e6 against -1.95e6).
    """
    frequencies = np.asarray(csr.sum(axis=0)).ravel() / csr.sum()
    return max(float(-np.sum(csr.data * np.log(frequencies[csr.indices]))), 1.0)


def build_corpus(csr, dtype, dense=None, *, nonzeros=None, new_documents=False) -> plsa.Corpus:
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


# ----------------------------------------------------------------------------- fold-in


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


def _fold_in_driver(corpus: plsa.Corpus, n_components: int):
    """The compiled fold-in program for this corpus size."""
    return _FOLD_IN.for_work(_work(corpus, n_components))


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
    information about theta; they are left out of fold-in (the estimator makes their
    documents' log-likelihood -inf).
    """
    csr, _, _, impossible_docs = known_words(csr, phi)
    K = phi.shape[0]
    dtype = hyper.tempering.dtype
    nonzeros = True if tempered else None
    corpus = build_corpus(csr, dtype, nonzeros=nonzeros, new_documents=True)
    # padded topics (exact, as in the fit): K-searches share fold-in programs
    n_topics = padded_topics(corpus, K)
    _, phi = pad_topics(np.zeros((0, K)), phi, n_topics)
    hyper = with_topics(hyper, K, n_topics)
    theta, doc_loglik, _, converged = run_fold_in(corpus, phi, hyper, tempered=tempered)
    n = csr.shape[0]
    return theta[:n, :K], doc_loglik[:n], impossible_docs, converged


# ----------------------------------------------------------------------------- EM


def shard_documents(starts: plsa.Params, corpus: plsa.Corpus, K: int, devices):
    """The starts' theta and the corpus's rows and nonzeros split over ``devices``
    (:mod:`latentlab.inference.sharding`); the program is unchanged.

    Rows and nonzeros are added up to a multiple of the device count as the corpus's
    own padding is: documents without counts whose theta is uniform over the real
    topics (the M-step's fixed point for an empty document, so SQUAREM's step lengths
    do not see them), and entries of count 0 in the last document (the document
    index stays sorted, as ``doc_sum`` promises the segment sum).
    """
    mesh = row_mesh(devices)
    theta = np.asarray(starts.theta)
    extra = -theta.shape[1] % mesh.size
    padding = np.zeros((theta.shape[0], extra, theta.shape[2]), theta.dtype)
    padding[..., :K] = 1.0 / K
    theta = np.concatenate([theta, padding], axis=1)
    n_docs = theta.shape[1]
    corpus = corpus._replace(
        doc_mask=pad_axis(corpus.doc_mask, 0, mesh.size),
        dense=None if corpus.dense is None else pad_axis(corpus.dense, 0, mesh.size),
    )
    if corpus.doc.size:
        pad = -corpus.doc.size % mesh.size
        corpus = corpus._replace(
            doc=np.concatenate([corpus.doc, np.full(pad, n_docs - 1, corpus.doc.dtype)]),
            word=pad_axis(corpus.word, 0, mesh.size),
            count=pad_axis(corpus.count, 0, mesh.size),
        )
    fields = ("dense", "doc_mask", "doc", "word", "count")
    theta = shard_rows(theta, mesh, axis=1)
    return starts._replace(theta=theta), shard_fields(corpus, fields, devices, axis=0)


def draw_starts(rng, n_init: int, n_docs_padded, D, W, K, theta0, phi0, dtype) -> plsa.Params:
    """``n_init`` starts stacked on a leading axis, drawn from the NumPy ``rng`` (a
    ``RandomState``); user values ``theta0`` (D, K) and ``phi0`` (K, W) replace random
    ones."""
    draws = [plsa.init_params(rng, n_docs_padded, W, K) for _ in range(n_init)]
    theta = np.stack([d.theta for d in draws])
    phi = np.stack([d.phi for d in draws])
    # Padding rows (no tokens) start at their fixed point, uniform: a random start
    # there would move in the first M-step and so enter SQUAREM's step length,
    # making the fit depend on draws that no document sees.
    theta[:, D:] = 1.0 / K
    if theta0 is not None:
        theta[:, :D] = theta0
    if phi0 is not None:
        phi[:] = phi0
    return plsa.Params(theta.astype(dtype), phi.astype(dtype))


def fit_em_program(
    corpus,
    starts: plsa.Params,
    scale,
    K: int,
    hyper: plsa.Hyper,
    *,
    tol,
    max_iter: int,
    accelerate: bool,
    verbose: int,
    tempered: bool,
    devices=None,
    chunked=None,
):
    """EM and the last fold-in as one compiled program, with the topics padded to
    :func:`latentlab._shapes.topics`; NumPy outputs (padding included):
    ``(theta, phi, trace, n_iter, converged, objective)``.

    ``hyper``: the K topics' hyperparameters (their dtype is the program's).
    ``scale``: the relative stopping rule's ``|l_1|``.  ``devices``: shard the
    documents (in memory only).  ``chunked``: the chunked route's ``(e_step,
    n_topics, work, fold_in)`` (the counts on the host)."""
    if chunked is None:
        n_topics = padded_topics(corpus, K)
        e_step, work, fold_in = None, _work(corpus, n_topics), None
    else:
        e_step, n_topics, work, fold_in = chunked
    dtype = np.dtype(hyper.tempering.dtype)
    starts = plsa.Params(*pad_topics(starts.theta, starts.phi, n_topics))
    starts = plsa.Params(starts.theta.astype(dtype), starts.phi.astype(dtype))
    if chunked is None and devices is not None:
        starts, corpus = shard_documents(starts, corpus, K, devices)
    # run_em stops when |change| <= tol * n_samples: pass the relative rule's scale
    theta, phi, trace, n_iter, converged, objective = fit_em(
        plsa.em_model(tempered, e_step, fold_in),
        starts,
        corpus,
        with_topics(hyper, K, n_topics),
        np.asarray(scale, dtype),
        np.asarray(tol, dtype),
        np.asarray(fold_in_tol(dtype), dtype),
        max_iter=int(max_iter),
        accelerate=bool(accelerate),
        verbose=int(verbose),
        work=work,
    )
    n_iter = int(n_iter)
    trace = to_numpy(trace)[:n_iter]  # a NumPy slice: no compile per length
    return theta, phi, trace, n_iter, bool(converged), float(objective)


# ---------------------------------------------------------------------------- MAP / SVI


def fit_gradient(
    csr,
    K: int,
    starts: plsa.Params,
    D: int,
    *,
    method: str,
    doc_topic_prior,
    topic_word_prior,
    svi_steps: int,
    learning_rate,
    random_state,
):
    """``"map"``/``"svi"`` from each start (one per leading index of ``starts``) by the
    shared multi-start driver (counts need no rescaling: no log-Jacobian); keeps the
    best: ``(theta, phi, trace, n_iter, converged)``."""
    from latentlab.inference.svi import fit_best_of

    alpha, beta = (1.0 if v is None else float(v) for v in (doc_topic_prior, topic_word_prior))
    model = partial(
        plsa.plsa_model,
        n_components=K,
        doc_topic_prior=alpha,
        topic_word_prior=beta,
        use_prior=True,
    )
    X = jnp.asarray(csr.toarray())
    n_init = starts.theta.shape[0]
    best = fit_best_of(
        model,
        (X,),
        [{"theta": starts.theta[i, :D], "phi": starts.phi[i]} for i in range(n_init)],
        method=method,
        num_steps=svi_steps,
        learning_rate=learning_rate,
        random_state=random_state,
    )
    # for "map" the trace ends with the log joint at the returned parameters, which
    # fit() replaces by the objective after the last fold-in
    theta = np.concatenate([np.asarray(best.params["theta"]), starts.theta[0, D:]])
    return theta, best.params["phi"], best.trace, len(best.trace), True


# ------------------------------------------------------------------ document completion


def thin_counts(csr, fraction: float, rng):
    """Binomial thinning: each token held out with probability ``fraction``, drawn
    from the NumPy ``rng`` (a ``RandomState``); ``(observed, scored)`` counts, both
    canonical CSR without explicit zeros."""
    held = rng.binomial(csr.data.astype(np.int64), fraction)
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
    multinomial coefficient of the scored part and its number of tokens; then the
    held-out tokens of words absent from the training corpus (None when no entry has
    one), the add-one floor they are scored at (None when the training corpus has
    every word), and whether some token has probability 0 (its document scores -inf).

    ``n_training_tokens`` (N) sets the add-one floor of words absent from the training
    corpus (see ``PLSA.completion_log_likelihood``)."""
    doc = np.repeat(np.arange(scored.shape[0]), np.diff(scored.indptr))
    probability = np.einsum("ik,ik->i", theta[doc], phi.T[scored.indices])
    unseen = phi.sum(axis=0) <= 0  # words absent from the training corpus
    floor = floored_tokens = None
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
            floored_tokens = int(scored.data[hit].sum())
    impossible = bool(np.any(probability <= 0))
    with np.errstate(divide="ignore"):
        loglik = plsa.doc_sums(scored.data * np.log(probability), scored)
    coefficients = plsa.log_coefficients(scored)
    tokens = np.asarray(scored.sum(axis=1)).ravel()
    return loglik, coefficients, tokens, floored_tokens, floor, impossible


# ---------------------------------------------------------------------------- online EM


# pLSA's parameters are of two kinds.  The topics Phi are shared: their sufficient
# statistics are the expected topic-word counts n_kw, a sum over documents.  Each
# document's proportions theta_d are its own, so a chunk's documents are folded in
# (theta maximised with the topics fixed, as ``transform`` does) and then forgotten.
# Cappe & Moulines' (2009) stepwise EM then runs on n_kw, as
# latentlab.inference.online.stepwise_update does for every model:
#
#     s_hat <- (1 - eta_t) s_hat + eta_t n_kw(chunk_t) / n_docs(chunk_t),
#     eta_t = (t + 1)^(-kappa)   (eta_0 = 1),
#
# with the M-step phi_k ∝ N s_hat_k + (prior - 1) after every chunk, N the documents
# seen so far (n_samples_seen_; it only weighs the Dirichlet pseudo-counts, so
# maximum-likelihood topics do not depend on it).  This is the structure of online LDA
# (Hoffman, Blei & Bach 2010; scikit-learn's LatentDirichletAllocation with
# learning_method="online"): a local step per document, a stepwise update of the
# global topic statistics.
#
# The first chunk starts the stream as ``fit`` would fit it alone (random starts,
# n_init, topic_word_init): random topics would need many chunks to come near an
# optimum, while ``fit`` on a chunk costs about one pass of fold-ins.
#
# A word the stream has not shown before has probability 0 under every topic, and
# multiplicative EM updates would keep it there.  Its tokens are shared out by the
# documents' topic proportions (the limit of the responsibilities when the topics are
# equally silent on it), so it enters the topics from the chunk where it first appears.


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
    corpus = build_corpus(known, dtype, nonzeros=True if tempered else None, new_documents=True)
    n_topics = padded_topics(corpus, K)
    _, phi_padded = pad_topics(np.zeros((0, K)), phi, n_topics)
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


# --------------------------------------------------------------- chunked route: program


# pLSA's E-step gives the topic-word counts n_kw as a sum over documents, but each
# document's topic proportions theta_d are its own parameters.  theta is small
# (n_documents x K) and stays in the compiled program, exactly as in memory; only the
# counts live outside it.  Each E-step hands (theta, Phi) to the host through
# latentlab.inference.chunked.host_sum, where latentlab._plsa_chunk_tasks.CountsPass
# reads the counts chunk by chunk, runs the model's own E-step (plsa.e_step) on each
# chunk with its rows of theta, and returns the documents' expected topic counts side
# by side, the topic-word counts and sum x log p summed.  The fit program is the
# in-memory one (its starts, SQUAREM arithmetic and lazy objective), with this E-step
# and a last fold-in that follows the in-memory schedule of shrinking batches
# (chunked_fold_in), so parameters and trace equal it to round-off.  The same fold-in
# serves ``transform`` and the scores of chunked and Dask inputs.


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


# ------------------------------------------------------------------- chunked route: fit


def fit_chunked(
    source: RowChunks,
    summary: CountSummary,
    K: int,
    hyper: plsa.Hyper,
    *,
    tempered: bool,
    theta0,
    phi0,
    rng,
    n_init: int,
    tol,
    max_iter: int,
    accelerate: bool,
    verbose: int,
):
    """Exact EM on a chunked source (its ``summary`` from
    :func:`~latentlab._plsa_chunk_tasks.summarise_counts`), the counts read chunk by
    chunk: the outputs of :func:`fit_em_program`, with the in-memory fit's padding,
    starts and schedule.  ``hyper``: the K topics' hyperparameters (their dtype is the
    program's); ``rng``: the NumPy ``RandomState`` the starts are drawn from.  Call it
    in the estimator's precision."""
    D, W = source.shape
    chunk_rows = int(source.chunk_size)
    n_docs = bucket(D, 32)  # the in-memory fit's padded rows: the same random starts
    shape = layout(summary, bucket(chunk_rows, 8), W, tempered, n_docs)
    staged = _staged(shape, tempered, n_docs)
    # the in-memory rule for padding the topic axis
    per_topic = n_docs * W if shape.dense else bucket(summary.nnz, 256)
    n_topics = topics(K, per_topic)
    dtype = np.dtype(hyper.tempering.dtype)
    starts = draw_starts(rng, n_init, n_docs, D, W, K, theta0, phi0, dtype)
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


# --------------------------------------------------------------- chunked route: fold-in


def _chunked_fold_in_program(theta, data, phi, hyper, tol, *, max_iter, staged):
    theta, stats, objective, converged = chunked_fold_in(
        theta, data, phi, hyper, tol, max_iter=max_iter, staged=staged
    )
    return theta, stats.doc_loglik, objective, converged


_CHUNKED_FOLD_IN = Program(_chunked_fold_in_program, static_argnames=("max_iter", "staged"))


def fold_in_source(source: RowChunks, phi, hyper: plsa.Hyper, *, tempered: bool):
    """:func:`fold_in_documents` on a chunked source: the in-memory fold-in's program
    (its padding, topic padding, batches and compiled variant) at the topics ``phi``
    (K, W) with the K topics' ``hyper``, the counts read from the host, so theta equals
    the in-memory ``transform`` to round-off.  Call it in the estimator's precision.

    Returns ``(theta (n, K), sum x log p per document, multinomial coefficient per
    document, impossible documents, converged, tokens in all)``, NumPy; theta (n x K) is
    held on the client, as in the chunked fit."""
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
    _, phi = pad_topics(np.zeros((0, K)), phi, n_topics)
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
        out = _CHUNKED_FOLD_IN.for_work(work)(
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
