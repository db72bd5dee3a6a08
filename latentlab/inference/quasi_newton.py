"""A projected BFGS maximiser for smooth objectives with box constraints.

EM's rate is the fraction of missing information, and it falls to nothing where a
parameter approaches the edge of its space (factor analysis' Heywood cases: a
uniqueness psi_j -> 0).  There EM takes thousands of cycles; a quasi-Newton step on
the same exact objective converges superlinearly.  This is the engine's second
phase (:func:`latentlab.inference.em.run_em`, ``polish``); the objective's gradient
is JAX's (for the Gaussian latent models, Fisher's identity on the E-step's sums:
:func:`~latentlab.models.gaussian_latent.expected_stats`).

The method is Bertsekas' projected Newton (1982) with a BFGS inverse Hessian:

* the epsilon-active set A holds the coordinates at (or within epsilon of) a bound
  whose gradient pushes them out of the box; they take a projected-gradient step,
  the free ones a quasi-Newton step ``-H_FF g_F``, so a Heywood uniqueness lands on
  its floor instead of being crawled towards;
* a step is ``P(x + t d)``, P the projection onto the box, with t found by Lewis &
  Overton's bisection for the weak Wolfe conditions (sufficient decrease
  ``F(x_t) <= F(x) + c1 g.(x_t - x)`` and a flattened slope): every accepted step
  lowers F, so the objective's trace stays monotone as EM's;
* the coordinates are divided by the square root of a diagonal inverse Hessian read
  off one EM step (EM's step is the gradient preconditioned by the complete-data
  information, ``x_EM - x ~ I_c^{-1} g``, so it knows each parameter's scale); in
  them the inverse Hessian starts as the identity, is updated where the curvature
  ``s.y`` is positive, and restarts from the identity after a failed search or a
  direction that no longer ascends.

The inverse Hessian is dense, p x p in the number of parameters p; callers bound p
(:data:`MAX_PARAMETERS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

__all__ = ["MAX_PARAMETERS", "BoxCoordinates", "QuasiNewtonResult", "maximise_in_box"]

# The dense inverse Hessian holds p^2 numbers and a step costs O(p^2): 4096
# parameters are 128 MiB in float64.  Larger problems stay with EM.
MAX_PARAMETERS = 4096

_SUFFICIENT_DECREASE = 1e-4  # c1 of the Wolfe conditions
_CURVATURE = 0.9  # c2
_MAX_EVALUATIONS = 40  # per line search
# Coordinates within this distance of a bound (or the projected gradient's norm,
# if smaller) count as at the bound: Bertsekas' epsilon.
_ACTIVE_EPSILON = 1e-3


class BoxCoordinates(NamedTuple):
    """A model's parameters as coordinates in a box, for :func:`maximise_in_box`.

    ``to_free(params, hyper) -> (x, lower, upper)`` and ``from_free(x, hyper) ->
    params``, with ``x`` a pytree of arrays, ``lower``/``upper`` of its structure
    (infinite where unbounded, equal where a coordinate is held fixed).
    """

    to_free: Callable
    from_free: Callable


class QuasiNewtonResult(NamedTuple):
    x: object  # the maximiser (a pytree like the start)
    objective: jax.Array  # objective at x
    trace: jax.Array  # (max_iter,) objective after each accepted step; NaN past n_iter
    n_iter: jax.Array  # accepted steps
    converged: jax.Array  # bool


class _State(NamedTuple):
    x: jax.Array  # flat coordinates, in units of ``unit``
    unit: jax.Array  # sqrt of EM's diagonal inverse Hessian (ones before the first step)
    fresh: jax.Array  # the first iteration: evaluates the start, takes no step
    loss: jax.Array  # -objective / scale at x
    grad: jax.Array  # its gradient
    inverse_hessian: jax.Array  # (p, p)
    n_iter: jax.Array
    trace: jax.Array
    converged: jax.Array
    failed: jax.Array  # the last line search found no decrease
    done: jax.Array


def maximise_in_box(objective, x_em, x0, lower, upper, scale, tol, max_iter: int, enabled=True):
    """Maximise ``objective(x)`` over ``lower <= x <= upper`` from ``x0``.

    ``x_em`` is the point one EM step from ``x0``, in these coordinates, which gives
    the starting diagonal.  ``x0``, ``lower`` and ``upper`` are pytrees of
    one structure.  The objective is divided by ``scale`` (the number of samples), so
    that ``tol`` reads as for EM.  The run has converged when a step raises the
    objective by at most ``tol`` per sample and the largest entry of the projected
    gradient, in the scaled coordinates (where half its square is the gain a step
    along that coordinate promises), is at most ``sqrt(tol)``; or when two line
    searches running find no increase at all (the second from the restarted identity:
    the limit of the arithmetic) and the inverse Hessian predicts at most ``tol`` per
    sample left to gain (``g_F' H g_F / 2`` over the free coordinates).  It stops
    there, after two failed searches in any case, or after ``max_iter`` steps.
    ``enabled=False`` (a traced bool) takes no step at all: a start that needs none,
    in a batch that does.
    """
    x0, unravel = ravel_pytree(x0)
    lower, _ = ravel_pytree(lower)
    upper, _ = ravel_pytree(upper)
    dtype = x0.dtype
    x0 = jnp.clip(x0, lower, upper)

    def raw_loss(x):
        value = -objective(unravel(x)) / scale
        return jnp.where(jnp.isfinite(value), value, jnp.inf)

    # The method works in y = x / sqrt(h), h the diagonal inverse Hessian one EM step
    # gives: there every coordinate has the objective's own scale (curvature ~1), so
    # that the epsilon-active set, the gradient test and the first step mean the same
    # for loadings in 1e-8 units as for standardised ones, and the inverse Hessian
    # starts (and restarts) as the identity.  h needs the gradient at x0, which the
    # first iteration's line search evaluates (with a null step), so that the objective
    # appears once in the program: each copy of an E-step lengthens its compile.
    em_step = jnp.clip(ravel_pytree(x_em)[0], lower, upper) - x0
    restart = jnp.eye(x0.shape[0], dtype=dtype)

    def step(state: _State) -> _State:
        x, f, g, H, unit = state.x, state.loss, state.grad, state.inverse_hessian, state.unit
        low, high = lower / unit, upper / unit

        def project(y):
            return jnp.clip(y, low, high)

        def projected_gradient(y, g):
            return y - project(y - g)

        loss_and_grad = jax.value_and_grad(lambda y: raw_loss(y * unit))
        width = jnp.minimum(_ACTIVE_EPSILON, jnp.linalg.norm(projected_gradient(x, g)))
        active = ((x <= low + width) & (g > 0)) | ((x >= high - width) & (g < 0))
        active = active | (low == high)
        g_free = jnp.where(active, 0.0, g)
        descends = g_free @ (H @ g_free) > 0
        H = jnp.where(descends | ~jnp.any(g_free != 0), H, restart)
        d = jnp.where(active, -g, -(H @ g_free))

        def evaluate(t):
            x_t = project(x + t * d)
            f_t, g_t = loss_and_grad(x_t)
            decrease = f_t <= f + _SUFFICIENT_DECREASE * (g @ (x_t - x))
            flattened = g_t @ (x_t - x) >= _CURVATURE * (g @ (x_t - x))
            return x_t, f_t, g_t, decrease, flattened

        def bisect(search):
            # too long a step (no sufficient decrease) bounds t above, too short (the
            # slope still steep) below; the best point with sufficient decrease is kept
            t, below, above, best, _, k = search
            x_t, f_t, g_t, decrease, flattened = evaluate(t)
            better = decrease & (f_t < best[1])
            best = jax.tree.map(lambda a, b: jnp.where(better, a, b), (x_t, f_t, g_t), best)
            above = jnp.where(decrease, above, t)
            below = jnp.where(decrease, t, below)
            t_next = jnp.where(jnp.isfinite(above), 0.5 * (below + above), 2.0 * below)
            return t_next, below, above, best, decrease & flattened, k + 1

        def search_more(search):
            *_, wolfe, k = search
            return ~wolfe & (k < _MAX_EVALUATIONS)

        one, zero, inf = (jnp.asarray(v, dtype) for v in (1.0, 0.0, jnp.inf))
        search = (one, zero, inf, (x, f, g), jnp.asarray(False), 0)
        *_, (x_t, f_t, g_t), _, _ = jax.lax.while_loop(search_more, bisect, search)
        accepted = f_t < f

        s, y = x_t - x, g_t - g
        sy = s @ y
        curved = accepted & (sy > 1e-10 * jnp.sqrt((s @ s) * (y @ y)))
        rho = 1.0 / jnp.where(curved, sy, 1.0)
        Hy = H @ y
        updated = (
            H
            - rho * (jnp.outer(s, Hy) + jnp.outer(Hy, s))
            + (rho**2 * (y @ Hy) + rho) * jnp.outer(s, s)
        )
        H = jnp.where(curved, updated, jnp.where(accepted, H, restart))

        x_new = jnp.where(accepted, x_t, x)
        f_new = jnp.where(accepted, f_t, f)
        g_new = jnp.where(accepted, g_t, g)
        step_taken = accepted & ~state.fresh
        trace = jnp.where(step_taken, state.trace.at[state.n_iter].set(-f_t * scale), state.trace)
        n_iter = state.n_iter + step_taken
        # the first iteration evaluated the start: now the units, and y = x / unit
        new_unit = jnp.where(state.fresh, jnp.sqrt(_em_diagonal(em_step, g_new)), unit)
        x_new = x_new * unit / new_unit
        g_new = g_new * new_unit / unit
        H = jnp.where(state.fresh, restart, H)

        # After a step that gained at most tol per sample: stop if the projected
        # gradient is small too (a change alone can be small on a slow stretch).
        # After a second search running that found no increase (the first failure
        # restarts from the identity: a stale inverse Hessian can fail where a fresh
        # one finds more), the arithmetic's limit: stop if the inverse Hessian the
        # search used predicts at most tol per sample left to gain, g_F' H g_F / 2.
        largest = jnp.max(jnp.abs(projected_gradient(x_new, g_new)), initial=0.0)
        predicted = 0.5 * g_free @ (state.inverse_hessian @ g_free)
        small_step = accepted & (f - f_t <= tol) & (largest <= jnp.sqrt(tol))
        converged = ~state.fresh & (small_step | (~accepted & state.failed & (predicted <= tol)))
        return _State(
            x=x_new,
            unit=new_unit,
            fresh=jnp.asarray(False),
            loss=f_new,
            grad=g_new,
            inverse_hessian=H,
            n_iter=n_iter,
            trace=trace,
            converged=converged,
            failed=~accepted,
            done=converged | (~accepted & state.failed) | (n_iter >= max_iter),
        )

    false = jnp.asarray(False)
    state = _State(
        x=x0,
        unit=jnp.ones_like(x0),
        fresh=jnp.asarray(True),
        loss=jnp.asarray(jnp.inf, dtype),
        grad=jnp.zeros_like(x0),
        inverse_hessian=restart,
        n_iter=jnp.asarray(0),
        trace=jnp.full((max_iter,), jnp.nan, dtype),
        converged=false,
        failed=false,
        done=~jnp.asarray(enabled) | (max_iter == 0),
    )
    state = jax.lax.while_loop(lambda state: ~state.done, step, state)
    objective_value = -state.loss * scale
    return QuasiNewtonResult(
        unravel(state.x * state.unit), objective_value, state.trace, state.n_iter, state.converged
    )


def _em_diagonal(em_step, g):
    """A diagonal inverse Hessian from an EM step: ``-em_step / g`` where that is
    positive and finite, elsewhere the geometric mean of those values."""
    ratio = -em_step / jnp.where(g != 0, g, 1.0)
    usable = (ratio > 0) & jnp.isfinite(ratio) & (g != 0)
    log_ratio = jnp.log(jnp.where(usable, ratio, 1.0))
    typical = jnp.exp(jnp.sum(log_ratio) / jnp.maximum(jnp.sum(usable), 1))
    return jnp.where(usable, ratio, typical)
