"""How many factors: the scree of observed eigenvalues against parallel analysis's
reference (``parallel_analysis``)."""

from __future__ import annotations

import numpy as np

from latentlab.plots._common import _axes, _integer_ticks

__all__ = ["parallel_analysis"]

_KINDS = {"factors": "SMC-reduced correlations", "components": "correlations"}


def parallel_analysis(table, *, kind: str = "factors", ax=None):
    """Scree plot with Horn's parallel analysis: the observed eigenvalues against those
    of random (and, where computed, resampled) data, the retained ones filled.

    Parameters
    ----------
    table : pandas.DataFrame from :func:`latentlab.psychometrics.parallel_analysis`
    kind : {"factors", "components"}, default="factors"
        The eigenvalues of the reduced correlation matrix (factors) or of the
        correlation matrix (components); the table must hold that kind.
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    import pandas as pd

    if not isinstance(table, pd.DataFrame) or "reference" not in table.attrs:
        raise TypeError(
            "parallel_analysis plots the DataFrame of latentlab.psychometrics."
            f"parallel_analysis, got {type(table).__name__}"
        )
    if kind not in _KINDS:
        raise ValueError(f"kind must be 'factors' or 'components', got {kind!r}")
    observed = f"observed_{kind}"
    if observed not in table.columns:
        raise ValueError(
            f"the table holds no eigenvalues of {kind} (parallel_analysis was run with another "
            "kind=); columns: " + ", ".join(map(str, table.columns))
        )
    ax = _axes(ax)
    index = np.asarray(table.index, dtype=float)
    retained = table.attrs.get(f"n_{kind}") or 0
    values = table[observed].to_numpy(dtype=float)
    ax.plot(index, values, "-", color="C0", label=f"observed ({_KINDS[kind]})")
    ax.plot(index[:retained], values[:retained], "o", color="C0", label=f"retained: {retained}")
    ax.plot(index[retained:], values[retained:], "o", color="C0", mfc="none")
    quantile = table.attrs.get("quantile", 0.95)
    for source, style in (("simulated", "--"), ("resampled", ":")):
        column = f"{source}_{kind}_quantile"
        if column in table.columns:
            ax.plot(
                index,
                table[column].to_numpy(dtype=float),
                style,
                color="C1" if source == "simulated" else "C2",
                label=f"{source} data, {quantile:.0%} quantile",
            )
    ax.axhline(1.0 if kind == "components" else 0.0, color="grey", lw=0.5)
    ax.set_xlabel(kind[:-1])
    ax.set_ylabel("eigenvalue")
    _integer_ticks(ax.xaxis)
    ax.legend()
    return ax
