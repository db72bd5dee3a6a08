"""One jit-compiled EM driver for every model.

A model supplies two pure functions,

    e_step(params, data, hyper) -> (stats, objective)
    m_step(stats, params, hyper) -> params

where ``stats`` are sums over rows and ``objective`` is the log-likelihood (or log
joint density for MAP fits) at ``params``.  The driver runs the whole fit as one
``lax.while_loop``, vmapped over ``n_init`` starting points, and keeps the best.
It is cached on (e_step, m_step, max_iter, verbose) and the shapes of its inputs,
so refitting data of the same shapes never recompiles.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["EMResult", "run_em"]


class EMResult(NamedTuple):
    params: Any  # parameters of the best start
    trace: jax.Array  # (max_iter,) objective after each M-step; NaN past n_iter
    n_iter: jax.Array  # number of M-steps taken
    converged: jax.Array  # bool
    objective: jax.Array  # objective at ``params`` (== trace[n_iter - 1])
    stats: Any  # E-step statistics at ``params``
    start_objectives: jax.Array  # (n_init,) final objective of every start


def _report(i, objective):
    print(f"  EM iteration {int(i):5d}   objective {float(objective): .6f}", flush=True)


def _squarem_point(params0, params1, params2):
    """SQUAREM extrapolation (Varadhan & Roland 2008, scheme S3) from three EM iterates."""
    r = jax.tree.map(jnp.subtract, params1, params0)
    v = jax.tree.map(lambda a, b, c: c - 2.0 * b + a, params0, params1, params2)
    r2 = sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(r))
    v2 = sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(v))
    # alpha = -1 reproduces params2; steps are only ever longer than plain EM's.
    alpha = jnp.minimum(-jnp.sqrt(r2 / jnp.where(v2 > 0, v2, 1.0)), -1.0)
    alpha = jnp.where(v2 > 0, alpha, -1.0)
    return jax.tree.map(lambda a, dr, dv: a - 2.0 * alpha * dr + alpha**2 * dv, params0, r, v)


@partial(jax.jit, static_argnames=("e_step", "m_step", "max_iter", "accelerate", "verbose"))
def run_em(
    e_step,
    m_step,
    params0,
    data,
    hyper,
    n_samples,
    tol,
    max_iter: int,
    accelerate: bool = True,
    verbose: int = 0,
):
    """Run EM from each start in ``params0`` (leading axis = starts); keep the best.

    Stops when the objective changes by less than ``tol`` per sample between two
    iterations, or after ``max_iter`` iterations.  ``trace[t]`` is the objective after
    iteration t + 1, so the last filled entry is evaluated at the returned parameters.

    With ``accelerate=True`` each iteration is a SQUAREM cycle: two EM steps, an
    extrapolation along their direction and one EM step from there.  The
    extrapolated point is kept only if its objective is at least that of the two
    plain EM steps, so the trace stays monotone whatever the extrapolation does.
    """
    dtype = jax.tree.leaves(params0)[0].dtype

    def em_map(params, stats):
        params = m_step(stats, params, hyper)
        stats, objective = e_step(params, data, hyper)
        return params, stats, objective

    def squarem_map(params0, stats0):
        params1, stats1, _ = em_map(params0, stats0)
        params2, stats2, objective2 = em_map(params1, stats1)
        jumped = _squarem_point(params0, params1, params2)
        jump_stats, jump_objective = e_step(jumped, data, hyper)
        params3, stats3, objective3 = em_map(jumped, jump_stats)
        accept = jnp.isfinite(jump_objective) & jnp.isfinite(objective3)
        accept = accept & (objective3 >= objective2)
        pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(accept, x, y), a, b)  # noqa: E731
        return (
            pick(params3, params2),
            pick(stats3, stats2),
            jnp.where(accept, objective3, objective2),
        )

    step = squarem_map if accelerate else em_map

    def single(start):
        stats, objective = e_step(start, data, hyper)
        trace = jnp.full((max_iter,), jnp.nan, dtype)
        state = (start, stats, objective, jnp.asarray(False), jnp.asarray(0), trace)

        def cond(state):
            *_, converged, i, _ = state
            return (i < max_iter) & ~converged

        def body(state):
            params, stats, previous, _, i, trace = state
            params, stats, objective = step(params, stats)
            converged = jnp.abs(objective - previous) <= tol * n_samples
            if verbose:
                jax.lax.cond(
                    (i + 1) % verbose == 0,
                    lambda: jax.debug.callback(_report, i + 1, objective),
                    lambda: None,
                )
            return params, stats, objective, converged, i + 1, trace.at[i].set(objective)

        params, stats, objective, converged, n_iter, trace = jax.lax.while_loop(cond, body, state)
        return EMResult(params, trace, n_iter, converged, objective, stats, objective)

    runs = jax.vmap(single)(params0)
    finite = jnp.where(jnp.isfinite(runs.objective), runs.objective, -jnp.inf)
    best = jnp.argmax(finite)
    result = jax.tree.map(lambda leaf: leaf[best], runs)
    return result._replace(start_objectives=runs.objective)
