"""One EM engine for every model.

A model supplies pure functions, gathered in an :class:`EMModel`,

    e_step(params, data, hyper) -> (stats, objective)
    m_step(stats, params, hyper) -> params
    starts(start_inputs, data, hyper, **settings) -> params with a leading start axis
    finish(result, data, hyper, finish_inputs, **settings) -> what the fit returns

where ``stats`` are sums over rows and ``objective`` is the log-likelihood (or log
joint density for MAP fits) at ``params``; ``starts`` and ``finish`` are optional
(starts given as they are; the best start's :class:`EMResult`), and so are the
model's ``coordinates`` for the quasi-Newton phase.  :func:`fit_em` is the whole fit:
one compiled program (:func:`em_program`: the starts, then :func:`run_em`'s
``lax.while_loop`` vmapped over them, then ``finish``) and, where EM has not settled
within :data:`POLISH_AFTER` cycles and the model has coordinates, a second
(:func:`polish_em`: projected BFGS on the exact objective).  Programs are cached on
the model, the static settings and the shapes of their inputs, so refitting data of
the same shapes never recompiles.  Every EM model's fit -- in memory, and on rows
summed on the host (chunked, Dask) -- goes through :func:`fit_em`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab._shapes import trace_capacity
from latentlab.inference.programs import program
from latentlab.inference.quasi_newton import MAX_PARAMETERS, maximise_in_box

__all__ = [
    "EMModel",
    "EMResult",
    "POLISH_AFTER",
    "em_program",
    "evaluate_starts",
    "finish_em",
    "fit_em",
    "polish_coordinates",
    "polish_em",
    "run_em",
]

# EM cycles before a fit that has coordinates for it turns to quasi-Newton steps
# (:func:`polish_em`).  EM's first cycles make the large moves cheaply and safely;
# where its rate is fast it has converged by then, and where it crawls (missing
# information, a Heywood boundary) the quasi-Newton phase takes tens to hundreds of
# steps where EM takes thousands.
POLISH_AFTER = 10


class EMResult(NamedTuple):
    params: Any  # parameters of the best start
    trace: jax.Array  # (max_iter,) objective after each M-step; NaN past n_iter
    n_iter: jax.Array  # number of M-steps taken
    converged: jax.Array  # bool
    objective: jax.Array  # objective at ``params`` (== trace[n_iter - 1])
    stats: Any  # E-step statistics at ``params`` (after polish_em: at EM's last iterate)
    start_objectives: jax.Array  # (n_init,) final objective of every start
    # True where an iterate's objective was not finite: the run stopped and ``params``
    # is the last iterate with a finite objective (the start if none after it)
    breakdown: Any = None
    # blockwise: which blocks met the stopping rule at the last cycle (B,) bool
    block_converged: Any = None


@dataclasses.dataclass(frozen=True)
class EMModel:
    """What the engine needs of a model: its steps and, optionally, how it starts,
    how it finishes and its coordinates for the quasi-Newton phase.  Hashable (a
    static argument of the compiled programs): two equal instances share programs.

    ``starts(start_inputs, data, hyper, **settings)``: the starting parameters, with a
    leading start axis, made inside the program from traced ``start_inputs`` (None:
    ``start_inputs`` are the starts).  ``finish(result, data, hyper, finish_inputs,
    **settings)``: traced after EM in the same program, its value returned by
    :func:`fit_em` in place of the best start's :class:`EMResult` (pLSA's last
    fold-in); not with ``coordinates``, whose phase runs after the program.
    ``settings``: static keyword arguments of ``starts`` and ``finish``, as a tuple of
    (name, value) pairs (see :meth:`with_settings`).  ``lazy_objective``: see
    :func:`run_em`.
    """

    e_step: Callable
    m_step: Callable
    starts: Callable | None = None
    finish: Callable | None = None
    coordinates: Any = None
    lazy_objective: bool = False
    settings: tuple = ()

    def __post_init__(self):
        if self.finish is not None and self.coordinates is not None:
            raise ValueError("EMModel: a model with `finish` cannot have quasi-Newton coordinates")

    def with_settings(self, **settings) -> EMModel:
        """This model with static ``settings`` for its starts and finish."""
        return dataclasses.replace(self, settings=tuple(sorted(settings.items())))


class _LoopState(NamedTuple):
    """One start's EM loop state: after cycle ``n_iter``, the iterate ``params`` (the
    next one to evaluate), the objective and statistics of the one evaluated last."""

    params: Any
    stats: Any
    objective: jax.Array
    converged: jax.Array
    done: jax.Array
    n_iter: jax.Array  # the cycle counter j; the number of M-steps taken once done
    trace: jax.Array
    params_before: Any  # the iterate evaluated last: kept where the next breaks down
    breakdown: jax.Array
    block_converged: jax.Array
    # SQUAREM's safeguard: the last cycle's plain-EM iterate theta2, and whether
    # ``params`` is such a plain-EM iterate (nothing to fall back on) or an
    # extrapolated one (falls back to ``fallback`` if its objective is lower)
    fallback: Any
    plain: jax.Array


def _report(show, start, i, objective):
    if show:
        print(
            f"  EM start {int(start)}  iteration {int(i):5d}  objective {float(objective): .6f}",
            flush=True,
        )


def _squared_norm(tree, blockwise):
    """Sum of squares of every leaf: a scalar, or per block (leading axis)."""
    if blockwise:
        return sum(
            jnp.sum(leaf**2, axis=tuple(range(1, leaf.ndim))) for leaf in jax.tree.leaves(tree)
        )
    return sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(tree))


def _squarem_point(params0, params1, params2, blockwise=False):
    """SQUAREM extrapolation (Varadhan & Roland 2008, scheme S3) from three EM iterates;
    ``blockwise``: a step length per block (leading axis)."""
    r = jax.tree.map(jnp.subtract, params1, params0)
    v = jax.tree.map(lambda a, b, c: c - 2.0 * b + a, params0, params1, params2)
    r2, v2 = _squared_norm(r, blockwise), _squared_norm(v, blockwise)
    # alpha = -1 reproduces params2; steps are only ever longer than plain EM's.
    alpha = jnp.minimum(-jnp.sqrt(r2 / jnp.where(v2 > 0, v2, 1.0)), -1.0)
    alpha = jnp.where(v2 > 0, alpha, -1.0)
    return jax.tree.map(
        lambda a, dr, dv: a - _lead(2.0 * alpha, a) * dr + _lead(alpha**2, a) * dv,
        params0,
        r,
        v,
    )


def _lead(values, leaf):
    """A scalar, or per-block values (B,) shaped to broadcast over a (B, ...) leaf."""
    return jnp.reshape(values, values.shape + (1,) * (leaf.ndim - values.ndim))


def _select(condition, a, b):
    """``a`` where ``condition`` (a scalar, or per block: the leading axis), else ``b``."""
    return jax.tree.map(lambda x, y: jnp.where(_lead(condition, x), x, y), a, b)


def _all_finite(tree, blockwise=False):
    if blockwise:
        return jnp.all(
            jnp.stack(
                [
                    jnp.isfinite(leaf).reshape(leaf.shape[0], -1).all(1)
                    for leaf in jax.tree.leaves(tree)
                ]
            ),
            axis=0,
        )
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(tree)]))


@program(
    static_argnames=(
        "e_step",
        "m_step",
        "max_iter",
        "accelerate",
        "verbose",
        "lazy_objective",
        "blockwise",
        "keep_starts",
    )
)
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
    lazy_objective: bool = False,
    blockwise: bool = False,
    keep_starts: bool = False,
    limit=None,
):
    """Run EM from each start in ``params0`` (leading axis = starts); keep the best.

    Stops when the objective changes by less than ``tol`` per sample between two
    iterations, or after ``max_iter`` iterations, or at the first iterate whose
    objective is not finite (a numerical breakdown): the previous iterate, the last
    with a finite objective, is then returned with ``breakdown`` set.  ``trace[t]`` is
    the objective after iteration t + 1, so the last filled entry is evaluated at the
    returned parameters.

    With ``accelerate=True`` an iteration is a SQUAREM cycle (four E- and M-steps):
    two EM steps theta1, theta2, an extrapolation along their direction, and two EM
    steps from there.  Their result is kept only if the objective after the first
    step from the jump is at least that at theta1; otherwise theta2 is taken.  In
    exact arithmetic each EM step never lowers the objective, so that test alone
    would keep the trace monotone; in floating point, an EM step taken from an
    extreme point the jump reached (a mixture weight or variance near zero) can
    lower it, so the result is checked once more when the next cycle evaluates it:
    an extrapolated iterate whose objective is below the last one recorded is
    discarded for theta2 (plain EM, unchecked), and that cycle is neither counted
    nor traced.  The trace is thus as monotone as plain EM's whatever the
    extrapolation does.  ``max_iter`` counts the cycles kept.

    ``limit`` (a traced integer, at most ``max_iter``), when given, is the iteration
    limit and ``max_iter`` only the trace's length: fits that differ in their limit
    then share one compiled program (:func:`latentlab._shapes.trace_capacity`).

    The E- and M-step appear once in the compiled program (inside a ``scan`` over
    the cycle's sub-steps), which keeps compile times short.

    ``lazy_objective=True`` is for models whose objective costs a sizeable part of an
    E-step (pLSA: a logarithm of every count's probability).  The E-step then takes a
    keyword ``with_objective`` (a traced bool) and need only return a valid objective
    where it is True; a SQUAREM cycle reads it at its start (the trace) and after the
    first step from the jump, which is kept when that objective is at least the
    start's (Varadhan & Roland's criterion), so two of the four objectives are skipped.
    The trace stays monotone: the kept point is one EM step past a point no worse than
    the start, and the fallback theta2 is two EM steps past the start.

    ``blockwise=True`` is for a problem that separates into independent blocks along
    the parameters' leading axis (pLSA's fold-in: one concave problem per document).
    The E-step's objective is then a vector, each block's part, and everything SQUAREM
    decides is decided per block: its step length (one global step would be set by the
    slowest block), its fallback, and the stopping rule, which waits for every block's
    change to be at most ``tol * n_samples`` (``n_samples`` may be a vector, a scale
    per block).  ``trace`` and ``objective`` hold the sum over blocks and per block;
    only a NaN counts as a breakdown (a block at -inf stays there: converged).

    ``keep_starts=True`` returns every start's result (leading axis = starts), not
    the best one's: the input of :func:`polish_em`, EM's second phase.
    """
    dtype = jax.tree.leaves(params0)[0].dtype
    n_substeps = 4 if accelerate else 1

    # The statistics' shapes, for the loop carries.  Traced once: tracing the E-step
    # is a large part of the time a fresh process spends before its first fit.
    stats_shape, objective_shape = jax.eval_shape(
        e_step, jax.tree.map(lambda leaf: leaf[0], params0), data, hyper
    )
    # blockwise: one objective per block, summed where one number is wanted
    total = jnp.sum if blockwise else (lambda objective: objective)

    def nans():
        return jnp.full(objective_shape.shape, jnp.nan, dtype)

    def zeros_like_stats():
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), stats_shape)

    def cycle(theta0):
        """Objective and statistics at theta0, and the next iterate."""
        zero_stats = zeros_like_stats()

        def substep(carry, i):
            # sub-step i evaluates E at p and maps p -> M(E(p)):
            #   0: p = theta0 -> theta1      1: p = theta1 -> theta2
            #   2: p = jump   -> jump1       3: p = jump1  -> jump2
            p, theta1, theta2, objective0, stats0, objective1, objective_jump = carry
            if lazy_objective:
                needed = (i == 0) | (i == n_substeps - 1)
                stats, objective = e_step(p, data, hyper, with_objective=needed)
            else:
                stats, objective = e_step(p, data, hyper)
            q = m_step(stats, p, hyper)
            objective0 = jnp.where(i == 0, objective, objective0)
            stats0 = _select(i == 0, stats, stats0)
            theta1 = _select(i == 0, q, theta1)
            objective1 = jnp.where(i == 1, objective, objective1)
            theta2 = _select(i == 1, q, theta2)
            objective_jump = jnp.where(i == 3, objective, objective_jump)
            if accelerate:
                p_next = _select(i == 1, _squarem_point(theta0, theta1, q, blockwise), q)
            else:
                p_next = q
            return (p_next, theta1, theta2, objective0, stats0, objective1, objective_jump), None

        carry = (theta0, theta0, theta0, nans(), zero_stats, nans(), nans())
        carry, _ = jax.lax.scan(substep, carry, jnp.arange(n_substeps))
        p_next, _, theta2, objective0, stats0, objective1, objective_jump = carry
        jumped = jnp.zeros(objective_shape.shape, bool)
        if accelerate:
            reference = objective0 if lazy_objective else objective1
            accept = jnp.isfinite(objective_jump) & (objective_jump >= reference)
            jumped = accept & _all_finite(p_next, blockwise)
            p_next = _select(jumped, p_next, theta2)
        return objective0, stats0, p_next, theta2, jumped

    def single(start, index):
        false = jnp.asarray(False)
        state = _LoopState(
            params=start,
            stats=zeros_like_stats(),
            objective=nans(),
            converged=false,
            done=false,
            n_iter=0,
            trace=jnp.full((max_iter,), jnp.nan, dtype),
            params_before=start,
            breakdown=false,
            block_converged=jnp.zeros(objective_shape.shape, bool),
            fallback=start,
            plain=jnp.ones(objective_shape.shape, bool),
        )

        def body(state):
            j, previous = state.n_iter, state.objective
            objective, stats, params_next, theta2, jumped = cycle(state.params)
            if accelerate and not blockwise:
                # the safeguard (see the docstring): an extrapolated iterate that lost
                # ground -- or broke down -- is replaced by the last plain-EM one
                # (blockwise fits, whose blocks are separate concave problems, go
                # without; a per-block fallback would also need per-block statistics)
                rejected = (j > 0) & ~state.plain & ~(objective >= previous)
                retry = state._replace(params=state.fallback, plain=jnp.asarray(True))
            else:
                rejected = jnp.asarray(False)
            # a breakdown keeps the iterate before (state: its stats and objective)
            change_ok = jnp.abs(objective - previous) <= tol * n_samples
            if blockwise:
                breakdown = jnp.any(jnp.isnan(objective))
                block_ok = (j > 0) & (change_ok | (objective == previous))
                change_ok = jnp.all(block_ok)
            else:
                breakdown = ~jnp.isfinite(objective)
                block_ok = (j > 0) & change_ok
            converged = (j > 0) & ~breakdown & change_ok
            done = breakdown | converged | (j == (max_iter if limit is None else limit))
            # one entry written (a select over the whole trace would cost its length)
            slot = jnp.maximum(j - 1, 0)
            recorded = jnp.where((j > 0) & ~breakdown, total(objective), state.trace[slot])
            trace = state.trace.at[slot].set(recorded)
            if verbose:
                # lax.cond would become a select under vmap (one call per start): decide there
                show = (j > 0) & (j % verbose == 0) & ~state.done & ~rejected
                jax.debug.callback(_report, show, index, j, total(objective))
            kept = _select(breakdown, state.params_before, state.params)
            n_iter = jnp.where(breakdown, jnp.maximum(j - 1, 0), jnp.where(done, j, j + 1))
            advanced = _LoopState(
                params=_select(done, kept, params_next),
                stats=_select(breakdown, state.stats, stats),
                objective=jnp.where(breakdown & (j > 0), previous, objective),
                converged=converged,
                done=done,
                n_iter=n_iter,
                trace=trace,
                params_before=state.params,
                breakdown=breakdown,
                block_converged=block_ok,
                fallback=theta2,
                plain=~jumped,
            )
            if accelerate and not blockwise:
                return jax.tree.map(lambda a, b: jnp.where(rejected, a, b), retry, advanced)
            return advanced

        final = jax.lax.while_loop(lambda state: ~state.done, body, state)
        return EMResult(
            final.params,
            final.trace,
            final.n_iter,
            final.converged,
            final.objective,
            final.stats,
            final.objective,
            final.breakdown,
            final.block_converged,
        )

    n_starts = jax.tree.leaves(params0)[0].shape[0]
    if n_starts == 1:  # the common case: no vmap to trace
        run = single(jax.tree.map(lambda leaf: leaf[0], params0), jnp.asarray(0))
        runs = jax.tree.map(lambda leaf: leaf[None], run)
    else:
        runs = jax.vmap(single)(params0, jnp.arange(n_starts))
    return runs if keep_starts else _best_start(runs, blockwise)


def _best_start(runs, blockwise=False):
    """The result of the start with the highest finite objective, with every start's
    objective in ``start_objectives``."""
    totals = jnp.sum(runs.objective, axis=1) if blockwise else runs.objective
    finite = jnp.where(jnp.isfinite(totals), totals, -jnp.inf)
    best = jnp.argmax(finite)
    result = jax.tree.map(lambda leaf: leaf[best], runs)
    return result._replace(start_objectives=runs.objective)


@program(static_argnames=("e_step", "m_step", "max_iter", "coordinates"))
def polish_em(e_step, m_step, runs, data, hyper, n_samples, tol, max_iter: int, coordinates):
    """EM's second phase: projected BFGS steps (:mod:`latentlab.inference.quasi_newton`)
    from every start that EM (``run_em(..., keep_starts=True)``) left neither converged
    nor broken down; returns the best start's result, as :func:`run_em` does.

    ``coordinates`` (a :class:`~latentlab.inference.quasi_newton.BoxCoordinates`) are
    the model's parameters in a box (variances above their floors); the inverse
    Hessian starts from a diagonal read off one more EM step.  Every accepted step
    raises the objective, so the trace stays monotone; it continues EM's, ``n_iter``
    and ``max_iter`` count EM cycles and quasi-Newton steps together, and the stopping
    rule reads as EM's (a change of at most ``tol`` per sample, with a small projected
    gradient).  ``stats`` stay those of EM's last iterate.

    A program of its own, so that a fit that EM settles never compiles it, and every
    K of a padded bucket shares it.
    """
    dtype = runs.trace.dtype
    steps = max_iter - runs.trace.shape[-1]

    def polished(result):
        settled = result.converged | result.breakdown
        x0, lower, upper = coordinates.to_free(result.params, hyper)

        def objective(x):
            return e_step(coordinates.from_free(x, hyper), data, hyper)[1]

        # one EM step from x0, for the starting diagonal: EM's statistics at its last
        # iterate are those at x0, so it takes an M-step only (each E-step written
        # into the program lengthens its compile)
        x_em = coordinates.to_free(m_step(result.stats, result.params, hyper), hyper)[0]
        qn = maximise_in_box(
            objective, x_em, x0, lower, upper, n_samples, tol, steps, enabled=~settled
        )
        # EM's trace, then the quasi-Newton steps' (EM stopped at n_iter <= its limit)
        trace = jnp.concatenate([result.trace, jnp.full((steps,), jnp.nan, dtype)])
        moved = result._replace(
            params=coordinates.from_free(qn.x, hyper),
            trace=jax.lax.dynamic_update_slice(trace, qn.trace, (result.n_iter,)),
            n_iter=result.n_iter + qn.n_iter,
            converged=qn.converged,
            objective=qn.objective,
        )
        return _select(settled, result._replace(trace=trace), moved)

    if runs.trace.shape[0] == 1:  # the common case: no vmap to trace
        one = polished(jax.tree.map(lambda leaf: leaf[0], runs))
        runs = jax.tree.map(lambda leaf: leaf[None], one)
    else:
        runs = jax.vmap(polished)(runs)
    return _best_start(runs)


def finish_em(runs, e_step, m_step, data, hyper, n_samples, tol, max_iter: int, coordinates):
    """The host's half of a fit in two phases.  ``runs`` are EM's
    (``run_em(..., keep_starts=True)`` with at most :data:`POLISH_AFTER` cycles where
    ``coordinates`` are given, else ``max_iter``).  Where every start has settled
    (converged or broken down), or there are no ``coordinates``, the best start is
    picked on the host (indexing device arrays would compile a program); otherwise
    :func:`polish_em` runs, with the rest of the arguments.  Returns an
    :class:`EMResult` (of host arrays in the first case)."""
    settled = np.asarray(runs.converged) | np.asarray(runs.breakdown)
    if coordinates is not None and runs.trace.shape[-1] < max_iter and not settled.all():
        return polish_em(
            e_step,
            m_step,
            runs,
            data,
            hyper,
            n_samples,
            tol,
            max_iter=max_iter,
            coordinates=coordinates,
        )
    objective = np.asarray(runs.objective)
    best = int(np.argmax(np.where(np.isfinite(objective), objective, -np.inf)))
    result = jax.tree.map(lambda leaf: np.asarray(leaf)[best], runs)
    return result._replace(start_objectives=objective)


@program(static_argnames=("model", "max_iter", "accelerate", "verbose", "keep_starts"))
def em_program(
    model: EMModel,
    start_inputs,
    data,
    hyper,
    n_samples,
    tol,
    finish_inputs=None,
    limit=None,
    *,
    max_iter: int,
    accelerate: bool,
    verbose: int,
    keep_starts: bool,
):
    """A whole EM fit as one compiled program: the model's starts, EM from each
    (:func:`run_em`; ``max_iter=0``: :func:`evaluate_starts`), then the model's
    ``finish`` where it has one.  Everything else of a fit runs on the host, so a
    cold fit compiles this program alone.  ``limit``: :func:`run_em`'s (an input, so
    ``max_iter`` is only the trace's length)."""
    settings = dict(model.settings)
    if model.starts is None:
        starts = start_inputs
    else:
        starts = model.starts(start_inputs, data, hyper, **settings)
    if max_iter == 0:
        result = evaluate_starts(model.e_step, starts, data, hyper)
        if not keep_starts:
            result = _best_start(result)
    else:
        result = run_em(
            model.e_step,
            model.m_step,
            starts,
            data,
            hyper,
            n_samples,
            tol,
            max_iter=max_iter,
            accelerate=accelerate,
            verbose=verbose,
            lazy_objective=model.lazy_objective,
            keep_starts=keep_starts,
            limit=limit,
        )
    if model.finish is None:
        return result
    return model.finish(result, data, hyper, finish_inputs, **settings)


