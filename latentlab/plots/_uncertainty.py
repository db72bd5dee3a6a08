"""Uncertainty plots: imputed values with their intervals (``imputation``) and the
posterior of the loadings after alignment (``loadings_posterior``)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab._validation import check_level
from latentlab.plots._common import _axes, _feature_label, _integer_ticks, _refuse

__all__ = ["imputation", "loadings_posterior"]


# ----------------------------------------------------------------------------- imputation


def imputation(est, X, column: int, *, level=0.9, X_true=None, ax=None):
    """Imputed values of one column with their ``level`` intervals.

    Observed entries of the column are grey dots; each missing entry is its
    conditional mean with an error bar spanning ``est.impute_interval(X, level)``
    (or mean -/+ z sd from ``est.impute(X, return_std=True)`` for models without
    ``impute_interval``).  With ``X_true`` the hidden values are drawn as crosses and
    the title says how many fall inside their interval.

    Parameters
    ----------
    est : fitted model with ``impute`` (PPCA, BayesianPCA, FactorAnalysis,
        GaussianMixture, ...)
    X : array (n_samples, n_features) with NaN for the missing entries
    column : int
    level : float in (0, 1), default=0.9
    X_true : array (n_samples, n_features), optional
        The complete data, when the missing entries were hidden on purpose.
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    if not hasattr(est, "impute"):
        _refuse("imputation", est, "models with impute(X, return_std=True)")
    check_is_fitted(est)
    level = check_level(level)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got an array with {X.ndim} dimension(s)")
    if isinstance(column, bool) or not isinstance(column, (int, np.integer)):
        raise ValueError(f"column must be an integer, got {column!r}")
    if not 0 <= column < X.shape[1]:
        raise ValueError(f"column={column} is out of range for X with {X.shape[1]} columns")
    missing = np.isnan(X[:, column])
    if not missing.any():
        raise ValueError(f"column {column} of X has no missing entries (NaN) to impute")
    filled, std = est.impute(X, return_std=True)
    if hasattr(est, "impute_interval"):
        lower, upper = est.impute_interval(X, level=level)
    else:
        from scipy.stats import norm

        z = norm.ppf(0.5 + 0.5 * level)
        lower, upper = filled - z * std, filled + z * std
    rows = np.arange(X.shape[0])
    value = filled[missing, column]
    ax = _axes(ax)
    ax.scatter(rows[~missing], X[~missing, column], s=8, color="0.6", label="observed")
    ax.errorbar(
        rows[missing],
        value,
        yerr=[value - lower[missing, column], upper[missing, column] - value],
        fmt="o",
        ms=4,
        color="C0",
        capsize=2,
        label=f"imputed, {level:.0%} interval",
    )
    what = _feature_label(est, column)
    title = f"{type(est).__name__}: {missing.sum()} imputed entries of {what}"
    if X_true is not None:
        X_true = np.asarray(X_true, dtype=np.float64)
        if X_true.shape != X.shape:
            raise ValueError(f"X_true must have X's shape {X.shape}, got {X_true.shape}")
        truth = X_true[missing, column]
        ax.scatter(rows[missing], truth, marker="x", color="C3", zorder=3, label="true value")
        inside = (lower[missing, column] <= truth) & (truth <= upper[missing, column])
        title += f"; {inside.sum()} of {inside.size} inside"
    ax.set_xlabel("row")
    _integer_ticks(ax.xaxis)
    ax.set_ylabel(_feature_label(est, column))
    ax.set_title(title)
    ax.legend()
    return ax


# ----------------------------------------------------------------------------- posterior


def _posterior_draws(tree, var_name):
    posterior = None
    children = getattr(tree, "children", None)
    if children is not None and "posterior" in children:
        posterior = tree["posterior"]
    if posterior is None:
        raise TypeError(
            "loadings_posterior takes an xarray DataTree with a 'posterior' group "
            f"(from sample_posterior or arviz.from_dict), got {type(tree).__name__}"
        )
    if var_name not in posterior.data_vars:
        raise ValueError(
            f"the posterior has no variable {var_name!r}; it has {list(posterior.data_vars)}"
        )
    draws = np.asarray(posterior[var_name].values, dtype=np.float64)
    if draws.ndim != 4:
        raise ValueError(
            f"posterior {var_name!r} must have dims (chain, draw, d, K), got shape {draws.shape}"
        )
    return draws.reshape(-1, *draws.shape[2:])


