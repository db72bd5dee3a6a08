"""The plots people expect of latent-variable models, with matplotlib.

Every function takes ``ax=None`` (a new figure when None), draws on it and returns
the Axes.  matplotlib is imported inside the functions, so ``import latentlab`` stays
light.  A model a plot cannot show is refused with a TypeError naming what it accepts.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab._validation import check_level

__all__ = [
    "scree",
    "convergence",
    "latent_scatter",
    "imputation",
    "comparison",
    "loadings_posterior",
    "dendrogram",
]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    return ax


def _refuse(plot: str, est, accepts: str):
    raise TypeError(f"{plot} cannot show {type(est).__name__}; it accepts {accepts}")


def _feature_label(est, j: int) -> str:
    names = getattr(est, "feature_names_in_", None)
    return str(names[j]) if names is not None else f"x{j}"


def _integer_ticks(axis):
    """Ticks only at integers, on an axis of counts (K, component, iteration, row)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


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


def _ellipse_axes(cov2, level):
    """Widths, heights (full lengths) and angles (degrees) of the ``level`` ellipses
    of 2 x 2 Gaussian covariances (..., 2, 2)."""
    from scipy.stats import chi2

    radius = np.sqrt(chi2.ppf(level, df=2))
    values, vectors = np.linalg.eigh(cov2)  # ascending: last is the major axis
    values = np.maximum(values, 0.0)
    angles = np.degrees(np.arctan2(vectors[..., 1, 1], vectors[..., 0, 1]))
    return 2 * radius * np.sqrt(values[..., 1]), 2 * radius * np.sqrt(values[..., 0]), angles


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
        column_variance = np.sum(est.params_["W"] ** 2, axis=0)
        active = column_variance > 0
        ks = np.arange(1, len(column_variance) + 1)
        ax.bar(ks[active], column_variance[active], label="active: ||w_k||^2")
        if (~active).any():
            # pruned columns are exactly zero; a stub of height sigma2/20 keeps them visible
            ax.bar(ks[~active], np.full((~active).sum(), sigma2 / 20), color="0.7", label="pruned")
        ax.axhline(est.prune_level_, color="C3", ls=":", label="pruning threshold")
        ax.axhline(sigma2, color="k", ls="--", label="noise variance sigma2")
        ax.set_ylabel("variance")
        name = f"{name}: effective rank {est.effective_rank_} of {est.n_components_}"
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


# ----------------------------------------------------------------------------- latent


def _check_dims(dims, K, name):
    dims = tuple(dims)
    if K < 2:
        raise ValueError(f"latent_scatter needs at least 2 dimensions; {name} has {K}")
    if (
        len(dims) != 2
        or not all(isinstance(i, (int, np.integer)) and 0 <= i < K for i in dims)
        or dims[0] == dims[1]
    ):
        raise ValueError(f"dims must be two different integers in [0, {K}), got {dims!r}")
    return dims


def _colour_by(c, hue, n) -> dict:
    """How to colour n rows by ``c``/``hue``: per-row ``colours`` (n, 4), and either
    ``groups`` with each row's ``codes`` (for a legend) or a ``mappable`` (for a
    colorbar), and the values' ``name`` (a pandas Series') if any.

    Non-numeric, boolean or categorical values, and integers with at most 10 distinct
    values, are groups (one tab10 colour each); other numbers go through viridis.
    """
    import matplotlib as mpl
    import pandas as pd

    if c is not None and hue is not None:
        raise ValueError("give c or hue (the same thing, by its seaborn name), not both")
    raw = c if c is not None else hue
    name = getattr(raw, "name", None)
    categorical = isinstance(getattr(raw, "dtype", None), pd.CategoricalDtype)
    values = np.asarray(raw, dtype=object) if categorical else np.asarray(raw)
    if values.ndim != 1 or len(values) != n:
        raise ValueError(f"c/hue must have one value per row of X ({n}), got shape {values.shape}")
    kind = values.dtype.kind
    if kind not in "iuf" or (kind in "iu" and len(np.unique(values)) <= 10):
        groups = list(pd.unique(values))
        try:
            groups = sorted(groups)
        except TypeError:  # mixed types: keep the order of appearance
            pass
        codes = np.array([groups.index(v) for v in values])
        colours = mpl.colormaps["tab10"](codes % 10)
        return {"colours": colours, "groups": groups, "codes": codes, "name": name}
    values = values.astype(np.float64)
    if not np.isfinite(values).all():
        raise ValueError("numeric c/hue must be finite (NaN or inf found)")
    mappable = mpl.cm.ScalarMappable(mpl.colors.Normalize(values.min(), values.max()), "viridis")
    return {"colours": mappable.to_rgba(values), "mappable": mappable, "name": name}


def _scatter(ax, xy, colouring, **kwargs):
    """Points in their colours, with a legend of the groups or a colorbar."""
    name = colouring["name"]
    if "groups" not in colouring:
        ax.scatter(xy[:, 0], xy[:, 1], c=colouring["colours"], **kwargs)
        colorbar = ax.figure.colorbar(colouring["mappable"], ax=ax)
        if name is not None:
            colorbar.set_label(str(name))
        return
    for i, group in enumerate(colouring["groups"]):
        rows = colouring["codes"] == i
        colour = colouring["colours"][rows][0]
        ax.scatter(xy[rows, 0], xy[rows, 1], color=colour, label=str(group), **kwargs)
    ax.legend(title=None if name is None else str(name), fontsize="small")


