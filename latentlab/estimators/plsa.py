"""``latentlab.PLSA``: probabilistic latent semantic analysis fitted by EM or MAP/SVI.

One class, the whole scikit-learn surface: it validates and converts the counts,
calls pure functions, and stores the fitted attributes.  The functions live beside
the model: the model's algebra in :mod:`latentlab.models.plsa`; the compiled programs
and host-side passes in :mod:`latentlab.models.plsa_programs` (the corpus preparation,
the fitting routes -- starts, EM, MAP/SVI -- fold-in of new documents, document
completion, stepwise EM's statistics and the chunked route); MAP/SVI in
:func:`latentlab.inference.svi.fit_best_of`.
What stays here warns the user (through scikit-learn's ``ConvergenceWarning`` or at
the caller's line): :func:`fold_in_result` and :func:`completion_scores`, which wrap
the fold-in's and the completion's results.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import (
    _num_samples,
    check_is_fitted,
    check_random_state,
)

from latentlab._plsa_chunk_tasks import check_counts, summarise_counts
from latentlab._settings import (
    ArrayLike,
    Boolean,
    Dtype,
    InstanceOf,
    Integer,
    Options,
    RandomState,
    Real,
    Verbose,
    scale_settings,
)
from latentlab._validation import check_data, check_positive_int
from latentlab.estimators import _posterior_hooks
from latentlab.estimators.base import (
    LATENTLAB_FILES,
    LatentEstimator,
    jax_key,
    to_numpy,
    warn_not_converged,
)
from latentlab.inference.chunked import is_dask, row_source
from latentlab.inference.online import check_learning_decay, stepwise_update
from latentlab.models import plsa, plsa_programs
from latentlab.models.plsa_programs import (
    build_corpus,
    chunk_statistics,
    draw_starts,
    fit_chunked,
    fit_em_program,
    fit_gradient,
    fold_in_documents,
    fold_in_source,
    hyperparameters,
    run_fold_in,
    thin_counts,
    tolerance_scale,
    update_topics,
    with_topics,
)

__all__ = ["PLSA"]


def _dask_rows(est, name: str, X, n_columns=None):
    """Method ``name`` over a Dask array's row blocks (NumPy or SciPy sparse): a lazy
    Dask array with X's row chunks.  Each block is folded in on its own by the
    in-memory program, on the worker that holds it.  The graph carries a copy of the
    estimator without the training documents' theta (n_train x K) and other per-document
    state, which fold-in never reads: only the topics and the settings."""
    from latentlab.estimators._chunked import map_row_output

    model = copy.copy(est)
    model.__dict__ = {k: v for k, v in est.__dict__.items() if k not in _PER_DOCUMENT}
    model.params_ = {"phi": est.params_["phi"]}
    return map_row_output(model, getattr(model, name), X, n_columns=n_columns)


# fitted state that grows with the training corpus (not needed to fold in new documents)
_PER_DOCUMENT = ("params_", "doc_lengths_", "online_state_")


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


def completion_scores(scored, theta, phi, n_training_tokens: float):
    """:func:`latentlab.models.plsa_programs.completion_scores` with its warnings:
    per document, the held-out part's sum x log p, its multinomial coefficient and its
    number of tokens."""
    out = plsa_programs.completion_scores(scored, theta, phi, n_training_tokens)
    loglik, coefficients, tokens, floored_tokens, floor, impossible = out
    if floored_tokens is not None:
        warnings.warn(
            f"{floored_tokens} held-out token(s) are words absent from "
            f"the training corpus (probability 0 under the ML topics); they are scored "
            f"at the add-one floor 1/(N + W) = {floor:.3g}.  Fit with "
            "topic_word_prior > 1 to smooth the topics instead.",
            UserWarning,
            skip_file_prefixes=LATENTLAB_FILES,
        )
    if impossible:
        warnings.warn(
            "some held-out tokens have probability 0 under the fitted topics and "
            "folded-in proportions; their documents score -inf.",
            UserWarning,
            skip_file_prefixes=LATENTLAB_FILES,
        )
    return loglik, coefficients, tokens


METHODS = ("em", "map", "svi")


class PLSA(
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    LatentEstimator,
):
    """Probabilistic latent semantic analysis (Hofmann 1999), declared once in
    :func:`latentlab.models.plsa.plsa_model`.

    A document's word counts are multinomial with probabilities ``theta_d Phi``:
    ``theta_d = p(z | d)`` mixes the ``n_components`` topics ``phi_k = p(w | z = k)``.
    EM works on the nonzero counts only (O(nnz K) per iteration, dense or
    ``scipy.sparse`` input) and is the multiplicative update of KL-NMF.  New documents
    are *folded in*: their ``theta`` maximises the likelihood with the topics fixed.

    Parameters
    ----------
    n_components : int, default=10
        Number of topics K >= 1.  On small and medium corpora EM and fold-in compute
        with K rounded up to a multiple of 4, the extra topics held at exactly zero
        weight (the same fit), so that fits with 5-8 topics, say, share one compiled
        program.
    method : {"em", "map", "svi"}, default="em"
        ``"em"``: jit-compiled EM (maximum likelihood, or MAP when a prior is given).
        ``"map"``: gradient-based MAP (AutoDelta) on the declaration with the Dirichlet
        priors on (flat when not given, i.e. maximum likelihood).  ``"svi"``: mean-field
        posterior (AutoNormal); ``params_["phi"]`` is its median.  Both gradient methods
        build the dense (n_documents, n_words) probability matrix.
    tempering : float in (0, 1], default=1.0
        Hofmann's tempered EM: responsibilities ``~ (theta_dk phi_kw)^beta``.  1 is plain
        EM.  With ``beta < 1`` the fit maximises the tempered objective
        ``(1/beta) sum x_dw log sum_k (theta_dk phi_kw)^beta`` (traced in
        ``log_likelihoods_``), not the likelihood; fold-in uses the same ``beta``.
    doc_topic_prior, topic_word_prior : float >= 1 or None, default=None
        Symmetric Dirichlet concentrations of ``theta_d`` and ``phi_k``.  With either
        given, EM maximises the log joint density ("smoothed pLSA": the M-step adds
        ``prior - 1`` pseudo-counts, the exact MAP on the simplex); None means 1 (flat).
        Fold-in of new documents uses the same ``doc_topic_prior``.
    tol : float, default=1e-8
        Relative stopping rule: EM stops when the objective changes by at most
        ``tol * |l_1|`` between two (SQUAREM) iterations, where ``|l_1|`` is minus the
        log-likelihood of a single topic (the corpus's word frequencies), without the
        multinomial coefficient: the scale of the ``sum x log p`` that EM improves,
        fixed for the fit.  (The log-likelihood itself is a poor scale: its constant
        multinomial coefficient can nearly cancel it -- digits: +1.76e6 against
        -1.95e6.)  On the digits counts (``|l_1|`` = 2.1e6 nats, so 0.02 nats per
        cycle) the default stops fits at K = 5, 10, 20 within 100-1,600 SQUAREM cycles
        (1-4 s) and within 1e-3 nats per token of a fit twice as long; on a corpus of
        60 documents (6e4 nats) it reaches the MAP optimum to 1e-4 nats.  pLSA's
        likelihood has plateaus where EM gains little per cycle before climbing again,
        which no per-iteration rule can see past.  0 runs ``max_iter`` iterations.
    max_iter : int, default=2000
        Maximum number of EM iterations (SQUAREM cycles of four EM steps when
        ``accelerate``).
    n_init : int, default=1
        Number of random starts; the best objective is kept.
    accelerate : bool, default=True
        SQUAREM extrapolation; a jump that leaves the simplex is put back on it and the
        EM driver keeps it only if it does not lower the objective.
    doc_topic_init : array (n_documents, n_components), optional
    topic_word_init : array (n_components, n_words), optional
        Starting values (rows are normalised).  Exact zeros stay zero under EM.
    svi_steps : int, default=3000
        Optimisation steps for ``"map"`` and ``"svi"``.
    learning_rate : float, default=0.05
        Initial Adam step size for ``"map"`` and ``"svi"`` (decays 50-fold).
    random_state : int, RandomState or None, default=None
    dtype : {"float64", "float32"}, default="float64"
    verbose : int, default=0
        If > 0, print the EM objective every ``verbose`` iterations.
    vocabulary : sequence of str (n_words,), optional
        Names of the words (columns), for :meth:`top_words`.
    learning_decay : float in (0.5, 1], default=0.7
        Cappe & Moulines' kappa for :meth:`partial_fit`: chunk t mixes into the running
        topic-word statistics with weight ``(t + 2) ** -learning_decay`` (scikit-learn's
        ``LatentDirichletAllocation`` name).
    chunk_size : int or None, default=None
        Documents per chunk on the chunked routes (a Dask array, an h5py/zarr array, a
        large ``np.memmap``, :class:`~latentlab.inference.chunked.RowChunks`) of
        :meth:`fit`, and of :meth:`transform` and the scores on out-of-core counts.
        None: about 16 MB of float64 rows, or a Dask array's largest row block.
        In-memory fits ignore it; the results do not depend on it beyond round-off.  A
        Dask array's row outputs are folded in per block of the array (see
        :meth:`transform`).
    devices : None, "all" or list of jax devices (or their ids), default=None
        Devices that ``method="em"`` on in-memory counts splits its documents over
        (rows of theta and of the counts sharded with ``jax.sharding``, topics
        replicated, topic-word sums all-reduced), the last fold-in included; None:
        JAX's default device.  ``"all"`` is ``jax.devices()``, which after
        ``jax.distributed.initialize()`` spans every host.  The chunked routes refuse
        it with a ValueError (a Dask array is distributed by Dask instead); MAP/SVI
        ignore it.

    Attributes
    ----------
    components_ : ndarray (n_components, n_words)
        ``p(w | z)``; rows sum to 1.  Words that never occur get probability 0 (ML).
    params_ : dict
        ``theta`` (n_documents, n_components) of the training documents and ``phi``
        (n_components, n_words), by NumPyro site name.  ``theta`` comes from a last
        fold-in at the final ``phi`` from the uniform start ``transform`` uses, so
        ``transform(X_train)`` agrees with it to the fold-in tolerance.
    doc_lengths_ : ndarray (n_documents,)
    vocabulary_ : ndarray of str (n_words,) or None
    log_likelihoods_ : ndarray (n_iter_,)
        EM objective after each iteration: the log-likelihood with its multinomial
        coefficients (ML), the log joint (with priors), or the tempered objective.  The
        last entry is at ``params_``; for ML fits it equals ``n_documents * score(X)``
        up to the fold-in tolerance (at most ~2e-5 nats per document).
        For ``"map"``/``"svi"``: the objective of every optimisation step (log joint,
        or ELBO), then, for ``"map"``, the log joint at ``params_``.
    n_iter_, converged_ : int, bool
    n_samples_seen_, online_state_ : int, dict
        Set by :meth:`partial_fit` (stepwise EM): documents seen in the stream, and its
        running topic-word statistics and topics.
    model_ : callable
        The NumPyro declaration with this fit's static settings bound; ``model_(X)``.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> rng = np.random.default_rng(0)
    >>> topics = np.array([[0.45, 0.45, 0.05, 0.05], [0.05, 0.05, 0.45, 0.45]])
    >>> X = np.vstack([rng.multinomial(100, t) for t in topics for _ in range(20)])
    >>> model = latentlab.PLSA(2, random_state=0).fit(X)
    >>> np.sort(model.components_[:, 0]).round(1)
    array([0. , 0.5])
    """

    _posterior_problem = _posterior_hooks.topic_problem  # for sample_posterior

    # A Dirichlet prior below 1 has an unbounded density: neither MAP nor fold-in exists.
    _generative = True  # score, bic, aic, n_parameters_, sample_posterior
    # for standard_errors
    _no_standard_errors = (
        "its topics and the documents' mixtures are identified only up to transformations "
        "that keep their product (the likelihood is flat there), so their information "
        "matrix is singular; sample_posterior(method='nuts') describes that spread"
    )
    _settings = {
        "n_components": Integer(1, None),
        "method": Options(*METHODS),
        "tempering": Real(0, 1, closed="right"),
        "doc_topic_prior": Real(1, None, finite=True) | None,
        "topic_word_prior": Real(1, None, finite=True) | None,
        "tol": Real(0, None),
        "max_iter": Integer(1, None),
        "n_init": Integer(1, None),
        "accelerate": Boolean(),
        "doc_topic_init": ArrayLike() | None,
        "topic_word_init": ArrayLike() | None,
        "svi_steps": Integer(1, None),
        "learning_rate": Real(0, None, closed="neither", finite=True),
        "random_state": RandomState(),
        "dtype": Dtype(),
        "verbose": Verbose(),
        "vocabulary": InstanceOf(Iterable, "a sequence of words") | None,
        "learning_decay": Real(0.5, 1, closed="right"),
        **scale_settings(),
    }

    def __init__(
        self,
        n_components=10,
        *,
        method="em",
        tempering=1.0,
        doc_topic_prior=None,
        topic_word_prior=None,
        tol=1e-8,
        max_iter=2000,
        n_init=1,
        accelerate=True,
        doc_topic_init=None,
        topic_word_init=None,
        svi_steps=3000,
        learning_rate=0.05,
        random_state=None,
        dtype="float64",
        verbose=0,
        vocabulary=None,
        learning_decay=0.7,
        chunk_size=None,
        devices=None,
    ):
        self.n_components = n_components
        self.method = method
        self.tempering = tempering
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.accelerate = accelerate
        self.doc_topic_init = doc_topic_init
        self.topic_word_init = topic_word_init
        self.svi_steps = svi_steps
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.dtype = dtype
        self.verbose = verbose
        self.vocabulary = vocabulary
        self.learning_decay = learning_decay
        self.chunk_size = chunk_size
        self.devices = devices

    # -- validation ---------------------------------------------------------------------

    def _counts(self, X, *, reset: bool, allow_empty: bool = False):
        """X as a canonical CSR matrix of counts (sorted indices, no explicit zeros)."""
        X = check_data(self, X, reset=reset, allow_nan=False, accept_sparse=("csr", "csc", "coo"))
        csr = sp.csr_matrix(X, dtype=np.float64, copy=True)
        csr.sum_duplicates()
        check_counts(csr, allow_empty=allow_empty)
        csr.sort_indices()
        return csr

    def _check_words(self, word_counts):
        """Check ``vocabulary`` against the counts' columns and warn of words that never
        occur (``word_counts``: per word, 0 where it never does)."""
        W = len(word_counts)
        if self.vocabulary is not None and len(self.vocabulary) != W:
            raise ValueError(f"vocabulary has {len(self.vocabulary)} words but X has {W} columns")
        unseen = np.flatnonzero(word_counts == 0)
        if unseen.size:
            shown = ", ".join(map(str, unseen[:10])) + (" ..." if unseen.size > 10 else "")
            warnings.warn(
                f"{unseen.size} word(s) never occur in X (columns {shown}); they get "
                "probability 0 in every topic (only prior mass with topic_word_prior > 1)",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )

    def _check_settings(self):
        """Settings that depend on each other (the table is checked on entry to fit);
        returns K."""
        if self.tempering != 1 and self.method != "em":
            raise ValueError("tempering applies to method='em' only")
        return int(self.n_components)

    def _use_prior(self) -> bool:
        given = self.doc_topic_prior is not None or self.topic_word_prior is not None
        return self.method != "em" or given

    @property
    def objective_name_(self) -> str:
        """What ``log_likelihoods_`` traces: "ELBO" (SVI), "tempered objective"
        (tempered EM), "log joint density" (Dirichlet smoothing or MAP), else
        "log-likelihood"."""
        check_is_fitted(self)
        if self.method == "svi":
            return "ELBO"
        if self.tempering != 1.0:
            return "tempered objective"
        if self.doc_topic_prior is not None or self.topic_word_prior is not None:
            return "log joint density"
        return "log-likelihood"

    def _hyper(self, dtype, K, n_topics=None) -> plsa.Hyper:
        """The hyperparameters as NumPy scalars; with a topic mask when the K topics are
        padded to ``n_topics``."""
        hyper = hyperparameters(
            self.doc_topic_prior,
            self.topic_word_prior,
            self._use_prior(),
            self.tempering,
            dtype,
        )
        return hyper if n_topics is None else with_topics(hyper, K, n_topics)

    def _user_init(self, name, shape):
        value = getattr(self, name)
        if value is None:
            return None
        value = np.asarray(value, dtype=np.float64)
        if value.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {value.shape}")
        if not np.all(np.isfinite(value)) or np.any(value < 0):
            raise ValueError(f"{name} must be finite and non-negative")
        total = value.sum(axis=1, keepdims=True)
        if np.any(total <= 0):
            raise ValueError(f"every row of {name} needs a positive entry")
        return value / total

    # -- fitting ------------------------------------------------------------------------

    def fit(self, X, y=None):
        """Fit to the (n_documents, n_words) count matrix X (dense or sparse); returns self.

        Counts out of memory (a ``np.memmap`` of 256 MB or more, h5py/zarr, Dask, or any
        array or sparse matrix wrapped in :class:`~latentlab.inference.chunked.RowChunks`)
        are fitted by the same EM, read in row chunks (``method="em"`` only)."""
        source = row_source(X, chunk_size=self.chunk_size)
        if source is not None:  # out of core or Dask: exact EM over row chunks
            return self._fit_source(source)
        csr = self._counts(X, reset=True)
        K = self._check_settings()
        D, W = csr.shape
        self._check_words(np.diff(csr.tocsc().indptr))
        theta0 = self._user_init("doc_topic_init", (D, K))
        phi0 = self._user_init("topic_word_init", (K, W))
        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            corpus = build_corpus(csr, dtype, nonzeros=True if self.tempering != 1 else None)
            n_docs = corpus.doc_mask.shape[0]
            rng = check_random_state(self.random_state)
            starts = draw_starts(rng, self.n_init, n_docs, D, W, K, theta0, phi0, dtype)
            if self.method == "em":
                fitted = self._fit_em(corpus, starts, tolerance_scale(csr), K, dtype)
                theta, phi, trace, n_iter, converged, objective = fitted
            else:
                theta, phi, trace, n_iter, converged = fit_gradient(
                    csr,
                    K,
                    starts,
                    D,
                    method=self.method,
                    doc_topic_prior=self.doc_topic_prior,
                    topic_word_prior=self.topic_word_prior,
                    svi_steps=self.svi_steps,
                    learning_rate=self.learning_rate,
                    random_state=self.random_state,
                )
                # the last fold-in (see models.plsa.fit_finish), from the uniform as transform
                hyper = self._hyper(dtype, K)
                theta, _, objective, _ = run_fold_in(
                    corpus, phi, hyper, tempered=self.tempering != 1
                )
        return self._store_fit(
            theta,
            phi,
            trace,
            n_iter,
            converged,
            objective,
            doc_lengths=np.asarray(csr.sum(axis=1), dtype=np.float64).ravel(),
            last_is_objective=self.method != "svi",
        )

    def _fit_source(self, source):
        """``fit`` on a chunked source: exact EM, the counts read chunk by chunk
        (:func:`latentlab.models.plsa_programs.fit_chunked`)."""
        from latentlab.estimators._chunked import forget_feature_names

        if self.method != "em":
            raise ValueError(
                f"PLSA(method={self.method!r}) needs X in memory; out-of-core and Dask "
                "inputs are fitted by method='em'"
            )
        if self.devices is not None:
            raise ValueError(
                f"PLSA(devices={self.devices!r}) splits in-memory fits only; out-of-core "
                "and Dask counts are fitted on the default device (leave devices=None)"
            )
        K = self._check_settings()
        D, W = source.shape
        if self.vocabulary is not None and len(self.vocabulary) != W:  # before the first pass
            self._check_words(np.ones(W))
        summary = summarise_counts(source)
        self._check_words(summary.word_totals)
        forget_feature_names(self, W)
        theta0 = self._user_init("doc_topic_init", (D, K))
        phi0 = self._user_init("topic_word_init", (K, W))
        with self._precision():
            dtype = np.dtype(jax.dtypes.canonicalize_dtype(np.float64))
            out = fit_chunked(
                source,
                summary,
                K,
                self._hyper(dtype, K),
                tempered=self.tempering != 1,
                theta0=theta0,
                phi0=phi0,
                rng=check_random_state(self.random_state),
                n_init=self.n_init,
                tol=self.tol,
                max_iter=self.max_iter,
                accelerate=self.accelerate,
                verbose=self.verbose,
            )
        return self._store_fit(*out, doc_lengths=summary.doc_lengths, last_is_objective=True)

    def _fit_em(self, corpus, starts, scale, K, dtype, chunked=None):
        """:func:`~latentlab.models.plsa_programs.fit_em_program` with this
        estimator's settings (in memory, or the chunked route's ``chunked``)."""
        return fit_em_program(
            corpus,
            starts,
            scale,
            K,
            self._hyper(np.dtype(dtype), K),
            tol=self.tol,
            max_iter=self.max_iter,
            accelerate=self.accelerate,
            verbose=self.verbose,
            tempered=self.tempering != 1,
            devices=self.devices,
            chunked=chunked,
        )

    def _store_fit(
        self, theta, phi, trace, n_iter, converged, objective, doc_lengths, last_is_objective
    ):
        """The fitted attributes of every route (in memory, out of core, Dask), from the
        padded program outputs; ``last_is_objective``: the trace's last entry is set to
        the objective at the returned parameters (EM and MAP)."""
        K = self._check_settings()
        D = len(doc_lengths)
        trace = np.array(trace, dtype=np.float64)
        if last_is_objective:
            trace[-1] = objective
        self._end_fit(
            # copies: they own their data
            {"theta": np.array(to_numpy(theta)[:D, :K]), "phi": np.array(to_numpy(phi)[:K])},
            trace,
            n_iter,
            converged,
            objective=objective,
            advice="the counts may be degenerate for this model (try fewer topics)",
        )
        self.n_components_ = K
        self.doc_lengths_ = np.array(doc_lengths, dtype=np.float64)
        self.vocabulary_ = (
            None if self.vocabulary is None else np.asarray(list(self.vocabulary), dtype=object)
        )
        if not self.converged_:
            warn_not_converged(self)
        return self

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
            previous = None
        else:
            csr = self._counts(X, reset=False)
            state = self.online_state_
            K, phi = self.n_components_, np.asarray(state["phi"], np.float64)
            step, seen = int(self.n_iter_), int(self.n_samples_seen_)
            previous = state["word_stats"]
        n_docs = csr.shape[0]
        tempered = self.tempering != 1
        seen += n_docs
        folded = {}  # the chunk's documents' theta, for params_

        def statistics_of(phi):
            theta, doc_loglik, word_counts = chunk_statistics(csr, phi, hyper, tempered=tempered)
            folded["theta"] = theta
            return word_counts / n_docs, doc_loglik

        def m_step(word_stats, phi):
            return update_topics(word_stats, seen, phi, hyper)

        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            hyper = self._hyper(dtype, K)
            stats, phi, doc_loglik = stepwise_update(
                statistics_of, m_step, previous, phi, step, decay
            )
        theta = folded["theta"]
        self.online_state_ = {"word_stats": stats, "phi": phi}
        self.params_ = {"theta": theta, "phi": phi.copy()}
        self.n_components_ = K
        self.doc_lengths_ = np.asarray(csr.sum(axis=1), np.float64).ravel()
        loglik = float(np.sum(doc_loglik + plsa.log_coefficients(csr))) / n_docs
        self._end_chunk(first, n_docs, loglik)
        return self

    # -- fold-in ------------------------------------------------------------------------

    def _fold_in_new(self, csr):
        """Fold in the documents of ``csr``: (theta (n, K), sum x log p per document),
        -inf for documents with words the topics give probability 0."""
        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            theta, doc_loglik, impossible_docs, converged = fold_in_documents(
                csr,
                self.params_["phi"],
                self._hyper(dtype, self.n_components_),
                tempered=self.tempering != 1,
            )
        return fold_in_result(theta, doc_loglik, impossible_docs, converged)

    def _fold_in_source(self, source):
        """:meth:`_fold_in_new` for a chunked source (memmap, h5py, zarr, Dask): theta
        (n, K), sum x log p and the multinomial coefficient per document, and the
        number of tokens; the same fold-in program as in memory, the counts read in
        chunks."""
        check_is_fitted(self)
        W = source.shape[1]
        if W != self.n_features_in_:
            raise ValueError(
                f"X has {W} features, but PLSA is expecting {self.n_features_in_} features "
                "as input."
            )
        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            hyper = self._hyper(dtype, self.n_components_)
            folded = fold_in_source(
                source, self.params_["phi"], hyper, tempered=self.tempering != 1
            )
        theta, doc_loglik, coefficients, impossible_docs, converged, tokens = folded
        theta, doc_loglik = fold_in_result(theta, doc_loglik, impossible_docs, converged)
        return theta, doc_loglik, coefficients, tokens

    def _completion(self, X, fraction, random_state):
        """Document completion: per document, the held-out part's sum x log p at theta
        folded in on the rest, its multinomial coefficient and its tokens."""
        check_is_fitted(self)
        if not 0 < fraction < 1:
            raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
        csr = self._counts(X, reset=False)
        rng = check_random_state(random_state)
        observed, scored = thin_counts(csr, fraction, rng)
        with warnings.catch_warnings():
            # unseen words are dealt with by completion_scores, for the tokens scored
            warnings.filterwarnings("ignore", message=".*probability 0 under", category=UserWarning)
            theta, _ = self._fold_in_new(observed)
        return completion_scores(scored, theta, self.params_["phi"], self.doc_lengths_.sum())

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

    # -- fitted quantities --------------------------------------------------------------

    def transform(self, X) -> np.ndarray:
        """``p(z | d)`` of each document, folded in with the topics fixed;
        shape (n_documents, n_components).

        Counts out of memory (a memmap, h5py/zarr, :class:`RowChunks`) are folded in
        by the same program, read in row chunks, and equal the in-memory result to
        round-off.  A Dask array gives a lazy Dask array with X's row chunks: each
        block is folded in on its own (documents are independent given the topics),
        reading its counts once; it equals ``transform`` of that block, and the
        whole-corpus result to the fold-in tolerance (the documents still moving are
        batched per block).  ``RowChunks(dask_array)`` instead folds the whole corpus in
        at once, as in memory, with theta (n x K) held on the client."""
        check_is_fitted(self)
        if is_dask(X):
            return _dask_rows(self, "transform", X, n_columns=self.n_components_)
        source = row_source(X, chunk_size=self.chunk_size)
        if source is not None:
            return self._fold_in_source(source)[0]
        return self._fold_in_new(self._counts(X, reset=False))[0]

    def fit_transform(self, X, y=None) -> np.ndarray:
        """Fit, then return ``params_["theta"]`` (``transform(X)`` to fold-in tolerance)."""
        return self.fit(X).params_["theta"].copy()

    def score_samples(self, X) -> np.ndarray:
        """log p(x_d) of each document with theta_d folded in, multinomial coefficient
        included (as NumPyro's ``Multinomial``); shape (n_documents,).  Chunked counts
        and Dask arrays as :meth:`transform`."""
        check_is_fitted(self)
        if is_dask(X):
            return _dask_rows(self, "score_samples", X)
        source = row_source(X, chunk_size=self.chunk_size)
        if source is not None:
            _, doc_loglik, coefficients, _ = self._fold_in_source(source)
            return doc_loglik + coefficients
        csr = self._counts(X, reset=False)
        return self._fold_in_new(csr)[1] + plsa.log_coefficients(csr)

    def perplexity(self, X) -> float:
        """``exp(-sum_dw x_dw log p(w | d) / sum_dw x_dw)``, theta folded in; no
        multinomial coefficient (lower is better).  Folding in on the words scored is
        optimistic: see :meth:`completion_perplexity`.  Chunked counts and Dask arrays
        as :meth:`transform`."""
        check_is_fitted(self)
        if is_dask(X):  # per block: (sum x log p, tokens), added by a tree reduction
            totals = _dask_rows(self, "_perplexity_terms", X, n_columns=2)
            loglik, tokens = totals.sum(axis=0, split_every=8).compute()
            return float(np.exp(-loglik / tokens))
        source = row_source(X, chunk_size=self.chunk_size)
        if source is not None:
            _, doc_loglik, _, tokens = self._fold_in_source(source)
            return float(np.exp(-doc_loglik.sum() / tokens))
        loglik, tokens = self._perplexity_terms(X).sum(axis=0)
        return float(np.exp(-loglik / tokens))

    def _perplexity_terms(self, X) -> np.ndarray:
        """(n_documents, 2): each document's sum x log p(w | d), theta folded in, and
        its number of tokens."""
        csr = self._counts(X, reset=False)
        tokens = np.asarray(csr.sum(axis=1), dtype=np.float64).ravel()
        return np.column_stack([self._fold_in_new(csr)[1], tokens])

    def _n_parameters(self, n_documents: int | None = None) -> int:
        """K(W - 1) + D(K - 1): grows with the number of documents D (by default
        the training documents, as ``n_parameters_``)."""
        check_is_fitted(self)
        D = len(self.doc_lengths_) if n_documents is None else n_documents
        return plsa.n_parameters(D, self.n_features_in_, self.n_components_)

    def bic(self, X) -> float:
        """``-2 log L + p log D`` with p = K(W - 1) + D(K - 1) for the D documents of X.

        pLSA has one topic mixture per document, so p grows with the corpus and BIC
        penalises a corpus's document count, not only its number of topics.
        """
        D = _num_samples(X)
        return float(-2.0 * self.score(X) * D + self._n_parameters(D) * np.log(D))

    def aic(self, X) -> float:
        """``-2 log L + 2 p`` with p = K(W - 1) + D(K - 1) (grows with the corpus)."""
        D = _num_samples(X)
        return float(-2.0 * self.score(X) * D + 2 * self._n_parameters(D))

    def top_words(self, n: int = 10) -> np.ndarray:
        """The ``n`` most probable words of each topic, shape (n_components, n): words
        from the vocabulary if one was given, word (column) indices otherwise."""
        check_is_fitted(self)
        check_positive_int("n", n)
        order = np.argsort(-self.params_["phi"], axis=1, kind="stable")[:, :n]
        return order if self.vocabulary_ is None else self.vocabulary_[order]

    @property
    def components_(self):
        """``p(w | z)``, shape (n_components, n_words); rows sum to 1."""
        check_is_fitted(self)
        return self.params_["phi"].copy()

    @property
    def _n_features_out(self):
        return self.n_components_

    @property
    def model_(self):
        """The NumPyro declaration with this fit's static settings bound."""
        check_is_fitted(self)
        alpha, beta = (
            1.0 if v is None else float(v) for v in (self.doc_topic_prior, self.topic_word_prior)
        )
        return partial(
            plsa.plsa_model,
            n_components=self.n_components_,
            doc_topic_prior=alpha,
            topic_word_prior=beta,
            use_prior=self._use_prior(),
        )

    def sample(self, n_samples: int | None = None, random_state=None):
        """Draw documents through the declaration: ``(X, topic_counts)``.

        Row i replicates training document ``i % n_documents`` (its theta and length);
        the default draws one replicate of the training corpus.  Returns integer arrays
        of shape (n_samples, n_words) and (n_samples, n_components).
        """
        from numpyro import handlers

        check_is_fitted(self)
        D = len(self.doc_lengths_)
        n = D if n_samples is None else n_samples
        check_positive_int("n_samples", n)
        rows = np.arange(n) % D
        with self._precision():
            params = {
                "theta": jnp.asarray(self.params_["theta"][rows]),
                "phi": jnp.asarray(self.params_["phi"]),
            }
            model = handlers.seed(handlers.condition(self.model_, params), jax_key(random_state))
            trace = handlers.trace(model).get_trace(
                doc_lengths=jnp.asarray(self.doc_lengths_[rows].astype(np.int64)),
                n_words=self.n_features_in_,
                explicit_latent=True,
            )
            X = np.asarray(trace["x"]["value"], dtype=np.int64)
            z = np.asarray(trace["z"]["value"], dtype=np.int64)
        return X, z

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        return tags
