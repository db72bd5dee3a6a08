"""PSIS-LOO of posterior draws, with a warning where it is unreliable."""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["loo"]


def loo(datatree, var_name: str | None = None, *, k_threshold: float = 0.7):
    """PSIS-LOO of a DataTree from ``sample_posterior``, with a warning for bad rows.

    For NUTS draws this is ``arviz.loo(datatree, pointwise=True)``.  For Laplace and SVI
    draws (whose ``sample_stats`` hold ``lp`` and ``log_q``) it is
    ``arviz.loo_approximate_posterior``, which corrects for drawing from an
    approximation.  Rows whose Pareto k exceeds ``k_threshold`` have unreliable
    importance weights (the posterior changes too much without them): a warning
    names how many, and K-fold held-out log-likelihood (``latentlab.compare`` with
    ``cv=...``) is the reliable alternative.

    Returns
    -------
    arviz ELPDDataLOO
        ``.elpd``, ``.se``, ``.p``, ``.pareto_k`` (one per row), ``.elpd_i``...
    """
    import arviz as az

    stats = datatree.children.get("sample_stats")
    approximate = (
        datatree.attrs.get("method") in ("laplace", "svi")
        and stats is not None
        and "log_q" in stats.data_vars
    )
    if approximate:
        result = az.loo_approximate_posterior(
            datatree,
            log_p=stats["lp"].values.ravel(),
            log_q=stats["log_q"].values.ravel(),
            pointwise=True,
            var_name=var_name,
        )
    else:
        result = az.loo(datatree, pointwise=True, var_name=var_name)
    k = np.asarray(result.pareto_k).ravel()
    bad = int(np.sum(~(k <= k_threshold)))  # NaN: the smoothing itself failed
    if bad:
        warnings.warn(
            f"PSIS-LOO is unreliable for {bad} of {k.size} rows (Pareto k > {k_threshold}); "
            "use K-fold held-out log-likelihood instead (e.g. latentlab.compare with cv=10)",
            UserWarning,
            stacklevel=2,
        )
    return result
