"""The starts of :mod:`latentlab.models.gmm`'s EM fit, made inside the fit program:
responsibilities as scikit-learn makes them -- given, or from latentlab's own
k-means and k-means++ (:mod:`latentlab.closed_form.kmeans`) -- then the M-step from
them, with the user's ``weights_init``/``means_init``/``precisions_init`` in place."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.closed_form import kmeans as km

__all__ = ["KMeansStart", "start_responsibilities", "em_starts"]


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["uniforms"],
    meta_fields=["method", "local_trials"],
)
@dataclasses.dataclass(frozen=True)
class KMeansStart:
    """Starting responsibilities still to be made in the fit program by
    :func:`start_responsibilities`: ``method`` "kmeans" or "k-means++", the k-means++
    draws of each start and k-means run, ``uniforms`` (n_starts, runs, m), and the
    number of candidates per seed (``2 + log(n_components)``, as scikit-learn; static,
    so padding components to a bucket does not change the draws)."""

    uniforms: np.ndarray
    method: str
    local_trials: int


def start_responsibilities(X, row_mask, resp, active):
    """The starting responsibilities (n_starts, n, K) as a traced function: ``resp``
    itself when it is an array, else (a :class:`KMeansStart`) as scikit-learn makes
    them from k-means -- each row all to its cluster ("kmeans") -- or from k-means++
    seeds -- each seed row all to its component, every other row to none
    ("k-means++").  Rows weigh ``row_mask`` (padding rows 0); ``active`` (K,) marks the
    components that are not padding (a prefix), never seeded nor assigned."""
    if not isinstance(resp, KMeansStart):
        return resp
    K = active.shape[0]
    settings = dict(sample_weight=row_mask, active=active)

    def kmeans_labels(uniforms):
        result = km.best_of_runs(
            X, None, n_clusters=K, n_local_trials=resp.local_trials, uniforms=uniforms, **settings
        )
        return jax.nn.one_hot(result.labels, K, dtype=X.dtype) * row_mask[:, None]

    def seed_rows(uniforms):
        seeds = km.kmeans_plusplus_indices(
            X, None, K, resp.local_trials, uniforms=uniforms[0], **settings
        )
        hot = jnp.zeros((X.shape[0], K), X.dtype)
        return hot.at[seeds, jnp.arange(K)].set(active.astype(X.dtype))

    return jax.lax.map(kmeans_labels if resp.method == "kmeans" else seed_rows, resp.uniforms)


def em_starts(inputs, data, hyper, *, covariance_type: str):
    """One start per stack of responsibilities (n_init, n, K), traced.  ``inputs =
    (X, row_mask, resp, user, use_user)``: the standardised rows (missing entries 0),
    their weights (padding rows 0), the responsibilities or a :class:`KMeansStart`,
    and the user's ``weights_init``/``means_init``/``precisions_init`` (``user``, a
    Params without the start axis) in place where ``use_user`` (3 bools) says -- the
    flags are traced, so every combination shares one program.  ``hyper.active`` (K,)
    marks the components that are not padding."""
    from latentlab.models.gmm import Params, params_from_responsibilities  # gmm imports this

    X, row_mask, resp, user, use_user = inputs
    resp = start_responsibilities(X, row_mask, resp, hyper.active)
    make = functools.partial(
        params_from_responsibilities, covariance_type=covariance_type, active=hyper.active
    )
    starts = jax.vmap(lambda r: make(X, row_mask, r, hyper.reg_covar))(resp)
    return Params(
        *(
            jnp.where(use, jnp.broadcast_to(given, start.shape), start)
            for use, given, start in zip(use_user, user, starts, strict=True)
        )
    )
