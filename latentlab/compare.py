"""Model comparison by likelihood: training fit, AIC/BIC, K-fold held-out, ELPD-LOO.

:func:`compare` fits every model on the same data and the same cross-validation
folds and returns one pandas table, best model first.  Over ~400 lines because it is
one public function and the steps of its table (folds, pointwise scores, criteria,
LOO, paired differences, the edge-of-grid note), ~120 of them docstrings.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Mapping
from functools import partial

import numpy as np

__all__ = ["compare"]

LOO_METHODS = ("nuts", "svi", "laplace")
COMPLETION_FRACTION = 0.5  # share of each held-out document's tokens used to fold it in


def _is_supervised(est) -> bool:
    """Whether ``est.fit`` needs y (scikit-learn's ``target_tags.required``)."""
    try:
        return bool(est.__sklearn_tags__().target_tags.required)
    except AttributeError:
        return False


def _n_components(est):
    value = getattr(est, "n_components_", None)
    if value is None:
        value = getattr(est, "n_components", None)
    return value if isinstance(value, (int, np.integer)) else None


def _auto_names(estimators) -> list[str]:
    names: list[str] = []
    for est in estimators:
        K = _n_components(est)
        base = type(est).__name__ + ("" if K is None else f"(K={K})")
        name, i = base, 2
        while name in names:  # same class and K twice (say, two methods): number them
            name, i = f"{base} #{i}", i + 1
        names.append(name)
    return names


def _check_models(models) -> dict:
    if isinstance(models, Mapping):
        named = dict(models)
    elif isinstance(models, (list, tuple)):
        named = dict(zip(_auto_names(models), models, strict=True))
    else:
        raise ValueError(
            "models must be a dict {name: estimator} or a list of estimators, "
            f"got {type(models).__name__}"
        )
    if not named:
        raise ValueError("models is empty: give at least one estimator to compare")
    for name, est in named.items():
        if isinstance(est, type):
            raise ValueError(
                f"model {name!r} is the class {est.__name__}, not an estimator; "
                f"pass an instance such as {est.__name__}()"
            )
        if not hasattr(est, "fit") or not hasattr(est, "get_params"):
            raise ValueError(
                f"model {name!r} ({type(est).__name__}) is not a scikit-learn style estimator "
                "(it needs fit and get_params)"
            )
        if not (hasattr(est, "score_samples") or hasattr(est, "completion_log_likelihood")):
            raise ValueError(
                f"model {name!r} ({type(est).__name__}) has no likelihood (no score_samples); "
                "compare accepts generative models such as PPCA, FactorAnalysis, "
                "BayesianPCA, SupervisedPCA, GaussianMixture, PCA and PLSA"
            )
    return named


def _check_data(X, y):
    import scipy.sparse as sp

    from latentlab._validation import check_input_kind

    # masked entries become NaN (missing) here, before np.asarray drops the mask; the
    # models then take them or refuse them, as they take or refuse NaN
    X = check_input_kind(X, allow_nan=True, accept_sparse=True)
    if not sp.issparse(X):  # counts for PLSA may be sparse; keep them so
        try:
            X = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"X must be a numeric 2-D array: {err}") from None
        if X.ndim != 2:
            raise ValueError(
                f"X must be 2-D (n_samples, n_features), got an array with {X.ndim} dimension(s)"
            )
        if np.isinf(X).any():
            raise ValueError("X contains infinity")
    if y is not None:
        y = np.asarray(y)
        if y.ndim not in (1, 2) or y.shape[0] != X.shape[0]:
            raise ValueError(
                f"y must have one entry (or row) per row of X: X has {X.shape[0]} rows, "
                f"y has shape {y.shape}"
            )
    return X, y


def _folds(cv, random_state, n):
    from sklearn.model_selection import KFold

    if isinstance(cv, bool) or not isinstance(cv, (int, np.integer)):
        if hasattr(cv, "split") and hasattr(cv, "get_n_splits"):  # a scikit-learn splitter
            return list(cv.split(np.zeros((n, 1))))
        raise ValueError(f"cv must be an integer >= 2 or a scikit-learn splitter, got {cv!r}")
    if cv < 2:
        raise ValueError(f"cv must be >= 2 folds, got {cv}")
    if cv > n:
        raise ValueError(f"cv={cv} folds need at least {cv} rows, but X has {n}")
    return list(KFold(int(cv), shuffle=True, random_state=random_state).split(np.zeros((n, 1))))


