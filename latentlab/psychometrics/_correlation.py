"""The correlation matrix, sample size and variable names that the psychometric
reports (:mod:`latentlab.psychometrics.adequacy`, :mod:`latentlab.psychometrics.retention`)
read, from data or from a covariance matrix, with the input checks they share.

From data ``X`` without missing entries the correlation is the sample (maximum
likelihood) correlation, :func:`numpy.corrcoef`.  With NaN entries it is the
correlation of the saturated multivariate normal model fitted by full-information
maximum likelihood (EM on every observed entry, valid for data missing at random):
:class:`latentlab.GaussianMixture` with one full-covariance component and no
regularisation.  From ``covariance=`` (a covariance or correlation matrix) plus
``n_samples=`` it is that matrix rescaled to unit diagonal, as R's
``factanal(covmat=, n.obs=)`` reads its input.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np

from latentlab._validation import check_covariance_matrix, check_input_kind
from latentlab.models.gaussian_latent import LOG_2PI

__all__ = [
    "CorrelationInput",
    "correlation_input",
    "data_matrix",
    "saturated_correlation",
    "saturated_normal",
]

#: A correlation matrix whose smallest eigenvalue is at most this fraction of its
#: largest is refused as not positive definite (a variable is then, to the precision
#: its statistics can be computed at, a linear combination of the others).
PD_TOLERANCE = 1e-10


class CorrelationInput(NamedTuple):
    """What :func:`correlation_input` returns."""

    R: np.ndarray
    """(d, d) correlation matrix, symmetric with unit diagonal, positive definite."""
    n: int | None
    """Sample size: the rows of ``X`` (those with at least one observed entry), or
    ``n_samples``; None when ``covariance=`` came without ``n_samples`` and the caller
    said it needs none."""
    names: object
    """Column names (a :class:`pandas.Index`) of a DataFrame ``X`` or ``covariance``,
    else None."""


def _names(obj):
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(obj, pandas.DataFrame):
        return obj.columns
    return None


def _label(names, indices) -> str:
    labels = [repr(names[j]) if names is not None else str(int(j)) for j in indices]
    shown = ", ".join(labels[:10]) + (", ..." if len(labels) > 10 else "")
    return shown


def data_matrix(X, *, min_features: int = 2) -> tuple[np.ndarray, object]:
    """``X`` as a float64 array (NaN for missing entries) and its column names.

    Refuses, with a ``ValueError`` that says why: anything but a 2-D numeric array or
    DataFrame; infinite entries; fewer than ``min_features`` columns; fewer than 2 rows
    with an observed entry; columns with fewer than two observed entries or a single
    observed value (constant columns, named).  Rows with every entry missing carry no
    information and are dropped.
    """
    names = _names(X)
    X = check_input_kind(X, "X", allow_nan=True)
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(X, pandas.DataFrame):
        A = X.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n_samples, n_variables), got shape {A.shape}")
    if np.isinf(A).any():
        raise ValueError("X has infinite entries: only finite numbers and NaN are allowed")
    if A.shape[1] < min_features:
        raise ValueError(
            f"X has {A.shape[1]} column(s): at least {min_features} variables are needed"
        )
    observed = ~np.isnan(A)
    A = A[observed.any(axis=1)]
    observed = ~np.isnan(A)
    if A.shape[0] < 2:
        raise ValueError(f"X has {A.shape[0]} row(s) with an observed entry: at least 2 are needed")
    with np.errstate(invalid="ignore"):
        spread = np.nanmax(A, axis=0, initial=-np.inf, where=observed) - np.nanmin(
            A, axis=0, initial=np.inf, where=observed
        )
    constant = np.flatnonzero((observed.sum(axis=0) < 2) | ~(spread > 0))
    if constant.size:
        raise ValueError(
            f"X has {constant.size} constant column(s) (a single observed value, or "
            f"fewer than two observed entries): {_label(names, constant)}; their "
            "correlations are undefined, drop them"
        )
    return A, names


def saturated_normal(A: np.ndarray) -> tuple[float, np.ndarray, bool]:
    """The saturated model of ``A`` (rows, NaN for missing entries): the normal with
    unrestricted mean and covariance fitted by maximum likelihood.  Returns its
    log-likelihood (of the observed entries), its covariance and whether its fit
    converged.  Closed form for complete data; with NaN entries full-information ML,
    EM over every observed entry (:class:`latentlab.GaussianMixture` with one
    full-covariance component and no regularisation)."""
    if not np.isnan(A).any():
        n, d = A.shape
        S = np.cov(A.T, bias=True).reshape(d, d)
        sign, logdet = np.linalg.slogdet(S)
        if sign <= 0:
            raise ValueError(
                "the sample covariance of X is singular (collinear or constant columns): "
                "the saturated normal model is undefined"
            )
        return float(-0.5 * n * (d * LOG_2PI + logdet + d)), S, True
    import warnings

    from latentlab import GaussianMixture

    model = GaussianMixture(
        n_components=1,
        covariance_type="full",
        covariance_prior=0.0,  # the maximum-likelihood (FIML) estimate, unpenalised
        reg_covar=0.0,
        tol=1e-12,
        max_iter=10000,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # callers report convergence in their words
        model.fit(A)
    loglik = float(np.sum(model.score_samples(A)))
    return loglik, np.asarray(model.covariances_[0], dtype=np.float64), bool(model.converged_)


def saturated_correlation(A: np.ndarray) -> np.ndarray:
    """Correlation matrix of :func:`saturated_normal`'s covariance (for complete rows
    the sample correlation, which :func:`correlation_input` then checks)."""
    C = np.cov(A.T, bias=True) if not np.isnan(A).any() else saturated_normal(A)[1]
    s = np.sqrt(np.diag(C))
    R = C / np.outer(s, s)
    R = (R + R.T) / 2
    np.fill_diagonal(R, 1.0)
    return R


def _check_positive_definite(R: np.ndarray, what: str) -> None:
    eig = np.linalg.eigvalsh(R)
    if not eig[0] > PD_TOLERANCE * eig[-1]:
        raise ValueError(
            f"the correlation matrix of {what} is not positive definite: smallest "
            f"eigenvalue {eig[0]:.3g} against largest {eig[-1]:.3g}; some variable is "
            "(nearly) a linear combination of the others -- drop it"
        )


def _check_n_samples(n_samples, d: int, need_n: bool, n_above_d: bool) -> int | None:
    if n_samples is None:
        if need_n:
            raise ValueError(
                "covariance= needs n_samples=, the number of observations it was computed from"
            )
        return None
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer):
        raise ValueError(f"n_samples must be an integer, got {n_samples!r}")
    if n_samples < 2:
        raise ValueError(f"n_samples must be at least 2, got {n_samples}")
    if n_above_d and n_samples <= d:
        raise ValueError(
            f"n_samples={n_samples} must exceed the number of variables ({d}): this "
            "statistic needs a positive definite sample correlation"
        )
    return int(n_samples)


def correlation_input(
    X=None,
    *,
    covariance=None,
    n_samples=None,
    need_n: bool = True,
    n_above_d: bool = False,
    min_features: int = 2,
) -> CorrelationInput:
    """The correlation matrix, sample size and column names a report reads.

    Parameters
    ----------
    X : array-like or DataFrame (n_samples, n_variables), optional
        Data; NaN marks a missing entry.  Complete data give the sample (ML)
        correlation; data with NaN give the correlation of the saturated normal model
        fitted by full-information ML (:func:`saturated_correlation`), and ``n`` is
        then the number of rows with at least one observed entry (all-NaN rows are
        dropped) -- not an "effective" sample size.
    covariance : array-like or DataFrame (d, d), optional
        A covariance or correlation matrix, instead of ``X``; it is rescaled to unit
        diagonal (R's ``factanal(covmat=)``).
    n_samples : int, optional
        The number of observations ``covariance`` came from; required with it when
        ``need_n``; not allowed with ``X``.
    need_n : bool, default=True
        Whether the caller needs the sample size.
    n_above_d : bool, default=False
        Require ``n > d`` (statistics whose null distribution needs it).
    min_features : int, default=2

    Returns
    -------
    CorrelationInput
        ``(R, n, names)``.

    Raises
    ------
    ValueError
        For both or neither of ``X`` and ``covariance``; see :func:`data_matrix` for
        ``X``; a ``covariance`` that is not square, not finite, not symmetric (beyond
        round-off) or has non-positive variances; a correlation matrix that is not
        positive definite; a bad ``n_samples``.
    """
    if (X is None) == (covariance is None):
        raise ValueError("pass exactly one of X (data) and covariance= (with n_samples=)")
    if X is not None:
        if n_samples is not None:
            raise ValueError(
                "n_samples= goes with covariance= only: with data X the sample size is "
                "the number of rows"
            )
        A, names = data_matrix(X, min_features=min_features)
        n, d = A.shape
        if n <= d and not np.isnan(A).any():
            raise ValueError(
                f"X has {n} rows and {d} columns: the sample correlation of {d} "
                f"variables is positive definite only with more than {d} rows"
            )
        R = saturated_correlation(A)
        _check_positive_definite(R, "X")
        if n_above_d and n <= d:
            raise ValueError(
                f"X has {n} rows with an observed entry and {d} columns: this statistic "
                "needs more rows than variables"
            )
        return CorrelationInput(R, n, names)

    names = _names(covariance)
    C = check_input_kind(covariance, "covariance", allow_nan=False)
    C = np.asarray(C, dtype=np.float64)
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError(f"covariance must be a square matrix, got shape {C.shape}")
    d = C.shape[0]
    if d < min_features:
        raise ValueError(f"covariance is {d} x {d}: at least {min_features} variables are needed")
    if np.isfinite(C).all():
        bad = np.flatnonzero(~(np.diag(C) > 0))
        if bad.size:
            raise ValueError(
                f"covariance has non-positive variances on its diagonal, at variable(s) "
                f"{_label(names, bad)}"
            )
    C, _ = check_covariance_matrix(C, "covariance")  # finite, symmetric, definite
    n = _check_n_samples(n_samples, d, need_n, n_above_d)
    s = np.sqrt(np.diag(C))
    R = C / np.outer(s, s)
    R = (R + R.T) / 2
    np.fill_diagonal(R, 1.0)
    _check_positive_definite(R, "covariance")
    return CorrelationInput(R, n, names)