def loadings_posterior(
    tree, *, var_name="W", component: int = 0, reference=None, level=0.9, ax=None
):
    """Posterior of one column of the loadings, per feature, after alignment.

    Loadings are identified only up to rotation, so draws are first rotated onto a
    common frame by orthogonal Procrustes: onto ``reference`` if given (say the
    fitted ``est.params_["W"]``); else, if the tree says it is aligned already
    (``attrs["aligned"] == "procrustes"``, as ``sample_posterior`` makes it), as
    they are; else onto their own Procrustes mean (generalised Procrustes, from the
    first draw).

    Parameters
    ----------
    tree : xarray.DataTree
        With ``posterior[var_name]`` of dims (chain, draw, d, K).
    var_name : str, default="W"
    component : int, default=0
        Which column of the loadings to show.
    reference : array (d, K) or fitted estimator, optional
        Drawn as crosses, and the frame the draws are rotated onto.  An estimator
        (the one the draws came from) gives its ``params_[var_name]`` and its
        feature names.
    level : float in (0, 1), default=0.9
        Central interval shown as error bars around the posterior mean.
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    from latentlab.posterior import procrustes_rotations

    level = check_level(level)
    draws = _posterior_draws(tree, var_name)
    d, K = draws.shape[1:]
    if isinstance(component, bool) or not isinstance(component, (int, np.integer)):
        raise ValueError(f"component must be an integer, got {component!r}")
    if not 0 <= component < K:
        raise ValueError(f"component={component} is out of range: the loadings have K={K}")
    labeller = None
    if reference is not None:
        if hasattr(reference, "get_params"):  # a fitted estimator
            labeller = reference
            check_is_fitted(reference)
            params = getattr(reference, "params_", None) or {}
            if var_name not in params:
                raise ValueError(
                    f"reference {type(reference).__name__} has no params_[{var_name!r}] "
                    f"(it has {sorted(params)}); pass var_name, or the loadings array"
                )
            reference = params[var_name]
        try:
            reference = np.asarray(reference, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                "reference must be a (d, K) array of loadings or a fitted estimator, "
                f"got {type(reference).__name__}"
            ) from None
        if reference.shape != (d, K):
            raise ValueError(f"reference must have shape ({d}, {K}), got {reference.shape}")
        draws = draws @ procrustes_rotations(draws, reference)
        frame = "rotated onto the reference"
    elif tree.attrs.get("aligned") == "procrustes":
        frame = "aligned by sample_posterior"
    else:
        target = draws[0]
        for _ in range(5):  # a few rounds settle the mean frame
            draws = draws @ procrustes_rotations(draws, target)
            target = draws.mean(axis=0)
        frame = "rotated onto their Procrustes mean"
    values = draws[:, :, component]
    mean = values.mean(axis=0)
    tail = 50 * (1 - level)
    low, high = np.percentile(values, [tail, 100 - tail], axis=0)
    ax = _axes(ax)
    features = np.arange(d)
    ax.errorbar(
        features,
        mean,
        yerr=[mean - low, high - mean],
        fmt="o",
        capsize=3,
        color="C0",
        label=f"posterior mean, {level:.0%} interval",
    )
    if reference is not None:
        ax.scatter(
            features, reference[:, component], marker="x", color="C3", zorder=3, label="reference"
        )
    ax.axhline(0.0, color="0.7", lw=0.8)
    if d <= 30:  # every feature by name, while they fit
        ax.set_xticks(features, [_feature_label(labeller, j) for j in features])
    else:
        _integer_ticks(ax.xaxis)
    ax.set_xlabel("feature")
    ax.set_ylabel(f"{var_name}[:, {component}]")
    ax.set_title(f"Posterior of loadings column {component} ({len(values)} draws, {frame})")
    ax.legend()
    return ax
