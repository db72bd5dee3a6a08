"""``latentlab.GaussianMixture``: Gaussian mixtures fitted by jit-compiled EM.

One class, as scikit-learn's ``mixture/_gaussian_mixture.py``.  The class is the
surface: settings, validation, ``fit``/``partial_fit``, storing the fitted
attributes and the fitted quantities (scoring, imputation, sampling); the few
private methods it keeps need the estimator itself (validation against the fit, the
working precision, the settings a start or the EM program reads); ``fit`` on a
memmap or Dask array (``_fit_chunked``) reads the rows through the shared row-source
helpers of :mod:`latentlab.estimators._chunked`.  This module keeps only the
warnings that say when a fit is not a regular maximum of the likelihood
(:func:`warn_on_degeneracy`).  Everything else is a function of explicit arguments
beside the model:

- :mod:`latentlab.models.gmm`: the model's declaration and its algebra (with
  :func:`~latentlab.models.gmm.features_at_floor`, where a covariance reached its
  floor);
- :mod:`latentlab.models.gmm_programs`: the compiled programs and host-side passes
  that fit and query the mixture -- the EM program over row blocks, MAP/SVI through
  the shared multi-start driver, starts in the standardised units EM works in (the
  units, the covariance floor, starting responsibilities, the user's or a previous
  fit's parameters, the EM program's key), scoring a fitted mixture at fixed row
  counts, the conditional mixture of the missing entries given the observed ones
  (imputation), online EM's first start, moment mixing and M-step
  (:mod:`latentlab.inference.online` holds the step sizes and driver stepwise EM
  shares with PPCA/FA, :mod:`latentlab.estimators._online` the chunk check) and the
  host side of the E-step on a chunked source.

It is long because ~300 of its lines are docstrings (the class's documents 22
settings) and ``fit`` maps between the data's and EM's units.
"""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._chunk_tasks import mixture_rows
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
from latentlab._shapes import (
    GMM_CHUNK,
    GMM_MISSING_CHUNK,
    em_rows,
    mixture_components,
    pad_rows,
    padded_size,
)
from latentlab._validation import (
    check_data,
    check_level,
    check_n_components,
    check_no_empty_columns,
    check_no_empty_rows,
    check_positive_int,
)
from latentlab.estimators import _posterior_hooks, _standard_errors
from latentlab.estimators._chunked import (
    forget_feature_names,
    read_all,
    source_mesh,
    start_rows,
    summarise_gaussian,
)
from latentlab.estimators._online import check_chunk
from latentlab.estimators.base import (
    LATENTLAB_FILES,
    LatentEstimator,
    to_numpy,
    warn_not_converged,
)
from latentlab.inference.chunked import is_dask, register, row_source
from latentlab.inference.online import check_learning_decay, stepwise_update
from latentlab.inference.sharding import row_mesh
from latentlab.models import gmm
from latentlab.models.gmm_programs import (
    MixtureRowsPass,
    centred_moments,
    conditional_chunks,
    em_data,
    estep_work,
    fit_svi,
    given_start,
    make_starts,
    mix_moments,
    mixture_centre,
    mixture_moments,
    mixture_quantile,
    mixture_scores,
    online_m_step,
    online_start,
    program_key,
    run_em_program,
    scoring_params,
    standardising_units,
    start_responsibilities,
    user_init,
    variance_floor,
    warm_init,
)

__all__ = ["GaussianMixture"]

INIT_METHODS = ("kmeans", "k-means++", "random", "random_from_data")
METHODS = ("em", "map", "svi")
# covariance_prior="auto"'s pseudo-rows where full covariances meet missing entries
AUTO_PRIOR_ROWS = 1.0
# scikit-learn's ConvergenceWarning words, ahead of latentlab's
NOT_CONVERGED_LEAD = (
    "Best performing initialization did not converge. Try different init parameters, "
    "or increase max_iter, tol, or check for degenerate data"
)


# ---------------------------------------------------------------- degenerate fits


