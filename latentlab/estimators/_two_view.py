"""What the two-view estimators share (CCA, KernelCCA and the PLS family): validation
of the two views, the ``transform(X, Y)`` surface, linear scores, prediction through
``coef_``, and the checks of the ridge setting and of a loaded model's shapes.

Design rule: each estimator derives from the one family base
:class:`_TwoViewTransformer` (plus scikit-learn mixins); logic only some members share
is a module-level function (here, in :mod:`~latentlab.estimators.pls` or
:mod:`~latentlab.estimators.cca`) called from thin methods, not a mixin."""

from __future__ import annotations

import numbers

import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from latentlab._validation import (
    check_data,
    check_input_kind,
    check_magnitude,
    check_n_components,
    compute_dtype,
)
from latentlab.closed_form import cca as cf_cca
from latentlab.estimators._dispatch import map_rows
from latentlab.estimators.base import LatentEstimator, to_numpy

__all__ = [
    "_TwoViewTransformer",
    "_check_n_components",
    "_check_reg",
    "_check_shapes",
    "_check_linear_loaded",
]


def _check_n_components(estimator, n_components, high: int, why: str) -> int:
    """``n_components`` as an int in [1, high]; ``why`` names the bound ``high``.  Past
    it, the error starts with scikit-learn's wording ("`n_components` upper bound is
    ...")."""
    if (
        isinstance(n_components, (int, np.integer))
        and not isinstance(n_components, bool)
        and n_components > high
    ):
        raise ValueError(
            f"`n_components` upper bound is {high}. Got {n_components} instead. Reduce "
            f"`n_components`: {type(estimator).__name__} has at most {high} components "
            f"here ({why})"
        )
    return check_n_components(n_components, 1, high, why)


def _check_reg(reg, *, positive: bool, who: str):
    """``reg`` as a (reg_x, reg_y) pair of floats, each >= 0 (or > 0 when ``positive``)."""
    pair = reg if isinstance(reg, (tuple, list, np.ndarray)) else (reg, reg)
    if len(pair) != 2 or not all(
        isinstance(r, numbers.Real) and not isinstance(r, bool) and np.isfinite(r) for r in pair
    ):
        raise ValueError(f"reg must be a finite number or a pair (reg_x, reg_y), got {reg!r}")
    reg_x, reg_y = float(pair[0]), float(pair[1])
    if positive and not (reg_x > 0 and reg_y > 0):
        raise ValueError(
            f"{who} needs reg > 0 for both views, got reg={reg!r}: unregularized kernel CCA "
            "is degenerate (a full-rank Gram matrix, e.g. any RBF kernel, gives canonical "
            "correlation 1 for every direction)"
        )
    if reg_x < 0 or reg_y < 0:
        raise ValueError(f"reg must be >= 0 for both views, got reg={reg!r}")
    return reg_x, reg_y


def _check_shapes(estimator, expected):
    for name, shape in expected.items():
        if np.shape(getattr(estimator, name)) != shape:
            raise ValueError(f"{name} has shape {np.shape(getattr(estimator, name))}, not {shape}")


def _check_linear_loaded(estimator, more_shapes):
    """Checks on a linear two-view model restored by :func:`latentlab.load`: the shapes
    of the means, scales and weights, then of ``more_shapes`` (name -> shape), and
    positive scales."""
    p, q, k = estimator.n_features_in_, estimator.n_features_y_, estimator.n_components_
    expected = {"x_mean_": (p,), "y_mean_": (q,), "x_std_": (p,), "y_std_": (q,)}
    expected |= {"x_weights_": (p, k), "y_weights_": (q, k)}
    _check_shapes(estimator, expected | more_shapes)
    if not (np.all(estimator.x_std_ > 0) and np.all(estimator.y_std_ > 0)):
        raise ValueError("x_std_ and y_std_ must be positive")


def _regresses_through_coef(estimator) -> bool:
    # a class setting, not the fitted state: an unfitted CCA has predict (and raises
    # NotFittedError), a PLSSVD never has it
    return estimator._predicts_through_coef


