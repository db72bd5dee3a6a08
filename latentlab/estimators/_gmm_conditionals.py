"""Conditional distributions of a fitted :class:`latentlab.GaussianMixture` given a
row's observed entries: imputation (means, standard deviations, intervals, draws) as
a mixin over the estimator's scoring machinery."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_random_state

from latentlab._validation import check_level, check_positive_int
from latentlab.estimators._gmm_programs import conditionals, fixed_row_chunks
from latentlab.models import gmm

__all__ = ["MixtureConditionalsMixin", "mixture_quantile"]


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


class MixtureConditionalsMixin:
    """Imputation from p(x_miss | x_obs) = sum_k p(k | x_obs) N(x_miss | x_obs, k).

    Needs the estimator's ``_observed``, ``_rows_per_call``, ``_scoring_params``,
    ``_centre``, ``_precision`` and ``covariance_type``/``n_components_``.
    """

    def _conditional_parts(self, X):
        """Validated X, its observed mask, the centre c (float64, see
        :meth:`_centred_params`) and -- chunk by chunk over the rows with missing
        entries -- ``(rows, resp (m, K), means (m, K, d), cov)``: the conditional
        mixture p(x - c | x_obs) = sum_k resp_k N(means_k, cov_k).

        The means stay centred so that mixing them (resp sums to 1 only to the working
        precision) and second moments lose nothing; callers add c at the end."""
        X, observed = self._observed(X, allow_empty_rows=True)
        incomplete = np.flatnonzero(~observed.all(axis=1))
        chunk = self._rows_per_call(missing=True)
        step = 8 * chunk

        def parts():
            with self._precision():
                params, centre = self._scoring_params()
                for start in range(0, incomplete.size, step):
                    rows = incomplete[start : start + step]
                    o = observed[rows]
                    log_resp, means, cov = fixed_row_chunks(
                        lambda x, o: conditionals(params, x, o, self.covariance_type),
                        np.where(o > 0, X[rows] - centre, 0.0),
                        o,
                        chunk=chunk,
                    )
                    K = self.n_components_  # padding components cut off
                    yield rows, np.exp(log_resp[:, :K]), means[:, :K], cov[:, :K]

        return X, observed, self._centre(), parts()

    def _marginal_variances(self, cov):
        """Per-coordinate conditional variances (m, K, d) from ``cov``."""
        return gmm.marginal_variances(cov, self.covariance_type)

    def impute(self, X, *, return_std: bool = False):
        """Fill NaN entries with E[x_miss | x_obs] = sum_k p(k | x_obs) E[x_miss | x_obs, k].

        Observed entries are returned unchanged.  With ``return_std=True`` also returns
        the standard deviation of the conditional mixture (0 where observed); it
        includes the spread between components, so it can be large for a row whose
        component is uncertain.  Intervals: use :meth:`impute_interval` (the mixture
        is not Gaussian, so mean -/+ z sd is not a calibrated interval).
        """
        X, observed, centre, parts = self._conditional_parts(X)
        filled, std = X.copy(), np.zeros_like(X)
        for rows, resp, means, cov in parts:
            mean = np.einsum("mk,mkd->md", resp, means)
            second = np.einsum("mk,mkd->md", resp, self._marginal_variances(cov) + means**2)
            missing = observed[rows] == 0
            filled[rows] = np.where(missing, mean + centre, X[rows])
            std[rows] = np.where(missing, np.sqrt(np.maximum(second - mean**2, 0.0)), 0.0)
        return (filled, std) if return_std else filled

    def conditional_mixture(self, X):
        """Each entry's distribution given its row's observed entries, as the mixture
        ``sum_k weights[n, k] N(means[n, k, j], sds[n, k, j]^2)``: ``weights`` (n, K) is
        p(k | x_obs), ``means`` and ``sds`` (n, K, d) each component's conditional mean
        and sd (x and 0 where observed)."""
        X, observed, centre, parts = self._conditional_parts(X)
        K = self.n_components
        weights = np.full((X.shape[0], K), 1.0 / K)
        means = np.broadcast_to(X[:, None, :], (X.shape[0], K, X.shape[1])).copy()
        sds = np.zeros_like(means)
        for rows, resp, component_means, cov in parts:
            missing = (observed[rows] == 0)[:, None, :]
            weights[rows] = resp
            means[rows] = np.where(missing, component_means + centre, means[rows])
            sds[rows] = np.where(missing, np.sqrt(self._marginal_variances(cov)), 0.0)
        return weights, means, sds

    def impute_interval(self, X, level: float = 0.9):
        """Central ``level`` interval of each missing entry: the quantiles
        (1 -/+ level)/2 of its conditional mixture sum_k p(k | x_obs) N(m_k, s_k^2).

        Plug-in (parameter uncertainty not included).  Returns ``(lower, upper)``,
        each (n_samples, n_features), equal to X where observed.
        """
        tail = 0.5 * (1.0 - check_level(level))
        X, observed, centre, parts = self._conditional_parts(X)
        lower, upper = X.copy(), X.copy()
        for rows, resp, means, cov in parts:
            sd = np.sqrt(np.maximum(self._marginal_variances(cov), 1e-300))
            missing = observed[rows] == 0
            for target, out in ((tail, lower), (1.0 - tail, upper)):
                quantile = mixture_quantile(resp, means, sd, target)
                out[rows] = np.where(missing, quantile + centre, X[rows])
        return lower, upper

    def sample_imputations(self, X, n_imputations: int = 5, random_state=None) -> np.ndarray:
        """Multiple imputation: draws of the missing entries from p(x_miss | x_obs).

        Each draw picks a component from p(k | x_obs), then the missing coordinates
        from that component's conditional Gaussian (correlations kept).  Returns
        shape (n_imputations, n_samples, n_features); observed entries are X's.
        """
        check_positive_int("n_imputations", n_imputations)
        rng = check_random_state(random_state)
        X, observed, centre, parts = self._conditional_parts(X)
        draws = np.broadcast_to(X, (n_imputations, *X.shape)).copy()
        for rows, resp, means, cov in parts:
            missing = observed[rows] == 0
            x = gmm.draw_conditional(
                rng, resp, means, cov, missing, self.covariance_type, n_imputations
            )
            draws[:, rows] = np.where(missing, x + centre, X[rows])
        return draws