def warn_on_degeneracy(
    scale, floor, unit, breakdown, *, n_iter, reg_covar, covariance_type, feature_names
):
    """Say when the fit is not a regular maximum of the likelihood: EM broke down
    (after ``n_iter`` iterations), or a covariance reached its floor (``reg_covar``,
    or round-off).  ``scale`` and ``floor`` are in standardised units (see ``fit``),
    ``unit`` the features' units; ``feature_names`` (or None) name them.

    A covariance at the floor is one of two things, told apart by the floor's
    size against each feature's own variance: ``reg_covar`` is an absolute
    variance, and on data of small scale it dominates the features' variances
    (every component sits on it and the fit is not the data's: data * 1e-4 gave
    another clustering and -30 nats per row); or a component collapsed onto
    (near-)identical points, e.g. one value of a discrete column, where the
    likelihood is unbounded and the floor decides how much it inflates (diabetes'
    ``sex`` column: 5 nats per row)."""
    if breakdown:
        warnings.warn(
            f"GaussianMixture EM broke down numerically after {n_iter} iterations "
            "(the next iterate's log-likelihood was not finite); returning the last "
            "iterate with a finite one, converged_=False.  Increase reg_covar.",
            ConvergenceWarning,
            skip_file_prefixes=LATENTLAB_FILES,
        )
    at_floor = gmm.features_at_floor(scale, floor, covariance_type)  # (K, d) bool
    if not at_floor.any():
        return

    def named(columns):
        names = [str(feature_names[j]) if feature_names is not None else str(j) for j in columns]
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        return f"feature{'s' if len(names) > 1 else ''} {shown}"

    # the floor is reg_covar's (not round-off's) and at least 1% of the variance
    dominated = (floor * unit**2 <= reg_covar) & (floor >= 1e-2)
    if (at_floor & dominated).any():
        columns = np.flatnonzero((at_floor & dominated).any(axis=0))
        smallest = float(np.min(unit[columns] ** 2))
        warnings.warn(
            f"GaussianMixture: reg_covar={reg_covar} is a variance in the data's "
            f"units, and it is not small against the variance of {named(columns)} "
            f"(smallest {smallest:.3g}): covariances stopped at it, so the fit "
            "describes the floor, not the data.  Rescale the data (e.g. standardise "
            "it) or lower reg_covar.",
            UserWarning,
            skip_file_prefixes=LATENTLAB_FILES,
        )
    collapsed = at_floor & ~dominated
    if collapsed.any():
        components = np.flatnonzero(collapsed.any(axis=1))
        columns = np.flatnonzero(collapsed.any(axis=0))
        which = (
            "the pooled covariance"
            if covariance_type == "tied"
            else f"component{'s' if len(components) > 1 else ''} " + ", ".join(map(str, components))
        )
        warnings.warn(
            f"GaussianMixture: {which} collapsed onto a (near-)degenerate set of "
            f"points along {named(columns)} (e.g. one value of a discrete column, or "
            "columns that are an exact combination of others): there the likelihood "
            "is unbounded, the variance stopped at its floor "
            f"(reg_covar={reg_covar}, never below 10 eps times the feature's "
            "variance) and the floor sets how far the likelihood is inflated, so "
            "likelihood comparisons (BIC, compare) are not meaningful.  Increase "
            "reg_covar, drop or jitter such columns, or use fewer components.",
            UserWarning,
            skip_file_prefixes=LATENTLAB_FILES,
        )


# ----------------------------------------------------------------------------- the estimator