def _fit(est, X, y, supervised):
    return est.fit(X, y) if supervised else est.fit(X)


def _pointwise(est, X, y, supervised, random_state):
    """Held-out log-likelihood of each row of X (or each document's completion)."""
    if hasattr(est, "completion_log_likelihood"):
        values = est.completion_log_likelihood(
            X, fraction=COMPLETION_FRACTION, random_state=random_state
        )
    elif supervised:
        values = est.score_samples(X, y)
    else:
        values = est.score_samples(X)
    values = np.asarray(values, dtype=np.float64)
    bad = int(np.sum(~np.isfinite(values)))
    if bad:
        raise ValueError(f"{bad} held-out row(s) have a non-finite log-likelihood")
    return values


def _n_parameters(est) -> int | None:
    """A fitted model's ``n_parameters_``, where it has one."""
    try:
        return int(est.n_parameters_)
    except (AttributeError, NotImplementedError):
        return None


def _criteria(est, X, y, supervised, loglik, n):
    """(AIC, BIC) from the estimator's own methods; the textbook formulas otherwise."""
    args = (X, y) if supervised else (X,)
    p = _n_parameters(est)
    p = np.nan if p is None else p
    aic = est.aic(*args) if hasattr(est, "aic") else -2.0 * loglik + 2.0 * p
    bic = est.bic(*args) if hasattr(est, "bic") else -2.0 * loglik + p * math.log(n)
    return float(aic), float(bic)


def _loo(est, X, y, supervised, method, random_state, loo_kwargs):
    """(elpd_loo, se, p_loo, indices of the rows with a high Pareto k)."""
    from latentlab.posterior import loo as psis_loo

    kwargs = {"random_state": random_state}
    if "predictive" in inspect.signature(est.sample_posterior).parameters:
        kwargs["predictive"] = False  # PSIS-LOO reads the log-likelihood only
    kwargs.update(loo_kwargs)
    args = (X, y) if supervised else (X,)
    tree = est.sample_posterior(*args, method=method, **kwargs)
    with warnings.catch_warnings():
        # rows with a high Pareto k are counted in their own column, not warned per model
        warnings.filterwarnings("ignore", message=".*Pareto.*", category=UserWarning)
        warnings.filterwarnings("ignore", message=".*PSIS-LOO is unreliable.*")
        result = psis_loo(tree)
    pareto_k = np.asarray(result.pareto_k, dtype=np.float64).reshape(-1)
    high = np.flatnonzero(~(pareto_k <= result.good_k))  # NaN k counts as high
    return float(result.elpd), float(result.se), float(result.p), high


def _evaluate(name, template, X, y, folds, random_state, loo, loo_kwargs, leader=None):
    """One row of the table; failures become NaN plus a message in ``error``.

    ``leader``: the held-out values of the best complete model so far (every fold's,
    in fold order); the folds stop early when this model is clearly worse on the rows
    both have scored (:mod:`latentlab._early_stop`)."""
    supervised = _is_supervised(template)
    row = {
        "family": type(template).__name__,
        "K": _n_components(template),
        "n_params": None,
        "loglik": np.nan,
        "AIC": np.nan,
        "BIC": np.nan,
        "heldout_loglik": np.nan,
        "heldout_se": np.nan,
        "heldout_total": np.nan,
        "folds": 0,
    }
    if getattr(template, "covariance_type", None) is not None:
        row["family"] += f"[{template.covariance_type}]"  # a different model per type
    if loo is not None:
        row.update(elpd_loo=np.nan, elpd_loo_se=np.nan, p_loo=np.nan, n_high_pareto_k=None)
    errors = []
    # warnings of the fits (a Heywood case, no convergence) are gathered per model and
    # stage into the table's ``warnings`` column, instead of repeating for every fold
    # without naming the model
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        stages = []  # the stage of each recorded warning
        fitted, pointwise = _fit_and_score(
            template, X, y, folds, random_state, leader, row, errors, record, stages
        )
    row["warnings"] = _gathered(record, stages)
    if loo is not None and fitted is not None:
        try:
            elpd, se, p_loo, high = _loo(fitted, X, y, supervised, loo, random_state, loo_kwargs)
            row.update(elpd_loo=elpd, elpd_loo_se=se, p_loo=p_loo, n_high_pareto_k=len(high))
            row["_high_pareto_k_rows"] = high
        except ValueError as err:
            errors.append(f"posterior ({loo}): {err}")
    row["error"] = "; ".join(errors) if errors else None
    if errors:
        warnings.warn(
            f"compare: model {name!r} failed ({row['error']}); its affected columns are NaN",
            UserWarning,
            stacklevel=3,
        )
    return row, fitted, pointwise


