"""The compiled row programs and host helpers behind the Gaussian latent estimators:
row-chunked scoring, and the padding-column and host-conversion helpers of an EM
result (the fit itself is :func:`latentlab.inference.em.fit_em`'s)."""

from __future__ import annotations

import jax
import numpy as np

from latentlab.estimators._rows import map_row_chunks
from latentlab.models.gaussian_latent import conditional_missing, row_posteriors

__all__ = [
    "_padded",
    "_row_posteriors",
    "_conditional_missing",
    "_chunked_outputs",
    "_drop_padding",
    "_em_output",
]

_row_posteriors = jax.jit(row_posteriors)
_conditional_missing = jax.jit(conditional_missing)


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
