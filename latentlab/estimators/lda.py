"""``latentlab.LinearDiscriminantAnalysis``: Fisher's discriminant, as a classifier and
a supervised projection."""

from __future__ import annotations

import abc
import warnings

import jax.numpy as jnp
import numpy as np
from scipy.special import expit, log_expit, log_softmax
from sklearn.base import (
    ClassifierMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    clone,
)
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from latentlab._settings import ArrayLike, Boolean, Dtype, InstanceOf, Integer, Options, Real
from latentlab._validation import check_data, check_n_components, kept_float_dtype
from latentlab.closed_form import lda as cf
from latentlab.estimators._dispatch import call, map_rows, to_device
from latentlab.estimators.base import LATENTLAB_FILES, LatentEstimator, check_finite_fit, to_numpy

__all__ = ["LinearDiscriminantAnalysis"]

# the fitted arrays that take float32 where the training data were float32
_FLOAT_ATTRIBUTES = (
    "coef_",
    "intercept_",
    "means_",
    "xbar_",
    "scalings_",
    "explained_variance_ratio_",
    "covariance_",
)


class _CovarianceEstimator(abc.ABC):  # noqa: B024 (only an isinstance test)
    """isinstance(obj, _CovarianceEstimator): obj's class has a ``fit`` method (a
    scikit-learn covariance estimator or any object fitted the same way)."""

    @classmethod
    def __subclasshook__(cls, C):
        return True if callable(getattr(C, "fit", None)) else NotImplemented


