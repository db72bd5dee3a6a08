"""``latentlab.BayesianPCA``: PPCA with an ARD prior that switches off unneeded components."""

from __future__ import annotations

import warnings
from functools import partial

import jax
import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab._settings import Real, scale_settings
from latentlab._shapes import gaussian_latent_columns
from latentlab.estimators import _posterior_hooks, _standard_errors
from latentlab.estimators.base import LATENTLAB_FILES, to_numpy
from latentlab.estimators.gaussian_latent import (
    VARIANCE_FLOOR,
    GaussianLatentEstimator,
)
from latentlab.models import bpca
from latentlab.models.gaussian_latent import em_from_starts, orient_columns, with_active_columns

__all__ = ["BayesianPCA"]

# Steps of a fit's first run (every column) before the columns below the threshold
# are pruned; the run after it, on the kept columns only, goes on to convergence, and
# prunes again if more columns fall below.  Measured with the quasi-Newton phase's
# rotation profiled out (models/bpca.py): on wine, diabetes and breast_cancer
# standardised with 0, 15 and 30% of the entries missing at random, pruning after 100
# steps keeps the columns the fits pruning after 300 (without that profiling) kept,
# with a log joint as high or higher; on breast_cancer with 30% MAR holes (29
# columns) pruning after 30, 100 or 300 steps or at the first run's convergence (789
# steps) keeps the same 20, and the whole fit takes 6 s warm against 12 s with 300.
PRUNE_AFTER = 100


