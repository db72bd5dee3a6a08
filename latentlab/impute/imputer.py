"""The :class:`Imputer` transformer: fit, fill in, intervals and multiple imputations.

The model search lives in :mod:`latentlab.impute.search`, intervals and their
calibration in :mod:`latentlab.impute.calibration`, DataFrame handling in
:mod:`latentlab.impute.frames`; this module ties them to scikit-learn's protocol.
It runs past 400 lines because half of it is the user documentation of the class
and its methods (about 210 lines of docstrings, 220 of code).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._validation import check_level, check_positive_int
from latentlab.impute import calibration, frames, search
from latentlab.impute.search import MODELS


class Imputer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Fill in missing values (NaN) from a fitted latent-variable model.

    A scikit-learn transformer (use it first in a ``Pipeline``) over a latentlab model
    that fits the exact likelihood of the observed entries.  Each missing entry gets
    its conditional mean given the observed entries of its row; ``transform(X,
    return_std=True)`` adds conditional standard deviations, :meth:`impute_interval`
    central intervals (plug-in, or calibrated on held-out entries) and :meth:`sample`
    multiple imputations.  Columns are standardised inside (observed mean and
    standard deviation) and every result is returned in the original units.

    Parameters
    ----------
    model : {"auto", "ppca", "fa", "bpca", "gmm"} or estimator, default="auto"
        A family name, or an unfitted latentlab estimator such as
        ``latentlab.PPCA(n_components=3)`` (cloned, fitted as given).  ``"auto"``
        chooses family and K by held-out likelihood of masked entries (see Notes);
        a family name without ``n_components`` chooses K the same way.
    n_components : int or None, default=None
        Fix K (rank, or number of mixture components) instead of choosing it.  With
        ``model="auto"`` it is a rank: PPCA and factor analysis compete at it.
    n_imputations : int, default=5
        Default number of draws for :meth:`sample`.
    candidates : list or None, default=None
        For ``model="auto"``: the models to choose from, as ``(name, K)`` pairs or
        unfitted estimators.  None searches
        :func:`~latentlab.impute.default_candidates`.
    holdout : float, default=0.1
        Fraction of the observed entries masked to score candidates.
    n_repeats : int, default=3
        Number of independent masks; each candidate is fitted once per mask and
        scored on all of them.  One mask is 3x cheaper (compilation, the bulk of a
        first call, is shared) but its choice varies more from mask to mask.
    tol : float, default=1e-4
        EM stopping tolerance (change of the mean per-sample log-likelihood) for the
        models Imputer builds from names; estimators passed in keep their own.  The
        model search's fits, which only rank candidates, stop at ``max(tol, 1e-3)``.
        Imputations settle long before the likelihood does: on the benchmark data
        sets (20% hidden) going from 1e-4 to 1e-5 changes the RMSE of the imputed
        values by under 0.001 column sd but takes 2-5x more EM iterations.
    standardize : bool, default=True
        Fit on columns centred and scaled by their observed mean and standard
        deviation.  (PPCA's single noise variance is not scale-invariant.)
    random_state : int, RandomState or None, default=None
    verbose : int, default=0
        If > 0, show progress bars on stderr for the model search and bootstrap refits
        at once; at 0 they appear once a loop has run for two seconds, on a terminal
        or in a notebook (``latentlab.set_config(progress=False)``: never).

    Attributes
    ----------
    model_ : estimator
        The chosen model, fitted on all rows of the standardised training data.
    chosen_ : dict
        ``{"model": family name, "n_components": K}``.
    selection_ : pandas.DataFrame or None
        One row per candidate, best first: ``model``, ``n_components``,
        ``heldout_loglik`` (mean log-density of a masked entry given the rest of its
        row, nats), ``se_diff`` (standard error of its difference to the best, paired
        over rows, on the masks it was scored on), ``n_params``, ``masks`` (how many
        of the ``n_repeats`` masks it was scored on: fewer when it stopped early, see
        Notes), ``seconds``, ``note`` (why a candidate failed or stopped, or its
        warnings).  None when nothing was chosen.
    center_, scale_ : ndarray (n_features,)
        Standardisation used inside (zeros and ones when ``standardize=False``).
    n_features_in_, feature_names_in_
        As in scikit-learn.

    Notes
    -----
    *Model choice.*  A random ``holdout`` fraction of the observed entries is hidden
    (never a row's or a column's last one), each candidate is fitted on what remains,
    and it is scored by the exact conditional log-density of the hidden entries given
    the rest of their row, ``log p(x_all obs) - log p(x_remaining)`` summed over rows
    and over ``n_repeats`` such masks.  The best candidate is refitted on all the data.
    A candidate that trails the best so far by more than 4 standard errors (of the
    summed difference, paired over rows) after a mask is not fitted on the remaining
    masks: they would be expected to widen the gap.  ``selection_`` says so in its
    ``note`` and ``masks`` columns.

    *DataFrames.*  A DataFrame in gives DataFrames out, with the index, columns and
    dtypes kept.  Columns without missing entries are returned untouched; nullable
    integer (``Int64`` ...) and ``boolean`` columns are filled with the rounded
    conditional mean so they keep their dtype; float columns hold the unrounded
    mean (integer data read from CSV with gaps arrive as float and stay float).
    Standard deviations and interval bounds are float64.  Non-numeric columns and
    columns with no observed entry are refused (by name).  Rows with no observed
    entry are left out of the fit and imputed by the model's marginal.

    *Assumption.*  Missing at random: if entries are missing *because* of their
    value (e.g. large values unrecorded), imputations are biased toward the
    observed values and intervals under-cover.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)) @ rng.normal(size=(2, 5)) + 0.1 * rng.normal(size=(100, 5))
    >>> X[rng.random(X.shape) < 0.1] = np.nan
    >>> imp = latentlab.Imputer("ppca", n_components=2, random_state=0).fit(X)
    >>> filled, std = imp.transform(X, return_std=True)
    >>> bool(np.isnan(filled).any())
    False
    """

    def __init__(
        self,
        model="auto",
        *,
        n_components=None,
        n_imputations=5,
        candidates=None,
        holdout=0.1,
        n_repeats=3,
        tol=1e-4,
        standardize=True,
        random_state=None,
        verbose=0,
    ):
        self.model = model
        self.n_components = n_components
        self.n_imputations = n_imputations
        self.candidates = candidates
        self.holdout = holdout
        self.n_repeats = n_repeats
        self.tol = tol
        self.standardize = standardize
        self.random_state = random_state
        self.verbose = verbose

    # -- settings ----------------------------------------------------------------------

    def _model(self):
        """``model`` as its canonical family name ("auto", "ppca", ...) or the estimator."""
        return search.canonical_name(self.model) if isinstance(self.model, str) else self.model

    def _check_settings(self):
        if isinstance(self.model, str):
            if self._model() is None:
                raise ValueError(
                    f"Unknown model={self.model!r}; expected one of {MODELS} "
                    "(any case) or a latentlab class name such as 'FactorAnalysis'"
                )
            if self._model() == "gmm" and not search.gmm_supports_missing():
                raise ValueError(
                    "model='gmm' needs a GaussianMixture that fits missing values, which "
                    "this version of latentlab lacks; use 'ppca', 'fa', 'bpca' or 'auto'"
                )
        else:
            search.check_model_object(self.model)
        K = self.n_components
        if K is not None and (isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1):
            raise ValueError(f"n_components must be a positive integer or None, got {K!r}")
        check_positive_int("n_imputations", self.n_imputations)
        check_positive_int("n_repeats", self.n_repeats)
        if not (isinstance(self.tol, (int, float)) and self.tol >= 0):
            raise ValueError(f"tol must be a non-negative number, got {self.tol!r}")
        if not (isinstance(self.holdout, (int, float)) and 0 < self.holdout <= 0.5):
            raise ValueError(f"holdout must be a fraction in (0, 0.5], got {self.holdout!r}")
        if self.candidates is not None:
            if self._model() != "auto":
                raise ValueError("candidates are only used with model='auto'")
            if len(self.candidates) == 0:
                raise ValueError("candidates is empty: give at least one (name, K) or model")

    # -- fitting -----------------------------------------------------------------------

    def fit(self, X, y=None):
        """Standardise, choose the model if asked, and fit it to the observed entries.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
            Data with NaN for missing entries.
        y : ignored

        Returns
        -------
        self
        """
        self._check_settings()
        X, frame = frames.validate_input(self, X, reset=True)
        observed = ~np.isnan(X)
        empty = np.flatnonzero(~observed.any(axis=0))
        if empty.size:
            # plain ints and strs: a message must not print [np.int64(4)]
            names = [str(frame.columns[j]) if frame is not None else int(j) for j in empty]
            raise ValueError(
                f"column(s) {names} have no observed entry: nothing to impute them from; drop them"
            )
        X = X[observed.any(axis=1)]  # rows with nothing observed carry no information
        if X.shape[0] < 2:
            raise ValueError("Imputer needs at least 2 rows with an observed entry")
        n, d = X.shape
        self.center_, self.scale_ = frames.standardization(X, self.standardize)
        Xs = (X - self.center_) / self.scale_
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(2**31 - 1))

        specs = search.plan(self._model(), self.candidates, self.n_components, n, d)
        self._heldout = None  # (mask fits, masks) of the chosen model, see calibrated_level
        self._calibration_scores = None
        if specs is None:  # one model, nothing to choose
            family, K, est = search.fixed_model(self._model(), self.n_components, seed, self.tol)
            self.selection_ = None
        else:
            masks = [
                search.holdout_mask(~np.isnan(Xs), self.holdout, rng) for _ in range(self.n_repeats)
            ]
            if not all(hidden.any() for hidden in masks):
                raise ValueError(
                    "too few observed entries to hold some out for choosing a model; "
                    "give model and n_components"
                )
            rows = search.evaluate(specs, Xs, masks, seed, tol=self.tol, verbose=self.verbose)
            if self._model() == "auto" and self.candidates is None and self.n_components is None:
                second = search.default_candidates(
                    "auto", n, d, search.best_row(rows)["n_components"]
                )
                rows += search.evaluate(
                    second,
                    Xs,
                    masks,
                    seed,
                    tol=self.tol,
                    verbose=self.verbose,
                    best=search.best_row(rows),
                )
            self.selection_ = search.selection_table(rows)
            best = search.best_row(rows)
            family, K, est = best["model"], best["n_components"], best["estimator"]
            self._heldout = (best["fits"], masks)
        # (a fixed model is already a fresh clone: search.build_candidate)
        self.model_ = (est if specs is None else clone(est)).fit(Xs)
        self.chosen_ = {"model": family, "n_components": search.fitted_k(self.model_, K)}
        self._X_fit = Xs  # kept for bootstrap refits in ``sample``
        return self

    # -- imputing ----------------------------------------------------------------------

    def _prepare(self, X):
        check_is_fitted(self, "model_")
        X, frame = frames.validate_input(self, X, reset=False)
        return X, ~np.isnan(X), (X - self.center_) / self.scale_, frame

    def _rng(self, random_state):
        return check_random_state(self.random_state if random_state is None else random_state)

    def transform(self, X, return_std: bool = False):
        """Fill missing entries with their conditional mean given the observed ones.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
        return_std : bool, default=False
            Also return the conditional standard deviation of each entry (0 where
            observed), in the units of X.

        Returns
        -------
        filled : ndarray or DataFrame (n_samples, n_features)
            X with NaN replaced; observed entries are bit-for-bit those of X.
        std : ndarray or DataFrame (n_samples, n_features), only if ``return_std``
        """
        X, observed, Xs, frame = self._prepare(X)
        if observed.all():
            filled_s, std_s = Xs, np.zeros_like(Xs)
        else:
            filled_s, std_s = self.model_.impute(Xs, return_std=True)
        filled = np.where(observed, X, filled_s * self.scale_ + self.center_)
        std = np.where(observed, 0.0, std_s * self.scale_)
        if not (np.isfinite(filled).all() and np.isfinite(std).all()):
            # never hand back NaN as if it were an imputation
            raise ValueError(
                "the fitted model gave non-finite imputations (values too large or too "
                "small for float64 after scaling?); rescale X or use standardize=True"
            )
        filled = frames.output(self, filled, frame, observed, fill=True)
        std = frames.output(self, std, frame, observed, wrap=True)
        return (filled, std) if return_std else filled

    def impute_interval(
        self,
        X,
        level: float = 0.9,
        *,
        calibrate: bool = False,
        draw_parameters: bool = False,
        n_draws: int = 20,
        random_state=None,
    ):
        """Central ``level`` interval for each missing entry given its row's observed ones.

        Gaussian latent models give mean -/+ z * sd; mixtures give quantiles of the
        conditional mixture.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
        level : float, default=0.9
        calibrate : bool, default=False
            False: plug-in intervals, the fitted parameters taken as known; with many
            parameters for the rows at hand they under-cover (factor analysis with 18
            factors on 569 rows of 30 features: 0.875 for a nominal 0.90).  True:
            the same conditional distributions, at the nominal level
            :meth:`calibrated_level` finds from held-out entries, so the share of
            hidden values inside is ``level`` (conformal prediction, see Notes of
            :meth:`calibrated_level`).  Reuses the model search's fits; a fixed model
            is refitted ``n_repeats`` times once.
        draw_parameters : bool, default=False
            True: the quantiles of the predictive distribution averaged over
            ``n_draws`` models refitted on bootstrap resamples (as in :meth:`sample`),
            which adds the parameters' sampling variance at the cost of ``n_draws``
            fits (not the downward bias of ML noise variances: it helps little).
            Not together with ``calibrate``.
        n_draws : int, default=20
            Bootstrap refits for ``draw_parameters=True``.
        random_state : int, RandomState or None
            Seeds the resampling and calibration masks (default: ``self.random_state``).

        Returns
        -------
        lower, upper : ndarray or DataFrame (n_samples, n_features)
            Both equal X where observed.
        """
        level = check_level(level)
        if calibrate and draw_parameters:
            raise ValueError("calibrate and draw_parameters are alternatives; choose one")
        X, observed, Xs, frame = self._prepare(X)
        if draw_parameters:
            rng = self._rng(random_state)
            lower_s, upper_s = calibration.bootstrap_interval(
                self._bootstrap_model, Xs, level, n_draws, rng, self.verbose
            )
        elif calibrate:
            nominal = self.calibrated_level(level, random_state=random_state)
            conditional = self.model_.conditional_mixture(Xs)
            lower_s, upper_s = calibration.mixture_interval(*conditional, nominal)
        else:
            lower_s, upper_s = calibration.plugin_interval(self.model_, Xs, level)
        bounds = [np.where(observed, X, b * self.scale_ + self.center_) for b in (lower_s, upper_s)]
        return tuple(frames.output(self, b, frame, observed, wrap=True) for b in bounds)

    def calibrated_level(self, level: float = 0.9, *, random_state=None) -> float:
        """The nominal level whose plug-in intervals cover ``level`` of held-out entries.

        Above ``level`` when the plug-in intervals are too narrow (parameters
        estimated from few rows), near it when the model is well calibrated.

        Notes
        -----
        Split-conformal calibration (Vovk, Gammerman & Shafer 2005; Lei et al. 2018)
        on the probability integral transform.  For each of ``n_repeats`` masks a
        ``holdout`` fraction of the observed entries is hidden, the model is refitted
        on the rest, and each hidden value x gets the score ``|2 F(x) - 1|``, where F
        is its conditional CDF given the rest of its row (a central interval at level
        c contains x exactly when the score is at most c).  The result is the
        ``ceil((N + 1) level)``-th smallest of the N scores.  Entries missing
        completely at random are exchangeable with the held-out ones, so intervals at
        this level cover about ``level`` of them, averaged over entries (per column
        it may differ); slightly more, since the refits saw fewer entries than the
        final model.  With ``model="auto"`` (or a family without ``n_components``) the
        fits of the model search are reused; otherwise they are made on first call.
        """
        level = check_level(level)
        check_is_fitted(self, "model_")
        if self._calibration_scores is None:
            fits, masks = self._heldout or self._heldout_refits(random_state)
            self._calibration_scores = calibration.calibration_scores(fits, masks, self._X_fit)
        return calibration.conformal_level(self._calibration_scores, level)

    def _heldout_refits(self, random_state):
        """Refits of the chosen model with ``n_repeats`` masks of held-out entries."""
        rng = self._rng(random_state)
        return calibration.heldout_refits(
            self.model_, self._X_fit, self.holdout, self.n_repeats, rng, self.verbose
        )

    def _bootstrap_model(self, rng):
        """The chosen model refitted on rows drawn with replacement from the training data."""
        return calibration.bootstrap_refit(self.model_, self._X_fit, rng)

    def sample(self, X, n_imputations=None, *, draw_parameters: bool = True, random_state=None):
        """Multiple imputation: draws of the missing entries given the observed ones.

        Parameters
        ----------
        X : array-like or DataFrame (n_samples, n_features)
        n_imputations : int, optional
            Number of draws m (default ``self.n_imputations``).
        draw_parameters : bool, default=True
            Proper multiple imputation: before each draw, refit the model on a
            bootstrap resample of the training rows (the parametric bootstrap
            approximation to the parameters' posterior, Little & Rubin 2019, sec.
            10.2.3), so the spread across imputations includes parameter uncertainty,
            as Rubin's rules require.  False draws every imputation from the one
            fitted model (conditional draws at the point estimate).
        random_state : int, RandomState or None
            Seeds resampling and draws (default: ``self.random_state``).

        Returns
        -------
        draws : ndarray (n_imputations, n_samples, n_features), or a list of
            ``n_imputations`` DataFrames for DataFrame input.  Observed entries are
            those of X in every draw.
        """
        m = self.n_imputations if n_imputations is None else n_imputations
        m = check_positive_int("n_imputations", m)
        X, observed, Xs, frame = self._prepare(X)
        rng = self._rng(random_state)
        if not draw_parameters:
            draws = self.model_.sample_imputations(Xs, m, random_state=rng)
        else:
            draws = calibration.bootstrap_imputations(
                self._bootstrap_model, Xs, m, rng, self.verbose
            )
        draws = np.where(observed, X, draws * self.scale_ + self.center_)
        if frame is None:
            return draws
        return [frames.output(self, draw, frame, observed, fill=True) for draw in draws]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags
