"""Data in and out of :class:`~latentlab.impute.Imputer`.

Input validation (dense float64 with NaN for missing entries; DataFrames checked for
numeric columns by name), the per-column standardisation Imputer fits in, and results
shaped like the input: a DataFrame with the same index, columns and, for filled
values, dtypes, or an array (wrapped by ``set_output(transform="pandas")``).
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.utils.validation import validate_data

from latentlab._validation import InputTypeError, check_input_kind


def validate_input(estimator, X, *, reset: bool):
    """X as a float64 array (NaN = missing), and the DataFrame it came from (or None).

    ``reset`` records ``n_features_in_`` / ``feature_names_in_`` on ``estimator``
    (fit); otherwise X is checked against them.
    """
    frame = None
    if hasattr(X, "toarray") and hasattr(X, "nnz"):
        # sparse zeros are values, not missing entries: densify explicitly
        raise InputTypeError(
            "Imputer needs dense input with NaN for missing entries, got a sparse "
            "matrix; pass X.toarray() (a sparse zero is a value, not a gap)"
        )
    pandas = sys.modules.get("pandas")  # a DataFrame means pandas is imported already
    if pandas is not None and isinstance(X, pandas.DataFrame):
        from pandas.api.types import is_complex_dtype, is_numeric_dtype

        frame = X
        bad = [
            str(c) for c, t in X.dtypes.items() if not is_numeric_dtype(t) or is_complex_dtype(t)
        ]
        if bad:
            raise ValueError(
                f"Imputer needs numeric columns; non-numeric column(s): {bad}. "
                "Drop or encode them before imputing."
            )
    X = check_input_kind(X, allow_nan=True)  # masked entries are missing: NaN
    X = validate_data(
        estimator,
        X,
        reset=reset,
        dtype=np.float64,
        ensure_all_finite="allow-nan",
        ensure_min_samples=2 if reset else 1,
        ensure_min_features=2 if reset else 1,
    )
    return np.asarray(X, dtype=np.float64), frame


def standardization(X, standardize: bool):
    """``(center, scale)`` of each column: observed mean and standard deviation
    (scale 1 for a constant column), or zeros and ones when not ``standardize``."""
    if not standardize:
        return np.zeros(X.shape[1]), np.ones(X.shape[1])
    # Divide by each column's largest |x| before squaring: the fit is scale-
    # equivariant, so data near 1e200 (whose squares overflow) are rescaled here
    # instead of refused (the models themselves refuse them, see
    # latentlab._validation.check_magnitude).
    peak = np.nanmax(np.abs(X), axis=0)
    peak = np.where(peak > 0, peak, 1.0)
    center = np.nanmean(X / peak, axis=0) * peak
    scale = np.nanstd(X / peak, axis=0) * peak
    return center, np.where(scale > 0, scale, 1.0)  # constant column: leave its unit


def output(estimator, values, frame, observed, *, fill: bool = False, wrap: bool = False):
    """A DataFrame like ``frame`` (dtypes kept when ``fill``), else a NumPy array.

    ``wrap``: for array input, a DataFrame when ``estimator`` was set to pandas
    output (scikit-learn's ``set_output`` wraps only a transform's first result).
    """
    if frame is None:
        config = getattr(estimator, "_sklearn_output_config", {}).get("transform")
        if wrap and config == "pandas":
            import pandas as pd

            return pd.DataFrame(values, columns=estimator.get_feature_names_out())
        return values
    import pandas as pd

    if not fill:
        return pd.DataFrame(values, index=frame.index, columns=frame.columns)
    out = frame.copy()
    for j, (name, dtype) in enumerate(frame.dtypes.items()):
        if observed[:, j].all():
            continue  # untouched: same values, same dtype
        column = values[:, j]
        if pd.api.types.is_bool_dtype(dtype):
            column = np.clip(np.round(column), 0, 1)
        elif pd.api.types.is_integer_dtype(dtype):
            column = np.round(column)
        out.isetitem(j, pd.Series(column, index=frame.index, name=name).astype(dtype))
    return out
