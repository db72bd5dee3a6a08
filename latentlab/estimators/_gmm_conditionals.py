"""Conditional distributions of a fitted :class:`latentlab.GaussianMixture` given a
row's observed entries, as pure functions:

    p(x_miss | x_obs) = sum_k p(k | x_obs) N(x_miss | x_obs, k),

chunk by chunk over the rows with missing entries (:func:`conditional_chunks`), and
the moments (:func:`mixture_moments`) and quantiles (:func:`mixture_quantile`) of such
a mixture, per entry.  ``GaussianMixture``'s ``impute``, ``impute_interval``,
``conditional_mixture`` and ``sample_imputations`` are built from them."""

from __future__ import annotations

import numpy as np

from latentlab.estimators._gmm_programs import conditionals, fixed_row_chunks, rows_per_call

__all__ = ["conditional_chunks", "mixture_moments", "mixture_quantile"]


def conditional_chunks(X, observed, params, centre, n_components, covariance_type):
    """Chunk by chunk over the rows of ``X`` (NaN at 0) with missing entries (where
    the float mask ``observed`` is 0): ``(rows, resp (m, K), means (m, K, d), cov)``,
    the conditional mixture p(x - c | x_obs) = sum_k resp_k N(means_k, cov_k) under
    :func:`~latentlab.estimators._gmm_programs.scoring_params`' ``(params, centre)``
    (c = ``centre``), padding components cut off.

    The means stay centred so that mixing them (resp sums to 1 only to the working
    precision) and second moments lose nothing; callers add c at the end.  Iterate
    inside the estimator's ``_precision()``."""
    incomplete = np.flatnonzero(~observed.all(axis=1))
    chunk = rows_per_call(n_components, X.shape[1], covariance_type, missing=True)
    step = 8 * chunk
    for start in range(0, incomplete.size, step):
        rows = incomplete[start : start + step]
        o = observed[rows]
        log_resp, means, cov = fixed_row_chunks(
            lambda x, o: conditionals(params, x, o, covariance_type),
            np.where(o > 0, X[rows] - centre, 0.0),
            o,
            chunk=chunk,
        )
        K = n_components  # padding components cut off
        yield rows, np.exp(log_resp[:, :K]), means[:, :K], cov[:, :K]


def mixture_moments(resp, means, variances):
    """Mean and standard deviation (m, d) of each entry's mixture sum_k resp_mk
    N(means_mkd, variances_mkd): the spread between components included."""
    mean = np.einsum("mk,mkd->md", resp, means)
    second = np.einsum("mk,mkd->md", resp, variances + means**2)
    return mean, np.sqrt(np.maximum(second - mean**2, 0.0))


def mixture_quantile(resp, means, sd, p):
    """Quantile p of sum_k resp_mk N(means_mkd, sd_mkd^2) for every (m, d), by bisection
    (the CDF is monotone; 100 halvings of a +-40 sd bracket reach round-off)."""
    from scipy.special import ndtr

    lo = np.min(means - 40.0 * sd, axis=1)
    hi = np.max(means + 40.0 * sd, axis=1)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        below = np.einsum("mk,mkd->md", resp, ndtr((mid[:, None, :] - means) / sd)) < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)
