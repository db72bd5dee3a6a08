"""``latentlab.Isomap``: geodesic-distance MDS with an out-of-sample ``transform``.

Also the neighbour-graph plumbing the manifold estimators share (:func:`neighbors_of`,
:func:`check_n_neighbors`).
"""

from __future__ import annotations

import numbers

import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from latentlab._validation import check_data, check_n_components, check_option
from latentlab.closed_form import isomap as cf
from latentlab.closed_form import mds
from latentlab.closed_form import neighbors as nb
from latentlab.closed_form.eigensolvers import solve_with_fallback
from latentlab.estimators._dispatch import call, row_bucket, to_device
from latentlab.estimators._embedding import FitsEmbedding
from latentlab.estimators.base import LatentEstimator, jax_key, to_numpy
from latentlab.inference.summaries import pad_rows

__all__ = ["Isomap", "neighbors_of", "check_n_neighbors"]

EIGEN_SOLVERS = ("auto", "dense", "lanczos")
PATH_METHODS = ("auto", "FW", "D")


def check_n_neighbors(n_neighbors, n_samples: int) -> int:
    """``n_neighbors`` as an int in [1, n_samples - 1], or a ValueError saying why."""
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, numbers.Integral):
        raise ValueError(f"n_neighbors must be a positive integer, got {n_neighbors!r}")
    if not 1 <= n_neighbors < n_samples:
        raise ValueError(
            f"n_neighbors={n_neighbors} is out of range: it must satisfy 1 <= n_neighbors "
            f"< n_samples={n_samples} (a point is not its own neighbour)"
        )
    return int(n_neighbors)


def neighbors_of(Q, R, n_neighbors: int, exclude_self: bool = False):
    """(distances, indices) as NumPy arrays of the ``n_neighbors`` nearest rows of R
    for every row of Q (:func:`latentlab.closed_form.neighbors.kneighbors`); call
    inside the estimator's precision context."""
    result = nb.kneighbors(Q, R, n_neighbors, exclude_self=exclude_self)
    return result.distances, result.indices


def radius_neighbors_of(Q, R, radius: float):
    """Neighbours within ``radius`` of every row of Q, padded to the largest count
    (padding: distance ``inf``, index 0); a ValueError names rows with none."""
    m = Q.shape[0]
    rows = row_bucket(m)
    D = np.asarray(
        call(nb.pairwise_distances, rows * R.shape[0], to_device(pad_rows(Q, rows)), to_device(R))
    )[:m]
    within = D <= radius
    counts = within.sum(axis=1)
    lonely = np.flatnonzero(counts == 0)
    if lonely.size:
        raise ValueError(
            f"{lonely.size} sample(s) have no training point within radius={radius}: rows "
            f"{lonely[:10].tolist()}; use a larger radius or n_neighbors"
        )
    width = int(counts.max())
    order = np.argsort(np.where(within, D, np.inf), axis=1, kind="stable")[:, :width]
    distances = np.take_along_axis(np.where(within, D, np.inf), order, axis=1)
    indices = np.where(np.isfinite(distances), order, 0)
    return distances, indices


