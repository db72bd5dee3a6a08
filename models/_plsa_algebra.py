"""The algebra that pLSA's fit and its fold-in share (:mod:`latentlab.models.plsa`).

Everything here works on the nonzero entries of the count matrix or on rows of the
simplex: the projection of an extrapolated step back onto the simplex, the symmetric
Dirichlet log-density with padding topics left out, the per-entry expected topic counts
of Hofmann's (tempered) E-step, per-document sums, and the M-step's normalisations with
the Dirichlet pseudo-counts.  ``hyper`` and ``corpus`` arguments are the
:class:`~latentlab.models.plsa.Hyper` and :class:`~latentlab.models.plsa.Corpus` of the
model module, read by field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln, xlogy

if TYPE_CHECKING:  # the model module imports this one: its types only for annotations
    from latentlab.models.plsa import Corpus, Hyper

# no __all__: a private module; latentlab.models.plsa and its fold-in import from it

# SQUAREM extrapolates in probability space and can step off the simplex.  A coordinate
# pushed below zero restarts at this fraction of the uniform value: small enough to
# keep most of the jump, large enough for EM's multiplicative updates to grow it back
# within a few iterations when it belongs (an exact zero could never move again).  The
# EM driver keeps the jump only if it does not lower the objective.
_FLOOR = 1e-3


def onto_simplex(p, size=None):
    """Rows with a negative entry (after an extrapolation step) back onto the simplex
    of ``size`` coordinates (default: the row's length; padding topics, which stay at
    exactly 0, do not count)."""
    size = p.shape[-1] if size is None else size
    outside = jnp.any(p < 0, axis=-1, keepdims=True)
    lifted = jnp.where(p < 0, _FLOOR / size, p)
    return jnp.where(outside, lifted / jnp.sum(lifted, axis=-1, keepdims=True), p)


def topic_mask(hyper: Hyper, n_topics: int, dtype):
    """(K,) 1 for a real topic, 0 for a padding topic."""
    if hyper.topic_mask is None:  # static: the pytree's structure
        return jnp.ones(n_topics, dtype)
    return jnp.asarray(hyper.topic_mask, dtype)


def onto_topics(theta, hyper: Hyper):
    """:func:`onto_simplex` for the documents' topic proportions."""
    if hyper.topic_mask is None:
        return onto_simplex(theta)
    return onto_simplex(theta, jnp.sum(hyper.topic_mask))


def log_dirichlet_rows(p, concentration, mask=None):
    """log Dirichlet(p_row | concentration) of every row, symmetric; 0 log 0 = 0.  With
    ``mask`` (last axis), only the coordinates where it is 1 make up the distribution."""
    if mask is None:
        n, exponent = p.shape[-1], concentration - 1.0
    else:
        n, exponent = jnp.sum(mask), (concentration - 1.0) * mask
    norm = gammaln(n * concentration) - n * gammaln(concentration)
    return norm + jnp.sum(xlogy(exponent, p), axis=-1)


def log_dirichlet(p, concentration, row_mask, mask=None):
    """sum_rows row_mask * log Dirichlet(p_row | concentration) (``mask``: as for
    :func:`log_dirichlet_rows`)."""
    rows = log_dirichlet_rows(p, concentration, mask)
    return jnp.sum(jnp.where(row_mask > 0, rows, 0.0))


def token_terms(theta, phi_entries, corpus: Corpus, tempering, tempered: bool):
    """Per nonzero entry i = (d, w): the expected topic counts x_dw q_dwk (nnz, K), the
    objective terms, and log (theta_d Phi)_w (untempered).  ``phi_entries`` is
    ``(Phi^T)[corpus.word]``, (nnz, K).

    ``x / (theta Phi)`` is the KL-NMF ratio; it is taken only where a count is observed
    (padding entries, count 0, contribute nothing, whatever their probability).
    """
    # theta_dk phi_kw at the nonzeros.  The barriers keep XLA from fusing the gathers
    # into every consumer (the sums and both scatters), which recomputes them: 3x slower.
    theta_entries = theta.at[corpus.doc].get(mode="promise_in_bounds", indices_are_sorted=True)
    joint = jax.lax.optimization_barrier(theta_entries * phi_entries)
    probability = jnp.sum(joint, axis=1)
    if tempered:  # a static switch: a lax.cond here costs plain EM 3x (no fusion)
        joint = joint**tempering
    total = jnp.sum(joint, axis=1) if tempered else probability
    observed = corpus.count > 0
    possible = observed & (total > 0)
    ratio = jnp.where(possible, corpus.count / jnp.where(possible, total, 1.0), 0.0)
    expected = jax.lax.optimization_barrier(joint * ratio[:, None])
    # count * log(total) / tempering; -inf where a count has probability 0, 0 for padding
    log_total = jnp.where(observed, corpus.count * jnp.log(jnp.where(observed, total, 1.0)), 0.0)
    log_probability = jnp.where(observed, jnp.log(jnp.where(observed, probability, 1.0)), 0.0)
    if tempered:
        log_total = log_total / tempering
    return expected, log_total, log_probability


def doc_sum(values, corpus: Corpus, n_docs: int):
    """Sums of per-entry values by document (the entries are sorted by document)."""
    return jax.ops.segment_sum(
        values, corpus.doc, n_docs, indices_are_sorted=True, mode="promise_in_bounds"
    )


def normalise_rows(counts, fallback):
    """Rows divided by their sums; a row with nothing in it takes ``fallback``."""
    total = jnp.sum(counts, axis=-1, keepdims=True)
    return jnp.where(total > 0, counts / jnp.where(total > 0, total, 1.0), fallback)


def update_theta(doc_counts, hyper: Hyper):
    """theta's M-step: expected counts plus the prior's pseudo-counts, normalised; a
    document without tokens (padding) gets uniform proportions over the real topics."""
    topics = topic_mask(hyper, doc_counts.shape[1], doc_counts.dtype)
    uniform = topics / jnp.sum(topics)
    return normalise_rows(doc_counts + (hyper.doc_topic_prior - 1.0) * topics, uniform)


def update_phi(word_counts, phi, hyper: Hyper):
    """phi's M-step; a topic that no token uses (a padding topic) keeps ``phi``."""
    topics = topic_mask(hyper, word_counts.shape[0], word_counts.dtype)
    pseudo = (hyper.topic_word_prior - 1.0) * topics[:, None]
    return normalise_rows(word_counts + pseudo, phi)
