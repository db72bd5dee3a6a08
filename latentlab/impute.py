"""Missing-data imputation as a workflow: :class:`Imputer` and Rubin's rules.

:class:`Imputer` wraps any latentlab model that fits NaN by its exact observed-data
likelihood (PPCA, Bayesian PCA, factor analysis, Gaussian mixtures), chooses one by
held-out likelihood of masked entries if asked, and fills in, gives uncertainties
and draws multiple imputations in the data's own units.  :func:`rubin_pool` combines
an analysis repeated on each imputation.

Everything here assumes the entries are missing at random (MAR): whether an entry
is missing may depend on the observed entries of its row but not on its own value.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from latentlab._validation import InputTypeError, check_level

__all__ = ["Imputer", "rubin_pool", "PooledEstimate"]

# model name -> estimator class name in latentlab
FAMILIES = {
    "ppca": "PPCA",
    "fa": "FactorAnalysis",
    "bpca": "BayesianPCA",
    "gmm": "GaussianMixture",
}
MODELS = ("auto", *FAMILIES)
# Names are matched case-insensitively, and the class names work too ("PPCA",
# "FactorAnalysis"): a user who just imported latentlab.PPCA will type that.
_ALIASES = {name: name for name in MODELS} | {cls.lower(): key for key, cls in FAMILIES.items()}


def _canonical(name: str):
    """The family key ("ppca", ...) or "auto" for a model name, None if unknown."""
    return _ALIASES.get(name.lower())


# Candidate ranks of the latent models and numbers of mixture components.  Every
# distinct K is one XLA compilation (seconds) on first use, so the grid is sparse.
RANK_GRID = (1, 2, 3, 5, 8, 12, 18)
MIXTURE_GRID = (1, 2, 3)
# "auto" tries one mixture: two full-covariance components detect cluster structure;
# more overfit small data badly and each costs a compilation.
AUTO_MIXTURES = (2,)
# EM tolerance of the candidate fits that only rank models (the chosen one is refitted
# at ``Imputer.tol``).  On the four benchmark data sets at 20% hidden, 2 seeds each,
# 1e-3 instead of 1e-4 picked the same model every time, moved the RMSE by at most
# 0.001 column sd and made ``auto`` 2.5x faster on breast_cancer (FA with 18
# factors needs 15 SQUAREM cycles instead of ~40).
SEARCH_TOL = 1e-3


def _estimator_class(name: str):
    import latentlab

    return getattr(latentlab, FAMILIES[name])


def gmm_supports_missing() -> bool:
    """Whether this version's GaussianMixture can fit and impute NaN."""
    return hasattr(_estimator_class("gmm"), "impute")


def _family_of(estimator) -> str:
    names = {cls: key for key, cls in FAMILIES.items()}
    return names.get(type(estimator).__name__, type(estimator).__name__)


def _max_k(family: str, n: int, d: int) -> int:
    """Largest K each family accepts (PPCA/BPCA keep a discarded direction for noise)."""
    return {"ppca": min(n, d) - 1, "bpca": min(n, d) - 1, "fa": d, "gmm": n}[family]


def default_candidates(model: str, n_samples: int, n_features: int, best_rank=None):
    """The (family, K) pairs tried when none are given.

    ``model="auto"`` searches in two stages: PPCA over :data:`RANK_GRID` first
    (``best_rank=None``), then, given the best PPCA rank, factor analysis at that rank
    and the next smaller grid rank (heteroscedastic noise absorbs variance PPCA needs
    extra components for), plus a two-component mixture when GaussianMixture
    supports NaN.  A named family searches its own grid in one stage; Bayesian PCA
    needs no search (its ARD prior prunes the rank).
    """
    n, d = n_samples, n_features

    def grid(family, values):
        return [(family, K) for K in values if K <= _max_k(family, n, d)]

    if model == "bpca":
        return [("bpca", None)]
    if model == "gmm":
        return grid("gmm", MIXTURE_GRID)
    if model in ("ppca", "fa"):
        return grid(model, RANK_GRID)
    if best_rank is None:
        return grid("ppca", RANK_GRID)
    lower = [K for K in RANK_GRID if K < best_rank]
    second = grid("fa", [best_rank] + lower[-1:])
    if gmm_supports_missing():
        second += grid("gmm", AUTO_MIXTURES)
    return second


