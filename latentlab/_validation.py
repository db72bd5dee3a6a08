"""Input checks shared by every estimator: one place, one wording."""

from __future__ import annotations

import sys

import numpy as np
from sklearn.utils import get_tags
from sklearn.utils.validation import validate_data

__all__ = [
    "InputTypeError",
    "kept_float_dtype",
    "check_data",
    "check_dense_numeric",
    "check_input_kind",
    "check_magnitude",
    "compute_dtype",
    "check_n_components",
    "check_option",
    "check_no_empty_rows",
    "check_no_empty_columns",
    "check_level",
    "check_positive_int",
    "check_start_array",
    "check_symmetric",
    "check_covariance_matrix",
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

    NumPy cannot cast these to float (``DTypePromotionError``).  Text columns are
    :func:`_text_columns`' business.
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


def _text_columns(X) -> tuple[list[str], str]:
    """Names of a DataFrame's columns whose values do not convert to numbers (text,
    categories of text, numbers mixed with text or ``pd.NA``), and NumPy's reason for
    the first of them.

    Only columns of a non-numeric dtype are tried, each converted as scikit-learn
    converts the frame (``np.asarray(column, dtype=float64)``): numbers stored as
    objects or as numeric categories convert and are accepted, as before.
    """
    pandas = sys.modules.get("pandas")  # a DataFrame means pandas is imported already
    if pandas is None or not isinstance(X, pandas.DataFrame):
        return [], ""
    from pandas.api.types import is_numeric_dtype

    names, first_error = [], ""
    for j, (name, dtype) in enumerate(X.dtypes.items()):
        if is_numeric_dtype(dtype):
            continue
        try:
            np.asarray(X.iloc[:, j], dtype=np.float64)
        except (ValueError, TypeError) as err:
            names.append(str(name))
            first_error = first_error or str(err)
    return names, first_error


def check_dense_numeric(X, who: str = "X") -> None:
    """Refuse sparse matrices, dates or time spans (NumPy arrays or DataFrame
    columns), and DataFrame columns of text, by name.

    scikit-learn's own checks fail on these later with a ``TypeError`` (or NumPy's
    ``DTypePromotionError`` for DataFrame dates) or a ``ValueError`` quoting one value
    ("could not convert string to float: 'a'") that does not say which column is the
    problem, or, for a NumPy ``datetime64``/``timedelta64`` array, not at all: it
    converts the dates to counts of days or seconds since 1970 and fits those.
    """
    if hasattr(X, "toarray") and hasattr(X, "nnz"):  # scipy.sparse matrix or array
        raise InputTypeError(
            f"{who} is a sparse matrix, but this estimator needs dense data: pass "
            f"{who}.toarray() if it fits in memory"
        )
    if isinstance(X, np.ndarray) and X.dtype.kind in "mM":  # masked arrays included
        raise InputTypeError(
            f"{who} is a NumPy array of dates or time spans ({X.dtype}): latentlab "
            "models numbers only; encode them as numbers first (e.g. days as floats)"
        )
    bad = _date_columns(X)
    if bad:
        raise InputTypeError(
            f"{who} has non-numeric column(s) {bad} holding dates or time spans: "
            "latentlab models numbers only; drop them or encode them as numbers first"
        )
    bad, reason = _text_columns(X)
    if bad:
        raise InputTypeError(
            f"{who} has non-numeric column(s) {bad} holding text or other values that "
            f"are not numbers ({reason}): latentlab models numbers only; drop them or "
            "encode them as numbers first (e.g. one column per category)"
        )


def check_input_kind(X, who: str = "X", *, allow_nan: bool, accept_sparse: bool = False):
    """``X`` ready for scikit-learn's array checks, or a ``ValueError`` for input of a
    kind they would misread.

    ``None`` is refused by name (scikit-learn would report "array=nan"); sparse
    matrices (unless ``accept_sparse``) and dates as :func:`check_dense_numeric` does.
    A NumPy masked array's masked entries are missing entries: NaN for a model that
    takes NaN (``allow_nan``), refused otherwise.  scikit-learn's ``check_array``
    would read the values under the mask as data (a masked 1e6 fitted as 1e6).
    """
    if X is None:
        raise ValueError(f"{who} is None: expected a 2-D array (n_samples, n_features)")
    if not (accept_sparse and hasattr(X, "nnz")):
        check_dense_numeric(X, who)
    if not np.ma.isMaskedArray(X):
        return X
    masked = np.ma.getmaskarray(X)
    if not masked.any():
        return np.ma.getdata(X)
    if not allow_nan:
        raise ValueError(
            f"{who} is a masked array, and {int(masked.sum())} of its entries are masked: "
            "masked entries are missing values, which this estimator cannot take; fill "
            "or drop them first (or use a model that handles missing values, such as PPCA)"
        )
    return np.ma.filled(np.ma.asarray(X, dtype=np.float64), np.nan)


def _column_range(X) -> tuple[np.ndarray, np.ndarray]:
    """Each column's largest and smallest value, missing entries (NaN) skipped: NaN
    only for a column with every entry missing.  A sparse matrix's implicit zeros
    count as values."""
    if hasattr(X, "nnz"):
        return (
            np.asarray(X.max(axis=0).toarray(), dtype=np.float64).ravel(),
            np.asarray(X.min(axis=0).toarray(), dtype=np.float64).ravel(),
        )
    # fmax/fmin skip NaN and allocate one row: two cheap passes over a large X
    return np.fmax.reduce(X, axis=0), np.fmin.reduce(X, axis=0)


def _columns(indices: np.ndarray) -> str:
    """How many columns, and the first ten by index: "3 column(s) (0, 4, 7)"."""
    shown = ", ".join(map(str, indices[:10])) + (" ..." if indices.size > 10 else "")
    return f"{indices.size} column(s) ({shown})"


def check_magnitude(X, who: str = "X", *, dtype=np.float64, check_spread: bool = True) -> None:
    """Refuse values whose squares overflow, and columns whose squared spread
    underflows, in the precision the estimator computes in (``dtype``).

    Every estimator here forms sums of squares (scatter matrices, squared distances,
    Gaussian log-densities).  They overflow to inf once |x| reaches about
    sqrt(max float64 / number of entries) -- near 1e154 for small data -- and the
    results (variances of order x^2) would not be representable either.  In float32
    the data are centred in float64 on the host before the cast, so there it is a
    column's spread (largest minus smallest value) that must stay below
    sqrt(max float32 / number of entries).

    At the other end, a column whose spread s is not 0 but has s^2 below
    ``tiny / eps`` (s < 1e-146 in float64, 3e-16 in float32) has a variance -- or the
    variances a fit must resolve, eps times smaller -- among the subnormal numbers,
    which have few digits or none: PPCA on data scaled by 1e-160 scored NaN, and by
    1e-200 a finite but wrong value.  ``check_spread=False`` skips this where no
    variance is estimated from the columns (``transform`` of a fitted model, a
    precomputed (n, n) matrix).  Constant columns (s = 0) are legal.

    Each refusal is a ValueError naming the columns and suggesting to rescale;
    ``Imputer``, which standardises anyway, rescales by itself.
    """
    entries = X.nnz if hasattr(X, "nnz") else X.size
    if entries == 0:
        return
    top, bottom = _column_range(X)
    magnitude = np.fmax(np.abs(top), np.abs(bottom))
    check_column_scales(magnitude, top - bottom, entries, who, dtype, check_spread)


def check_column_scales(magnitude, spread, entries, who="X", dtype=np.float64, check_spread=True):
    """:func:`check_magnitude` from per-column summaries: the largest magnitude and
    the spread of each column (NaN for a column with every entry missing), over
    ``entries`` entries.  The chunked routes, which never hold X whole, pass the
    column extremes their one pass keeps (squares would not do: a spread of 1e-200
    has a variance of exactly 0)."""
    magnitude, spread = np.asarray(magnitude, float), np.asarray(spread, float)
    largest = float(np.fmax.reduce(magnitude))
    if np.isnan(largest):  # every entry is missing
        return
    limit = np.sqrt(np.finfo(np.float64).max / entries)
    if not largest < limit:  # inf too: a pass's sums of squares overflowed
        raise ValueError(
            f"{who} has values as large as {largest:.3g} in magnitude, in "
            f"{_columns(np.flatnonzero(~(magnitude < limit) & ~np.isnan(magnitude)))}: sums "
            f"of their squares over its {entries} entries overflow float64 (limit "
            f"{limit:.3g} for this size). Rescale {who} first, e.g. divide it by a power "
            "of ten."
        )
    # NaN spread: a column with every entry missing, never refused
    precision = np.finfo(dtype)
    if precision.dtype == np.float32:
        limit = np.sqrt(precision.max / entries)
        wide = np.flatnonzero(spread >= limit)
        if wide.size:
            raise ValueError(
                f"{who} has {_columns(wide)} whose values spread over as much as "
                f"{spread[wide].max():.3g}: sums of squared deviations over its {entries} "
                f"entries overflow float32, this estimator's dtype (limit {limit:.3g} "
                f"for this size). Rescale {who} first, or fit with dtype='float64'."
            )
    if not check_spread:
        return
    floor = np.sqrt(precision.tiny / precision.eps)
    narrow = np.flatnonzero((spread > 0) & (spread < floor))
    if narrow.size:
        raise ValueError(
            f"{who} has {_columns(narrow)} whose values spread over as little as "
            f"{spread[narrow].min():.3g}: their squares (variances) underflow "
            f"{precision.dtype}'s normal range and lose their digits (smallest safe "
            f"spread {floor:.3g}). Rescale {who} first, e.g. multiply those columns by a "
            "power of ten or standardise them"
            + (", or fit with dtype='float64'." if precision.dtype == np.float32 else ".")
        )


def compute_dtype(estimator) -> type:
    """The floating type an estimator computes in: its ``dtype`` setting, else float64."""
    return np.float32 if getattr(estimator, "dtype", "float64") == "float32" else np.float64


def check_data(
    estimator,
    X,
    *,
    reset: bool,
    allow_nan: bool,
    min_samples: int = 1,
    accept_sparse: tuple | bool = False,
):
    """Validate X as a 2-D float64 array (NaN allowed only when the model handles it).

    The one entry for every estimator's data.  Refused, each by a ``ValueError`` that
    names the problem: a memmap whose file was truncated
    (:func:`~latentlab.inference.chunked.check_mapped_file`); ``None``, scalars and
    arrays of the wrong dimension; infinite
    values (and NaN unless ``allow_nan``); masked entries of a NumPy masked array
    (NaN when ``allow_nan``) and dates (:func:`check_input_kind`); sparse matrices
    unless ``accept_sparse`` names the formats taken (then X stays sparse, as
    scikit-learn's ``accept_sparse``); values whose squares overflow, or, when fitting
    (``reset``), feature columns whose spread squared underflows
    (:func:`check_magnitude`).
    """
    # a memmap whose file was truncated would kill the process (SIGBUS) when read
    from latentlab.inference.chunked import check_mapped_file

    check_mapped_file(X)
    X = check_input_kind(X, allow_nan=allow_nan, accept_sparse=bool(accept_sparse))
    X = validate_data(
        estimator,
        X,
        reset=reset,
        accept_sparse=accept_sparse,
        dtype=np.float64,
        ensure_all_finite="allow-nan" if allow_nan else True,
        ensure_min_samples=min_samples,
    )
    if not hasattr(X, "nnz"):
        X = np.asarray(X, dtype=np.float64)
    # Spreads matter where a fit takes variances of X's columns: not in transform, and
    # not in a precomputed (n, n) kernel, affinity or distance matrix, which has no
    # feature columns (and may rightly hold entries like exp(-400)).
    check_spread = reset and not get_tags(estimator).input_tags.pairwise
    check_magnitude(X, dtype=compute_dtype(estimator), check_spread=check_spread)
    return X


def check_symmetric(M: np.ndarray, what: str, *, centred: bool = False) -> None:
    """Refuse a square matrix (a precomputed kernel, affinity or distance matrix) that
    is not symmetric beyond round-off: largest |M - M^T| above 1e-10 of its largest
    entry.  ``what`` names the matrix in the message.

    ``centred``: test the doubly centred form H M H instead, whose asymmetry is
    H (M - M^T) H -- all that kernel PCA decomposes (scikit-learn centres rows and
    columns separately, so a kernel plus row and column constants is the same fit).
    """
    if M.size == 0:
        return
    asymmetry = M - M.T
    if centred:
        asymmetry = (
            asymmetry - asymmetry.mean(axis=0) - asymmetry.mean(axis=1)[:, None] + asymmetry.mean()
        )
    largest, scale = float(np.abs(asymmetry).max()), float(np.abs(M).max())
    if largest > 1e-10 * scale:
        form = " (centred)" if centred else ""
        raise ValueError(
            f"{what} is not symmetric{form}: its largest |M - M^T| is {largest:.3g}, "
            f"against entries up to {scale:.3g}; pass (M + M.T) / 2 if the asymmetry is "
            "round-off"
        )


def check_covariance_matrix(covariance, what: str = "covariance"):
    """A covariance or correlation matrix given in place of data: returns it as a
    float64 array and its feature names (a DataFrame's columns, else None).  Refuses,
    naming the problem: not square, fewer than 2 features, NaN or infinite entries,
    not symmetric beyond round-off, non-positive variances, or not positive definite
    (its correlation form's smallest eigenvalue: the test does not depend on units)."""
    names = None
    if hasattr(covariance, "columns"):
        names = np.asarray([str(c) for c in covariance.columns], dtype=object)
    try:
        S = np.array(covariance, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} must be a square matrix of numbers: {error}") from None
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"{what} must be a square matrix, got shape {S.shape}")
    if S.shape[0] < 2:
        raise ValueError(f"{what} must describe at least 2 features, got {S.shape[0]}")
    if not np.all(np.isfinite(S)):
        raise ValueError(f"{what} has NaN or infinite entries")
    check_symmetric(S, what)
    S = (S + S.T) / 2
    bad = np.flatnonzero(~(np.diag(S) > 0))
    if bad.size:
        shown = ", ".join(map(str, bad[:10])) + (", ..." if bad.size > 10 else "")
        raise ValueError(
            f"{what} has non-positive variances on its diagonal, at feature(s) {shown}"
        )
    scale = np.sqrt(np.diag(S))
    smallest = float(np.linalg.eigvalsh(S / np.outer(scale, scale))[0])
    if smallest <= 1e-12:
        raise ValueError(
            f"{what} is not positive definite: smallest eigenvalue {smallest:.3g} of its "
            "correlation form (a matrix computed pairwise from incomplete data, or from "
            "fewer rows than features, can be indefinite or singular)"
        )
    return S, names


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


def kept_float_dtype(X):
    """The dtype of an estimator's outputs for data ``X``, as scikit-learn keeps it:
    float32 for float32 data, else float64."""
    return np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
