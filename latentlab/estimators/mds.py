"""``latentlab.MDS``: classical metric multidimensional scaling with an out-of-sample
``transform``, and optional SMACOF refinement."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._settings import Dtype, Integer, Options, RandomState, Real
from latentlab._validation import check_data, check_n_components, check_symmetric
from latentlab.closed_form import mds as cf
from latentlab.closed_form.eigensolvers import solver_threads
from latentlab.estimators._dispatch import call, map_rows, to_device
from latentlab.estimators._embedding import FitsEmbedding, PairwiseWhenPrecomputed
from latentlab.estimators.base import (
    LATENTLAB_FILES,
    LatentEstimator,
    jax_key,
    to_numpy,
    warn_not_converged,
)
from latentlab.estimators.kernel_pca import LANCZOS_MIN_SAMPLES, lanczos_settings

__all__ = ["MDS", "check_distance_matrix"]

METRICS = ("classical", "smacof")
DISSIMILARITIES = ("euclidean", "precomputed")
INITS = ("classical", "random")
EIGEN_SOLVERS = ("auto", "dense", "lanczos")


def check_distance_matrix(D: np.ndarray, who: str = "X") -> np.ndarray:
    """A square, symmetric, non-negative dissimilarity matrix with a zero diagonal, or a
    ValueError naming what is wrong.  Returns its exactly symmetric part."""
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(
            f"dissimilarity='precomputed' needs a square (n_samples, n_samples) distance "
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


class MDS(
    FitsEmbedding,
    PairwiseWhenPrecomputed,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    LatentEstimator,
):
    """Metric multidimensional scaling: classical (Torgerson) MDS, computed by
    jit-compiled JAX in float64, with an out-of-sample ``transform``.

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
    the start and has no ``transform``.  Here ``metric="classical"`` (the default) is
    the closed-form eigen-solution (scikit-learn's ``ClassicalMDS``), optimal for the
    strain ``||B - Y Y^T||_F`` and the exact answer when the distances are Euclidean;
    ``metric="smacof"`` then refines it by SMACOF (unit weights, metric stress), which
    can only lower the raw stress and helps for non-Euclidean dissimilarities.

    Parameters
    ----------
    n_components : int, default=2
        Dimension of the configuration, at most the number of (landmark) points.
    metric : {"classical", "smacof"}, default="classical"
        The fitting criterion (not a distance metric, unlike scikit-learn >= 1.8's
        ``metric``, which is our ``dissimilarity``): the closed-form classical
        solution, or SMACOF minimisation of the raw stress ``sum_{i<j} (d_ij -
        ||y_i - y_j||)^2`` started from ``init``.
    dissimilarity : {"euclidean", "precomputed"}, default="euclidean"
        ``"euclidean"``: ``fit`` takes data (n_samples, n_features) and ``transform``
        new data.  ``"precomputed"``: ``fit`` takes the (n, n) matrix of distances (not
        squared) and ``transform`` the (m, n) distances of new points to the training
        points.
    n_landmarks : int or None, default=None
        Landmark MDS (de Silva & Tenenbaum 2004): classical MDS of ``n_landmarks``
        points drawn at random (``random_state``), the other points placed by the
        landmark formula; O(n m) instead of O(n^2) eigen-work.  None: every point.
        Only with ``metric="classical"``.
    init : {"classical", "random"}, default="classical"
        Start of SMACOF (``metric="smacof"`` only): the classical solution, or standard
        normal coordinates scaled to the dissimilarities (``random_state``).
    max_iter : int, default=300
        SMACOF iterations (Guttman transforms).
    eps : float, default=1e-6
        SMACOF stops when the raw stress falls by less than this fraction.
    eigen_solver : {"auto", "dense", "lanczos"}, default="auto"
        As in :class:`latentlab.KernelPCA`: "auto" takes block Lanczos for more than
        500 (landmark) points, with a dense fallback.
    random_state : int, RandomState or None, default=None
        Landmarks, the Lanczos start and the random SMACOF start.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
        The configuration, centred.
    eigenvalues_ : ndarray (n_components,)
        Top eigenvalues of ``B`` (of the landmarks' B for landmark MDS), decreasing;
        negative ones (non-Euclidean dissimilarities) give zero coordinates.
    stress_ : float
        Kruskal's stress-1 of ``embedding_`` against the dissimilarities,
        ``sqrt(sum (d_ij - ||y_i - y_j||)^2 / sum d_ij^2)`` over all pairs: 0 for a
        perfect fit.  (scikit-learn's ``stress_`` is the raw stress, or stress-1 with
        ``normalized_stress``.)
    landmarks_ : ndarray of int (n_landmarks,)
        Indices of the landmark points in the training data.
    landmark_mean_squared_distances_ : ndarray (n_landmarks,)
        ``delta_mu``: each landmark's mean squared distance to the landmarks.
    X_fit_ : ndarray (n_samples, n_features)
        The training data (``dissimilarity="euclidean"`` only), for ``transform``.
    X_offset_ : ndarray (n_features,)
        Training mean, subtracted before squared distances are formed so that they do
        not cancel for data far from the origin.
    n_iter_ : int
        SMACOF iterations run (0 for classical).
    n_components_, n_features_in_ : int

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(50, 4))
    >>> mds = latentlab.MDS(n_components=2).fit(X)
    >>> np.allclose(mds.transform(X), mds.embedding_)
    True
    """

    _pairwise_setting = "dissimilarity"
    _settings = {
        "n_components": Integer(),  # its range depends on the data
        "metric": Options(
            *METRICS,
            hints={
                d: "latentlab's metric chooses the criterion; for a distance, "
                f"use dissimilarity={d!r}"
                for d in DISSIMILARITIES
            },
        ),
        "dissimilarity": Options(*DISSIMILARITIES),
        "n_landmarks": Integer(2, None) | None,  # at most n_samples: checked with the data
        "init": Options(*INITS),
        "max_iter": Integer(1, None),
        "eps": Real(0, None),
        "eigen_solver": Options(*EIGEN_SOLVERS),
        "random_state": RandomState(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_components=2,
        *,
        metric="classical",
        dissimilarity="euclidean",
        n_landmarks=None,
        init="classical",
        max_iter=300,
        eps=1e-6,
        eigen_solver="auto",
        random_state=None,
        dtype="float64",
    ):
        self.n_components = n_components
        self.metric = metric
        self.dissimilarity = dissimilarity
        self.n_landmarks = n_landmarks
        self.init = init
        self.max_iter = max_iter
        self.eps = eps
        self.eigen_solver = eigen_solver
        self.random_state = random_state
        self.dtype = dtype

    def _check_settings(self):
        """Settings that depend on each other (the table is checked on entry to fit)."""
        if self.metric == "smacof" and self.n_landmarks is not None:
            raise ValueError("n_landmarks is only available with metric='classical'")

    def _fit(self, X):
        self._check_settings()
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n = X.shape[0]
        precomputed = self.dissimilarity == "precomputed"
        if precomputed:
            D = check_distance_matrix(X.copy())
            offset = np.zeros(X.shape[1])
        else:
            offset = X.mean(axis=0)
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
        solver = self.eigen_solver
        precision = np.float32 if self.dtype == "float32" else np.float64
        lanczos = lanczos_settings(m, K, precision)
        if solver == "auto":
            solver = "lanczos" if m > LANCZOS_MIN_SAMPLES and lanczos is not None else "dense"
        if solver == "lanczos" and lanczos is None:
            solver = "dense"
        key = jax_key(rng)
        with self._precision():
            if precomputed:
                D2_all = jnp.asarray(D) ** 2
            else:
                D2_all = call(cf.pairwise_squared_distances, n * n, to_device(X - offset))
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
            D_all = jnp.asarray(D) if precomputed else jnp.sqrt(D2_all)
            n_iter = 0
            if self.metric == "smacof":
                if self.init == "random":
                    scale = float(np.sqrt(np.mean(mean_squared) / 2.0 / K)) or 1.0
                    start = scale * rng.standard_normal((n, K))
                else:
                    start = embedding
                result = call(
                    cf.smacof,
                    n * n,
                    D_all,
                    jnp.asarray(start),
                    float(self.eps),
                    max_iter=int(self.max_iter),
                )
                embedding = to_numpy(result.embedding)
                n_iter = int(result.n_iter)
                if not bool(result.converged):
                    warn_not_converged(self, "SMACOF", tol="eps")
            stress = float(cf.kruskal_stress(D_all, jnp.asarray(embedding)))
        positive = int((eigenvalues > 1e-12 * max(abs(eigenvalues).max(), 1e-300)).sum())
        if positive < K and self.metric == "classical":
            warnings.warn(
                f"Only {positive} of the {K} requested eigenvalues of the double-centred "
                "matrix are positive (the dissimilarities are not Euclidean in that many "
                "dimensions); the remaining coordinates are zero",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        self.eigenvalues_ = eigenvalues
        self.embedding_ = embedding
        self.stress_ = stress
        self.n_iter_ = n_iter
        self.landmarks_ = landmarks
        self.landmark_mean_squared_distances_ = mean_squared
        self.X_offset_ = offset
        if not precomputed:
            self.X_fit_ = X.copy()
        self.eigen_solver_ = solver
        self.n_components_ = K

    def transform(self, X):
        """Place new points in the fitted configuration (de Silva & Tenenbaum's landmark
        formula).

        X: new data (n_samples, n_features), or with ``dissimilarity="precomputed"`` their
        distances (not squared) to the training points, (n_samples, n_training_samples).
        For the training points themselves this returns ``embedding_`` (for a classical
        fit; for a SMACOF fit the least-squares placement given the SMACOF
        configuration).
        """
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        landmarks = self.landmarks_
        projection = np.linalg.pinv(self.embedding_[landmarks]).T
        column_means = -0.5 * self.landmark_mean_squared_distances_
        with self._precision():
            if self.dissimilarity == "precomputed":
                if (X < 0).any():
                    raise ValueError(
                        f"The distances in X must be non-negative (smallest {X.min():.3g})"
                    )
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
