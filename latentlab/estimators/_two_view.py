"""What the two-view estimators share (CCA, KernelCCA and the PLS family): validation
of the two views, the ``transform(X, Y)`` surface, prediction through ``coef_``, and
the checks of the ridge setting and of a loaded model's shapes."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted

from latentlab._validation import check_data, check_input_kind, check_magnitude, compute_dtype
from latentlab.estimators.base import LatentEstimator

__all__ = ["_TwoViewTransformer", "_PredictThroughCoef", "_check_reg", "_check_shapes"]


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


class _TwoViewTransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """Validation of the two views and the ``transform(X, Y)`` surface.

    ``transform`` is defined on a ``TransformerMixin`` subclass so that scikit-learn's
    ``set_output`` wraps it (it wraps only methods a subclass defines itself).
    """

    _min_fit_samples = 3  # fewer leaves no spread to correlate

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    @property
    def _n_features_out(self):
        return self.n_components_

    def _views(self, X, Y, *, reset: bool):
        name = type(self).__name__
        if Y is None:
            raise ValueError(f"{name} requires y to be passed, but the target y is None")
        min_samples = self._min_fit_samples if reset else 1
        X = check_data(self, X, reset=reset, allow_nan=False, min_samples=min_samples)
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


class _PredictThroughCoef:
    """``predict`` and ``score`` of the two-view estimators that regress Y on X through
    their scores (CCA, PLS): ``(X - x_mean_) @ coef_.T + intercept_``."""

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

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of :meth:`predict` (averaged uniformly over
        the Y columns), as scikit-learn's regressors."""
        from sklearn.metrics import r2_score

        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))
