"""``latentlab.GaussianMixture``: Gaussian mixtures fitted by jit-compiled EM."""

from __future__ import annotations

import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import DensityMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._validation import (
    check_data,
    check_level,
    check_n_components,
    check_no_empty_columns,
    check_no_empty_rows,
    check_option,
)
from latentlab.estimators import _posterior_hooks
from latentlab.estimators._rows import chunked, map_row_chunks, pad_rows, padded_size
from latentlab.estimators.base import GenerativeMixin, LatentEstimator, to_numpy
from latentlab.inference.em import run_em
from latentlab.models import gmm

__all__ = ["GaussianMixture"]

INIT_METHODS = ("kmeans", "k-means++", "random", "random_from_data")
METHODS = ("em", "map", "svi")


# Rows per chunk in the E-step: complete rows hold (K, chunk, d) residuals; rows with
# missing entries hold (chunk, K, d, d) conditional covariances for full/tied.
CHUNK = 2048
MISSING_CHUNK = {"full": 128, "tied": 128, "diag": 1024, "spherical": 1024}


@partial(jax.jit, static_argnames="covariance_type")
def _starts(X, row_mask, resp, reg_covar, covariance_type):
    """One start per stack of responsibilities (n_init, n, K)."""
    make = partial(gmm.params_from_responsibilities, covariance_type=covariance_type)
    return jax.vmap(lambda r: make(X, row_mask, r, reg_covar))(resp)


@partial(jax.jit, static_argnames="covariance_type")
def _row_scores(params, X, observed, covariance_type):
    """log p(x_i) (n,) and log responsibilities (n, K); rows with NaN (``observed`` 0
    there) by their marginal over the observed coordinates."""
    if observed is None:
        log_density, _ = gmm.component_log_density(params, X, covariance_type)
    else:
        log_density, _, _ = gmm.conditional_components(params, X, observed, covariance_type)
    weighted = log_density + jnp.log(params.weights)
    row = jax.scipy.special.logsumexp(weighted, axis=1)
    return row, weighted - row[:, None]


@partial(jax.jit, static_argnames="covariance_type")
def _conditionals(params, X, observed, covariance_type):
    """Log responsibilities given the observed entries, and each component's
    conditional mean (n, K, d) and covariance of the row."""
    log_density, dx, cond_cov = gmm.conditional_components(params, X, observed, covariance_type)
    weighted = log_density + jnp.log(params.weights)
    log_resp = weighted - jax.scipy.special.logsumexp(weighted, axis=1, keepdims=True)
    return log_resp, dx + params.means[None], cond_cov


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


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


