"""What every latentlab estimator shares: precision handling, likelihood scores, saving."""

from __future__ import annotations

import functools
import os
import warnings
from contextlib import contextmanager

import jax
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._cache import ensure_compilation_cache
from latentlab._settings import validate_settings
from latentlab._validation import check_positive_int

__all__ = [
    "LatentEstimator",
    "to_numpy",
    "jax_key",
    "check_finite_fit",
    "warn_not_converged",
    "LATENTLAB_FILES",
]


def to_numpy(a) -> np.ndarray:
    """Every public return is a float64 NumPy array, never a JAX array: a writable
    array that owns its data (``np.asarray`` of a JAX array is a read-only view of
    the device buffer, and a slice of a padded result is a view of the padding)."""
    return np.array(a, dtype=np.float64, copy=True)


def jax_key(random_state) -> jax.Array:
    """A JAX key drawn from a scikit-learn style ``random_state``."""
    seed = check_random_state(random_state).randint(0, 2**31 - 1)
    return jax.random.PRNGKey(seed)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# ``warnings.warn(..., skip_file_prefixes=LATENTLAB_FILES)``: the warning points at the
# first line outside latentlab (the user's call), however deep the call inside it --
# a fixed stacklevel would point at the validating wrapper of the fit methods.
LATENTLAB_FILES = (_PACKAGE_DIR,)
# Methods that fit: each validates the settings table on entry (see LatentEstimator).
FIT_METHODS = ("fit", "partial_fit", "fit_transform", "fit_predict", "fit_covariance")


def _validating(method):
    """``method`` with :func:`~latentlab._settings.validate_settings` run first, and
    all or nothing: a call that raises (bad data found halfway, an interrupt) leaves
    the estimator's attributes as they were.  Without that, a failed first fit that
    had set ``n_features_in_`` looked fitted to ``check_is_fitted`` (which accepts
    any attribute ending in ``_``), and ``score`` then failed with AttributeError
    instead of NotFittedError; a failed ``partial_fit`` could leave half a stream."""

    @functools.wraps(method)
    def fit_method(self, *args, **kwargs):
        validate_settings(self)
        before = dict(vars(self))  # shallow: fits rebind attributes, never mutate them
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            vars(self).clear()
            vars(self).update(before)
            raise

    fit_method._validates_settings = True
    return fit_method


def check_finite_fit(estimator, arrays: dict, advice: str, *, objective=None) -> None:
    """Refuse a fit whose parameters (or final objective) are not finite: one message
    for every estimator, naming the parameters and saying what to try (``advice``)."""
    bad = [name for name, value in arrays.items() if not np.all(np.isfinite(value))]
    if objective is not None and not np.isfinite(objective):
        bad.append("the objective")
    if bad:
        raise ValueError(
            f"{type(estimator).__name__} fit produced non-finite values for "
            f"{', '.join(bad)}; {advice}"
        )


def warn_not_converged(
    estimator,
    solver: str = "EM",
    *,
    steps: str = "iterations",
    tol: str = "tol",
    lead: str | None = None,
) -> None:
    """The one ``ConvergenceWarning`` wording: "<Name> <solver> did not converge within
    max_iter=<m> <steps> (tol=<t>); increase max_iter or tol" (``tol`` names the
    estimator's tolerance setting), after ``lead`` where given (the words of
    scikit-learn's own warning, for the classes that stand in for its).

    The warning points at the user's line that called into latentlab, however deep
    the call (the fit methods' validating wrapper included).
    """
    warnings.warn(
        (f"{lead}: " if lead else "")
        + f"{type(estimator).__name__} {solver} did not converge within "
        f"max_iter={estimator.max_iter} {steps} ({tol}={getattr(estimator, tol)}); "
        f"increase max_iter or {tol}.",
        ConvergenceWarning,
        skip_file_prefixes=LATENTLAB_FILES,
    )


def _is_generative(estimator) -> bool:
    return type(estimator)._generative