def evaluate_starts(e_step, starts, data, hyper) -> EMResult:
    """``max_iter=0``: every start evaluated without an EM step, as
    ``run_em(..., keep_starts=True)`` returns them (empty traces, ``n_iter`` 0, not
    converged)."""
    stats, objectives = jax.vmap(lambda start: e_step(start, data, hyper))(starts)
    n_starts = objectives.shape[0]
    false = jnp.zeros(n_starts, bool)
    return EMResult(
        params=starts,
        trace=jnp.zeros((n_starts, 0), objectives.dtype),
        n_iter=jnp.zeros(n_starts, jnp.int32),
        converged=false,
        objective=objectives,
        stats=stats,
        start_objectives=objectives,
        breakdown=~jnp.isfinite(objectives),
        block_converged=false,
    )


def polish_coordinates(model: EMModel, start_inputs, data, hyper):
    """The model's coordinates for the quasi-Newton phase, where it has them, the fit
    is in float64 and its parameters are few enough for a dense inverse Hessian
    (:data:`~latentlab.inference.quasi_newton.MAX_PARAMETERS`); else None.  Rows summed
    on the host (out of core) take part: the gradient is Fisher's identity on the
    E-step's sums.

    Not in float32: a line search compares objectives, and float32's (~1e-7 of a sum
    of thousands of row terms, worse near a Heywood case) is coarser than the gains it
    would judge, so the search accepts round-off (seen: a trace 9 nats above the
    model's own score); EM's steps do not rest on such comparisons."""
    if model.coordinates is None:
        return None
    count, dtype = _parameter_count(model, *_shapes((start_inputs, data, hyper)))
    if dtype != jnp.float64 or count > MAX_PARAMETERS:
        return None
    return model.coordinates


