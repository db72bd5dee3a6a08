"""``latentlab.MDS``: classical metric multidimensional scaling with an out-of-sample
``transform``, and optional SMACOF refinement."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._settings import (
    Boolean,
    Callable,
    Dtype,
    InstanceOf,
    Integer,
    Options,
    RandomState,
    Real,
)
from latentlab._validation import check_data, check_n_components, check_symmetric
from latentlab.closed_form import mds as cf
from latentlab.closed_form.eigensolvers import solver_threads
from latentlab.estimators._dispatch import call, map_rows, to_device
from latentlab.estimators._embedding import EmbeddingEstimator
from latentlab.estimators.base import (
    LATENTLAB_FILES,
    jax_key,
    to_numpy,
    warn_not_converged,
)
from latentlab.estimators.kernel_pca import LANCZOS_MIN_SAMPLES, lanczos_settings

__all__ = ["MDS", "check_distance_matrix"]

ALGORITHMS = ("auto", "classical", "smacof")
DISSIMILARITIES = ("euclidean", "precomputed")
INITS = ("classical", "classical_mds", "random")
EIGEN_SOLVERS = ("auto", "dense", "lanczos")


def check_distance_matrix(D: np.ndarray, who: str = "X") -> np.ndarray:
    """A square, symmetric, non-negative dissimilarity matrix with a zero diagonal, or a
    ValueError naming what is wrong.  Returns its exactly symmetric part."""
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(
            f"metric='precomputed' needs a square (n_samples, n_samples) distance "
            f"matrix; {who} has shape {D.shape}"
        )
    check_symmetric(D, f"The precomputed distance matrix {who}")
    scale = float(np.abs(D).max()) if D.size else 0.0
    if (D < 0).any():
        raise ValueError(
            f"The precomputed distance matrix {who} has negative entries (smallest "
            f"{D.min():.3g}); distances must be non-negative"
        )
    diagonal = float(np.abs(np.diag(D)).max())
    if diagonal > 1e-10 * max(scale, 1.0):
        raise ValueError(
            f"The precomputed distance matrix {who} has a non-zero diagonal (largest "
            f"{diagonal:.3g}); a point's distance to itself must be 0"
        )
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    return D


class MDS(EmbeddingEstimator):
    """Multidimensional scaling: classical (Torgerson) MDS, computed by jit-compiled
    JAX in float64, with an out-of-sample ``transform``; SMACOF refinement, and
    non-metric (ordinal) MDS.

    Classical MDS double-centres the squared dissimilarities, ``B = -1/2 H D^2 H``, and
    takes ``embedding_ = V_k Lambda_k^{1/2}`` from B's top eigenpairs: for Euclidean
    distances of data X this is exactly the PCA scores of X (up to the sign of each
    column), i.e. kernel PCA of ``-1/2 D^2``.  New points are placed by the landmark /
    Nystrom formula of de Silva & Tenenbaum (2004), ``y = -1/2 L^# (delta -
    delta_mu)`` (``delta``: squared distances to the landmarks, ``delta_mu``: the
    landmarks' mean squared distances, ``L^#``: the pseudo-inverse of the landmark
    configuration), which reproduces the training configuration exactly and, for
    Euclidean data, equals the PCA projection.

    How this differs from scikit-learn's ``MDS``: scikit-learn minimises the stress by
    SMACOF from random starts (or a classical start), which is iterative, depends on
    the start and has no ``transform``.  Here ``algorithm="classical"`` (what
    ``"auto"`` takes for metric MDS) is the closed-form eigen-solution
    (scikit-learn's ``ClassicalMDS``), optimal for the strain ``||B - Y Y^T||_F`` and
    the exact answer when the distances are Euclidean; ``algorithm="smacof"`` refines
    it (or random starts) by SMACOF, which can only lower the raw stress and helps for
    non-Euclidean dissimilarities.  Non-metric MDS (``metric_mds=False``) is always
    SMACOF.

    Parameters
    ----------
    n_components : int, default=2
        Dimension of the configuration, at most the number of (landmark) points.
    algorithm : {"auto", "classical", "smacof"}, default="auto"
        The fitting criterion: the closed-form classical solution, or SMACOF
        minimisation of the stress started from ``init``.  ``"auto"``: classical for
        metric MDS, SMACOF for non-metric.  (Called ``metric`` before latentlab took
        scikit-learn's meaning of that name; ``metric="classical"`` and
        ``metric="smacof"`` still work, with a FutureWarning.)
    metric_mds : bool, default=True
        Metric MDS (fit the distances themselves), or non-metric MDS (``False``: fit
        only their rank order, by Kruskal's monotone regression inside SMACOF; the
        configuration's scale is then normalised, ``sum_{i<j} dhat_ij^2 = n (n-1) / 2``).
    metric : str or callable, default="euclidean"
        The dissimilarity of the rows of X, as scikit-learn's ``pairwise_distances``
        takes it (``metric_params`` its keyword arguments).  ``"euclidean"`` is
        computed by JAX on the device, centred first; other metrics by scikit-learn on
        the host.  ``"precomputed"``: ``fit`` takes the (n, n) matrix of distances
        (not squared) and ``transform`` the (m, n) distances of new points to the
        training points.  (``True``/``False`` are scikit-learn < 1.8's spelling of
        ``metric_mds`` and are taken with a FutureWarning.)
    metric_params : dict or None, default=None
        Keyword arguments of ``metric``.
    dissimilarity : {"euclidean", "precomputed"} or None, default=None
        Deprecated (as in scikit-learn 1.8): use ``metric``.  Taken with a
        FutureWarning; an error together with a non-default ``metric``.
    n_landmarks : int or None, default=None
        Landmark MDS (de Silva & Tenenbaum 2004): classical MDS of ``n_landmarks``
        points drawn at random (``random_state``), the other points placed by the
        landmark formula; O(n m) instead of O(n^2) eigen-work.  None: every point.
        Only with the classical algorithm.
    n_init : int, default=1
        SMACOF runs from random starts (``init="random"``), the one with the lowest
        stress kept; ignored with a classical start.
    init : {"classical", "classical_mds", "random"}, default="classical"
        Start of SMACOF: the classical solution (``"classical_mds"`` is
        scikit-learn's name for it), or standard normal coordinates scaled to the
        dissimilarities (``random_state``).  ``fit(X, init=array)`` starts from the
        given (n_samples, n_components) configuration instead.
    max_iter : int, default=300
        SMACOF iterations (Guttman transforms) per run.
    eps : float, default=1e-6
        SMACOF stops when the stress (raw for metric MDS, stress-1 for non-metric)
        falls by less than this fraction; neither depends on the scale of the data.
    normalized_stress : bool or "auto", default="auto"
        What ``stress_`` holds: the raw stress (False) or Kruskal's stress-1 (True),
        as scikit-learn defines them; "auto": raw for metric MDS, stress-1 for
        non-metric.
    n_jobs : int or None, default=None
        Parallel jobs of scikit-learn's ``pairwise_distances`` for host metrics (the
        ``n_init`` runs are sequential).
    eigen_solver : {"auto", "dense", "lanczos"}, default="auto"
        As in :class:`latentlab.KernelPCA`: "auto" takes block Lanczos for more than
        500 (landmark) points, with a dense fallback.
    random_state : int, RandomState or None, default=None
        Landmarks, the Lanczos start and the random SMACOF starts.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
        The configuration, centred.
    eigenvalues_ : ndarray (n_components,)
        Top eigenvalues of ``B`` (of the landmarks' B for landmark MDS), decreasing;
        negative ones (non-Euclidean dissimilarities) give zero coordinates.
    stress_ : float
        With ``d`` the dissimilarities (for non-metric MDS the disparities ``dhat``)
        and ``e`` the distances of ``embedding_``, over pairs i < j: the raw stress
        ``sum (d - e)^2``, or Kruskal's stress-1 ``sqrt(sum (d - e)^2 / sum e^2)`` (see
        ``normalized_stress``): 0 for a perfect fit.
    landmarks_ : ndarray of int (n_landmarks,)
        Indices of the landmark points in the training data.
    landmark_mean_squared_distances_ : ndarray (n_landmarks,)
        ``delta_mu``: each landmark's mean squared distance to the landmarks.
    X_fit_ : ndarray (n_samples, n_features)
        The training data, for ``transform``; with ``metric="precomputed"`` the
        training distance matrix.
    X_offset_ : ndarray (n_features,)
        Training mean, subtracted before squared distances are formed so that they do
        not cancel for data far from the origin (zeros for host metrics).
    n_iter_ : int
        SMACOF iterations run (of the kept run; 0 for classical).
    n_components_, n_features_in_ : int

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(50, 4))
    >>> mds = latentlab.MDS(n_components=2).fit(X)
    >>> np.allclose(mds.transform(X), mds.embedding_)
    True
    """

    _settings = {
        "n_components": Integer(),  # its range depends on the data
        "algorithm": Options(*ALGORITHMS),
        "metric_mds": Boolean(),
        "metric": InstanceOf(str, "a metric name") | Callable() | Boolean(),
        "metric_params": InstanceOf(dict, "a dict") | None,
        "dissimilarity": Options(*DISSIMILARITIES) | None,
        "n_landmarks": Integer(2, None) | None,  # at most n_samples: checked with the data
        "n_init": Integer(1, None),
        "init": Options(*INITS),
        "max_iter": Integer(1, None),
        "eps": Real(0, None),
        "normalized_stress": Boolean() | "auto",
        "n_jobs": Integer() | None,
        "eigen_solver": Options(*EIGEN_SOLVERS),
        "random_state": RandomState(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_components=2,
        *,
        algorithm="auto",
        metric_mds=True,
        metric="euclidean",
        metric_params=None,
        dissimilarity=None,
        n_landmarks=None,
        n_init=1,
        init="classical",
        max_iter=300,
        eps=1e-6,
        normalized_stress="auto",
        n_jobs=None,
        eigen_solver="auto",
        random_state=None,
        dtype="float64",
    ):
        self.n_components = n_components
        self.algorithm = algorithm
        self.metric_mds = metric_mds
        self.metric = metric
        self.metric_params = metric_params
        self.dissimilarity = dissimilarity
        self.n_landmarks = n_landmarks
        self.n_init = n_init
        self.init = init
        self.max_iter = max_iter
        self.eps = eps
        self.normalized_stress = normalized_stress
        self.n_jobs = n_jobs
        self.eigen_solver = eigen_solver
        self.random_state = random_state
        self.dtype = dtype

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = "precomputed" in (self.metric, self.dissimilarity)
        return tags

    def _resolved(self, warn: bool = True):
        """(algorithm, metric_mds, metric) after the deprecated spellings, checked
        against each other."""
        algorithm, metric_mds, metric = self.algorithm, bool(self.metric_mds), self.metric

        def say(message):
            if warn:
                warnings.warn(message, FutureWarning, skip_file_prefixes=LATENTLAB_FILES)

        if isinstance(metric, (bool, np.bool_)):
            say(
                f"metric={metric} chose metric or non-metric MDS before scikit-learn 1.8; "
                "metric is now the distance. Use metric_mds instead"
            )
            metric_mds, metric = bool(metric), "euclidean"
        elif isinstance(metric, str) and metric in ("classical", "smacof"):
            say(
                f"metric={metric!r} is latentlab's former name of the fitting criterion; "
                f"use algorithm={metric!r} (metric is now the distance, as in scikit-learn)"
            )
            algorithm, metric = metric, "euclidean"
        if self.dissimilarity is not None:
            if not (isinstance(metric, str) and metric == "euclidean"):
                raise ValueError(
                    "You provided both `dissimilarity` and `metric`: `dissimilarity` is a "
                    "deprecated name of `metric`; give only metric"
                )
            say("The `dissimilarity` parameter is deprecated; use metric instead")
            metric = self.dissimilarity
        if algorithm == "auto":
            algorithm = "classical" if metric_mds else "smacof"
        if algorithm == "classical" and not metric_mds:
            raise ValueError(
                "metric_mds=False (non-metric MDS) needs algorithm='smacof' or 'auto': the "
                "classical solution fits the distances themselves"
            )
        if algorithm != "classical" and self.n_landmarks is not None:
            raise ValueError("n_landmarks is only available with algorithm='classical'")
        if isinstance(metric, str) and metric not in DISSIMILARITIES:
            from sklearn.metrics import pairwise_distances

            try:
                pairwise_distances(np.eye(2), metric=metric, **(self.metric_params or {}))
            except (ValueError, TypeError) as error:
                raise ValueError(
                    f"Unknown metric {metric!r}: give 'euclidean', 'precomputed', a "
                    f"callable or a metric scikit-learn's pairwise_distances takes ({error})"
                ) from None
        return algorithm, metric_mds, metric

    def fit(self, X, y=None, init=None):
        """Fit the configuration to X (n_samples, n_features), or to the (n, n)
        distance matrix with ``metric="precomputed"``.  ``init``: an optional
        (n_samples, n_components) start of SMACOF, overriding the ``init`` setting."""
        self._fit(X, init)
        return self

    def fit_transform(self, X, y=None, init=None):
        """Fit (see :meth:`fit`) and return ``embedding_``."""
        self._fit(X, init)
        return self.embedding_.copy()

    def _distances(self, X, Y, metric):
        from sklearn.metrics import pairwise_distances

        return pairwise_distances(
            X, Y, metric=metric, n_jobs=self.n_jobs, **(self.metric_params or {})
        )

    def _fit(self, X, init=None):
        algorithm, metric_mds, metric = self._resolved()
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n = X.shape[0]
        on_device = isinstance(metric, str) and metric == "euclidean"
        if metric == "precomputed":
            D = check_distance_matrix(X.copy())
        elif not on_device:
            D = self._distances(X, None, metric)
            D = 0.5 * (D + D.T)
            np.fill_diagonal(D, 0.0)
        offset = X.mean(axis=0) if on_device else np.zeros(X.shape[1])
        rng = check_random_state(self.random_state)
        if self.n_landmarks is None:
            landmarks = np.arange(n)
        else:
            m = self.n_landmarks
            if m > n:
                raise ValueError(f"n_landmarks must be an integer in [2, n_samples={n}], got {m!r}")
            landmarks = np.sort(rng.choice(n, size=int(m), replace=False))
        m = len(landmarks)
        K = check_n_components(self.n_components, 1, m, "the number of (landmark) points")
        if init is not None:
            init = np.asarray(init, dtype=np.float64)
            if init.shape != (n, K):
                raise ValueError(
                    f"init must have shape (n_samples, n_components) = ({n}, {K}); got {init.shape}"
                )
            if not np.isfinite(init).all():
                raise ValueError("init holds NaN or infinite values")
        solver = self.eigen_solver
        precision = np.float32 if self.dtype == "float32" else np.float64
        lanczos = lanczos_settings(m, K, precision)
        if solver == "auto":
            solver = "lanczos" if m > LANCZOS_MIN_SAMPLES and lanczos is not None else "dense"
        if solver == "lanczos" and lanczos is None:
            solver = "dense"
        key = jax_key(rng)
        with self._precision():
            if on_device:
                D2_all = call(cf.pairwise_squared_distances, n * n, to_device(X - offset))
            else:
                D2_all = jnp.asarray(D) ** 2
            D2 = D2_all if m == n else D2_all[landmarks][:, landmarks]
            fit = None
            if solver == "lanczos":
                block, blocks, products, tol = lanczos
                with solver_threads("lanczos"):  # its small host LAPACK calls on one thread
                    fit = jax.block_until_ready(
                        call(
                            cf.classical_mds,
                            m * m,
                            D2,
                            key,
                            n_components=K,
                            solver="lanczos",
                            block_size=block,
                            max_blocks=blocks,
                            max_products=products,
                            tol=tol,
                        )
                    )
                if not bool(fit.converged):
                    fit, solver = None, "dense"
            if fit is None:
                fit = call(cf.classical_mds, m * m, D2, key, n_components=K, solver="dense")
            eigenvalues = to_numpy(fit.eigenvalues)
            embedding = to_numpy(fit.embedding)
            mean_squared = to_numpy(-2.0 * fit.column_means)
            if not np.isfinite(eigenvalues).all():
                raise ValueError("The squared distances are not finite; rescale the data")
            if m < n:  # landmark MDS: every point by the landmark formula
                projection = np.linalg.pinv(embedding).T
                embedding = to_numpy(
                    cf.landmark_transform(
                        D2_all[:, landmarks], jnp.asarray(-0.5 * mean_squared), projection
                    )
                )
            D_all = jnp.sqrt(D2_all) if on_device else jnp.asarray(D)
            n_iter = 0
            if algorithm == "smacof":
                embedding, n_iter, stress = self._smacof(
                    D_all, embedding, init, metric_mds, mean_squared, K, rng
                )
            else:
                stress = None
        normalized = self.normalized_stress
        if normalized == "auto":
            normalized = not metric_mds
        if stress is None or metric_mds:  # metric: the stress against the dissimilarities
            D_host = np.asarray(D_all, dtype=np.float64)
            stress = (cf.normalized_stress if normalized else cf.raw_stress)(D_host, embedding)
        else:
            stress = stress[1] if normalized else stress[0]
        positive = int((eigenvalues > 1e-12 * max(abs(eigenvalues).max(), 1e-300)).sum())
        if positive < K and algorithm == "classical":
            warnings.warn(
                f"Only {positive} of the {K} requested eigenvalues of the double-centred "
                "matrix are positive (the dissimilarities are not Euclidean in that many "
                "dimensions); the remaining coordinates are zero",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        self.eigenvalues_ = eigenvalues
        self.embedding_ = np.asarray(embedding)
        self.stress_ = float(stress)
        self.n_iter_ = n_iter
        self.landmarks_ = landmarks
        self.landmark_mean_squared_distances_ = mean_squared
        self.X_offset_ = offset
        self.X_fit_ = X.copy()
        self.eigen_solver_ = solver
        self.n_components_ = K

    def _smacof(self, D_all, classical, init, metric_mds, mean_squared, K, rng):
        """The SMACOF runs: (embedding, n_iter, (raw, stress-1) or None) of the best."""
        n = classical.shape[0]
        if init is not None:
            starts = [init]
        elif self.init == "random":
            scale = float(np.sqrt(np.mean(mean_squared) / 2.0 / K)) or 1.0
            starts = [scale * rng.standard_normal((n, K)) for _ in range(self.n_init)]
        else:
            starts = [classical]
        best = None
        for start in starts:
            if metric_mds:
                result = call(
                    cf.smacof,
                    n * n,
                    D_all,
                    jnp.asarray(start),
                    float(self.eps),
                    max_iter=int(self.max_iter),
                )
                run = (
                    to_numpy(result.embedding),
                    int(result.n_iter),
                    None,
                    float(result.raw_stress),
                    bool(result.converged),
                )
            else:
                Y, raw, stress_1, it, converged = cf.nonmetric_smacof(
                    np.asarray(D_all, dtype=np.float64), start, float(self.eps), int(self.max_iter)
                )
                run = (Y, it, (raw, stress_1), stress_1, converged)
            if best is None or run[3] < best[3]:
                best = run
        if not best[4]:
            warn_not_converged(self, "SMACOF", tol="eps")
        return best[0], best[1], best[2]

    def transform(self, X):
        """Place new points in the fitted configuration (de Silva & Tenenbaum's landmark
        formula).

        X: new data (n_samples, n_features), or with ``metric="precomputed"`` their
        distances (not squared) to the training points, (n_samples, n_training_samples).
        For the training points themselves this returns ``embedding_`` (for a classical
        fit; for a SMACOF fit the least-squares placement given the SMACOF
        configuration).  Not available after non-metric MDS (a ValueError).
        """
        check_is_fitted(self)
        _, metric_mds, metric = self._resolved(warn=False)
        if not metric_mds:
            raise ValueError(
                "transform is not available after non-metric MDS (metric_mds=False): its "
                "configuration fits only the order of the dissimilarities, at a normalised "
                "scale, so the landmark formula (which reads distances) does not apply"
            )
        X = check_data(self, X, reset=False, allow_nan=False)
        landmarks = self.landmarks_
        projection = np.linalg.pinv(self.embedding_[landmarks]).T
        column_means = -0.5 * self.landmark_mean_squared_distances_
        with self._precision():
            if not (isinstance(metric, str) and metric == "euclidean"):
                if metric == "precomputed":
                    if (X < 0).any():
                        raise ValueError(
                            f"The distances in X must be non-negative (smallest {X.min():.3g})"
                        )
                else:
                    X = self._distances(X, self.X_fit_, metric)
                return to_numpy(
                    map_rows(
                        cf.landmark_transform,
                        X[:, landmarks] ** 2,
                        jnp.asarray(column_means),
                        jnp.asarray(projection),
                    )
                )
            return to_numpy(
                map_rows(
                    cf.landmark_transform_data,
                    X - self.X_offset_,
                    jnp.asarray(self.X_fit_[landmarks] - self.X_offset_),
                    jnp.asarray(column_means),
                    jnp.asarray(projection),
                    work_per_row=len(landmarks),
                )
            )
