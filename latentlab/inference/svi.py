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

__all__ = ["SVIFit", "fit_svi", "BestFit", "fit_best_of", "start_seeds"]


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


class BestFit(NamedTuple):
    """The best of several MAP/SVI fits, in the shape of an EM result."""

    params: dict[str, Any]  # constrained point estimate of the best start
    trace: np.ndarray  # objective per step in the data's units (see fit_best_of)
    objective: float  # log density of the model at ``params`` (data's units)
    fit: SVIFit  # the best start's fit (guide, guide parameters)
    start_objectives: np.ndarray  # (n_starts,) log density at each start's result


def start_seeds(random_state, n_starts: int) -> np.ndarray:
    """One integer seed per start, drawn from a scikit-learn style ``random_state``:
    the same ``random_state`` gives the same fits, start by start."""
    from sklearn.utils.validation import check_random_state

    return check_random_state(random_state).randint(0, 2**31 - 1, size=n_starts)


def fit_best_of(
    model,
    args: tuple,
    starts: list[dict[str, Any]],
    *,
    method: str,
    num_steps: int,
    learning_rate: float,
    random_state=None,
    log_jacobian: float = 0.0,
) -> BestFit:
    """MAP (``method="map"``, AutoDelta) or SVI (``"svi"``, AutoNormal) from each start
    in ``starts`` (initial values of the latent sites); keeps the fit whose point
    estimate has the highest log density under ``model(*args)``.

    Estimators fit on rescaled data (where Adam's step size makes sense) and pass
    ``log_jacobian`` = log density of the rescaled data and parameters minus that of
    the originals; it is subtracted from the trace and the objective, which are then
    in the data's units.  For MAP the trace's last entry is the objective at the
    returned parameters (as EM's); for SVI the trace is the ELBO.
    """
    from numpyro.infer.util import log_density

    if method not in ("map", "svi"):
        raise ValueError(f"method must be 'map' or 'svi', got {method!r}")
    best, objectives = None, []
    for start, seed in zip(starts, start_seeds(random_state, len(starts)), strict=True):
        fit = fit_svi(
            model,
            *args,
            guide="delta" if method == "map" else "normal",
            num_steps=int(num_steps),
            learning_rate=learning_rate,
            init_values=start,
            seed=int(seed),
        )
        objective = float(log_density(model, args, {}, fit.params)[0])
        objectives.append(objective)
        if best is None or objective > best[0]:
            best = (objective, fit)
    objective, fit = best
    trace = fit.objective_trace - log_jacobian
    if method == "map":
        trace = np.append(trace, objective - log_jacobian)
    return BestFit(
        params=fit.params,
        trace=trace,
        objective=objective - log_jacobian,
        fit=fit,
        start_objectives=np.asarray(objectives) - log_jacobian,
    )
