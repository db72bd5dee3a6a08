"""Rubin's rules: pool an analysis repeated on each of m multiple imputations.

:func:`rubin_pool` combines the m estimates and their complete-data variances into
one estimate, its total variance, degrees of freedom and the fraction of missing
information (:class:`PooledEstimate`); the imputations themselves come from
:meth:`latentlab.impute.Imputer.sample`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from latentlab._validation import check_level


class PooledEstimate(NamedTuple):
    """Result of :func:`rubin_pool`; each field has the shape of one estimate."""

    estimate: np.ndarray  # mean of the m estimates
    variance: np.ndarray  # total variance T = W + (1 + 1/m) B
    within: np.ndarray  # W, mean of the m complete-data variances
    between: np.ndarray  # B, variance of the m estimates (ddof=1)
    df: np.ndarray  # degrees of freedom of the t reference distribution
    riv: np.ndarray  # relative increase in variance (1 + 1/m) B / W
    fmi: np.ndarray  # fraction of missing information

    def confidence_interval(self, level: float = 0.95):
        """``(lower, upper)`` from the t distribution with ``df`` degrees of freedom."""
        from scipy.stats import t

        half = t.ppf(0.5 + check_level(level) / 2, self.df) * np.sqrt(self.variance)
        return self.estimate - half, self.estimate + half


def rubin_pool(estimates, variances, *, df_complete=None) -> PooledEstimate:
    """Pool an estimate and its variance over m imputations by Rubin's rules.

    Parameters
    ----------
    estimates : array-like (m,) or (m, p)
        The same quantity (or p quantities) estimated on each imputed data set.
    variances : array-like, same shape
        Their complete-data sampling variances (squared standard errors).  Vector
        quantities are pooled elementwise (no covariances).
    df_complete : float, optional
        Degrees of freedom the analysis would have without missing data (e.g.
        n - p for a regression coefficient).  Given, ``df`` is Barnard & Rubin's
        (1999) small-sample value; None gives Rubin's (1987) large-sample
        ``(m - 1) (1 + 1/r)^2``.

    Returns
    -------
    PooledEstimate
        ``estimate``, total ``variance`` T = W + (1 + 1/m) B, ``within`` W,
        ``between`` B, ``df``, ``riv`` r = (1 + 1/m) B / W and ``fmi`` =
        (r + 2 / (df + 3)) / (r + 1); each shaped like one estimate.  ``df`` is inf
        when the imputations agree exactly (B = 0) and ``df_complete`` is None.

    Examples
    --------
    >>> pooled = rubin_pool([1.0, 2.0, 3.0], [0.5, 0.5, 0.5])
    >>> float(pooled.estimate), float(pooled.variance)
    (2.0, 1.8333333333333333)
    """
    Q = np.asarray(estimates, dtype=np.float64)
    U = np.asarray(variances, dtype=np.float64)
    if Q.shape != U.shape:
        raise ValueError(f"estimates {Q.shape} and variances {U.shape} must have the same shape")
    if Q.ndim not in (1, 2) or Q.shape[0] < 2:
        raise ValueError(f"need estimates of shape (m,) or (m, p) with m >= 2, got {Q.shape}")
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(U))):
        raise ValueError("estimates and variances must be finite")
    if np.any(U < 0):
        raise ValueError("variances must be non-negative")
    if df_complete is not None and not df_complete > 0:
        raise ValueError(f"df_complete must be positive, got {df_complete!r}")
    m = Q.shape[0]
    within = U.mean(axis=0)
    between = Q.var(axis=0, ddof=1)
    extra = (1 + 1 / m) * between
    total = within + extra
    with np.errstate(divide="ignore", invalid="ignore"):
        riv = np.where(extra > 0, extra / within, 0.0)
        lam = np.where(extra > 0, extra / total, 0.0)  # share of T due to missingness
        df_old = np.where(lam > 0, (m - 1) / lam**2, np.inf)
        if df_complete is None:
            df = df_old
        else:
            df_obs = (df_complete + 1) / (df_complete + 3) * df_complete * (1 - lam)
            df = np.where(np.isinf(df_old), df_obs, df_old * df_obs / (df_old + df_obs))
        fmi = (riv + 2 / (df + 3)) / (riv + 1)
    return PooledEstimate(
        *(
            np.asarray(a, dtype=np.float64)
            for a in (Q.mean(axis=0), total, within, between, df, riv, fmi)
        )
    )
