"""``latentlab.KMeans``: k-means++ (or random) seeding and Lloyd's iterations, one
compiled program per fit (:mod:`latentlab.closed_form.kmeans`, shared with spectral
clustering and GaussianMixture's k-means starts)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._settings import (
    ArrayLike,
    Boolean,
    Callable,
    Dtype,
    Integer,
    Options,
    RandomState,
    Real,
    Verbose,
)
from latentlab._validation import check_data, check_start_array, kept_float_dtype
from latentlab.closed_form import kmeans as km
from latentlab.estimators._dispatch import call, map_rows, to_device
from latentlab.estimators.base import LATENTLAB_FILES, LatentEstimator, jax_key, to_numpy

__all__ = ["KMeans", "plusplus_draws"]

SEEDINGS = ("k-means++", "random")
ALGORITHMS = ("lloyd", "elkan")
# the sparse formats fit/predict take (densified: see the class docstring)
SPARSE = ("csr", "csc", "coo")


def plusplus_draws(rng: np.random.RandomState, n_init: int, n_clusters: int) -> np.ndarray:
    """The k-means++ draws of ``n_init`` restarts, (n_init, m) uniforms from ``rng`` in
    the order scikit-learn's ``KMeans`` takes them (so the same ``random_state`` gives
    its seeds).  Drawn in float64 on the host: JAX's uniforms from one key differ
    between float32 and float64, and so did the seeds of the two precisions."""
    return rng.random_sample((n_init, km.plusplus_uniforms_size(n_clusters)))


class KMeans(ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin, LatentEstimator):
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
    is moved, as scikit-learn's, onto the row farthest from its centre (the next
    empty one onto the next farthest row), which leaves its old cluster.

    Sparse X (CSR, CSC, COO) is densified for the fit (n_samples x n_features floats:
    the centres are dense anyway, and the results are those of the dense rows).  A
    float32 X gives float32 ``cluster_centers_`` and ``transform`` output, as
    scikit-learn's; the computation runs in ``dtype``.

    Parameters
    ----------
    n_clusters : int, default=8
    init : {"k-means++", "random"}, callable or array of shape (n_clusters, n_features), \
default="k-means++"
        "random" seeds with ``n_clusters`` distinct rows drawn uniformly (with
        probability proportional to ``sample_weight``); an array gives the initial
        centres (then a single run, whatever ``n_init``, with a RuntimeWarning if
        ``n_init`` asked for more); a callable ``init(X, n_clusters, random_state)``
        (X the validated float64 array, ``random_state`` a NumPy ``RandomState``)
        returns them, called once per restart.
    n_init : int or "auto", default=1
        Restarts; the run with the lowest inertia is kept.  "auto" is scikit-learn's
        rule: 10 restarts for ``init="random"`` or a callable, else 1.
    max_iter : int, default=300
    tol : float, default=1e-4
        Relative to the mean feature variance of X.
    verbose : int or bool, default=0
        If true, print the restarts' outcome after the fit (initialisation, iterations
        and inertia of the kept run, and why it stopped).
    random_state : int, RandomState or None, default=None
        Draws the k-means++ candidates on the host, in scikit-learn's order: the same
        seeds as scikit-learn's ``KMeans`` with this ``random_state``, whatever ``dtype``.
    copy_x : bool, default=True
        Accepted for scikit-learn's signature: X is never modified, whatever its value.
    algorithm : {"lloyd", "elkan"}, default="lloyd"
        Both run the same exact Lloyd iterations (pruned by Hamerly's bounds from 4096
        rows on), as scikit-learn's two algorithms give the same labels and centres;
        "elkan" with one cluster warns (RuntimeWarning) as scikit-learn's does.
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
        # or the (n_clusters, n_features) centres, or a callable returning them
        "init": Options(*SEEDINGS) | ArrayLike() | Callable(),
        "n_init": Integer(1, None) | Options("auto"),
        "max_iter": Integer(1, None),
        "tol": Real(0, None),
        "verbose": Verbose(),
        "random_state": RandomState(),
        "copy_x": Boolean(),
        "algorithm": Options(*ALGORITHMS),
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
        verbose=0,
        random_state=None,
        copy_x=True,
        algorithm="lloyd",
        dtype="float64",
    ):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.copy_x = copy_x
        self.algorithm = algorithm
        self.dtype = dtype

    def _restarts(self):
        """Restarts: ``n_init``, with "auto" resolved by scikit-learn's rule."""
        if self.n_init != "auto":
            return int(self.n_init)
        return (
            10
            if callable(self.init) or (isinstance(self.init, str) and self.init == "random")
            else 1
        )

    def _starts(self, X, k, n_init, rng):
        """The given initial centres (n_init, k, d), or None to seed on the device."""
        shape, dims = (k, X.shape[1]), "(n_clusters, n_features)"

        def check(name, centers):
            centers = np.asarray(centers)
            if centers.ndim == 2 and centers.shape[0] != k:
                raise ValueError(
                    f"The shape of the initial centers {centers.shape} does not match the "
                    f"number of clusters {k} ({name})"
                )
            if centers.ndim == 2 and centers.shape[1] != X.shape[1]:
                raise ValueError(
                    f"The shape of the initial centers {centers.shape} does not match the "
                    f"number of features of the data {X.shape[1]} ({name})"
                )
            return check_start_array(name, centers, shape, dims)

        if callable(self.init):
            return np.stack(
                [check("init(X, ...)", self.init(X, k, random_state=rng)) for _ in range(n_init)]
            )
        if isinstance(self.init, str):
            return None
        if n_init != 1:
            warnings.warn(
                f"Explicit initial center position passed: performing only one init in "
                f"KMeans instead of n_init={n_init}",
                RuntimeWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        return check("init array", self.init)[None]

    def fit(self, X, y=None, sample_weight=None):
        """Cluster X (n_samples, n_features), each row weighted by ``sample_weight``
        ((n_samples,), non-negative, not all zero; default 1); returns self."""
        out_dtype = kept_float_dtype(X)
        X = check_data(self, X, reset=True, allow_nan=False, accept_sparse=SPARSE)
        X = _dense(X)
        n, d = X.shape
        k, max_iter, tol = int(self.n_clusters), int(self.max_iter), float(self.tol)
        if k > n:
            raise ValueError(f"n_samples={n} should be >= n_clusters={k}")
        weights = _check_weights(sample_weight, n)
        if self.algorithm == "elkan" and k == 1:
            warnings.warn(
                "algorithm='elkan' doesn't make sense for a single cluster. Using 'lloyd' instead.",
                RuntimeWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        rng = check_random_state(self.random_state)
        n_init = self._restarts()
        starts = self._starts(X, k, n_init, rng)
        plusplus = starts is None and self.init == "k-means++"
        uniforms = plusplus_draws(rng, n_init, k) if plusplus else None
        runs = [None] if starts is None else list(starts)
        best = None
        with self._precision():
            for start in runs:
                result = call(
                    km.kmeans,
                    X.size * k * (n_init if start is None else 1),
                    to_device(X),
                    jax_key(rng),  # for init="random"
                    n_clusters=k,
                    n_init=n_init if start is None else 1,
                    max_iter=max_iter,
                    tol=tol,
                    init=None if start is None else to_device(start),
                    seeding=self.init if start is None else "k-means++",
                    sample_weight=None if weights is None else to_device(weights),
                    uniforms=None if uniforms is None else to_device(uniforms),
                    relocate=True,
                )
                inertia = float(result.inertia)
                if best is None or inertia < best[0]:
                    best = (inertia, result)
            inertia, result = best
            self.cluster_centers_ = to_numpy(result.centers).astype(out_dtype, copy=False)
            self.labels_ = np.array(result.labels, dtype=np.int64, copy=True)
            self.inertia_ = inertia
            self.n_iter_ = int(result.n_iter)
        distinct = len(np.unique(self.labels_))
        if distinct < k:
            warnings.warn(
                f"Number of distinct clusters ({distinct}) found smaller than n_clusters "
                f"({k}). Possibly due to duplicate points in X.",
                ConvergenceWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        if self.verbose:
            stop = "max_iter reached" if self.n_iter_ >= max_iter else "converged"
            print(
                f"KMeans: {len(runs) if starts is not None else n_init} initialization(s); "
                f"kept run: {self.n_iter_} Lloyd iterations ({stop}), "
                f"inertia {self.inertia_:.6g}"
            )
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # densified (see the class docstring)
        return tags

    @property
    def _n_features_out(self):
        """Columns of :meth:`transform` (one distance per centre): names "kmeans0", ..."""
        return self.cluster_centers_.shape[0]

    def _distances(self, X):
        """(labels, squared distances (n, k)) of validated rows of X."""
        check_is_fitted(self)
        X = _dense(check_data(self, X, reset=False, allow_nan=False, accept_sparse=SPARSE))
        with self._precision():
            d2 = to_numpy(
                map_rows(
                    km.squared_distances,
                    X,
                    to_device(self.cluster_centers_.astype(np.float64)),
                    work_per_row=X.shape[1] * self.cluster_centers_.shape[0],
                )
            )
        return np.argmin(d2, axis=1).astype(np.int64), d2

    def predict(self, X):
        """Index of the nearest centre of each row of X, (n_samples,)."""
        return self._distances(X)[0]

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit (with ``sample_weight`` as in :meth:`fit`) and return ``labels_``."""
        return self.fit(X, sample_weight=sample_weight).labels_.copy()

    def transform(self, X):
        """Euclidean distances of the rows of X to the centres, (n_samples, n_clusters);
        float32 for a float32 X."""
        out_dtype = kept_float_dtype(X)
        return np.sqrt(self._distances(X)[1]).astype(out_dtype, copy=False)

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit (with ``sample_weight`` as in :meth:`fit`) and return the distances of X
        to the fitted centres."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def score(self, X, y=None, sample_weight=None):
        """Minus the k-means objective of X: minus the summed (``sample_weight``-
        weighted) squared distance of each row to its nearest centre."""
        d2 = np.min(self._distances(X)[1], axis=1)
        weights = _check_weights(sample_weight, d2.shape[0])
        return -float(d2.sum() if weights is None else weights @ d2)


def _dense(X):
    """A validated X as a dense float64 array (sparse input densified)."""
    return np.asarray(X.toarray(), dtype=np.float64) if hasattr(X, "nnz") else X


def _check_weights(sample_weight, n):
    """``sample_weight`` as a float64 (n,) copy, or None; a ValueError names a wrong
    shape, a non-finite or negative weight, or all-zero weights."""
    if sample_weight is None:
        return None
    w = np.array(sample_weight, dtype=np.float64, copy=True)
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"sample_weight has shape {w.shape}; expected (n_samples,) = ({n},)")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    if not np.any(w > 0):
        raise ValueError("sample_weight is zero for every row: nothing to cluster")
    return w