def _progress(items, desc: str, verbose: int):
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, disable=not verbose, file=sys.stderr, leave=False)


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
        unfitted estimators.  None searches :func:`default_candidates`.
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
        If > 0, show progress bars on stderr for the model search and bootstrap refits.

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
        over rows), ``n_params``, ``seconds``, ``note`` (why a candidate failed, or
        its warnings).  None when nothing was chosen.
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

    # -- input -------------------------------------------------------------------------

    def _validate(self, X, *, reset: bool):
        """X as a float64 array (NaN = missing), and the DataFrame it came from (or None)."""
        frame = None
        if hasattr(X, "toarray") and hasattr(X, "nnz"):
            # sparse zeros are values, not missing entries: densify explicitly
            raise InputTypeError(
                "Imputer needs dense input with NaN for missing entries, got a sparse "
                "matrix; pass X.toarray() (a sparse zero is a value, not a gap)"
            )
        pandas = sys.modules.get("pandas")  # a DataFrame means pandas is imported already
        if pandas is not None and isinstance(X, pandas.DataFrame):
            from pandas.api.types import is_complex_dtype, is_numeric_dtype

            frame = X
            bad = [
                str(c)
                for c, t in X.dtypes.items()
                if not is_numeric_dtype(t) or is_complex_dtype(t)
            ]
            if bad:
                raise ValueError(
                    f"Imputer needs numeric columns; non-numeric column(s): {bad}. "
                    "Drop or encode them before imputing."
                )
        X = validate_data(
            self,
            X,
            reset=reset,
            dtype=np.float64,
            ensure_all_finite="allow-nan",
            ensure_min_samples=2 if reset else 1,
            ensure_min_features=2 if reset else 1,
        )
        return np.asarray(X, dtype=np.float64), frame

    def _model(self):
        """``model`` as its canonical family name ("auto", "ppca", ...) or the estimator."""
        return _canonical(self.model) if isinstance(self.model, str) else self.model

    def _check_settings(self):
        if isinstance(self.model, str):
            if self._model() is None:
                raise ValueError(
                    f"Unknown model={self.model!r}; expected one of {MODELS} "
                    "(any case) or a latentlab class name such as 'FactorAnalysis'"
                )
            if self._model() == "gmm" and not gmm_supports_missing():
                raise ValueError(
                    "model='gmm' needs a GaussianMixture that fits missing values, which "
                    "this version of latentlab lacks; use 'ppca', 'fa', 'bpca' or 'auto'"
                )
        else:
            _check_model_object(self.model)
        K = self.n_components
        if K is not None and (isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1):
            raise ValueError(f"n_components must be a positive integer or None, got {K!r}")
        m = self.n_imputations
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"n_imputations must be a positive integer, got {m!r}")
        r = self.n_repeats
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
            raise ValueError(f"n_repeats must be a positive integer, got {r!r}")
        if not (isinstance(self.tol, (int, float)) and self.tol >= 0):
            raise ValueError(f"tol must be a non-negative number, got {self.tol!r}")
        if not (isinstance(self.holdout, (int, float)) and 0 < self.holdout <= 0.5):
            raise ValueError(f"holdout must be a fraction in (0, 0.5], got {self.holdout!r}")
        if self.candidates is not None:
            if self._model() != "auto":
                raise ValueError("candidates are only used with model='auto'")
            if len(self.candidates) == 0:
                raise ValueError("candidates is empty: give at least one (name, K) or model")

    def _to_estimator(self, spec, seed):
        """(family, K, unfitted estimator) for a (name, K) pair or an estimator."""
        if _is_named(spec):
            name, K = spec
            if _canonical(name) not in FAMILIES:
                expected = tuple(FAMILIES)
                raise ValueError(f"Unknown candidate model {name!r}; expected one of {expected}")
            name = _canonical(name)
            est = _estimator_class(name)(n_components=K, tol=self.tol, random_state=seed)
            return name, K, est
        _check_model_object(spec)
        est = clone(spec)
        if "random_state" in est.get_params() and est.get_params()["random_state"] is None:
            est.set_params(random_state=seed)
        return _family_of(est), est.get_params().get("n_components"), est

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
        X, frame = self._validate(X, reset=True)
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
        if self.standardize:
            # Divide by each column's largest |x| before squaring: the fit is scale-
            # equivariant, so data near 1e200 (whose squares overflow) are rescaled
            # here instead of refused (the models themselves refuse them, see
            # latentlab._validation.check_magnitude).
            peak = np.nanmax(np.abs(X), axis=0)
            peak = np.where(peak > 0, peak, 1.0)
            self.center_ = np.nanmean(X / peak, axis=0) * peak
            scale = np.nanstd(X / peak, axis=0) * peak
            self.scale_ = np.where(scale > 0, scale, 1.0)  # constant column: leave its unit
        else:
            self.center_, self.scale_ = np.zeros(d), np.ones(d)
        Xs = (X - self.center_) / self.scale_
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(2**31 - 1))

        specs = self._plan(n, d)
        self._heldout = None  # (mask fits, masks) of the chosen model, see calibrated_level
        self._calibration_scores = None
        if specs is None:  # one model, nothing to choose
            family, K, est = self._fixed_model(seed)
            self.selection_ = None
        else:
            masks = [_holdout_mask(~np.isnan(Xs), self.holdout, rng) for _ in range(self.n_repeats)]
            if not all(hidden.any() for hidden in masks):
                raise ValueError(
                    "too few observed entries to hold some out for choosing a model; "
                    "give model and n_components"
                )
            rows = self._evaluate(specs, Xs, masks, seed)
            if self._model() == "auto" and self.candidates is None and self.n_components is None:
                best_rank = _best(rows)["n_components"]
                rows += self._evaluate(default_candidates("auto", n, d, best_rank), Xs, masks, seed)
            self.selection_ = _selection_table(rows)
            best = _best(rows)
            family, K, est = best["model"], best["n_components"], best["estimator"]
            self._heldout = (best["fits"], masks)
        self.model_ = clone(est).fit(Xs)
        self.chosen_ = {"model": family, "n_components": _fitted_k(self.model_, K)}
        self._X_fit = Xs  # kept for bootstrap refits in ``sample``
        return self

    def _plan(self, n, d):
        """Candidate specs to score, or None when the model is fixed."""
        model = self._model()
        if model == "auto":
            if self.candidates is not None:
                return list(self.candidates)
            if self.n_components is not None:  # a rank: PPCA or FA at that rank
                return [("ppca", self.n_components), ("fa", self.n_components)]
            return default_candidates("auto", n, d)
        if isinstance(model, str) and self.n_components is None and model != "bpca":
            return default_candidates(model, n, d)
        return None

    def _fixed_model(self, seed):
        if isinstance(self.model, str):
            return self._to_estimator((self._model(), self.n_components), seed)
        family, K, est = self._to_estimator(self.model, seed)
        if self.n_components is not None:
            est.set_params(n_components=self.n_components)
            K = self.n_components
        return family, K, est

    def _evaluate(self, specs, Xs, masks, seed) -> list[dict]:
        """Fit each candidate without the entries of each mask; score those given the rest.

        ``per_row`` sums, over masks, each row's conditional log-density of its hidden
        entries given its other observed ones.
        """
        rows = []
        for spec in _progress(specs, "imputer: scoring models", self.verbose):
            family, K, est = self._to_estimator(spec, seed)
            row = {"model": family, "n_components": K, "estimator": est, "note": ""}
            scored = clone(est)
            if _is_named(spec):  # models Imputer builds: looser tol while only ranking
                scored.set_params(tol=max(self.tol, SEARCH_TOL))
            start = time.perf_counter()
            try:
                per_row, fits = np.zeros(Xs.shape[0]), []
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    for hidden in masks:
                        X_train = np.where(hidden, np.nan, Xs)
                        fitted = clone(scored).fit(X_train)
                        per_row += fitted.score_samples(Xs) - fitted.score_samples(X_train)
                        fits.append(fitted)
                row["fits"] = fits  # reused to calibrate intervals if the row wins
                row["n_components"] = _fitted_k(fitted, K)
                row["n_params"] = _n_params(fitted)
                row["per_row"] = per_row
                row["note"] = "; ".join(sorted({str(w.message).split(";")[0] for w in caught}))
                if not np.all(np.isfinite(per_row)):
                    raise ValueError("non-finite held-out log-likelihood")
            except ValueError as err:  # e.g. K too large for the data: skip, say why
                row["per_row"] = None
                row["note"] = str(err)
            row["seconds"] = time.perf_counter() - start
            row["n_hidden"] = int(sum(hidden.sum() for hidden in masks))
            rows.append(row)
        if not any(r["per_row"] is not None for r in rows):
            raise ValueError(
                "no candidate model could be fitted: "
                + "; ".join(f"{r['model']}(K={r['n_components']}): {r['note']}" for r in rows)
            )
        return rows

    # -- imputing ----------------------------------------------------------------------

    def _prepare(self, X):
        check_is_fitted(self, "model_")
        X, frame = self._validate(X, reset=False)
        return X, ~np.isnan(X), (X - self.center_) / self.scale_, frame

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
        filled = self._output(filled, frame, observed, fill=True)
        return (filled, self._output(std, frame, observed, wrap=True)) if return_std else filled

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
            lower_s, upper_s = self._bootstrap_interval(Xs, level, n_draws, random_state)
        elif calibrate:
            nominal = self.calibrated_level(level, random_state=random_state)
            lower_s, upper_s = mixture_interval(*self.model_.conditional_mixture(Xs), nominal)
        elif hasattr(self.model_, "impute_interval"):
            lower_s, upper_s = self.model_.impute_interval(Xs, level=level)
        else:
            from scipy.stats import norm

            mean, std = self.model_.impute(Xs, return_std=True)
            z = norm.ppf(0.5 + level / 2)
            lower_s, upper_s = mean - z * std, mean + z * std
        bounds = [np.where(observed, X, b * self.scale_ + self.center_) for b in (lower_s, upper_s)]
        return tuple(self._output(b, frame, observed, wrap=True) for b in bounds)

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
            scores = [_pit_scores(f, self._X_fit, h) for f, h in zip(fits, masks, strict=True)]
            self._calibration_scores = np.sort(np.concatenate(scores))
        scores = self._calibration_scores
        rank = int(np.ceil((scores.size + 1) * level))
        if rank > scores.size:
            raise ValueError(
                f"{scores.size} held-out entries are too few to calibrate a {level} "
                "interval; raise holdout or n_repeats"
            )
        return float(np.clip(scores[rank - 1], 1e-12, 1.0 - 1e-12))

    def _heldout_refits(self, random_state):
        """Refits of the chosen model with ``n_repeats`` masks of held-out entries."""
        rng = check_random_state(self.random_state if random_state is None else random_state)
        observed = ~np.isnan(self._X_fit)
        masks = [_holdout_mask(observed, self.holdout, rng) for _ in range(self.n_repeats)]
        if not any(hidden.any() for hidden in masks):
            raise ValueError("too few observed entries to hold some out for calibration")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # EM warnings on a refit say nothing new
            fits = [
                clone(self.model_).fit(np.where(hidden, np.nan, self._X_fit))
                for hidden in _progress(masks, "imputer: calibration refits", self.verbose)
            ]
        return fits, masks

    def _bootstrap_interval(self, Xs, level, n_draws, random_state):
        """Quantiles of the equal-weight mixture of ``n_draws`` bootstrap models'
        conditional distributions (each itself a mixture, see ``conditional_mixture``)."""
        if isinstance(n_draws, bool) or not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
            raise ValueError(f"n_draws must be a positive integer, got {n_draws!r}")
        rng = check_random_state(self.random_state if random_state is None else random_state)
        parts = [
            self._bootstrap_model(rng).conditional_mixture(Xs)
            for _ in _progress(range(n_draws), "imputer: bootstrap refits", self.verbose)
        ]
        weights = np.concatenate([p[0] for p in parts], axis=1) / n_draws
        means = np.concatenate([p[1] for p in parts], axis=1)
        sds = np.concatenate([p[2] for p in parts], axis=1)
        return mixture_interval(weights, means, sds, level)

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
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"n_imputations must be a positive integer, got {m!r}")
        X, observed, Xs, frame = self._prepare(X)
        rng = check_random_state(self.random_state if random_state is None else random_state)
        if not draw_parameters:
            draws = self.model_.sample_imputations(Xs, int(m), random_state=rng)
        else:
            draws = np.stack(
                [
                    self._bootstrap_model(rng).sample_imputations(Xs, 1, random_state=rng)[0]
                    for _ in _progress(range(m), "imputer: bootstrap refits", self.verbose)
                ]
            )
        draws = np.where(observed, X, draws * self.scale_ + self.center_)
        if frame is None:
            return draws
        return [self._output(draw, frame, observed, fill=True) for draw in draws]

    def _bootstrap_model(self, rng):
        """The chosen model refitted on rows drawn with replacement from the training data."""
        n = self._X_fit.shape[0]
        for _ in range(20):
            rows = self._X_fit[rng.randint(0, n, size=n)]
            if (~np.isnan(rows)).any(axis=0).all():  # every column keeps an observed entry
                est = clone(self.model_)
                if "random_state" in est.get_params():
                    est.set_params(random_state=int(rng.randint(2**31 - 1)))
                with warnings.catch_warnings():
                    # EM warnings on one resample say nothing new about the chosen model
                    warnings.simplefilter("ignore")
                    return est.fit(rows)
        raise ValueError(
            "bootstrap resamples keep losing every observed entry of some column; too "
            "few observed values for draw_parameters=True"
        )

    def _output(self, values, frame, observed, *, fill: bool = False, wrap: bool = False):
        """A DataFrame like ``frame`` (dtypes kept when ``fill``), else a NumPy array."""
        if frame is None:
            config = getattr(self, "_sklearn_output_config", {}).get("transform")
            if wrap and config == "pandas":  # set_output wraps only the first result
                import pandas as pd

                return pd.DataFrame(values, columns=self.get_feature_names_out())
            return values
        import pandas as pd

        if not fill:
            return pd.DataFrame(values, index=frame.index, columns=frame.columns)
        out = frame.copy()
        for j, (name, dtype) in enumerate(frame.dtypes.items()):
            if observed[:, j].all():
                continue  # untouched: same values, same dtype
            column = values[:, j]
            if pd.api.types.is_bool_dtype(dtype):
                column = np.clip(np.round(column), 0, 1)
            elif pd.api.types.is_integer_dtype(dtype):
                column = np.round(column)
            out.isetitem(j, pd.Series(column, index=frame.index, name=name).astype(dtype))
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


