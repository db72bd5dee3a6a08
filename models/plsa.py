"""Probabilistic latent semantic analysis (Hofmann 1999), declared once.

Generative story for a corpus of D documents over W words, document d with N_d tokens::

    theta_d ~ Dirichlet(alpha)               p(z | d), (K,)     (prior used for MAP/SVI only)
    phi_k   ~ Dirichlet(beta)                p(w | z), (W,)
    x_d | theta_d, Phi ~ Multinomial(N_d, theta_d Phi)

The NumPyro function below is the single declaration.  Its observed site is the
multinomial with the topic marginal ``theta_d Phi`` (the token-level topic summed out),
so its log-likelihood, multinomial coefficient included, *is* the EM objective.
``explicit_latent=True`` draws each document's topic counts ``z_d ~ Multinomial(N_d,
theta_d)`` and then its words topic by topic (the same distribution of ``x``), for
sampling.  Priors are switched with ``handlers.mask``: off for maximum likelihood, on
for MAP ("smoothed pLSA") and SVI.

EM (Hofmann 1999) never forms the D x W x K responsibilities.  With
``r_dw = x_dw / (theta Phi)_dw`` evaluated only at the nonzero counts, the expected
topic counts are

    n_dk = theta_dk (r Phi^T)_dk,        n_kw = Phi_kw (theta^T r)_kw,

the multiplicative update of KL-NMF (Lee & Seung 2001; Gaussier & Goutte 2005: pLSA's
EM step is one simultaneous KL-NMF update of ``W = diag(N) theta``, ``H = Phi``
followed by normalisation; the dense form is shared with :class:`latentlab.NMF`
through :func:`latentlab.closed_form.nmf.kl_multiplicative_terms`), and
the M-step normalises ``n + (prior - 1)``.  With Dirichlet concentrations >= 1 the
pseudo-counts ``c = n + prior - 1`` are non-negative, and ``c / sum(c)`` is the exact
maximiser of ``sum_k c_k log theta_k`` on the simplex (Gibbs' inequality): EM then climbs
the log joint (Dempster, Laird & Rubin 1977).  Below 1 the Dirichlet density is
unbounded at the boundary and no MAP exists.

Tempered EM (Hofmann 1999) raises the responsibilities to a power
``beta`` (``tempering``), ``q_dwk ~ (theta_dk Phi_kw)^beta``.  It is coordinate ascent
on ``(1/beta) sum_dw x_dw log sum_k (theta_dk Phi_kw)^beta`` (+ log prior), which the
E-step reports as its objective; ``beta = 1`` is plain EM on the log-likelihood.

Every array is indexed by the nonzero entries of the count matrix (``Corpus``: document
index, word index, count), so an iteration costs O(nnz K) for dense and sparse input.
A corpus that is dense enough also carries its (D, W) matrix, and the untempered E-step
(EM and fold-in) then runs as three dense matrix products, O(D W K) multiply-adds that
are cheaper on CPU than the gathers and scatter-adds at the nonzeros.

The topic axis may carry padding topics (``Hyper.topic_mask``): zero columns of theta,
which EM, fold-in and SQUAREM's extrapolation all leave at exactly zero, with no prior
pseudo-counts or density, so that fits with nearby numbers of topics share one compiled
program and reach the same parameters.

The fold-in (theta of new documents, topics fixed) is in
:mod:`latentlab.models._plsa_fold_in`, and the algebra the fit and the fold-in share
(simplex, Dirichlet densities, per-entry expected counts, M-step normalisations) in
:mod:`latentlab.models._plsa_algebra`; this module re-exports the fold-in's names.  It
runs to ~450 lines because this story carries the derivation of EM as KL-NMF, of
tempering and of the padding topics, and the E-step has a dense and a sparse form.

The fitting built on this module (which does not import it) is in a module of its
own that :class:`latentlab.PLSA` calls, :mod:`latentlab.models.plsa_programs`: the
programs' inputs (hyperparameters, the padded corpus), the starts and the EM and
MAP/SVI fits, fold-in of new documents, document completion's split and scores,
stepwise EM's statistics and the chunked route.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from scipy.special import gammaln

from latentlab.closed_form.nmf import kl_multiplicative_terms
from latentlab.inference.em import EMModel
from latentlab.inference.posterior.spec import PosteriorSpec, Site
from latentlab.models import _plsa_fold_in
from latentlab.models._plsa_algebra import (
    doc_sum,
    log_dirichlet,
    onto_simplex,
    onto_topics,
    token_terms,
    topic_mask,
    update_phi,
    update_theta,
)

# fold-in's names are this module's too (its __all__ joins ours below)
from latentlab.models._plsa_fold_in import *  # noqa: F403
from latentlab.models._plsa_fold_in import fold_in_e_step, fold_in_m_step
from latentlab.models._plsa_layout import padded_entries, padded_rows

__all__ = [
    "Params",
    "Hyper",
    "Corpus",
    "TopicStats",
    "plsa_model",
    "model",
    "posterior_spec",
    "init_params",
    "e_step",
    "m_step",
    "step_functions",
    "FOLD_IN_TOL",
    "FOLD_IN_MAX_ITER",
    "em_model",
    "fit_finish",
    "uniform_topics",
    "n_parameters",
    "doc_sums",
    "log_coefficients",
    "padded_entries",
    "padded_rows",
    *_plsa_fold_in.__all__,  # fold-in, re-exported
]


# ----------------------------------------------------------------------------- parameters


class Params(NamedTuple):
    theta: jax.Array  # (D, K) p(z | d), rows on the simplex
    phi: jax.Array  # (K, W) p(w | z), rows on the simplex


class Hyper(NamedTuple):
    doc_topic_prior: jax.Array  # () Dirichlet concentration alpha of every theta_d
    topic_word_prior: jax.Array  # () Dirichlet concentration of every phi_k
    prior_weight: jax.Array  # () 1: objective is the log joint (MAP), 0: log-likelihood
    tempering: jax.Array  # () beta in (0, 1]; read only by the tempered step functions
    # (K,) 1 for a topic of the model, 0 for a padding topic (None: every topic is real).
    # The estimator pads the topic axis to a bucket so that fits with nearby numbers of
    # topics share one compiled program: a padding topic has theta[:, k] = 0 exactly,
    # a fixed point of EM (n_dk = theta_dk (...) = 0), gets no prior pseudo-counts and
    # no prior density, and its phi row never moves, so it changes nothing.
    topic_mask: jax.Array | None = None


class Corpus(NamedTuple):
    """The count matrix by its nonzeros, padded with zero counts to a bucket size."""

    doc: jax.Array  # (nnz,) int document index, sorted ascending
    word: jax.Array  # (nnz,) int word index
    count: jax.Array  # (nnz,) float counts (0 for padding)
    doc_mask: jax.Array  # (D,) 1 for a real document, 0 for a padding row
    log_coefficient: jax.Array  # () sum_d log N_d! - sum_dw log x_dw!
    # (D, W) the same counts as a dense matrix, or None.  Given, the untempered E-step
    # uses dense matrix products instead of gathers and scatters at the nonzeros,
    # faster on CPU for corpora with more than ~30% nonzeros (the estimator's rule).
    # The untempered steps then never read doc, word and count, which may be empty
    # (the estimator leaves them out, so its programs' shapes do not depend on nnz).
    dense: jax.Array | None = None


class TopicStats(NamedTuple):
    doc_counts: jax.Array  # (D, K) n_dk = sum_w x_dw q_dwk (local to each document)
    word_counts: jax.Array  # (K, W) n_kw = sum_d x_dw q_dwk (a sum over documents)


# ----------------------------------------------------------------------------- declaration


def plsa_model(
    X=None,
    *,
    n_components: int,
    n_words: int | None = None,
    doc_lengths=None,
    doc_topic_prior: float = 1.0,
    topic_word_prior: float = 1.0,
    use_prior: bool = False,
    explicit_latent: bool = False,
):
    """pLSA with ``n_components`` topics.  ``X`` is the (D, W) count matrix.

    Without ``X``, pass ``doc_lengths`` (D,) integer token counts and ``n_words``.
    Priors (active only with ``use_prior=True``): ``theta_d ~ Dirichlet(doc_topic_prior)``
    and ``phi_k ~ Dirichlet(topic_word_prior)``, symmetric.
    """
    if X is not None:
        X = jnp.asarray(X)
        doc_lengths = jnp.sum(X, axis=-1)
        n_words = X.shape[-1]
    elif doc_lengths is None or n_words is None:
        raise ValueError("plsa_model needs X, or doc_lengths and n_words to sample documents")
    # drawing counts inside a compiled program needs a static bound on them
    longest = None if isinstance(doc_lengths, jax.core.Tracer) else int(np.max(doc_lengths))
    doc_lengths = jnp.asarray(doc_lengths)
    K, W, D = n_components, n_words, doc_lengths.shape[0]
    with handlers.mask(mask=use_prior):
        with numpyro.plate("topics", K):
            phi = numpyro.sample("phi", dist.Dirichlet(jnp.full((W,), topic_word_prior)))
        with numpyro.plate("documents", D):
            theta = numpyro.sample("theta", dist.Dirichlet(jnp.full((K,), doc_topic_prior)))

    if explicit_latent:
        if X is not None:
            raise ValueError("explicit_latent=True draws documents; it cannot condition on X")
        with numpyro.plate("documents", D):
            z = numpyro.sample(  # tokens per topic
                "z", dist.Multinomial(doc_lengths, probs=theta, total_count_max=longest)
            )
            by_topic = numpyro.sample(  # (D, K, W)
                "x_by_topic", dist.Multinomial(z, probs=phi, total_count_max=longest).to_event(1)
            )
        numpyro.deterministic("x", jnp.sum(by_topic, axis=-2))
        return
    with numpyro.plate("documents", D):
        numpyro.sample(
            "x", dist.Multinomial(doc_lengths, probs=theta @ phi, total_count_max=longest), obs=X
        )


model = plsa_model  # the name every model module exports for its declaration


def posterior_spec(n_components: int, smoothed: bool) -> PosteriorSpec:
    """The declaration's sites for posterior draws (:mod:`latentlab.inference.posterior`).

    theta holds one mixture per training document.  ML pLSA often puts exact zeros on
    the simplex boundary, where unconstrained coordinates are infinite: starts move
    1e-6 inside (a Laplace approximation there is poor).  ``smoothed``: EM maximised
    the log joint, so draws keep the priors.  The likelihood depends on theta and phi
    only through theta @ phi, unchanged by any invertible K x K map keeping both on
    their simplices (NMF's non-uniqueness): beyond relabelling, the flat-prior
    posterior is a ridge reaching the boundary, where NUTS diverges (150-180 of 200
    transitions on 20 documents, 2 topics), hence its warning; Dirichlet priors > 1
    pull the ridge's ends in without removing it.
    """
    return PosteriorSpec(
        sites={
            "theta": Site(("document", "component"), "simplex"),
            "phi": Site(("component", "word"), "simplex"),
        },
        data_dims=("word",),
        standardise=False,
        missing_data=False,
        components={"phi": 0, "theta": 1},
        component_key="phi",
        em_prior=bool(smoothed),
        interior=1e-6,
        nuts_warning=None
        if n_components == 1
        else (
            "pLSA's likelihood depends on theta and phi only through theta @ phi, so its "
            "posterior is a ridge reaching the simplex boundary (not a point up to "
            "relabelling): expect many divergent transitions and draws along that ridge.  "
            "method='svi' describes the spread around the fit."
        ),
        replicate=_replicate_settings,
    )


def _replicate_settings(X) -> dict:
    """Documents of X's lengths over its vocabulary, drawn from the marginal (z summed out)."""
    counts = np.asarray(X)
    return {"doc_lengths": tuple(int(n) for n in counts.sum(axis=1)), "n_words": counts.shape[1]}


# ----------------------------------------------------------------------------- init


def init_params(rng, n_documents: int, n_words: int, n_components: int) -> Params:
    """Random start: every theta_d and phi_k drawn from a flat Dirichlet (NumPy arrays).

    ``rng`` is a NumPy ``RandomState`` or ``Generator``.  Drawn on the host as normalised
    exponentials (the flat Dirichlet exactly): a jitted JAX sampler costs seconds of
    compilation for a few microseconds of work.
    """
    theta = rng.standard_exponential((n_documents, n_components))
    phi = rng.standard_exponential((n_components, n_words))
    return Params(theta / theta.sum(axis=1, keepdims=True), phi / phi.sum(axis=1, keepdims=True))


# ----------------------------------------------------------------------------- E-step


def _objective(theta, phi, corpus: Corpus, hyper: Hyper, log_total):
    """log-likelihood (tempered: its tempered form) plus, for MAP, the log priors."""
    data_term = corpus.log_coefficient + jnp.sum(log_total)

    def log_prior():
        topics = topic_mask(hyper, theta.shape[1], theta.dtype)
        value = log_dirichlet(theta, hyper.doc_topic_prior, corpus.doc_mask, topics)
        return value + log_dirichlet(phi, hyper.topic_word_prior, topics)

    # a cond, not a select: ML fits skip the D x K logarithms of every step (the
    # predicate is not batched across n_init starts, so it stays a branch under vmap)
    zero = jnp.zeros((), data_term.dtype)
    return data_term + jax.lax.cond(hyper.prior_weight > 0, log_prior, lambda: zero)


def _dense_e_step(theta, phi, counts):
    """The untempered E-step by dense matrix products: KL-NMF's multiplicative update
    (:func:`latentlab.closed_form.nmf.kl_multiplicative_terms`, written once for both),
    ``n_dk = theta_dk (r Phi^T)_dk``, ``n_kw = Phi_kw (theta^T r)_kw`` for ``r = x /
    (theta Phi)`` where ``x > 0``; and ``theta Phi`` with 1 where nothing is observed,
    whose ``x log`` is the data term (-inf where a count has probability 0).  The
    logarithms are left to the caller: SQUAREM reads the objective at only half of its
    E-steps."""
    doc_counts, word_counts, safe = kl_multiplicative_terms(theta, phi, counts)
    return TopicStats(doc_counts, word_counts), safe


def _when(flag, objective, dtype):
    """``objective()`` where ``flag`` (a bool, or a traced one: then in a branch that
    is skipped where False, returning NaN there)."""
    if flag is True:
        return objective()
    return jax.lax.cond(flag, objective, lambda: jnp.asarray(jnp.nan, dtype))


def e_step(
    params: Params,
    corpus: Corpus,
    hyper: Hyper,
    *,
    tempered: bool = False,
    with_objective=True,
):
    """Expected topic counts (Hofmann's E-step, summed over the nonzeros) and the objective.

    With ``corpus.dense`` (and ``tempered=False``) by dense matrix products, otherwise
    at the nonzeros; the two agree to round-off.  ``with_objective`` (a traced bool
    for :func:`latentlab.inference.em.run_em`'s ``lazy_objective``): where False, the
    objective is skipped and NaN is returned in its place.
    """
    theta, phi = onto_topics(params.theta, hyper), onto_simplex(params.phi)
    if corpus.dense is not None and not tempered:  # static: the pytree's structure
        stats, safe = _dense_e_step(theta, phi, corpus.dense)

        def objective():
            return _objective(theta, phi, corpus, hyper, corpus.dense * jnp.log(safe))

        return stats, _when(with_objective, objective, theta.dtype)
    phi_entries = phi.T.at[corpus.word].get(mode="promise_in_bounds")
    expected, log_total, _ = token_terms(theta, phi_entries, corpus, hyper.tempering, tempered)
    n_docs, n_words = theta.shape[0], phi.shape[1]
    doc_counts = doc_sum(expected, corpus, n_docs)
    word_counts = jax.ops.segment_sum(expected, corpus.word, n_words, mode="promise_in_bounds").T
    stats = TopicStats(doc_counts, word_counts)
    return stats, _objective(theta, phi, corpus, hyper, log_total)


# ----------------------------------------------------------------------------- M-step


def m_step(stats: TopicStats, params: Params, hyper: Hyper) -> Params:
    """Hofmann's M-step with the Dirichlet pseudo-counts of the MAP M-step.

    A topic that no token uses keeps its old word distribution; a document without
    tokens (padding) gets uniform topic proportions.
    """
    theta = update_theta(stats.doc_counts, hyper)
    return Params(theta, update_phi(stats.word_counts, onto_simplex(params.phi), hyper))


_STEPS = {
    tempered: (
        partial(e_step, tempered=tempered),
        m_step,
        partial(fold_in_e_step, tempered=tempered),
        fold_in_m_step,
    )
    for tempered in (False, True)
}


def step_functions(tempered: bool):
    """``(e_step, m_step, fold_in_e_step, fold_in_m_step)`` for plain or tempered EM; the
    same objects every call, so the jit'd EM driver compiles once per shape."""
    return _STEPS[bool(tempered)]


# ----------------------------------------------------------------------------- the fit

# Fold-in (theta for fixed topics, a concave problem per document) stops when every
# document's objective changes by less than this per token in a SQUAREM cycle (100
# eps bounds it in float32).  Measured on digits (300 documents, K = 6 and 10, against
# each document's maximum from 20,000 EM steps in NumPy): at most 2e-5 nats short per
# document; 1e-8 left up to 1e-4 (5e-4 once documents stop in shrinking batches) and
# costs about as much, since the extra cycles run on the few documents still moving.
FOLD_IN_TOL = 1e-10
FOLD_IN_MAX_ITER = 1000


def em_model(tempered: bool, e_step=None, fold_in=None) -> EMModel:
    """The EM model for :func:`latentlab.inference.em.fit_em`: plain or tempered steps
    (``e_step`` in place of the model's where the counts are not in the corpus: the
    chunked route), starts given, the objective only where read (``lazy_objective``),
    and the last fold-in of :func:`fit_finish` (``fold_in`` as there)."""
    model_e_step, m_step, _, _ = step_functions(tempered)
    model = EMModel(e_step or model_e_step, m_step, finish=fit_finish, lazy_objective=True)
    return model.with_settings(tempered=bool(tempered), fold_in=fold_in)


def fit_finish(result, corpus: Corpus, hyper: Hyper, fold_in_tol, *, tempered, fold_in):
    """After EM, in the same program: the last fold-in at the fitted topics.  Returns
    ``(theta, phi, trace, n_iter, converged, objective)``, the objective at (theta, phi).

    ``fold_in``: ``fold_in(theta0, corpus, phi, hyper, tol) -> (theta, objective)``
    where the counts are not in ``corpus`` (the chunked route); None: :func:`fold_in`."""
    theta, phi = result.params
    # A last fold-in makes each theta_d the exact maximiser for the final topics.  It
    # starts where transform starts, at the uniform over the real topics (the two agree
    # to the fold-in tolerance).  That is also the quicker start (digits, K = 10 and
    # 20: 95-110 SQUAREM cycles against 180-230 from EM's theta mixed with 1e-3 of the
    # uniform): EM leaves proportions near 0 that multiplicative updates regrow or
    # shrink only slowly, and from EM's theta alone fold-in stalls on them.
    theta = jnp.broadcast_to(uniform_topics(hyper, theta.shape[-1], theta.dtype), theta.shape)
    if fold_in is None:
        fixed = _plsa_fold_in.fold_in_hyper(phi, corpus, hyper)
        theta, _, objective, _, _ = _plsa_fold_in.fold_in(
            theta, corpus, fixed, fold_in_tol, max_iter=FOLD_IN_MAX_ITER, tempered=tempered
        )
    else:
        theta, objective = fold_in(theta, corpus, phi, hyper, fold_in_tol)
    return theta, phi, result.trace, result.n_iter, result.converged, objective


def uniform_topics(hyper: Hyper, n_topics: int, dtype):
    """(n_topics,) uniform proportions over the real (unpadded) topics."""
    if hyper.topic_mask is None:
        return jnp.full(n_topics, 1.0 / n_topics, dtype)
    return jnp.asarray(hyper.topic_mask / jnp.sum(hyper.topic_mask), dtype)


# ----------------------------------------------------------------------------- host algebra


def doc_sums(values, csr):
    """Per-document sums of per-nonzero ``values`` (CSR order, NumPy)."""
    doc = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
    return np.bincount(doc, weights=values, minlength=csr.shape[0])


def log_coefficients(csr):
    """log N_d! - sum_w log x_dw!, per document of a CSR count matrix: the
    multinomial coefficient."""
    lengths = np.asarray(csr.sum(axis=1)).ravel()
    return gammaln(lengths + 1.0) - doc_sums(gammaln(csr.data + 1.0), csr)


def n_parameters(n_documents: int, n_words: int, n_components: int) -> int:
    """Free parameters: K(W - 1) for the topics plus D(K - 1) for the documents' mixtures.

    The second term grows with the corpus: pLSA has one mixture per training document.
    """
    return n_components * (n_words - 1) + n_documents * (n_components - 1)