@fill_doc(rows_per_call="2048 complete rows")
class GaussianMixture(LatentEstimator):
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
    covariance_prior : float or "auto", default="auto"
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
        log-likelihood.  EM only.  "auto" (the default): maximum likelihood (tau = 0,
        scikit-learn's fit) unless full covariances meet missing entries, where
        there is no maximum to find: there tau = 1, one pseudo-row of the
        features' variances per component (measured with 30% MAR holes, 5-fold
        held-out rows, K = 2..5: EM converges in 5-30 cycles instead of running to
        ``max_iter``, and rows score -8 to -12 nats where maximum likelihood's
        scored -10,000 on wine; larger tau fitted wine better and diabetes and
        breast_cancer worse).  The value used is ``covariance_prior_``.
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
    covariance_prior_ : float
        The covariance penalty's tau the fit used (``covariance_prior`` resolved; 0:
        maximum likelihood, always for ``partial_fit``).
    covariance_prior_variance_ : ndarray (n_features,)
        The penalty's target variances D in the data's units, when tau > 0.
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
    _reported_estimates = _standard_errors.mixture_estimates  # for standard_errors

    _generative = True  # score, bic, aic, n_parameters_, sample_posterior
    _settings = {
        "n_components": Integer(),  # 1 <= K <= n_samples: checked with the data
        "covariance_type": Options(*gmm.COVARIANCE_TYPES),
        "tol": Real(0, None),
        "reg_covar": Real(0, None),
        "covariance_prior": Options("auto") | Real(0, None, finite=True),
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
        covariance_prior="auto",
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
        if self._given_prior_rows() > 0 and self.method != "em":
            raise ValueError(
                f"covariance_prior={self.covariance_prior!r} penalises EM's objective; "
                f"method={self.method!r} takes priors through prior=True instead"
            )
        # read before check_data resets n_features_in_
        previous = self._previous_fit()
        source = row_source(X, chunk_size=self.chunk_size)
        if source is not None:  # out of core or Dask: exact EM over row chunks
            return self._fit_chunked(source, previous)
        X = check_data(self, X, reset=True, allow_nan=True, min_samples=1)
        observed = ~np.isnan(X)
        check_no_empty_rows(observed)
        check_no_empty_columns(observed)
        n, d = X.shape
        K = self._check_settings(n, d)
        tau = self._prior_rows(has_missing=not observed.all())
        shift = np.nanmean(X, axis=0)
        # EM runs in standardised units, z = (x - shift) / unit feature by feature, in
        # float64 on the host: about the column means nothing cancels, and with every
        # feature at unit variance the starts (k-means), SQUAREM's step length and the
        # covariance floor do not depend on the data's units, so neither does the fit.
        # Starts are made from data with missing entries at their column means.
        unit = standardising_units(
            np.where(observed, X - shift, 0.0), observed, self.covariance_type
        )
        Z = np.where(observed, (X - shift) / unit, 0.0)
        if previous is None:
            weights, means, scale = self._user_init(K, d, shift, unit)
        else:
            weights, means, scale = warm_init(previous, K, d, shift, unit, self.covariance_type)
        rng = check_random_state(self.random_state)
        need_resp = weights is None or means is None or scale is None
        n_starts = self.n_init if previous is None else 1
        rows = int(np.prod(padded_size(n, GMM_CHUNK, em_rows)))
        # EM runs with padding components up to the bucket (at weight 0, they change
        # nothing): one compiled program serves every n_components in it
        padded = K
        if self.method == "em":
            key = program_key(
                observed,
                n_starts,
                covariance_type=self.covariance_type,
                max_iter=self.max_iter,
                accelerate=self.accelerate,
                verbose=self.verbose,
                dtype=self.dtype,
                devices=self.devices,
            )
            padded = mixture_components(K, estep_work(observed, self.covariance_type), key=key)
        with self._precision():
            # host arrays already in the working dtype: no eager JAX conversions (each
            # would be a compiled program of its own on a cold start)
            dtype = np.dtype(self.dtype)
            reg = variance_floor(unit, dtype, self.reg_covar).astype(dtype)
            start_data = self._start_data(
                Z, K, padded, rows, need_resp, n_starts, rng, dtype, (weights, means, scale)
            )
            if self.method == "em":
                params, trace, converged, objective, breakdown = self._fit_em(
                    start_data, Z, observed, reg, tau
                )
            else:
                starts = make_starts(*start_data[:3], reg, *start_data[3:], self.covariance_type)
                params, trace, converged = fit_svi(
                    starts,
                    Z,
                    observed,
                    rng,
                    covariance_type=self.covariance_type,
                    method=self.method,
                    prior=self.prior,
                    svi_steps=self.svi_steps,
                    learning_rate=self.learning_rate,
                )
                objective, breakdown = float(trace[-1]), False
            fitted = {name: to_numpy(v) for name, v in params._asdict().items()}
        counts = observed.sum(axis=0)
        result = (fitted, trace, converged, objective, breakdown)
        return self._store_fit(
            *result, K=K, n=n, shift=shift, unit=unit, counts=counts, reg=reg, X=X, tau=tau
        )

    @fill_doc
    def partial_fit(self, X, y=None):
        """Update the mixture with one chunk of rows by stepwise (online) EM.

        The first call initialises from its chunk -- the start ``fit`` makes
        (``init_params``: k-means by default, or ``weights_init``/``means_init``/
        ``precisions_init``) in the chunk's standardised units -- and takes one EM step
        on it; every call then forms the chunk's average responsibilities and
        component moments under the current parameters, mixes them into the running
        average with weight ``(t + 2) ** -learning_decay`` and takes the M-step from
        the average (Cappe & Moulines 2009).  NaN entries are missing values.
        ``n_init`` and ``warm_start`` do not apply; ``fit`` ends a stream, and a later
        ``partial_fit`` starts a new one from its chunk.

        {partial_fit_chunks}
        """
        decay = check_learning_decay(self.learning_decay)
        first = not hasattr(self, "online_state_")
        if self.method != "em":
            raise ValueError(
                f"GaussianMixture.partial_fit is online EM; got method={self.method!r}"
            )
        if self._given_prior_rows() > 0:
            raise ValueError(
                "GaussianMixture.partial_fit fits by maximum likelihood; covariance_prior "
                f"must be 0 there (got {self.covariance_prior!r}); use fit"
            )
        X, observed = check_chunk(self, X, first=first, min_samples=1)
        ctype = self.covariance_type
        with self._precision():
            dtype = np.dtype(self.dtype)
            if first:
                K = self._check_settings(*X.shape)
                state, params = online_start(
                    X,
                    observed,
                    K,
                    dtype,
                    check_random_state(self.random_state),
                    covariance_type=ctype,
                    reg_covar=self.reg_covar,
                    init_params=self.init_params,
                    weights_init=self.weights_init,
                    means_init=self.means_init,
                    precisions_init=self.precisions_init,
                )
                step = 0
            else:
                state, K = self.online_state_, self.n_components_
                params = gmm.Params(
                    *(np.asarray(state[f"param_{f}"], dtype) for f in gmm.Params._fields)
                )
                step = int(self.n_iter_)
            # rows per compiled call: the first chunk's bucket, so equal chunks share one
            bucket_rows = int(state["rows_per_call"])
            rows = (min(bucket_rows, GMM_CHUNK), min(bucket_rows, GMM_MISSING_CHUNK[ctype]))

            def chunk_statistics(params):
                count, sum_dx, sum_dxx, loglik = mixture_rows(
                    X,
                    params=params,
                    shift=state["shift"],
                    unit=state["unit"],
                    covariance_type=ctype,
                    dtype=dtype,
                    rows_per_call=rows,
                    mesh=row_mesh(self.devices),
                )
                means = np.asarray(params.means, np.float64)
                moments = centred_moments(count, sum_dx, sum_dxx, means, X.shape[0], ctype)
                return moments, loglik

            def m_step(moments, params):
                return online_m_step(moments, params, state["reg_covar"], ctype, dtype)

            running = None if first else tuple(state[k] for k in ("mass", "mean", "scatter"))
            moments, params, loglik = stepwise_update(
                chunk_statistics, m_step, running, params, step, decay, mix=mix_moments
            )
        # log p(x) = log p(z) - sum over observed entries of log unit_j
        loglik = float(loglik) - float(observed.sum(axis=0) @ np.log(state["unit"]))
        mass, mean, scatter = moments
        state = {
            **{k: state[k] for k in ("shift", "unit", "reg_covar", "rows_per_call")},
            "mass": mass,
            "mean": mean,
            "scatter": scatter,
            **{f"param_{f}": getattr(params, f) for f in gmm.Params._fields},
        }
        self.online_state_ = state
        unit, shift = state["unit"], state["shift"]
        self.params_ = {
            "weights": params.weights / params.weights.sum(),
            "means": params.means * unit + shift,
            "scale": gmm.rescale(params.scale, unit, ctype),
        }
        self.n_components_ = K
        self.covariance_prior_ = 0.0  # a stream is fitted by maximum likelihood
        if hasattr(self, "covariance_prior_variance_"):  # left by an earlier fit
            del self.covariance_prior_variance_
        self._end_chunk(first, X.shape[0], loglik / X.shape[0])
        self.lower_bounds_ = self.log_likelihoods_
        self.lower_bound_ = float(self.log_likelihoods_[-1])
        return self

    def _given_prior_rows(self) -> float:
        """The covariance penalty's tau as given (0 for "auto": resolved per fit)."""
        return 0.0 if self.covariance_prior == "auto" else float(self.covariance_prior)

    def _prior_rows(self, *, has_missing: bool) -> float:
        """The tau a fit uses: the number given, or for "auto"
        :data:`AUTO_PRIOR_ROWS` where an EM fit of full covariances meets missing
        entries (the likelihood has no maximum there: see ``covariance_prior``),
        else 0 (maximum likelihood)."""
        if self.covariance_prior != "auto":
            return float(self.covariance_prior)
        unbounded = has_missing and self.covariance_type == "full" and self.method == "em"
        return AUTO_PRIOR_ROWS if unbounded else 0.0

    def fit_predict(self, X, y=None):
        """Fit, then return the most probable component of each row."""
        return self.fit(X).predict(X)

    def _store_fit(
        self,
        fitted,
        trace,
        converged,
        objective,
        breakdown,
        *,
        K,
        n,
        shift,
        unit,
        counts,
        reg,
        X,
        tau,
    ):
        """Store the fitted attributes, in the data's units, from the fit in
        standardised units (``fitted``: NumPy parameters, padding components
        included); ``counts`` (d,) are the observed entries of each feature, ``X``
        the data (None on the chunked route, which fits by EM only), ``tau`` the
        covariance penalty's pseudo-rows the fit used.  Returns self."""
        fitted = {  # the padding components cut off
            name: v if name == "scale" and self.covariance_type == "tied" else v[:K]
            for name, v in fitted.items()
        }
        # log p(x) = log p(z) - sum over observed entries of log unit_j
        log_jacobian = float(counts @ np.log(unit))
        self.covariance_prior_ = tau
        if tau > 0:
            # the penalty in the data's units (D = diag(unit^2)): log |Sigma_k| gains
            # 2 sum_j log unit_j for each covariance
            n_covariances = 1 if self.covariance_type == "tied" else K
            log_jacobian += tau * n_covariances * np.log(unit).sum()
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
            warn_on_degeneracy(
                fitted["scale"],
                np.asarray(reg, np.float64),
                unit,
                breakdown,
                n_iter=self.n_iter_,
                reg_covar=self.reg_covar,
                covariance_type=self.covariance_type,
                feature_names=getattr(self, "feature_names_in_", None),
            )
        # max_iter=0 asks for the start itself: no warning (as scikit-learn)
        if not self.converged_ and not breakdown and self.max_iter > 0:
            warn_not_converged(self, lead=NOT_CONVERGED_LEAD)
        return self

    def _fit_chunked(self, source, previous):
        """``GaussianMixture.fit`` on a chunked source: EM over every row each iteration
        (responsibilities) from the in-memory fit's start -- made from every row, up to
        :data:`~latentlab._shapes.START_BYTES` of them (beyond: from that
        many evenly spaced rows) -- unless ``weights_init``, ``means_init`` and
        ``precisions_init`` are all given (or ``warm_start``).  Up to that size the EM
        iterates are the in-memory fit's to round-off."""
        n, d = source.shape
        if self.method != "em":
            raise ValueError(
                f"GaussianMixture(method={self.method!r}) needs X in memory; out-of-core and "
                "Dask inputs are fitted by method='em'"
            )
        forget_feature_names(self, d)
        K = self._check_settings(n, d)
        mesh = source_mesh(self, source)
        summary = summarise_gaussian(source)
        columns = summary.columns
        tau = self._prior_rows(has_missing=bool((columns.count < n).any()))
        shift = summary.about_mean()[0]
        # the feature scale from the observed centred sums of squares (as in memory)
        unit = standardising_units(
            np.sqrt(columns.second)[None, :], columns.count[None, :], self.covariance_type
        )
        if previous is None:
            weights, means, scale = self._user_init(K, d, shift, unit)
        else:
            weights, means, scale = warm_init(previous, K, d, shift, unit, self.covariance_type)
        rng = check_random_state(self.random_state)
        need_resp = weights is None or means is None or scale is None
        resident = n <= source.resident_rows
        # the start's rows: every row (the in-memory start: k-means, or the random draws,
        # on all of them) when they take at most START_BYTES; a start from the given
        # parameters alone needs one chunk (its rows only shape the program)
        sample = start_rows(source, every_row=need_resp or resident)
        observed = ~np.isnan(sample)
        Z = np.where(observed, (sample - shift) / unit, 0.0)
        m = Z.shape[0]
        padded = K
        if resident:
            # few enough to hold: every row in the program, which is then the in-memory
            # one (components padded alike), one call per fit and no host round trips
            X = sample if m == n else read_all(source)
            held = ~np.isnan(X)
            padded = mixture_components(K, estep_work(held, self.covariance_type))
        n_starts = self.n_init if previous is None else 1
        rows = int(np.prod(padded_size(m, GMM_CHUNK, em_rows)))
        with self._precision():
            dtype = np.dtype(self.dtype)
            reg = variance_floor(unit, dtype, self.reg_covar).astype(dtype)
            start_data = self._start_data(
                Z, K, padded, rows, need_resp, n_starts, rng, dtype, (weights, means, scale)
            )
            if n <= source.resident_rows:
                result = self._fit_em(
                    start_data, np.where(held, (X - shift) / unit, 0.0), held, reg, tau
                )
            else:
                rows_pass = MixtureRowsPass(source, shift, unit, self.covariance_type, dtype, mesh)
                with register(rows_pass) as token:
                    # one all-padding chunk in the program; every row comes from the host
                    data = gmm.GMMData(
                        np.zeros((1, 8, d), dtype),
                        np.zeros((1, 8), dtype),
                        np.zeros((0, 1, d), dtype),
                        np.zeros((0, 1, d), dtype),
                        token,
                    )
                    result = self._run_em_program(start_data, data, reg, n, tau)
            params, trace, converged, objective, breakdown = result
            fitted = {name: np.asarray(v) for name, v in params._asdict().items()}
        result = (fitted, trace, converged, objective, breakdown)
        counts = columns.count
        return self._store_fit(
            *result, K=K, n=n, shift=shift, unit=unit, counts=counts, reg=reg, X=None, tau=tau
        )

    # -- the steps of fit that the chunked route runs too --------------------------------

    def _previous_fit(self):
        """This estimator's fitted parameters (data units) when ``warm_start`` asks to
        start from them, else None."""
        if not self.warm_start or not hasattr(self, "params_"):
            return None
        return {k: np.asarray(v, np.float64) for k, v in self.params_.items()}

    def _user_init(self, K, d, shift, unit):
        """The ``*_init`` settings in standardised units
        (:func:`~latentlab.models.gmm_programs.user_init`)."""
        return user_init(
            self.weights_init,
            self.means_init,
            self.precisions_init,
            K,
            d,
            shift,
            unit,
            self.covariance_type,
        )

    def _start_data(self, Z, K, padded, rows, need_resp, n_starts, rng, dtype, given):
        """The EM program's start inputs from the standardised rows ``Z`` (missing
        entries 0): rows padded to ``rows``, their mask, starting responsibilities by
        ``init_params`` (:func:`~latentlab.models.gmm_programs.start_responsibilities`),
        which of the ``padded`` components are real, and the given starting values
        (weights, means, scale; any None) padded, with which were given
        (:func:`~latentlab.models.gmm_programs.given_start`)."""
        resp = start_responsibilities(
            Z,
            K,
            need_resp,
            n_starts,
            (rows, padded),
            rng,
            dtype,
            init_params=self.init_params,
            covariance_type=self.covariance_type,
        )
        weights, means, scale = given
        user = given_start(
            weights, means, scale, K, padded, self.n_features_in_, dtype, self.covariance_type
        )
        return (
            pad_rows(Z, rows).astype(dtype),
            pad_rows(np.ones(len(Z)), rows).astype(dtype),
            resp,
            np.arange(padded) < K,
            *user,
        )

    def _fit_em(self, start_data, Xc, observed, reg, tau):
        """Jit-compiled EM from every start on the standardised data ``Xc`` (missing
        entries 0), penalised by ``tau`` pseudo-rows; returns (params, trace,
        converged, objective, breakdown)."""
        data = em_data(Xc, observed, reg.dtype, self.covariance_type, self.devices)
        return self._run_em_program(start_data, data, reg, Xc.shape[0], tau)

    def _run_em_program(self, start_data, data, reg, n, tau):
        """The compiled EM fit on ``data`` (a :class:`~latentlab.models.gmm.GMMData`) of
        ``n`` rows (:func:`~latentlab.models.gmm_programs.run_em_program` with this
        estimator's settings and the covariance penalty's ``tau``)."""
        return run_em_program(
            start_data,
            data,
            reg,
            n,
            covariance_type=self.covariance_type,
            covariance_prior=tau,
            tol=self.tol,
            max_iter=self.max_iter,
            accelerate=self.accelerate,
            verbose=self.verbose,
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "density_estimator"  # scikit-learn's DensityMixin's tag
        tags.input_tags.allow_nan = True
        return tags

    # -- fitted quantities --------------------------------------------------------------

    def _observed(self, X, *, allow_empty_rows: bool):
        """Validated X with NaN replaced by 0, and the observed mask (float)."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=True)
        observed = ~np.isnan(X)
        if not allow_empty_rows:
            check_no_empty_rows(observed)
        return np.where(observed, X, 0.0), observed.astype(np.float64)

    def _scoring_params(self):
        """The fitted parameters as the scoring programs take them, and the centre
        (:func:`~latentlab.models.gmm_programs.scoring_params`); call inside
        ``self._precision()``."""
        return scoring_params(self.params_, self.n_components_, self.covariance_type, self.dtype)

    def _scores(self, X, *, allow_empty_rows=False):
        """(log p(x_i) (n,), log responsibilities (n, K)) as float64 NumPy arrays.

        Rows with NaN are scored by their marginal over the observed coordinates.
        """
        X, observed = self._observed(X, allow_empty_rows=allow_empty_rows)
        with self._precision():
            params, centre = self._scoring_params()
            return mixture_scores(
                X, observed, params, centre, self.n_components_, self.covariance_type
            )

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

    # -- conditionals: p(x_miss | x_obs) = sum_k p(k | x_obs) N(x_miss | x_obs, k) -------

    def _conditional_chunks(self, X, observed):
        """:func:`~latentlab.models.gmm_programs.conditional_chunks` for the
        validated ``X`` and its ``observed`` mask; iterate inside
        ``self._precision()``."""
        params, centre = self._scoring_params()
        return conditional_chunks(
            X, observed, params, centre, self.n_components_, self.covariance_type
        )

    def impute(self, X, *, return_std: bool = False):
        """Fill NaN entries with E[x_miss | x_obs] = sum_k p(k | x_obs) E[x_miss | x_obs, k].

        Observed entries are returned unchanged.  With ``return_std=True`` also returns
        the standard deviation of the conditional mixture (0 where observed); it
        includes the spread between components, so it can be large for a row whose
        component is uncertain.  Intervals: use :meth:`impute_interval` (the mixture
        is not Gaussian, so mean -/+ z sd is not a calibrated interval).
        """
        X, observed = self._observed(X, allow_empty_rows=True)
        centre = mixture_centre(self.params_)
        filled, std = X.copy(), np.zeros_like(X)
        with self._precision():
            for rows, resp, means, cov in self._conditional_chunks(X, observed):
                variances = gmm.marginal_variances(cov, self.covariance_type)
                mean, sd = mixture_moments(resp, means, variances)
                missing = observed[rows] == 0
                filled[rows] = np.where(missing, mean + centre, X[rows])
                std[rows] = np.where(missing, sd, 0.0)
        return (filled, std) if return_std else filled

    def conditional_mixture(self, X):
        """Each entry's distribution given its row's observed entries, as the mixture
        ``sum_k weights[n, k] N(means[n, k, j], sds[n, k, j]^2)``: ``weights`` (n, K) is
        p(k | x_obs), ``means`` and ``sds`` (n, K, d) each component's conditional mean
        and sd (x and 0 where observed)."""
        X, observed = self._observed(X, allow_empty_rows=True)
        centre = mixture_centre(self.params_)
        K = self.n_components
        weights = np.full((X.shape[0], K), 1.0 / K)
        means = np.broadcast_to(X[:, None, :], (X.shape[0], K, X.shape[1])).copy()
        sds = np.zeros_like(means)
        with self._precision():
            for rows, resp, component_means, cov in self._conditional_chunks(X, observed):
                missing = (observed[rows] == 0)[:, None, :]
                weights[rows] = resp
                means[rows] = np.where(missing, component_means + centre, means[rows])
                variances = gmm.marginal_variances(cov, self.covariance_type)
                sds[rows] = np.where(missing, np.sqrt(variances), 0.0)
        return weights, means, sds

    def impute_interval(self, X, level: float = 0.9):
        """Central ``level`` interval of each missing entry: the quantiles
        (1 -/+ level)/2 of its conditional mixture sum_k p(k | x_obs) N(m_k, s_k^2).

        Plug-in (parameter uncertainty not included).  Returns ``(lower, upper)``,
        each (n_samples, n_features), equal to X where observed.
        """
        tail = 0.5 * (1.0 - check_level(level))
        X, observed = self._observed(X, allow_empty_rows=True)
        centre = mixture_centre(self.params_)
        lower, upper = X.copy(), X.copy()
        with self._precision():
            for rows, resp, means, cov in self._conditional_chunks(X, observed):
                variances = gmm.marginal_variances(cov, self.covariance_type)
                sd = np.sqrt(np.maximum(variances, 1e-300))
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
        X, observed = self._observed(X, allow_empty_rows=True)
        centre = mixture_centre(self.params_)
        draws = np.broadcast_to(X, (n_imputations, *X.shape)).copy()
        with self._precision():
            for rows, resp, means, cov in self._conditional_chunks(X, observed):
                missing = observed[rows] == 0
                x = gmm.draw_conditional(
                    rng, resp, means, cov, missing, self.covariance_type, n_imputations
                )
                draws[:, rows] = np.where(missing, x + centre, X[rows])
        return draws

    # -- fitted attributes --------------------------------------------------------------

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
        # files saved before covariance_prior_ existed hold a numeric covariance_prior
        tau = getattr(self, "covariance_prior_", self.covariance_prior)
        return partial(
            gmm.gmm_model,
            n_components=self.n_components_,
            covariance_type=self.covariance_type,
            covariance_prior=None if prior is None else (tau, prior),
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
        try:
            n_samples = check_positive_int("n_samples", n_samples)
        except ValueError as error:  # scikit-learn's words first
            raise ValueError(f"Invalid value for 'n_samples': {error}") from None
        p = self.params_
        return gmm.draw_samples(
            check_random_state(random_state),
            p["weights"],
            p["means"],
            p["scale"],
            self.covariance_type,
            n_samples,
        )
