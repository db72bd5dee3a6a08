"""Rows in latent space (``latent_scatter``): posterior means with their ellipses, or a
mixture's rows coloured by responsibility with its components' ellipses."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab._validation import check_level
from latentlab.plots._common import _axes, _feature_label, _refuse

__all__ = ["latent_scatter"]


def _ellipse_axes(cov2, level):
    """Widths, heights (full lengths) and angles (degrees) of the ``level`` ellipses
    of 2 x 2 Gaussian covariances (..., 2, 2)."""
    from scipy.stats import chi2

    radius = np.sqrt(chi2.ppf(level, df=2))
    values, vectors = np.linalg.eigh(cov2)  # ascending: last is the major axis
    values = np.maximum(values, 0.0)
    angles = np.degrees(np.arctan2(vectors[..., 1, 1], vectors[..., 0, 1]))
    return 2 * radius * np.sqrt(values[..., 1]), 2 * radius * np.sqrt(values[..., 0]), angles


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