class Isomap(FitsEmbedding, ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """Isomap embedding (Tenenbaum, de Silva & Langford 2000).

    Builds the k-nearest-neighbour (or epsilon-radius) graph of the data, computes the
    geodesic distances as shortest paths in it (SciPy), and embeds them by classical
    MDS (:func:`latentlab.closed_form.mds.classical_mds`): the top eigenpairs of the
    doubly centred ``-D**2 / 2``.  Matches
    scikit-learn's ``Isomap`` on the same neighbours (up to the signs of the axes).

    Parameters
    ----------
    n_neighbors : int or None, default=5
        Neighbours per point (the point itself not counted), ``1 <= n_neighbors <
        n_samples``.  Must be None when ``radius`` is given.
    radius : float or None, default=None
        Link every pair at distance at most ``radius`` instead.
    n_components : int, default=2
    eigen_solver : {"auto", "dense", "lanczos"}, default="auto"
        See :func:`latentlab.closed_form.eigensolvers.eigen_settings` ("auto": block
        Lanczos above 500 samples, dense eigh below; Lanczos falls back to dense when
        it does not converge).
    path_method : {"auto", "FW", "D"}, default="auto"
        SciPy's shortest-path algorithm (Floyd-Warshall or Dijkstra).
    random_state : int, RandomState or None, default=None
        Seeds the Lanczos start block (the result does not depend on it beyond
        round-off).
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
        Training coordinates ``sqrt(eigenvalues_) * eigenvectors``.
    eigenvalues_ : ndarray (n_components,)
        Top eigenvalues of the centred geodesic kernel, decreasing.
    dist_matrix_ : ndarray (n_samples, n_samples)
        Geodesic distances.
    kernel_column_means_ : ndarray (n_samples,)
        Column means of ``-dist_matrix_**2 / 2`` (to centre new points' kernels).
    kernel_grand_mean_ : float
    X_fit_ : ndarray (n_samples, n_features)
        A copy of the training data (new points' neighbours are found among them).
    solver_ : str
        The eigensolver used.
    n_features_in_ : int

    Notes
    -----
    A disconnected neighbour graph has infinite geodesic distances: ``fit`` warns,
    naming the components, and links every pair of components by its closest pair of
    points, as scikit-learn does.

    Examples
    --------
    >>> import latentlab
    >>> from sklearn.datasets import make_s_curve
    >>> X, _ = make_s_curve(100, random_state=0)
    >>> latentlab.Isomap(n_neighbors=10).fit(X).transform(X[:3]).shape
    (3, 2)
    """

    def __init__(
        self,
        n_neighbors=5,
        *,
        radius=None,
        n_components=2,
        eigen_solver="auto",
        path_method="auto",
        random_state=None,
        dtype="float64",
    ):
        self.n_neighbors = n_neighbors
        self.radius = radius
        self.n_components = n_components
        self.eigen_solver = eigen_solver
        self.path_method = path_method
        self.random_state = random_state
        self.dtype = dtype

    def _check_graph_settings(self, n):
        if self.radius is not None:
            if self.n_neighbors is not None:
                raise ValueError(
                    "Both n_neighbors and radius are given; set n_neighbors=None to use "
                    "a radius graph"
                )
            radius = self.radius
            if isinstance(radius, bool) or not isinstance(radius, numbers.Real):
                raise ValueError(f"radius must be a positive number, got {radius!r}")
            if not (np.isfinite(radius) and radius > 0):
                raise ValueError(f"radius must be a positive number, got {radius!r}")
            return None
        if self.n_neighbors is None:
            raise ValueError("One of n_neighbors and radius must be given")
        return check_n_neighbors(self.n_neighbors, n)

    def _fit(self, X):
        from scipy.sparse.csgraph import shortest_path

        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n = X.shape[0]
        k = self._check_graph_settings(n)
        K = check_n_components(self.n_components, 1, n, "n_samples")
        check_option("eigen_solver", self.eigen_solver, EIGEN_SOLVERS)
        check_option("path_method", self.path_method, PATH_METHODS)
        dtype = np.float32 if self.dtype == "float32" else np.float64
        with self._precision():
            Xj = to_device(X)
            if k is not None:
                distances, indices = neighbors_of(X, X, k, exclude_self=True)
                graph = nb.knn_graph(distances, indices)
            else:
                graph = nb.radius_graph(
                    np.asarray(call(nb.pairwise_distances, n * n, Xj, Xj)), self.radius
                )
            n_parts = nb.check_connected(
                graph,
                "neighbour graph",
                "Geodesic distances between components would be infinite, so each pair "
                "of components is linked by its closest pair of points (as scikit-learn "
                "does); increase n_neighbors (or radius) to avoid this.",
                error=False,
            )
            if n_parts > 1:
                _, labels = nb.graph_components(graph)
                D_full = np.array(call(nb.pairwise_distances, n * n, Xj, Xj))
                graph = nb.link_components(graph, D_full, labels)
            D = shortest_path(graph, method=self.path_method, directed=False)
            D2, key = to_device(D * D), jax_key(self.random_state)

            def solve(**settings):
                return call(mds.classical_mds, n * n, D2, key, n_components=K, **settings)

            result, solver = solve_with_fallback(solve, n, K, self.eigen_solver, dtype)
            eigenvalues = to_numpy(result.eigenvalues)
            embedding = to_numpy(result.embedding)
        # eigenvalues at round-off level would blow up new points' coordinates
        floor = max(float(eigenvalues.max()), 0.0) * n * float(np.finfo(dtype).eps)
        if not np.all(eigenvalues > floor):
            raise ValueError(
                f"n_components={K} exceeds the number of positive eigenvalues of the "
                f"centred geodesic kernel ({int(np.sum(eigenvalues > floor))}): the data have "
                "fewer dimensions than that; ask for fewer components"
            )
        self.eigenvalues_ = eigenvalues
        self.embedding_ = embedding
        self.dist_matrix_ = np.require(D, np.float64, ["C", "O", "W"])  # SciPy's is a view
        self.kernel_column_means_ = to_numpy(result.column_means)
        self.kernel_grand_mean_ = float(result.grand_mean)
        self.X_fit_ = X.copy()
        self.solver_ = solver
        return X

    def reconstruction_error(self) -> float:
        """``sqrt(||H G H||_F^2 - sum(eigenvalues_**2)) / n_samples`` with ``G =
        -dist_matrix_**2 / 2``: how much of the centred geodesic kernel the embedding
        leaves out (scikit-learn's definition)."""
        check_is_fitted(self)
        G = -0.5 * self.dist_matrix_**2
        means = G.mean(axis=0)
        centred = G - means[None, :] - means[:, None] + means.mean()
        residual = np.sum(centred**2) - np.sum(self.eigenvalues_**2)
        return float(np.sqrt(max(residual, 0.0)) / G.shape[0])

    def transform(self, X):
        """Coordinates of new points: their geodesic distances to the training points
        through their graph neighbours (k nearest training points, or those within
        ``radius``), embedded by the MDS extension.  A training point is mapped to its
        own ``embedding_`` row."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        m = X.shape[0]
        with self._precision():
            if self.radius is not None:
                distances, indices = radius_neighbors_of(X, self.X_fit_, self.radius)
            else:
                distances, indices = neighbors_of(X, self.X_fit_, self.n_neighbors)
            rows = row_bucket(m)
            n = self.dist_matrix_.shape[0]
            Z = call(
                cf.isomap_transform,
                rows * n * distances.shape[1],
                jnp.asarray(pad_rows(distances, rows)),
                jnp.asarray(pad_rows(indices, rows)),
                to_device(self.dist_matrix_),
                jnp.asarray(self.eigenvalues_),
                jnp.asarray(self.embedding_ / np.sqrt(self.eigenvalues_)),
                jnp.asarray(self.kernel_column_means_),
                jnp.asarray(self.kernel_grand_mean_),
            )
            return to_numpy(Z[:m])
