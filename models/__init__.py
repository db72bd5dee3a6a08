"""Generative models of latentlab, one per file, each declared once in NumPyro.

Installed as ``latentlab.models``; import it only under that name.

Every model file follows the same order, so that a newcomer who has read one can
find their way in the others:

1. **Story** -- the module docstring: the generative process in formulas, the paper
   and equations it follows, and what EM maximises.
2. **Params** (and **Hyper**) -- NamedTuples of the parameters and of the fixed
   settings EM needs (variance floors, prior strengths, masks of padding).
3. **Declaration** -- one NumPyro function (exported as ``model``), with the priors
   switched on or off by ``handlers.mask`` and missing entries handled exactly.  MAP,
   SVI, NUTS, sampling and ``log_likelihood`` all run on it; EM's objective equals
   its log density (the declared-once contract).
4. **init** -- ``init_params`` (random starts) and, where one exists, a deterministic
   start (``init_from_pca``).
5. **prepare** -- turning data into what the E-step reads (sufficient statistics,
   chunks of rows with missing entries, corpora), on the host in NumPy.
6. **e_step** and **m_step** -- the pure functions the one EM driver
   (:func:`latentlab.inference.em.run_em`) iterates:
   ``e_step(params, data, hyper) -> (stats, objective)``,
   ``m_step(stats, params, hyper) -> params``.
7. **Closed form** where one exists (PPCA's Tipping-Bishop solution), then the
   host-side algebra estimators report (covariances, conditionals, samples,
   rescaling, parameter counts).

``gaussian_latent.py`` is not a model but the algebra PPCA, factor analysis,
Bayesian PCA and supervised PCA share (posterior moments, the regression M-step, the
PCA start, the padding of the latent dimension, the observed-data marginal).
"""
