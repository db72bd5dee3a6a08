"""The tables of a factor-analysis report: loadings with communalities, uniquenesses
and complexity, and the variance the factors account for, in the conventions of R's
``psych::fa`` (Revelle) for orthogonal and oblique solutions.

Every table reads a fitted :class:`~latentlab.FactorAnalysis` or
:class:`~latentlab.PPCA` through public attributes only -- ``components_`` (the
pattern loadings), ``factor_correlation_``, ``get_covariance()``,
``feature_names_in_`` -- so missing entries at fit time change nothing here: the
model's covariance is the full-information ML estimate.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

__all__ = ["loadings_table", "variance_table", "factor_names", "summary"]


def factor_names(model) -> list[str]:
    """``["F1", ..., "FK"]``: the columns the report's tables give the factors."""
    return [f"F{k + 1}" for k in range(model.n_components_)]


def _standardised(model):
    """Pattern loadings in the correlation metric (each feature divided by its model
    standard deviation; for an ML fit that is the sample's), the factor correlations
    and the uniquenesses ``psi_j / sigma_jj``."""
    check_is_fitted(model)
    if not hasattr(model, "get_covariance") or not hasattr(model, "components_"):
        raise ValueError(
            f"a factor report needs a fitted factor model (FactorAnalysis, PPCA); "
            f"got {type(model).__name__}"
        )
    K = model.n_components_
    sd = np.sqrt(np.diag(model.get_covariance()))
    pattern = model.components_.T / sd[:, None]
    phi = np.asarray(getattr(model, "factor_correlation_", np.eye(K)), np.float64)
    noise = np.broadcast_to(np.asarray(model.noise_variance_, np.float64), sd.shape)
    return pattern, phi, noise / sd**2


def _feature_index(model) -> pd.Index:
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        names = [f"x{j}" for j in range(model.n_features_in_)]
    return pd.Index(names, name="feature")


def loadings_table(model, *, standardized: bool = True, sort: bool = False) -> pd.DataFrame:
    """Pattern loadings with each feature's communality ``h2``, uniqueness ``u2`` and
    Hofmann's (1978) complexity, one row per feature (named by the fit's columns).

    Parameters
    ----------
    model : fitted FactorAnalysis or PPCA
        Its reported (rotated) solution: ``components_`` and ``factor_correlation_``.
    standardized : bool, default=True
        Loadings in the correlation metric, as psychometric tables report them (each
        feature divided by its model standard deviation); False: in the data's units,
        with ``h2`` and ``u2`` then the explained and noise variances.
    sort : bool, default=False
        Group the features by the factor of their largest absolute loading, and
        within a group by decreasing loading (``psych``'s ``fa.sort``).

    Notes
    -----
    ``h2 = diag(Lambda Phi Lambda^T)`` (the common variance: with correlated factors
    the pattern's squares alone do not sum to it); ``u2 = 1 - h2`` standardised;
    complexity ``(sum_k lambda_jk^2)^2 / sum_k lambda_jk^4``: 1 where a feature loads
    on one factor, K where it loads equally on all.
    """
    pattern, phi, uniqueness = _standardised(model)
    if not standardized:
        sd = np.sqrt(np.diag(model.get_covariance()))
        pattern, uniqueness = pattern * sd[:, None], uniqueness * sd**2
    squares = pattern**2
    with np.errstate(invalid="ignore", divide="ignore"):
        complexity = squares.sum(axis=1) ** 2 / np.sum(squares**2, axis=1)
    table = pd.DataFrame(pattern, index=_feature_index(model), columns=factor_names(model))
    table["h2"] = np.einsum("jk,kl,jl->j", pattern, phi, pattern)
    table["u2"] = uniqueness
    table["complexity"] = np.where(np.isfinite(complexity), complexity, np.nan)
    if sort and model.n_components_ > 0:
        main = np.abs(pattern).argmax(axis=1)
        strength = np.abs(pattern[np.arange(len(pattern)), main])
        table = table.iloc[np.lexsort((-strength, main))]
    return table


def variance_table(model) -> pd.DataFrame:
    """Variance accounted for by each factor, as ``psych::fa`` prints it: ``SS
    loadings`` (``diag(Phi Lambda^T Lambda)`` on standardised loadings: the column
    sums of squares for uncorrelated factors, and for correlated ones each factor's
    share with its covariance with the others included), ``Proportion Var`` (of the
    d standardised variances), ``Cumulative Var``, ``Proportion Explained`` (of the
    common variance) and ``Cumulative Proportion``; one column per factor."""
    pattern, phi, _ = _standardised(model)
    ss = np.diag(phi @ pattern.T @ pattern)
    d = pattern.shape[0]
    total = ss.sum()
    explained = ss / total if total > 0 else np.full_like(ss, np.nan)
    rows = {
        "SS loadings": ss,
        "Proportion Var": ss / d,
        "Cumulative Var": np.cumsum(ss) / d,
        "Proportion Explained": explained,
        "Cumulative Proportion": np.cumsum(explained),
    }
    return pd.DataFrame.from_dict(rows, orient="index", columns=factor_names(model))


def summary(model, X=None, *, digits: int = 3) -> str:
    """A factor-analysis report as text, in the order a reviewer reads one: the fit
    (estimator, factors, rotation, rows, convergence), the standardised pattern
    loadings with h2, u2 and complexity, the variance accounted for, the factor
    correlations of an oblique rotation and, given the data ``X`` the model was
    fitted on (NaN allowed), its goodness of fit
    (:func:`~latentlab.psychometrics.goodness_of_fit`)."""
    loadings = loadings_table(model)
    rotation = getattr(model, "rotation", None)
    rotation = getattr(rotation, "__name__", rotation) or "none"
    lines = [
        f"{type(model).__name__}: {model.n_components_} factor(s), rotation: {rotation}, "
        f"{model.n_features_in_} features",
        f"fit: {getattr(model, 'method', 'em')}, {model.n_iter_} iterations, "
        f"{'converged' if model.converged_ else 'NOT converged'}",
        "",
        "Standardised loadings (pattern matrix)",
        loadings.round(digits).to_string(),
        "",
        variance_table(model).round(digits).to_string(),
    ]
    phi = getattr(model, "factor_correlation_", None)
    if phi is not None and not np.array_equal(phi, np.eye(len(phi))):
        names = factor_names(model)
        frame = pd.DataFrame(phi, index=names, columns=names)
        lines += ["", "Factor correlations", frame.round(digits).to_string()]
    if X is not None:
        from latentlab.psychometrics.goodness_of_fit import goodness_of_fit

        fit = goodness_of_fit(model, X)
        value = fit["value"]
        rmsea = fit.loc["rmsea"]
        lines += [
            "",
            f"Goodness of fit (n = {int(value['n'])}"
            f"{', full-information ML' if fit.attrs.get('missing') else ''})",
            f"  chi2 = {value['chi2']:.{digits}f} on {int(value['df'])} df, "
            f"p = {value['p_value']:.{digits}g}",
            f"  RMSEA = {rmsea['value']:.{digits}f} "
            f"[{rmsea['lower']:.{digits}f}, {rmsea['upper']:.{digits}f}], "
            f"CFI = {value['cfi']:.{digits}f}, TLI = {value['tli']:.{digits}f}, "
            f"SRMR = {value['srmr']:.{digits}f}",
            f"  log-likelihood = {value['loglik']:.{digits}f}, "
            f"AIC = {value['aic']:.{digits}f}, BIC = {value['bic']:.{digits}f}",
        ]
        lines += [f"  note: {note}" for note in fit.attrs.get("notes", [])]
    return "\n".join(lines)