class _TwoViewTransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """The family base: validation of the two views, the ``transform(X, Y)`` surface,
    and what most members share.

    ``transform`` is defined on a ``TransformerMixin`` subclass so that scikit-learn's
    ``set_output`` wraps it (it wraps only methods a subclass defines itself).

    The linear members (CCA and the PLS classes) score ``(V - mean) / std @
    projection`` with the fitted attributes named by ``_x_projection`` and
    ``_y_projection``; KernelCCA overrides ``_scores_x`` and ``_scores_y``.  Members
    that regress Y on X through ``coef_`` set ``_predicts_through_coef``, which gives
    them :meth:`predict` and :meth:`score`.
    """

    _x_projection, _y_projection = "x_weights_", "y_weights_"
    _predicts_through_coef = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    @property
    def _n_features_out(self):
        return self.n_components_

    def _views(self, X, Y, *, reset: bool, min_samples: int = 3):
        """X and Y (as 2-D float64) checked against each other and, unless ``reset``,
        against the fit; ``min_samples`` rows are needed at fit (fewer than 3 leave no
        spread to correlate)."""
        name = type(self).__name__
        if Y is None:
            raise ValueError(f"{name} requires y to be passed, but the target y is None")
        X = check_data(
            self, X, reset=reset, allow_nan=False, min_samples=min_samples if reset else 1
        )
        Y = check_input_kind(Y, "Y", allow_nan=False)
        Y = check_array(Y, dtype=np.float64, ensure_2d=False, input_name="Y")
        y_ndim = Y.ndim
        if Y.ndim == 1:
            Y = Y[:, None]
        if Y.ndim != 2:
            raise ValueError(f"Y must be 1-D or 2-D, got an array of shape {Y.shape}")
        check_magnitude(Y, "Y", dtype=compute_dtype(self), check_spread=reset)
        if X.shape[0] != Y.shape[0]:
            raise ValueError(
                f"X and Y must have the same number of rows (samples), got "
                f"{X.shape[0]} and {Y.shape[0]}"
            )
        if reset:
            self.n_features_y_ = Y.shape[1]
            self.y_ndim_ = int(y_ndim)
        elif Y.shape[1] != self.n_features_y_:
            raise ValueError(
                f"Y has {Y.shape[1]} features, but {name} was fitted with "
                f"{self.n_features_y_} Y features"
            )
        return X, np.asarray(Y, dtype=np.float64)

    def fit_transform(self, X, y=None):
        """Fit, then return the canonical scores: ``(x_scores, y_scores)``."""
        return self.fit(X, y).transform(X, y)

    def transform(self, X, Y=None, copy=True):
        """Canonical scores of X (n_samples, n_components_), and of Y when it is given.

        ``copy`` is accepted for scikit-learn compatibility: the inputs are never
        written into, whatever its value.
        """
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        if Y is None:
            with self._precision():
                return self._scores_x(X)
        X, Y = self._views(X, Y, reset=False)
        with self._precision():
            return self._scores_x(X), self._scores_y(Y)

    def _linear_scores(self, V, mean, std, projection):
        # centred in float64 on the host, before any cast to float32
        args = (std, getattr(self, projection))
        return to_numpy(map_rows(cf_cca.cca_transform, V - mean, *map(jnp.asarray, args)))

    def _scores_x(self, X):
        return self._linear_scores(X, self.x_mean_, self.x_std_, self._x_projection)

    def _scores_y(self, Y):
        return self._linear_scores(Y, self.y_mean_, self.y_std_, self._y_projection)

    @available_if(_regresses_through_coef)
    def predict(self, X, copy=True):
        """Predict Y from X: ``(X - x_mean_) @ coef_.T + intercept_``.

        For CCA, as scikit-learn's ``CCA.predict``: each canonical x variate times the
        regression of Y on its paired y variate, summed over the ``n_components_``
        pairs (so it is not in general the least-squares regression of Y on X); with
        ``reg > 0``, the same formula on the regularized directions.  For PLS, the PLS
        regression through the x scores.  Returns (n_samples,) when Y was 1-D at fit,
        else (n_samples, n_features_y).  ``copy`` is accepted for scikit-learn
        compatibility; X is never written into.
        """
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        Y = (X - self.x_mean_) @ self.coef_.T + self.intercept_
        return Y[:, 0].copy() if self.y_ndim_ == 1 else Y  # owns its data

    @available_if(_regresses_through_coef)
    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of :meth:`predict` (averaged uniformly over
        the Y columns), as scikit-learn's regressors."""
        # (the PLS regressors get the same from RegressorMixin, which comes first)
        from sklearn.metrics import r2_score

        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))
