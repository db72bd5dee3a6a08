"""Model search for :class:`~latentlab.impute.Imputer`.

The model families Imputer builds by name, the largest K each accepts (asked of the
estimator), the candidate grids, the masks of held-out entries, the scoring of each
candidate by the conditional log-density of those entries, and the selection table.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.base import clone

from latentlab import _early_stop as early_stop
from latentlab._progress import progress
from latentlab._shapes import search_grid

# model name -> estimator class name in latentlab
FAMILIES = {
    "ppca": "PPCA",
    "fa": "FactorAnalysis",
    "bpca": "BayesianPCA",
    "gmm": "GaussianMixture",
}
MODELS = ("auto", *FAMILIES)
# Names are matched case-insensitively, and the class names work too ("PPCA",
# "FactorAnalysis"): a user who just imported latentlab.PPCA will type that.
_ALIASES = {name: name for name in MODELS} | {cls.lower(): key for key, cls in FAMILIES.items()}

# Candidate ranks of the latent models and numbers of mixture components.  Every
# distinct K is one XLA compilation (seconds) on first use, so the grid is sparse.
RANK_GRID = (1, 2, 3, 5, 8, 12, 18)
MIXTURE_GRID = (1, 2, 3)
# "auto" tries one mixture: two full-covariance components detect cluster structure;
# more overfit small data badly and each costs a compilation.  Only where there are at
# least as many rows as the mixture has parameters (K d(d + 3)/2 + K - 1): below
# that its covariances are barely determined, it scored 5-400 nats per entry below
# the best model (wine, breast_cancer with 30% missing) and its one fit, which crawled
# towards components collapsed onto the covariance floor, took most of the search
# (measured by maximum likelihood, before GaussianMixture's covariance_prior="auto").
AUTO_MIXTURES = (2,)
# EM tolerance of the candidate fits that only rank models (the chosen one is refitted
# at ``Imputer.tol``).  On the four benchmark data sets at 20% hidden, 2 seeds each,
# 1e-3 instead of 1e-4 picked the same model every time, moved the RMSE by at most
# 0.001 column sd and made ``auto`` 2.5x faster on breast_cancer (FA with 18
# factors needs 15 SQUAREM cycles instead of ~40).
SEARCH_TOL = 1e-3
# A candidate stops scoring masks once it clearly trails the best so far on the masks
# both have scored (latentlab._early_stop; STOP_Z standard errors): its remaining
# masks would be expected to widen the gap.  On breast_cancer with 30% missing the
# two-component full-covariance mixture trailed factor analysis by ~9 nats per hidden
# entry on the first mask, and its other two fits were most of ``Imputer()``'s time.
STOP_Z = early_stop.STOP_Z


def canonical_name(name: str):
    """The family key ("ppca", ...) or "auto" for a model name, None if unknown."""
    return _ALIASES.get(name.lower())


def family_class(name: str) -> type:
    """The latentlab estimator class of a model family.

    Parameters
    ----------
    name : str
        A key of :data:`FAMILIES` (``"ppca"``, ``"fa"``, ``"bpca"``, ``"gmm"``) or a
        class name such as ``"FactorAnalysis"``, in any case.

    Returns
    -------
    type
        For example ``latentlab.PPCA`` for ``"ppca"``.
    """
    import latentlab

    key = canonical_name(name) if isinstance(name, str) else None
    if key not in FAMILIES:
        raise ValueError(f"Unknown model family {name!r}; expected one of {tuple(FAMILIES)}")
    return getattr(latentlab, FAMILIES[key])


def max_components(family: str, n_samples: int, n_features: int) -> int:
    """Largest K (rank, or number of mixture components) a family accepts on data
    of ``n_samples`` rows and ``n_features`` columns.

    The estimator class says it where it can (the Gaussian-latent estimators keep a
    discarded direction for the noise: ``min(n, d) - 1`` for PPCA and Bayesian PCA;
    factor analysis stops at the Ledermann bound, the largest K with non-negative
    degrees of freedom, 8 for d = 13); a mixture takes at most one component per row.
    The candidate grids are cut there, so a search never tries a K the model refuses.
    """
    cls = family_class(family)
    if hasattr(cls, "_max_components"):
        return int(cls()._max_components(n_samples, n_features)[0])
    return int(n_samples)  # GaussianMixture: K <= n_samples


def gmm_supports_missing() -> bool:
    """Whether this version's GaussianMixture can fit and impute NaN."""
    return hasattr(family_class("gmm"), "impute")