def _fit_and_score(template, X, y, folds, random_state, leader, row, errors, record, stages):
    """The fit on all rows and the cross-validation folds of one model, filling
    ``row`` and ``errors``; ``stages`` gets the stage of each warning in ``record``.
    Returns (the fit on all rows or None, the held-out values per row or None)."""
    from sklearn.base import clone  # imported here: scikit-learn loads pandas

    supervised = _is_supervised(template)
    n = X.shape[0]
    fitted = None
    stage = "full fit"
    try:
        fitted = _fit(clone(template), X, y, supervised)
        row["K"] = _n_components(fitted)
        row["n_params"] = _n_parameters(fitted)
        args = (X, y) if supervised else (X,)
        if hasattr(fitted, "score_samples"):
            row["loglik"] = float(np.sum(np.asarray(fitted.score_samples(*args), np.float64)))
        row["AIC"], row["BIC"] = _criteria(fitted, X, y, supervised, row["loglik"], n)
    except ValueError as err:
        errors.append(f"fit on all rows: {err}")
    stages.extend([stage] * (len(record) - len(stages)))
    try:
        fold_means, pieces = [], []
        for i, (train, test) in enumerate(folds):
            stage = f"fold {i}"
            y_train = None if y is None else y[train]
            y_test = None if y is None else y[test]
            est = _fit(clone(template), X[train], y_train, supervised)
            values = _pointwise(est, X[test], y_test, supervised, random_state)
            stages.extend([stage] * (len(record) - len(stages)))
            fold_means.append(values.mean())
            pieces.append(values)
            if i < len(folds) - 1 and _clearly_worse(np.concatenate(pieces), leader):
                break
        fold_means = np.asarray(fold_means)
        row["folds"] = len(fold_means)
        row["heldout_loglik"] = float(fold_means.mean())
        if len(fold_means) > 1:
            row["heldout_se"] = float(fold_means.std(ddof=1) / np.sqrt(len(fold_means)))
        pointwise = np.concatenate(pieces)  # every model: the same rows in the same order
        row["heldout_total"] = float(pointwise.sum())
    except ValueError as err:
        errors.append(f"{stage}: {err}")
        pointwise = None
    stages.extend([stage] * (len(record) - len(stages)))
    return fitted, pointwise


def _gathered(record, stages) -> str | None:
    """The warnings one model's fits raised, each kind once with the stages that raised
    it ("Heywood case: ... [full fit, folds 0, 2]"); None if there were none.  A kind
    is the category and the message up to its first colon or full stop, so that the
    same warning with other numbers or features counts once."""
    kinds: dict = {}
    for caught, stage in zip(record, stages, strict=True):
        message = str(caught.message)
        head = message.replace(":", ".").split(".")[0]
        first, where = kinds.setdefault((caught.category, head), (message, []))
        if stage not in where:
            where.append(stage)
    if not kinds:
        return None
    parts = []
    for message, where in kinds.values():
        folds = [w.removeprefix("fold ") for w in where if w.startswith("fold ")]
        named = [w for w in where if not w.startswith("fold ")]
        if folds:
            named.append(("fold " if len(folds) == 1 else "folds ") + ", ".join(folds))
        parts.append(f"{message} [{'; '.join(named)}]")
    return " | ".join(parts)


