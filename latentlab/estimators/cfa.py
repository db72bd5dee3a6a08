"""``latentlab.ConfirmatoryFactorAnalysis``: factor analysis with a hypothesised
loading pattern, fitted by EM with full-information ML for missing entries."""

from __future__ import annotations

from functools import partial

import jax
import numpy as np
import pandas as pd
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from latentlab._settings import ArrayLike, Boolean, InstanceOf, Integer, Real
from latentlab._validation import check_data, check_no_empty_columns, check_no_empty_rows
from latentlab.estimators.base import (
    LatentEstimator,
    to_numpy,
    warn_not_converged,
)
from latentlab.estimators.gaussian_latent import padded_rows
from latentlab.models import cfa
from latentlab.models.gaussian_latent import em_from_starts, row_posteriors_program, summarise

__all__ = ["ConfirmatoryFactorAnalysis"]


class ConfirmatoryFactorAnalysis(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator
):
    """Confirmatory factor analysis: factors measured by the indicators a hypothesis
    names, fitted by maximum likelihood.

    ``x = mu + Lambda f + e`` with ``f ~ N(0, Phi)``, ``e ~ N(0, diag(psi))`` and
    Lambda zero outside the ``pattern``, declared once in
    :func:`latentlab.models.cfa.cfa_model`.  Each factor's scale is set by its first
    indicator (the marker, loading fixed at 1; lavaan's default), and the
    standardised solution (unit factor variances) is reported beside it.  NaN entries
    are missing values, fitted by their exact marginal likelihood (full-information
    ML, as lavaan's ``missing = "ml"``); :func:`latentlab.psychometrics.goodness_of_fit`
    gives the fit indices.  Fitted by EM on the features scaled to unit variance (the
    model is equivariant under that), with the Gaussian-latent E-step.

    Parameters
    ----------
    pattern : dict or array-like of bool, shape (n_features, n_factors)
        Which indicators measure which factor: ``{"visual": ["x1", "x2", "x3"], ...}``
        (column names of a DataFrame X, or column indices), or a boolean matrix.  The
        first indicator of each factor is its marker.
    orthogonal : bool, default=False
        Uncorrelated factors (Phi diagonal); by default every factor covariance is free.
    tol : float, default=1e-10
        EM stops when an iteration raises the log-likelihood by less than ``tol`` per
        row (SQUAREM-accelerated cycles).
    max_iter : int, default=10000

    Attributes
    ----------
    loadings_ : ndarray (n_features, n_factors)
        Lambda in the data's units, markers at 1 (lavaan's ``est``).
    factor_covariance_ : ndarray (n_factors, n_factors)
        Phi in the markers' units.
    factor_correlation_ : ndarray (n_factors, n_factors)
    components_ : ndarray (n_factors, n_features)
        Loadings for factors of unit variance (lavaan's ``std.lv``), transposed.
    standardized_loadings_ : ndarray (n_features, n_factors)
        Unit-variance factors and features (lavaan's ``std.all``).
    noise_variance_, mean_ : ndarray (n_features,)
    factor_names_ : ndarray of str (n_factors,)
    pattern_ : ndarray of bool (n_features, n_factors)
    log_likelihoods_, n_iter_, converged_, params_
        As for :class:`latentlab.FactorAnalysis`; ``params_`` holds the declaration's
        sites (``loadings``: the free loadings, ``phi_chol``, ``mu``, ``psi``).

    Examples
    --------
    >>> import pandas as pd, latentlab
    >>> data = pd.read_csv("examples/data/holzinger_swineford_1939.csv")  # doctest: +SKIP
    >>> X = data.loc[:, "x1":"x9"]  # doctest: +SKIP
    >>> abilities = {"visual": ["x1", "x2", "x3"], "textual": ["x4", "x5", "x6"],
    ...              "speed": ["x7", "x8", "x9"]}
    >>> cfa = latentlab.ConfirmatoryFactorAnalysis(abilities).fit(X)  # doctest: +SKIP
    >>> latentlab.psychometrics.goodness_of_fit(cfa, X)  # chi2 85.306 on 24 df  # doctest: +SKIP
    """

    _generative = True  # score, bic, aic, n_parameters_, sample_posterior
    _no_standard_errors = "not yet for confirmatory models"  # for standard_errors
    _settings = {
        # checked with the data (names, shape)
        "pattern": InstanceOf(dict, "a dict {factor: indicators}") | ArrayLike() | None,
        "orthogonal": Boolean(),
        "tol": Real(0, None),
        "max_iter": Integer(1, None),
    }

    def __init__(self, pattern=None, *, orthogonal=False, tol=1e-10, max_iter=10000):
        self.pattern = pattern
        self.orthogonal = orthogonal
        self.tol = tol
        self.max_iter = max_iter

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # -- the pattern --------------------------------------------------------------------

    def _pattern(self, d: int, names):
        """(pattern (d, K) bool, factor names) from the ``pattern`` setting."""
        pattern = self.pattern
        if pattern is None:
            raise ValueError(
                "ConfirmatoryFactorAnalysis needs a pattern: a dict {factor: [indicators]} "
                "or a boolean (n_features, n_factors) matrix"
            )
        if isinstance(pattern, dict):
            columns = {str(name): j for j, name in enumerate(names)} if names is not None else {}
            mask = np.zeros((d, len(pattern)), bool)
            for k, (factor, indicators) in enumerate(pattern.items()):
                if isinstance(indicators, (str, int, np.integer)):
                    indicators = [indicators]
                for item in indicators:
                    if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                        if not 0 <= item < d:
                            raise ValueError(
                                f"pattern: factor {factor!r} names column {item}, but X has "
                                f"{d} columns"
                            )
                        mask[item, k] = True
                    elif str(item) in columns:
                        mask[columns[str(item)], k] = True
                    else:
                        known = ", ".join(columns) if columns else "none: X has no column names"
                        raise ValueError(
                            f"pattern: factor {factor!r} names unknown column {item!r} "
                            f"(columns: {known})"
                        )
            factors = [str(f) for f in pattern]
        else:
            mask = np.asarray(pattern)
            if mask.ndim != 2 or mask.shape[0] != d or mask.dtype.kind not in "bi":
                raise ValueError(
                    f"pattern must be a dict or a boolean ({d}, n_factors) matrix, got "
                    f"{type(pattern).__name__} of shape {getattr(mask, 'shape', None)}"
                )
            if not np.isin(mask, (0, 1)).all():
                raise ValueError("a pattern matrix holds only True/False (1/0)")
            mask = mask.astype(bool)
            factors = [f"F{k + 1}" for k in range(mask.shape[1])]
        if mask.shape[1] == 0:
            raise ValueError("pattern names no factor")
        empty = [f for f, column in zip(factors, mask.T, strict=True) if not column.any()]
        if empty:
            raise ValueError(f"pattern: factor(s) {', '.join(empty)} have no indicator")
        return mask, factors

    # -- fitting ------------------------------------------------------------------------

    def fit(self, X, y=None):
        """Fit the model to X (n_samples, n_features); NaN entries are missing values."""
        X = check_data(self, X, reset=True, allow_nan=True, min_samples=2)
        n, d = X.shape
        names = getattr(self, "feature_names_in_", None)
        pattern, factors = self._pattern(d, names)
        K = pattern.shape[1]
        markers = pattern.argmax(axis=0)
        fixed = np.zeros((d, K))
        fixed[markers, np.arange(K)] = 1.0
        free = pattern & (fixed == 0)
        n_parameters = cfa.n_parameters(free, bool(self.orthogonal))
        moments = d * (d + 1) // 2 + d
        if n_parameters > moments:
            raise ValueError(
                f"the model has {n_parameters} free parameters but the data only "
                f"{moments} moments (d = {d}): degrees of freedom "
                f"{moments - n_parameters} < 0, the model is not identified"
            )
        observed = ~np.isnan(X)
        mask = None if observed.all() else observed
        if mask is not None:
            check_no_empty_rows(observed)
            check_no_empty_columns(observed)
        counts = observed.sum(axis=0)
        shift = np.where(observed, X, 0.0).sum(axis=0) / counts
        centred = np.where(observed, X - shift, 0.0)
        unit = np.sqrt((centred**2).sum(axis=0) / counts)
        if np.any(unit <= 0):
            constant = ", ".join(map(str, np.flatnonzero(unit <= 0)[:10]))
            raise ValueError(f"X has constant column(s) {constant}: their loadings are undefined")
        Z = np.where(observed, centred / unit, np.nan)
        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            data, _ = summarise(Z, np.zeros(d), mask)
            hyper = cfa.Hyper(
                free=free.astype(dtype),
                fixed=fixed.astype(dtype),
                orthogonal=np.asarray(float(self.orthogonal), dtype),
                variance_floor=np.full(d, 1e-6, dtype),
                n_rows=np.asarray(float(n), dtype),
            )
            # the start from the mean-imputed correlations
            filled = np.where(observed, Z, 0.0)
            start = cfa.init_params(filled.T @ filled / n, np.zeros(d), hyper, markers)
            start = jax.tree.map(lambda a: np.asarray(a, dtype)[None], start)  # one start
            params, trace, n_iter, converged = em_from_starts(
                cfa, start, data, n, hyper, tol=self.tol, max_iter=self.max_iter, verbose=0
            )
        # back to the data's units, each factor in its marker's units
        scale = unit[markers]
        C = np.tril(params.phi_chol)
        loadings = (free * params.loadings + fixed) * unit[:, None] / scale
        phi = (C @ C.T) * np.outer(scale, scale)
        self.pattern_, self.markers_ = pattern, markers
        self.factor_names_ = np.asarray(factors, dtype=object)
        self.n_components_ = K
        self.params_ = {
            "loadings": loadings * free,
            "phi_chol": np.linalg.cholesky(phi),
            "mu": params.mu * unit + shift,
            "psi": params.psi * unit**2,
        }
        self.log_likelihoods_ = trace - float(counts @ np.log(unit))
        self.n_iter_, self.converged_ = n_iter, converged
        if not converged:
            warn_not_converged(self)
        return self

    # -- fitted quantities --------------------------------------------------------------

    @property
    def _hyper_host(self):
        fixed = np.zeros(self.pattern_.shape)
        fixed[self.markers_, np.arange(self.n_components_)] = 1.0
        return self.pattern_ & (fixed == 0), fixed

    @property
    def loadings_(self):
        check_is_fitted(self)
        free, fixed = self._hyper_host
        return free * self.params_["loadings"] + fixed

    @property
    def factor_covariance_(self):
        check_is_fitted(self)
        C = self.params_["phi_chol"]
        return C @ C.T

    @property
    def factor_correlation_(self):
        phi = self.factor_covariance_
        sd = np.sqrt(np.diag(phi))
        return phi / np.outer(sd, sd)

    @property
    def components_(self):
        """Loadings of unit-variance factors (lavaan's ``std.lv``), (n_factors, n_features)."""
        return (self.loadings_ * np.sqrt(np.diag(self.factor_covariance_))).T

    @property
    def standardized_loadings_(self):
        """Loadings of unit-variance factors on unit-variance features (``std.all``)."""
        return self.components_.T / np.sqrt(np.diag(self.get_covariance()))[:, None]

    @property
    def noise_variance_(self):
        check_is_fitted(self)
        return self.params_["psi"].copy()

    @property
    def mean_(self):
        check_is_fitted(self)
        return self.params_["mu"].copy()

    @property
    def _n_features_out(self):
        return self.n_components_

    def get_covariance(self) -> np.ndarray:
        """Model covariance ``Lambda Phi Lambda^T + diag(psi)``."""
        L = self.loadings_
        return L @ self.factor_covariance_ @ L.T + np.diag(self.noise_variance_)

    def _n_parameters(self) -> int:
        return cfa.n_parameters(self._hyper_host[0], bool(self.orthogonal))

    @property
    def model_(self):
        """The NumPyro declaration with this fit's pattern bound."""
        free, fixed = self._hyper_host
        return partial(
            cfa.cfa_model,
            free=free.astype(float),
            fixed=fixed,
            orthogonal=bool(self.orthogonal),
        )

    def modification_indices(self, X) -> pd.DataFrame:
        """Score tests of every parameter the model fixes -- cross-loadings, residual
        covariances of indicators, factor covariances of orthogonal factors -- as
        lavaan's ``modindices``: ``mi``, the chi-square (1 df) by which freeing that
        parameter alone would lower the model's chi-square (to first order), and
        ``epc``, its expected value when freed; sorted by ``mi``.

        X is the data the model was fitted on.  Complete rows: the expected
        information (lavaan's default); with NaN entries, the observed information of
        the full-information likelihood (see
        :func:`latentlab.models.cfa.modification_indices`).
        """
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=True)
        free, _ = self._hyper_host
        C = np.linalg.cholesky(self.factor_covariance_)
        psi = np.diag(self.noise_variance_)
        if np.isnan(X).any():
            moments, rows = None, X
        else:
            moments, rows = (len(X), np.cov(X.T, bias=True)), None
        candidates, mi, epc = cfa.modification_indices(
            self.loadings_, C @ C.T, psi, self.mean_, free, bool(self.orthogonal), moments, rows
        )
        names = getattr(self, "feature_names_in_", None)
        features = (
            [str(v) for v in names] if names is not None else [f"x{j}" for j in range(len(psi))]
        )
        factors = list(self.factor_names_)
        table = []
        for (kind, i, j), m, e in zip(candidates, mi, epc, strict=True):
            if kind == "loading":
                table.append((factors[j], "=~", features[i], m, e))
            elif kind == "residual":
                table.append((features[j], "~~", features[i], m, e))
            else:
                table.append((factors[j], "~~", factors[i], m, e))
        out = pd.DataFrame(table, columns=["lhs", "op", "rhs", "mi", "epc"])
        return out.sort_values("mi", ascending=False, ignore_index=True)

    def _posterior_rows(self, X):
        X = check_data(self, X, reset=False, allow_nan=True)
        mask = ~np.isnan(X)
        check_no_empty_rows(mask)
        W = self.loadings_ @ np.linalg.cholesky(self.factor_covariance_)
        centred = np.where(mask, X - self.params_["mu"], 0.0)
        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            arrays = (
                W.astype(dtype),
                np.zeros(len(W), dtype),
                (1.0 / self.params_["psi"]).astype(dtype),
            )
            return padded_rows(row_posteriors_program, *arrays, X=centred, mask=mask.astype(float))

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each row (exact marginal of the observed entries)."""
        check_is_fitted(self)
        return to_numpy(self._posterior_rows(X)[2])

    def transform(self, X) -> np.ndarray:
        """Posterior mean of the factors in unit variance (regression scores)."""
        check_is_fitted(self)
        mean = self._posterior_rows(X)[0]
        C = np.linalg.cholesky(self.factor_correlation_)
        return to_numpy(mean[:, : self.n_components_] @ C.T)
