"""PSIS-LOO of posterior draws, with a warning where it is unreliable, and the LOO-PIT
of every observed entry."""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["loo", "loo_pit"]


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
    if _approximate(datatree):
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


def _approximate(datatree) -> bool:
    """Whether the draws are from an approximation (Laplace, SVI) with its log density."""
    stats = datatree.children.get("sample_stats")
    return (
        datatree.attrs.get("method") in ("laplace", "svi")
        and stats is not None
        and "log_q" in stats.data_vars
    )


def loo_pit(datatree, *, random_state=None):
    """LOO-PIT values of every observed entry: where it falls in the distribution of
    the data replicated by the posterior without its row.

    latentlab scores whole rows (a row's entries are dependent given the
    parameters), so each row's PSIS weights -- from its log-likelihood, corrected by
    ``lp - log_q`` for Laplace/SVI draws -- are shared by its entries, and
    ``arviz.loo_pit`` runs on every observed variable (``x``, and ``y`` for
    supervised PCA) with them.  Uniform values mean calibrated predictions; missing
    entries are NaN.

    Parameters
    ----------
    datatree : xarray.DataTree
        From ``sample_posterior`` (or ``to_datatree``), with ``posterior_predictive``.
    random_state : int or numpy Generator, optional
        Tie-breaking for discrete data (pLSA's counts).

    Returns
    -------
    xarray.Dataset
        One variable per observed site, dims (obs, column).
    """
    import arviz as az
    import xarray as xr

    if "posterior_predictive" not in datatree.children:
        raise ValueError(
            "loo_pit needs a 'posterior_predictive' group: sample_posterior(..., "
            "predictive=True) or to_datatree"
        )
    sample_dims = ["chain", "draw"]
    (loglik,) = datatree["log_likelihood"].data_vars.values()
    log_ratios = -loglik
    if _approximate(datatree):
        stats = datatree["sample_stats"]
        log_ratios = log_ratios + (stats["lp"] - stats["log_q"])
    if datatree.attrs.get("method") == "point":  # a point mass: every draw weighs the same
        log_weights = xr.full_like(
            log_ratios, -np.log(log_ratios.chain.size * log_ratios.draw.size)
        )
        pareto_k = xr.zeros_like(log_ratios.isel(chain=0, draw=0, drop=True))
    else:
        log_weights, pareto_k = log_ratios.azstats.psislw(r_eff=1.0, dim=sample_dims)
    observed = datatree["observed_data"].to_dataset()
    names = list(observed.data_vars)

    def to_entries(per_row):  # each row's value for each of its entries
        return xr.Dataset({n: xr.broadcast(per_row, observed[n])[0] for n in names})

    per_entry = xr.DataTree.from_dict(
        {
            "posterior": xr.Dataset({"row_log_likelihood": loglik}),
            "log_likelihood": to_entries(loglik),
            "posterior_predictive": datatree["posterior_predictive"].to_dataset()[names],
            # a missing entry's placeholder: its PIT is masked below (NaN would spoil
            # every value of the variable)
            "observed_data": observed.fillna(0.0),
        }
    )
    pit = az.loo_pit(
        per_entry,
        var_names=names,
        log_weights=to_entries(log_weights),
        pareto_k=to_entries(pareto_k),
        random_state=random_state,
    )
    return pit.where(observed.notnull())