class BayesianPCA(GaussianLatentEstimator):
    """Bayesian PCA (Bishop 1999): MAP under an ARD prior on the columns of W.

    Each column w_k has prior N(0, alpha_k^{-1} I) and alpha_k ~ Gamma(a, b).  Start
    with more components than needed: EM drives the precision alpha_k of unsupported
    columns up and their loadings to zero.  A component whose precision is set by the
    hyperprior rather than by the data (see ``prune_threshold``) is *pruned*: fixed
    at exactly zero and dropped from the fitted model.  As scikit-learn's PCA reports
    the components it keeps, ``n_components_``, ``components_``, ``transform``,
    ``inverse_transform``, ``get_feature_names_out``, ``params_`` and ``model_``
    describe the kept components only (as do the parameter count for BIC/AIC and
    ``sample_posterior``); ``n_components_max_`` and ``components_all_`` keep the
    full set the fit started from.

    Parameters
    ----------
    n_components : int or None, default=None
        Maximum number of components K (``1 <= K <= min(n_samples, n_features) - 1``);
        ``None`` takes the largest allowed value.  The fit starts from K
        (``n_components_max_``) and keeps ``n_components_`` of them.
    alpha_a : float, default=1.0
        Shape a of the Gamma hyperprior on each alpha_k.
    alpha_b : float, default=1e-3
        Rate b of the hyperprior, in units of the mean feature variance (so the fit
        does not depend on the data's scale).  Must be > 0: with b = 0 the joint
        density is unbounded as a column shrinks to zero.
    prune_threshold : float, default=10.0
        A component is switched off when ``||w_k||^2 < prune_threshold * 2b`` (b in
        the data's units, ``alpha_b`` times the mean feature variance), equivalently
        when alpha_k is within a factor ``1 + prune_threshold`` of its data-free value
        (d + 2a - 2) / 2b, the value it takes at w_k = 0: the hyperprior, not the
        data, then sets the column's precision.  At the defaults this is 2% of the
        mean feature variance.  The threshold is not tied to the noise variance:
        supported components can carry less variance than the noise (their ARD fixed
        point exists down to about sigma2 * sqrt(d / n)).  The first run (every
        column) prunes when it converges or after ``PRUNE_AFTER`` (100) steps; EM
        then continues on the kept columns, pruning again until a run converges
        with every kept column above the threshold.
    method : {"em", "map", "svi"}, default="em"
        ``"em"`` and ``"map"`` (AutoDelta on the same declaration) both find the MAP;
        ``"svi"`` fits a mean-field Gaussian posterior.
    tol, max_iter, n_init, svi_steps, learning_rate, random_state, dtype, verbose
        As for :class:`latentlab.PPCA`.
    chunk_size, devices
        As for :class:`latentlab.PPCA`.

    Attributes
    ----------
    n_components_ : int
        Number of components kept: those the prior did not switch off (wine,
        standardised, 13 features: 7 of the 12 the default starts from).
    n_components_max_ : int
        Number of components the fit started from (``n_components``, or its
        default): ``n_components_`` kept, the rest pruned.
    components_ : ndarray (n_components_, n_features)
        Loadings of the kept components, by decreasing norm.
    components_all_ : ndarray (n_components_max_, n_features)
        All the components the fit started from: ``components_``, then one row of
        zeros for each pruned component.
    alpha_ : ndarray (n_components_,)
        Fitted precisions of the kept columns of W (a pruned column's would be its
        data-free value (d + 2a - 2) / 2b).
    effective_rank_ : int
        The same as ``n_components_``; kept for code written when ``n_components_``
        counted the pruned components too.
    prune_level_ : float
        The squared column norm below which a component is pruned,
        ``prune_threshold * 2b``, in the data's units.
    log_likelihoods_ : ndarray
        For a MAP fit this is the log *joint* density (log-likelihood + log prior),
        which EM never decreases; ``score`` is the log-likelihood alone.  When
        components are pruned, the fit is the MAP of the model with the kept
        components: EM restarts from the pruned point, and ``log_likelihoods_`` /
        ``n_iter_`` describe the last run, whose last value is ``model_``'s log joint
        density at ``params_`` (the step from the first run's model can lower it);
        the first run's trace is ``log_likelihoods_before_pruning_``.  With
        ``method="map"`` or ``"svi"`` there is one run, of the model with all
        ``n_components_max_`` components.
    mean_, noise_variance_, params_, model_, n_iter_, converged_
        As for :class:`latentlab.PPCA`; ``params_`` adds ``alpha``.

    Examples
    --------
    >>> import latentlab
    >>> from sklearn.datasets import load_wine
    >>> from sklearn.preprocessing import scale
    >>> X = scale(load_wine().data)
    >>> bpca = latentlab.BayesianPCA(random_state=0).fit(X)
    >>> bpca.n_components_max_, bpca.n_components_, bpca.transform(X).shape
    (12, 7, (178, 7))
    """

    _module = bpca
    _posterior_problem = _posterior_hooks.bpca_problem  # for sample_posterior
    _reported_estimates = _standard_errors.bpca_estimates  # for standard_errors
    _isotropic_noise = True  # params_["sigma2"] (noise_variance_, a float)
    _settings = {
        **GaussianLatentEstimator._settings,
        # b = 0 leaves the joint density unbounded as a column shrinks to zero
        "alpha_a": Real(0, None, closed="neither"),
        "alpha_b": Real(0, None, closed="neither"),
        "prune_threshold": Real(0, None),
        **scale_settings(),
    }

    def __init__(
        self,
        n_components=None,
        *,
        alpha_a=1.0,
        alpha_b=1e-3,
        prune_threshold=10.0,
        method="em",
        tol=1e-8,
        max_iter=5000,
        n_init=1,
        svi_steps=3000,
        learning_rate=0.05,
        random_state=None,
        dtype="float64",
        verbose=0,
        chunk_size=None,
        devices=None,
    ):
        self.n_components = n_components
        self.alpha_a = alpha_a
        self.alpha_b = alpha_b
        self.prune_threshold = prune_threshold
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.svi_steps = svi_steps
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.dtype = dtype
        self.verbose = verbose
        self.chunk_size = chunk_size
        self.devices = devices

    prior = True  # the ARD prior is the model; MAP/SVI always use it

    def _max_components(self, n_samples, n_features):
        return min(n_samples, n_features) - 1, "min(n_samples, n_features) - 1"

    def fit(self, X, y=None):
        """Fit the model to X (n_samples, n_features); NaN entries are missing values."""
        self.log_likelihoods_before_pruning_ = np.zeros(0)
        return self._fit_latent(X)

    def _hyper(self, column_variance, dtype):
        mean_variance = float(np.mean(column_variance))
        floor = VARIANCE_FLOOR * mean_variance
        return bpca.Hyper(
            variance_floor=np.asarray(floor, dtype),
            a=np.asarray(self.alpha_a, dtype),
            b=np.asarray(self.alpha_b * mean_variance, dtype),
        )

    def _declaration_settings(self, scale):
        # data divided by scale = sqrt(mean variance): the rate b in those units
        return {"alpha_a": float(self.alpha_a), "alpha_b": float(self.alpha_b)}

    def _parameter_log_jacobian(self, scale, n_features, n_components):
        # log joint of (W/scale, alpha*scale^2) vs (W, alpha): + dK log s - 2K log s
        return (n_features - 2) * n_components * np.log(scale)

    def _finish(self, params, hyper, units):
        # the data's mean feature variance, the unit of the hyperprior rate b
        self.reference_variance_ = float(hyper.b) / self.alpha_b
        # No rotation to principal axes here: unlike the likelihood, the ARD prior is
        # not rotation invariant (and its MAP already has orthogonal columns).  Order
        # the columns by norm, fix their signs, and carry alpha along.
        out = {name: to_numpy(value) for name, value in params._asdict().items()}
        W, alpha = orient_columns(out["W"], out["alpha"])
        kept = np.asarray(bpca.active_columns(W, self._b(), self.prune_threshold))
        # The fitted model is the one with the kept columns: EM held the pruned ones
        # at zero, where they add nothing to the likelihood.  n_components_ (set to
        # the started K by the caller) becomes the kept count.
        out["W"], out["alpha"] = to_numpy(W[:, kept]), to_numpy(alpha[kept])  # owned copies
        self.n_components_max_ = W.shape[1]
        self.n_components_ = self.effective_rank_ = int(kept.sum())
        return out

    def _b(self):
        """The hyperprior rate b in the data's units."""
        return self.alpha_b * self.reference_variance_

    def _fit_em(self, data, n, K, column_variance, hyper):
        # The first run, with every column, stops after at most PRUNE_AFTER steps to
        # prune: the columns the data do not support then shrink for thousands of steps
        # through the prior's flat regime, at the cost of the full width, while the
        # kept set is settled long before (see PRUNE_AFTER).
        first_max_iter = min(self.max_iter, PRUNE_AFTER)
        params, trace, n_iter, converged = super()._fit_em(
            data, n, K, column_variance, hyper, max_iter=first_max_iter
        )
        self.log_likelihoods_before_pruning_ = to_numpy(trace)
        # the fit's W is padded to a bucket of columns; the first K are the model's
        model_columns = np.arange(params.W.shape[1]) < K
        cut_short = not converged and n_iter < self.max_iter
        # A first run cut short leaves most of the work to the runs after pruning:
        # they take the quasi-Newton phase, on a program no wider than the kept columns
        # need.  After a first run that converged they are a few EM cycles, which
        # those programs' compiles would cost more than they save (wine: 2 s against
        # 10 s for a first call).
        long_fit = cut_short
        while True:
            kept = model_columns & np.asarray(
                bpca.active_columns(params.W, hyper.b, self.prune_threshold)
            )
            if kept.sum() == model_columns.sum() and not cut_short:
                break
            params, trace, n_iter, converged, hyper = self._fit_kept(
                data, n, params, kept, hyper, long_fit
            )
            model_columns = np.arange(params.W.shape[1]) < kept.sum()
            cut_short = False
        return self._with_pruned_columns(params, model_columns, K, hyper), trace, n_iter, converged

    def _fit_kept(self, data, n, params, kept, hyper, long_fit):
        """EM on the model with the ``kept`` columns only, from their values in
        ``params``, kept columns first and the rest zero padding.  ``long_fit``: with
        the quasi-Newton phase, on a program as wide as the kept columns need (the
        switched-off ones dropped, not carried as zeros); else EM alone at the same
        width.  Returns the run and its ``hyper``."""
        d, width = params.W.shape
        n_kept = int(kept.sum())
        if long_fit:
            n_missing = data.X.shape[0] * data.X.shape[1]
            if data.rows is not None:  # rows with missing entries outside the program
                n_missing += int(data.rows.n_rows)
            width = gaussian_latent_columns(n_kept, d, n_missing)
        order = np.argsort(~kept, kind="stable")[:width]  # kept columns first
        columns = np.arange(width) < n_kept
        W = np.where(columns, np.asarray(params.W)[:, order], 0.0).astype(params.W.dtype)
        alpha = np.where(columns, np.asarray(params.alpha)[order], 1.0).astype(params.W.dtype)
        start = jax.tree.map(lambda leaf: np.asarray(leaf)[None], params._replace(W=W, alpha=alpha))
        # The switched-off columns leave the model (the one _finish reports); padding
        # has no prior term, so the run's trace is that model's log joint.  It may
        # start below the previous run's end.
        hyper = with_active_columns(hyper, columns.astype(params.W.dtype))
        run = em_from_starts(
            bpca,
            start,
            data,
            n,
            hyper,
            tol=self.tol,
            max_iter=self.max_iter,
            verbose=self.verbose,
            coordinates=bpca.coordinates if long_fit else None,
        )
        return (*run, hyper)

    def _with_pruned_columns(self, params, model_columns, K, hyper):
        """The fit as K columns: the model's, then the pruned ones at zero with their
        data-free precision (d + 2a - 2) / 2b, a fixed point of the updates."""
        d = params.W.shape[0]
        n_model = int(model_columns.sum())
        if params.W.shape[1] >= K and n_model == K:
            return params
        dtype = params.W.dtype
        alpha_free = (d + 2 * hyper.a - 2) / (2 * hyper.b)
        W = np.zeros((d, K), dtype)
        W[:, :n_model] = np.asarray(params.W)[:, :n_model]
        alpha = np.full(K, alpha_free, dtype)
        alpha[:n_model] = np.asarray(params.alpha)[:n_model]
        return params._replace(W=W, alpha=alpha)

    def _warn_after_fit(self, hyper):
        if self.n_components_ == self.n_components_max_ > 1:
            warnings.warn(
                f"BayesianPCA kept all {self.n_components_} components; start with more "
                "to let the prior choose the rank.",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        super()._warn_after_fit(hyper)

    # -- fitted quantities --------------------------------------------------------------

    def _n_parameters(self) -> int:
        return bpca.n_parameters(self.n_features_in_, self.effective_rank_)

    @property
    def prune_level_(self):
        check_is_fitted(self)
        return float(self.prune_threshold * 2.0 * self._b())

    @property
    def alpha_(self):
        check_is_fitted(self)
        return self.params_["alpha"].copy()

    @property
    def components_all_(self):
        """Loadings of every component the fit started from, shape
        (n_components_max_, n_features): ``components_``, then zero rows for the
        pruned components."""
        check_is_fitted(self)
        pruned = self.n_components_max_ - self.n_components_
        return np.pad(self.components_, ((0, pruned), (0, 0)))

    @property
    def model_(self):
        """The NumPyro declaration with this fit's static settings bound.

        Its hyperprior rate is in the data's units (``alpha_b`` times the training
        data's mean feature variance).
        """
        check_is_fitted(self)
        return partial(
            bpca.bpca_model,
            n_components=self.n_components_,
            alpha_a=float(self.alpha_a),
            alpha_b=float(self.alpha_b * self.reference_variance_),
        )
