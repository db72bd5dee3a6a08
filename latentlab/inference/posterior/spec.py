"""What the posterior engine needs to know about a model: its parameter sites.

Every model module in :mod:`latentlab.models` exports ``posterior_spec(...)``, a
:class:`PosteriorSpec` describing its declaration's latent sites -- their dimensions,
supports and units -- and which of them are identified only up to rotation (loadings)
or relabelling (mixture components).  The engine reads nothing else about a model.

Units.  Gaussian models are sampled on standardised data ``(x - shift) / scale``
(``shift`` per column, one global ``scale``), where their priors are written; a
site's ``units`` says how its value there maps back to data units:

=============  ==========================================  ===========================
units          data units                                  e.g.
=============  ==========================================  ===========================
"location"     ``v * scale + shift[dim]`` (``dim`` its     means ``mu``
               only dimension)
"linear"       ``v * scale``                               loadings ``W``
"variance"     ``v * scale**2``                            noise variances
"precision"    ``v / scale**2``                            ARD precisions ``alpha``
"none"         ``v``                                       weights, probabilities
=============  ==========================================  ===========================

Dimension names stand for sizes known from the data and the fit: ``"feature"`` (d),
``"component"`` (K), ``"target"`` (supervised PCA's d_y), ``"document"`` and
``"word"`` (pLSA's D and W); ``"feature_bis"`` is a second axis of size d.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = [
    "Site",
    "PosteriorSpec",
    "UNITS",
    "site_shape",
    "to_data_units",
    "to_target_units",
    "settings_to_target_units",
]

UNITS = ("location", "linear", "variance", "precision", "none")


class Site(NamedTuple):
    """One latent (sampled) parameter site of a declaration."""

    dims: tuple[str, ...]  # dimension names, () for a scalar
    constraint: str  # its support: "real", "positive", "simplex" or "lower_cholesky"
    units: str = "none"  # how a standardised value maps to data units (module docstring)


class PosteriorSpec(NamedTuple):
    """A model's posterior metadata (see the module docstring)."""

    sites: dict[str, Site]  # every latent site of the declaration, by name
    # the column dimension of each positional data argument of the declaration
    # (standardised with that dimension's shift)
    data_dims: tuple[str, ...] = ("feature",)
    observed: tuple[str, ...] = ("x",)  # observed sites scored row by row (added up)
    loglik_name: str = "x"  # name of the pointwise log-likelihood variable
    standardise: bool = True  # sample on standardised data; False: in data units
    missing_data: bool = True  # the declaration takes ``has_missing`` (NaN = missing)
    target_settings: dict | None = None  # static settings of the sampled declaration
    # declaration settings with units (as sites'): rescaled with the data
    setting_units: dict | None = None
    loadings: tuple[str, ...] = ()  # loadings (d_i, K) sharing one latent space: Procrustes
    noise: tuple[tuple[str, str], ...] = ()  # (site, dim): noise variances along dim
    components: dict | None = None  # site -> axis of the component index: relabelled
    component_key: str | None = None  # site whose rows identify components
    component_weights: str | None = None  # mixing weights (also matched on)
    em_prior: bool = False  # EM itself maximises the log joint (the priors are on)
    prior_required: bool = False  # without the prior some parameters are not identified
    interior: float = 0.0  # simplex starts are moved this far into the interior
    nuts_warning: str | None = None  # why NUTS is expected to struggle
    # the declaration's keyword settings under which, given no data, it draws data
    # shaped as its positional data arguments (called with them): replicated data
    replicate: Callable[..., dict] | None = None


def site_shape(site: Site, sizes: dict) -> tuple[int, ...]:
    """The site's shape given the size of each dimension name."""
    return tuple(int(sizes[dim]) for dim in site.dims)


def _convert(value, units: str, offset, scale: float, forward: bool):
    value = np.asarray(value)
    if units == "location":
        return value * scale + offset if forward else (value - offset) / scale
    if units == "linear":
        return value * scale if forward else value / scale
    if units == "variance":
        return value * scale**2 if forward else value / scale**2
    if units == "precision":
        return value / scale**2 if forward else value * scale**2
    return value


def _convert_sites(spec, values, shift, scale, forward):
    out = {}
    for name, value in values.items():
        site = spec.sites[name]
        offset = shift[site.dims[-1]] if site.units == "location" else None
        out[name] = _convert(value, site.units, offset, scale, forward)
    return out


def to_data_units(spec: PosteriorSpec, values: dict, shift: dict, scale: float) -> dict:
    """Site values (any leading draw axes) for standardised data -> data units."""
    return _convert_sites(spec, values, shift, scale, forward=True)


def to_target_units(spec: PosteriorSpec, values: dict, shift: dict, scale: float) -> dict:
    """The inverse of :func:`to_data_units`."""
    return _convert_sites(spec, values, shift, scale, forward=False)


def settings_to_target_units(spec: PosteriorSpec, settings: dict, scale: float) -> dict:
    """Declaration settings in data units -> for standardised data (``setting_units``;
    settings without units are returned as they are)."""
    units = spec.setting_units or {}
    return {
        k: float(_convert(v, units[k], None, scale, forward=False)) if k in units else v
        for k, v in settings.items()
    }
