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
# k-means runs (best inertia kept) for init_params="kmeans"
KMEANS_RUNS = 3
# Work (~flops) per call of a scoring program: sets its fixed rows per call
SCORE_WORK = 2**22
# EM pads n_components to its bucket only where one E-step costs at most this much
# (~flops per component): there a compile (seconds) dwarfs the padding's run time.
# Measured (30 SQUAREM cycles, full covariances, 16-core CPU): wine K=3 as 4 1.09x
# (+2 ms), K=5 as 8 1.20x; 20000 x 10 data K=3 as 4 1.35x (+0.2 s), so large data
# are not padded.
PAD_WORK = 2**18


def component_bucket(n_components: int) -> int:
    """The number of components EM (on small data, see ``PAD_WORK``) and the scoring
    programs are compiled for: the next power of two.  The extra components are
    padding at weight exactly 0, a fixed point of EM that changes nothing else (see
    :class:`latentlab.models.gmm.Hyper`), so a search over n_components compiles once
    per bucket, not once per value."""
    return 1 << (int(n_components) - 1).bit_length()


def _pad_components(weights, means, scale, pad, covariance_type):
    """Append ``pad`` padding components -- weight 0, mean 0, unit covariance -- to
    host arrays (any of them None stays None; a tied covariance has no component axis)."""
    if weights is not None:
        weights = np.concatenate([weights, np.zeros(pad, weights.dtype)])
    if means is not None:
        means = np.concatenate([means, np.zeros((pad, means.shape[1]), means.dtype)])
    if scale is not None and covariance_type != "tied":
        unit = np.eye(scale.shape[-1]) if covariance_type == "full" else np.ones(scale.shape[1:])
        scale = np.concatenate(
            [scale, np.broadcast_to(unit.astype(scale.dtype), (pad, *unit.shape))]
        )
    return weights, means, scale


