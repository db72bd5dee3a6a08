"""How well a fitted factor analysis reproduces the data: the likelihood-ratio test
against the saturated normal model, RMSEA, CFI, TLI, SRMR and information criteria,
with complete data as R's ``factanal`` and lavaan report them, and with missing
entries by full-information maximum likelihood as lavaan's ``missing = "ml"``."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import optimize, stats
from sklearn.utils.validation import check_is_fitted

from latentlab._validation import check_covariance_matrix, check_input_kind, check_level
from latentlab.models.gaussian_latent import LOG_2PI
from latentlab.psychometrics._correlation import saturated_normal

__all__ = ["goodness_of_fit"]

ROWS = (
    "n",
    "n_parameters",
    "df",
    "loglik",
    "loglik_saturated",
    "loglik_independence",
    "chi2",
    "p_value",
    "chi2_bartlett",
    "p_value_bartlett",
    "chi2_independence",
    "df_independence",
    "rmsea",
    "rmsea_p_close",
    "cfi",
    "tli",
    "srmr",
    "aic",
    "bic",
)


def goodness_of_fit(
    model,
    X=None,
    *,
    covariance=None,
    n_samples=None,
    level: float = 0.90,
    close: float = 0.05,
) -> pd.DataFrame:
    """Goodness of fit of a fitted factor analysis (or PPCA) to the data it was fitted on.

    The model is compared with two others fitted by maximum likelihood to the same
    observed entries: the saturated model (a normal distribution with unrestricted
    mean and covariance) and the independence model (a normal distribution with a
    diagonal covariance, ``FactorAnalysis(n_components=0)``, lavaan's baseline).
    Complete data give them in closed form; with NaN entries (missing values) all
    three log-likelihoods are full-information ones, each the exact marginal
    likelihood of the observed entries (the saturated model fitted by EM, as
    ``GaussianMixture(1, covariance_type="full", covariance_prior=0, reg_covar=0)``), as lavaan's
    ``missing = "ml"`` computes them.  Rows without any observed entry carry no
    information and are dropped (they do not count in n).

    Parameters
    ----------
    model : FactorAnalysis or PPCA
        A fitted :class:`latentlab.FactorAnalysis` (any K up to the Ledermann bound,
        ``K = 0`` included) or :class:`latentlab.PPCA`, fitted by maximum likelihood
        to ``X``.  The statistics assume that fit: for a model fitted to other data
        (or by MAP, or not converged) they are not likelihood-ratio statistics, and
        a warning says so where it can tell.
    X : array-like of shape (n_samples, n_features), optional
        The data the model was fitted on; NaN entries are missing values.
    covariance : array-like of shape (n_features, n_features), optional
        Instead of ``X``, for a model fitted by ``fit_covariance``: the (ML, divisor
        n) covariance or correlation matrix it was fitted to, with ``n_samples``;
        every log-likelihood is then the complete-data closed form.
    n_samples : int, optional
        The rows behind ``covariance``.
    level : float, default=0.90
        Confidence level of the RMSEA interval (lavaan's ``rmsea.ci.level``).
    close : float, default=0.05
        RMSEA of the test of close fit, H0: RMSEA <= ``close`` (lavaan's
        ``rmsea.close.h0``).

    Returns
    -------
    pandas.DataFrame
        One row per statistic (index ``statistic``), columns ``value``, ``lower``,
        ``upper``; ``lower``/``upper`` hold the RMSEA's confidence interval and are
        NaN elsewhere.  ``.attrs`` holds ``"missing"`` (whether X had NaN entries),
        ``"level"``, ``"close"`` and ``"notes"`` (a list of sentences about
        statistics that are undefined or not computed for this fit).  The rows, with
        d features, K factors, n rows, log-likelihoods l and
        F = log|Sigma| - log|S| + tr(Sigma^-1 S) - d (S the saturated model's ML
        covariance, Sigma the model's):

        ``n``
            Rows with at least one observed entry (lavaan's "used" observations).
        ``n_parameters``
            The model's free parameters, ``model.n_parameters_`` (means included;
            FA: dK + 2d - K(K-1)/2).
        ``df``
            Saturated parameters d + d(d+1)/2 minus ``n_parameters``; for FA
            ((d - K)^2 - (d + K)) / 2, as ``factanal``'s ``dof``.
        ``loglik``, ``loglik_saturated``, ``loglik_independence``
            Log-likelihoods of the observed entries under the three models (lavaan's
            ``logl`` and ``unrestricted.logl``).
        ``chi2``, ``p_value``
            The likelihood-ratio statistic 2 (l_saturated - l), uncorrected, and its
            chi-square(df) upper tail.  With complete data it is n F (the mean term
            vanishes at the ML fit): lavaan's ``chisq`` under its default
            ``likelihood = "normal"``.  With NaN entries it is lavaan's FIML
            ``chisq``.
        ``chi2_bartlett``, ``p_value_bartlett``
            FA with complete data only: R's ``factanal`` statistic
            (n - 1 - (2d + 5)/6 - 2K/3) F, Bartlett's (1950) correction, and its
            p-value.  NaN with NaN entries (no such correction exists for FIML, and
            lavaan applies none) and for PPCA.
        ``chi2_independence``, ``df_independence``
            The independence model's statistic 2 (l_saturated - l_independence)
            on d(d - 1)/2 degrees of freedom (lavaan's ``baseline.chisq``).
        ``rmsea`` (with ``lower``, ``upper``), ``rmsea_p_close``
            RMSEA = sqrt(max(chi2 - df, 0) / (n df)) (Steiger & Lind 1980) with
            lavaan's convention of n, not n - 1 (lavaan: "always using N"; Browne &
            Cudeck 1993, semopy and psych use n - 1, a factor sqrt(n / (n - 1))
            apart).  Its interval inverts the noncentral chi-square: the
            noncentrality lambda at which chi2 is the upper and lower
            (1 - level)/2 quantile, RMSEA = sqrt(lambda / (n df)), a bound 0 where
            no lambda >= 0 reaches it (Browne & Cudeck 1993, lavaan's
            ``rmsea.ci.lower``/``upper``).  ``rmsea_p_close`` is
            P(chi2'(df, n df close^2) >= chi2), the p-value of H0: RMSEA <= close
            (lavaan's ``rmsea.pvalue``).  NaN when df = 0 (lavaan reports 0).
        ``cfi``
            Bentler's (1990) comparative fit index 1 - t / t0, t = max(chi2 - df, 0),
            t0 = max(chi2 - df, chi2_independence - df_independence, 0), 1 when both
            are 0: in [0, 1], as lavaan's ``cfi``.
        ``tli``
            Tucker & Lewis's (1973) index
            1 - ((chi2 - df) df0) / ((chi2_0 - df0) df), not clipped (lavaan's
            ``tli``); NaN when df = 0 (lavaan reports 1).
        ``srmr``
            Bentler's standardised root mean square residual: the root mean square of
            (s_ij - sigma_ij) / sqrt(s_ii s_jj) over the d(d + 1)/2 entries i >= j,
            diagonal included, S the saturated covariance (the FIML one with NaN
            entries).  lavaan's ``srmr_bentler_nomean``, its ``srmr`` for a model
            without a mean structure (lavaan adds the mean residuals when it has
            one, as with ``missing = "ml"``; here the mean is saturated in the model,
            and with complete data those residuals are 0).
        ``aic``, ``bic``
            -2 l + 2 p and -2 l + p log n, p = ``n_parameters`` (the model's own
            ``aic(X)`` and ``bic(X)``, lavaan's ``aic`` and ``bic``).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``model`` is not fitted (a ``ValueError``).
    TypeError
        If ``model`` is neither a FactorAnalysis nor a PPCA.
    ValueError
        If X is not a 2-D numeric array with the model's number of features and at
        least two rows with observed entries, if it holds infinite values or a
        column without observed entries, or if the model has more parameters than
        the saturated model (df < 0).

    Notes
    -----
    With complete data ``chi2`` is ``factanal``'s statistic without its Bartlett
    factor, times n / (n - 1 - (2d + 5)/6 - 2K/3); ``factanal`` reports the
    corrected one only (``chi2_bartlett``).  The two agree to first order; the
    corrected one is closer to its chi-square reference distribution in small
    samples (Bartlett 1950; Lawley & Maxwell 1971, sec. 4.3).  RMSEA, CFI and TLI are
    computed from the uncorrected ``chi2``, as lavaan does.  When df = 0 (for FA,
    K at which the model reproduces any covariance, e.g. d = 3, K = 1) the model is
    saturated: chi2 is 0 up to rounding, and the p-value, RMSEA and TLI are NaN
    with a note.

    References
    ----------
    Bartlett, M. S. (1950). Tests of significance in factor analysis. British Journal
    of Psychology (Statistical Section), 3, 77-85.

    Bentler, P. M. (1990). Comparative fit indexes in structural models.
    Psychological Bulletin, 107, 238-246.

    Browne, M. W., & Cudeck, R. (1993). Alternative ways of assessing model fit. In
    K. A. Bollen & J. S. Long (Eds.), Testing structural equation models
    (pp. 136-162). Sage.

    Hu, L., & Bentler, P. M. (1999). Cutoff criteria for fit indexes in covariance
    structure analysis. Structural Equation Modeling, 6, 1-55.

    Rosseel, Y. (2012). lavaan: An R package for structural equation modeling.
    Journal of Statistical Software, 48(2), 1-36 (``fitMeasures``).

    Steiger, J. H., & Lind, J. C. (1980). Statistically based tests for the number
    of common factors. Psychometric Society annual meeting, Iowa City.

    Tucker, L. R., & Lewis, C. (1973). A reliability coefficient for maximum
    likelihood factor analysis. Psychometrika, 38, 1-10.

    Examples
    --------
    >>> import latentlab
    >>> from latentlab.psychometrics.goodness_of_fit import goodness_of_fit
    >>> from sklearn.datasets import load_wine
    >>> from sklearn.preprocessing import scale
    >>> X = scale(load_wine().data)
    >>> fa = latentlab.FactorAnalysis(3, random_state=0).fit(X)
    >>> fit = goodness_of_fit(fa, X)
    >>> fit.loc[["chi2", "chi2_bartlett", "df"], "value"].round(1).tolist()
    [166.2, 158.5, 42.0]
    >>> fit.loc[["cfi", "tli", "srmr"], "value"].round(3).tolist()
    [0.903, 0.821, 0.05]
    >>> fit.loc["rmsea"].round(3).tolist()  # value, lower, upper (90% interval)
    [0.129, 0.109, 0.15]
    """
    FactorAnalysis, PPCA, ConfirmatoryFactorAnalysis = _model_classes()
    if not isinstance(model, (FactorAnalysis, PPCA, ConfirmatoryFactorAnalysis)):
        raise TypeError(
            "goodness_of_fit takes a fitted latentlab.FactorAnalysis, PPCA or "
            f"ConfirmatoryFactorAnalysis, got {type(model).__name__}"
        )
    check_is_fitted(model)
    level = check_level(level)
    if isinstance(close, bool) or not isinstance(close, (int, float, np.floating)) or close <= 0:
        raise ValueError(f"close must be a positive number (an RMSEA), got {close!r}")
    if (X is None) == (covariance is None):
        raise ValueError("pass the data X, or covariance= with n_samples= (not both)")
    if covariance is None and n_samples is not None:
        raise ValueError("n_samples= goes with covariance=: with X it is the number of rows")
    _warn_if_not_ml(model)
    notes: list[str] = []
    if X is not None:
        X = _check_X(X, model.n_features_in_)
        n, d = X.shape
        missing = bool(np.isnan(X).any())
    else:
        S, _ = check_covariance_matrix(covariance)
        if S.shape[0] != model.n_features_in_:
            raise ValueError(
                f"covariance describes {S.shape[0]} features, but the model was fitted on "
                f"{model.n_features_in_}"
            )
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
            raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}")
        if n_samples < 2:
            raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}")
        n, d, missing = int(n_samples), S.shape[0], False
    K = int(model.n_components_)
    n_parameters = int(model.n_parameters_)
    df = d + d * (d + 1) // 2 - n_parameters
    if df < 0:
        raise ValueError(
            f"the model has {n_parameters} free parameters, more than the saturated "
            f"normal model's {d + d * (d + 1) // 2} (d = {d}): df = {df} < 0, the model is "
            "not identified and no goodness-of-fit test exists"
        )
    df0 = d * (d - 1) // 2

    if X is None:  # the complete-data closed forms, from the moments
        loglik, loglik_sat, loglik_ind = _logliks_of_moments(S, model.get_covariance(), n)
    else:
        loglik, loglik_sat, S, loglik_ind = _logliks_of_rows(model, X, missing)

    chi2 = 2.0 * (loglik_sat - loglik)
    chi2_0 = 2.0 * (loglik_sat - loglik_ind)
    if chi2 < -1e-6 * max(1.0, abs(chi2_0)):
        warnings.warn(
            f"the model's log-likelihood exceeds the saturated model's (chi2 = {chi2:.3g}): "
            "the model was not fitted to this X, or the saturated fit did not converge",
            UserWarning,
            stacklevel=2,
        )

    if df > 0:
        p_value = float(stats.chi2.sf(chi2, df))
    else:
        p_value = np.nan
        notes.append(
            "df = 0: the model is saturated (it reproduces any covariance), chi2 is 0 up "
            "to rounding and the p-value, RMSEA (with its interval and test of close fit) "
            "and TLI are undefined (NaN)"
        )

    chi2_bartlett = p_bartlett = np.nan
    if missing:
        notes.append(
            "missing entries: chi2 is the full-information (FIML) likelihood-ratio "
            "statistic; no Bartlett correction exists for it (chi2_bartlett is NaN)"
        )
    elif not isinstance(model, FactorAnalysis):
        notes.append(
            "chi2_bartlett is factanal's correction for exploratory factor analysis: NaN "
            f"for {type(model).__name__}"
        )
    else:
        chi2_bartlett = (n - 1 - (2 * d + 5) / 6 - 2 * K / 3) * chi2 / n
        p_bartlett = float(stats.chi2.sf(chi2_bartlett, df)) if df > 0 else np.nan

    rmsea = lower = upper = p_close = tli = np.nan
    if df > 0:
        rmsea = float(np.sqrt(max(chi2 - df, 0.0) / (n * df)))
        lower, upper = _rmsea_interval(chi2, df, n, level)
        p_close = float(_ncx2_sf(chi2, df, n * df * close**2))
        tli = _tli(chi2, df, chi2_0, df0)
    cfi = _cfi(chi2, df, chi2_0, df0)

    srmr = _srmr(S, model.get_covariance())
    aic = -2.0 * loglik + 2.0 * n_parameters
    bic = -2.0 * loglik + n_parameters * np.log(n)

    values = {
        "n": n,
        "n_parameters": n_parameters,
        "df": df,
        "loglik": loglik,
        "loglik_saturated": loglik_sat,
        "loglik_independence": loglik_ind,
        "chi2": chi2,
        "p_value": p_value,
        "chi2_bartlett": chi2_bartlett,
        "p_value_bartlett": p_bartlett,
        "chi2_independence": chi2_0,
        "df_independence": df0,
        "rmsea": rmsea,
        "rmsea_p_close": p_close,
        "cfi": cfi,
        "tli": tli,
        "srmr": srmr,
        "aic": aic,
        "bic": bic,
    }
    table = pd.DataFrame(
        {
            "value": [float(values[r]) for r in ROWS],
            "lower": np.nan,
            "upper": np.nan,
        },
        index=pd.Index(ROWS, name="statistic"),
    )
    table.loc["rmsea", ["lower", "upper"]] = [lower, upper]
    table.attrs.update(missing=missing, level=level, close=float(close), notes=notes)
    return table


# ----------------------------------------------------------------------------- checks


def _model_classes():
    from latentlab.estimators.cfa import ConfirmatoryFactorAnalysis
    from latentlab.estimators.factor_analysis import FactorAnalysis
    from latentlab.estimators.ppca import PPCA

    return FactorAnalysis, PPCA, ConfirmatoryFactorAnalysis


def _check_X(X, n_features: int) -> np.ndarray:
    X = check_input_kind(X, allow_nan=True)
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"X must be a numeric 2-D array: {error}") from None
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n_samples, n_features), got {X.ndim}-D")
    if X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the model was fitted on {n_features}")
    if np.isinf(X).any():
        raise ValueError("X holds infinite values; missing values must be NaN")
    observed = ~np.isnan(X)
    X = X[observed.any(axis=1)]  # rows without an observed entry carry no information
    observed = ~np.isnan(X)
    if len(X) < 2:
        raise ValueError(f"X needs at least 2 rows with observed entries, got {len(X)}")
    empty = np.flatnonzero(~observed.any(axis=0))
    if empty.size:
        raise ValueError(f"X has column(s) {empty.tolist()} without any observed entry")
    return X


def _warn_if_not_ml(model) -> None:
    if getattr(model, "prior", False) or getattr(model, "method", "em") == "svi":
        warnings.warn(
            "the model was not fitted by maximum likelihood (prior=True or method='svi'): "
            "the statistics are not likelihood-ratio statistics",
            UserWarning,
            stacklevel=3,
        )
    if not getattr(model, "converged_", True):
        warnings.warn(
            "the model's fit did not converge: the statistics overstate the misfit",
            UserWarning,
            stacklevel=3,
        )


# ----------------------------------------------------------------------------- models


def _logliks_of_rows(model, X, missing):
    """The model's, the saturated and the independence log-likelihoods of the rows
    (full-information ones with NaN entries), and the saturated covariance."""
    names = getattr(model, "feature_names_in_", None)
    rows = X if names is None else pd.DataFrame(X, columns=names)  # as it was fitted
    loglik = float(np.sum(model.score_samples(rows)))
    if not missing:
        if np.max(np.abs(model.mean_ - X.mean(axis=0)) / X.std(axis=0).clip(1e-300)) > 1e-6:
            warnings.warn(
                "the model's mean_ is not the column means of X: was it fitted on this X? "
                "The statistics assume the maximum-likelihood fit to X",
                UserWarning,
                stacklevel=3,
            )
    loglik_sat, S, converged = saturated_normal(X)
    if not converged:
        warnings.warn(
            "the saturated model's EM did not converge in 10000 iterations: its "
            "log-likelihood, and the chi-square statistics, are approximate",
            UserWarning,
            stacklevel=3,
        )
    return loglik, loglik_sat, S, _independence_loglik(X)


def _logliks_of_moments(S, Sigma, n):
    """The three log-likelihoods of n complete rows with ML covariance S, for a model
    of covariance Sigma whose mean is the rows' (as an ML fit's is)."""
    d = S.shape[0]
    logdet_model = np.linalg.slogdet(Sigma)[1]
    model = -0.5 * n * (d * LOG_2PI + logdet_model + np.trace(np.linalg.solve(Sigma, S)))
    saturated = -0.5 * n * (d * LOG_2PI + np.linalg.slogdet(S)[1] + d)
    independence = -0.5 * n * float(np.sum(LOG_2PI + np.log(np.diag(S)) + 1.0))
    return float(model), float(saturated), independence


def _independence_loglik(X: np.ndarray) -> float:
    """Log-likelihood of the diagonal normal fitted by ML to the observed entries: its
    likelihood factorises over features, each fitted by its observed mean and
    (1/m) variance, missing entries or not (FactorAnalysis(0)'s fit)."""
    total = 0.0
    for column in X.T:
        x = column[~np.isnan(column)]
        variance = np.var(x)
        if variance <= 0:
            raise ValueError("X has a constant column: the independence model is undefined")
        total += -0.5 * len(x) * (LOG_2PI + np.log(variance) + 1.0)
    return float(total)


# ----------------------------------------------------------------------------- indices


def _ncx2_cdf(x: float, df: int, nc: float) -> float:
    return float(stats.chi2.cdf(x, df) if nc <= 0 else stats.ncx2.cdf(x, df, nc))


def _ncx2_sf(x: float, df: int, nc: float) -> float:
    return float(stats.chi2.sf(x, df) if nc <= 0 else stats.ncx2.sf(x, df, nc))


def _noncentrality(chi2: float, df: int, probability: float, start: float) -> float:
    """The noncentrality lambda >= 0 with P(chi2'(df, lambda) <= chi2) = probability;
    0 where even lambda = 0 gives less (the CDF decreases in lambda)."""

    def gap(lam):
        return _ncx2_cdf(chi2, df, lam) - probability

    if gap(0.0) <= 0.0:
        return 0.0
    high = max(start, 1.0)
    while gap(high) > 0.0:
        high *= 2.0
    return float(optimize.brentq(gap, 0.0, high, xtol=1e-12, rtol=1e-12))


def _rmsea_interval(chi2: float, df: int, n: int, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    start = max(n, 4.0 * chi2)
    lam_lower = _noncentrality(chi2, df, 1.0 - tail, start)
    lam_upper = _noncentrality(chi2, df, tail, start)
    return float(np.sqrt(lam_lower / (n * df))), float(np.sqrt(lam_upper / (n * df)))


def _cfi(chi2: float, df: int, chi2_0: float, df0: int) -> float:
    t = max(chi2 - df, 0.0)
    t0 = max(chi2 - df, chi2_0 - df0, 0.0)
    return 1.0 if t0 == 0.0 else 1.0 - t / t0


def _tli(chi2: float, df: int, chi2_0: float, df0: int) -> float:
    denominator = (chi2_0 - df0) * df
    if denominator == 0.0:
        return 1.0  # lavaan: the baseline fits as well as its df say
    return 1.0 - (chi2 - df) * df0 / denominator


def _srmr(S: np.ndarray, Sigma: np.ndarray) -> float:
    scale = np.sqrt(np.diag(S))
    residual = (S - Sigma) / np.outer(scale, scale)
    lower = residual[np.tril_indices(len(S))]
    return float(np.sqrt(np.mean(lower**2)))
