"""Estimator surface shared by the Gaussian latent models (PPCA, FA, Bayesian PCA).

A subclass names its model module (declaration, ``Params``, ``init_params``,
``e_step``, ``m_step``, ``rescale``) and says how its noise variance and settings
look; fitting by EM or MAP/SVI, and everything a user asks of the fitted model --
scores, the posterior of z, imputation, sampling, covariances -- follows from the
marginal N(mu, W W^T + Psi) and lives here once.  The compiled EM program and the
row helpers are in ``_gaussian_latent_programs``, imputation in
``_gaussian_imputation``.  The rest stays together (~490 lines): the fit mixin and
the estimator share the padding of the loadings to column buckets
(:func:`latentlab._shapes.gaussian_latent_columns`; ``latentlab.set_config(padding=False)``
turns it off).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._settings import Boolean, Dtype, Integer, Options, RandomState, Real, Verbose
from latentlab._shapes import gaussian_latent_columns, padded_size, signature
from latentlab._validation import (
    check_codes,
    check_data,
    check_n_components,
    check_no_empty_columns,
    check_no_empty_rows,
)
from latentlab.estimators._gaussian_imputation import GaussianImputationMixin
from latentlab.estimators._gaussian_latent_programs import (
    _chunked_outputs,
    _drop_padding,
    _em_output,
    _fit_em,
    _padded,
    _row_posteriors,
)
from latentlab.estimators._rows import ROWS_PER_CALL
from latentlab.estimators.base import (
    GenerativeMixin,
    LatentEstimator,
    jax_key,
    to_numpy,
    warn_not_converged,
)
from latentlab.inference.chunked import is_dask, row_source
from latentlab.inference.em import run_em
from latentlab.inference.sharding import shard_fields
from latentlab.models.gaussian_latent import (
    canonical_loadings,
    global_scale,
    marginal_covariance,
    marginal_precision,
    summarise,
)

__all__ = ["GaussianLatentEstimator"]

# Below ~1e-6 of a feature's variance a noise variance only means "the data are
# (nearly) rank K"; a lower floor makes the posterior precision so ill-conditioned
# that round-off breaks EM's monotonicity.
VARIANCE_FLOOR = 1e-6
# Settings of the models fitted by ML or MAP (``prior``) that also stream (partial_fit):
# ``learning_decay`` is online EM's step-size exponent (Cappe & Moulines' kappa).
STREAMING_SETTINGS = {"prior": Boolean(), "learning_decay": Real(0.5, 1, closed="right")}
# what to try when a fit's parameters are not finite (check_finite_fit)
DEGENERATE_ADVICE = (
    "the data may be degenerate for this model (try fewer components or rescale {data})"
)


class GaussianLatentFitMixin:
    """Fitting machinery shared by every Gaussian latent estimator (settings, EM).

    Subclasses set ``_module`` (the model module) and ``_methods`` and implement
    ``_max_components``; the hooks ``_hyper``, ``_declaration_settings`` and
    ``_parameter_log_jacobian`` have defaults.
    """

    _module = None
    _methods = ("em", "map", "svi")
    # The settings every Gaussian latent model has; subclasses add theirs.  The range
    # of n_components depends on the data (_check_settings), and "mle" on the model
    # (_resolve_mle says which take it).
    _settings = {
        "n_components": Integer() | None | "mle",
        "method": Options(*_methods),
        "tol": Real(0, None),
        "max_iter": Integer(1, None),
        "n_init": Integer(1, None),
        "svi_steps": Integer(1, None),
        "learning_rate": Real(0, None, closed="neither"),
        "random_state": RandomState(),
        "dtype": Dtype(),
        "verbose": Verbose(),
    }
    _pca_start = True  # EM's first start at the mean-imputed PCA solution (if the model has one)
    # Smallest n_components: 0 (no latent factor: the independent-noise Gaussian,
    # the baseline row of a model comparison) where the model is defined without W.
    _min_components = 1
    _allows_mle = False  # n_components="mle": Minka's (2000) choice on the covariance

    def _max_components(self, n_samples, n_features) -> int:
        raise NotImplementedError

    # -- fitting ------------------------------------------------------------------------

    def _check_settings(self, n_samples, n_features, default_components=None, n_components=None):
        """Check K against the data (the settings table is checked on entry to fit);
        returns K (``n_components``, default the setting; when that is None
        ``default_components``, else the largest K the data allow)."""
        high, why = self._max_components(n_samples, n_features)
        sizes = f"n_samples={n_samples}, n_features={n_features}"
        if high < self._min_components:  # no K at all (a model with K = 0 always has one)
            raise ValueError(f"{type(self).__name__} needs more data; got {sizes}")
        K = self.n_components if n_components is None else n_components
        if K is None:
            K = high if default_components is None else default_components
        # the sizes in the message: scikit-learn's checks look for n_features=1 there
        return check_n_components(K, self._min_components, high, f"{why}; {sizes}")

    def _resolve_mle(self, X, mask):
        """``n_components="mle"`` as a number (Minka 2000, as :class:`latentlab.PCA`:
        the rank maximising the Laplace evidence of the sample covariance's
        spectrum); None for any other setting."""
        if not (isinstance(self.n_components, str) and self.n_components == "mle"):
            return None
        name = type(self).__name__
        if not self._allows_mle:
            raise ValueError(f"{name} does not support n_components='mle'")
        if mask is not None:
            raise ValueError(
                f"{name}(n_components='mle') needs complete data (the evidence is that of "
                "the sample covariance's spectrum); X has missing values (NaN)"
            )
        n, d = X.shape
        if n < d:
            raise ValueError(f"n_components='mle' needs n_samples >= n_features, got {n} < {d}")
        from latentlab.estimators.pca import mle_dimension

        spectrum = np.linalg.eigvalsh(np.cov(X, rowvar=False).reshape(d, d))[::-1]
        return mle_dimension(spectrum, n)

    def _hyper(self, column_variance, dtype):
        floor = VARIANCE_FLOOR * column_variance
        return self._module.Hyper(variance_floor=np.asarray(self._pool_floor(floor), dtype))

    @staticmethod
    def _pool_floor(floor):
        """Per-feature floors; models with a single noise variance pool them."""
        return floor

    def _declaration_settings(self, scale) -> dict:
        """Extra static arguments of the declaration for data divided by ``scale``."""
        return {}

    def _parameter_log_jacobian(self, scale, n_features, n_components) -> float:
        """log prior density of the rescaled parameters minus that of the originals."""
        return 0.0

    def _warn_after_fit(self, hyper):
        if not self.converged_ and self.method == "em":
            warn_not_converged(self)

    @property
    def objective_name_(self) -> str:
        """What ``log_likelihoods_`` traces: "ELBO" (SVI), "log joint density" (MAP
        with the prior on, and Bayesian PCA), else "log-likelihood"."""
        check_is_fitted(self)
        if self.method == "svi":
            return "ELBO"
        return "log joint density" if getattr(self, "prior", False) else "log-likelihood"

    def _padded_hyper(self, hyper, active):
        """``hyper`` for loadings with the columns ``active`` (a 0/1 vector) of the
        model and the rest padding; models whose prior sees the columns override it."""
        return hyper

    def _fit_em(self, data, n, K, column_variance, hyper):
        """EM with the loadings padded to a bucket of columns; returns
        ``(params, trace, n_iter, converged)`` as NumPy, W still padded."""
        dtype = data.X.dtype
        d = data.X.shape[-1]
        n_missing = data.X.shape[0] * data.X.shape[1]
        if data.rows is not None:  # rows with missing entries outside the program
            n_missing += int(data.rows.n_rows)
        # (at least one column: K = 0 is a model whose loadings are all padding)
        key = signature(
            data,
            module=self._module.__name__,
            n_init=int(self.n_init),
            max_iter=int(self.max_iter),
            verbose=int(self.verbose),
            pca_start=self._pca_start,
        )
        n_columns = gaussian_latent_columns(K, d, n_missing, key=key)
        active = np.arange(n_columns) < K
        hyper = self._padded_hyper(hyper, active.astype(dtype))
        seed = check_random_state(self.random_state).randint(0, 2**31 - 1)
        result = _fit_em(
            self._module,
            data,
            np.asarray(n, dtype),
            np.asarray(K, np.int32),
            np.asarray(seed, np.uint32),
            np.asarray(column_variance, dtype),
            hyper,
            np.asarray(self.tol, dtype),
            n_columns=n_columns,
            n_init=int(self.n_init),
            max_iter=int(self.max_iter),
            verbose=int(self.verbose),
            pca_start=self._pca_start,
        )
        return _em_output(*result)

    def _run_em(self, starts, data, n, hyper):
        """EM from a batch of starts; returns (params, trace, n_iter, converged)."""
        dtype = data.X.dtype
        result = run_em(
            self._module.e_step,
            self._module.m_step,
            starts,
            data,
            hyper,
            np.asarray(n, dtype),
            np.asarray(self.tol, dtype),
            max_iter=int(self.max_iter),
            verbose=int(self.verbose),
        )
        return _em_output(result.params, result.trace, result.n_iter, result.converged)


class IsotropicNoiseMixin:
    """For models with one noise variance ``sigma2`` shared by every feature."""

    @staticmethod
    def _pool_floor(floor):
        # The mean, not the smallest: a floor far below the largest feature's variance
        # lets round-off break EM's monotonicity (tried: the minimum breaks it by 1e-2
        # relative on rank-K data whose column scales span 1e5).
        return np.mean(floor)

    def _noise_variance_vector(self):
        return np.full(self.n_features_in_, float(self.params_["sigma2"]))

    @property
    def noise_variance_(self):
        check_is_fitted(self)
        return float(self.params_["sigma2"])


class GaussianLatentEstimator(
    GaussianImputationMixin,
    GaussianLatentFitMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    GenerativeMixin,
    LatentEstimator,
):
    """Fitting by EM or MAP/SVI, and everything asked of the fitted marginal.

    Subclasses implement ``_noise_variance_vector`` (and the mixin's hooks) and,
    where needed, ``_fit_closed_form`` and ``_finish``.
    """

    def _noise_variance_vector(self) -> np.ndarray:
        raise NotImplementedError

    def _fit_latent(self, X):
        """Validate, fit by the chosen method, store the fitted attributes; returns self."""
        source = row_source(X, chunk_size=getattr(self, "chunk_size", None))
        if source is not None:  # out of core or Dask: exact EM over row chunks
            from latentlab.estimators._chunked import fit_gaussian_latent

            return fit_gaussian_latent(self, source)
        X, mask, shift = self._validate_for_fit(X)
        n, d = X.shape
        K = self._check_settings(n, d, n_components=self._resolve_mle(X, mask))
        with self._precision():
            # Statistics are taken about ``shift`` (the observed column means), which
            # keeps them free of cancellation; mu is shifted back at the end.
            data, column_variance = summarise(X, shift, mask)
            return self._fit_summarised(data, n, K, column_variance, shift, X=X, mask=mask)

    def _fit_summarised(self, data, n, K, column_variance, shift, *, X, mask):
        """Fit from the E-step's data (:func:`summarise`, or the chunked route's, where
        ``X`` is None and ``mask`` only says whether entries are missing); stores the
        fitted attributes, returns self.  Runs inside ``self._precision()``."""
        self.n_components_ = K
        # A constant feature gets the typical feature's scale for its starting
        # value and variance floor, so nothing starts at zero variance.
        typical = np.mean(column_variance) if np.any(column_variance > 0) else 1.0
        column_variance = np.where(column_variance > 0, column_variance, typical)
        # the fit's standardisation (x - shift) / scale: MAP/SVI fit there, and
        # sample_posterior draws there
        self.fit_shift_ = np.array(shift, np.float64)
        self.fit_scale_ = global_scale(column_variance)
        dtype = data.X.dtype
        hyper = self._hyper(column_variance, dtype)
        if self.method == "closed_form":
            params, trace, n_iter, converged = self._fit_closed_form(data, K, hyper, mask)
        elif self.method == "em":
            # rows with missing entries split over the devices setting
            data = shard_fields(data, ("X", "mask"), getattr(self, "devices", None))
            params, trace, n_iter, converged = self._fit_em(data, n, K, column_variance, hyper)
        else:
            params, trace, n_iter, converged = self._fit_svi(X - shift, mask, K, column_variance)
        # Shift back on the host in float64: in float32, mu + shift would round to
        # the shift's ulp (8 for a mean of 1e8).
        params = _drop_padding(params, K)._replace(mu=to_numpy(params.mu) + shift)
        self._end_fit(
            self._finish(params, hyper, self._feature_units(column_variance)),
            trace,
            n_iter,
            converged,
            advice=DEGENERATE_ADVICE.format(data="X"),
        )
        self._warn_after_fit(hyper)
        return self

    def _feature_units(self, column_variance) -> np.ndarray:
        """The unit of each feature the fit works in (d,).  Ones: these models are
        equivariant under one global scale only; FactorAnalysis, equivariant under a
        scale per feature, overrides it."""
        return np.ones(np.shape(column_variance), np.float64)

    def _finish(self, params, hyper, units) -> dict:
        """Fitted parameters as a dict of NumPy arrays, loadings in canonical form;
        ``units`` are the fit's :meth:`_feature_units`, where a subclass chooses that form."""
        params = params._replace(W=canonical_loadings(params.W))
        return {name: to_numpy(value) for name, value in params._asdict().items()}

    def _fit_closed_form(self, data, K, hyper, mask):
        raise NotImplementedError

    def _fit_svi(self, Xc, mask, K, column_variance):
        from latentlab.inference.svi import fit_best_of

        module = self._module
        # Every Gaussian latent model is equivariant under a global rescaling of the
        # data; optimise at unit mean variance, where Adam's step size makes sense.
        mean_variance = float(np.mean(column_variance))
        scale = np.sqrt(mean_variance) if mean_variance > 0 else 1.0
        Xs = jnp.asarray(Xc / scale)
        use_prior = self.method == "svi" or bool(getattr(self, "prior", False))
        model = partial(
            module.model,
            n_components=K,
            has_missing=mask is not None,
            use_prior=use_prior,
            **self._declaration_settings(scale),
        )
        n_observed = Xc.size if mask is None else mask.sum()
        # log density of x / scale vs that of x, for the data and for the priors
        log_jacobian = n_observed * np.log(scale) + self._parameter_log_jacobian(
            scale, Xc.shape[1], K
        )
        keys = jax.random.split(jax_key(self.random_state), self.n_init)
        unit_variance = jnp.asarray(column_variance / mean_variance if mean_variance > 0 else 1.0)
        starts = [
            module.init_params(key, Xc.shape[1], K, unit_variance.astype(Xs.dtype))._asdict()
            for key in keys
        ]
        best = fit_best_of(
            model,
            (Xs,),
            starts,
            method=self.method,
            num_steps=self.svi_steps,
            learning_rate=self.learning_rate,
            random_state=self.random_state,
            log_jacobian=log_jacobian,
        )
        params = module.Params(**{name: best.params[name] for name in module.Params._fields})
        return module.rescale(params, scale), best.trace, len(best.trace), True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # -- fitted quantities ------------------------------------------------------------

    @property
    def _n_features_out(self):
        return self.n_components_

    def _arrays(self, n_rows: int):
        """(W, 0, noise precision) as NumPy arrays in the estimator's precision, W
        padded with zero columns to its bucket for a row-wise map over ``n_rows`` rows
        (so models of nearby K share compiled scoring programs; callers cut the latent
        outputs back to K).  The mean is zero: callers pass data centred on the host
        (:meth:`_centred`), so a large mean never meets the data in float32.
        """
        check_is_fitted(self)
        W = self.params_["W"]
        d, K = W.shape
        rows = padded_size(n_rows, ROWS_PER_CALL)[0]  # as map_row_chunks pads them
        W = np.pad(W, ((0, 0), (0, gaussian_latent_columns(K, d, rows, one_pass=True) - K)))
        precision = 1.0 / self._noise_variance_vector()
        dtype = jax.dtypes.canonicalize_dtype(np.float64)
        return W.astype(dtype), np.zeros(d, dtype), precision.astype(dtype)

    def _centred(self, X, mask):
        """``X - mean_`` in float64 on the host, 0 where ``mask`` is 0."""
        return np.where(mask > 0, X - self.params_["mu"], 0.0)

    def _validate_for_fit(self, X):
        """Validate training data: returns ``(X, mask, column_means)``.

        ``mask`` is None for complete data.  ``check_data`` has already refused
        infinities, so a non-finite column mean means a NaN: complete data never pay
        for building a mask.
        """
        X = check_data(self, X, reset=True, allow_nan=True, min_samples=2)
        shift = X.mean(axis=0)
        if np.all(np.isfinite(shift)):
            return X, None, shift
        mask = ~np.isnan(X)
        check_no_empty_rows(mask)
        check_no_empty_columns(mask)
        shift = np.where(mask, X, 0.0).sum(axis=0) / mask.sum(axis=0)
        return X, mask, shift

    def _observed(self, X, *, allow_empty_rows: bool):
        X = check_data(self, X, reset=False, allow_nan=True)
        mask = ~np.isnan(X)
        if not allow_empty_rows:
            check_no_empty_rows(mask)
        return np.where(mask, X, 0.0), mask.astype(np.float64)

    @property
    def components_(self):
        """Loadings ``W^T``, shape (n_components, n_features)."""
        check_is_fitted(self)
        return self.params_["W"].T.copy()

    @property
    def mean_(self):
        check_is_fitted(self)
        return self.params_["mu"].copy()

    def sample(self, n_samples: int = 1, random_state=None, return_latent: bool = False):
        """Draw from the fitted generative model (through its NumPyro declaration)."""
        check_is_fitted(self)
        # Draw about a zero mean and add mean_ in float64 (see _arrays).
        params = {**self.params_, "mu": np.zeros_like(self.params_["mu"])}
        with self._precision():
            trace = self._draw_from_declaration(n_samples, random_state, params=params)
            X = to_numpy(trace["x"]["value"]) + self.params_["mu"]
            z = to_numpy(trace["z"]["value"])
        return (X, z) if return_latent else X

    def get_covariance(self) -> np.ndarray:
        """Model covariance of x: ``W W^T + Psi``, shape (n_features, n_features)."""
        check_is_fitted(self)
        return marginal_covariance(self.params_["W"], self._noise_variance_vector())

    def get_precision(self) -> np.ndarray:
        """Inverse model covariance by the Woodbury identity (O(d^2 K))."""
        check_is_fitted(self)
        return marginal_precision(self.params_["W"], self._noise_variance_vector())

    # -- likelihood ---------------------------------------------------------------------

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each row under the fitted model, shape (n_samples,).

        Rows with NaN entries are scored by their exact marginal over the observed
        coordinates.  A Dask array gives a Dask array.
        """
        if is_dask(X):
            return _chunked_outputs().map_row_output(self, self.score_samples, X)
        X, mask = self._observed(X, allow_empty_rows=False)
        with self._precision():
            return _padded(
                _row_posteriors, *self._arrays(len(X)), X=self._centred(X, mask), mask=mask
            )[2]

    # -- latent posterior -------------------------------------------------------------

    def posterior_latent(self, X):
        """Posterior of z for each row: mean (n, K) and covariance (n, K, K)."""
        X, mask = self._observed(X, allow_empty_rows=True)
        return self._posterior(X, mask)

    def _posterior(self, X, mask):
        with self._precision():
            mean, cov, _ = _padded(
                _row_posteriors, *self._arrays(len(X)), X=self._centred(X, mask), mask=mask
            )
        K = self.n_components_
        return mean[:, :K].copy(), cov[:, :K, :K].copy()

    def transform(self, X) -> np.ndarray:
        """Posterior mean E[z | x] of the latent variables, shape (n_samples, n_components).

        A Dask array gives a Dask array."""
        if is_dask(X):
            check_is_fitted(self)
            return _chunked_outputs().map_row_output(
                self, self.transform, X, n_columns=self.n_components_
            )
        return self.posterior_latent(X)[0]

    def inverse_transform(self, Z) -> np.ndarray:
        """Map latent coordinates back to data space: ``Z W^T + mu``."""
        check_is_fitted(self)
        Z = check_codes(Z, self.n_components_, name="Z")
        return Z @ self.params_["W"].T + self.params_["mu"]
