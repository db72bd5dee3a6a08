"""``latentlab.SupervisedPCA``: latent factor regression with an alpha-weighted x-likelihood."""

from __future__ import annotations

from functools import partial

import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, RegressorMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._settings import Boolean, Real
from latentlab._validation import (
    check_data,
    check_no_empty_columns,
    check_no_empty_rows,
)
from latentlab.estimators import _posterior_hooks, _standard_errors
from latentlab.estimators.base import (
    LatentEstimator,
    jax_key,
    to_numpy,
    warn_not_converged,
)
from latentlab.estimators.gaussian_latent import (
    DEGENERATE_ADVICE,
    SETTINGS,
    VARIANCE_FLOOR,
    check_components,
    padded_rows,
)
from latentlab.models import supervised_pca as spca
from latentlab.models.gaussian_latent import (
    canonical_loadings,
    fit_padded_em,
    global_scale,
    row_posteriors_program,
    summarise,
)

__all__ = ["SupervisedPCA"]


class SupervisedPCA(
    RegressorMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    LatentEstimator,
):
    """Supervised PCA (latent factor regression): x and y share a K-dimensional z.

    ``z ~ N(0, I)``, ``x | z ~ N(W_x z + mu_x, sigma2_x I)``, ``y | z ~ N(W_y z + mu_y,
    sigma2_y I)``, with the x-likelihood weighted by ``alpha``: EM maximises
    ``sum_i log integral p(z) p(x_i|z)^alpha p(y_i|z) dz``.  Small alpha lets y shape
    the latent space; large alpha approaches PCA of x followed by regression on z.
    Declared once in :func:`latentlab.models.supervised_pca.spca_model`.

    Parameters
    ----------
    n_components : int or None, default=None
        K, ``1 <= K <= min(n_samples, n_features + n_targets) - 1``; ``None`` takes
        ``min(n_features, that bound)``.
    alpha : float, default=1.0
        Weight of the x-likelihood (> 0).  Tune it by cross-validation
        (``GridSearchCV``); ``score`` is R^2 of :meth:`predict`.
    method : {"em", "map", "svi"}, default="em"
        ``"map"``/``"svi"`` optimise the declaration collapsed with ``tempered=True``,
        whose log density is EM's objective.
    tol, max_iter, n_init, prior, svi_steps, learning_rate, random_state, dtype, verbose
        As for :class:`latentlab.PPCA`.

    Attributes
    ----------
    params_ : dict
        ``W_x``, ``W_y``, ``mu_x``, ``mu_y``, ``sigma2_x``, ``sigma2_y`` (NumPyro site names).
    log_likelihoods_ : ndarray
        The alpha-weighted objective after each EM iteration.
    n_targets_ : int

    Notes
    -----
    ``score_samples(X, y)`` is the *unweighted* joint log-likelihood log p(x, y) of
    each row; it equals NumPyro's ``log_likelihood`` of ``model_`` (which ignores
    ``handlers.scale``).  ``predict`` and ``transform`` use the alpha-weighted
    posterior of z given x alone (precision ``I + alpha W_x^T W_x / sigma2_x``).
    """

    _module = spca
    _generative = True  # score, bic, aic, n_parameters_, sample_posterior
    _reported_estimates = _standard_errors.supervised_estimates  # for standard_errors
    _settings = {
        **SETTINGS,
        "alpha": Real(0, None, closed="neither", finite=True),
        "prior": Boolean(),
    }

    def __init__(
        self,
        n_components=None,
        *,
        alpha=1.0,
        method="em",
        tol=1e-8,
        max_iter=5000,
        n_init=1,
        prior=False,
        svi_steps=3000,
        learning_rate=0.05,
        random_state=None,
        dtype="float64",
        verbose=0,
    ):
        self.n_components = n_components
        self.alpha = alpha
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.prior = prior
        self.svi_steps = svi_steps
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.dtype = dtype
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.input_tags.allow_nan = True
        return tags

    @property
    def _n_features_out(self):
        return self.n_components_

    def _max_components(self, n_samples, n_features):
        return min(n_samples, n_features) - 1, "min(n_samples, n_features + n_targets) - 1"

    # -- fitting ------------------------------------------------------------------------

    def _check_y(self, y, n_samples):
        y = np.asarray(y, dtype=np.float64)
        if y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D, got an array with {y.ndim} dimensions")
        if y.shape[0] != n_samples:
            raise ValueError(
                f"X and y have different numbers of rows: {n_samples} and {y.shape[0]}"
            )
        if np.isinf(y).any():
            raise ValueError("y contains infinity")
        return y

    def fit(self, X, y):
        """Fit to X (n_samples, n_features) and y (n_samples,) or (n_samples, n_targets).

        NaN entries in X or y are missing values.
        """
        if y is None:
            raise ValueError("SupervisedPCA requires y to be passed, but the target y is None")
        X = check_data(self, X, reset=True, allow_nan=True, min_samples=2)
        y = self._check_y(y, X.shape[0])
        Y = y.reshape(len(y), -1)
        empty_targets = np.flatnonzero(np.isnan(Y).all(axis=0))
        if empty_targets.size:
            raise ValueError(
                f"y has target column(s) with every entry missing (NaN): {empty_targets.tolist()}"
            )
        V = np.concatenate([X, Y], axis=1)
        mask = ~np.isnan(V)
        check_no_empty_rows(mask)
        check_no_empty_columns(mask)
        n, d = V.shape
        d_x = X.shape[1]
        self.n_targets_ = Y.shape[1]
        # by default as many components as x has features (the data permitting)
        high, why = self._max_components(n, d)
        K = check_components(
            type(self).__name__, self.n_components, 1, high, why, n, d, min(d_x, high)
        )
        self.n_components_ = K
        mask = None if mask.all() else mask
        shift = np.nanmean(V, axis=0)
        with self._precision():
            data, column_variance = summarise(V, shift, mask)
            typical = np.mean(column_variance) if np.any(column_variance > 0) else 1.0
            column_variance = np.where(column_variance > 0, column_variance, typical)
            # the fit's standardisation of [x, y] (see GaussianLatentEstimator)
            self.fit_shift_, self.fit_scale_ = shift.copy(), global_scale(column_variance)
            dtype = data.X.dtype
            is_x = np.r_[np.ones(d_x), np.zeros(d - d_x)]
            floors = VARIANCE_FLOOR * np.array(
                [column_variance[:d_x].mean(), column_variance[d_x:].mean()]
            )
            hyper = spca.Hyper(
                alpha=np.asarray(self.alpha, dtype),
                is_x=np.asarray(is_x, dtype),
                variance_floor=np.asarray(floors, dtype),
            )
            if self.method == "em":
                params, trace, n_iter, converged = fit_padded_em(
                    spca,
                    data,
                    n,
                    K,
                    column_variance,
                    hyper,
                    n_init=self.n_init,
                    max_iter=self.max_iter,
                    tol=self.tol,
                    verbose=self.verbose,
                    seed=check_random_state(self.random_state).randint(0, 2**31 - 1),
                    pca_start=True,
                )
            else:
                params, trace, n_iter, converged = self._fit_svi_xy(
                    V - shift, mask, d_x, K, column_variance
                )
            W = canonical_loadings(to_numpy(params.W)[:, :K])  # padding columns dropped
            mu = to_numpy(params.mu) + shift
        self.target_ndim_ = y.ndim
        params = {
            "W_x": W[:d_x].copy(),  # copies: fitted arrays own their data
            "W_y": W[d_x:].copy(),
            "mu_x": mu[:d_x].copy(),
            "mu_y": mu[d_x:].copy(),
            "sigma2_x": to_numpy(params.sigma2_x),
            "sigma2_y": to_numpy(params.sigma2_y),
        }
        advice = DEGENERATE_ADVICE.format(data="X and y")
        self._end_fit(params, trace, n_iter, converged, advice=advice)
        if not self.converged_ and self.method == "em":
            warn_not_converged(self)
        return self

    def _fit_svi_xy(self, Vc, mask, d_x, K, column_variance):
        from latentlab.inference.svi import fit_best_of

        mean_variance = float(np.mean(column_variance))
        scale = np.sqrt(mean_variance) if mean_variance > 0 else 1.0
        Xs, Ys = jnp.asarray(Vc[:, :d_x] / scale), jnp.asarray(Vc[:, d_x:] / scale)
        model = partial(
            spca.spca_model,
            n_components=K,
            alpha=float(self.alpha),
            has_missing=mask is not None,
            use_prior=self.method == "svi" or bool(self.prior),
            tempered=True,  # the collapsed L_alpha: EM's objective F at any alpha
        )
        start = spca.init_params(
            jax_key(self.random_state), Vc.shape[1], K, jnp.asarray(1.0, Xs.dtype)
        )
        init = {
            "W_x": start.W[:d_x],
            "W_y": start.W[d_x:],
            "mu_x": start.mu[:d_x],
            "mu_y": start.mu[d_x:],
            "sigma2_x": start.sigma2_x,
            "sigma2_y": start.sigma2_y,
        }
        observed = np.ones(Vc.shape, bool) if mask is None else mask
        n_x, n_y = observed[:, :d_x].sum(), observed[:, d_x:].sum()
        # F of the rescaled data vs F of the data: p(x|z)^alpha scales as scale^(alpha d_x)
        log_jacobian = (self.alpha * n_x + n_y) * np.log(scale)
        best = fit_best_of(
            model,
            (Xs, Ys),
            [init],
            method="map" if self.method == "map" else "svi",
            num_steps=self.svi_steps,
            learning_rate=self.learning_rate,
            random_state=self.random_state,
            log_jacobian=log_jacobian,
        )
        p = best.params
        params = spca.Params(
            W=jnp.concatenate([p["W_x"], p["W_y"]]),
            mu=jnp.concatenate([p["mu_x"], p["mu_y"]]),
            sigma2_x=p["sigma2_x"],
            sigma2_y=p["sigma2_y"],
        )
        return spca.rescale(params, scale), best.trace, len(best.trace), True

    @property
    def objective_name_(self) -> str:
        """What ``log_likelihoods_`` traces (EM's alpha-weighted objective F for
        alpha != 1)."""
        check_is_fitted(self)
        if self.method == "svi":
            return "ELBO"
        if self.prior:
            return "log joint density"
        return "alpha-weighted log-likelihood" if self.alpha != 1.0 else "log-likelihood"

    # -- fitted quantities --------------------------------------------------------------

    def _joint_arrays(self, alpha):
        """(W, 0, noise precision) of [x, y]; the mean is zero because callers pass
        data centred on the host in float64 (:meth:`_centred`)."""
        p = self.params_
        d_x, d_y = p["W_x"].shape[0], p["W_y"].shape[0]
        W = np.concatenate([p["W_x"], p["W_y"]])
        precision = np.asarray(
            np.r_[np.full(d_x, alpha / p["sigma2_x"]), np.full(d_y, 1.0 / p["sigma2_y"])]
        )
        return W, np.zeros_like(precision), precision

    def _centred(self, V, mask):
        """``[x, y] - [mu_x, mu_y]`` in float64 on the host, 0 where ``mask`` is 0
        (so a large mean never meets the data in float32)."""
        mu = np.concatenate([self.params_["mu_x"], self.params_["mu_y"]])
        return np.where(mask > 0, V - mu, 0.0)

    def _x_rows(self, X):
        X = check_data(self, X, reset=False, allow_nan=True)
        mask = ~np.isnan(X)
        filled = np.where(mask, X, 0.0)
        n = len(X)
        V = np.concatenate([filled, np.zeros((n, self.n_targets_))], axis=1)
        M = np.concatenate([mask, np.zeros((n, self.n_targets_), bool)], axis=1)
        return V, M.astype(np.float64)

    def posterior_latent(self, X):
        """alpha-weighted posterior of z given x: mean (n, K) and covariance (n, K, K)."""
        check_is_fitted(self)
        V, M = self._x_rows(X)
        with self._precision():
            mean, cov, _ = padded_rows(
                row_posteriors_program,
                *self._joint_arrays(self.alpha),
                X=self._centred(V, M),
                mask=M,
            )
        return mean, cov

    def transform(self, X):
        """Posterior mean of z given x (alpha-weighted), shape (n_samples, n_components)."""
        return self.posterior_latent(X)[0]

    def predict(self, X):
        """E[y | x] through the alpha-weighted posterior of z."""
        z = self.transform(X)
        y = z @ self.params_["W_y"].T + self.params_["mu_y"]
        return y[:, 0].copy() if self.target_ndim_ == 1 else y

    def score_samples(self, X, y=None):
        """Unweighted joint log-likelihood log p(x, y) of each row (NaN = missing).

        Without ``y``, the marginal log-likelihood log p(x).
        """
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=True)
        if y is None:
            y = np.full((X.shape[0], self.n_targets_), np.nan)
        Y = self._check_y(y, X.shape[0]).reshape(X.shape[0], -1)
        if Y.shape[1] != self.n_targets_:
            raise ValueError(
                f"y has {Y.shape[1]} target(s), but SupervisedPCA was fitted with {self.n_targets_}"
            )
        V = np.concatenate([X, Y], axis=1)
        mask = ~np.isnan(V)
        check_no_empty_rows(mask)
        with self._precision():
            ll = padded_rows(
                row_posteriors_program,
                *self._joint_arrays(1.0),
                X=self._centred(V, mask),
                mask=mask.astype(np.float64),
            )[2]
        return ll

    _posterior_problem = _posterior_hooks.supervised_problem  # for sample_posterior

    def _n_parameters(self) -> int:
        return spca.n_parameters(self.n_features_in_, self.n_targets_, self.n_components_)

    def bic(self, X, y) -> float:
        ll = self.score_samples(X, y)
        return float(-2 * ll.sum() + self._n_parameters() * np.log(len(ll)))

    def aic(self, X, y) -> float:
        return float(-2 * self.score_samples(X, y).sum() + 2 * self._n_parameters())

    @property
    def model_(self):
        """The NumPyro declaration with this fit's static settings bound."""
        check_is_fitted(self)
        return partial(spca.spca_model, n_components=self.n_components_, alpha=float(self.alpha))

    def _m_estimator(self):
        """Why the fit is an M-estimator (its objective not a likelihood), or None."""
        if self.alpha == 1.0:
            return None
        return (
            f"with alpha={self.alpha:g} the fit maximises an alpha-weighted objective, "
            "whose information is not the estimates' inverse covariance"
        )

    def score(self, X, y, sample_weight=None):
        """R^2 of :meth:`predict` (as for scikit-learn regressors)."""
        return RegressorMixin.score(self, X, y, sample_weight=sample_weight)
