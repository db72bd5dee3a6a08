"""Generative models of latentlab, one per file, each declared once in NumPyro.

Installed as ``latentlab.models``; import it only under that name.

Every model file follows the same order, each part under a section heading comment
(``# ---- parameters``, ``declaration``, ``init``, ``prepare``, ``E-step``/``M-step``
or ``EM``, ``closed form``, ``host algebra``), so that a newcomer who has read one
can find their way in the others:

1. **Story** -- the module docstring: the generative process in formulas, the paper
   and equations it follows, and what EM maximises.
2. **Params** (and **Hyper**) -- NamedTuples of the parameters and of the fixed
   settings EM needs (variance floors, prior strengths, masks of padding), and of
   the data and statistics the steps exchange.  They come before the declaration
   because the declaration and the steps are written in their terms.
3. **Declaration** -- one NumPyro function (exported as ``model``), with the priors
   switched on or off by ``handlers.mask`` and missing entries handled exactly.  MAP,
   SVI, NUTS, sampling and ``log_likelihood`` all run on it; EM's objective equals
   its log density (the declared-once contract).  After it, ``posterior_spec``: the
   declaration's latent sites (dimensions, supports, units, which need rotating or
   relabelling), all that :mod:`latentlab.inference.posterior` reads of a model.
4. **init** -- ``init_params`` (random starts) and, where one exists, a deterministic
   start (``init_from_pca``).
5. **prepare** -- turning data into what the E-step reads (sufficient statistics,
   chunks of rows with missing entries, corpora), on the host in NumPy: for the
   Gaussian-latent models :func:`latentlab.models.gaussian_latent.summarise`; the
   mixture's ``GMMData`` and pLSA's ``Corpus`` are built, padded to shape buckets, by
   their estimators.
6. **e_step** and **m_step** -- the pure functions the one EM engine
   (:func:`latentlab.inference.em.fit_em`) iterates:
   ``e_step(params, data, hyper) -> (stats, objective)`` with ``stats`` sums over
   rows, ``m_step(stats, params, hyper) -> params``; ``step_functions`` where static
   variants (covariance type, tempering) must be the same objects every call.  Each EM
   model hands them to the engine as an :class:`~latentlab.inference.em.EMModel`
   (``em_model``), with its starts made inside the fit program (``em_starts``), a
   ``finish`` where the fit ends with more than EM (pLSA's last fold-in) and its
   quasi-Newton ``coordinates`` where it has them.
7. **Closed form** where one exists (PPCA's Tipping-Bishop solution), then the
   host-side algebra estimators report (covariances, conditionals, samples,
   rescaling, parameter counts).

Each step's docstring names the equation it implements (Tipping & Bishop 1999 eq. ...,
Bishop PRML 12.54 ...); docstrings cite papers and equations, never documents
outside the repository.

Algebra modules.  ``gaussian_latent.py`` is not a model but the algebra PPCA, factor
analysis, Bayesian PCA and supervised PCA share: the pieces of their declarations,
their padded EM fit and compiled row programs, and the host-side algebra, with
posterior moments, the E-step's row sums and the regression M-step in
``_gaussian_latent_moments.py``, the PCA start, the padding of the latent dimension
and the data preparation in ``_gaussian_latent_start.py``, stepwise (online) EM in
``_gaussian_latent_online.py`` and the E-step over rows read from an out-of-core or
Dask source in ``_gaussian_latent_chunked.py``.  A file holds one concept, however
long; a piece of a model's algebra that is a concept of its own lives in a private
module named after the model and what it holds
(``_gmm_covariances.py``: every switch on the covariance type; ``_gmm_observe.py`` and
``_gmm_statistics.py``: how the mixture's declaration observes a row, and its
E-step's data layout and row sums; ``_gmm_starts.py``: its starts from responsibilities,
k-means or k-means++; ``_plsa_algebra.py``:
the simplex and per-entry algebra pLSA's fit and fold-in share; ``_plsa_fold_in.py``:
pLSA's fold-in of new documents; ``_plsa_layout.py``: how counts are padded for its
programs).  A private module never imports its model module
(only its types, for annotations); the model module imports it and re-exports its
public names, so estimators and users import ``latentlab.models.<model>`` alone.
Modules that build on a model instead -- its compiled fit and fold-in programs, with
nothing of an estimator in them -- import the model module and are not imported by it;
the estimator imports them (pLSA: ``plsa_programs.py``, public, its compiled programs
and host-side passes -- corpus building, the EM and MAP/SVI fits and their starts,
fold-in of new documents, document completion, stepwise EM and the chunked route;
the mixture: ``gmm_programs.py``, public, its EM and MAP/SVI fits, the starts'
host side, scoring, imputation's conditional mixture, stepwise EM and the chunked
route).

``vae.py``, the variational autoencoder, has no EM: after the story come its
networks, the declaration, the amortised guide and the ELBO that SVI maximises.
"""