def family_of(estimator) -> str:
    """The family key of an estimator ("ppca", ...), else its class name."""
    names = {cls: key for key, cls in FAMILIES.items()}
    return names.get(type(estimator).__name__, type(estimator).__name__)


def default_candidates(model: str, n_samples: int, n_features: int, best_rank=None):
    """The (family, K) pairs tried when none are given.

    ``model="auto"`` searches in two stages: PPCA over :data:`RANK_GRID` first
    (``best_rank=None``), then, given the best PPCA rank, factor analysis at that rank
    and the next smaller grid rank (heteroscedastic noise absorbs variance PPCA needs
    extra components for), each capped at the most factors the data's features
    identify (:func:`max_components`), plus a two-component mixture when GaussianMixture
    supports NaN and the rows are at least as many as its parameters.  A named family
    searches its own grid in one stage; Bayesian PCA needs no search (its ARD prior
    prunes the rank).
    """
    n, d = n_samples, n_features

    def grid(family, values):
        high = max_components(family, n, d)
        return [(family, K) for K in values if K <= high]

    if model == "bpca":
        return [("bpca", None)]
    if model == "gmm":
        return grid("gmm", MIXTURE_GRID)
    if model in ("ppca", "fa"):
        return grid(model, RANK_GRID)
    if best_rank is None:
        return grid("ppca", RANK_GRID)
    lower = [K for K in RANK_GRID if K < best_rank]
    # FA at those ranks, capped at the most factors d features identify (the
    # Ledermann bound: 8 for d = 13; none for d <= 2)
    fa_high = max_components("fa", n, d)
    ranks = dict.fromkeys(min(K, fa_high) for K in [best_rank, *lower[-1:]])
    second = [("fa", K) for K in ranks if K >= 1]
    if gmm_supports_missing():
        second += grid("gmm", [K for K in AUTO_MIXTURES if _mixture_parameters(K, d) <= n])
    return second


def _mixture_parameters(K: int, d: int) -> int:
    """Free parameters of a full-covariance mixture of K components in d dimensions
    (the mixture's own count, as scikit-learn's)."""
    from latentlab.models.gmm import n_parameters

    return n_parameters(d, K, "full")


def plan(model, candidates, n_components, n_samples: int, n_features: int):
    """The candidate specs :class:`~latentlab.impute.Imputer` scores, or None when the
    model is fixed (``model``: a canonical family name, "auto" or an estimator)."""
    if model == "auto":
        if candidates is not None:
            return list(candidates)
        if n_components is not None:  # a rank: PPCA or FA at that rank
            return [("ppca", n_components), ("fa", n_components)]
        return default_candidates("auto", n_samples, n_features)
    if isinstance(model, str) and n_components is None and model != "bpca":
        return default_candidates(model, n_samples, n_features)
    return None


def is_named(spec) -> bool:
    """Whether a candidate is a ``(family name, K)`` pair (else an estimator)."""
    return isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str)


def check_model_object(est) -> None:
    """Refuse anything but an unfitted estimator instance that fits missing values."""
    needed = (
        "fit",
        "impute",
        "conditional_mixture",
        "sample_imputations",
        "score_samples",
        "get_params",
    )
    if isinstance(est, type) or not all(hasattr(est, a) for a in needed):
        shown = est.__name__ if isinstance(est, type) else type(est).__name__
        raise ValueError(
            f"model must be one of {MODELS} or an unfitted latentlab estimator that fits "
            f"missing values (PPCA, FactorAnalysis, BayesianPCA, GaussianMixture), got {shown}"
        )


