"""A posterior problem: what to sample, from where, and how to read the draws.

:func:`build_problem` puts one together from a model's :class:`PosteriorSpec`, the
fitted declaration and point, and the data in data units; :mod:`.sampling` runs NUTS,
SVI or a Laplace approximation on it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import numpy as np

from latentlab.inference.posterior.spec import (
    PosteriorSpec,
    settings_to_target_units,
    to_data_units,
    to_target_units,
)

__all__ = ["Target", "Scoring", "Standardisation", "PosteriorProblem", "build_problem"]


class Target(NamedTuple):
    """What is sampled: ``model(*args)``, started at ``init``."""

    model: Callable  # the declaration with its static settings bound
    args: tuple  # its data, in the target's units
    init: dict  # the fitted point in the target's units (constrained values)


class Scoring(NamedTuple):
    """How each draw scores each row, in data units."""

    model: Callable  # the declaration, called ``model(*args)``
    args: tuple
    sites: tuple  # observed sites whose per-row log-densities are added up
    name: str  # name of the pointwise log-likelihood variable


class Standardisation(NamedTuple):
    """The target's data are ``(data - shift[dim]) / scale``."""

    shift: dict  # column dimension name -> (size,) shift
    scale: float


class PosteriorProblem(NamedTuple):
    spec: PosteriorSpec
    target: Target
    scoring: Scoring
    point: dict  # the fitted parameters in data units: the alignment reference
    use_prior: bool
    coords: dict  # dimension name -> coordinate labels
    standardisation: Standardisation | None = None  # None: sampled in data units
    component_metric: np.ndarray | None = None  # precision of the component distance

    def to_original(self, values: dict) -> dict:
        """Draws (any leading axes) in the target's units -> data units, as NumPy."""
        if self.standardisation is None:
            return {k: np.asarray(v) for k, v in values.items()}
        shift, scale = self.standardisation
        return to_data_units(self.spec, values, shift, scale)

    @property
    def dims(self) -> dict:
        """Site -> dimension names, for the sites that have any."""
        return {name: list(site.dims) for name, site in self.spec.sites.items() if site.dims}

    @property
    def sizes(self) -> dict:
        """Dimension name -> size, read off the fitted point's shapes."""
        sizes = {}
        for name, site in self.spec.sites.items():
            sizes.update(zip(site.dims, np.shape(self.point[name]), strict=True))
        return sizes


def build_problem(
    spec: PosteriorSpec,
    declaration: Callable,
    data: tuple,
    point: dict,
    *,
    use_prior: bool,
    has_missing: bool | None = None,
    standardisation: Standardisation | None = None,
    settings: dict | None = None,
    coords: dict | None = None,
    component_metric=None,
) -> PosteriorProblem:
    """The posterior problem of a fitted model.

    Parameters
    ----------
    spec : the model's :class:`PosteriorSpec`.
    declaration : the fitted declaration (static settings bound), scoring data in
        data units; the target is the same function with ``use_prior``,
        ``has_missing``, the spec's ``target_settings`` and ``settings`` bound.
    data : the declaration's positional data arguments, in data units.
    point : fitted value of every latent site, in data units.
    standardisation : sample on ``(data - shift) / scale`` (``spec.standardise``).
    settings : declaration settings in data units; those in ``spec.setting_units``
        are rescaled to the target's units.
    """
    import jax.numpy as jnp

    missing = {} if has_missing is None else {"has_missing": bool(has_missing)}
    point = {k: np.asarray(v) for k, v in point.items()}
    target_data, init = data, point
    settings = dict(settings or {})
    if standardisation is not None:
        shift, scale = standardisation
        target_data = tuple(
            (np.asarray(arg) - shift[dim]) / scale
            for arg, dim in zip(data, spec.data_dims, strict=True)
        )
        init = to_target_units(spec, point, shift, scale)
        settings = settings_to_target_units(spec, settings, scale)
    if spec.interior:
        eps = spec.interior
        init = {
            k: (v + eps) / (1.0 + eps * v.shape[-1]) if spec.sites[k].constraint == "simplex" else v
            for k, v in init.items()
        }
    target = partial(
        declaration,
        **missing,
        use_prior=use_prior,
        **(spec.target_settings or {}),
        **settings,
    )
    return PosteriorProblem(
        spec=spec,
        target=Target(
            model=target,
            args=tuple(jnp.asarray(a) for a in target_data),
            init={k: jnp.asarray(v) for k, v in init.items()},
        ),
        scoring=Scoring(
            model=partial(declaration, **missing),
            args=tuple(jnp.asarray(a) for a in data),
            sites=spec.observed,
            name=spec.loglik_name,
        ),
        point=point,
        use_prior=use_prior,
        coords=dict(coords or {}),
        standardisation=standardisation,
        component_metric=component_metric,
    )
