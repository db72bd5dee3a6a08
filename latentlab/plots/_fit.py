"""Plots of one fit: the variance spectrum (``scree``) and the objective trace
(``convergence``)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab.plots._common import _axes, _feature_label, _integer_ticks, _refuse

__all__ = ["scree", "convergence"]


def _check_complete(X, est, plot: str) -> np.ndarray:
    """X as a complete float array with ``est``'s number of features, else ValueError."""
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"X must be a numeric 2-D array: {err}") from None
    if X.ndim != 2 or X.shape[1] != est.n_features_in_:
        raise ValueError(
            f"X must have shape (n_samples, {est.n_features_in_}), got shape {X.shape}"
        )
    missing = int(np.isnan(X).sum())
    if missing:
        raise ValueError(
            f"{plot} needs complete data: X has {missing} missing entries (NaN), and the "
            "sample covariance spectrum is not defined with them; pass the complete rows "
            "(X[~np.isnan(X).any(axis=1)]) or leave X out"
        )
    if np.isinf(X).any():
        raise ValueError("X contains infinity")
    return X


# ----------------------------------------------------------------------------- scree


def scree(est, X=None, *, ax=None):
    """Variance per component with the noise floor.

    - PCA, PPCA: variance along each kept component (PCA: ddof=1 eigenvalues; PPCA:
      ``||w_k||^2 + sigma2``) as bars, and the noise variance sigma2 as a horizontal
      line: PPCA's ML sigma2 is the mean of the discarded (ddof=0) eigenvalues.
    - BayesianPCA: the ARD view, ``||w_k||^2`` per column (pruned columns in grey),
      the noise variance and the pruning threshold ``prune_level_``.
    - FactorAnalysis: per feature, the variance the factors explain (communality,
      ``sum_k W_jk^2``) stacked on the feature's own noise variance psi_j.
    - KernelPCA: the eigenvalues of the centred Gram matrix.

    Parameters
    ----------
    est : fitted PCA, PPCA, BayesianPCA, FactorAnalysis or KernelPCA
    X : array (n_samples, n_features), optional
        For PCA, PPCA and BayesianPCA: also draw every eigenvalue of X's (ddof=0)
        covariance, so the discarded spectrum shows against the noise floor.
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    from latentlab.estimators import PCA, PPCA, BayesianPCA, FactorAnalysis, KernelPCA

    accepts = "PCA, PPCA, BayesianPCA, FactorAnalysis or KernelPCA"
    if not isinstance(est, (PCA, PPCA, BayesianPCA, FactorAnalysis, KernelPCA)):
        _refuse("scree", est, accepts)
    check_is_fitted(est)
    ax = _axes(ax)
    name = type(est).__name__
    if isinstance(est, FactorAnalysis):
        W, psi = est.params_["W"], est.noise_variance_
        communality = np.sum(W**2, axis=1)
        features = np.arange(len(psi))
        ax.bar(features, communality, label="explained by the factors")
        ax.bar(features, psi, bottom=communality, color="0.7", label="noise variance psi")
        # the stacked bars' sticky edges would otherwise pin the top of the tallest one
        # to the frame, hiding a small psi on top of it
        ax.set_ylim(0, 1.05 * float(np.max(communality + psi)))
        ax.set_xticks(features, [_feature_label(est, j) for j in features])
        ax.set_xlabel("feature")
        ax.set_ylabel("variance")
        ax.set_title(f"{name}(K={est.n_components_}): variance per feature")
        ax.legend()
        return ax
    if isinstance(est, KernelPCA):
        values = est.eigenvalues_
        ax.bar(np.arange(1, len(values) + 1), values)
        ax.set_ylabel("eigenvalue of the centred kernel")
    elif isinstance(est, BayesianPCA):
        sigma2 = est.noise_variance_
        column_variance = np.sum(est.components_all_**2, axis=1)  # pruned rows: zeros
        active = column_variance > 0
        ks = np.arange(1, len(column_variance) + 1)
        ax.bar(ks[active], column_variance[active], label="active: ||w_k||^2")
        if (~active).any():
            # pruned columns are exactly zero; a stub of height sigma2/20 keeps them visible
            ax.bar(ks[~active], np.full((~active).sum(), sigma2 / 20), color="0.7", label="pruned")
        ax.axhline(est.prune_level_, color="C3", ls=":", label="pruning threshold")
        ax.axhline(sigma2, color="k", ls="--", label="noise variance sigma2")
        ax.set_ylabel("variance")
        name = f"{name}: effective rank {est.n_components_} of {est.n_components_max_}"
    else:
        values = est.explained_variance_
        ax.bar(np.arange(1, len(values) + 1), values, label="explained variance")
        if est.noise_variance_ > 0:
            ax.axhline(est.noise_variance_, color="k", ls="--", label="noise variance sigma2")
        ax.set_ylabel("variance" + (" (ddof=1)" if isinstance(est, PCA) else ""))
    if X is not None:
        if isinstance(est, KernelPCA):
            raise ValueError("scree(KernelPCA) takes no X: its eigenvalues are the kernel's")
        X = _check_complete(X, est, "scree")
        spectrum = np.linalg.eigvalsh(np.cov(X, rowvar=False, ddof=0))[::-1]
        ax.plot(
            np.arange(1, len(spectrum) + 1),
            spectrum,
            "o-",
            color="C1",
            ms=3,
            label="eigenvalues of X (ddof=0)",
        )
    ax.set_xlabel("component")
    _integer_ticks(ax.xaxis)
    ax.set_title(name)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return ax


# ----------------------------------------------------------------------------- convergence


def _objective_name(est) -> str:
    """The estimator's own name for its trace (``objective_name_``)."""
    return getattr(est, "objective_name_", "objective")


