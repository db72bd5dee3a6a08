"""Estimator surface shared by the Gaussian latent models (PPCA, FA, Bayesian PCA).

One family base, :class:`GaussianLatentEstimator`: a subclass names its model module
(declaration, ``Params``, ``init_params``, ``e_step``, ``m_step``, ``rescale``) and
says how its noise variance and settings look; fitting by EM or MAP/SVI, stepwise EM
for the estimators that stream (PPCA and FactorAnalysis, whose ``partial_fit`` calls
``_stepwise_fit``), and everything a user asks of the fitted model -- scores, the
posterior of z, imputation, sampling, covariances -- follows from the marginal
N(mu, W W^T + Psi) and lives here once.  The checks of K below are functions
(SupervisedPCA checks through them too), as is :func:`padded_rows`, the map of a
compiled row program over bucketed row chunks.  What needs no estimator is the
model's, in :mod:`latentlab.models.gaussian_latent`: the padded EM driver
(``fit_padded_em``), the compiled row programs, the rotation, imputation's draws and
stepwise EM's statistics (``online_step``).  The loadings are padded to column buckets
(:func:`latentlab._shapes.gaussian_latent_columns`; ``latentlab.set_config(padding=False)``
turns it off).
"""

import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._docstrings import fill_doc
from latentlab._settings import (
    Boolean,
    Callable,
    Dtype,
    InstanceOf,
    Integer,
    Options,
    RandomState,
    Real,
    Verbose,
)
from latentlab._shapes import ROWS_PER_CALL, gaussian_latent_columns, map_row_chunks, padded_size
from latentlab._validation import (
    check_codes,
    check_covariance_matrix,
    check_data,
    check_level,
    check_n_components,
    check_no_empty_columns,
    check_no_empty_rows,
    check_positive_int,
)
from latentlab.closed_form.rotation import ROTATION_METHODS
from latentlab.estimators._online import check_chunk
from latentlab.estimators.base import (
    LATENTLAB_FILES,
    LatentEstimator,
    jax_key,
    to_numpy,
    warn_not_converged,
)
from latentlab.inference.chunked import is_dask, row_source
from latentlab.inference.online import check_learning_decay
from latentlab.inference.sharding import row_mesh, shard_fields
from latentlab.models.gaussian_latent import (
    FACTOR_SCORE_METHODS,
    CompleteSummary,
    GaussianData,
    canonical_loadings,
    central_quantile,
    conditional_missing_program,
    draw_imputations,
    drop_padding,
    factor_scores,
    fit_padded_em,
    global_scale,
    marginal_covariance,
    marginal_precision,
    mixture_form,
    online_params,
    online_start,
    online_step,
    online_unrotated,
    pilot_coordinates,
    rotated_loadings,
    row_posteriors_program,
    summarise,
)

__all__ = [
    "GaussianLatentEstimator",
    "check_components",
    "padded_rows",
    "resolve_mle",
]

# Below ~1e-6 of a feature's variance a noise variance only means "the data are
# (nearly) rank K"; a lower floor makes the posterior precision so ill-conditioned
# that round-off breaks EM's monotonicity.
VARIANCE_FLOOR = 1e-6
# Settings of the models fitted by ML or MAP (``prior``) that also stream (partial_fit):
# ``learning_decay`` is online EM's step-size exponent (Cappe & Moulines' kappa).
STREAMING_SETTINGS = {"prior": Boolean(), "learning_decay": Real(0.5, 1, closed="right")}
# The rotations PPCA and FactorAnalysis report their loadings in
# (:func:`latentlab.rotate`), or a user's criterion function of the loadings.
ROTATION_SETTINGS = {
    "rotation": Options(*(m for m in ROTATION_METHODS if m != "custom")) | Callable() | None,
    "rotation_kwargs": InstanceOf(dict, "a dict of latentlab.rotate's arguments") | None,
    "n_rotation_starts": Integer(1, None),
}
# what to try when a fit's parameters are not finite (check_finite_fit)
DEGENERATE_ADVICE = (
    "the data may be degenerate for this model (try fewer components or rescale {data})"
)
# The settings every Gaussian latent model has; subclasses add theirs.  The range of
# n_components depends on the data (check_components), and "mle" on the model
# (resolve_mle says which take it).
SETTINGS = {
    "n_components": Integer() | None | "mle",
    "method": Options("em", "map", "svi"),
    "tol": Real(0, None),
    "max_iter": Integer(1, None),
    "n_init": Integer(1, None),
    "svi_steps": Integer(1, None),
    "learning_rate": Real(0, None, closed="neither"),
    "random_state": RandomState(),
    "dtype": Dtype(),
    "verbose": Verbose(),
}