class LinearDiscriminantAnalysis(
    ClassNamePrefixFeaturesOutMixin, ClassifierMixin, TransformerMixin, LatentEstimator
):
    """Linear discriminant analysis (Fisher 1936, Rao 1948), jit-compiled JAX in float64.

    A classifier with Gaussian classes that share one covariance (the Bayes rule is
    linear), and a supervised projection onto the directions that maximise between-
    over within-class variance (the generalised eigenproblem ``S_b w = lambda S_w w``).
    Same parameters, attributes and predictions as scikit-learn's
    ``LinearDiscriminantAnalysis``.

    Parameters
    ----------
    solver : {"svd", "eigen", "lsqr"}, default="svd"
        ``"svd"``: whiten the within-class scatter, then principal axes of the class
        means; handles collinear features (directions with standardised within-class
        spread below ``tol`` are dropped) and needs no shrinkage (refused with it).
        ``"eigen"``: generalised eigenproblem by Cholesky of the (possibly shrunk)
        within-class covariance, which must then be positive definite.  ``"lsqr"``:
        the classifier only, ``coef_ = S_w^{-1} means`` by least squares; no
        ``transform``.
    shrinkage : None, "auto" or float in [0, 1], default=None
        For "eigen" and "lsqr": each covariance S becomes ``(1 - a) S + a tr(S)/d I``,
        with ``a`` the given float or, for "auto", the Ledoit & Wolf (2004) estimate on
        standardised features (per class, and for the total covariance).
    priors : array of shape (n_classes,) or None, default=None
        Class priors; None takes the class frequencies.  Priors that do not sum to one
        are renormalised with a warning.
    covariance_estimator : scikit-learn covariance estimator or None, default=None
        For "eigen" and "lsqr" (refused with "svd" and with ``shrinkage``): each class
        covariance is the ``covariance_`` of a clone of it fitted to the class's rows
        (on the host), weighted by the priors; "eigen" also takes the total
        covariance from it on all of X.  A scikit-learn estimator with ``fit`` and a ``covariance_``
        attribute (``sklearn.covariance.OAS()``, ``LedoitWolf()``, ...; or any object
        with a ``fit`` method setting ``covariance_``).  None: the empirical
        covariances, shrunk as ``shrinkage`` says.
    n_components : int or None, default=None
        Dimension of ``transform``'s output, ``1 <= n_components <= min(n_classes - 1,
        n_features)``; None keeps that maximum.
    store_covariance : bool, default=False
        Compute ``covariance_`` with the "svd" solver (the others always do).
    tol : float, default=1e-4
        "svd": rank threshold on the standardised within-class singular values, and
        (relative) on the between-class ones.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    priors_ : ndarray (n_classes,)
    means_ : ndarray (n_classes, n_features)
    xbar_ : ndarray (n_features,)
        Prior-weighted mean of the class means; ``transform`` centres at it.
    scalings_ : ndarray (n_features, rank)
        Discriminant directions: "svd" keeps the ``rank <= n_classes - 1`` meaningful
        ones, scaled so that the within-class covariance is white along them; "eigen"
        all ``n_features`` generalised eigenvectors (unit ``S_w``-norm), by decreasing
        eigenvalue.  The largest-magnitude entry of each column is positive.
    explained_variance_ratio_ : ndarray (n_components_,)
        Share of the between-class variance along each kept direction ("eigen": of the
        sum of all generalised eigenvalues, as scikit-learn).
    coef_ : ndarray (n_classes, n_features), or (1, n_features) for two classes
    intercept_ : ndarray (n_classes,), or (1,) for two classes
        ``decision_function(X) = X @ coef_.T + intercept_``; for two classes the
        difference of class 1 and class 0, as scikit-learn.
    covariance_ : ndarray (n_features, n_features)
        Prior-weighted within-class covariance (ddof=0, shrunk if asked); "svd" only
        with ``store_covariance=True``.
    n_components_, n_features_in_ : int

    Notes
    -----
    ``transform`` returns ``(X - xbar_) @ scalings_[:, :n_components_]`` for both
    solvers.  scikit-learn centres at ``xbar_`` for "svd" only; its "eigen" transform
    is ours plus the constant row ``xbar_ @ scalings_`` (where the origin happens to
    project).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> import latentlab
    >>> X, y = load_iris(return_X_y=True)
    >>> lda = latentlab.LinearDiscriminantAnalysis().fit(X, y)
    >>> lda.explained_variance_ratio_.round(4)
    array([0.9912, 0.0088])
    """

    _settings = {
        "solver": Options(*cf.SOLVERS),
        "shrinkage": Real(0, 1, verb="lie") | None | "auto",
        "priors": ArrayLike() | None,
        "n_components": Integer() | None,  # its range depends on the data
        "covariance_estimator": None
        | InstanceOf(_CovarianceEstimator, "a covariance estimator (with fit)"),
        "store_covariance": Boolean(),
        "tol": Real(0, None),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        solver="svd",
        shrinkage=None,
        priors=None,
        n_components=None,
        store_covariance=False,
        tol=1e-4,
        covariance_estimator=None,
        dtype="float64",
    ):
        self.covariance_estimator = covariance_estimator
        self.solver = solver
        self.shrinkage = shrinkage
        self.priors = priors
        self.n_components = n_components
        self.store_covariance = store_covariance
        self.tol = tol
        self.dtype = dtype

    def _shrinkage_mode(self):
        shrinkage = self.shrinkage
        estimator = self.covariance_estimator
        if estimator is not None:
            if shrinkage is not None:
                raise ValueError(
                    "covariance_estimator and shrinkage are both set; give only one of them"
                )
            if self.solver == "svd":
                raise ValueError(
                    "covariance_estimator is not available with solver='svd'; use "
                    "solver='eigen' or 'lsqr'"
                )
            if not hasattr(estimator, "fit"):
                raise ValueError(
                    f"covariance_estimator must have a fit method and a covariance_ "
                    f"attribute (a scikit-learn covariance estimator), got {estimator!r}"
                )
            return "estimator", 0.0
        if shrinkage is None:
            return "none", 0.0
        mode, alpha = ("auto", 0.0) if shrinkage == "auto" else ("fixed", float(shrinkage))
        if self.solver == "svd":
            raise ValueError(
                "shrinkage is not available with solver='svd'; use solver='eigen' or 'lsqr'"
            )
        return mode, alpha

    def _priors(self, counts):
        if self.priors is None:
            return counts / counts.sum()
        priors = np.asarray(self.priors, dtype=np.float64).reshape(-1)
        if priors.shape != counts.shape:
            raise ValueError(f"priors has {priors.size} entries but y has {counts.size} classes")
        if not np.isfinite(priors).all() or (priors < 0).any():
            raise ValueError(f"priors must be non-negative and finite, got {priors}")
        if (priors == 0).any():
            raise ValueError(
                f"priors must be positive: a class with prior 0 can never be predicted "
                f"(got {priors})"
            )
        if not np.isclose(priors.sum(), 1.0):
            warnings.warn(
                "The priors do not sum to 1. Renormalizing",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
            priors = priors / priors.sum()
        return priors

    def _estimated_covariances(self, X, labels, n_classes, priors):
        """(Sw, St) from ``covariance_estimator``: the prior-weighted class covariances
        and ("eigen") the total covariance, each fitted by a clone of it."""

        def covariance(rows):
            fitted = clone(self.covariance_estimator, safe=False)
            fitted.fit(rows)  # its covariance_ after fit (fit need not return self)
            S = np.atleast_2d(np.asarray(getattr(fitted, "covariance_", None), dtype=float))
            if S.shape != (X.shape[1], X.shape[1]) or not np.all(np.isfinite(S)):
                raise ValueError(
                    "covariance_estimator.covariance_ after fit(X) must be a finite "
                    f"(n_features, n_features) = {(X.shape[1],) * 2} array, got "
                    f"{getattr(fitted, 'covariance_', None)!r:.80}"
                )
            return S

        Sw = sum(priors[k] * covariance(X[labels == k]) for k in range(n_classes))
        St = covariance(X) if self.solver == "eigen" else Sw
        return Sw, St

    def fit(self, X, y):
        """Fit to X (n_samples, n_features) and class labels y (n_samples,)."""
        mode, alpha = self._shrinkage_mode()
        # float32 data get float32 coefficients and outputs (as scikit-learn), computed
        # at this estimator's dtype and rounded once at the end
        float32 = kept_float_dtype(X) == np.float32
        X = check_data(self, X, reset=True, allow_nan=False)
        if y is None:
            raise ValueError(
                "LinearDiscriminantAnalysis requires y to be passed, but the target y is None"
            )
        y = column_or_1d(np.asarray(y), warn=True)
        if len(y) != X.shape[0]:
            raise ValueError(
                f"X and y have different numbers of samples: X has {X.shape[0]}, y has {len(y)}"
            )
        check_classification_targets(y)
        classes, labels = np.unique(y, return_inverse=True)
        n, d = X.shape
        C = len(classes)
        if C < 2:
            raise ValueError(
                f"y has only one class ({classes[0]!r}); discriminant analysis needs at least 2"
            )
        if n <= C:
            raise ValueError(
                "The number of samples must be more than the number of classes: got "
                f"{n} samples and {C} classes, which leaves no within-class spread to "
                "estimate"
            )
        counts = np.bincount(labels, minlength=C).astype(np.float64)
        priors = self._priors(counts)
        high = min(C - 1, d)
        K = high if self.n_components is None else self.n_components
        if isinstance(K, (int, np.integer)) and not isinstance(K, bool) and K > high:
            raise ValueError(
                f"n_components cannot be larger than min(n_features, n_classes - 1) = "
                f"{high}: n_components={K} is out of range (the class means span at most "
                "n_classes - 1 directions); reduce n_components"
            )
        K = check_n_components(K, 1, high, "min(n_classes - 1, n_features)")
        # every class covariance is needed for per-class Ledoit-Wolf shrinkage and for
        # priors that differ from the class frequencies; else one pooled Gram serves
        per_class = self.solver != "svd" and (
            mode == "auto" or not np.array_equal(priors, counts / counts.sum())
        )
        with self._precision():
            # "eigen"/"lsqr": the moments of X on the host (cf.pooled_moments, one Gram
            # product; cf.class_moments), the d x d algebra after them in JAX
            if self.solver == "svd":
                fit = call(
                    cf.fit_lda_svd,
                    X.size,
                    to_device(X),
                    jnp.asarray(labels),
                    jnp.asarray(priors),
                    float(self.tol),
                    n_classes=C,
                    store_covariance=bool(self.store_covariance),
                )
            elif mode == "estimator":
                means = cf.pooled_moments(X, labels, C)[1]
                Sw, St = self._estimated_covariances(X, labels, C, priors)
                fit = call(
                    cf.fit_lda_covariances,
                    d * d,
                    *map(jnp.asarray, (means, counts, Sw, St, priors)),
                    solver=self.solver,
                )
            elif per_class:
                auto = mode == "auto"
                _, means, covariances, fourth, total_fourth = cf.class_moments(
                    X, labels, C, auto, auto and self.solver == "eigen"
                )
                fit = call(
                    cf.fit_lda_classes,
                    C * d * d,
                    *map(jnp.asarray, (means, counts, covariances, fourth, total_fourth, priors)),
                    alpha,
                    solver=self.solver,
                    shrinkage_mode=mode,
                )
            else:
                _, means, pooled = cf.pooled_moments(X, labels, C)
                fit = call(
                    cf.fit_lda_pooled,
                    d * d,
                    *map(jnp.asarray, (means, counts, pooled, priors)),
                    alpha,
                    solver=self.solver,
                    shrinkage_mode=mode,
                )
            fit = {name: to_numpy(value) for name, value in fit._asdict().items()}
        if not fit["ok"]:
            raise ValueError(
                "The within-class covariance is singular (collinear or constant features), "
                "so solver='eigen' cannot whiten it: use shrinkage='auto' or a float, or "
                "solver='svd'"
            )
        check_finite_fit(
            self,
            {"coef_": fit["coef"], "intercept_": fit["intercept"]},
            "the within-class covariance is singular; use shrinkage, or solver='svd'",
        )
        self.classes_ = classes
        self.priors_ = priors
        self.means_ = fit["means"]
        self.xbar_ = fit["xbar"]
        if self.solver == "svd":
            rank = int(fit["rank"])
            self.scalings_ = fit["scalings"][:, :rank].copy()
            ratio = fit["eigenvalues"] / fit["eigenvalues"].sum()
            if int(fit["within_rank"]) < d:
                warnings.warn(
                    "Variables are collinear", UserWarning, skip_file_prefixes=LATENTLAB_FILES
                )
        elif self.solver == "eigen":
            self.scalings_ = fit["scalings"]
            ratio = fit["eigenvalues"] / fit["eigenvalues"].sum()
        else:
            ratio = None
        if ratio is not None:
            self.explained_variance_ratio_ = ratio[:K].copy()
        if self.solver != "svd" or self.store_covariance:
            self.covariance_ = fit["covariance"]
        coef, intercept = fit["coef"], fit["intercept"]
        if C == 2:  # one decision function: class 1 against class 0, as scikit-learn
            coef = (coef[1] - coef[0])[None, :]
            intercept = np.array([intercept[1] - intercept[0]])
        self.coef_ = coef
        self.intercept_ = intercept
        self.n_components_ = K
        if float32:
            for name in _FLOAT_ATTRIBUTES:
                if hasattr(self, name):
                    setattr(self, name, getattr(self, name).astype(np.float32))
        return self

    def _as_output(self, values):
        """Outputs in float32 where the fit's coefficients are (float32 training data)."""
        return values.astype(np.float32) if self.coef_.dtype == np.float32 else values

    @property
    def _n_features_out(self):
        return self.n_components_

    def transform(self, X):
        """Project X onto the discriminant directions: (n_samples, n_components_)."""
        check_is_fitted(self)
        if self.solver == "lsqr":
            raise NotImplementedError(
                "transform not implemented for 'lsqr' solver: it fits the classifier "
                "only; use solver='svd' or 'eigen'"
            )
        X = check_data(self, X, reset=False, allow_nan=False)
        K = min(self.n_components_, self.scalings_.shape[1])
        with self._precision():
            Z = to_numpy(
                map_rows(
                    cf.lda_transform,
                    X,
                    jnp.asarray(self.xbar_),
                    jnp.asarray(self.scalings_[:, :K]),
                )
            )
        return self._as_output(Z)

    def decision_function(self, X):
        """Linear discriminant scores (n_samples, n_classes); (n_samples,) for two classes
        (positive means class ``classes_[1]``)."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        with self._precision():
            scores = to_numpy(
                map_rows(cf.lda_decision, X, jnp.asarray(self.coef_), jnp.asarray(self.intercept_))
            )
        scores = self._as_output(scores)
        return scores[:, 0].copy() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """The class with the largest discriminant score (posterior probability)."""
        scores = self.decision_function(X)
        index = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes_[index]

    def predict_log_proba(self, X):
        """Log posterior class probabilities (n_samples, n_classes), by a stable
        log-softmax of the discriminant scores."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([log_expit(-scores), log_expit(scores)])
        return log_softmax(scores, axis=1)

    def predict_proba(self, X):
        """Posterior class probabilities (n_samples, n_classes)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = expit(scores)
            return np.column_stack([1.0 - p, p])
        return np.exp(log_softmax(scores, axis=1))
