"""How a fitted GaussianMixture scores rows: its parameters about the mixture's mean
in the working dtype, padded to a bucket of components, and row-chunked programs of
a fixed size, so nearby models share compiled programs and float32 keeps its digits."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab._shapes import component_bucket
from latentlab._validation import check_data, check_no_empty_rows
from latentlab.estimators._gmm_programs import (
    CHUNK,
    MISSING_CHUNK,
    SCORE_WORK,
    fixed_row_chunks,
    pad_components,
    row_scores,
)
from latentlab.models import gmm

__all__ = ["MixtureScoringMixin"]


class MixtureScoringMixin:
    """Scoring helpers of :class:`latentlab.GaussianMixture` (also used by its
    conditionals, :mod:`latentlab.estimators._gmm_conditionals`)."""

    def _centre(self):
        return self.params_["weights"] @ self.params_["means"]

    def _centred_params(self):
        """``(params, centre)``: the fitted parameters in the working dtype with the means
        taken about ``centre`` (float64, the mixture's mean), on the host.

        Densities, responsibilities and conditionals are translation-equivariant, so
        callers subtract ``centre`` from X in float64 before the cast and add it back
        to means in float64 after: float32 then keeps its digits on uncentred data.
        Call inside ``self._precision()``.
        """
        centre = self._centre()
        values = {**self.params_, "means": self.params_["means"] - centre}
        # host arrays in the working dtype (an eager jnp cast would compile a program)
        dtype = np.dtype(self.dtype)
        return gmm.Params(*(np.asarray(values[k], dtype) for k in gmm.Params._fields)), centre

    def _scoring_params(self):
        """:meth:`_centred_params` with padding components up to
        :func:`component_bucket` (weight 0: log-responsibility -inf, no effect on the
        rows' likelihoods), so that models with nearby n_components share the scoring
        programs; callers cut the outputs back to ``n_components_``."""
        params, centre = self._centred_params()
        pad = component_bucket(self.n_components_) - self.n_components_
        padded = pad_components(*params, pad, self.covariance_type)
        return gmm.Params(*padded), centre

    def _rows_per_call(self, missing: bool) -> int:
        """Rows per call of the scoring programs, fixed for a fitted model (see
        :func:`_fixed_row_chunks`): about ``SCORE_WORK`` flops per call, so padding a
        single row costs little, capped by the E-step's chunk sizes, which bound the
        memory of the (rows, K, d, d) conditional covariances."""
        K, d = component_bucket(self.n_components_), self.n_features_in_
        dense = self.covariance_type in ("full", "tied")
        if missing:
            per_row, cap = (K * d**3 if dense else K * d), MISSING_CHUNK[self.covariance_type]
        else:
            per_row, cap = (K * d * d if dense else K * d), CHUNK
        rows = 1 << (max(SCORE_WORK // max(per_row, 1), 1).bit_length() - 1)
        return int(min(max(rows, 32), cap))

    def _observed(self, X, *, allow_empty_rows: bool):
        """Validated X with NaN replaced by 0, and the observed mask (float)."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=True)
        observed = ~np.isnan(X)
        if not allow_empty_rows:
            check_no_empty_rows(observed)
        return np.where(observed, X, 0.0), observed.astype(np.float64)

    def _scores(self, X, *, allow_empty_rows=False):
        """(log p(x_i) (n,), log responsibilities (n, K)) as float64 NumPy arrays.

        Rows with NaN are scored by their marginal over the observed coordinates.
        """
        X, observed = self._observed(X, allow_empty_rows=allow_empty_rows)
        complete = observed.all(axis=1)
        row = np.empty(X.shape[0])
        log_resp = np.empty((X.shape[0], self.n_components_))
        K = self.n_components_
        with self._precision():
            params, centre = self._scoring_params()
            X = np.where(observed > 0, X - centre, 0.0)
            kind = self.covariance_type
            if complete.any():
                row[complete], padded = fixed_row_chunks(
                    lambda x: row_scores(params, x, None, kind),
                    X[complete],
                    chunk=self._rows_per_call(missing=False),
                )
                log_resp[complete] = padded[:, :K]
            if not complete.all():
                row[~complete], padded = fixed_row_chunks(
                    lambda x, o: row_scores(params, x, o, kind),
                    X[~complete],
                    observed[~complete],
                    chunk=self._rows_per_call(missing=True),
                )
                log_resp[~complete] = padded[:, :K]
        return row, log_resp