def _warn_about_table(table) -> None:
    """One warning for the fits' gathered warnings, and one for unreliable PSIS-LOO."""
    warned = table["warnings"].dropna()
    if len(warned):
        kinds = "; ".join(f"{name!r}: {text.split(' [')[0][:80]}" for name, text in warned.items())
        warnings.warn(
            f"compare: the fits of {len(warned)} model(s) raised warnings ({kinds}); the "
            "table's 'warnings' column lists each with the folds that raised it",
            UserWarning,
            stacklevel=3,
        )
    if "_high_pareto_k_rows" not in table:
        return
    rows = table.pop("_high_pareto_k_rows")
    high = {name: r for name, r in rows.items() if isinstance(r, np.ndarray) and len(r)}
    table.attrs["high_pareto_k_rows"] = {name: r.tolist() for name, r in high.items()}
    if high:
        n = table.attrs["n_samples"]
        listed = "; ".join(
            f"{name!r}: {len(r)} of {n} rows (first: {', '.join(map(str, r[:5]))})"
            for name, r in high.items()
        )
        warnings.warn(
            f"compare: PSIS-LOO is unreliable where a row's Pareto k is high ({listed}): "
            "elpd_loo of these models may be far off, and a ranking by it can pick "
            "another model.  Rank by heldout_loglik (cross-validation, the table's "
            "criterion); the rows are in table.attrs['high_pareto_k_rows']",
            UserWarning,
            stacklevel=3,
        )


def _clearly_worse(values, leader) -> bool:
    """Whether held-out ``values`` (the first folds' rows) clearly trail the leader's
    on the same rows (:func:`latentlab._early_stop.clearly_worse`)."""
    from latentlab._early_stop import clearly_worse

    return leader is not None and clearly_worse(values - leader[: len(values)])


def _paired_differences(table, pointwise, fold_sizes):
    """``heldout_diff``, ``heldout_se_diff`` and ``near_best`` of every row against the
    best (first) row.

    The standard error is paired over the held-out rows, as ``arviz.compare``'s
    ``dse``: every model scored the same rows, so the spread between rows (which all
    models share) cancels in the per-row differences.  With m held-out evaluations
    and d_i = best_i - model_i, the SE of the summed difference is sqrt(m var(d));
    divided by m it is in the table's per-row units.
    """
    best_name = table.index[0]
    best = pointwise.get(best_name)
    ends = np.cumsum(fold_sizes)
    diff = np.full(len(table), np.nan)
    se = np.full(len(table), np.nan)
    near = np.full(len(table), None, dtype=object)
    if best is None:
        return diff, se, near
    top = table.loc[best_name, "heldout_loglik"]
    for i, name in enumerate(table.index):
        values = pointwise.get(name)
        if values is None:
            continue
        d = best[: len(values)] - values
        m = len(d)
        # a model that stopped early against the best's mean over the same folds
        folds = int(np.searchsorted(ends, m)) + 1
        same = np.mean([chunk.mean() for chunk in np.split(best, ends[:-1])[:folds]])
        diff[i] = (top if m == len(best) else same) - table.loc[name, "heldout_loglik"]
        se[i] = np.sqrt(m) * d.std(ddof=1) / m if m > 1 else np.nan
        if i == 0:
            near[i] = "best"
        elif diff[i] <= se[i] or diff[i] <= 0:  # identical predictions: d = 0, se = 0
            near[i] = "within 1 SE"
        elif diff[i] <= 2 * se[i]:
            near[i] = "within 2 SE"
        else:
            near[i] = "beyond 2 SE"
    return diff, se, near


def _params_except_k(est) -> str:
    """The settings that make a model family: all but K and the seed."""
    params = est.get_params(deep=False)
    for name in ("n_components", "random_state", "verbose"):
        params.pop(name, None)
    return repr(sorted(params.items()))


