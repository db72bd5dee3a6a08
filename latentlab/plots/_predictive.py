"""Posterior predictive checks (``ppc``): data sets replicated from the fitted model or
its posterior draws, set against the observed data column by column or through the
eigenvalue spectrum of their covariance."""

from __future__ import annotations

import numpy as np

from latentlab.plots._common import _axes

__all__ = ["ppc"]

KINDS = ("columns", "spectrum")
MAX_COLUMN_PANELS = 16


def ppc(
    tree,
    *,
    kind: str = "spectrum",
    var_name: str = "x",
    n_replicates: int = 50,
    columns=None,
    ax=None,
):
    """Posterior predictive check of a fitted model: does data it generates look like
    the data it was fitted to?

    Reads a DataTree from ``model.sample_posterior(X)`` (data replicated from each
    posterior draw) or ``model.to_datatree(X)`` (from the fitted point).  Each
    replicate is masked like the observed data (its entries missing where X's are),
    so like is compared with like.

    - ``kind="spectrum"``: the eigenvalues, largest first, of the covariance of the
      observed data (black) and of each replicate (thin blue), pairwise-complete
      where entries are missing, on a log scale.  A latent-variable model with too
      few components shows an observed eigenvalue above the replicates' band where
      its components end; the title names the eigenvalue whose posterior predictive
      p-value (the fraction of replicates with an eigenvalue at least the observed
      one) is most extreme, with that p-value: near 0 or 1 is misfit.
    - ``kind="columns"``: one panel per column with the observed values' histogram
      (black) over the replicates' (thin blue), on common bins: skewness, bounds,
      several modes a Gaussian model misses.

    Parameters
    ----------
    tree : xarray.DataTree
        With ``posterior_predictive`` and ``observed_data`` groups.
    kind : {"spectrum", "columns"}, default="spectrum"
    var_name : str, default="x"
        The observed variable (``"y"`` for supervised PCA's targets).
    n_replicates : int, default=50
        Replicates drawn, evenly spaced over the tree's chains and draws.
    columns : sequence of int, optional
        For ``kind="columns"``: the columns shown (default: all, at most 16).
    ax : matplotlib Axes (``"spectrum"``) or sequence of Axes, one per column
        (``"columns"``), optional

    Returns
    -------
    ax : matplotlib Axes, or an array of Axes for ``kind="columns"``
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if isinstance(n_replicates, bool) or not isinstance(n_replicates, (int, np.integer)):
        raise ValueError(f"n_replicates must be a positive integer, got {n_replicates!r}")
    if n_replicates < 1:
        raise ValueError(f"n_replicates must be a positive integer, got {n_replicates!r}")
    observed, replicates = _observed_and_replicates(tree, var_name, int(n_replicates))
    if kind == "spectrum":
        return _spectrum(observed, replicates, ax)
    return _columns(observed, replicates, columns, tree, var_name, ax)


def _observed_and_replicates(tree, var_name, n_replicates):
    """The observed (n, d) data and (R, n, d) replicates masked like it."""
    children = getattr(tree, "children", None)
    if children is None:
        raise TypeError(
            "ppc takes an xarray DataTree (from sample_posterior or to_datatree), "
            f"got {type(tree).__name__}"
        )
    for group in ("posterior_predictive", "observed_data"):
        if group not in children:
            raise ValueError(
                f"ppc needs a {group!r} group: use model.sample_posterior(X) (with "
                "predictive=True) or model.to_datatree(X)"
            )
    if var_name not in tree["observed_data"].data_vars:
        names = list(tree["observed_data"].data_vars)
        raise ValueError(f"var_name={var_name!r} is not an observed variable; it has {names}")
    observed = np.asarray(tree["observed_data"][var_name].values, dtype=np.float64)
    predicted = np.asarray(tree["posterior_predictive"][var_name].values, dtype=np.float64)
    predicted = predicted.reshape((-1,) + observed.shape)
    picks = np.unique(np.linspace(0, len(predicted) - 1, n_replicates).round().astype(int))
    replicates = predicted[picks]
    replicates[:, np.isnan(observed)] = np.nan
    return observed, replicates


def _covariance_spectrum(data) -> np.ndarray:
    """Eigenvalues, largest first, of the pairwise-complete covariance of ``data``."""
    import pandas as pd

    covariance = pd.DataFrame(data).cov().to_numpy()
    return np.linalg.eigvalsh(covariance)[::-1]


def _spectrum(observed, replicates, ax):
    ax = _axes(ax)
    index = np.arange(1, observed.shape[1] + 1)
    replicated = np.array([_covariance_spectrum(r) for r in replicates])
    seen = _covariance_spectrum(observed)
    for values in replicated:
        ax.plot(index, values, color="tab:blue", alpha=0.25, lw=0.8)
    ax.plot(index, seen, color="black", lw=2, marker="o", ms=3)
    p_values = np.mean(replicated >= seen, axis=0)
    worst = int(np.argmin(np.minimum(p_values, 1.0 - p_values)))
    if np.all(replicated > 0) and np.all(seen > 0):
        ax.set_yscale("log")
    ax.set_xlabel("eigenvalue index")
    ax.set_ylabel("eigenvalue of the covariance")
    ax.set_title(
        f"observed (black) vs {len(replicated)} replicates; "
        f"most extreme: eigenvalue {worst + 1}, p = {p_values[worst]:.2f}"
    )
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return ax


def _columns(observed, replicates, columns, tree, var_name, ax):
    d = observed.shape[1]
    if columns is None:
        columns = list(range(min(d, MAX_COLUMN_PANELS)))
    columns = [int(j) for j in np.atleast_1d(columns)]
    bad = [j for j in columns if not 0 <= j < d]
    if bad or not columns:
        raise ValueError(f"columns must be indices in [0, {d}), got {columns}")
    axes = _column_axes(ax, len(columns))
    labels = tree["observed_data"][var_name].coords
    dim = tree["observed_data"][var_name].dims[-1]
    names = [str(v) for v in labels[dim].values] if dim in labels else [str(j) for j in range(d)]
    for panel, j in zip(axes, columns, strict=True):
        seen = observed[:, j][~np.isnan(observed[:, j])]
        pooled = np.concatenate([seen, replicates[:, :, j][~np.isnan(replicates[:, :, j])]])
        bins = np.histogram_bin_edges(pooled, bins=min(30, max(5, int(np.sqrt(len(seen))))))
        for r in replicates[:, :, j]:
            panel.stairs(*_density(r[~np.isnan(r)], bins), color="tab:blue", alpha=0.25, lw=0.8)
        panel.stairs(*_density(seen, bins), color="black", lw=1.8)
        panel.set_title(names[j], fontsize="small")
        panel.set_yticks([])
    return np.asarray(axes)


def _density(values, bins):
    heights, edges = np.histogram(values, bins=bins, density=True)
    return heights, edges


def _column_axes(ax, n_panels):
    if ax is None:
        import matplotlib.pyplot as plt

        n_cols = min(4, n_panels)
        n_rows = -(-n_panels // n_cols)
        fig, grid = plt.subplots(n_rows, n_cols, figsize=(3 * n_cols, 2.2 * n_rows), squeeze=False)
        for extra in grid.ravel()[n_panels:]:
            extra.set_visible(False)
        fig.tight_layout()
        return list(grid.ravel()[:n_panels])
    axes = list(np.atleast_1d(ax))
    if len(axes) != n_panels:
        raise ValueError(f"ax must hold one Axes per column shown ({n_panels}), got {len(axes)}")
    return axes
