"""Model choice: a criterion against K, one line per family (``comparison``)."""

from __future__ import annotations

import numpy as np

from latentlab.plots._common import _axes, _integer_ticks

__all__ = ["comparison"]


# ----------------------------------------------------------------------------- comparison

# error bars: the first of these columns the table has.  For the held-out likelihood,
# the paired standard error of each model's difference from the best -- what compare's
# near_best verdict uses; the fold-to-fold heldout_se is far wider (it carries the
# folds' common difficulty), so bars drawn from it overlapped where the table said
# the models differ
_SE_COLUMNS = {
    "heldout_loglik": ("heldout_se_diff", "heldout_se"),
    "elpd_loo": ("elpd_loo_se",),
}
_LOWER_IS_BETTER = ("AIC", "BIC")


def comparison(table, column: str = "heldout_loglik", *, ax=None):
    """A criterion against K, one line per model family, from :func:`latentlab.compare`.

    Held-out log-likelihood (the default) gets error bars of one standard error of
    each model's difference from the best, paired over the held-out rows (the
    table's ``heldout_se_diff``, which its ``near_best`` verdict uses; the best model's
    bar is empty), ELPD-LOO of one standard error; the best model by ``column`` is
    starred (highest, or lowest for AIC and BIC).

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
    se_column = next((c for c in _SE_COLUMNS.get(column, ()) if c in table.columns), None)
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
        if se_column is not None:
            se = pd.to_numeric(table[se_column][rows], errors="coerce").to_numpy(float)[order]
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