def _fixed_row_chunks(fn, *row_arrays, chunk: int):
    """:func:`map_row_chunks` with every call at exactly ``chunk`` rows (a power of two
    >= 32): any row count then reuses one compiled program, where buckets would
    compile one per size class (a predict on 7 rows, then 100, then 178: three).
    Outputs are cut back to the input's rows (views, for internal use)."""
    n = row_arrays[0].shape[0]
    rows = -(-n // chunk) * chunk
    out = map_row_chunks(fn, *(pad_rows(a, rows) for a in row_arrays), chunk=chunk)
    return tuple(o[:n] for o in out) if isinstance(out, tuple) else out[:n]


@partial(jax.jit, static_argnames="covariance_type")
def _starts(X, row_mask, resp, reg_covar, active, user, use_user, covariance_type):
    """One start per stack of responsibilities (n_init, n, K), with the user's
    ``weights_init``/``means_init``/``precisions_init`` (``user``, a Params without the
    start axis) in place where ``use_user`` (3 bools) says.  The flags are traced, so
    every combination shares one program.  ``active`` (K,) marks the components that
    are not padding."""
    make = partial(gmm.params_from_responsibilities, covariance_type=covariance_type, active=active)
    starts = jax.vmap(lambda r: make(X, row_mask, r, reg_covar))(resp)
    return gmm.Params(
        *(
            jnp.where(use, jnp.broadcast_to(given, start.shape), start)
            for use, given, start in zip(use_user, user, starts, strict=True)
        )
    )


@partial(jax.jit, static_argnames=("steps", "covariance_type", "max_iter", "accelerate", "verbose"))
def _fit_em_program(
    X,
    row_mask,
    resp,
    active,
    user,
    use_user,
    data,
    reg_covar,
    n_samples,
    tol,
    *,
    steps,
    covariance_type,
    max_iter,
    accelerate,
    verbose,
):
    """The whole EM fit as one compiled program: the starts (:func:`_starts`) and
    the EM driver from them, with ``steps = (e_step, m_step)``.  Everything else in
    ``fit`` runs on the host in NumPy, so a cold fit compiles this program alone."""
    starts = _starts(X, row_mask, resp, reg_covar, active, user, use_user, covariance_type)
    e_step, m_step = steps
    return run_em(
        e_step,
        m_step,
        starts,
        data,
        gmm.Hyper(reg_covar, active),
        n_samples,
        tol,
        max_iter=max_iter,
        accelerate=accelerate,
        verbose=verbose,
    )


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


def _rescale(scale, unit, covariance_type):
    """Cholesky factors or standard deviations for data multiplied by ``unit`` (d,),
    feature by feature (x -> U x: L -> U L, lower triangular again); spherical
    covariances take one global unit, ``unit[0]``."""
    if covariance_type in ("full", "tied"):
        return unit[:, None] * scale
    if covariance_type == "diag":
        return scale * unit
    return scale * unit[0]


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
    max_iter : int, default=500
        Maximum number of iterations.  With ``accelerate=True`` an iteration is one
        SQUAREM cycle of four EM steps (E- and M-step pairs), so up to
        ``4 * max_iter`` EM steps run; ``n_iter_`` and ``log_likelihoods_`` count
        cycles too.  scikit-learn counts single EM steps: ``accelerate=False`` gives
        its count.
    n_init : int, default=1
        Number of starts; the best log-likelihood is kept.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        How starting responsibilities are made, as in scikit-learn, on the
        standardised data (see Notes) ("kmeans": Lloyd iterations from k-means++
        seeds, the best of 3 runs except for spherical covariances).
    weights_init : array (n_components,), optional
    means_init : array (n_components, n_features), optional
    precisions_init : array, optional
        Shape (K, d, d) full, (d, d) tied, (K, d) diag, (K,) spherical.
    accelerate : bool, default=True
        SQUAREM extrapolation, kept monotone by falling back to the plain EM step;
        see ``max_iter`` for how iterations are counted.
    random_state : int, RandomState or None, default=None
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
    model_ : callable
        The NumPyro model with its static settings bound; ``model_(X)``.

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

    def _user_init(self, K, d, shift, unit):
        """User-given starting values as (weights, means, scale) or None each, in the
        standardised units EM works in: (x - shift) / unit, feature by feature."""
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
            means = (means - shift) / unit
        if self.precisions_init is not None:
            scale = self._scale_from_precisions(np.asarray(self.precisions_init, float), K, d)
            scale = _rescale(scale, 1.0 / unit, self.covariance_type)
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

    def _feature_scale(self, Xc, observed):
        """The unit s_j of each feature that EM works in: its standard deviation (about
        its mean, over its observed entries), so that the fit is equivariant under
        rescaling features; spherical covariances are only equivariant under one global
        scale, so they get one, the root mean variance.  A constant feature has no scale
        of its own and gets the root mean variance of the others."""
        variance = np.sum(Xc**2, axis=0) / observed.sum(axis=0)
        if self.covariance_type == "spherical":
            variance = np.full_like(variance, np.mean(variance))
        positive = variance > 0
        typical = np.mean(variance[positive]) if positive.any() else 1.0
        return np.sqrt(np.where(positive, variance, typical))

    def _variance_floor(self, unit, dtype):
        """The covariance floor in standardised units, one per feature: ``reg_covar``
        (a variance in the data's units) over s_j^2, but never below the working
        precision's resolution, 10 eps: a covariance eigenvalue under ~eps times the
        feature's variance is round-off, and a component collapsed onto tied points
        would otherwise have an infinite (NaN) likelihood -- scikit-learn lands there
        by luck of cancellation."""
        resolution = 10.0 * np.finfo(dtype).eps
        return np.maximum(float(self.reg_covar) / unit**2, resolution)

    def _responsibilities(self, X, K, rng):
        """Starting responsibilities (n, K) for one start, as scikit-learn makes them."""
        n = X.shape[0]
        resp = np.zeros((n, K))
        if self.init_params == "kmeans":
            from sklearn.cluster import KMeans

            # X is standardised feature by feature (see fit), which weighs a
            # low-variance feature as much as the others and makes k-means' local optima
            # likelier than in the data's geometry (a planted 3-cluster case: 8 of 50
            # single runs stuck); the best of a few runs costs little next to EM.
            # Spherical mixtures are standardised by one global scale: k-means sees
            # the data's own geometry, as scikit-learn's single run does.
            runs = 1 if self.covariance_type == "spherical" else KMEANS_RUNS
            labels = KMeans(K, n_init=runs, random_state=rng).fit(X).labels_
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
        # EM runs in standardised units, z = (x - shift) / unit feature by feature, in
        # float64 on the host: about the column means nothing cancels, and with every
        # feature at unit variance the starts (k-means), SQUAREM's step length and the
        # covariance floor do not depend on the data's units, so neither does the fit.
        # Starts are made from data with missing entries at their column means.
        unit = self._feature_scale(np.where(observed, X - shift, 0.0), observed)
        Z = np.where(observed, (X - shift) / unit, 0.0)
        weights, means, scale = self._user_init(K, d, shift, unit)
        rng = check_random_state(self.random_state)
        need_resp = weights is None or means is None or scale is None
        resp = np.stack(
            [
                self._responsibilities(Z, K, rng) if need_resp else np.full((n, K), 1.0 / K)
                for _ in range(self.n_init)
            ]
        )
        rows = int(np.prod(padded_size(n, CHUNK)))
        # EM runs with padding components up to the bucket (at weight 0, they change
        # nothing): one compiled program serves every n_components in it
        padded = K
        if self.method == "em" and self._estep_work(observed) <= PAD_WORK:
            padded = component_bucket(K)
        with self._precision():
            # host arrays already in the working dtype: no eager JAX conversions (each
            # would be a compiled program of its own on a cold start)
            dtype = np.dtype(self.dtype)
            reg = self._variance_floor(unit, dtype).astype(dtype)
            resp = np.pad(resp, ((0, 0), (0, rows - n), (0, padded - K)))
            start_data = (
                pad_rows(Z, rows).astype(dtype),
                pad_rows(np.ones(n), rows).astype(dtype),
                resp.astype(dtype),
                np.arange(padded) < K,
                *self._given_start(weights, means, scale, K, padded, dtype),
            )
            if self.method == "em":
                params, trace, converged, objective, breakdown = self._fit_em(
                    start_data, Z, observed, reg
                )
            else:
                starts = _starts(*start_data[:3], reg, *start_data[3:], self.covariance_type)
                params, trace, converged = self._fit_svi(starts, Z, observed)
                objective, breakdown = float(trace[-1]), False
            fitted = {name: to_numpy(v) for name, v in params._asdict().items()}
        fitted = {  # the padding components cut off
            name: v if name == "scale" and self.covariance_type == "tied" else v[:K]
            for name, v in fitted.items()
        }
        # log p(x) = log p(z) - sum over observed entries of log unit_j
        log_jacobian = float(observed.sum(axis=0) @ np.log(unit))
        self.log_likelihoods_ = to_numpy(trace).astype(np.float64) - log_jacobian
        objective = objective - log_jacobian
        # back to data units in float64: in float32 a mean of 1e8 has a spacing of 8;
        # float32 weights sum to 1 only to ~1e-7, which weights_ @ means_ would show
        self.params_ = {
            "weights": fitted["weights"] / fitted["weights"].sum(),
            "means": fitted["means"].astype(np.float64) * unit + shift,
            "scale": _rescale(fitted["scale"].astype(np.float64), unit, self.covariance_type),
        }
        self.converged_ = converged
        bad = [k for k, v in self.params_.items() if not np.all(np.isfinite(v))]
        if bad or not np.isfinite(objective):
            # EM keeps the last finite iterate, so only a start can get here
            raise ValueError(
                f"GaussianMixture start has non-finite values for {bad or 'the likelihood'}; "
                "check weights_init/means_init/precisions_init or increase reg_covar"
            )
        self.n_components_ = K
        self.n_iter_ = len(trace)
        # EM's objective is the log-likelihood; MAP's the log joint, SVI's the ELBO
        self.lower_bound_ = objective / n if self.method == "em" else self.score(X)
        self.lower_bounds_ = self.log_likelihoods_ / n  # scikit-learn's per-sample trace
        if self.method == "em":
            self._warn_on_degeneracy(fitted["scale"], np.asarray(reg, np.float64), unit, breakdown)
        if not self.converged_ and not breakdown:
            warnings.warn(
                f"GaussianMixture EM did not converge within max_iter={self.max_iter} "
                f"iterations (tol={self.tol}); increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def _estep_work(self, observed):
        """Rough cost (flops) of one E-step per component: complete rows cost d^2
        each (d for diag/spherical), rows with missing entries d^3 (d)."""
        n, d = observed.shape
        dense = self.covariance_type in ("full", "tied")
        missing = int(np.sum(~observed.all(axis=1)))
        return (n - missing) * (d * d if dense else d) + missing * (d**3 if dense else d)

    def _given_start(self, weights, means, scale, n_components, padded, dtype):
        """``(user, use_user)`` for :func:`_starts`: the user's starting values with
        padding components up to ``padded`` (zeros where none were given) and which
        were given."""
        pad = padded - n_components
        K, d = padded, self.n_features_in_
        shapes = {"full": (K, d, d), "tied": (d, d), "diag": (K, d), "spherical": (K,)}
        given = _pad_components(weights, means, scale, pad, self.covariance_type)
        shape = ((K,), (K, d), shapes[self.covariance_type])
        user = gmm.Params(
            *(
                np.zeros(s, dtype) if v is None else np.asarray(v, dtype)
                for v, s in zip(given, shape, strict=True)
            )
        )
        return user, np.array([v is not None for v in given])

    def _fit_em(self, start_data, Xc, observed, reg):
        """Jit-compiled EM from every start on the standardised data ``Xc`` (missing
        entries 0); returns (params, trace, converged, objective, breakdown)."""
        dtype = reg.dtype
        d = Xc.shape[1]
        complete = observed.all(axis=1)
        missing_chunk = MISSING_CHUNK[self.covariance_type]
        no_rows = np.zeros((0, 1, d))
        data = gmm.GMMData(
            *(
                a.astype(dtype)
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
        X, row_mask, resp, active, user, use_user = start_data
        result = _fit_em_program(
            X,
            row_mask,
            resp,
            active,
            user,
            use_user,
            data,
            reg,
            np.asarray(Xc.shape[0], dtype),
            np.asarray(self.tol, dtype),
            steps=gmm.step_functions(self.covariance_type),
            covariance_type=self.covariance_type,
            max_iter=int(self.max_iter),
            accelerate=bool(self.accelerate),
            verbose=int(self.verbose),
        )
        # sliced on the host: slicing the device array would compile a program
        trace = np.asarray(result.trace)[: int(result.n_iter)]
        objective = float(result.objective)
        return result.params, trace, bool(result.converged), objective, bool(result.breakdown)

    def _warn_on_degeneracy(self, scale, floor, unit, breakdown):
        """Say when the fit is not a regular maximum of the likelihood.  ``scale`` and
        ``floor`` are in standardised units (see :meth:`fit`)."""
        if breakdown:
            warnings.warn(
                f"GaussianMixture EM broke down numerically after {self.n_iter_} iterations "
                "(the next iterate's log-likelihood was not finite); returning the last "
                "iterate with a finite one, converged_=False.  Increase reg_covar.",
                ConvergenceWarning,
                stacklevel=3,
            )
        roundoff = floor * unit**2 > self.reg_covar
        if not roundoff.any():
            return
        # reg_covar is below round-off at some feature's scale: did a component collapse
        # there?  Covariances relative to the floor G: a direction of G^{-1/2} Sigma
        # G^{-1/2} at its floor 1 that lies mostly along those features.
        if self.covariance_type in ("full", "tied"):
            relative = scale / np.sqrt(floor)[:, None]
            values, vectors = np.linalg.eigh(relative @ np.swapaxes(relative, -1, -2))
            along = np.sum(vectors[..., roundoff, :] ** 2, axis=-2) > 0.5
            collapsed = np.any((values <= 1.01) & along)
        elif self.covariance_type == "diag":
            collapsed = np.any((scale**2 / floor)[:, roundoff] <= 1.01)
        else:
            collapsed = np.any(scale**2 / np.max(floor) <= 1.01)
        if collapsed:
            warnings.warn(
                "A GaussianMixture component collapsed onto (near-)identical points: "
                f"with reg_covar={self.reg_covar} its likelihood is unbounded, and its "
                "variance stopped at the round-off floor (10 eps times the feature's "
                "variance).  Increase reg_covar.",
                UserWarning,
                stacklevel=3,
            )

    def _fit_svi(self, starts, Z, observed):
        """MAP (AutoDelta) or SVI (AutoNormal) on the declaration from every start, on
        the standardised data ``Z`` (missing entries 0) where Adam's step size makes
        sense; returns parameters and the objective trace in those units."""
        from numpyro.infer.util import log_density

        from latentlab.inference.svi import fit_svi

        missing = not observed.all()
        Xs = jnp.asarray(np.where(observed, Z, np.nan))
        model = partial(
            gmm.gmm_model,
            n_components=int(starts.means.shape[1]),
            covariance_type=self.covariance_type,
            has_missing=missing,
            use_prior=self.method == "svi" or bool(self.prior),
        )
        best = None
        for i in range(starts.means.shape[0]):
            start = {k: np.asarray(v[i]) for k, v in starts._asdict().items()}
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
        trace = np.asarray(fit.objective_trace, np.float64)
        if self.method == "map":  # the last entry exactly at the returned parameters
            trace = np.append(trace, float(objective))
        params = gmm.Params(*(fit.params[k] for k in gmm.Params._fields))
        return params, jnp.asarray(trace), True

    def fit_predict(self, X, y=None):
        """Fit, then return the most probable component of each row."""
        return self.fit(X).predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    # -- fitted quantities --------------------------------------------------------------

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
        padded = _pad_components(*params, pad, self.covariance_type)
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
                row[complete], padded = _fixed_row_chunks(
                    lambda x: _row_scores(params, x, None, kind),
                    X[complete],
                    chunk=self._rows_per_call(missing=False),
                )
                log_resp[complete] = padded[:, :K]
            if not complete.all():
                row[~complete], padded = _fixed_row_chunks(
                    lambda x, o: _row_scores(params, x, o, kind),
                    X[~complete],
                    observed[~complete],
                    chunk=self._rows_per_call(missing=True),
                )
                log_resp[~complete] = padded[:, :K]
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
    def objective_name_(self) -> str:
        """What ``log_likelihoods_`` traces: "ELBO" (SVI), "log joint density" (MAP
        with the priors on), else "log-likelihood"."""
        check_is_fitted(self)
        if self.method == "svi":
            return "ELBO"
        return "log joint density" if self.prior else "log-likelihood"

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
                    log_resp, means, cov = _fixed_row_chunks(
                        lambda x, o: _conditionals(params, x, o, self.covariance_type),
                        np.where(o > 0, X[rows] - centre, 0.0),
                        o,
                        chunk=chunk,
                    )
                    K = self.n_components_  # padding components cut off
                    yield rows, np.exp(log_resp[:, :K]), means[:, :K], cov[:, :K]

        return X, observed, self._centre(), parts()

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
        _check_positive_int("n_imputations", n_imputations)
        rng = check_random_state(random_state)
        X, observed, centre, parts = self._conditional_parts(X)
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
                draws[m, rows] = np.where(missing, x + centre, X[rows])
        return draws

    def sample(self, n_samples: int = 1, random_state=None):
        """Draw from the fitted mixture through its declaration: ``(X, component labels)``."""
        check_is_fitted(self)
        with self._precision():
            params, centre = self._centred_params()
            trace = self._draw_from_declaration(n_samples, random_state, params._asdict())
            X = to_numpy(trace["x"]["value"]) + centre  # un-centred in float64
            labels = np.asarray(trace["c"]["value"], dtype=np.int64)
        return X, labels