def _include_ellipses(ax, centres, cov2, level):
    """Grow the data limits to hold every ellipse (a collection's are not counted)."""
    from scipy.stats import chi2

    radius = np.sqrt(chi2.ppf(level, df=2))
    half = radius * np.sqrt(np.maximum(np.diagonal(cov2, axis1=-2, axis2=-1), 0.0))
    ax.update_datalim(np.concatenate([centres - half, centres + half]))
    ax.autoscale_view()


def latent_scatter(
    est, X, dims=(0, 1), *, c=None, hue=None, ellipses: bool = True, level=0.9, ax=None
):
    """Rows of X in latent space.

    - Gaussian latent models (PPCA, BayesianPCA, FactorAnalysis, SupervisedPCA): the
      posterior means E[z | x] on the two latent ``dims``, with each row's posterior
      ``level`` ellipse (rows with missing entries have wider ones).
    - GaussianMixture: the latent is the component label, so the rows are drawn in
      data space (features ``dims``) coloured by their responsibilities (a blend of
      the component colours), with each component's ``level`` ellipse.

    Parameters
    ----------
    est : fitted PPCA, BayesianPCA, FactorAnalysis, SupervisedPCA or GaussianMixture
    X : array (n_samples, n_features)
    dims : two different ints, default=(0, 1)
    c, hue : array (n_samples,), optional
        Colour the rows by this (``hue`` is seaborn's name for it; give one).
        Groups (strings, booleans, categoricals, or integers with at most 10
        distinct values) get one colour each and a legend; other numbers a
        colormap and a colorbar.  A row's posterior ellipse takes its colour.  For
        a GaussianMixture it replaces the responsibility colouring of the rows.
    ellipses : bool, default=True
    level : float in (0, 1), default=0.9
        Probability inside each ellipse (chi-square with 2 degrees of freedom).
        The axes limits hold every ellipse whole.
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    from matplotlib.collections import EllipseCollection
    from matplotlib.patches import Ellipse

    from latentlab.estimators import GaussianMixture

    level = check_level(level)
    name = type(est).__name__
    by = c is not None or hue is not None
    if isinstance(est, GaussianMixture):
        check_is_fitted(est)
        dims = _check_dims(dims, est.n_features_in_, f"{name}'s data")
        X = np.asarray(X, dtype=np.float64)
        resp = est.predict_proba(X)
        K = resp.shape[1]
        import matplotlib as mpl

        palette = np.asarray(mpl.colormaps["tab10"](np.arange(K) % 10))[:, :3]
        ax = _axes(ax)
        xy = X[:, list(dims)]
        if by:
            _scatter(ax, xy, _colour_by(c, hue, len(X)), s=10)
            # the groups own the colours now: components in dark grey, not to be
            # confused with them
            palette = np.full((K, 3), 0.25)
        else:
            ax.scatter(xy[:, 0], xy[:, 1], s=10, c=np.clip(resp @ palette, 0, 1))
        means = est.means_[:, dims]
        ax.scatter(means[:, 0], means[:, 1], marker="x", s=60, c=palette, label="means")
        if ellipses:
            cov = est.covariances_
            cov2 = {
                "full": lambda: cov[:, dims][:, :, dims],
                "tied": lambda: np.broadcast_to(cov[np.ix_(dims, dims)], (K, 2, 2)),
                "diag": lambda: np.stack([np.diag(v[list(dims)]) for v in cov]),
                "spherical": lambda: cov[:, None, None] * np.eye(2),
            }[est.covariance_type]()
            widths, heights, angles = _ellipse_axes(cov2, level)
            for k in range(K):
                ax.add_patch(
                    Ellipse(
                        means[k],
                        widths[k],
                        heights[k],
                        angle=angles[k],
                        fill=False,
                        color=palette[k],
                        lw=1.5,
                    )
                )
        ax.set_xlabel(_feature_label(est, dims[0]))
        ax.set_ylabel(_feature_label(est, dims[1]))
        colouring = "coloured by c" if by else "coloured by responsibility"
        ax.set_title(f"{name}(K={K}): rows {colouring}, {level:.0%} ellipses")
        return ax
    if not hasattr(est, "posterior_latent"):
        _refuse(
            "latent_scatter",
            est,
            "PPCA, BayesianPCA, FactorAnalysis, SupervisedPCA (Gaussian posterior of z) "
            "or GaussianMixture",
        )
    check_is_fitted(est)
    dims = _check_dims(dims, est.n_components_, name)
    mean, cov = est.posterior_latent(X)
    ax = _axes(ax)
    xy = mean[:, list(dims)]
    edges = "C0"
    if by:
        colouring = _colour_by(c, hue, len(xy))
        _scatter(ax, xy, colouring, s=10, zorder=3)
        edges = colouring["colours"]
    else:
        ax.scatter(xy[:, 0], xy[:, 1], s=10, color="C0", zorder=3)
    if ellipses:
        cov2 = cov[:, dims][:, :, dims]
        widths, heights, angles = _ellipse_axes(cov2, level)
        # one collection, however many rows: cheap to draw
        ax.add_collection(
            EllipseCollection(
                widths,
                heights,
                angles,
                units="xy",
                offsets=xy,
                offset_transform=ax.transData,
                facecolors="none",
                edgecolors=edges,
                alpha=0.3,
                linewidths=0.8,
            )
        )
        _include_ellipses(ax, xy, cov2, level)
    ax.set_xlabel(f"E[z{dims[0]} | x]")
    ax.set_ylabel(f"E[z{dims[1]} | x]")
    ax.set_title(f"{name}: posterior means" + (f", {level:.0%} ellipses" if ellipses else ""))
    return ax


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


# ----------------------------------------------------------------------------- comparison

_SE_COLUMN = {"heldout_loglik": "heldout_se", "elpd_loo": "elpd_loo_se"}
_LOWER_IS_BETTER = ("AIC", "BIC")


def comparison(table, column: str = "heldout_loglik", *, ax=None):
    """A criterion against K, one line per model family, from :func:`latentlab.compare`.

    Held-out log-likelihood (the default) and ELPD-LOO get error bars of one
    standard error; the best model by ``column`` is starred (highest, or lowest for
    AIC and BIC).

    Parameters
    ----------
    table : pandas.DataFrame from :func:`latentlab.compare`
    column : str, default="heldout_loglik"
        Any numeric column, e.g. ``"heldout_loglik"``, ``"elpd_loo"``, ``"BIC"``.
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    import pandas as pd

    if not isinstance(table, pd.DataFrame):
        raise TypeError(
            f"comparison takes the DataFrame of latentlab.compare, got {type(table).__name__}"
        )
    missing = [c for c in ("family", "K", column) if c not in table.columns]
    if missing:
        raise ValueError(
            f"table lacks column(s) {missing}; comparison takes the DataFrame of "
            "latentlab.compare (columns: " + ", ".join(map(str, table.columns)) + ")"
        )
    se_column = _SE_COLUMN.get(column)
    values = pd.to_numeric(table[column], errors="coerce").astype(float)
    K = pd.to_numeric(table["K"], errors="coerce").astype(float)
    usable = np.isfinite(values) & np.isfinite(K)
    if not usable.any():
        raise ValueError(f"no model in the table has both K and a finite {column!r}")
    ax = _axes(ax)
    for family in pd.unique(table["family"][usable]):
        rows = usable & (table["family"] == family)
        order = np.argsort(K[rows].to_numpy(), kind="stable")
        k, v = K[rows].to_numpy()[order], values[rows].to_numpy()[order]
        se = None
        if se_column in table.columns:
            se = table[se_column][rows].astype(float).to_numpy()[order]
        ax.errorbar(k, v, yerr=se, marker="o", capsize=3, label=str(family))
    pick = values[usable].idxmin() if column in _LOWER_IS_BETTER else values[usable].idxmax()
    ax.plot(
        K[pick], values[pick], "*", color="gold", mec="k", ms=16, zorder=4, label=f"best: {pick}"
    )
    ax.set_xlabel("K (number of components)")
    _integer_ticks(ax.xaxis)
    labels = {
        "heldout_loglik": "held-out log-likelihood per row",
        "elpd_loo": "ELPD-LOO",
        "loglik": "training log-likelihood",
    }
    ax.set_ylabel(
        labels.get(column, column) + (" (lower is better)" if column in _LOWER_IS_BETTER else "")
    )
    ax.set_title(f"Model comparison by {column}")
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


