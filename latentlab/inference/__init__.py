"""Model-agnostic inference engines, each driven by what a model declares.

* :mod:`~latentlab.inference.em` -- the one EM engine.  A model gives an
  :class:`~latentlab.inference.em.EMModel`: pure ``e_step(params, data, hyper) ->
  (stats, objective)`` and ``m_step(stats, params, hyper) -> params``, and optionally
  ``starts`` (made inside the program from traced inputs), ``finish`` (traced after EM:
  pLSA's last fold-in) and ``coordinates`` (the box its quasi-Newton phase works in).
  :func:`~latentlab.inference.em.fit_em` is every EM fit: one compiled program (starts,
  SQUAREM-accelerated EM vmapped over them), then projected BFGS
  (:mod:`~latentlab.inference.quasi_newton`) where EM has not settled in
  :data:`~latentlab.inference.em.POLISH_AFTER` cycles.  The same call serves data in
  memory and rows summed on the host (:mod:`~latentlab.inference.chunked`: memmaps,
  Dask, any ``RowChunks``; the E-step then sums through ``host_sum`` callbacks) and
  rows split over devices (:mod:`~latentlab.inference.sharding`).
* :mod:`~latentlab.inference.online` -- the one stepwise (online) EM driver behind every
  ``partial_fit``: a model gives a chunk's average statistics and its M-step, the
  driver mixes them into the running average with Cappe & Moulines' step sizes.
* :mod:`~latentlab.inference.svi` -- MAP and SVI on the model's NumPyro declaration, and
  the multi-start driver.
* :mod:`~latentlab.inference.posterior` -- posterior draws (NUTS, SVI, Laplace) of any
  declared model from its sites.
* :mod:`~latentlab.inference.programs` -- how programs are compiled (full and quick).
"""

from latentlab.inference.em import EMModel, EMResult, fit_em, run_em

__all__ = ["EMModel", "EMResult", "fit_em", "run_em"]