def mixture_interval(weights, means, sds, level):
    """Central ``level`` interval of each entry's mixture ``sum_c weights[n, c]
    N(means[n, c, j], sds[n, c, j]^2)`` (the form of ``conditional_mixture``)."""
    from latentlab.estimators.gmm import mixture_quantile

    sds = np.maximum(sds, 1e-300)  # observed entries: a point mass at x
    tail = 0.5 * (1.0 - level)
    return tuple(mixture_quantile(weights, means, sds, q) for q in (tail, 1.0 - tail))


def _pit_scores(fitted, Xs, hidden):
    """``|2 F(x) - 1|`` of each hidden entry x, F its conditional CDF under ``fitted``
    given the unhidden entries of its row: the smallest central level containing x."""
    from scipy.special import ndtr

    weights, means, sds = fitted.conditional_mixture(np.where(hidden, np.nan, Xs))
    rows, cols = np.nonzero(hidden)
    z = (Xs[rows, cols][:, None] - means[rows, :, cols]) / np.maximum(sds[rows, :, cols], 1e-300)
    cdf = np.einsum("nc,nc->n", weights[rows], ndtr(z))
    return np.abs(2.0 * cdf - 1.0)


def _is_named(spec) -> bool:
    """Whether a candidate is a ``(family name, K)`` pair (else an estimator)."""
    return isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str)