def build_candidate(spec, seed: int, tol: float):
    """(family, K, unfitted estimator) for a ``(name, K)`` pair or an estimator.

    Named models get ``tol`` and the seed; an estimator is cloned and gets the seed
    only when its own ``random_state`` is None.
    """
    if is_named(spec):
        name, K = spec
        if canonical_name(name) not in FAMILIES:
            expected = tuple(FAMILIES)
            raise ValueError(f"Unknown candidate model {name!r}; expected one of {expected}")
        name = canonical_name(name)
        return name, K, family_class(name)(n_components=K, tol=tol, random_state=seed)
    check_model_object(spec)
    est = clone(spec)
    if "random_state" in est.get_params() and est.get_params()["random_state"] is None:
        est.set_params(random_state=seed)
    return family_of(est), est.get_params().get("n_components"), est


def fixed_model(model, n_components, seed: int, tol: float):
    """(family, K, unfitted estimator) when nothing is chosen: a canonical family name
    built at ``n_components``, or an estimator with ``n_components`` set if given."""
    if isinstance(model, str):
        return build_candidate((model, n_components), seed, tol)
    family, K, est = build_candidate(model, seed, tol)
    if n_components is not None:
        est.set_params(n_components=n_components)
        K = n_components
    return family, K, est


def holdout_mask(observed, fraction, rng):
    """Random observed entries to hide, never the last observed entry of a row or column."""
    hidden = observed & (rng.random_sample(observed.shape) < fraction)
    for axis in (1, 0):
        left = (observed & ~hidden).sum(axis=axis)
        for i in np.flatnonzero(left == 0):
            line = hidden[i] if axis == 1 else hidden[:, i]
            line[np.flatnonzero(line)[0]] = False  # give back one entry
    return hidden


def fitted_k(est, K):
    """The K a fitted model ended with (Bayesian PCA's effective rank), else ``K``."""
    value = getattr(est, "effective_rank_", None)
    if value is None:
        value = getattr(est, "n_components_", K)
    return None if value is None else int(value)


def _n_params(est):
    try:
        return int(est.n_parameters_)
    except (AttributeError, NotImplementedError):
        return None


def evaluate(specs, Xs, masks, seed: int, *, tol: float, verbose: int = 0, best=None) -> list[dict]:
    """Fit each candidate without the entries of each mask; score those given the rest.

    ``per_mask`` holds, for each mask scored, each row's conditional log-density of
    its hidden entries given its other observed ones, and ``per_row`` their sum over
    masks.  A candidate stops early (fewer masks, and why in ``note``) when it clearly
    trails the best row so far (``best``, or the best of these; :func:`_clearly_worse`).
    A candidate that fails (e.g. K too large for the data) gets ``per_row=None`` and
    the reason in ``note``.
    """
    rows = []
    # the fits of this search share compiled programs over its grid of K
    grid = [spec[1] if is_named(spec) else spec.get_params().get("n_components") for spec in specs]
    with search_grid(k for k in grid if isinstance(k, int | np.integer)):
        for spec in progress(specs, "imputer: scoring models", verbose):
            row = _evaluate_one(spec, Xs, masks, seed, tol, best)
            rows.append(row)
            if row["per_row"] is not None and len(row["per_mask"]) == len(masks):
                best = row if best is None else best_row([best, row])
    if not any(r["per_row"] is not None for r in rows):
        raise ValueError(
            "no candidate model could be fitted: "
            + "; ".join(f"{r['model']}(K={r['n_components']}): {r['note']}" for r in rows)
        )
    return rows