class LatentEstimator(BaseEstimator):
    """Base class: runs JAX in the estimator's precision without touching global config.

    A subclass declares its settings in ``_settings`` (name -> constraint, see
    :mod:`latentlab._settings`); every fitting method (:data:`FIT_METHODS`) checks
    them on entry, so a bad setting is refused before any data are read or any
    program compiled.

    A likelihood model sets ``_generative = True`` and defines ``score_samples``
    and ``_n_parameters``; it then has :meth:`score`, :attr:`n_parameters_`,
    :meth:`bic`, :meth:`aic` and :meth:`sample_posterior` (which reads the
    estimator's ``_posterior_problem(X, y, prior)``, see
    :mod:`latentlab.estimators._posterior_hooks`; sampling, alignment and the
    DataTree layout are shared in :mod:`latentlab.estimators._posterior_sampling`).
    Other estimators do not have these methods at all (``hasattr`` is False).
    """

    _settings: dict = {}
    _generative: bool = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Wrapped where the class has the method, inherited or its own; a method
        # wrapped already (a parent's) is left alone.
        for name in FIT_METHODS:
            method = getattr(cls, name, None)
            if method is not None and not getattr(method, "_validates_settings", False):
                setattr(cls, name, _validating(method))

    def _end_fit(self, params: dict, trace, n_iter, converged, *, advice: str, objective=None):
        """The end of an iterative fit: refuse non-finite parameters
        (:func:`check_finite_fit`), store ``params_``, ``log_likelihoods_``,
        ``n_iter_`` and ``converged_``, and end any ``partial_fit`` stream.  The
        caller warns (:func:`warn_not_converged`) once its other attributes are set."""
        check_finite_fit(self, params, advice, objective=objective)
        self.params_ = params
        self.log_likelihoods_ = np.array(trace, dtype=np.float64)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        for stream_state in ("online_state_", "n_samples_seen_"):  # a fit ends a stream
            self.__dict__.pop(stream_state, None)

    def _end_chunk(self, first: bool, n_rows: int, loglik: float):
        """The end of one ``partial_fit`` step: count the chunk's ``n_rows`` rows in
        ``n_samples_seen_`` and the step in ``n_iter_``, and append ``loglik`` (the
        chunk's mean log-likelihood per row under the parameters before its update:
        the stream's own held-out trace) to ``log_likelihoods_``.  Online EM has no
        convergence test, so ``converged_`` is False."""
        self.n_samples_seen_ = (0 if first else self.n_samples_seen_) + int(n_rows)
        self.n_iter_ = (0 if first else self.n_iter_) + 1
        previous = np.zeros(0) if first else self.log_likelihoods_
        self.log_likelihoods_ = np.append(previous, loglik)
        self.converged_ = False

    @contextmanager
    def _precision(self):
        """Context in which JAX computes in ``self.dtype`` (float64 unless asked otherwise).

        Matrix products run at full precision: on GPUs JAX's default for float32 is
        TF32/bf16 passes, which costs ~3 digits (seen on an H200: the float32 PPCA
        log-likelihood off by 3e-3 relative).
        """
        dtype = getattr(self, "dtype", "float64")
        if dtype not in ("float64", "float32"):
            raise ValueError(f"Unknown dtype={dtype!r}; expected 'float64' or 'float32'")
        # Every estimator computes in here, so this is before latentlab's first compile.
        ensure_compilation_cache()
        with jax.enable_x64(dtype == "float64"), jax.default_matmul_precision("highest"):
            yield

    def _draw_from_declaration(self, n_samples, random_state, params=None):
        """Run ``model_`` forward at ``params`` (default ``params_``) with its explicit
        latent sampled.

        Returns the trace (site name -> site); call inside ``self._precision()``.
        """
        import jax.numpy as jnp
        from numpyro import handlers

        n_samples = check_positive_int("n_samples", n_samples)
        params = self.params_ if params is None else params
        params = {k: jnp.asarray(v) for k, v in params.items()}
        model = handlers.seed(handlers.condition(self.model_, params), jax_key(random_state))
        return handlers.trace(model).get_trace(
            n_samples=int(n_samples), n_features=self.n_features_in_, explicit_latent=True
        )

    def _posterior_problem(self, X, y, prior):
        from latentlab.estimators._posterior_hooks import default_problem

        return default_problem(self, X, y, prior)

    @available_if(_is_generative)
    def sample_posterior(
        self,
        X,
        y=None,
        *,
        method: str = "nuts",
        num_samples: int = 1000,
        num_warmup: int = 500,
        num_chains: int | None = None,
        random_state=None,
        align: bool = True,
        prior: bool | None = None,
        svi_steps: int | None = None,
        nuts_options: dict | None = None,
        predictive: bool = True,
    ):
        """Draw from the posterior of the parameters, on the model's own declaration.

        The target is ``model_``'s log density (the observed site is the exact marginal
        over the local latent, so only the global parameters are sampled) with the
        priors as the estimator was fitted: for maximum-likelihood fits (``method="em"``,
        ``"closed_form"``, or ``"map"`` without ``prior``) the declaration's priors are
        masked off, so the posterior is under **flat (improper) priors**, proportional
        to the likelihood; ``prior=True`` switches the declared priors on.  Priors act,
        as in the estimators' own MAP/SVI fits, on the data centred at its column means
        and divided by one global scale (sqrt of the mean feature variance); mixtures
        are sampled in data units.  Draws are returned in data units.

        Parameters
        ----------
        X : array of shape (n_samples, n_features)
            The data the posterior is conditioned on (normally the training data).
            NaN marks missing entries for models that accept them.
        y : array of shape (n_samples,) or (n_samples, n_targets), optional
            Targets, for supervised PCA.
        method : {"nuts", "svi", "laplace"}, default="nuts"
            ``"nuts"``: NumPyro's NUTS started at the fitted point.  ``"svi"``: a
            mean-field Gaussian (AutoNormal) in unconstrained coordinates, fitted from
            the fitted point.  ``"laplace"``: a Gaussian at the fitted point with the
            inverse Hessian of the log density as covariance, in unconstrained
            coordinates (log for positive parameters, stick-breaking for mixture
            weights, log-diagonal Cholesky factors) and, for loadings, the identified
            lower-trapezoidal form ``W = L R0`` (R0 the fitted point's rotation).
        num_samples : int, default=1000
            Draws per chain.
        num_warmup : int, default=500
            NUTS warm-up iterations per chain.
        num_chains : int or None, default=None
            Chains.  None: 4 for NUTS (each started at the fitted point; R-hat needs
            several), 1 for SVI and Laplace, whose draws are independent anyway.
            NUTS chains run one per device where there are enough devices,
            vectorized on one accelerator, one after another on a CPU
            (``nuts_options["chain_method"]`` overrides).
        random_state : int, RandomState or None
        align : bool, default=True
            Rotate loadings draws onto the point estimate (orthogonal Procrustes) or
            relabel mixture components / topics to match it (Hungarian matching): the
            likelihood cannot tell rotations or relabellings apart, so raw draws wander
            between them and do not summarise.  False keeps the raw draws.
        prior : bool or None, default=None
            None: as fitted.  True/False: the declared priors on/off.
        svi_steps : int, optional
            Optimisation steps for ``method="svi"`` (default: the estimator's
            ``svi_steps``, else 2000).
        nuts_options : dict, optional
            For ``method="nuts"``: any of ``target_accept_prob`` (default 0.8),
            ``max_tree_depth`` (10), ``dense_mass`` and ``chain_method`` ("auto";
            or NumPyro's "parallel", "vectorized", "sequential").  ``dense_mass``
            (default None) adapts a dense mass matrix when the sampled space has at
            most :data:`latentlab.inference.mcmc.DENSE_MASS_MAX_DIM` (100)
            unconstrained dimensions, a diagonal one above: loadings and noise are
            strongly correlated under flat priors, and a dense matrix then samples
            several times faster (iris PPCA(2), 13 dimensions: 18 s diagonal,
            6.8 s dense), while for large models it is costly to adapt and apply.
        predictive : bool, default=True
            Add ``posterior_predictive`` (one data set of X's shape replicated from
            the model at each draw) and, when the priors are on and proper,
            ``prior``/``prior_predictive``.  The replicates hold chains x draws x X's
            size numbers: False leaves them out for large data.

        Returns
        -------
        datatree : xarray.DataTree
            ``posterior``: one variable per parameter site, shape (chain, draw, ...),
            in data units, plus (for loadings models) the rotation-invariant
            ``explained_variance`` (eigenvalues of W W^T) and
            ``explained_variance_ratio`` per component.  ``log_likelihood``: one value
            per row and draw, dims (chain, draw, obs), named after the observed site
            (``"xy"``, the joint of x and y, for supervised PCA).  ``sample_stats``:
            NUTS's ``diverging``, ``acceptance_rate``, ``energy``, ``lp``... or, for
            SVI/Laplace, ``lp`` and ``log_q`` (see :func:`latentlab.posterior.loo`).
            The root ``attrs`` record the method, the prior, the alignment
            (``aligned="procrustes"``, ``"relabelled"`` or ``"none"``) and, for NUTS,
            ``max_rhat``, ``min_ess_bulk``, ``min_ess_tail``, ``num_divergences`` and
            ``num_max_treedepth`` (a warning is issued when either count is non-zero).
            With ``align=True`` an ``alignment`` group holds what undoes it per draw:
            ``rotation`` R (raw W = aligned W R^T) or ``permutation`` (raw component
            ``permutation[k]`` is aligned component k).  ``arviz.loo``, ``arviz.compare`` and
            ``arviz.summary`` accept the tree directly; :func:`latentlab.posterior.loo`
            adds the correction for SVI/Laplace draws and a Pareto-k warning.

            The data groups complete the tree for ArviZ's checks (``az.loo_pit``,
            ``az.plot_ppc_dist``, ``az.psense_summary``): ``observed_data`` (X in data
            units, NaN where missing; ``x`` and ``y`` for supervised PCA),
            ``constant_data`` (``x_missing``, the missing-entry mask, and the
            standardisation ``x_shift``/``scale`` the draws were sampled under),
            ``log_prior`` (each parameter site's log prior density per draw, in the
            sampled coordinates; zero under the flat prior of a maximum-likelihood
            fit), ``posterior_predictive`` and, under a proper prior, ``prior`` and
            ``prior_predictive`` (one chain of as many draws), with dims
            (chain, draw, obs, feature).  The root attrs name the library, model,
            settings and versions.

        Notes
        -----
        Supervised PCA samples the tempered declaration (its log density is EM's
        alpha-weighted objective, so for alpha != 1 this is a generalised posterior);
        its pointwise log-likelihood is the unweighted joint log p(x_i, y_i).  pLSA's
        theta has one row per training document, so X must be the training counts;
        its maximum-likelihood point often lies on the simplex boundary, where the
        Laplace approximation is poor.
        """
        from latentlab.estimators._posterior_sampling import sample_posterior

        return sample_posterior(
            self,
            X,
            y,
            method=method,
            num_samples=num_samples,
            num_warmup=num_warmup,
            num_chains=num_chains,
            random_state=random_state,
            align=align,
            prior=prior,
            svi_steps=svi_steps,
            nuts_options=nuts_options,
            predictive=predictive,
        )

    @available_if(_is_generative)
    def to_datatree(self, X, y=None, *, n_replicates: int = 100, random_state=None):
        """The fit as an ArviZ DataTree: the point estimate with the data sets it
        predicts, for posterior predictive checks of a point fit.

        The tree has the layout of :meth:`sample_posterior`'s, with the fitted
        parameters as ``posterior``, repeated once per replicate (a point mass, not a
        posterior: intervals from it are plug-in, without the parameters'
        uncertainty); ``posterior_predictive`` holds ``n_replicates`` data sets of X's
        shape drawn from the fitted model, ``log_likelihood`` each row's
        log-likelihood (its sum over rows is ``n * score(X)``), and ``observed_data``,
        ``constant_data`` and ``log_prior`` as there.

        Parameters
        ----------
        X : array of shape (n_samples, n_features)
            The data to check the fit against (normally the training data); NaN
            marks missing entries for models that accept them.
        y : array, optional
            Targets, for supervised PCA.
        n_replicates : int, default=100
            Data sets drawn from the fitted model.
        random_state : int, RandomState or None

        Returns
        -------
        datatree : xarray.DataTree

        Examples
        --------
        >>> import numpy as np, latentlab
        >>> X = np.random.default_rng(0).normal(size=(50, 4))
        >>> model = latentlab.PPCA(1).fit(X)
        >>> tree = model.to_datatree(X, n_replicates=20, random_state=0)
        >>> tree["posterior_predictive"]["x"].shape
        (1, 20, 50, 4)
        >>> bool(np.isclose(tree["log_likelihood"]["x"][0, 0].sum(), 50 * model.score(X)))
        True
        """
        from latentlab.estimators._posterior_sampling import point_datatree

        return point_datatree(self, X, y, n_replicates=n_replicates, random_state=random_state)

    @available_if(_is_generative)
    def covariance_of_estimates(
        self, X, y=None, *, vcov: str | None = None, n_bootstrap: int = 200, random_state=None
    ):
        """The estimates' covariance matrix from the information of the exact
        likelihood (missing entries marginalised), by the delta method.

        The information is the negative Hessian of the declaration's log-likelihood
        (for fits that maximise a log joint density, such as Bayesian PCA, of that:
        the Laplace approximation's covariance) at the fitted point, in identified,
        unconstrained coordinates; the estimates are the fit's reported parameters in
        data units and in the fit's own frame (loadings on their principal axes, as
        ``components_`` reports them), whose choice from the data is part of the
        delta method.  Parameters held at a bound (a Heywood uniqueness at its floor)
        are held fixed there and flagged (``at_boundary`` of :meth:`standard_errors`).

        Parameters
        ----------
        X : array of shape (n_samples, n_features)
            The data the model was fitted to (NaN marks missing entries where the model
            accepts them); refused if the fit is not a maximum of its likelihood.
        y : array, optional
            Targets, for supervised models.
        vcov : {"observed", "expected", "sandwich", "bootstrap"} or None, default=None
            None: ``"observed"``, except for supervised PCA with ``alpha != 1``, whose
            fit maximises an alpha-weighted objective (an M-estimator): there the
            inverse information is not the estimates' covariance, and None means
            ``"sandwich"`` (``"observed"`` is refused).
            ``"observed"``: the inverse observed information.  ``"expected"``: the
            inverse expected (Fisher) information, for PPCA and factor analysis: each
            row's observed block's expectation under the fitted model (with NaN
            entries, the rows' patterns taken as fixed: right under MCAR).
            ``"sandwich"``: ``H^-1 B H^-1`` with ``B`` the sum of the rows' score outer
            products (Huber 1967, White 1982), consistent where the model is
            misspecified.  These two for maximum-likelihood fits only.
            ``"bootstrap"``: the covariance of the estimates over ``n_bootstrap`` refits
            on rows drawn with replacement (Efron 1979), each refit's loadings or
            components matched and signed to the fit's; not for Bayesian PCA, whose
            refits may keep another rank.
        n_bootstrap : int, default=200
            Refits for ``vcov="bootstrap"``.
        random_state : int, RandomState instance or None, default=None
            Draws the bootstrap's rows.

        Returns
        -------
        pandas.DataFrame
            Square, indexed (both ways) by the estimates' labels ``name[i, j]`` in the
            order of :meth:`standard_errors`.
        """
        import pandas as pd

        from latentlab.estimators._standard_errors import covariance_of_estimates, labels_of

        result = covariance_of_estimates(
            self, X, y, vcov=vcov, n_bootstrap=n_bootstrap, random_state=random_state
        )
        labels = labels_of(result)
        return pd.DataFrame(result.covariance, index=labels, columns=labels)

    @available_if(_is_generative)
    def standard_errors(
        self, X, y=None, *, vcov: str | None = None, n_bootstrap: int = 200, random_state=None
    ):
        """Standard errors of the fitted parameters, with Wald tests.

        From :meth:`covariance_of_estimates` (see there for the arguments).  Returns
        a pandas table, one row per estimate (indexed by labels ``name[i, j]``):
        ``parameter``, ``index`` (the entry's coordinate labels),
        ``estimate``, ``std_error``, ``z`` and ``p_value`` (two-sided, of the
        hypothesis that the entry is 0; for a variance that hypothesis lies on the
        boundary and the test is conservative), ``at_boundary`` (held at a bound: no
        standard error).
        """
        from latentlab.estimators._standard_errors import covariance_of_estimates, estimates_table

        result = covariance_of_estimates(
            self, X, y, vcov=vcov, n_bootstrap=n_bootstrap, random_state=random_state
        )
        return estimates_table(result)

    @available_if(_is_generative)
    def confidence_intervals(
        self,
        X,
        y=None,
        *,
        level: float = 0.95,
        vcov: str | None = None,
        n_bootstrap: int = 200,
        random_state=None,
    ):
        """Wald confidence intervals ``estimate +- z_(1+level)/2 * std_error``: the
        table of :meth:`standard_errors` with columns ``lower`` and ``upper``.  Wald
        intervals of variances and weights are symmetric and can cross their bounds;
        they are first-order, as the standard errors are."""
        from latentlab.estimators._standard_errors import covariance_of_estimates, estimates_table

        if not (isinstance(level, (int, float, np.floating)) and 0.0 < float(level) < 1.0):
            raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
        result = covariance_of_estimates(
            self, X, y, vcov=vcov, n_bootstrap=n_bootstrap, random_state=random_state
        )
        return estimates_table(result, float(level))

    @available_if(_is_generative)
    def score(self, X, y=None) -> float:
        """Mean per-sample log-likelihood of X (higher is better).

        A Dask array is scored block by block and averaged by Dask's tree reduction."""
        from latentlab.inference.chunked import is_dask

        scores = self.score_samples(X)
        if is_dask(scores):
            return float(scores.mean(split_every=8).compute())
        return float(np.mean(scores))

    def _n_parameters(self) -> int:
        raise NotImplementedError

    @property
    def n_parameters_(self) -> int:
        """The fitted model's number of free parameters: the p of :meth:`bic` and
        :meth:`aic`."""
        if not self._generative:
            raise AttributeError(
                f"{type(self).__name__} has no n_parameters_: it is not a likelihood model"
            )
        check_is_fitted(self)
        return self._n_parameters()

    @available_if(_is_generative)
    def bic(self, X) -> float:
        """Bayesian information criterion, ``-2 log L + p log n`` (lower is better)."""
        check_is_fitted(self)
        n = np.shape(X)[0]  # a Dask array's length without computing it
        return float(-2.0 * self.score(X) * n + self._n_parameters() * np.log(n))

    @available_if(_is_generative)
    def aic(self, X) -> float:
        """Akaike information criterion, ``-2 log L + 2 p`` (lower is better)."""
        check_is_fitted(self)
        n = np.shape(X)[0]  # a Dask array's length without computing it
        return float(-2.0 * self.score(X) * n + 2 * self._n_parameters())

    def save(self, path) -> None:
        """Save the fitted model as arrays + JSON (no pickle); see :func:`latentlab.load`."""
        from latentlab.io import save

        save(self, path)
