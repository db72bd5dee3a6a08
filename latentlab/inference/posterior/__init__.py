"""The posterior engine: draws of a fitted model's parameters and what to do with them.

Model-agnostic, like the rest of :mod:`latentlab.inference`: a model describes its
parameter sites once in a :class:`~.spec.PosteriorSpec` (exported by each module of
:mod:`latentlab.models`), :func:`~.problem.build_problem` turns the spec, the fitted
declaration and the data into a :class:`~.problem.PosteriorProblem`, and
:func:`~.sampling.sample` runs NUTS, SVI or a Laplace approximation on it and returns
an ArviZ DataTree.  :mod:`.alignment` (Procrustes, Hungarian matching, rotation-free
summaries), :mod:`.laplace` and :mod:`.loo` hold the pieces users call directly,
re-exported by :mod:`latentlab.posterior`.

The estimators reach it through ``sample_posterior`` (see
:mod:`latentlab.estimators._posterior_hooks` for what an estimator provides).
"""

from latentlab.inference.posterior.spec import PosteriorSpec, Site

__all__ = ["PosteriorSpec", "Site"]
