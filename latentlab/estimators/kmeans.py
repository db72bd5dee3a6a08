"""``latentlab.KMeans``: k-means++ (or random) seeding and Lloyd's iterations, one
compiled program per fit (:mod:`latentlab.closed_form.kmeans`, shared with spectral
clustering and GaussianMixture's k-means starts)."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._settings import ArrayLike, Dtype, Integer, Options, RandomState, Real
from latentlab._validation import check_data, check_start_array
from latentlab.closed_form import kmeans as km
from latentlab.estimators._dispatch import call, map_rows, to_device
from latentlab.estimators.base import LatentEstimator, jax_key, to_numpy

__all__ = ["KMeans", "plusplus_draws"]

SEEDINGS = ("k-means++", "random")


def plusplus_draws(rng: np.random.RandomState, n_init: int, n_clusters: int) -> np.ndarray:
    """The k-means++ draws of ``n_init`` restarts, (n_init, m) uniforms from ``rng`` in
    the order scikit-learn's ``KMeans`` takes them (so the same ``random_state`` gives
    its seeds).  Drawn in float64 on the host: JAX's uniforms from one key differ
    between float32 and float64, and so did the seeds of the two precisions."""
    return rng.random_sample((n_init, km.plusplus_uniforms_size(n_clusters)))


class KMeans(ClusterMixin, TransformerMixin, LatentEstimator):
    """k-means clustering: Lloyd's iterations from k-means++ seeds.

    scikit-learn's conventions, so that from the same initial centres the labels,
    centres, inertia and iteration count are scikit-learn's: greedy k-means++
    (Arthur & Vassilvitskii 2007; the first seed uniform, each next one the best of
    ``2 + log(k)`` candidates drawn with probability proportional to the squared
    distance to the nearest seed), and Lloyd stops when the labels no longer change or
    the summed squared centre shift is at most ``tol`` times the mean feature
    variance.  The ``n_init`` restarts run one after another in one compiled program
    and the lowest inertia is kept.  From 4096 rows on, Lloyd skips the rows whose
    label Hamerly's (2010) distance bounds prove unchanged (with a round-off margin),
    so each iteration after the first few costs a fraction of a pass over the
    distances; labels and centres stay those of the plain algorithm.  An empty cluster
    keeps its previous centre (scikit-learn moves it to a far point; neither happens
    on well-separated data).

    Parameters
    ----------
    n_clusters : int, default=8
    init : {"k-means++", "random"} or array of shape (n_clusters, n_features), default="k-means++"
        "random" seeds with ``n_clusters`` distinct rows drawn uniformly; an array gives
        the initial centres (then a single run, whatever ``n_init``).
    n_init : int, default=1
        Restarts; the run with the lowest inertia is kept.
    max_iter : int, default=300
    tol : float, default=1e-4
        Relative to the mean feature variance of X.
    random_state : int, RandomState or None, default=None
        Draws the k-means++ candidates on the host, in scikit-learn's order: the same
        seeds as scikit-learn's ``KMeans`` with this ``random_state``, whatever ``dtype``.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    cluster_centers_ : ndarray (n_clusters, n_features)
    labels_ : ndarray (n_samples,) of int
        The nearest centre of every training row (of the returned centres).
    inertia_ : float
        Sum of squared distances of the training rows to their centres.
    n_iter_ : int
        Lloyd iterations of the kept run.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.r_[np.zeros((5, 2)), np.full((5, 2), 4.0)] + 0.1 * np.arange(10)[:, None]
    >>> km = latentlab.KMeans(2, random_state=0).fit(X)
    >>> len(set(km.labels_[:5])), len(set(km.labels_[5:])), bool(km.labels_[0] != km.labels_[-1])
    (1, 1, True)
    """

    _settings = {
        "n_clusters": Integer(1, None),  # at most n_samples: checked with the data
        "init": Options(*SEEDINGS) | ArrayLike(),  # or the (n_clusters, n_features) centres
        "n_init": Integer(1, None),
        "max_iter": Integer(1, None),
        "tol": Real(0, None),
        "random_state": RandomState(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        init="k-means++",
        n_init=1,
        max_iter=300,
        tol=1e-4,
        random_state=None,
        dtype="float64",
    ):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.dtype = dtype

    def _check_settings(self, n_samples, n_features):
        k, n_init, max_iter, tol = self.n_clusters, self.n_init, self.max_iter, self.tol
        if k > n_samples:
            raise ValueError(f"n_clusters={k} exceeds n_samples={n_samples}")
        init = None
        if not isinstance(self.init, str):
            init = check_start_array(
                "init array", self.init, (k, n_features), "(n_clusters, n_features)"
            )
            n_init = 1  # a given start is one run
        return int(k), int(n_init), int(max_iter), float(tol), init

    def fit(self, X, y=None):
        """Cluster X (n_samples, n_features); returns self."""
        X = check_data(self, X, reset=True, allow_nan=False)
        k, n_init, max_iter, tol, init = self._check_settings(*X.shape)
        rng = check_random_state(self.random_state)
        plusplus = init is None and self.init == "k-means++"
        uniforms = plusplus_draws(rng, n_init, k) if plusplus else None
        with self._precision():
            result = call(
                km.kmeans,
                X.size * k * n_init,
                to_device(X),
                jax_key(rng),  # for init="random"
                n_clusters=k,
                n_init=n_init,
                max_iter=max_iter,
                tol=tol,
                init=None if init is None else to_device(init),
                seeding=self.init if init is None else "k-means++",
                uniforms=None if uniforms is None else to_device(uniforms),
            )
            self.cluster_centers_ = to_numpy(result.centers)
            self.labels_ = np.array(result.labels, dtype=np.int64, copy=True)
            self.inertia_ = float(result.inertia)
            self.n_iter_ = int(result.n_iter)
        return self

    def _distances(self, X):
        """(labels, squared distances (n, k)) of validated rows of X."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        with self._precision():
            d2 = to_numpy(
                map_rows(
                    km.squared_distances,
                    X,
                    to_device(self.cluster_centers_),
                    work_per_row=X.shape[1] * self.cluster_centers_.shape[0],
                )
            )
        return np.argmin(d2, axis=1).astype(np.int64), d2

    def predict(self, X):
        """Index of the nearest centre of each row of X, (n_samples,)."""
        return self._distances(X)[0]

    def fit_predict(self, X, y=None):
        """Fit and return ``labels_``."""
        return self.fit(X).labels_.copy()

    def transform(self, X):
        """Euclidean distances of the rows of X to the centres, (n_samples, n_clusters)."""
        return np.sqrt(self._distances(X)[1])

    def fit_transform(self, X, y=None):
        """Fit and return the distances of X to the fitted centres."""
        return self.fit(X).transform(X)

    def score(self, X, y=None):
        """Minus the k-means objective of X: minus the summed squared distance of each
        row to its nearest centre."""
        return -float(np.min(self._distances(X)[1], axis=1).sum())
