"""``latentlab.PPCA``: probabilistic PCA fitted by EM, in closed form, or by MAP/SVI."""

from __future__ import annotations

import warnings
from functools import partial

import jax
import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab._docstrings import fill_doc
from latentlab._settings import Options, scale_settings
from latentlab.estimators import _posterior_hooks, _standard_errors
from latentlab.estimators.base import LATENTLAB_FILES
from latentlab.estimators.gaussian_latent import (
    ROTATION_SETTINGS,
    STREAMING_SETTINGS,
    VARIANCE_FLOOR,
    GaussianLatentEstimator,
)
from latentlab.models import ppca

__all__ = ["PPCA"]

METHODS = ("em", "closed_form", "map", "svi")

# A noise variance at its floor means "rank K" only if the floor is below this
# fraction of every feature's variance (each feature >= 99.9% explained).
SUBSPACE_RATIO = 1e3


_e_step = jax.jit(ppca.e_step)


@fill_doc(rows_per_call="1024 rows with missing entries")
class PPCA(GaussianLatentEstimator):
    """Probabilistic principal component analysis (Tipping & Bishop 1999).

    ``x = W z + mu + eps`` with ``z ~ N(0, I_K)`` and ``eps ~ N(0, sigma2 I)``, declared
    once in :func:`latentlab.models.ppca.ppca_model`.  NaN entries in ``X`` are missing
    values: every method except ``"closed_form"`` fits the exact likelihood of the
    observed entries, and :meth:`impute` fills them in with calibrated uncertainty.

    Parameters
    ----------
    n_components : int, "mle" or None, default=None
        Number of latent dimensions K, with ``0 <= K <= min(n_samples, n_features) - 1``
        (the noise variance is estimated from the discarded directions).  ``K = 0`` is
        the isotropic Gaussian N(mu, sigma2 I), the baseline row of a comparison.
        ``"mle"`` chooses K by Minka's (2000) Laplace evidence, as
        :class:`latentlab.PCA` does (complete data, ``n_samples >= n_features``).
        ``None`` takes the largest allowed value.
    method : {"em", "closed_form", "map", "svi"}, default="em"
        ``"em"``: jit-compiled EM with exact posterior moments.  ``"closed_form"``: the
        Tipping-Bishop eigen-solution (complete data only).  ``"map"``: gradient-based
        point estimate (AutoDelta) on the same NumPyro model; with ``prior=False`` it is
        maximum likelihood.  ``"svi"``: mean-field Gaussian posterior (AutoNormal) with
        the priors on; ``params_`` then holds posterior medians and ``log_likelihoods_``
        the ELBO.
    tol : float, default=1e-8
        EM stops when the mean per-sample log-likelihood changes by less than this
        between two (SQUAREM-accelerated) iterations.  A fit still going after
        :data:`~latentlab.inference.em.POLISH_AFTER` cycles (EM crawls where much
        information is missing) turns to projected quasi-Newton steps on the same
        likelihood (:mod:`latentlab.inference.quasi_newton`), which stop when a step
        raises it by less than ``tol`` per sample and the projected gradient is at
        most ``sqrt(tol)`` per sample.
    max_iter : int, default=2000
        Maximum number of iterations: EM cycles and quasi-Newton steps together.
    n_init : int, default=1
        Number of starts (EM and MAP); the best objective is kept.  EM's first start
        is the PCA solution of the mean-imputed data (the ML solution itself for
        complete data), the others random; with missing values EM can stop at a
        local optimum, which further starts guard against.
    prior : bool, default=False
        For ``method="map"``: include the priors of the declaration (MAP) or not (ML).
        The priors act on the data after a global rescaling to unit mean variance.
    svi_steps : int, default=3000
        Optimisation steps for ``"map"`` and ``"svi"``.
    learning_rate : float, default=0.05
        Initial Adam step size for ``"map"`` and ``"svi"`` (decays 50-fold).
    random_state : int, RandomState or None, default=None
    dtype : {"float64", "float32"}, default="float64"
        Precision of the computation; float64 does not change JAX's global config.
        With float32, objective changes below ~1e-5 per sample are round-off: use a
        ``tol`` of that order.  Data are centred in float64 before any float32 step
        and results shifted back in float64, so a large mean costs no precision.
    {rotation_parameters}
    {streaming_em_parameters}

    Attributes
    ----------
    components_ : ndarray (n_components, n_features)
        Loadings ``W^T``, rotated to orthogonal columns ordered by norm, each with its
        largest-magnitude entry positive; with ``rotation``, the rotated (pattern)
        loadings.
    {rotation_attributes}
    mean_ : ndarray (n_features,)
    noise_variance_ : float
    explained_variance_ : ndarray (n_components,)
        Model variance along each loading direction, ``||w_k||^2 + sigma2``.
    log_likelihoods_ : ndarray (n_iter_,)
        Fit objective after each iteration; the last entry is at the returned
        parameters (for EM and closed form it equals ``n_samples * score(X)``).
    n_iter_, converged_ : int, bool
    params_ : dict
        Fitted values by NumPyro site name (``W`` (d, K), ``mu``, ``sigma2``).
    {streaming_em_attributes}

    Notes
    -----
    ``score`` is the exact ML log-likelihood.  scikit-learn's ``PCA.score`` uses the
    same formula but with ddof=1 eigenvalues, so the two differ slightly even for the
    same data; see ``tests/test_ppca.py`` for the exact correspondence.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(200, 6)) @ np.diag([3, 2, 1, 1, 1, 1])
    >>> model = latentlab.PPCA(n_components=2, random_state=0).fit(X)
    >>> model.components_.shape
    (2, 6)
    """

    def __init__(
        self,
        n_components=None,
        *,
        method="em",
        tol=1e-8,
        max_iter=2000,
        n_init=1,
        prior=False,
        svi_steps=3000,
        learning_rate=0.05,
        random_state=None,
        dtype="float64",
        verbose=0,
        learning_decay=0.7,
        chunk_size=None,
        devices=None,
        rotation=None,
        rotation_kwargs=None,
        n_rotation_starts=1,
    ):
        self.n_components = n_components
        self.rotation = rotation
        self.rotation_kwargs = rotation_kwargs
        self.n_rotation_starts = n_rotation_starts
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
        self.learning_decay = learning_decay
        self.chunk_size = chunk_size
        self.devices = devices

    # -- fitting ------------------------------------------------------------------------

    _module = ppca
    _posterior_problem = _posterior_hooks.ppca_problem  # for sample_posterior
    _reported_estimates = _standard_errors.principal_axes_estimates  # for standard_errors
    _methods = METHODS
    _isotropic_noise = True  # params_["sigma2"] (noise_variance_, a float)
    _settings = {
        **GaussianLatentEstimator._settings,
        **STREAMING_SETTINGS,
        **ROTATION_SETTINGS,
        "method": Options(*METHODS),
        **scale_settings(),
    }

    _min_components = 0
    _allows_mle = True

    def _max_components(self, n_samples, n_features):
        return min(n_samples, n_features) - 1, "min(n_samples, n_features) - 1"

    def fit(self, X, y=None):
        """Fit the model to X (n_samples, n_features); NaN entries are missing values."""
        return self._fit_latent(X)

    def partial_fit(self, X, y=None):
        return self._stepwise_fit(X)

    partial_fit.__doc__ = GaussianLatentEstimator._stepwise_fit.__doc__

    def _hyper(self, column_variance, dtype):
        # One floor for the one noise variance: the mean of the features' floors, not
        # the smallest (a floor far below the largest feature's variance lets round-off
        # break EM's monotonicity; tried: the minimum breaks it by 1e-2 relative on
        # rank-K data whose column scales span 1e5).
        floor = np.mean(VARIANCE_FLOOR * column_variance)
        return ppca.Hyper(variance_floor=np.asarray(floor, dtype))

    def _fit_closed_form(self, data, K, hyper, mask):
        if mask is not None:
            raise ValueError(
                "method='closed_form' needs complete data but X has missing values (NaN); "
                "use method='em' (or 'map'/'svi'), which fit the observed entries exactly"
            )
        c = data.complete
        params = ppca.ml_params(c.n, c.sum_x, c.sum_xx, n_components=K)
        _, loglik = _e_step(params, data, hyper)
        return params, np.reshape(np.asarray(loglik), (1,)), 0, True

    def _warn_after_fit(self, hyper):
        floor = float(hyper.variance_floor)
        if self.params_["sigma2"] <= 1.000001 * floor:
            # The floor is 1e-6 of the *mean* feature variance (EM's round-off needs
            # that).  Only when it is also small against every feature's own variance
            # (here the fitted model's, ||w_j||^2 + sigma2) does reaching it mean the
            # data are (nearly) rank K; with very unequal column scales it can instead
            # exceed a small feature's whole variance.  (Constant features, with no
            # loading, are trivially in the subspace.)
            loading = np.sum(self.params_["W"] ** 2, axis=1)
            small = np.flatnonzero((loading > floor) & (loading < SUBSPACE_RATIO * floor))
            if small.size == 0:
                message = (
                    "PPCA noise variance reached its floor: the data lie (almost) in a "
                    f"{self.n_components_}-dimensional affine subspace; use fewer components."
                )
            else:
                features = ", ".join(map(str, small[:10]))
                message = (
                    f"PPCA noise variance reached its floor ({floor:.3g}, 1e-6 of the mean "
                    f"feature variance), which is not small against the variance of "
                    f"feature(s) {features}: the columns have very different scales, so "
                    "the floor, not the data, set the noise variance. Standardise X "
                    "(e.g. sklearn's StandardScaler) for the maximum-likelihood fit."
                )
            warnings.warn(message, UserWarning, skip_file_prefixes=LATENTLAB_FILES)
        super()._warn_after_fit(hyper)

    # -- fitted quantities --------------------------------------------------------------

    def _n_parameters(self) -> int:
        return ppca.n_parameters(self.n_features_in_, self.n_components_)

    @property
    def explained_variance_(self):
        check_is_fitted(self)
        return np.sum(self.params_["W"] ** 2, axis=0) + self.noise_variance_

    @property
    def model_(self):
        """The NumPyro declaration with this fit's static settings bound."""
        check_is_fitted(self)
        return partial(ppca.ppca_model, n_components=self.n_components_)