# ----------------------------------------------------------------------------- pure functions


def check_components(
    name, setting, low, high, why, n_samples, n_features, default_components=None
) -> int:
    """K from the ``n_components`` setting, checked against the data: ``low`` (0 where
    the model is defined without W, else 1) to ``high`` (``why`` says what bounds it).
    A ``setting`` of None gives ``default_components``, else ``high``."""
    sizes = f"n_samples={n_samples}, n_features={n_features}"
    if high < low:  # no K at all (a model with K = 0 always has one)
        raise ValueError(f"{name} needs more data; got {sizes}")
    K = setting
    if K is None:
        K = high if default_components is None else default_components
    # the sizes in the message: scikit-learn's checks look for n_features=1 there
    return check_n_components(K, low, high, f"{why}; {sizes}")


def resolve_mle(name, setting, allows_mle, X, mask):
    """``n_components="mle"`` as a number (Minka 2000, as :class:`latentlab.PCA`:
    the rank maximising the Laplace evidence of the sample covariance's
    spectrum); None for any other setting."""
    if not (isinstance(setting, str) and setting == "mle"):
        return None
    if not allows_mle:
        raise ValueError(f"{name} does not support n_components='mle'")
    if mask is not None:
        raise ValueError(
            f"{name}(n_components='mle') needs complete data (the evidence is that of "
            "the sample covariance's spectrum); X has missing values (NaN)"
        )
    n, d = X.shape
    if n < d:
        raise ValueError(f"n_components='mle' needs n_samples >= n_features, got {n} < {d}")
    from latentlab.closed_form.pca_rank import mle_dimension

    spectrum = np.linalg.eigvalsh(np.cov(X, rowvar=False).reshape(d, d))[::-1]
    return mle_dimension(spectrum, n)


def padded_rows(fn, *arrays_before, X, mask):
    """A jitted row-wise ``fn(*arrays_before, X, mask)`` (a compiled row program of
    :mod:`latentlab.models.gaussian_latent`) over bucketed row chunks (see
    :func:`latentlab._shapes.map_row_chunks`); returns a tuple of NumPy arrays."""
    out = map_row_chunks(lambda x, m: fn(*arrays_before, x, m), X, mask)
    return out if isinstance(out, tuple) else (out,)


def _chunked_outputs():
    from latentlab.estimators import _chunked  # imports Dask helpers only when used

    return _chunked


# ----------------------------------------------------------------------------- the family base


