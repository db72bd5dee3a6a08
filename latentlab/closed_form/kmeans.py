"""k-means: greedy k-means++ seeding and Lloyd's iterations in one jit-compiled loop.

Written once for spectral clustering, a later ``KMeans`` estimator and mixture
initialisation.  Conventions follow scikit-learn's ``KMeans`` so results can be
compared: greedy k-means++ (Arthur & Vassilvitskii 2007) with ``2 + log(k)`` candidate
centres per step; Lloyd stops when the labels no longer change or the squared centre
shift is at most ``tol`` times the mean feature variance, and a final assignment step
makes the labels those of the returned centres.  An empty cluster keeps its previous
centre (scikit-learn moves it to a far point; neither happens on well-separated data).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from latentlab.inference.programs import program

__all__ = [
    "KMeansResult",
    "kmeans_plusplus",
    "random_seeds",
    "lloyd",
    "kmeans",
    "squared_distances",
]


class KMeansResult(NamedTuple):
    centers: jax.Array  # (k, d)
    labels: jax.Array  # (n,) int32, the nearest centre of every row
    inertia: jax.Array  # () sum of squared distances to the assigned centres
    n_iter: jax.Array  # () Lloyd iterations run


def _squared_distances(X, centers):
    d2 = (
        jnp.sum(X * X, axis=1)[:, None]
        - 2.0 * (X @ centers.T)
        + jnp.sum(centers * centers, axis=1)[None, :]
    )
    return jnp.maximum(d2, 0.0)


def kmeans_plusplus(X, key, n_clusters: int, n_local_trials: int | None = None):
    """Greedy k-means++ seeds (k, d): the first uniformly at random, each next one the
    best (lowest potential) of ``n_local_trials`` candidates drawn with probability
    proportional to the squared distance to the nearest seed so far."""
    n, d = X.shape
    trials = n_local_trials or 2 + int(math.log(n_clusters))
    key, first_key = jax.random.split(key)
    first = jax.random.randint(first_key, (), 0, n)
    centers = jnp.zeros((n_clusters, d), X.dtype).at[0].set(X[first])
    closest = _squared_distances(X, X[first][None, :])[:, 0]

    def add_center(c, state):
        centers, closest, key = state
        key, draw = jax.random.split(key)
        logits = jnp.log(jnp.maximum(closest, 0.0))  # zero distance: never drawn (-inf)
        candidates = jax.random.categorical(draw, logits, shape=(trials,))
        d2 = _squared_distances(X, X[candidates])  # (n, trials)
        potentials = jnp.sum(jnp.minimum(closest[:, None], d2), axis=0)
        best = jnp.argmin(potentials)
        closest = jnp.minimum(closest, d2[:, best])
        return centers.at[c].set(X[candidates[best]]), closest, key

    centers, _, _ = jax.lax.fori_loop(1, n_clusters, add_center, (centers, closest, key))
    return centers


def random_seeds(X, key, n_clusters: int):
    """``n_clusters`` distinct rows of X drawn uniformly (scikit-learn's ``init="random"``)."""
    rows = jax.random.choice(key, X.shape[0], (n_clusters,), replace=False)
    return X[rows]


def _assign(X, centers):
    d2 = _squared_distances(X, centers)
    labels = jnp.argmin(d2, axis=1).astype(jnp.int32)
    return labels, jnp.take_along_axis(d2, labels[:, None], axis=1)[:, 0]


def lloyd(X, centers, max_iter: int, tol) -> KMeansResult:
    """Lloyd's iterations from ``centers``; ``tol`` is an absolute bound on the summed
    squared centre shift."""
    k = centers.shape[0]

    def means(labels, old):
        counts = jnp.zeros((k,), X.dtype).at[labels].add(1.0)
        sums = jnp.zeros_like(old).at[labels].add(X)
        return jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1.0)[:, None], old)

    def body(state):
        centers, labels_old, it, _, _ = state
        labels, _ = _assign(X, centers)
        new = means(labels, centers)
        shift = jnp.sum((new - centers) ** 2)
        same = jnp.all(labels == labels_old)
        return new, labels, it + 1, same, shift

    def not_done(state):
        _, _, it, same, shift = state
        return (it < max_iter) & ~same & ((it == 0) | (shift > tol))

    init = (
        centers,
        jnp.full((X.shape[0],), -1, jnp.int32),
        jnp.zeros((), jnp.int32),
        jnp.asarray(False),
        jnp.asarray(jnp.inf, X.dtype),
    )
    centers, _, n_iter, _, _ = jax.lax.while_loop(not_done, body, init)
    labels, d2 = _assign(X, centers)  # labels of the returned centres
    return KMeansResult(centers, labels, jnp.sum(d2), n_iter)


@program(static_argnames=("n_clusters", "n_init", "max_iter", "seeding"))
def kmeans(
    X,
    key,
    *,
    n_clusters: int,
    n_init: int = 1,
    max_iter: int = 300,
    tol=1e-4,
    init=None,
    seeding: str = "k-means++",
) -> KMeansResult:
    """k-means with ``n_init`` restarts (one after another) seeded by ``seeding``
    ("k-means++" or "random"), keeping the lowest inertia; ``init`` (k, d) replaces
    the seeding (one run).  ``tol`` is relative to the mean feature variance of X, as
    in scikit-learn."""
    tol = tol * jnp.mean(jnp.var(X, axis=0))
    if init is not None:
        return lloyd(X, jnp.asarray(init, X.dtype), max_iter, tol)
    seed = random_seeds if seeding == "random" else kmeans_plusplus
    keys = jax.random.split(key, n_init)
    # lax.map, not vmap: a batched while_loop runs every restart as long as the slowest
    # one (n_init x max iterations); in sequence each stops at its own convergence
    runs = jax.lax.map(lambda k: lloyd(X, seed(X, k, n_clusters), max_iter, tol), keys)
    best = jnp.argmin(runs.inertia)
    return jax.tree_util.tree_map(lambda a: a[best], runs)


@program
def squared_distances(X, centers):
    """Squared Euclidean distances (n, k) of the rows of X to ``centers``."""
    return _squared_distances(X, centers)
