"""MAP and stochastic variational inference on a NumPyro model function.

``method="map"`` fits an ``AutoDelta`` guide: with the priors masked off in the
declaration its ELBO is exactly the log-likelihood, so the same function that EM
optimises is optimised by gradient ascent.  ``method="svi"`` fits an ``AutoNormal``
(mean-field) guide with the priors on.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np
import optax

__all__ = ["SVIFit", "fit_svi"]


class SVIFit(NamedTuple):
    params: dict[str, Any]  # constrained point estimate per latent site (guide median)
    objective_trace: np.ndarray  # -loss at each step (ELBO; log joint for AutoDelta)
    guide: Any
    guide_params: dict[str, Any]


def fit_svi(
    model,
    *args,
    guide: str = "delta",
    num_steps: int = 3000,
    learning_rate: float = 0.05,
    final_learning_rate: float = 1e-3,
    init_values: dict[str, Any] | None = None,
    seed: int = 0,
    num_particles: int = 1,
    **kwargs,
) -> SVIFit:
    """Fit ``model(*args, **kwargs)`` with Adam and an exponentially decaying step size.

    Parameters
    ----------
    guide : {"delta", "normal"}
        ``"delta"`` (AutoDelta: MAP, or ML when the priors are masked) or
        ``"normal"`` (AutoNormal: mean-field Gaussian posterior).
    init_values : dict, optional
        Starting values of the latent sites (constrained space).
    """
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoDelta, AutoNormal
    from numpyro.infer.initialization import init_to_median, init_to_value
    from numpyro.optim import optax_to_numpyro

    if guide not in ("delta", "normal"):
        raise ValueError(f"guide must be 'delta' or 'normal', got {guide!r}")
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    init_loc_fn = init_to_value(values=init_values) if init_values else init_to_median
    if guide == "delta":
        auto_guide = AutoDelta(model, init_loc_fn=init_loc_fn)
    else:
        auto_guide = AutoNormal(model, init_loc_fn=init_loc_fn, init_scale=0.01)
    decay = (final_learning_rate / learning_rate) ** (1.0 / num_steps)
    schedule = optax.exponential_decay(learning_rate, 1, decay)
    optimizer = optax_to_numpyro(optax.adam(schedule))
    svi = SVI(model, auto_guide, optimizer, Trace_ELBO(num_particles=num_particles))
    result = svi.run(jax.random.PRNGKey(seed), num_steps, *args, progress_bar=False, **kwargs)
    params = auto_guide.median(result.params)
    return SVIFit(
        params=params,
        objective_trace=-np.asarray(result.losses),
        guide=auto_guide,
        guide_params=result.params,
    )
