"""Intervals and their calibration for :class:`~latentlab.impute.Imputer`.

Plug-in intervals from a fitted model's conditional distributions, split-conformal
calibration of their level on held-out entries (scores from the probability integral
transform), and the bootstrap refits that add parameter uncertainty to intervals and
multiple imputations.  Everything works in the standardised units Imputer fits in.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import clone

from latentlab._progress import progress
from latentlab._validation import check_positive_int
from latentlab.impute.search import holdout_mask


def mixture_interval(weights, means, sds, level):
    """Central ``level`` interval of each entry's mixture ``sum_c weights[n, c]
    N(means[n, c, j], sds[n, c, j]^2)`` (the form of ``conditional_mixture``)."""
    from latentlab.models.gmm_programs import mixture_quantile

    sds = np.maximum(sds, 1e-300)  # observed entries: a point mass at x
    tail = 0.5 * (1.0 - level)
    return tuple(mixture_quantile(weights, means, sds, q) for q in (tail, 1.0 - tail))


def plugin_interval(model, Xs, level):
    """Central ``level`` interval of each entry given its row's observed ones, the
    fitted parameters taken as known (mean -/+ z sd for a Gaussian conditional)."""
    if hasattr(model, "impute_interval"):
        return model.impute_interval(Xs, level=level)
    from scipy.stats import norm

    mean, std = model.impute(Xs, return_std=True)
    z = norm.ppf(0.5 + level / 2)
    return mean - z * std, mean + z * std


def pit_scores(fitted, Xs, hidden):
    """``|2 F(x) - 1|`` of each hidden entry x, F its conditional CDF under ``fitted``
    given the unhidden entries of its row: the smallest central level containing x."""
    from scipy.special import ndtr

    weights, means, sds = fitted.conditional_mixture(np.where(hidden, np.nan, Xs))
    rows, cols = np.nonzero(hidden)
    z = (Xs[rows, cols][:, None] - means[rows, :, cols]) / np.maximum(sds[rows, :, cols], 1e-300)
    cdf = np.einsum("nc,nc->n", weights[rows], ndtr(z))
    return np.abs(2.0 * cdf - 1.0)


def calibration_scores(fits, masks, Xs):
    """The sorted PIT scores of every held-out entry, each under the fit that did not
    see it (``fits[i]`` was fitted without the entries of ``masks[i]``)."""
    scores = [pit_scores(f, Xs, h) for f, h in zip(fits, masks, strict=True)]
    return np.sort(np.concatenate(scores))


def conformal_level(scores, level: float) -> float:
    """The ``ceil((N + 1) level)``-th smallest of N sorted calibration scores: the
    nominal level whose intervals cover ``level`` of exchangeable entries."""
    rank = int(np.ceil((scores.size + 1) * level))
    if rank > scores.size:
        raise ValueError(
            f"{scores.size} held-out entries are too few to calibrate a {level} "
            "interval; raise holdout or n_repeats"
        )
    return float(np.clip(scores[rank - 1], 1e-12, 1.0 - 1e-12))


def heldout_refits(model, X_fit, holdout: float, n_repeats: int, rng, verbose: int = 0):
    """Refits of ``model`` with ``n_repeats`` masks of held-out entries: (fits, masks)."""
    observed = ~np.isnan(X_fit)
    masks = [holdout_mask(observed, holdout, rng) for _ in range(n_repeats)]
    if not any(hidden.any() for hidden in masks):
        raise ValueError("too few observed entries to hold some out for calibration")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # EM warnings on a refit say nothing new
        fits = [
            clone(model).fit(np.where(hidden, np.nan, X_fit))
            for hidden in progress(masks, "imputer: calibration refits", verbose)
        ]
    return fits, masks


def bootstrap_refit(model, X_fit, rng):
    """``model`` refitted on rows drawn with replacement from ``X_fit``."""
    n = X_fit.shape[0]
    for _ in range(20):
        rows = X_fit[rng.randint(0, n, size=n)]
        if (~np.isnan(rows)).any(axis=0).all():  # every column keeps an observed entry
            est = clone(model)
            if "random_state" in est.get_params():
                est.set_params(random_state=int(rng.randint(2**31 - 1)))
            with warnings.catch_warnings():
                # EM warnings on one resample say nothing new about the chosen model
                warnings.simplefilter("ignore")
                return est.fit(rows)
    raise ValueError(
        "bootstrap resamples keep losing every observed entry of some column; too "
        "few observed values for draw_parameters=True"
    )


def bootstrap_interval(refit, Xs, level, n_draws, rng, verbose: int = 0):
    """Quantiles of the equal-weight mixture of ``n_draws`` bootstrap models'
    conditional distributions (each itself a mixture, see ``conditional_mixture``).

    ``refit(rng)`` returns one model fitted on a bootstrap resample (see
    :func:`bootstrap_refit`)."""
    n_draws = check_positive_int("n_draws", n_draws)
    parts = [
        refit(rng).conditional_mixture(Xs)
        for _ in progress(range(n_draws), "imputer: bootstrap refits", verbose)
    ]
    weights = np.concatenate([p[0] for p in parts], axis=1) / n_draws
    means = np.concatenate([p[1] for p in parts], axis=1)
    sds = np.concatenate([p[2] for p in parts], axis=1)
    return mixture_interval(weights, means, sds, level)


def bootstrap_imputations(refit, Xs, n_imputations, rng, verbose: int = 0):
    """One draw of the missing entries of ``Xs`` from each of ``n_imputations`` models
    ``refit(rng)`` fitted on bootstrap resamples: (n_imputations, *Xs.shape)."""
    return np.stack(
        [
            refit(rng).sample_imputations(Xs, 1, random_state=rng)[0]
            for _ in progress(range(n_imputations), "imputer: bootstrap refits", verbose)
        ]
    )