class GaussianLatentEstimator(
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    LatentEstimator,
):
    """Fitting by EM or MAP/SVI, and everything asked of the fitted marginal.

    Subclasses set ``_module`` (the model module) and ``_settings``, implement
    ``_max_components`` and, unless ``_isotropic_noise``, ``_noise_variance_vector``
    and, where needed,
    ``_fit_closed_form`` and ``_finish``; the hooks ``_hyper``,
    ``_declaration_settings``, ``_parameter_log_jacobian``, ``_feature_units`` and
    ``_warn_after_fit`` have defaults.
    """

    _module = None
    _methods = ("em", "map", "svi")
    _generative = True  # score, bic, aic, n_parameters_, sample_posterior
    _settings = SETTINGS
    _pca_start = True  # EM's first start at the mean-imputed PCA solution (if the model has one)
    # Smallest n_components: 0 (no latent factor: the independent-noise Gaussian,
    # the baseline row of a model comparison) where the model is defined without W.
    _min_components = 1
    _allows_mle = False  # n_components="mle": Minka's (2000) choice on the covariance
    # one noise variance for every feature, params_["sigma2"] (PPCA, Bayesian PCA);
    # otherwise the subclass implements _noise_variance_vector
    _isotropic_noise = False

    def _max_components(self, n_samples, n_features) -> int:
        raise NotImplementedError

    def _noise_variance_vector(self) -> np.ndarray:
        """Each feature's noise variance (d,): ``sigma2`` repeated where the noise is
        isotropic (``_isotropic_noise``); the other models override it."""
        if not self._isotropic_noise:
            raise NotImplementedError
        return np.full(self.n_features_in_, float(self.params_["sigma2"]))

    @property
    def noise_variance_(self):
        """The noise variance: ``sigma2`` (a float) where it is isotropic, else one
        per feature (n_features,)."""
        check_is_fitted(self)
        if self._isotropic_noise:
            return float(self.params_["sigma2"])
        return self._noise_variance_vector().copy()

    # -- fitting ------------------------------------------------------------------------

    def _check_settings(self, n_samples, n_features, default_components=None, n_components=None):
        """Check K against the data (the settings table is checked on entry to fit);
        returns K (``n_components``, default the setting; when that is None
        ``default_components``, else the largest K the data allow)."""
        high, why = self._max_components(n_samples, n_features)
        setting = self.n_components if n_components is None else n_components
        return check_components(
            type(self).__name__,
            setting,
            self._min_components,
            high,
            why,
            n_samples,
            n_features,
            default_components,
        )

    def _hyper(self, column_variance, dtype):
        """The model's hyperparameters: per-feature variance floors."""
        floor = VARIANCE_FLOOR * column_variance
        return self._module.Hyper(variance_floor=np.asarray(floor, dtype))

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

    def _fit_em(self, data, n, K, column_variance, hyper, max_iter=None):
        """EM with the loadings padded to a bucket of columns (at most ``max_iter``
        steps, default the setting's); returns ``(params, trace, n_iter, converged)``
        as NumPy, W still padded."""
        return fit_padded_em(
            self._module,
            data,
            n,
            K,
            column_variance,
            hyper,
            n_init=self.n_init,
            max_iter=self.max_iter if max_iter is None else max_iter,
            tol=self.tol,
            verbose=self.verbose,
            seed=check_random_state(self.random_state).randint(0, 2**31 - 1),
            pca_start=self._pca_start,
        )

    def _fit_latent(self, X):
        """Validate, fit by the chosen method, store the fitted attributes; returns self."""
        source = row_source(X, chunk_size=getattr(self, "chunk_size", None))
        if source is not None:  # out of core or Dask: exact EM over row chunks
            from latentlab.estimators._chunked import fit_gaussian_latent

            return fit_gaussian_latent(self, source)
        X, mask, shift = self._validate_for_fit(X)
        n, d = X.shape
        mle = resolve_mle(type(self).__name__, self.n_components, self._allows_mle, X, mask)
        K = self._check_settings(n, d, n_components=mle)
        with self._precision():
            # Statistics are taken about ``shift`` (the observed column means), which
            # keeps them free of cancellation; mu is shifted back at the end.
            data, column_variance = summarise(X, shift, mask)
            return self._fit_summarised(data, n, K, column_variance, shift, X=X, mask=mask)

    def fit_covariance(self, covariance, n_samples, mean=None):
        """Fit from a covariance (or correlation) matrix of ``n_samples`` rows, as R's
        ``factanal(covmat=, n.obs=)``: for published matrices, or data summarised
        elsewhere.  The likelihood depends on complete rows only through their count,
        mean and scatter, so EM on ``(n_samples, mean, n_samples * covariance)`` is the
        fit to any data set with those moments; ``score``/``score_samples`` of rows
        and everything else then work as after :meth:`fit`.

        Parameters
        ----------
        covariance : array-like or DataFrame of shape (n_features, n_features)
            The maximum-likelihood (divisor n) covariance; a correlation matrix gives
            the fit to standardised data.  A DataFrame's columns name the features.
            Symmetric, finite and positive definite.
        n_samples : int
            Rows behind the matrix (>= 2): it weighs the likelihood (``bic``,
            ``aic``, the goodness of fit), not the estimates.
        mean : array-like of shape (n_features,) or None, default=None
            The rows' mean; None: zeros (``mean_`` is then 0).

        Returns
        -------
        self
        """
        name = type(self).__name__
        if self.method not in ("em", "closed_form"):
            raise ValueError(
                f"{name}.fit_covariance fits by EM (or the closed form); got "
                f"method={self.method!r}, which needs the rows"
            )
        if isinstance(self.n_components, str):
            raise ValueError(f"{name}(n_components={self.n_components!r}) needs the rows")
        S, names = check_covariance_matrix(covariance)
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
            raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}")
        if n_samples < 2:
            raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}")
        d = S.shape[0]
        shift = np.zeros(d) if mean is None else np.asarray(mean, np.float64)
        if shift.shape != (d,) or not np.all(np.isfinite(shift)):
            raise ValueError(f"mean must be {d} finite numbers (one per feature)")
        self.n_features_in_ = d
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        K = self._check_settings(int(n_samples), d)
        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            n = float(n_samples)
            complete = CompleteSummary(
                np.asarray(n, dtype), np.zeros(d, dtype), np.asarray(n * S, dtype)
            )
            empty = np.zeros((0, 32, d), dtype)
            data = GaussianData(complete, empty, empty)
            return self._fit_summarised(
                data, int(n_samples), K, np.diag(S).copy(), shift, X=None, mask=None
            )

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
        params = drop_padding(params, K)._replace(mu=to_numpy(params.mu) + shift)
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
        params = params._replace(W=self._rotation_frame(to_numpy(canonical_loadings(params.W))))
        return {name: to_numpy(value) for name, value in params._asdict().items()}

    def _rotation_frame(self, W) -> np.ndarray:
        """The loadings W in the rotated solution's frame
        (:func:`latentlab.models.gaussian_latent.rotated_loadings`);
        sets ``rotation_matrix_`` and ``factor_correlation_`` on estimators with a
        ``rotation`` setting; others get W back unchanged."""
        if not hasattr(self, "rotation"):
            return W
        seed = None  # drawn only for a rotation: random_state may be NumPy's global state
        if self.rotation is not None and W.shape[1] >= 2:
            seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)
        W, self.rotation_matrix_, self.factor_correlation_ = rotated_loadings(
            W, self.rotation, self.rotation_kwargs, self.n_rotation_starts, seed
        )
        return W

    def _add_reported_draws(self, tree) -> None:
        """With an oblique rotation, add ``pattern`` to the posterior draws of
        :meth:`sample_posterior`: each draw of W (aligned to ``params_["W"] = Lambda C``)
        times ``C^-1``, the draws of the pattern loadings in the fit's rotated solution
        with its factor correlations held at ``factor_correlation_``."""
        C = self._factor_map()
        if C is None or "W" not in tree["posterior"]:
            return
        W = tree["posterior"]["W"]
        pattern = W.copy(data=np.linalg.solve(C.T, np.swapaxes(W.values, -1, -2)).swapaxes(-1, -2))
        tree["posterior"]["pattern"] = pattern

    def _factor_map(self):
        """``C`` with ``f = C z`` (the rotated factors from the declaration's z), or
        None where the factors are uncorrelated (no rotation, or an orthogonal one)."""
        phi = getattr(self, "factor_correlation_", None)
        if phi is None or np.array_equal(phi, np.eye(len(phi))):
            return None
        return np.linalg.cholesky(phi)

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

    @fill_doc
    def _stepwise_fit(self, X):
        """Update the model with one chunk of rows by stepwise (online) EM.

        The first call initialises from its chunk (the PCA solution of the chunk with
        missing entries at their column means, as ``fit``'s first start) and takes one
        EM step on it; every call then forms the chunk's average expected sufficient
        statistics under the current parameters, mixes them into the running average
        with weight ``(t + 2) ** -learning_decay`` and takes the M-step from the
        average (Cappe & Moulines 2009).  NaN entries are missing values.  ``fit``
        ends a stream: a later ``partial_fit`` starts a new one from its chunk.

        {partial_fit_chunks}
        """
        name = type(self).__name__
        decay = check_learning_decay(self.learning_decay)
        first = not hasattr(self, "online_state_")
        if self.method != "em":
            raise ValueError(f"{name}.partial_fit is online EM; got method={self.method!r}")
        X, observed = check_chunk(self, X, first=first, min_samples=2 if first else 1)
        module = self._module
        with self._precision():
            dtype = jax.dtypes.canonicalize_dtype(np.float64)
            if first:
                if isinstance(self.n_components, str):
                    raise ValueError(f"{name}.partial_fit needs a number of components")
                K = self._check_settings(*X.shape)
                shift, variance = pilot_coordinates(X, observed)
                unit = self._feature_units(variance)  # FA: standard deviations; PPCA: ones
                hyper = self._hyper(variance / unit**2, dtype)
                state, params = online_start(module, X, observed, shift, unit, hyper, K, dtype)
                step = 0
            else:
                state = self.online_state_
                K = self.n_components_
                params, hyper = online_params(module, state, dtype)
                step = int(self.n_iter_)
            mesh = row_mesh(getattr(self, "devices", None))
            state, params, loglik = online_step(
                module,
                state,
                params,
                hyper,
                X,
                observed,
                step,
                decay,
                dtype,
                first=first,
                mesh=mesh,
            )
        # The fitted attributes fit would set, from the unrotated state.
        n_rows = X.shape[0]
        self.online_state_ = state
        self.n_components_ = K
        self.params_ = self._finish(online_unrotated(module, state, params), hyper, state["unit"])
        self._end_chunk(first, n_rows, loglik / n_rows)  # in the data's units
        return self

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
        """Loadings ``W^T``, shape (n_components, n_features); with an oblique
        ``rotation``, the pattern loadings ``Lambda^T`` (``params_["W"]`` then holds
        them in the frame of uncorrelated factors, ``Lambda C``)."""
        check_is_fitted(self)
        C = self._factor_map()
        if C is None:
            return self.params_["W"].T.copy()
        return np.linalg.solve(C.T, self.params_["W"].T)

    @property
    def structure_(self):
        """Structure loadings ``(Lambda Phi)^T``, shape (n_components, n_features): the
        covariances of the rotated factors with the features; the pattern loadings
        themselves where the factors are uncorrelated."""
        check_is_fitted(self)
        phi = getattr(self, "factor_correlation_", None)
        return self.components_ if phi is None else phi @ self.components_

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
            z = self._to_factors(to_numpy(trace["z"]["value"]))
        return (X, z) if return_latent else X

    def _to_factors(self, z, cov=None):
        """The rotated factors ``f = C z`` of rows of latents (and their covariances)."""
        C = self._factor_map()
        if C is None:
            return z if cov is None else (z, cov)
        if cov is None:
            return z @ C.T
        return z @ C.T, np.einsum("ij,njk,lk->nil", C, cov, C)

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
            return padded_rows(
                row_posteriors_program, *self._arrays(len(X)), X=self._centred(X, mask), mask=mask
            )[2]

    # -- latent posterior -------------------------------------------------------------

    def posterior_latent(self, X):
        """Posterior of z for each row: mean (n, K) and covariance (n, K, K); with an
        oblique ``rotation``, of the rotated (correlated) factors."""
        X, mask = self._observed(X, allow_empty_rows=True)
        return self._to_factors(*self._posterior(X, mask))

    def _posterior(self, X, mask):
        with self._precision():
            mean, cov, _ = padded_rows(
                row_posteriors_program, *self._arrays(len(X)), X=self._centred(X, mask), mask=mask
            )
        K = self.n_components_
        return mean[:, :K].copy(), cov[:, :K, :K].copy()

    def transform(self, X, method: str = "regression") -> np.ndarray:
        """Posterior mean E[z | x] of the latent variables, shape (n_samples, n_components).

        ``method`` other than ``"regression"`` (the posterior mean) gives those factor
        scores instead (:meth:`factor_scores`).  A Dask array gives a Dask array."""
        if method != "regression":
            return self.factor_scores(X, method=method)
        if is_dask(X):
            check_is_fitted(self)
            return _chunked_outputs().map_row_output(
                self, self.transform, X, n_columns=self.n_components_
            )
        return self.posterior_latent(X)[0]

    def factor_scores(self, X, method: str = "regression") -> np.ndarray:
        """Factor scores of the rows of X, shape (n_samples, n_components), in the
        reported (rotated) factors; NaN entries are missing, and each row is scored
        from its observed entries.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        method : {"regression", "bartlett", "anderson_rubin", "ten_berge"}
            ``"regression"`` (Thurstone): the posterior mean, as :meth:`transform`.
            ``"bartlett"``: weighted least squares, unbiased given the factors.
            ``"anderson_rubin"``: uncorrelated scores of unit variance.
            ``"ten_berge"``: scores whose covariance is ``factor_correlation_``
            (Anderson-Rubin's for uncorrelated factors).  See
            :func:`latentlab.models.gaussian_latent.factor_scores` for the formulas.
        """
        check_is_fitted(self)
        if method not in FACTOR_SCORE_METHODS:
            raise ValueError(f"method must be one of {FACTOR_SCORE_METHODS}, got {method!r}")
        X, mask = self._observed(X, allow_empty_rows=method == "regression")
        K = self.n_components_
        phi = getattr(self, "factor_correlation_", np.eye(K))
        # the other methods invert the observed block's information M: a row that
        # observes fewer entries than there are factors does not determine them
        short = np.flatnonzero(mask.sum(axis=1) < K) if method != "regression" else []
        if len(short):
            rows = ", ".join(map(str, short[:10])) + (", ..." if len(short) > 10 else "")
            warnings.warn(
                f"{method} factor scores need at least {K} observed entries per row; "
                f"row(s) {rows} have fewer and score NaN (method='regression', the "
                "posterior mean, scores every row)",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
            mask = mask.copy()
            mask[short] = 1.0  # scored as complete rows of zeros, then set to NaN
        scores = factor_scores(
            self.components_.T,
            phi,
            self._noise_variance_vector(),
            self._centred(X, mask),
            mask,
            method,
        )
        scores[short] = np.nan
        return scores

    def inverse_transform(self, Z) -> np.ndarray:
        """Map latent coordinates back to data space: ``Z W^T + mu`` (with an oblique
        ``rotation``, ``Z`` are factors and ``W`` the pattern loadings)."""
        check_is_fitted(self)
        Z = check_codes(Z, self.n_components_, name="Z")
        return Z @ self.components_ + self.params_["mu"]

    # -- imputation ---------------------------------------------------------------------

    def impute(self, X, *, return_std: bool = False):
        """Fill NaN entries with their conditional mean given the row's observed entries.

        Observed entries are returned unchanged.  With ``return_std=True`` also returns
        the conditional standard deviation of each entry (0 where observed).  A Dask
        array gives Dask arrays.
        """
        if is_dask(X):
            check_is_fitted(self)
            return _chunked_outputs().map_imputation(self, X, return_std)
        X, mask = self._observed(X, allow_empty_rows=True)
        with self._precision():
            filled, var, _, _ = padded_rows(
                conditional_missing_program,
                *self._arrays(len(X)),
                X=self._centred(X, mask),  # in float64 on the host
                mask=mask,
            )
        std = np.sqrt(var)
        # un-centre in float64; observed entries bit-exact
        filled = np.where(mask > 0, X, filled + self.params_["mu"])
        return (filled, std) if return_std else filled

    def conditional_mixture(self, X):
        """Each entry's distribution given its row's observed entries, as a mixture
        ``sum_c weights[n, c] N(means[n, c, j], sds[n, c, j]^2)`` with one component:
        ``weights`` (n, 1) ones, ``means`` and ``sds`` (n, 1, d), sd 0 where observed.
        (The common form of every imputing model; mixtures have K components.)"""
        return mixture_form(*self.impute(X, return_std=True))

    def impute_interval(self, X, level: float = 0.9):
        """Central ``level`` interval of each missing entry given the row's observed ones.

        The conditional distribution is Gaussian, so the interval is the conditional
        mean -/+ z * sd.  Plug-in: parameter uncertainty is not included.  Returns
        ``(lower, upper)``, each (n_samples, n_features); both equal X where observed.
        """
        z = central_quantile(check_level(level))
        filled, std = self.impute(X, return_std=True)
        return filled - z * std, filled + z * std

    def sample_imputations(self, X, n_imputations: int = 5, random_state=None) -> np.ndarray:
        """Multiple imputation: draws of the missing entries from p(x_miss | x_obs).

        Draws z from its posterior, then the missing coordinates given z, so their
        correlations are kept.  Returns shape (n_imputations, n_samples, n_features).
        """
        check_positive_int("n_imputations", n_imputations)
        X, mask = self._observed(X, allow_empty_rows=True)
        z_mean, z_cov = self._posterior(X, mask)
        rng = check_random_state(random_state)
        W, mu, noise = self.params_["W"], self.params_["mu"], self._noise_variance_vector()
        return draw_imputations(X, mask, z_mean, z_cov, W, mu, noise, n_imputations, rng)