def dendrogram(model, *, ax=None, **kwargs):
    """The merge tree of a fitted ``AgglomerativeClustering``, drawn by SciPy's
    ``dendrogram`` from ``children_`` and ``distances_``.

    ``kwargs`` go to :func:`scipy.cluster.hierarchy.dendrogram` (e.g.
    ``truncate_mode="lastp", p=12``); ``color_threshold`` defaults to the model's
    ``distance_threshold`` when it has one.  Returns the Axes.
    """
    from scipy.cluster.hierarchy import dendrogram as scipy_dendrogram

    if not (hasattr(model, "children_") or hasattr(model, "linkage")):
        _refuse("dendrogram", model, "fitted AgglomerativeClustering models")
    check_is_fitted(model, "children_")
    children = np.asarray(model.children_)
    n = int(model.n_leaves_)
    size = np.ones(2 * n - 1)
    for i, (a, b) in enumerate(children):
        size[n + i] = size[a] + size[b]
    Z = np.column_stack([children.astype(np.float64), model.distances_, size[n:]])
    if getattr(model, "distance_threshold", None) is not None:
        kwargs.setdefault("color_threshold", model.distance_threshold)
    ax = _axes(ax)
    scipy_dendrogram(Z, ax=ax, **kwargs)
    ax.set_ylabel(f"merge height ({getattr(model, 'linkage', '')} linkage)")
    ax.set_title(f"Dendrogram of {n} samples")
    return ax