def convergence(est, *, ax=None, rel_tol: float = 1e-9):
    """The fit's objective trace (``log_likelihoods_``), flagging any decrease.

    EM never decreases its objective beyond round-off: a step with
    ``ll[t] - ll[t-1] < -rel_tol * |ll[t]|`` is marked with a red triangle and
    counted in the title.  SVI/MAP traces are noisy by nature and are not flagged.

    Parameters
    ----------
    est : fitted estimator with ``log_likelihoods_`` (PPCA, BayesianPCA,
        FactorAnalysis, SupervisedPCA, GaussianMixture, PLSA)
    ax : matplotlib Axes, optional
    rel_tol : float, default=1e-9
        Relative size of a drop counted as a decrease.

    Returns
    -------
    ax : matplotlib Axes
    """
    check_is_fitted(est)
    trace = getattr(est, "log_likelihoods_", None)
    if trace is None:
        _refuse("convergence", est, "models fitted iteratively, with a log_likelihoods_ trace")
    trace = np.asarray(trace, dtype=np.float64)
    ax = _axes(ax)
    iterations = np.arange(1, len(trace) + 1)
    ax.plot(iterations, trace, "-" if len(trace) > 1 else "o", color="C0", label="objective")
    is_em = getattr(est, "method", "em") == "em"
    title = f"{type(est).__name__}: {len(trace)} iteration(s)"
    if hasattr(est, "converged_"):
        title += ", converged" if est.converged_ else ", NOT converged"
    if is_em and len(trace) > 1:
        drops = np.flatnonzero(np.diff(trace) < -rel_tol * np.abs(trace[1:])) + 1
        if drops.size:
            ax.plot(
                iterations[drops],
                trace[drops],
                "v",
                color="C3",
                ms=8,
                label=f"decrease ({drops.size})",
            )
            title += f", {drops.size} decrease(s)"
        else:
            title += ", monotone"
    ax.set_xlabel("iteration")
    _integer_ticks(ax.xaxis)
    ax.set_ylabel(_objective_name(est))
    ax.set_title(title)
    ax.legend()
    return ax
