"""pLSA's fitting routes as functions: the starts, EM with the last fold-in as one
compiled program (topics padded to a bucket, documents optionally sharded over
devices), and MAP/SVI through the shared multi-start driver."""

from __future__ import annotations

from functools import partial

import jax.numpy as jnp
import numpy as np
from sklearn.utils.validation import check_random_state

from latentlab.estimators._plsa_programs import (
    _pad_topics,
    _padded_topics,
    _work,
    fold_in_tol,
    with_topics,
)
from latentlab.estimators.base import to_numpy
from latentlab.inference.em import fit_em
from latentlab.inference.sharding import pad_axis, row_mesh, shard_fields, shard_rows
from latentlab.models import plsa

__all__ = ["draw_starts", "fit_em_program", "fit_gradient"]


def _sharded(starts: plsa.Params, corpus: plsa.Corpus, K: int, devices):
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


def draw_starts(
    random_state, n_init: int, n_docs_padded, D, W, K, theta0, phi0, dtype
) -> plsa.Params:
    """``n_init`` starts stacked on a leading axis; user values ``theta0`` (D, K) and
    ``phi0`` (K, W) replace random ones."""
    rng = check_random_state(random_state)
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
        n_topics = _padded_topics(corpus, K)
        e_step, work, fold_in = None, _work(corpus, n_topics), None
    else:
        e_step, n_topics, work, fold_in = chunked
    dtype = np.dtype(hyper.tempering.dtype)
    starts = plsa.Params(*_pad_topics(starts.theta, starts.phi, n_topics))
    starts = plsa.Params(starts.theta.astype(dtype), starts.phi.astype(dtype))
    if chunked is None and devices is not None:
        starts, corpus = _sharded(starts, corpus, K, devices)
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
