"""``latentlab.GaussianMixture``: Gaussian mixtures fitted by jit-compiled EM.

The class is the surface -- settings, validation, ``fit`` and the fitted quantities
-- and runs over private modules: ``_gmm_programs`` (the compiled programs),
``_gmm_fitting`` (the EM and MAP/SVI routes), ``_gmm_scoring`` (row scoring),
``_gmm_starts`` (starts, on the host) and ``_gmm_conditionals`` (imputation); the
algebra is in :mod:`latentlab.models.gmm`.  It is over ~400 lines because ~210 are
docstrings (the class's documents 22 settings) and ``fit`` maps between the data's
and EM's units.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from sklearn.base import DensityMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._docstrings import fill_doc
from latentlab._settings import (
    ArrayLike,
    Boolean,
    Dtype,
    Integer,
    Options,
    RandomState,
    Real,
    Verbose,
    scale_settings,
)
from latentlab._shapes import em_rows, mixture_components, pad_rows, padded_size
from latentlab._validation import (
    check_data,
    check_n_components,
    check_no_empty_columns,
    check_no_empty_rows,
    check_positive_int,
)
from latentlab.estimators import _posterior_hooks
from latentlab.estimators._gmm_conditionals import MixtureConditionalsMixin, mixture_quantile
from latentlab.estimators._gmm_fitting import MixtureFittingMixin
from latentlab.estimators._gmm_programs import CHUNK, make_starts
from latentlab.estimators._gmm_scoring import MixtureScoringMixin
from latentlab.estimators._gmm_starts import MixtureStartsMixin
from latentlab.estimators._online import OnlineMixtureMixin
from latentlab.estimators.base import (
    GenerativeMixin,
    LatentEstimator,
    to_numpy,
    warn_not_converged,
)
from latentlab.inference.chunked import is_dask, row_source
from latentlab.inference.em import fit_em
from latentlab.models import gmm

# mixture_quantile: used by latentlab.impute's calibration
__all__ = ["GaussianMixture", "mixture_quantile"]

INIT_METHODS = ("kmeans", "k-means++", "random", "random_from_data")
METHODS = ("em", "map", "svi")


@fill_doc(rows_per_call="2048 complete rows")
class GaussianMixture(
    OnlineMixtureMixin,
    MixtureFittingMixin,
    MixtureScoringMixin,
    MixtureStartsMixin,
    MixtureConditionalsMixin,
    GenerativeMixin,
    DensityMixin,
    LatentEstimator,
):
    """Gaussian mixture model fitted by EM (PRML 9.2), declared once in
    :func:`latentlab.models.gmm.gmm_model`.

    The surface follows :class:`sklearn.mixture.GaussianMixture` (same parameter and
    attribute names); EM runs as one compiled program with optional SQUAREM
    acceleration, statistics are taken about the current means and covariances are
    kept as Cholesky factors.

    Parameters
    ----------
    n_components : int, default=1
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
    tol : float, default=1e-6
        EM stops when the mean per-sample log-likelihood changes by less than this
        between two iterations.
    reg_covar : float, default=1e-6
        Floor on every eigenvalue of every covariance (variances for diag/spherical):
        keeps them positive definite.  scikit-learn *adds* ``reg_covar`` to the
        diagonal instead; that step can lower the likelihood, while the floor is the
        exact M-step under the constraint, so EM stays monotone.  The two agree to
        O(reg_covar) wherever the data's variances are well above it.  The floor is
        never below round-off at each feature's scale (2e-15 times the feature's
        variance in float64, 1e-6 in float32; spherical: the mean variance), so
        ``reg_covar=0`` cannot give NaN; a warning says when a component collapsed
        onto it.
    covariance_prior : float, default=0.0
        tau >= 0: EM maximises the penalised log-likelihood log p(X) - (tau / 2) sum_k
        [tr(Sigma_k^-1 D) + log |Sigma_k|] (Chen & Tan 2009; an improper inverse-Wishart
        prior's mode), D the features' observed variances: each covariance's M-step is
        its scatter plus tau pseudo-rows of variance D, (N_k S_k + tau D) / (N_k + tau).
        0 is maximum likelihood.  With missing entries a full covariance can collapse
        onto the few rows that observe every coordinate of a direction, where the
        likelihood has no maximum: EM then crawls for hundreds of iterations towards
        ``reg_covar`` and the fit scores far worse on new rows (standardised wine with
        30% holes, K = 3: 500 cycles, held-out -2,700 nats per row; with tau = 5: ~30
        cycles, -11).  The target is each feature's overall variance, so the
        covariances of well-separated clusters grow by about tau D / N_k: keep tau
        small against the rows per component.  Means and weights are unpenalised;
        ``log_likelihoods_`` traces the penalised objective and ``score`` is the
        log-likelihood.  EM only.
    max_iter : int, default=500
        Maximum number of iterations.  With ``accelerate=True`` an iteration is one
        SQUAREM cycle of four EM steps (E- and M-step pairs), so up to
        ``4 * max_iter`` EM steps run; ``n_iter_`` and ``log_likelihoods_`` count
        cycles too.  scikit-learn counts single EM steps: ``accelerate=False`` gives
        its count.  ``max_iter=0`` evaluates the start without any EM step: the
        fitted parameters are the start, ``n_iter_`` is 0, ``converged_`` False (no
        ``ConvergenceWarning``, as in scikit-learn) and ``lower_bound_`` is the
        start's mean log-likelihood.
    n_init : int, default=1
        Number of starts; the best log-likelihood is kept.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        How starting responsibilities are made, as in scikit-learn, on the
        standardised data (see Notes) ("kmeans": Lloyd iterations from k-means++
        seeds, the best of 3 runs except for spherical covariances; both k-means
        starts run latentlab's own :class:`KMeans` code inside the fit program, on
        data with missing entries at their column means).
    weights_init : array (n_components,), optional
    means_init : array (n_components, n_features), optional
    precisions_init : array, optional
        Shape (K, d, d) full, (d, d) tied, (K, d) diag, (K,) spherical.
    accelerate : bool, default=True
        SQUAREM extrapolation, kept monotone by falling back to the plain EM step;
        see ``max_iter`` for how iterations are counted.
    random_state : int, RandomState or None, default=None
    warm_start : bool, default=False
        If True, each ``fit`` after the first starts from the previous fit's
        parameters (one start: ``n_init`` and ``weights_init``/``means_init``/
        ``precisions_init`` are ignored), as in scikit-learn; ``n_components``,
        ``covariance_type`` and the number of features must not change.
        ``fit`` with ``max_iter=1`` then takes one iteration per call.
    method : {"em", "map", "svi"}, default="em"
        ``"em"``: jit-compiled EM.  ``"map"``: a point estimate by Adam (AutoDelta)
        on the same NumPyro declaration -- maximum likelihood with ``prior=False``,
        MAP with the declaration's priors with ``prior=True``.  ``"svi"``: a
        mean-field Gaussian posterior (AutoNormal) with the priors on; ``params_``
        holds posterior medians and ``log_likelihoods_`` the ELBO trace.  Both start
        from the same starting points as EM and optimise in standardised units (see
        Notes).
    prior : bool, default=False
        For ``method="map"``: include the declaration's priors (they act on the
        standardised data, see Notes).
    svi_steps : int, default=3000
        Adam steps for ``method="map"``/``"svi"``.
    learning_rate : float, default=0.05
        Initial Adam step size (decays to 1e-3 over ``svi_steps``).
    dtype : {"float64", "float32"}, default="float64"
    {streaming_em_parameters}

    Attributes
    ----------
    weights_ : (n_components,)
    means_ : (n_components, n_features)
    covariances_, precisions_, precisions_cholesky_ : arrays shaped by ``covariance_type``
        as in scikit-learn (``precisions_cholesky_`` is upper triangular for full/tied).
    lower_bound_ : float
        Mean per-sample log-likelihood at the fitted parameters (with
        ``max_iter=0``: at the start, where scikit-learn reports -inf).
    log_likelihoods_ : ndarray (n_iter_,)
        Total log-likelihood after each iteration; never decreases, and the last equals
        ``n * score(X)``.
    lower_bounds_ : ndarray (n_iter_,)
        ``log_likelihoods_ / n_samples``: scikit-learn's per-iteration trace (for
        ``method="em"`` the last equals ``lower_bound_``).
    n_iter_, converged_ : int, bool
        Iterations run (SQUAREM cycles when ``accelerate``, see ``max_iter``) and
        whether ``tol`` was met.  Should EM break down numerically (an iterate with a
        non-finite likelihood), the last finite iterate is kept, ``converged_`` is
        False and a ``ConvergenceWarning`` says so.
    params_ : dict
        Fitted values by NumPyro site name: ``weights``, ``means``, ``scale`` (Cholesky
        factors or standard deviations, see :mod:`latentlab.models.gmm`).
    {streaming_em_attributes}

    Notes
    -----
    The model is equivariant under rescaling and shifting features (x_j -> s_j x_j +
    c_j; spherical covariances: one s for all features), and so is the fit: every
    method works on the data centred and divided feature by feature by its standard
    deviation (spherical: the root mean variance), with ``reg_covar`` carried over as
    the floor ``reg_covar / s_j^2``, and maps the result back in float64.  Scaling
    feature j by s_j then scales its means and standard deviations by s_j, leaves
    ``predict_proba`` unchanged and lowers each row's log-likelihood by log s_j per
    observed entry, whatever the spread of the scales (with ``reg_covar=0``; a positive
    ``reg_covar`` is a variance in the data's units).

    Missing values (NaN) are handled exactly (for data missing at random): each
    component contributes its marginal over a row's observed coordinates to the
    likelihood, and EM uses the missing coordinates' conditional moments.  ``impute``
    fills them with the posterior-weighted conditional means; ``impute_interval``
    gives the conditional mixture's quantiles; ``sample_imputations`` draws them.

    Compiled programs are shared where shapes vary: a fit is one XLA program (starts
    and EM together); on small data it is compiled for ``n_components`` rounded up
    to a power of two, the extra components held at weight exactly 0, which changes
    no number of the fit; scoring, prediction and imputation run at one fixed row
    count per model, whatever the number of rows.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-3, 1, (100, 2)), rng.normal(3, 1, (100, 2))])
    >>> gm = latentlab.GaussianMixture(2, random_state=0).fit(X)
    >>> np.sort(gm.means_[:, 0]).round(0)
    array([-3.,  3.])
    """

    _posterior_problem = _posterior_hooks.mixture_problem  # for sample_posterior

    _settings = {
        "n_components": Integer(),  # 1 <= K <= n_samples: checked with the data
        "covariance_type": Options(*gmm.COVARIANCE_TYPES),
        "tol": Real(0, None),
        "reg_covar": Real(0, None),
        "covariance_prior": Real(0, None, finite=True),
        "max_iter": Integer(0, None),  # 0 (as in scikit-learn): evaluate the start only
        "n_init": Integer(1, None),
        "init_params": Options(*INIT_METHODS),
        "weights_init": ArrayLike() | None,
        "means_init": ArrayLike() | None,
        "precisions_init": ArrayLike() | None,
        "accelerate": Boolean(),
        "random_state": RandomState(),
        "warm_start": Boolean(),
        "method": Options(*METHODS),
        "prior": Boolean(),
        "svi_steps": Integer(1, None),
        "learning_rate": Real(0, None, closed="neither", finite=True),
        "dtype": Dtype(),
        "verbose": Verbose(),
        "learning_decay": Real(0.5, 1, closed="right"),
        **scale_settings(),
    }

    def __init__(
        self,
        n_components=1,
        *,
        covariance_type="full",
        tol=1e-6,
        reg_covar=1e-6,
        covariance_prior=0.0,
        max_iter=500,
        n_init=1,
        init_params="kmeans",
        weights_init=None,
        means_init=None,
        precisions_init=None,
        accelerate=True,
        random_state=None,
        warm_start=False,
        method="em",
        prior=False,
        svi_steps=3000,
        learning_rate=0.05,
        dtype="float64",
        verbose=0,
        learning_decay=0.7,
        chunk_size=None,
        devices=None,
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.covariance_prior = covariance_prior
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.accelerate = accelerate
        self.random_state = random_state
        self.warm_start = warm_start
        self.method = method
        self.prior = prior
        self.svi_steps = svi_steps
        self.learning_rate = learning_rate
        self.dtype = dtype
        self.verbose = verbose
        self.learning_decay = learning_decay
        self.chunk_size = chunk_size
        self.devices = devices

    # -- validation ---------------------------------------------------------------------

    def _check_settings(self, n, d):
        """K checked against the data (the table is checked on entry to fit)."""
        return check_n_components(self.n_components, 1, n, "at most n_samples")

    # -- fitting ------------------------------------------------------------------------

    def fit(self, X, y=None):
        """Fit the mixture to X (n_samples, n_features) by EM; returns self.

        With ``warm_start=True`` and a previous fit, EM starts from that fit's
        parameters (one start: ``n_init`` and the ``*_init`` settings are ignored).
        """
        if self.covariance_prior > 0 and self.method != "em":
            raise ValueError(
                f"covariance_prior={self.covariance_prior!r} penalises EM's objective; "
                f"method={self.method!r} takes priors through prior=True instead"
            )
        # read before check_data resets n_features_in_
        previous = self._previous_fit()
        source = row_source(X, chunk_size=self.chunk_size)
        if source is not None:  # out of core or Dask: exact EM over row chunks
            from latentlab.estimators._chunked import fit_mixture

            return fit_mixture(self, source, previous)
        X = check_data(self, X, reset=True, allow_nan=True, min_samples=1)
        observed = ~np.isnan(X)
        check_no_empty_rows(observed)
        check_no_empty_columns(observed)
        n, d = X.shape
        K = self._check_settings(n, d)
        shift = np.nanmean(X, axis=0)
        # EM runs in standardised units, z = (x - shift) / unit feature by feature, in
        # float64 on the host: about the column means nothing cancels, and with every
        # feature at unit variance the starts (k-means), SQUAREM's step length and the
        # covariance floor do not depend on the data's units, so neither does the fit.
        # Starts are made from data with missing entries at their column means.
        unit = self._standardising_units(np.where(observed, X - shift, 0.0), observed)
        Z = np.where(observed, (X - shift) / unit, 0.0)
        if previous is None:
            weights, means, scale = self._user_init(K, d, shift, unit)
        else:
            weights, means, scale = self._warm_init(previous, K, d, shift, unit)
        rng = check_random_state(self.random_state)
        need_resp = weights is None or means is None or scale is None
        n_starts = self.n_init if previous is None else 1
        rows = int(np.prod(padded_size(n, CHUNK, em_rows)))
        # EM runs with padding components up to the bucket (at weight 0, they change
        # nothing): one compiled program serves every n_components in it
        padded = K
        if self.method == "em":
            padded = mixture_components(
                K, self._estep_work(observed), key=self._program_key(observed, n_starts)
            )
        with self._precision():
            # host arrays already in the working dtype: no eager JAX conversions (each
            # would be a compiled program of its own on a cold start)
            dtype = np.dtype(self.dtype)
            reg = self._variance_floor(unit, dtype).astype(dtype)
            resp = self._start_responsibilities(
                Z, K, need_resp, n_starts, (rows, padded), rng, dtype
            )
            start_data = (
                pad_rows(Z, rows).astype(dtype),
                pad_rows(np.ones(n), rows).astype(dtype),
                resp,
                np.arange(padded) < K,
                *self._given_start(weights, means, scale, K, padded, dtype),
            )
            if self.method == "em":
                params, trace, converged, objective, breakdown = self._fit_em(
                    start_data, Z, observed, reg
                )
            else:
                starts = make_starts(*start_data[:3], reg, *start_data[3:], self.covariance_type)
                params, trace, converged = self._fit_svi(starts, Z, observed, rng)
                objective, breakdown = float(trace[-1]), False
            fitted = {name: to_numpy(v) for name, v in params._asdict().items()}
        counts = observed.sum(axis=0)
        result = (fitted, trace, converged, objective, breakdown)
        return self._store_fit(
            *result, K=K, n=n, shift=shift, unit=unit, counts=counts, reg=reg, X=X
        )

    def _store_fit(
        self, fitted, trace, converged, objective, breakdown, *, K, n, shift, unit, counts, reg, X
    ):
        """Store the fitted attributes, in the data's units, from the fit in
        standardised units (``fitted``: NumPy parameters, padding components
        included); ``counts`` (d,) are the observed entries of each feature, ``X``
        the data (None on the chunked route, which fits by EM only).  Returns self."""
        fitted = {  # the padding components cut off
            name: v if name == "scale" and self.covariance_type == "tied" else v[:K]
            for name, v in fitted.items()
        }
        # log p(x) = log p(z) - sum over observed entries of log unit_j
        log_jacobian = float(counts @ np.log(unit))
        if self.covariance_prior > 0 and self.method == "em":
            # the penalty in the data's units (D = diag(unit^2)): log |Sigma_k| gains
            # 2 sum_j log unit_j for each covariance
            n_covariances = 1 if self.covariance_type == "tied" else K
            log_jacobian += float(self.covariance_prior) * n_covariances * np.log(unit).sum()
            self.covariance_prior_variance_ = unit**2
        elif hasattr(self, "covariance_prior_variance_"):
            del self.covariance_prior_variance_
        objective = objective - log_jacobian
        # back to data units in float64: in float32 a mean of 1e8 has a spacing of 8;
        # float32 weights sum to 1 only to ~1e-7, which weights_ @ means_ would show
        params = {
            "weights": fitted["weights"] / fitted["weights"].sum(),
            "means": fitted["means"].astype(np.float64) * unit + shift,
            "scale": gmm.rescale(fitted["scale"].astype(np.float64), unit, self.covariance_type),
        }
        self._end_fit(
            params,
            to_numpy(trace) - log_jacobian,
            len(trace),
            converged,
            objective=objective,
            # EM keeps the last finite iterate, so only a start can get here
            advice="a start was not finite: check weights_init/means_init/precisions_init "
            "or increase reg_covar",
        )
        self.n_components_ = K
        # EM's objective is the log-likelihood; MAP's the log joint, SVI's the ELBO
        self.lower_bound_ = objective / n if self.method == "em" else self.score(X)
        self.lower_bounds_ = self.log_likelihoods_ / n  # scikit-learn's per-sample trace
        if self.method == "em":
            self._warn_on_degeneracy(fitted["scale"], np.asarray(reg, np.float64), unit, breakdown)
        # max_iter=0 asks for the start itself: no warning (as scikit-learn)
        if not self.converged_ and not breakdown and self.max_iter > 0:
            warn_not_converged(self)
        return self

    def _run_em_program(self, start_data, data, reg, n):
        """The compiled EM fit on ``data`` (a :class:`~latentlab.models.gmm.GMMData`) of
        ``n`` rows; returns (params, trace, converged, objective, breakdown)."""
        dtype = reg.dtype
        X, row_mask, resp, active, user, use_user = start_data
        result = fit_em(
            gmm.em_model(self.covariance_type),
            (X, row_mask, resp, user, use_user),
            data,
            gmm.Hyper(reg, active, self._prior_rows(dtype)),
            np.asarray(n, dtype),
            np.asarray(self.tol, dtype),
            max_iter=int(self.max_iter),
            accelerate=bool(self.accelerate),
            verbose=int(self.verbose),
        )
        trace = np.asarray(result.trace)[: int(result.n_iter)]
        objective = float(result.objective)
        return result.params, trace, bool(result.converged), objective, bool(result.breakdown)

    def _prior_rows(self, dtype):
        """The covariance penalty's tau for EM's Hyper, None for maximum likelihood."""
        tau = float(self.covariance_prior)
        return np.asarray(tau, dtype) if tau > 0 else None

    def fit_predict(self, X, y=None):
        """Fit, then return the most probable component of each row."""
        return self.fit(X).predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # -- fitted quantities --------------------------------------------------------------

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each row, shape (n_samples,); a Dask array gives a Dask array."""
        if is_dask(X):
            from latentlab.estimators._chunked import map_row_output

            return map_row_output(self, self.score_samples, X)
        return self._scores(X)[0]

    def predict_proba(self, X) -> np.ndarray:
        """Posterior probability of each component for each row, shape (n_samples, K).

        Rows with NaN condition on their observed entries only (an entirely missing
        row gets the mixing weights).  A Dask array gives a Dask array.
        """
        if is_dask(X):
            from latentlab.estimators._chunked import map_row_output

            check_is_fitted(self)
            return map_row_output(self, self.predict_proba, X, n_columns=self.n_components_)
        return np.exp(self._scores(X, allow_empty_rows=True)[1])

    def predict(self, X) -> np.ndarray:
        """Most probable component of each row, shape (n_samples,); a Dask array gives
        a Dask array."""
        if is_dask(X):
            from latentlab.estimators._chunked import map_row_output

            return map_row_output(self, self.predict, X, dtype=np.int64)
        return np.argmax(self._scores(X, allow_empty_rows=True)[1], axis=1)

    def _n_parameters(self) -> int:
        check_is_fitted(self)
        return gmm.n_parameters(self.n_features_in_, self.n_components_, self.covariance_type)

    @property
    def objective_name_(self) -> str:
        """What ``log_likelihoods_`` traces: "ELBO" (SVI), "log joint density" (MAP
        with the priors on), else "log-likelihood"."""
        check_is_fitted(self)
        if self.method == "svi":
            return "ELBO"
        if self.method == "em" and hasattr(self, "covariance_prior_variance_"):
            return "penalised log-likelihood"
        return "log joint density" if self.prior else "log-likelihood"

    @property
    def model_(self):
        """The NumPyro declaration with this fit's static settings bound."""
        check_is_fitted(self)
        prior = getattr(self, "covariance_prior_variance_", None)
        return partial(
            gmm.gmm_model,
            n_components=self.n_components_,
            covariance_type=self.covariance_type,
            covariance_prior=None if prior is None else (self.covariance_prior, prior),
        )

    @property
    def weights_(self):
        check_is_fitted(self)
        return self.params_["weights"].copy()

    @property
    def means_(self):
        check_is_fitted(self)
        return self.params_["means"].copy()

    @property
    def covariances_(self):
        check_is_fitted(self)
        return gmm.covariances(self.params_["scale"], self.covariance_type)

    @property
    def precisions_cholesky_(self):
        """Upper-triangular ``P`` with precision ``P P^T`` (full/tied); 1/std otherwise."""
        check_is_fitted(self)
        return gmm.precisions_cholesky(self.params_["scale"], self.covariance_type)

    @property
    def precisions_(self):
        check_is_fitted(self)
        return gmm.precisions(self.params_["scale"], self.covariance_type)

    def sample(self, n_samples: int = 1, random_state=None):
        """Draw ``(X, component labels)`` from the fitted mixture's generative story
        (:func:`latentlab.models.gmm.draw_samples`, in float64 on the host)."""
        check_is_fitted(self)
        n_samples = check_positive_int("n_samples", n_samples)
        p = self.params_
        return gmm.draw_samples(
            check_random_state(random_state),
            p["weights"],
            p["means"],
            p["scale"],
            self.covariance_type,
            n_samples,
        )
