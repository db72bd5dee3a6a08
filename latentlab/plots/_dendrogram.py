"""The merge tree of a hierarchical clustering (``dendrogram``)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab.plots._common import _axes, _refuse

__all__ = ["dendrogram"]


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
    if not hasattr(model, "distances_"):
        raise ValueError(
            "dendrogram needs the merge heights: fit the model with "
            "compute_distances=True (or a distance_threshold)"
        )
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
