"""The compiled programs and host helpers behind the Gaussian latent estimators: the
EM fit (one program for the starts and EM, a second for the quasi-Newton phase where
EM has not settled), row-chunked scoring, and the padding-column and host-conversion
helpers of an EM result."""

from __future__ import annotations

import functools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.estimators._rows import map_row_chunks
from latentlab.inference.em import POLISH_AFTER, finish_em, run_em
from latentlab.inference.quasi_newton import MAX_PARAMETERS
from latentlab.models.gaussian_latent import conditional_missing, mean_imputed_pca, row_posteriors

__all__ = [
    "_fit_em",
    "_em_program",
    "_padded",
    "_row_posteriors",
    "_conditional_missing",
    "_chunked_outputs",
    "_drop_padding",
    "_em_output",
]

_row_posteriors = jax.jit(row_posteriors)
_conditional_missing = jax.jit(conditional_missing)


def _fit_em(module, data, n, n_components, seed, column_variance, hyper, tol, **static):
    """A whole EM fit: :func:`_em_program` (the starts, then EM), and where the model
    has coordinates for it (:func:`_polish`) and EM has not settled a start within
    :data:`~latentlab.inference.em.POLISH_AFTER` cycles, the quasi-Newton phase
    (:func:`~latentlab.inference.em.polish_em`) -- a second program, compiled only by
    fits that need it.  Returns ``(params, trace, n_iter, converged)`` (device or host
    arrays); ``static`` are :func:`_em_program`'s keywords."""
    max_iter = static["max_iter"]
    d, n_columns = data.X.shape[-1], static["n_columns"]
    coordinates = _polish(module, data.X.dtype, _n_parameters(module, d, n_columns))
    em_cycles = min(max_iter, POLISH_AFTER) if coordinates is not None else max_iter
    static = {**static, "max_iter": em_cycles}
    args = (data, n, n_components, seed, column_variance, hyper, tol)
    runs = _em_program(module, *args, **static)
    steps = (module.e_step, module.m_step)
    best = finish_em(runs, *steps, data, hyper, n, tol, max_iter, coordinates)
    return best.params, best.trace, best.n_iter, best.converged


@functools.cache
def _n_parameters(module, d, n_columns):
    """How many numbers a model's parameters hold, with ``n_columns`` loadings."""
    key = jax.ShapeDtypeStruct((2,), jnp.uint32)
    vector = jax.ShapeDtypeStruct((d,), jnp.float32)
    shapes = jax.eval_shape(
        lambda key, cv, active: module.init_params(key, d, n_columns, cv, active),
        key,
        vector,
        jax.ShapeDtypeStruct((n_columns,), jnp.float32),
    )
    return sum(leaf.size for leaf in jax.tree.leaves(shapes))


@partial(
    jax.jit, static_argnames=("module", "n_columns", "n_init", "max_iter", "verbose", "pca_start")
)
def _em_program(
    module,
    data,
    n,
    n_components,
    seed,
    column_variance,
    hyper,
    tol,
    *,
    n_columns,
    n_init,
    max_iter,
    verbose,
    pca_start=True,
):
    """The starts (the PCA start where the model has one, then random ones from
    ``seed`` up to ``n_init``), then EM, as one compiled program; returns every
    start's :class:`~latentlab.inference.em.EMResult` (for :func:`_fit_em`).

    The loadings have ``n_columns`` columns, of which the first ``n_components`` (a
    traced value) are the model's and the rest padding held at zero, so every K of a
    bucket runs this same program (:func:`~latentlab._shapes.gaussian_latent_columns`).
    """
    d = data.X.shape[-1]
    active = (jnp.arange(n_columns) < n_components).astype(data.X.dtype)
    init_from_pca = getattr(module, "init_from_pca", None)
    pca_start = pca_start and init_from_pca is not None
    starts = []
    if pca_start:
        # Random starts alone can end, converged, in a worse local optimum when data
        # are missing (0.26 nats/row worse on a monotone pattern); the PCA start is
        # deterministic and near the optimum, and n_init > 1 adds random ones.
        pca = mean_imputed_pca(data, n, n_columns, n_components)
        starts.append(jax.tree.map(lambda leaf: leaf[None], init_from_pca(pca, hyper)))
    if n_init > len(starts):  # keys drawn for all n_init: the first is the PCA start's
        keys = jax.random.split(jax.random.PRNGKey(seed), n_init)[len(starts) :]

        def random_start(key):
            return module.init_params(key, d, n_columns, column_variance, active)

        starts.append(jax.vmap(random_start)(keys))
    starts = jax.tree.map(lambda *batches: jnp.concatenate(batches), *starts)
    return run_em(
        module.e_step,
        module.m_step,
        starts,
        data,
        hyper,
        n,
        tol,
        max_iter=max_iter,
        verbose=verbose,
        keep_starts=True,
    )


def _polish(module, dtype, n_parameters):
    """The model's coordinates for EM's quasi-Newton phase, where it has them, the fit
    is in float64 and the parameters are few enough for a dense inverse Hessian.  Rows
    summed on the host (out of core) take part: the gradient is Fisher's identity on
    the E-step's sums (:func:`~latentlab.models.gaussian_latent.expected_stats`).

    Not in float32: a line search compares objectives, and float32's (~1e-7 of a sum
    of thousands of row terms, worse near a Heywood case) is coarser than the gains it
    would judge, so the search accepts round-off (seen: a trace 9 nats above the
    model's own score); EM's steps do not rest on such comparisons."""
    coordinates = getattr(module, "coordinates", None)
    if coordinates is None or dtype != jnp.float64 or n_parameters > MAX_PARAMETERS:
        return None
    return coordinates


def _padded(fn, *arrays_before, X, mask):
    """A jitted row-wise ``fn(*arrays_before, X, mask)`` over bucketed row chunks
    (see :mod:`latentlab.estimators._rows`); returns a tuple of NumPy arrays."""
    out = map_row_chunks(lambda x, m: fn(*arrays_before, x, m), X, mask)
    return out if isinstance(out, tuple) else (out,)


def _chunked_outputs():
    from latentlab.estimators import _chunked  # imports Dask helpers only when used

    return _chunked


def _drop_padding(params, K):
    """The model's K columns of padded parameters: ``W`` (d, K) and any per-column
    vector (Bayesian PCA's ``alpha``)."""
    cut = {"W": lambda W: W[:, :K], "alpha": lambda alpha: alpha[:K]}
    fields = [name for name in cut if name in params._fields]
    return params._replace(**{name: cut[name](getattr(params, name)) for name in fields})


def _em_output(params, trace, n_iter, converged):
    """An EM result on the host: NumPy parameters and the filled part of the trace."""
    n_iter = int(n_iter)
    params = jax.tree.map(np.asarray, params)
    return params, np.asarray(trace)[:n_iter], n_iter, bool(converged)
