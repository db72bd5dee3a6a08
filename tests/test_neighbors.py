"""The k-nearest-neighbour search: the k-d tree (low dimensions) and the blocked device
search (the rest) against scikit-learn's exact search, and duplicates with
``exclude_self``."""

import jax
import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from latentlab.closed_form import neighbors as nb

RNG = np.random.default_rng(0)
X = RNG.normal(size=(120, 3))
Q = RNG.normal(size=(7, 3))


@pytest.mark.parametrize("route", ["kd_tree", "blocked"])
def test_both_searches_match_sklearn(route, monkeypatch):
    if route == "blocked":
        monkeypatch.setattr(nb, "KD_TREE_MAX_FEATURES", 0)
    reference = NearestNeighbors(n_neighbors=6).fit(X)
    with jax.enable_x64(True):
        own = nb.kneighbors(X, X, 5, exclude_self=True)
        new = nb.kneighbors(Q, X, 6)
    distances, indices = reference.kneighbors(X)  # the point itself first
    np.testing.assert_array_equal(own.indices, indices[:, 1:])
    np.testing.assert_allclose(own.distances, distances[:, 1:], rtol=1e-12)
    distances, indices = reference.kneighbors(Q)
    np.testing.assert_array_equal(new.indices, indices)
    np.testing.assert_allclose(new.distances, distances, rtol=1e-12)
    # the indices alone (connectivity graphs): the same sets, in any order
    with jax.enable_x64(True):
        own_set = nb.kneighbors_indices(X, X, 5, exclude_self=True)
    np.testing.assert_array_equal(np.sort(own_set, axis=1), np.sort(own.indices, axis=1))


def test_kd_tree_excludes_self_among_more_duplicates_than_neighbours():
    # every point has 4 exact copies; with 2 neighbours the tree may return 3 copies
    # without the point itself, and then drops one of them instead
    D = np.repeat(X[:20], 5, axis=0)
    with jax.enable_x64(True):
        result = nb.kneighbors(D, D, 2, exclude_self=True)
    assert np.all(result.indices != np.arange(len(D))[:, None])
    copies = np.broadcast_to(np.repeat(np.arange(20), 5)[:, None], result.indices.shape)
    np.testing.assert_array_equal(result.indices // 5, copies)
    np.testing.assert_array_equal(result.distances, 0.0)
