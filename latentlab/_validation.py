"""Input checks shared by every estimator: one place, one wording."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import validate_data

__all__ = [
    "check_data",
    "check_n_components",
    "check_option",
    "check_no_empty_rows",
    "check_no_empty_columns",
    "check_level",
]


def check_option(name: str, value, allowed) -> None:
    if value not in allowed:
        expected = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"Unknown {name}={value!r}; expected one of {expected}")


def check_data(estimator, X, *, reset: bool, allow_nan: bool, min_samples: int = 1):
    """Validate X as a 2-D float array (NaN allowed only when the model handles it).

    Infinite values are always rejected; scikit-learn's message names them.
    """
    X = validate_data(
        estimator,
        X,
        reset=reset,
        dtype=np.float64,
        ensure_all_finite="allow-nan" if allow_nan else True,
        ensure_min_samples=min_samples,
    )
    return np.asarray(X, dtype=np.float64)


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


def check_level(level) -> float:
    """A credible/confidence level strictly between 0 and 1."""
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)):
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    return float(level)
