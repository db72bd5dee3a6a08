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

from latentlab._validation import check_data, check_n_components, check_option
from latentlab.estimators.base import GenerativeMixin, LatentEstimator, to_numpy
from latentlab.inference.em import run_em
from latentlab.models import gmm

__all__ = ["GaussianMixture"]

INIT_METHODS = ("kmeans", "k-means++", "random", "random_from_data")


def _bucket(n: int) -> int:
    """Row count rounded up to a power of two (at least 32): one compile per bucket."""
    return max(32, 1 << (n - 1).bit_length())


def _pad_rows(X):
    """X padded with zero rows to its bucket, and the row mask (1 real, 0 padding)."""
    n = X.shape[0]
    pad = _bucket(n) - n
    Xp = np.concatenate([X, np.zeros((pad, X.shape[1]))])
    return Xp, np.concatenate([np.ones(n), np.zeros(pad)])


@partial(jax.jit, static_argnames="covariance_type")
def _starts(X, row_mask, resp, reg_covar, covariance_type):
    """One start per stack of responsibilities (n_init, n, K)."""
    make = partial(gmm.params_from_responsibilities, covariance_type=covariance_type)
    return jax.vmap(lambda r: make(X, row_mask, r, reg_covar))(resp)


@partial(jax.jit, static_argnames="covariance_type")
def _row_scores(params, X, covariance_type):
    """log p(x_i) (n,) and log responsibilities (n, K) under ``params``."""
    log_density, _ = gmm.component_log_density(params, X, covariance_type)
    weighted = log_density + jnp.log(params.weights)
    row = jax.scipy.special.logsumexp(weighted, axis=1)
    return row, weighted - row[:, None]


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
    Missing values (NaN) are not supported yet; ``fit`` rejects them.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-3, 1, (100, 2)), rng.normal(3, 1, (100, 2))])
    >>> gm = latentlab.GaussianMixture(2, random_state=0).fit(X)
    >>> np.sort(gm.means_[:, 0]).round(0)
    array([-3.,  3.])
    """

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
        self.dtype = dtype
        self.verbose = verbose

    # -- validation ---------------------------------------------------------------------

    def _check_settings(self, n, d):
        check_option("covariance_type", self.covariance_type, gmm.COVARIANCE_TYPES)
        check_option("init_params", self.init_params, INIT_METHODS)
        K = check_n_components(self.n_components, 1, n, "at most n_samples")
        for name in ("max_iter", "n_init"):
            _check_positive_int(name, getattr(self, name))
        if not self.tol >= 0:
            raise ValueError(f"tol must be >= 0, got {self.tol!r}")
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
        if np.isnan(X).any():
            raise ValueError(
                "X contains NaN: missing values are not supported yet by GaussianMixture; "
                "drop or impute those rows first"
            )
        n, d = X.shape
        K = self._check_settings(n, d)
        shift = X.mean(axis=0)
        Xc = X - shift  # statistics about the column means: no cancellation
        weights, means, scale = self._user_init(K, d, shift)
        rng = check_random_state(self.random_state)
        need_resp = weights is None or means is None or scale is None
        resp = np.stack(
            [
                self._responsibilities(Xc, K, rng) if need_resp else np.full((n, K), 1.0 / K)
                for _ in range(self.n_init)
            ]
        )
        Xp, row_mask = _pad_rows(Xc)
        resp = np.concatenate([resp, np.zeros((self.n_init, Xp.shape[0] - n, K))], axis=1)
        with self._precision():
            dtype = jnp.asarray(1.0).dtype
            data = gmm.GMMData(jnp.asarray(Xp, dtype), jnp.asarray(row_mask, dtype))
            reg = jnp.asarray(self.reg_covar, dtype)
            starts = _starts(
                data.X, data.row_mask, jnp.asarray(resp, dtype), reg, self.covariance_type
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
            e_step, m_step = gmm.step_functions(self.covariance_type)
            result = run_em(
                e_step,
                m_step,
                starts,
                data,
                gmm.Hyper(reg),
                jnp.asarray(n, dtype),
                jnp.asarray(self.tol, dtype),
                max_iter=int(self.max_iter),
                accelerate=bool(self.accelerate),
                verbose=int(self.verbose),
            )
            n_iter = int(result.n_iter)
            params = result.params._replace(means=result.params.means + jnp.asarray(shift, dtype))
            self.params_ = {name: to_numpy(v) for name, v in params._asdict().items()}
            self.log_likelihoods_ = to_numpy(result.trace[:n_iter])
            self.converged_ = bool(result.converged)
            objective = float(result.objective)
        bad = [k for k, v in self.params_.items() if not np.all(np.isfinite(v))]
        if bad or not np.isfinite(objective):
            raise ValueError(
                f"GaussianMixture fit produced non-finite values for {bad or 'the likelihood'}; "
                "increase reg_covar or use fewer components"
            )
        self.n_components_ = K
        self.n_iter_ = n_iter
        self.lower_bound_ = objective / n
        if not self.converged_:
            warnings.warn(
                f"GaussianMixture EM did not converge within max_iter={self.max_iter} "
                f"iterations (tol={self.tol}); increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def fit_predict(self, X, y=None):
        """Fit, then return the most probable component of each row."""
        return self.fit(X).predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags

    # -- fitted quantities --------------------------------------------------------------

    def _params(self, dtype):
        return gmm.Params(*(jnp.asarray(self.params_[k], dtype) for k in gmm.Params._fields))

    def _scores(self, X):
        """(log p(x_i) (n,), log responsibilities (n, K)) as float64 NumPy arrays."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        n = X.shape[0]
        Xp, _ = _pad_rows(X)
        with self._precision():
            dtype = jnp.asarray(1.0).dtype
            row, log_resp = _row_scores(
                self._params(dtype), jnp.asarray(Xp, dtype), self.covariance_type
            )
        return to_numpy(row)[:n], to_numpy(log_resp)[:n]

    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each row, shape (n_samples,)."""
        return self._scores(X)[0]

    def predict_proba(self, X) -> np.ndarray:
        """Posterior probability of each component for each row, shape (n_samples, K)."""
        return np.exp(self._scores(X)[1])

    def predict(self, X) -> np.ndarray:
        """Most probable component of each row, shape (n_samples,)."""
        return np.argmax(self._scores(X)[1], axis=1)

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

    def sample(self, n_samples: int = 1, random_state=None):
        """Draw from the fitted mixture through its declaration: ``(X, component labels)``."""
        check_is_fitted(self)
        with self._precision():
            trace = self._draw_from_declaration(n_samples, random_state)
            X = to_numpy(trace["x"]["value"])
            labels = np.asarray(trace["c"]["value"], dtype=np.int64)
        return X, labels