def _evaluate_one(spec, Xs, masks, seed, tol, best) -> dict:
    """One row of :func:`evaluate`."""
    family, K, est = build_candidate(spec, seed, tol)
    row = {"model": family, "n_components": K, "estimator": est, "note": ""}
    scored = clone(est)
    if is_named(spec):  # models Imputer builds: looser tol while only ranking
        scored.set_params(tol=max(tol, SEARCH_TOL))
    start = time.perf_counter()
    try:
        per_mask, fits, stopped = [], [], None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for hidden in masks:
                X_train = np.where(hidden, np.nan, Xs)
                fitted = clone(scored).fit(X_train)
                per_mask.append(fitted.score_samples(Xs) - fitted.score_samples(X_train))
                fits.append(fitted)
                if not np.all(np.isfinite(per_mask[-1])):
                    raise ValueError("non-finite held-out log-likelihood")
                if len(per_mask) < len(masks) and _clearly_worse(per_mask, best):
                    stopped = (
                        f"stopped after {len(per_mask)} of {len(masks)} masks: more than "
                        f"{STOP_Z:g} SE below the best"
                    )
                    break
        row["fits"] = fits  # reused to calibrate intervals if the row wins
        row["n_components"] = fitted_k(fitted, K)
        row["n_params"] = _n_params(fitted)
        row["per_mask"] = per_mask
        row["per_row"] = np.sum(per_mask, axis=0)
        notes = {str(w.message).split(";")[0] for w in caught}
        row["note"] = "; ".join(sorted(notes) + ([stopped] if stopped else []))
    except ValueError as err:  # e.g. K too large for the data: skip, say why
        row["per_row"] = None
        row["note"] = str(err)
    row["seconds"] = time.perf_counter() - start
    scored_masks = masks[: len(row.get("per_mask") or masks)]
    row["n_hidden"] = int(sum(hidden.sum() for hidden in scored_masks))
    return row


def _clearly_worse(per_mask, best) -> bool:
    """Whether a candidate's held-out log-likelihood over its first masks clearly
    trails the best row's over the same masks, paired over rows
    (:func:`latentlab._early_stop.clearly_worse` at :data:`STOP_Z`)."""
    if best is None:
        return False
    d = np.sum(per_mask, axis=0) - np.sum(best["per_mask"][: len(per_mask)], axis=0)
    return early_stop.clearly_worse(d, STOP_Z)


def best_row(rows):
    """The row of :func:`evaluate` with the highest held-out log-likelihood among those
    scored on every mask (one that stopped early trailed a better one)."""
    masks = max(len(r["per_mask"]) for r in rows if r["per_row"] is not None)
    scored = [r for r in rows if r["per_row"] is not None and len(r["per_mask"]) == masks]
    return max(scored, key=lambda r: r["per_row"].sum())


def selection_table(rows):
    """The rows of :func:`evaluate` as ``Imputer.selection_`` (a DataFrame, best first)."""
    import pandas as pd

    best = best_row(rows)["per_mask"]
    records = []
    for r in rows:
        per_row = r["per_row"]
        record = {
            "model": r["model"],
            "n_components": r["n_components"],
            "heldout_loglik": np.nan,
            "se_diff": np.nan,
            "n_params": r.get("n_params"),
            "masks": len(r["per_mask"]) if per_row is not None else 0,
            "seconds": r["seconds"],
            "note": r["note"],
        }
        if per_row is not None:
            record["heldout_loglik"] = per_row.sum() / r["n_hidden"]
            # paired over rows: both candidates scored the same hidden entries (those
            # of the masks this one scored)
            diff = per_row - np.sum(best[: record["masks"]], axis=0)
            record["se_diff"] = np.sqrt(len(diff)) * diff.std(ddof=1) / r["n_hidden"]
        records.append(record)
    table = pd.DataFrame(records)
    table["n_components"] = table["n_components"].astype("Int64")
    table["n_params"] = table["n_params"].astype("Int64")
    table = table.sort_values("heldout_loglik", ascending=False, na_position="last")
    return table.reset_index(drop=True)
