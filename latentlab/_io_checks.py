"""What a model restored by :func:`latentlab.load` must satisfy before it is returned:
every fitted count a non-negative integer, every fitted float finite, and per class
the shapes (consistent with each other) and constraints (variances positive,
probabilities on the simplex, Cholesky factors lower-triangular) of its parameters."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["_Corrupt", "_check_fitted_values"]


class _Corrupt(ValueError):
    """A problem found while parsing; ``load`` adds the file name."""


# -- checks on restored fitted values --------------------------------------------------

# attribute -> (shape, constraint).  Shape letters: d = n_features_in_, K =
# n_components_, t = n_targets_; other letters must agree wherever they appear.
# Constraints: "real", "nonneg", "positive", "simplex" (last axis), "cholesky".
_SPECS = {
    "PCA": {
        "mean_": ("d", "real"),
        "components_": ("Kd", "real"),
        "singular_values_": ("K", "nonneg"),
        "explained_variance_": ("K", "nonneg"),
        "explained_variance_ratio_": ("K", "nonneg"),
        "noise_variance_": ("", "nonneg"),
    },
    "PPCA": {
        "params_/W": ("dK", "real"),
        "params_/mu": ("d", "real"),
        "params_/sigma2": ("", "positive"),
    },
    "BayesianPCA": {
        "params_/W": ("dK", "real"),
        "params_/mu": ("d", "real"),
        "params_/sigma2": ("", "positive"),
        "params_/alpha": ("K", "positive"),
    },
    "FactorAnalysis": {
        "params_/W": ("dK", "real"),
        "params_/mu": ("d", "real"),
        "params_/psi": ("d", "positive"),
    },
    "SupervisedPCA": {
        "params_/W_x": ("dK", "real"),
        "params_/W_y": ("tK", "real"),
        "params_/mu_x": ("d", "real"),
        "params_/mu_y": ("t", "real"),
        "params_/sigma2_x": ("", "positive"),
        "params_/sigma2_y": ("", "positive"),
    },
    "GaussianMixture": {
        "params_/weights": ("K", "simplex"),
        "params_/means": ("Kd", "real"),
    },
    "PLSA": {
        "params_/theta": ("DK", "simplex"),
        "params_/phi": ("Kd", "simplex"),
        "doc_lengths_": ("D", "nonneg"),
    },
}
_GMM_SCALE = {"full": "Kdd", "tied": "dd", "diag": "Kd", "spherical": "K"}
_SYMBOLS = {"d": "n_features_in_", "K": "n_components_", "t": "n_targets_"}


def _lookup(estimator, name):
    attr, _, site = name.partition("/")
    value = getattr(estimator, attr, None)
    if site:
        value = value.get(site) if isinstance(value, dict) else None
    return value


def _check_fitted_values(estimator, class_name, names) -> None:
    for name in names:
        value = getattr(estimator, name)
        if name.startswith("n_") and name.endswith("_") and not isinstance(value, bool):
            # counts per component (PLS n_iter_) are integer arrays
            if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
                valid = bool(np.all(value >= 0))
            else:
                valid = isinstance(value, int) and value >= 0
            if not valid:
                raise _Corrupt(f"{name} must be a non-negative integer, got {value!r}")
        values = value.values() if isinstance(value, dict) else [value]
        for v in values:
            if isinstance(v, float) or (isinstance(v, np.ndarray) and v.dtype.kind == "f"):
                if not np.all(np.isfinite(v)):
                    raise _Corrupt(f"fitted attribute {name} is not finite")
    spec = dict(_SPECS.get(class_name, {}))
    if class_name == "GaussianMixture":
        kind = estimator.covariance_type
        if kind not in _GMM_SCALE:
            raise _Corrupt(f"unknown covariance_type {kind!r}")
        spec["params_/scale"] = (
            _GMM_SCALE[kind],
            "cholesky" if kind in ("full", "tied") else "positive",
        )
    sizes = {}
    for letter, attr in _SYMBOLS.items():
        size = getattr(estimator, attr, None)
        if isinstance(size, numbers.Integral):
            sizes[letter] = int(size)
    for name, (letters, constraint) in spec.items():
        value = _lookup(estimator, name)
        if value is None:
            raise _Corrupt(f"fitted attribute {name} is missing")
        value = np.asarray(value)
        if value.ndim != len(letters):
            raise _Corrupt(f"{name} has shape {value.shape}; expected {len(letters)} dimensions")
        for letter, size in zip(letters, value.shape, strict=True):
            if sizes.setdefault(letter, size) != size:
                raise _Corrupt(
                    f"{name} has shape {value.shape}, inconsistent with the other fitted "
                    f"attributes ({letter} = {sizes[letter]})"
                )
        _check_constraint(name, value, constraint)
    hook = getattr(estimator, "_validate_loaded", None)
    if hook is not None:
        hook()


def _check_constraint(name, value, constraint) -> None:
    if constraint == "nonneg" and not np.all(value >= 0):
        raise _Corrupt(f"{name} must be >= 0")
    if constraint == "positive" and not np.all(value > 0):
        raise _Corrupt(f"{name} must be > 0 (a variance or precision)")
    if constraint == "simplex":
        if not (np.all(value >= 0) and np.allclose(value.sum(axis=-1), 1.0, rtol=0, atol=1e-5)):
            raise _Corrupt(f"{name} must hold probabilities summing to 1")
    if constraint == "cholesky":
        diagonal = np.diagonal(value, axis1=-2, axis2=-1)
        if not (np.all(diagonal > 0) and np.allclose(value, np.tril(value))):
            raise _Corrupt(f"{name} must be lower-triangular with a positive diagonal")
