"""Is a correlation matrix worth factoring?  The Kaiser-Meyer-Olkin measure of
sampling adequacy and Bartlett's test of sphericity.

Both read the correlation matrix of :func:`latentlab.psychometrics._correlation.
correlation_input`: the sample correlation of complete data, the full-information
ML (saturated normal) correlation of data with NaN, or a given covariance or
correlation matrix (``covariance=``, with ``n_samples=`` for Bartlett's test).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from latentlab.psychometrics._correlation import correlation_input

__all__ = ["KMO", "BartlettSphericity", "kmo", "bartlett_sphericity"]


class KMO(NamedTuple):
    """Result of :func:`kmo`."""

    overall: float
    """The overall measure of sampling adequacy (MSA)."""
    per_variable: pd.Series
    """Each variable's MSA, indexed by the column names (or 0..d-1)."""


class BartlettSphericity(NamedTuple):
    """Result of :func:`bartlett_sphericity`."""

    statistic: float
    """The chi-square statistic -(n - 1 - (2d + 5)/6) log|R|."""
    df: int
    """Its degrees of freedom, d(d - 1)/2."""
    p_value: float
    """Upper tail probability of the statistic under the chi-square distribution."""


def partial_correlations(R: np.ndarray) -> np.ndarray:
    """The anti-image (partial) correlations of a positive definite correlation
    matrix: each pair's correlation given all other variables,
    ``-Q_ij / sqrt(Q_ii Q_jj)`` with ``Q = R^-1``; the diagonal is 1."""
    Q = np.linalg.inv(R)
    Q = (Q + Q.T) / 2
    s = np.sqrt(np.diag(Q))
    P = -Q / np.outer(s, s)
    np.fill_diagonal(P, 1.0)
    return P


def kmo(X=None, *, covariance=None, n_samples=None) -> KMO:
    """Kaiser-Meyer-Olkin measure of sampling adequacy, overall and per variable.

    With ``r_ij`` the correlations and ``p_ij`` the partial (anti-image) correlations
    (each pair given all other variables), summing over ``j != i``::

        MSA_i = sum_j r_ij^2 / (sum_j r_ij^2 + sum_j p_ij^2)
        MSA   = sum_{i != j} r_ij^2 / (sum_{i != j} r_ij^2 + sum_{i != j} p_ij^2)

    Values near 1 say the correlations are mostly shared (common factors); Kaiser &
    Rice (1974) call below 0.5 "unacceptable", 0.6 "mediocre", 0.8 "meritorious".
    This is the definition of R's ``psych::KMO`` and of
    ``factor_analyzer.calculate_kmo``.

    Parameters
    ----------
    X : array-like or DataFrame (n_samples, n_variables), optional
        Data, NaN for missing entries (then the correlation of the saturated normal
        model fitted by full-information ML is used).
    covariance : array-like or DataFrame (d, d), optional
        A covariance or correlation matrix instead of ``X``.
    n_samples : int, optional
        Number of observations behind ``covariance``; not used by the measure
        (checked if given).

    Returns
    -------
    KMO
        ``(overall, per_variable)``; ``per_variable`` is a :class:`pandas.Series`
        indexed by the column names of a DataFrame input, else 0..d-1.

    References
    ----------
    Kaiser, H. F. (1970). A second generation little jiffy. *Psychometrika*, 35,
    401-415.

    Kaiser, H. F., & Rice, J. (1974). Little jiffy, mark IV. *Educational and
    Psychological Measurement*, 34, 111-117.

    Examples
    --------
    >>> import numpy as np
    >>> from latentlab.psychometrics.adequacy import kmo
    >>> R = np.array([[1.0, 0.5, 0.4], [0.5, 1.0, 0.3], [0.4, 0.3, 1.0]])
    >>> result = kmo(covariance=R)
    >>> print(round(result.overall, 4))
    0.6279
    >>> print(result.per_variable.round(4).tolist())
    [0.5938, 0.6241, 0.6994]
    """
    R, _, names = correlation_input(X, covariance=covariance, n_samples=n_samples, need_n=False)
    P = partial_correlations(R)
    r2 = R**2
    p2 = P**2
    np.fill_diagonal(r2, 0.0)
    np.fill_diagonal(p2, 0.0)
    r_col, p_col = r2.sum(axis=0), p2.sum(axis=0)
    per_variable = r_col / (r_col + p_col)
    overall = float(r_col.sum() / (r_col.sum() + p_col.sum()))
    index = names if names is not None else pd.RangeIndex(R.shape[0])
    return KMO(overall, pd.Series(per_variable, index=index, name="MSA"))


def bartlett_sphericity(X=None, *, covariance=None, n_samples=None) -> BartlettSphericity:
    """Bartlett's test that the population correlation matrix is the identity.

    The statistic ``-(n - 1 - (2d + 5)/6) log|R|`` is referred to the chi-square
    distribution on ``d(d - 1)/2`` degrees of freedom (Bartlett 1951), for ``n``
    observations of ``d`` variables.  A small p-value says the variables are
    correlated, so a factor analysis has something to explain.  This is the formula
    of R's ``psych::cortest.bartlett`` and of
    ``factor_analyzer.calculate_bartlett_sphericity`` (which returns no degrees of
    freedom and takes ``|R|`` by ``det``; here ``log|R|`` comes from ``slogdet``).
    With NaN in ``X``, ``R`` is the full-information ML correlation and ``n`` the
    number of rows, which overstates the information in the data: the test is then
    liberal.

    Parameters
    ----------
    X : array-like or DataFrame (n_samples, n_variables), optional
        Data, NaN for missing entries; needs more rows than columns.
    covariance : array-like or DataFrame (d, d), optional
        A covariance or correlation matrix instead of ``X``.
    n_samples : int, optional
        Number of observations behind ``covariance`` (required with it, and more than
        the number of variables).

    Returns
    -------
    BartlettSphericity
        ``(statistic, df, p_value)``.

    References
    ----------
    Bartlett, M. S. (1951). The effect of standardization on a chi square
    approximation in factor analysis. *Biometrika*, 38, 337-344.

    Examples
    --------
    >>> import numpy as np
    >>> from latentlab.psychometrics.adequacy import bartlett_sphericity
    >>> R = np.array([[1.0, 0.5, 0.4], [0.5, 1.0, 0.3], [0.4, 0.3, 1.0]])
    >>> test = bartlett_sphericity(covariance=R, n_samples=100)
    >>> print(round(test.statistic, 3), test.df, f"{test.p_value:.2e}")
    46.449 3 4.55e-10
    """
    R, n, _ = correlation_input(X, covariance=covariance, n_samples=n_samples, n_above_d=True)
    d = R.shape[0]
    _, logdet = np.linalg.slogdet(R)
    statistic = float(-(n - 1 - (2 * d + 5) / 6) * logdet)
    df = d * (d - 1) // 2
    return BartlettSphericity(statistic, df, float(stats.chi2.sf(statistic, df)))