class GaussianMixture(GenerativeMixin, DensityMixin, LatentEstimator):
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
        EM stops when the mean per-sample log-likelihood changes by less than this.
    reg_covar : float, default=1e-6
        Added to the diagonal of every covariance: keeps them positive definite.
    max_iter : int, default=500
        Maximum number of EM iterations (SQUAREM cycles when ``accelerate``).
    n_init : int, default=1
        Number of starts; the best log-likelihood is kept.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        How starting responsibilities are made, as in scikit-learn ("kmeans": Lloyd
        iterations from k-means++ seeds).
    weights_init : array (n_components,), optional
    means_init : array (n_components, n_features), optional
    precisions_init : array, optional
        Shape (K, d, d) full, (d, d) tied, (K, d) diag, (K,) spherical.
    accelerate : bool, default=True
        SQUAREM extrapolation, kept monotone by falling back to the plain EM step.
    random_state : int, RandomState or None, default=None
    method : {"em", "map", "svi"}, default="em"
        ``"em"``: jit-compiled EM.  ``"map"``: a point estimate by Adam (AutoDelta)
        on the same NumPyro declaration -- maximum likelihood with ``prior=False``,
        MAP with the declaration's priors with ``prior=True``.  ``"svi"``: a
        mean-field Gaussian posterior (AutoNormal) with the priors on; ``params_``
        holds posterior medians and ``log_likelihoods_`` the ELBO trace.  Both start
        from the same starting points as EM and optimise at unit mean variance.
    prior : bool, default=False
        For ``method="map"``: include the declaration's priors (they act on data
        rescaled to unit mean variance).
    svi_steps : int, default=3000
        Adam steps for ``method="map"``/``"svi"``.
    learning_rate : float, default=0.05
        Initial Adam step size (decays to 1e-3 over ``svi_steps``).
    dtype : {"float64", "float32"}, default="float64"
    verbose : int, default=0
        If > 0, print the EM objective every ``verbose`` iterations.

    Attributes
    ----------
    weights_ : (n_components,)
    means_ : (n_components, n_features)
    covariances_, precisions_, precisions_cholesky_ : arrays shaped by ``covariance_type``
        as in scikit-learn (``precisions_cholesky_`` is upper triangular for full/tied).
    lower_bound_ : float
        Mean per-sample log-likelihood at the fitted parameters.
    log_likelihoods_ : ndarray (n_iter_,)
        Total log-likelihood after each iteration; the last equals ``n * score(X)``.
    n_iter_, converged_ : int, bool
    params_ : dict
        Fitted values by NumPyro site name: ``weights``, ``means``, ``scale`` (Cholesky
        factors or standard deviations, see :mod:`latentlab.models.gmm`).
    model_ : callable
        The NumPyro model with its static settings bound; ``model_(X)``.

    Notes
    -----
    Missing values (NaN) are handled exactly (for data missing at random): each
    component contributes its marginal over a row's observed coordinates to the
    likelihood, and EM uses the missing coordinates' conditional moments.  ``impute``
    fills them with the posterior-weighted conditional means; ``impute_interval``
    gives the conditional mixture's quantiles; ``sample_imputations`` draws them.

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

    def __init__(
        self,
        n_components=1,
        *,
        covariance_type="full",
        tol=1e-6,
        reg_covar=1e-6,
        max_iter=500,
        n_init=1,
        init_params="kmeans",
        weights_init=None,
        means_init=None,
        precisions_init=None,
        accelerate=True,
        random_state=None,
        method="em",
        prior=False,
        svi_steps=3000,
        learning_rate=0.05,
        dtype="float64",
        verbose=0,
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.accelerate = accelerate
        self.random_state = random_state
        self.method = method
        self.prior = prior
        self.svi_steps = svi_steps
        self.learning_rate = learning_rate
        self.dtype = dtype
        self.verbose = verbose

    # -- validation ---------------------------------------------------------------------

    def _check_settings(self, n, d):
        check_option("covariance_type", self.covariance_type, gmm.COVARIANCE_TYPES)
        check_option("init_params", self.init_params, INIT_METHODS)
        check_option("method", self.method, METHODS)
        K = check_n_components(self.n_components, 1, n, "at most n_samples")
        for name in ("max_iter", "n_init", "svi_steps"):
            _check_positive_int(name, getattr(self, name))
        if not self.tol >= 0:
            raise ValueError(f"tol must be >= 0, got {self.tol!r}")
        if not (self.learning_rate > 0 and np.isfinite(self.learning_rate)):
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate!r}")
        if not self.reg_covar >= 0:
            raise ValueError(f"reg_covar must be >= 0, got {self.reg_covar!r}")
        return K

    def _user_init(self, K, d, shift):
        """User-given starting values as (weights, means, scale) or None each."""
        weights = means = scale = None
        if self.weights_init is not None:
            weights = np.asarray(self.weights_init, dtype=np.float64)
            if weights.shape != (K,):
                raise ValueError(f"weights_init must have shape ({K},), got {weights.shape}")
            if np.any(weights < 0) or not np.isclose(weights.sum(), 1.0, atol=1e-6):
                raise ValueError("weights_init must be non-negative and sum to 1")
        if self.means_init is not None:
            means = np.asarray(self.means_init, dtype=np.float64)
            if means.shape != (K, d):
                raise ValueError(f"means_init must have shape ({K}, {d}), got {means.shape}")
            if not np.all(np.isfinite(means)):
                raise ValueError("means_init must be finite")
            means = means - shift
        if self.precisions_init is not None:
            scale = self._scale_from_precisions(np.asarray(self.precisions_init, float), K, d)
        return weights, means, scale

    def _scale_from_precisions(self, prec, K, d):
        shape = {"full": (K, d, d), "tied": (d, d), "diag": (K, d), "spherical": (K,)}
        expected = shape[self.covariance_type]
        if prec.shape != expected:
            raise ValueError(
                f"precisions_init must have shape {expected} for "
                f"covariance_type={self.covariance_type!r}, got {prec.shape}"
            )
        if self.covariance_type in ("diag", "spherical"):
            if not np.all(prec > 0) or not np.all(np.isfinite(prec)):
                raise ValueError("precisions_init must be positive")
            return 1.0 / np.sqrt(prec)
        try:
            cov = np.linalg.inv(prec)
            return np.linalg.cholesky(0.5 * (cov + np.swapaxes(cov, -1, -2)))
        except np.linalg.LinAlgError:
            raise ValueError("precisions_init must be symmetric positive definite") from None

    def _responsibilities(self, X, K, rng):
        """Starting responsibilities (n, K) for one start, as scikit-learn makes them."""
        n = X.shape[0]
        resp = np.zeros((n, K))
        if self.init_params == "kmeans":
            from sklearn.cluster import KMeans

            labels = KMeans(K, n_init=1, random_state=rng).fit(X).labels_
            resp[np.arange(n), labels] = 1.0
        elif self.init_params == "k-means++":
            from sklearn.cluster import kmeans_plusplus

            _, indices = kmeans_plusplus(X, K, random_state=rng)
            resp[indices, np.arange(K)] = 1.0
        elif self.init_params == "random":
            resp = rng.uniform(size=(n, K))
            resp /= resp.sum(axis=1, keepdims=True)
        else:
            resp[rng.choice(n, size=K, replace=False), np.arange(K)] = 1.0
        return resp

    # -- fitting ------------------------------------------------------------------------

    def fit(self, X, y=None):
        """Fit the mixture to X (n_samples, n_features) by EM; returns self."""
        X = check_data(self, X, reset=True, allow_nan=True, min_samples=1)
        observed = ~np.isnan(X)
        check_no_empty_rows(observed)
        check_no_empty_columns(observed)
        n, d = X.shape
        K = self._check_settings(n, d)
        shift = np.nanmean(X, axis=0)
        # Statistics about the column means (no cancellation); starts are made from
        # data with missing entries at their column means.
        Xc = np.where(observed, X - shift, 0.0)
        weights, means, scale = self._user_init(K, d, shift)
        rng = check_random_state(self.random_state)
        need_resp = weights is None or means is None or scale is None
        resp = np.stack(
            [
                self._responsibilities(Xc, K, rng) if need_resp else np.full((n, K), 1.0 / K)
                for _ in range(self.n_init)
            ]
        )
        size, count = padded_size(n, CHUNK)
        with self._precision():
            dtype = jnp.asarray(1.0).dtype
            reg = jnp.asarray(self.reg_covar, dtype)
            starts = _starts(
                jnp.asarray(pad_rows(Xc, size * count), dtype),
                jnp.asarray(pad_rows(np.ones(n), size * count), dtype),
                jnp.asarray(np.stack([pad_rows(r, size * count) for r in resp]), dtype),
                reg,
                self.covariance_type,
            )
            for i, value in enumerate((weights, means, scale)):
                if value is not None:
                    starts = starts._replace(
                        **{
                            starts._fields[i]: jnp.broadcast_to(
                                jnp.asarray(value, dtype), starts[i].shape
                            )
                        }
                    )
            if self.method == "em":
                params, trace, converged = self._fit_em(starts, Xc, observed, reg)
            else:
                params, trace, converged = self._fit_svi(starts, Xc, observed)
            params = params._replace(means=params.means + jnp.asarray(shift, dtype))
            self.params_ = {name: to_numpy(v) for name, v in params._asdict().items()}
            self.log_likelihoods_ = to_numpy(trace)
            self.converged_ = converged
            n_iter = len(trace)
            objective = float(trace[-1])
        bad = [k for k, v in self.params_.items() if not np.all(np.isfinite(v))]
        if bad or not np.isfinite(objective):
            raise ValueError(
                f"GaussianMixture fit produced non-finite values for {bad or 'the likelihood'}; "
                "increase reg_covar or use fewer components"
            )
        self.n_components_ = K
        self.n_iter_ = n_iter
        # EM's objective is the log-likelihood; MAP's the log joint, SVI's the ELBO
        self.lower_bound_ = objective / n if self.method == "em" else self.score(X)
        if not self.converged_:
            warnings.warn(
                f"GaussianMixture EM did not converge within max_iter={self.max_iter} "
                f"iterations (tol={self.tol}); increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def _fit_em(self, starts, Xc, observed, reg):
        """Jit-compiled EM from every start; returns (params, trace, converged)."""
        dtype = starts.means.dtype
        d = Xc.shape[1]
        complete = observed.all(axis=1)
        missing_chunk = MISSING_CHUNK[self.covariance_type]
        no_rows = np.zeros((0, 1, d))
        data = gmm.GMMData(
            *(
                jnp.asarray(a, dtype)
                for a in (
                    chunked(Xc[complete], CHUNK),
                    chunked(np.ones(int(complete.sum())), CHUNK),
                    chunked(Xc[~complete], missing_chunk) if not complete.all() else no_rows,
                    chunked(observed[~complete].astype(float), missing_chunk)
                    if not complete.all()
                    else no_rows,
                )
            )
        )
        e_step, m_step = gmm.step_functions(self.covariance_type)
        result = run_em(
            e_step,
            m_step,
            starts,
            data,
            gmm.Hyper(reg),
            jnp.asarray(Xc.shape[0], dtype),
            jnp.asarray(self.tol, dtype),
            max_iter=int(self.max_iter),
            accelerate=bool(self.accelerate),
            verbose=int(self.verbose),
        )
        return result.params, result.trace[: int(result.n_iter)], bool(result.converged)

    def _fit_svi(self, starts, Xc, observed):
        """MAP (AutoDelta) or SVI (AutoNormal) on the declaration from every start.

        The mixture is equivariant under a global rescaling of the data: optimise at
        unit mean variance, where Adam's step size makes sense, and report the
        objective in the data's units (log-likelihood minus n_observed log s).
        """
        from numpyro.infer.util import log_density

        from latentlab.inference.svi import fit_svi

        missing = not observed.all()
        spread = float(np.sqrt(np.mean(np.sum(Xc**2, axis=0) / observed.sum(axis=0))))
        s = spread if spread > 0 else 1.0
        Xs = jnp.asarray(np.where(observed, Xc / s, np.nan))
        model = partial(
            gmm.gmm_model,
            n_components=int(starts.means.shape[1]),
            covariance_type=self.covariance_type,
            has_missing=missing,
            use_prior=self.method == "svi" or bool(self.prior),
        )
        log_jacobian = observed.sum() * np.log(s)
        best = None
        for i in range(starts.means.shape[0]):
            start = {k: np.asarray(v[i]) for k, v in starts._asdict().items()}
            start["means"] = start["means"] / s
            start["scale"] = start["scale"] / s
            fit = fit_svi(
                model,
                Xs,
                guide="delta" if self.method == "map" else "normal",
                num_steps=int(self.svi_steps),
                learning_rate=self.learning_rate,
                init_values=start,
                seed=i,
            )
            objective, _ = log_density(model, (Xs,), {}, fit.params)
            if best is None or objective > best[0]:
                best = (objective, fit)
        objective, fit = best
        trace = fit.objective_trace - log_jacobian
        if self.method == "map":  # the last entry exactly at the returned parameters
            trace = np.append(trace, float(objective) - log_jacobian)
        params = gmm.Params(
            weights=fit.params["weights"],
            means=fit.params["means"] * s,
            scale=fit.params["scale"] * s,
        )
        return params, jnp.asarray(trace), True

    def fit_predict(self, X, y=None):
        """Fit, then return the most probable component of each row."""
        return self.fit(X).predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # -- fitted quantities --------------------------------------------------------------

    def _params(self, dtype):
        return gmm.Params(*(jnp.asarray(self.params_[k], dtype) for k in gmm.Params._fields))

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
        with self._precision():
            params = self._params(jnp.asarray(1.0).dtype)
            kind = self.covariance_type
            if complete.any():
                row[complete], log_resp[complete] = map_row_chunks(
                    lambda x: _row_scores(params, x, None, kind), X[complete]
                )
            if not complete.all():
                row[~complete], log_resp[~complete] = map_row_chunks(
                    lambda x, o: _row_scores(params, x, o, kind),
                    X[~complete],
                    observed[~complete],
                    chunk=MISSING_CHUNK[kind],
                )
        return row, log_resp

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each row, shape (n_samples,)."""
        return self._scores(X)[0]

    def predict_proba(self, X) -> np.ndarray:
        """Posterior probability of each component for each row, shape (n_samples, K).

        Rows with NaN condition on their observed entries only (an entirely missing
        row gets the mixing weights).
        """
        return np.exp(self._scores(X, allow_empty_rows=True)[1])

    def predict(self, X) -> np.ndarray:
        """Most probable component of each row, shape (n_samples,)."""
        return np.argmax(self._scores(X, allow_empty_rows=True)[1], axis=1)

    def _n_parameters(self) -> int:
        check_is_fitted(self)
        return gmm.n_parameters(self.n_features_in_, self.n_components_, self.covariance_type)

    @property
    def model_(self):
        """The NumPyro declaration with this fit's static settings bound."""
        check_is_fitted(self)
        return partial(
            gmm.gmm_model, n_components=self.n_components_, covariance_type=self.covariance_type
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
        scale = self.params_["scale"]
        if self.covariance_type in ("full", "tied"):
            return scale @ np.swapaxes(scale, -1, -2)
        return scale**2

    @property
    def precisions_cholesky_(self):
        """Upper-triangular ``P`` with precision ``P P^T`` (full/tied); 1/std otherwise."""
        check_is_fitted(self)
        scale = self.params_["scale"]
        if self.covariance_type in ("full", "tied"):
            eye = np.broadcast_to(np.eye(scale.shape[-1]), scale.shape)
            return np.swapaxes(np.linalg.solve(scale, eye), -1, -2)
        return 1.0 / scale

    @property
    def precisions_(self):
        P = self.precisions_cholesky_
        if self.covariance_type in ("full", "tied"):
            return P @ np.swapaxes(P, -1, -2)
        return P**2

    # -- imputation ---------------------------------------------------------------------

    def _conditional_parts(self, X):
        """Validated X, its observed mask, and -- chunk by chunk over the rows with
        missing entries -- ``(rows, resp (m, K), means (m, K, d), cov)``: the
        conditional mixture p(x | x_obs) = sum_k resp_k N(means_k, cov_k)."""
        X, observed = self._observed(X, allow_empty_rows=True)
        incomplete = np.flatnonzero(~observed.all(axis=1))
        step = 8 * MISSING_CHUNK[self.covariance_type]

        def parts():
            with self._precision():
                params = self._params(jnp.asarray(1.0).dtype)
                for start in range(0, incomplete.size, step):
                    rows = incomplete[start : start + step]
                    log_resp, means, cov = map_row_chunks(
                        lambda x, o: _conditionals(params, x, o, self.covariance_type),
                        X[rows],
                        observed[rows],
                        chunk=MISSING_CHUNK[self.covariance_type],
                    )
                    yield rows, np.exp(log_resp), means, cov

        return X, observed, parts()

    def _marginal_variances(self, cov):
        """Per-coordinate conditional variances (m, K, d) from ``cov``."""
        if self.covariance_type in ("full", "tied"):
            return np.diagonal(cov, axis1=-2, axis2=-1)
        return cov

    def impute(self, X, *, return_std: bool = False):
        """Fill NaN entries with E[x_miss | x_obs] = sum_k p(k | x_obs) E[x_miss | x_obs, k].

        Observed entries are returned unchanged.  With ``return_std=True`` also returns
        the standard deviation of the conditional mixture (0 where observed); it
        includes the spread between components, so it can be large for a row whose
        component is uncertain.  Intervals: use :meth:`impute_interval` (the mixture
        is not Gaussian, so mean -/+ z sd is not a calibrated interval).
        """
        X, observed, parts = self._conditional_parts(X)
        filled, std = X.copy(), np.zeros_like(X)
        for rows, resp, means, cov in parts:
            mean = np.einsum("mk,mkd->md", resp, means)
            second = np.einsum("mk,mkd->md", resp, self._marginal_variances(cov) + means**2)
            missing = observed[rows] == 0
            filled[rows] = np.where(missing, mean, X[rows])
            std[rows] = np.where(missing, np.sqrt(np.maximum(second - mean**2, 0.0)), 0.0)
        return (filled, std) if return_std else filled

    def conditional_mixture(self, X):
        """Each entry's distribution given its row's observed entries, as the mixture
        ``sum_k weights[n, k] N(means[n, k, j], sds[n, k, j]^2)``: ``weights`` (n, K) is
        p(k | x_obs), ``means`` and ``sds`` (n, K, d) each component's conditional mean
        and sd (x and 0 where observed)."""
        X, observed, parts = self._conditional_parts(X)
        K = self.n_components
        weights = np.full((X.shape[0], K), 1.0 / K)
        means = np.broadcast_to(X[:, None, :], (X.shape[0], K, X.shape[1])).copy()
        sds = np.zeros_like(means)
        for rows, resp, component_means, cov in parts:
            missing = (observed[rows] == 0)[:, None, :]
            weights[rows] = resp
            means[rows] = np.where(missing, component_means, means[rows])
            sds[rows] = np.where(missing, np.sqrt(self._marginal_variances(cov)), 0.0)
        return weights, means, sds

    def impute_interval(self, X, level: float = 0.9):
        """Central ``level`` interval of each missing entry: the quantiles
        (1 -/+ level)/2 of its conditional mixture sum_k p(k | x_obs) N(m_k, s_k^2).

        Plug-in (parameter uncertainty not included).  Returns ``(lower, upper)``,
        each (n_samples, n_features), equal to X where observed.
        """
        tail = 0.5 * (1.0 - check_level(level))
        X, observed, parts = self._conditional_parts(X)
        lower, upper = X.copy(), X.copy()
        for rows, resp, means, cov in parts:
            sd = np.sqrt(np.maximum(self._marginal_variances(cov), 1e-300))
            missing = observed[rows] == 0
            for target, out in ((tail, lower), (1.0 - tail, upper)):
                quantile = mixture_quantile(resp, means, sd, target)
                out[rows] = np.where(missing, quantile, X[rows])
        return lower, upper

    def sample_imputations(self, X, n_imputations: int = 5, random_state=None) -> np.ndarray:
        """Multiple imputation: draws of the missing entries from p(x_miss | x_obs).

        Each draw picks a component from p(k | x_obs), then the missing coordinates
        from that component's conditional Gaussian (correlations kept).  Returns
        shape (n_imputations, n_samples, n_features); observed entries are X's.
        """
        _check_positive_int("n_imputations", n_imputations)
        rng = check_random_state(random_state)
        X, observed, parts = self._conditional_parts(X)
        draws = np.broadcast_to(X, (n_imputations, *X.shape)).copy()
        for rows, resp, means, cov in parts:
            missing = observed[rows] == 0
            if self.covariance_type in ("full", "tied"):
                # unit variance on observed coordinates makes every covariance PD;
                # those coordinates are overwritten below
                root = np.linalg.cholesky(
                    cov + np.einsum("md,de->mde", 1.0 - missing, np.eye(X.shape[1]))[:, None]
                )
            else:
                root = np.sqrt(cov)
            cumulative = np.cumsum(resp, axis=1)
            for m in range(n_imputations):
                u = rng.uniform(size=(rows.size, 1))
                k = np.minimum((u > cumulative).sum(axis=1), resp.shape[1] - 1)
                eps = rng.standard_normal((rows.size, X.shape[1]))
                pick = np.arange(rows.size), k
                if root.ndim == 4:
                    x = means[pick] + np.einsum("mde,me->md", root[pick], eps)
                else:
                    x = means[pick] + root[pick] * eps
                draws[m, rows] = np.where(missing, x, X[rows])
        return draws

    def sample(self, n_samples: int = 1, random_state=None):
        """Draw from the fitted mixture through its declaration: ``(X, component labels)``."""
        check_is_fitted(self)
        with self._precision():
            trace = self._draw_from_declaration(n_samples, random_state)
            X = to_numpy(trace["x"]["value"])
            labels = np.asarray(trace["c"]["value"], dtype=np.int64)
        return X, labels
