"""MAP and stochastic variational inference on a NumPyro model function.

``method="map"`` fits an ``AutoDelta`` guide: with the priors masked off in the
declaration its ELBO is exactly the log-likelihood, so the same function that EM
optimises is optimised by gradient ascent.  ``method="svi"`` fits an ``AutoNormal``
(mean-field) guide with the priors on.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import numpy as np
import optax

from latentlab.inference.programs import Program

__all__ = ["SVIFit", "fit_svi", "BestFit", "fit_best_of", "start_seeds"]


class SVIFit(NamedTuple):
    params: dict[str, Any]  # constrained point estimate per latent site (guide median)
    objective_trace: np.ndarray  # -loss at each step (ELBO; log joint for AutoDelta)
    guide_params: dict[str, Any]  # the guide's fitted parameters (AutoNormal: *_auto_loc/scale)
    log_density: float  # log density of the model at ``params``


# Compiled SVI programs, keyed by the model and the static settings (see _model_key).
_PROGRAMS: dict = {}
_MAX_PROGRAMS = 64


def _model_key(model):
    """A hashable key that identifies a model function and its bound settings, or None.

    Estimators pass ``functools.partial(module.model, **settings)``: a new object per
    fit, so the partial itself cannot key a cache, but its function and settings can.
    """
    func, args, keywords = model, (), {}
    if isinstance(model, partial):
        func, args, keywords = model.func, model.args, model.keywords
    key = (func, args, tuple(sorted(keywords.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _svi_program(model, guide: str, num_steps: int, num_particles: int, has_init: bool):
    """One jit-compiled program for a whole fit: guide set-up, ``num_steps`` Adam
    steps, the guide's median and the model's log density there.

    Run eagerly, NumPyro's set-up alone hands XLA hundreds of small programs (a cold
    PPCA MAP fit compiled 76, SupervisedPCA's SVI 612), and ``SVI.run`` compiles its
    loop again for every call; compiled once here, a refit of the same shapes
    compiles nothing.
    """
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoDelta, AutoNormal
    from numpyro.infer.initialization import init_to_median, init_to_value
    from numpyro.infer.util import log_density
    from numpyro.optim import optax_to_numpyro

    def run(args, init_values, seed, learning_rate, final_learning_rate):
        init_loc_fn = init_to_value(values=init_values) if has_init else init_to_median
        if callable(guide):
            auto_guide = guide
        elif guide == "delta":
            auto_guide = AutoDelta(model, init_loc_fn=init_loc_fn)
        else:
            auto_guide = AutoNormal(model, init_loc_fn=init_loc_fn, init_scale=0.01)
        # exponential decay from learning_rate to final_learning_rate over the run
        # (optax.exponential_decay needs a concrete rate; these are traced)
        decay = (final_learning_rate / learning_rate) ** (1.0 / num_steps)
        optimizer = optax_to_numpyro(optax.adam(lambda count: learning_rate * decay**count))
        svi = SVI(model, auto_guide, optimizer, Trace_ELBO(num_particles=num_particles))
        if callable(guide):  # its numpyro.param sites start at init_values
            init_params = init_values if has_init else None
            state = svi.init(jax.random.PRNGKey(seed), *args, init_params=init_params)
        else:
            state = svi.init(jax.random.PRNGKey(seed), *args)

        def step(state, _):
            return svi.update(state, *args)

        state, losses = jax.lax.scan(step, state, None, length=num_steps)
        guide_params = svi.get_params(state)
        if callable(guide):  # no median to read off, and the model has local latents
            return guide_params, -losses, guide_params, jax.numpy.nan
        params = auto_guide.median(guide_params)
        return params, -losses, guide_params, log_density(model, args, {}, params)[0]

    key = _model_key(model)
    guide_key = _model_key(guide) if callable(guide) else guide
    if key is None or guide_key is None:
        return Program(run)
    key = (key, guide_key, num_steps, num_particles, has_init)
    if key not in _PROGRAMS:
        if len(_PROGRAMS) >= _MAX_PROGRAMS:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
        _PROGRAMS[key] = Program(run)
    return _PROGRAMS[key]


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
    work: int | None = None,
) -> SVIFit:
    """Fit ``model(*args)`` with Adam and an exponentially decaying step size, as one
    compiled program (reused by every fit of the same model, settings and shapes).

    Parameters
    ----------
    guide : {"delta", "normal"} or callable
        ``"delta"`` (AutoDelta: MAP, or ML when the priors are masked) or
        ``"normal"`` (AutoNormal: mean-field Gaussian posterior), or a guide function
        called like the model (an amortized encoder, say).  For a guide function
        ``params`` and ``guide_params`` are both the fitted ``numpyro.param`` values
        (constrained) and ``log_density`` is NaN.
    init_values : dict, optional
        Starting values of the latent sites (constrained space); for a guide
        function, of its ``numpyro.param`` sites.
    work : int, optional
        Size of the problem in elements (e.g. ``X.size``): small problems run the
        quick-compile variant (:mod:`latentlab.inference.programs`).  None: the fully
        optimised program.
    """
    if not callable(guide) and guide not in ("delta", "normal"):
        raise ValueError(f"guide must be 'delta' or 'normal', got {guide!r}")
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    program = _svi_program(model, guide, int(num_steps), int(num_particles), bool(init_values))
    program = program.full if work is None else program.for_work(int(work))
    dtype = np.result_type(*[np.asarray(a).dtype for a in args if hasattr(a, "dtype")], np.float32)
    params, trace, guide_params, density = program(
        tuple(args),
        dict(init_values) if init_values else {},
        np.uint32(seed),
        np.asarray(learning_rate, dtype),
        np.asarray(final_learning_rate, dtype),
    )
    return SVIFit(
        params=params,
        objective_trace=np.asarray(trace),
        guide_params=guide_params,
        log_density=float(density),
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
    the same ``random_state`` gives the same fits, start by start (None: NumPy's
    global RandomState, as :func:`sklearn.utils.check_random_state`)."""
    if random_state is None:
        return np.random.randint(0, 2**31 - 1, size=n_starts)  # noqa: NPY002 (the global state)
    if not isinstance(random_state, np.random.RandomState):
        random_state = np.random.RandomState(int(random_state))
    return random_state.randint(0, 2**31 - 1, size=n_starts)


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
        objective = fit.log_density
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