def _edge_of_grid(table, named):
    """Why the best model's K may lie outside the grid, or None.

    Applies when the best model has siblings that differ from it only in
    ``n_components`` (same class, every other parameter equal) and were scored: the
    grid is their Ks, and the best sits at its top, or at its bottom above K = 1.
    """
    best = table.index[0]
    template = named[best]
    if "n_components" not in template.get_params(deep=False) or _isna(table.loc[best, "K"]):
        return None
    K = int(table.loc[best, "K"])
    key = (type(template), _params_except_k(template))
    grid = sorted(
        {
            int(table.loc[name, "K"])
            for name, est in named.items()
            if (type(est), _params_except_k(est)) == key
            and not _isna(table.loc[name, "K"])
            and np.isfinite(table.loc[name, "heldout_loglik"])
        }
    )
    if len(grid) < 2:
        return None
    if K == grid[-1]:
        side, fix = "largest", "larger"
    elif K == grid[0] and K > 1:
        side, fix = "smallest", "smaller"
    else:
        return None
    return (
        f"compare: the best model {best!r} has the {side} K of its grid "
        f"(K = {', '.join(map(str, grid))}), so the held-out optimum may lie outside "
        f"the grid; compare {fix} K too"
    )


def _isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def compare(
    models,
    X,
    y=None,
    *,
    cv=5,
    random_state=0,
    loo: str | None = None,
    loo_kwargs: dict | None = None,
    return_estimators: bool = False,
    progress=None,
    stop_early: bool = False,
):
    """Compare latent-variable models on the same data by likelihood.

    Every model is fitted to all of ``X`` (training log-likelihood, AIC, BIC) and,
    afresh, on the training part of each of the same K folds (held-out
    log-likelihood).  The estimators passed in are cloned, never fitted themselves.

    Parameters
    ----------
    models : dict {name: estimator} or list of estimators
        Unfitted estimators with a likelihood (``score_samples``), possibly the same
        class at several ``n_components``.  A list gets names like ``"PPCA(K=3)"``.
    X : array-like (n_samples, n_features)
        Data; NaN marks missing entries for models that accept them.
    y : array-like (n_samples,) or (n_samples, n_targets), optional
        Targets, passed to models that need them (:class:`latentlab.SupervisedPCA`,
        scored by the joint log p(x, y)); other models ignore it.
    cv : int or scikit-learn splitter, default=5
        Number of folds of one ``KFold(cv, shuffle=True, random_state)`` split, shared
        by all models (or a splitter, used as given).
    random_state : int, default=0
        Seeds the folds, the document completion split and posterior sampling.
    loo : {"nuts", "svi", "laplace"} or None, default=None
        Also draw from each model's posterior, ``est.sample_posterior(X, method=loo,
        random_state=random_state)`` on the model fitted to all of X (without
        replicated data sets: ``predictive=False`` where it takes it), and report its
        PSIS-LOO (:func:`latentlab.posterior.loo`: :func:`arviz.loo` for NUTS, the
        approximate-posterior correction for SVI and Laplace draws).
    loo_kwargs : dict, optional
        Extra keyword arguments for ``sample_posterior`` (e.g. ``num_samples``).
    return_estimators : bool, default=False
        Also return ``{name: estimator fitted to all of X}`` (None where that fit
        failed).
    progress : callable or bool, optional
        Wraps the iterable of ``(name, estimator)`` pairs as they are evaluated, e.g.
        ``tqdm.tqdm`` for a progress bar of one's own.  None (default): a bar over the
        models once the comparison has run for two seconds, on a terminal or in a
        notebook (off with ``latentlab.set_config(progress=False)``); False: none.
    stop_early : bool, default=False
        Stop fitting a model's folds once it is clearly worse than the best model
        so far with all folds scored: when its held-out log-likelihood, summed over
        the rows both have scored, is below the best's by more than 4 standard
        errors of that sum (paired over the rows; the per-row differences winsorised
        from below at their 10th percentile, which only favours the model and keeps
        a few catastrophic rows from hiding a clear deficit).  Its remaining folds would be
        expected to widen the gap; such a model's held-out columns cover the folds
        it was scored on (``folds``), and it is listed after the models scored on
        every fold.  Models are evaluated in the order given.  For a quick choice
        over a large grid; off by default because a stopped model's held-out
        columns are not on the same folds as the others' (a curve of
        ``heldout_loglik`` against K mixes them), and paired standard errors are
        small between similar models, so a model only slightly but consistently
        worse also stops.

    Returns
    -------
    table : pandas.DataFrame
        One row per model, indexed by name, best first.  Columns: ``family`` (class
        name; mixtures add their covariance type), ``K``, ``n_params`` (free
        parameters, rotation-invariant), ``loglik`` (training total), ``AIC``,
        ``BIC``, ``heldout_loglik`` (mean over folds of the per-row mean held-out
        log-likelihood), ``heldout_se`` (its standard error, std over folds /
        sqrt(folds)), ``heldout_total`` (sum over every held-out row), ``folds``
        (the folds scored: all but for a model that stopped early),
        ``heldout_diff`` (the best model's ``heldout_loglik`` minus this one's),
        ``heldout_se_diff`` (the standard error of that difference, paired over the
        held-out rows: sqrt(m var(d)) / m for the m per-row differences d, i.e.
        ``arviz.compare``'s ``dse`` per row; much smaller than ``heldout_se``, which
        mostly measures the spread of the folds that all models share),
        ``near_best`` ("best", "within 1 SE", "within 2 SE" or "beyond 2 SE" of the
        best, in units of ``heldout_se_diff``: a model within 1-2 SE is not clearly
        worse, and the simplest such model is a common choice); with ``loo``
        also ``elpd_loo``, ``elpd_loo_se``, ``p_loo`` and ``n_high_pareto_k`` (rows
        whose Pareto k exceeds ArviZ's ``good_k``: their LOO estimate is unreliable,
        and a warning names the models and rows, which ``table.attrs
        ["high_pareto_k_rows"]`` lists); ``warnings`` (None, or the warnings the
        model's fits raised, each kind once with the fits that raised it -- "full
        fit", "folds 0, 2" -- summed up in one warning for the table); then ``best``
        (True on the first row) and ``error`` (None, or why a model failed: its
        affected columns are NaN).  Rows are sorted by
        ``heldout_loglik``, highest first; ``table.attrs`` records the criterion,
        folds, seed and how each column was computed.
    estimators : dict, only with ``return_estimators=True``

    Raises
    ------
    ValueError
        For empty ``models``, an estimator without a likelihood, ``cv < 2``, X not
        2-D or with infinities, y of the wrong length, an unknown ``loo`` or, with
        ``loo``, a model without ``sample_posterior``.  A model that fails to fit
        (a ``ValueError`` from it, e.g. ``n_components`` too large) does not stop
        the comparison: it gets NaN, a message in ``error`` and a warning.

    Warns
    -----
    UserWarning
        When the best model has siblings differing from it only in
        ``n_components`` and its K is the largest of them (or the smallest, above
        1): the best K may lie outside the grid.  The message is also in
        ``table.attrs["edge_of_grid"]`` (None otherwise).

    Notes
    -----
    Models with ``completion_log_likelihood`` (pLSA) are scored on held-out
    documents by completion: each document is folded in on half its tokens and the
    other half is scored, since folding in on all of them would score the tokens
    used to fit the document's topic mixture.  Supervised models score log p(x, y),
    the others log p(x): compare those two kinds only among themselves.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(100, 5)) @ np.diag([3, 2, 1, 1, 1])
    >>> table = latentlab.compare([latentlab.PPCA(K) for K in (1, 2, 3)], X, cv=3)
    >>> list(table.columns[:4])
    ['family', 'K', 'n_params', 'loglik']
    """
    import pandas as pd

    named = _check_models(models)
    X, y = _check_data(X, y)
    if loo is not None:
        if loo not in LOO_METHODS:
            raise ValueError(f"Unknown loo={loo!r}; expected None or one of {LOO_METHODS}")
        lacking = [name for name, est in named.items() if not hasattr(est, "sample_posterior")]
        if lacking:
            raise ValueError(
                f"loo={loo!r} needs posterior draws, but model(s) {lacking} have no "
                "sample_posterior method; drop them or leave loo=None"
            )
    supervised = [name for name, est in named.items() if _is_supervised(est)]
    if supervised and y is None:
        raise ValueError(f"model(s) {supervised} need targets: pass y")
    if supervised and len(supervised) < len(named):
        warnings.warn(
            f"compare: supervised model(s) {supervised} score log p(x, y), the others "
            "log p(x): their likelihoods are not comparable",
            UserWarning,
            stacklevel=2,
        )
    folds = _folds(cv, random_state, X.shape[0])
    rows, fitted, pointwise = {}, {}, {}
    if progress is None:
        from latentlab._progress import progress as default_progress

        progress = partial(default_progress, desc="compare")
    elif progress is False:
        progress = iter
    leader = None  # (heldout_loglik, pointwise) of the best model on every fold so far
    for name, est in progress(named.items()):
        rows[name], fitted[name], pointwise[name] = _evaluate(
            name,
            est,
            X,
            y,
            folds,
            random_state,
            loo,
            loo_kwargs or {},
            leader[1] if stop_early and leader is not None else None,
        )
        score = rows[name]["heldout_loglik"]
        if rows[name]["folds"] == len(folds) and (leader is None or score > leader[0]):
            leader = (score, pointwise[name])

    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "model"
    for column in ("K", "n_params", "n_high_pareto_k"):
        if column in table:
            table[column] = table[column].astype("Int64")  # integers, missing where failed
    # models that stopped early after those scored on every fold (their held-out
    # columns cover fewer folds), each group by heldout_loglik; failures last
    table["_stopped"] = table["folds"] < len(folds)
    table = table.sort_values(
        ["_stopped", "heldout_loglik"], ascending=[True, False], na_position="last", kind="stable"
    ).drop(columns="_stopped")
    fold_sizes = [len(test) for _, test in folds]
    diff, se_diff, near = _paired_differences(table, pointwise, fold_sizes)
    at = table.columns.get_loc("heldout_total") + 1
    table.insert(at, "heldout_diff", diff)
    table.insert(at + 1, "heldout_se_diff", se_diff)
    table.insert(at + 2, "near_best", near)
    table.insert(table.columns.get_loc("error"), "best", False)
    edge = None
    if np.isfinite(table["heldout_loglik"].iloc[0]):
        table.iloc[0, table.columns.get_loc("best")] = True
        edge = _edge_of_grid(table, named)
        if edge:
            warnings.warn(edge, UserWarning, stacklevel=2)
    completion = [name for name, est in named.items() if hasattr(est, "completion_log_likelihood")]
    table.attrs.update(
        criterion="heldout_loglik",
        higher_is_better=True,
        best=table.index[0] if table["best"].iloc[0] else None,
        cv=len(folds),
        random_state=random_state,
        n_samples=int(X.shape[0]),
        heldout=(
            "mean over folds of the mean held-out log-likelihood per row, each fold "
            "scored by a model fitted on the other folds; se = std over folds / sqrt(folds)"
        ),
        heldout_diff=(
            "the best model's heldout_loglik minus this one's; heldout_se_diff is its "
            "standard error paired over the held-out rows, sqrt(m var(d)) / m for the m "
            "per-row differences d (arviz.compare's dse, per row); near_best: whether "
            "the difference is within 1 or 2 such SE"
        ),
        stopped_early=(
            "a model whose held-out log-likelihood trailed the best complete one by more "
            "than 4 paired SE on the rows both had scored (differences winsorised from "
            "below at their 10th percentile) was not fitted on its remaining folds "
            "(folds < cv); its held-out columns cover the folds it was scored on"
            if stop_early
            else None
        ),
        edge_of_grid=edge,
        completion_models=completion,
        completion=(
            f"document completion: fold in on {COMPLETION_FRACTION:.0%} of each held-out "
            "document's tokens, score the rest"
            if completion
            else None
        ),
        loo=loo,
    )
    _warn_about_table(table)
    return (table, fitted) if return_estimators else table