def _check_model_object(est) -> None:
    needed = (
        "fit",
        "impute",
        "conditional_mixture",
        "sample_imputations",
        "score_samples",
        "get_params",
    )
    if isinstance(est, type) or not all(hasattr(est, a) for a in needed):
        shown = est.__name__ if isinstance(est, type) else type(est).__name__
        raise ValueError(
            f"model must be one of {MODELS} or an unfitted latentlab estimator that fits "
            f"missing values (PPCA, FactorAnalysis, BayesianPCA, GaussianMixture), got {shown}"
        )


def _holdout_mask(observed, fraction, rng):
    """Random observed entries to hide, never the last observed entry of a row or column."""
    hidden = observed & (rng.random_sample(observed.shape) < fraction)
    for axis in (1, 0):
        left = (observed & ~hidden).sum(axis=axis)
        for i in np.flatnonzero(left == 0):
            line = hidden[i] if axis == 1 else hidden[:, i]
            line[np.flatnonzero(line)[0]] = False  # give back one entry
    return hidden


def _fitted_k(est, K):
    value = getattr(est, "effective_rank_", None)
    if value is None:
        value = getattr(est, "n_components_", K)
    return None if value is None else int(value)


def _n_params(est):
    try:
        return int(est._n_parameters())
    except (AttributeError, NotImplementedError):
        return None


