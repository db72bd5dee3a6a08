"""Input checks shared by every estimator: one place, one wording."""

from __future__ import annotations

import sys

import numpy as np
from sklearn.utils.validation import validate_data

__all__ = [
    "InputTypeError",
    "check_data",
    "check_dense_numeric",
    "check_magnitude",
    "check_n_components",
    "check_option",
    "check_no_empty_rows",
    "check_no_empty_columns",
    "check_level",
    "check_positive_int",
    "check_start_array",
]


def check_option(name: str, value, allowed) -> None:
    if value not in allowed:
        expected = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"Unknown {name}={value!r}; expected one of {expected}")


class InputTypeError(ValueError, TypeError):
    """Input of a kind an estimator cannot take (sparse matrix, dates, ...).

    A ``ValueError`` as the design asks of bad input, and a ``TypeError`` for code
    written against scikit-learn's validation, which raises that for these cases.
    """


def _date_columns(X) -> list[str]:
    """Names of a DataFrame's date, time-span and period columns.

    NumPy cannot cast these to float (``DTypePromotionError``).  Other columns are
    left to scikit-learn: numbers stored as object or category convert, and text
    fails with a ``ValueError`` quoting the value.
    """
    pandas = sys.modules.get("pandas")  # a DataFrame means pandas is imported already
    if pandas is None or not isinstance(X, pandas.DataFrame):
        return []
    from pandas.api.types import is_datetime64_any_dtype, is_timedelta64_dtype

    return [
        str(c)
        for c, t in X.dtypes.items()
        if is_datetime64_any_dtype(t)
        or is_timedelta64_dtype(t)
        or isinstance(t, pandas.PeriodDtype)
    ]


def check_dense_numeric(X, who: str = "X") -> None:
    """Refuse sparse matrices, and DataFrame columns of dates, by name.

    scikit-learn's own checks fail on these later with a ``TypeError`` (or NumPy's
    ``DTypePromotionError`` for dates) that does not say which column is the problem.
    """
    if hasattr(X, "toarray") and hasattr(X, "nnz"):  # scipy.sparse matrix or array
        raise InputTypeError(
            f"{who} is a sparse matrix, but this estimator needs dense data: pass "
            f"{who}.toarray() if it fits in memory"
        )
    bad = _date_columns(X)
    if bad:
        raise InputTypeError(
            f"{who} has non-numeric column(s) {bad} holding dates or time spans: "
            "latentlab models numbers only; drop them or encode them as numbers first"
        )


def check_magnitude(X: np.ndarray, who: str = "X") -> None:
    """Refuse values whose sums of squares overflow float64.

    Every estimator here forms sums of squares (scatter matrices, squared distances,
    Gaussian log-densities), which overflow to inf once |x| reaches about
    sqrt(max float / number of entries) -- near 1e154 for small data.  The results
    (variances of order x^2) would not be representable either, so refuse and let
    the user rescale; ``Imputer``, which standardises anyway, rescales by itself.
    """
    if X.size == 0:
        return
    # fmax/fmin skip NaN and allocate nothing: two cheap passes over a large X
    flat = X.reshape(-1)
    largest = max(abs(float(np.fmax.reduce(flat))), abs(float(np.fmin.reduce(flat))))
    if np.isnan(largest):  # every entry is missing
        return
    limit = np.sqrt(np.finfo(np.float64).max / X.size)
    if largest >= limit:
        raise ValueError(
            f"{who} has values as large as {largest:.3g} in magnitude: sums of their "
            f"squares over its {X.shape[0]} x {X.shape[1]} entries overflow float64 "
            f"(limit {limit:.3g} for this shape). Rescale {who} first, e.g. divide it "
            "by a power of ten."
        )


def check_data(estimator, X, *, reset: bool, allow_nan: bool, min_samples: int = 1):
    """Validate X as a 2-D float array (NaN allowed only when the model handles it).

    Infinite values are always rejected (scikit-learn's message names them), and so
    are sparse matrices, non-numeric DataFrame columns and values so large that
    their sums of squares overflow (:func:`check_magnitude`), each by a
    ``ValueError`` that names the problem.
    """
    check_dense_numeric(X)
    X = validate_data(
        estimator,
        X,
        reset=reset,
        dtype=np.float64,
        ensure_all_finite="allow-nan" if allow_nan else True,
        ensure_min_samples=min_samples,
    )
    X = np.asarray(X, dtype=np.float64)
    check_magnitude(X)
    return X


def _check_no_empty(mask: np.ndarray, axis: int, what: str) -> None:
    empty = np.flatnonzero(~mask.any(axis=axis))
    if empty.size:
        shown = ", ".join(map(str, empty[:10])) + (" ..." if empty.size > 10 else "")
        advice = (
            "Drop them; they carry no information."
            if what == "row"
            else ("Drop them before fitting.")
        )
        raise ValueError(
            f"X has {empty.size} {what}(s) with every entry missing (NaN): "
            f"{what}s {shown}. {advice}"
        )


def check_no_empty_rows(mask: np.ndarray) -> None:
    _check_no_empty(mask, axis=1, what="row")


def check_no_empty_columns(mask: np.ndarray) -> None:
    _check_no_empty(mask, axis=0, what="column")


def check_n_components(n_components: int, low: int, high: int, why: str) -> int:
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
        raise ValueError(f"n_components must be an integer, got {n_components!r}")
    if not low <= n_components <= high:
        raise ValueError(
            f"n_components={n_components} is out of range: it must satisfy "
            f"{low} <= n_components <= {high} ({why})"
        )
    return int(n_components)


def check_codes(Z, n_components: int, name: str = "X") -> np.ndarray:
    """Latent coordinates handed to ``inverse_transform``: a finite float64 array of
    shape (n_samples, n_components), or a ValueError saying what is wrong."""
    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2 or Z.shape[1] != n_components:
        raise ValueError(
            f"{name} must hold codes of shape (n_samples, {n_components}), got {Z.shape}"
        )
    if not np.isfinite(Z).all():  # latent coordinates are never missing
        raise ValueError(f"{name} contains NaN or infinity")
    return Z


def check_start_array(name: str, value, shape: tuple, dims: str) -> np.ndarray:
    """A user-given starting array (``init``, ``w_init``) as float64, or a ValueError:
    its shape must be ``shape``, whose dimensions ``dims`` names, and it must be finite."""
    value = np.asarray(value, dtype=np.float64)
    if value.shape != shape:
        raise ValueError(f"{name} has shape {value.shape}; expected {dims} = {shape}")
    if not np.all(np.isfinite(value)):
        raise ValueError(f"{name} has NaN or infinite values")
    return value


def check_positive_int(name: str, value) -> int:
    """``value`` as an int, or a ValueError naming the setting if it is not a
    positive integer (bools refused: ``True`` is not a count)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_level(level) -> float:
    """A credible/confidence level strictly between 0 and 1."""
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)):
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    return float(level)