def _shapes(tree):
    """A hashable description of a tree of arrays: its structure and leaves' shapes."""
    leaves, treedef = jax.tree.flatten(tree)
    specs = tuple(jax.ShapeDtypeStruct(np.shape(leaf), jnp.result_type(leaf)) for leaf in leaves)
    return treedef, specs


@functools.cache
def _parameter_count(model: EMModel, treedef, specs):
    """How many numbers one start of ``model`` holds, and their dtype (the starts
    traced, not run)."""
    start_inputs, data, hyper = jax.tree.unflatten(treedef, specs)
    if model.starts is None:
        starts = start_inputs
    else:
        starts = jax.eval_shape(
            lambda inputs, data, hyper: model.starts(inputs, data, hyper, **dict(model.settings)),
            start_inputs,
            data,
            hyper,
        )
    leaves = jax.tree.leaves(starts)
    return sum(leaf.size // leaf.shape[0] for leaf in leaves), leaves[0].dtype


def fit_em(
    model: EMModel,
    start_inputs,
    data,
    hyper,
    n_samples,
    tol,
    finish_inputs=None,
    *,
    max_iter: int,
    accelerate: bool = True,
    verbose: int = 0,
    work: int | None = None,
):
    """The whole EM fit of ``model`` from its starts: :func:`em_program` and, where
    the model has coordinates for it (:func:`polish_coordinates`) and EM has not
    settled a start within :data:`POLISH_AFTER` cycles, the quasi-Newton phase
    (:func:`polish_em`) -- a second program, compiled only by fits that need it.

    Returns the best start's :class:`EMResult` (host arrays where the best start is
    picked on the host, which indexing device arrays would compile a program for), or
    the model's ``finish`` value.  ``work``: the problem's size in elements, to pick
    the quick-compile variant for small ones (:meth:`Program.for_work`; None: the
    optimised program).  The stopping rule is :func:`run_em`'s (a change of at most
    ``tol * n_samples``), and :func:`polish_em`'s reads the same."""
    coordinates = polish_coordinates(model, start_inputs, data, hyper)
    if coordinates is not None:  # EM's phase is at most POLISH_AFTER cycles: one program
        cycles = capacity = min(max_iter, POLISH_AFTER)
    else:  # the limit an input, the trace a power of two long: max_iter shares programs
        cycles, capacity = max_iter, trace_capacity(max_iter)
    fit = em_program if work is None else em_program.for_work(work)
    out = fit(
        model,
        start_inputs,
        data,
        hyper,
        n_samples,
        tol,
        finish_inputs,
        np.asarray(cycles, np.int32),
        max_iter=capacity,
        accelerate=accelerate,
        verbose=verbose,
        keep_starts=model.finish is None,
    )
    if model.finish is not None:
        return out
    return finish_em(
        out, model.e_step, model.m_step, data, hyper, n_samples, tol, max_iter, coordinates
    )