def _best(rows):
    scored = [r for r in rows if r["per_row"] is not None]
    return max(scored, key=lambda r: r["per_row"].sum())


def _selection_table(rows):
    import pandas as pd

    best = _best(rows)["per_row"]
    records = []
    for r in rows:
        per_row = r["per_row"]
        record = {
            "model": r["model"],
            "n_components": r["n_components"],
            "heldout_loglik": np.nan,
            "se_diff": np.nan,
            "n_params": r.get("n_params"),
            "seconds": r["seconds"],
            "note": r["note"],
        }
        if per_row is not None:
            record["heldout_loglik"] = per_row.sum() / r["n_hidden"]
            # paired over rows: both candidates scored the same hidden entries
            diff = per_row - best
            record["se_diff"] = np.sqrt(len(diff)) * diff.std(ddof=1) / r["n_hidden"]
        records.append(record)
    table = pd.DataFrame(records)
    table["n_components"] = table["n_components"].astype("Int64")
    table["n_params"] = table["n_params"].astype("Int64")
    table = table.sort_values("heldout_loglik", ascending=False, na_position="last")
    return table.reset_index(drop=True)


# -- Rubin's rules ---------------------------------------------------------------------


class PooledEstimate(NamedTuple):
    """Result of :func:`rubin_pool`; each field has the shape of one estimate."""

    estimate: np.ndarray  # mean of the m estimates
    variance: np.ndarray  # total variance T = W + (1 + 1/m) B
    within: np.ndarray  # W, mean of the m complete-data variances
    between: np.ndarray  # B, variance of the m estimates (ddof=1)
    df: np.ndarray  # degrees of freedom of the t reference distribution
    riv: np.ndarray  # relative increase in variance (1 + 1/m) B / W
    fmi: np.ndarray  # fraction of missing information

    def confidence_interval(self, level: float = 0.95):
        """``(lower, upper)`` from the t distribution with ``df`` degrees of freedom."""
        from scipy.stats import t

        half = t.ppf(0.5 + check_level(level) / 2, self.df) * np.sqrt(self.variance)
        return self.estimate - half, self.estimate + half


