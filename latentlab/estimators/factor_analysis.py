"""``latentlab.FactorAnalysis``: factor analysis fitted by EM or MAP/SVI, with rotations."""

from __future__ import annotations

import warnings
from functools import partial

import jax.numpy as jnp
import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab._docstrings import fill_doc
from latentlab._settings import ArrayLike, Boolean, Integer, Options, scale_settings
from latentlab.estimators import _posterior_hooks, _standard_errors
from latentlab.estimators.base import LATENTLAB_FILES, to_numpy
from latentlab.estimators.gaussian_latent import (
    ROTATION_SETTINGS,
    STREAMING_SETTINGS,
    GaussianLatentEstimator,
)
from latentlab.models import factor_analysis as fa
from latentlab.models.gaussian_latent import canonical_loadings, orient_columns

__all__ = ["FactorAnalysis"]

SVD_METHODS = ("randomized", "lapack")


@fill_doc(rows_per_call="1024 rows with missing entries")
class FactorAnalysis(GaussianLatentEstimator):
    """Factor analysis: ``x = W z + mu + eps``, ``z ~ N(0, I_K)``, ``eps ~ N(0, diag(psi))``.

    Declared once in :func:`latentlab.models.factor_analysis.fa_model` and fitted by
    EM with exact posterior moments: with complete data each iteration works on the
    d x d sample covariance, O(d^2 K) whatever the number of rows.  NaN entries are
    missing values, fitted by their exact marginal likelihood; :meth:`impute` fills
    them in.

    The model is equivariant under rescaling features, and so is the fit: every
    method works on features scaled to unit variance and maps the result back, so
    scaling feature j by s_j scales its loadings by s_j and its noise variance by
    s_j^2, leaves :meth:`transform` unchanged and lowers the log-likelihood by
    (observed entries of j) * log s_j, whatever the spread of the scales.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of factors K, from 0 up to the Ledermann bound, the largest K whose
        degrees of freedom ((d - K)^2 - (d + K)) / 2 are non-negative
        (:func:`~latentlab.models.factor_analysis.ledermann_bound`: 8 for
        d = 13, 1 for d = 4); beyond it the factors are not identified, and a larger
        K is refused.  ``None`` takes the bound.
        ``K = 0`` is the diagonal Gaussian (independent features), the baseline row
        of a comparison.  (scikit-learn accepts K up to n_features.)
    {rotation_parameters}
    method : {"em", "map", "svi"}, default="em"
        As for :class:`latentlab.PPCA` (``"map"`` with ``prior=False`` is ML by gradient).
    tol : float, default=1e-10
        The fit stops when an iteration raises the log-likelihood by less than
        ``tol`` per sample (after EM's first cycles, with the projected gradient at
        most ``sqrt(tol)`` per sample too: see PPCA's ``tol``).  FA's likelihood is
        flat along weakly determined directions, where a small change says little
        about the distance to the maximum, so the default is tighter than PPCA's.
    max_iter, n_init, prior, svi_steps, learning_rate, random_state, dtype
        As for :class:`latentlab.PPCA`.
    {streaming_em_parameters}
    noise_variance_init : array of shape (n_features,) or None, default=None
        The noise variances psi that EM starts from (with the loadings of the PCA
        solution), as scikit-learn's parameter; None: each feature's variance left
        unexplained by those loadings.  Only the start: the fit is the same optimum
        wherever EM converges to it.
    copy : bool, default=True
        Accepted for scikit-learn compatibility; latentlab never writes into X, so
        ``copy=False`` changes nothing.
    svd_method : {"randomized", "lapack"}, default="randomized"
        scikit-learn's choice of SVD for the inner step of each of its iterations, an
        SVD of the rescaled n x d data.  latentlab's EM never decomposes the data: each
        iteration works on the d x d covariance, and the only decomposition of a fit
        is the eigendecomposition of that covariance for the PCA start, which is
        exact and cheaper (O(d^3)) than one randomized sketch of the data would be.
        Both values therefore give the same fit; the setting is checked and kept so
        that code and grids written for scikit-learn run unchanged.
    iterated_power : int, default=3
        Power iterations of scikit-learn's randomized SVD; checked (an integer >= 0)
        and, as ``svd_method``, without effect on latentlab's exact EM.

    Attributes
    ----------
    components_ : ndarray (n_components, n_features)
        Loadings ``W^T``.  Unrotated, they are put in a canonical form in standardised
        units (columns orthogonal there, by decreasing norm, largest entry positive);
        with ``rotation`` set, the rotation acts on the loadings in the data's units,
        as in scikit-learn.
    {rotation_attributes}
    noise_variance_ : ndarray (n_features,)
        Feature-specific variances psi.  A value at its floor (1e-6 of the feature's
        variance) is a Heywood case and triggers a warning.
    mean_, log_likelihoods_, n_iter_, converged_, params_
        As for :class:`latentlab.PPCA`; ``params_`` has ``W``, ``mu``, ``psi``.
    loglike_ : list of float
        ``log_likelihoods_`` under scikit-learn's name.
    {streaming_em_attributes}

    Examples
    --------
    >>> import latentlab
    >>> from sklearn.datasets import load_wine
    >>> from sklearn.preprocessing import scale
    >>> X = scale(load_wine().data)
    >>> fa = latentlab.FactorAnalysis(3, random_state=0).fit(X)
    >>> fa.converged_, round(fa.score(X), 4)  # scikit-learn's FactorAnalysis: -15.0802
    (True, -15.0802)
    """

    _module = fa
    _posterior_problem = _posterior_hooks.fa_problem  # for sample_posterior
    _reported_estimates = _standard_errors.principal_axes_estimates  # for standard_errors

    def __init__(
        self,
        n_components=None,
        *,
        rotation=None,
        rotation_kwargs=None,
        n_rotation_starts=1,
        method="em",
        tol=1e-10,
        max_iter=5000,
        n_init=1,
        prior=False,
        svi_steps=3000,
        learning_rate=0.05,
        random_state=None,
        dtype="float64",
        verbose=0,
        learning_decay=0.7,
        noise_variance_init=None,
        copy=True,
        svd_method="randomized",
        iterated_power=3,
        chunk_size=None,
        devices=None,
    ):
        self.n_components = n_components
        self.rotation = rotation
        self.rotation_kwargs = rotation_kwargs
        self.n_rotation_starts = n_rotation_starts
        self.noise_variance_init = noise_variance_init
        self.copy = copy
        self.svd_method = svd_method
        self.iterated_power = iterated_power
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

    _min_components = 0
    _settings = {
        **GaussianLatentEstimator._settings,
        **STREAMING_SETTINGS,
        **ROTATION_SETTINGS,
        "svd_method": Options(*SVD_METHODS),
        "iterated_power": Integer(0, None),
        "copy": Boolean(),
        "noise_variance_init": ArrayLike() | None,  # shape (n_features,): checked with the data
        **scale_settings(),
    }

    def _max_components(self, n_samples, n_features):
        return fa.ledermann_bound(n_features), (
            "the Ledermann bound: beyond it the degrees of freedom ((d - K)^2 - (d + K)) / 2 "
            "are negative and the factors not identified"
        )

    def fit(self, X, y=None):
        """Fit the model to X (n_samples, n_features); NaN entries are missing values."""
        return self._fit_latent(X)

    def partial_fit(self, X, y=None):
        return self._stepwise_fit(X)

    partial_fit.__doc__ = GaussianLatentEstimator._stepwise_fit.__doc__

    # -- per-feature standardised fitting ---------------------------------------------
    #
    # FA is equivariant under rescaling any feature (x -> S x: W -> S W, psi -> S^2 psi,
    # log-likelihood - n sum log S), so it is fitted on features scaled to unit variance
    # and mapped back.  Fitting in the data's own units instead lets features whose
    # scales differ by many orders of magnitude meet in one floating-point sum (the
    # posterior precision I + W^T Psi^{-1} W), which breaks EM's monotonicity or gives
    # non-finite values, and makes the fit (start, step sizes, canonical rotation)
    # depend on the units.

    def _feature_units(self, column_variance):
        """Each feature's standard deviation: the unit FA is fitted in."""
        # column_variance is positive: the base class gives constant features the
        # typical variance
        return np.sqrt(np.asarray(column_variance, np.float64))

    def _fit_em(self, data, n, K, column_variance, hyper):
        scale = self._feature_units(column_variance)
        s = scale.astype(data.X.dtype)  # on the host: NumPy in, NumPy out
        unit_hyper = fa.Hyper(variance_floor=hyper.variance_floor / s**2)
        if self.noise_variance_init is not None:  # the EM start's psi, in unit variance
            psi = self._check_noise_variance_init(data.X.shape[-1])
            unit_hyper = unit_hyper._replace(psi_init=(psi / scale**2).astype(data.X.dtype))
        params, trace, n_iter, converged = super()._fit_em(
            fa.scale_data(data, s), n, K, np.ones_like(scale), unit_hyper
        )
        counts = np.asarray(fa.observed_counts(data), np.float64)
        return fa.rescale(params, scale), trace - fa.log_jacobian(counts, scale), n_iter, converged

    def _check_noise_variance_init(self, n_features):
        psi = np.asarray(self.noise_variance_init, dtype=np.float64)
        if psi.shape != (n_features,):
            raise ValueError(
                f"noise_variance_init must have shape ({n_features},), got {psi.shape}"
            )
        if not np.all(np.isfinite(psi) & (psi > 0)):
            raise ValueError("noise_variance_init must be positive and finite")
        return psi

    def summary(self, X=None) -> str:
        """The factor-analysis report as text: the standardised pattern loadings with
        communalities, uniquenesses and complexity, the variance accounted for, the
        factor correlations (oblique rotations) and, given the data ``X`` the model
        was fitted on (NaN allowed), the goodness of fit (chi-square, RMSEA, CFI, TLI,
        SRMR).  Each table is also a DataFrame: :mod:`latentlab.psychometrics`."""
        from latentlab.psychometrics.report import summary

        return summary(self, X)

    @property
    def loglike_(self):
        """scikit-learn's name for the log-likelihood after each iteration
        (:attr:`log_likelihoods_`; here one entry per accelerated EM cycle)."""
        check_is_fitted(self)
        return list(self.log_likelihoods_)

    def _fit_svi(self, Xc, mask, K, column_variance):
        scale = self._feature_units(column_variance)
        params, trace, n_iter, converged = super()._fit_svi(
            Xc / scale, mask, K, np.ones_like(scale)
        )
        counts = np.full(Xc.shape[1], Xc.shape[0]) if mask is None else mask.sum(axis=0)
        s = jnp.asarray(scale, params.W.dtype)
        return fa.rescale(params, s), trace - fa.log_jacobian(counts, scale), n_iter, converged

    def _finish(self, params, hyper, units):
        # The canonical form (principal axes, order, signs) is chosen in standardised
        # units, so it does not depend on the features' units; a rotation, as in
        # scikit-learn, acts on the loadings in the data's units.
        s = np.asarray(units, np.float64)[:, None]
        W = orient_columns(to_numpy(canonical_loadings(params.W / s))) * s
        out = {name: to_numpy(value) for name, value in params._asdict().items()}
        out["W"] = self._rotation_frame(W)
        return out

    def _warn_after_fit(self, hyper):
        at_floor = self.params_["psi"] <= 1.000001 * np.asarray(hyper.variance_floor)
        if at_floor.any():
            features = ", ".join(map(str, np.flatnonzero(at_floor)[:10]))
            warnings.warn(
                f"Heywood case: the noise variance of feature(s) {features} reached its "
                "floor; those features are (almost) fully explained by the factors. "
                "Consider fewer factors.",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        super()._warn_after_fit(hyper)

    # -- fitted quantities --------------------------------------------------------------

    def _noise_variance_vector(self):
        return self.params_["psi"]

    def _n_parameters(self) -> int:
        return fa.n_parameters(self.n_features_in_, self.n_components_)

    @property
    def model_(self):
        """The NumPyro declaration with this fit's static settings bound."""
        check_is_fitted(self)
        return partial(fa.fa_model, n_components=self.n_components_)