def rubin_pool(estimates, variances, *, df_complete=None) -> PooledEstimate:
    """Pool an estimate and its variance over m imputations by Rubin's rules.

    Parameters
    ----------
    estimates : array-like (m,) or (m, p)
        The same quantity (or p quantities) estimated on each imputed data set.
    variances : array-like, same shape
        Their complete-data sampling variances (squared standard errors).  Vector
        quantities are pooled elementwise (no covariances).
    df_complete : float, optional
        Degrees of freedom the analysis would have without missing data (e.g.
        n - p for a regression coefficient).  Given, ``df`` is Barnard & Rubin's
        (1999) small-sample value; None gives Rubin's (1987) large-sample
        ``(m - 1) (1 + 1/r)^2``.

    Returns
    -------
    PooledEstimate
        ``estimate``, total ``variance`` T = W + (1 + 1/m) B, ``within`` W,
        ``between`` B, ``df``, ``riv`` r = (1 + 1/m) B / W and ``fmi`` =
        (r + 2 / (df + 3)) / (r + 1); each shaped like one estimate.  ``df`` is inf
        when the imputations agree exactly (B = 0) and ``df_complete`` is None.

    Examples
    --------
    >>> pooled = rubin_pool([1.0, 2.0, 3.0], [0.5, 0.5, 0.5])
    >>> float(pooled.estimate), float(pooled.variance)
    (2.0, 1.8333333333333333)
    """
    Q = np.asarray(estimates, dtype=np.float64)
    U = np.asarray(variances, dtype=np.float64)
    if Q.shape != U.shape:
        raise ValueError(f"estimates {Q.shape} and variances {U.shape} must have the same shape")
    if Q.ndim not in (1, 2) or Q.shape[0] < 2:
        raise ValueError(f"need estimates of shape (m,) or (m, p) with m >= 2, got {Q.shape}")
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(U))):
        raise ValueError("estimates and variances must be finite")
    if np.any(U < 0):
        raise ValueError("variances must be non-negative")
    if df_complete is not None and not df_complete > 0:
        raise ValueError(f"df_complete must be positive, got {df_complete!r}")
    m = Q.shape[0]
    within = U.mean(axis=0)
    between = Q.var(axis=0, ddof=1)
    extra = (1 + 1 / m) * between
    total = within + extra
    with np.errstate(divide="ignore", invalid="ignore"):
        riv = np.where(extra > 0, extra / within, 0.0)
        lam = np.where(extra > 0, extra / total, 0.0)  # share of T due to missingness
        df_old = np.where(lam > 0, (m - 1) / lam**2, np.inf)
        if df_complete is None:
            df = df_old
        else:
            df_obs = (df_complete + 1) / (df_complete + 3) * df_complete * (1 - lam)
            df = np.where(np.isinf(df_old), df_obs, df_old * df_obs / (df_old + df_obs))
        fmi = (riv + 2 / (df + 3)) / (riv + 1)
    return PooledEstimate(
        *(
            np.asarray(a, dtype=np.float64)
            for a in (Q.mean(axis=0), total, within, between, df, riv, fmi)
        )
    )
