"""How many factors to retain: Horn's parallel analysis, Velicer's minimum average
partial (MAP) test, and :func:`how_many_factors`, which sets them beside the factor
models' BIC, AIC and cross-validated held-out log-likelihood in one table.

Both read the correlation matrix of :func:`latentlab.psychometrics._correlation.
correlation_input`: the sample correlation of complete data, the full-information
ML (saturated normal) correlation of data with NaN, or a given covariance or
correlation matrix (``covariance=``, with ``n_samples=`` for parallel analysis).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from latentlab._shapes import BATCH_ENTRIES
from latentlab._validation import check_option, check_positive_int
from latentlab.psychometrics._correlation import (
    correlation_input,
    data_matrix,
    saturated_correlation,
)

__all__ = ["how_many_factors", "parallel_analysis", "velicer_map"]


def _descending_eigenvalues(R: np.ndarray) -> np.ndarray:
    """Eigenvalues of a (stack of) symmetric matrices, largest first."""
    return np.linalg.eigvalsh(R)[..., ::-1]


def _reduced(R: np.ndarray) -> np.ndarray:
    """A (stack of) correlation matrices with squared multiple correlations on the
    diagonal: ``1 - 1 / diag(R^-1)``."""
    smc = 1.0 - 1.0 / np.diagonal(np.linalg.inv(R), axis1=-2, axis2=-1)
    out = R.copy()
    d = R.shape[-1]
    out[..., np.arange(d), np.arange(d)] = smc
    return out


def _correlations(Z: np.ndarray) -> np.ndarray:
    """Sample correlation matrices of a stack of complete data sets (b, n, d)."""
    Z = Z - Z.mean(axis=1, keepdims=True)
    C = np.einsum("bni,bnj->bij", Z, Z, optimize=True)  # a BLAS product per data set
    s = np.sqrt(np.diagonal(C, axis1=1, axis2=2))
    R = C / (s[:, :, None] * s[:, None, :])
    d = R.shape[-1]
    R[:, np.arange(d), np.arange(d)] = 1.0
    return R


def _leading_count(observed: np.ndarray, reference: np.ndarray) -> int:
    """How many leading observed eigenvalues exceed the reference, counted up to the
    first that does not."""
    above = observed > reference
    return int(above.size if above.all() else np.argmin(above))


def _eigenvalue_table(stack: np.ndarray, kind: str, quantile: float) -> dict:
    """Mean and quantile, per eigenvalue index, of the components' and/or factors'
    eigenvalues of a stack of correlation matrices."""
    out = {}
    if kind in ("both", "pc"):
        out["components"] = _descending_eigenvalues(stack)
    if kind in ("both", "fa"):
        out["factors"] = _descending_eigenvalues(_reduced(stack))
    return out


def _check_quantile(quantile) -> None:
    if isinstance(quantile, bool) or not isinstance(quantile, int | float | np.floating):
        raise ValueError(f"quantile must be a number in (0, 1), got {quantile!r}")
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must lie strictly between 0 and 1, got {quantile!r}")


def parallel_analysis(
    X=None,
    *,
    covariance=None,
    n_samples=None,
    kind="both",
    n_iter=100,
    quantile=0.95,
    resample=False,
    random_state=None,
) -> pd.DataFrame:
    """Horn's parallel analysis: the number of components and factors whose
    eigenvalues exceed those of uncorrelated data of the same size.

    The observed eigenvalues are those of the correlation matrix (components) and of
    the reduced correlation matrix, with each variable's squared multiple correlation
    with the others on the diagonal (factors: the principal-axis variant of
    Humphreys & Montanelli, 1975).  The reference eigenvalues come from ``n_iter``
    data sets of independent standard normal variables of the same size (``n``
    rows, ``d`` columns), treated the same way, and with ``resample=True`` also from
    ``n_iter`` permutations of the data, each column permuted independently (which
    keeps every variable's distribution and destroys the correlations).  The number
    retained is the count of leading observed eigenvalues above the ``quantile`` of
    the reference eigenvalue of the same rank, up to the first that is not (Horn,
    1965; with the 95th percentile of Glorfeld, 1995).

    R's ``psych::fa.parallel`` differs by default: its factor eigenvalues are those
    of the correlation matrix with the communalities of a one-factor minres solution
    on the diagonal (``SMC=FALSE``); ``fa.parallel(x, SMC=TRUE)`` is this variant.
    Its resampling draws each column with replacement (a bootstrap) instead of
    permuting it, and it counts against the simulated reference even when it also
    resamples; here the resampled reference decides when ``resample=True``.  Its
    ``quant=.95`` and the quantile rule (type 7) are those used here.

    Parameters
    ----------
    X : array-like or DataFrame (n_samples, n_variables), optional
        Data, NaN for missing entries (then the correlation of the saturated normal
        model fitted by full-information ML, and ``n`` the number of rows); needs
        more rows than columns.
    covariance : array-like or DataFrame (d, d), optional
        A covariance or correlation matrix instead of ``X``; ``resample=True`` needs
        data.
    n_samples : int, optional
        Number of observations behind ``covariance`` (required with it, and more than
        the number of variables).
    kind : {"both", "pc", "fa"}, default="both"
        Eigenvalues of components (``"pc"``), factors (``"fa"``) or both.
    n_iter : int, default=100
        Simulated (and resampled) data sets.
    quantile : float, default=0.95
        The reference quantile of each simulated eigenvalue, in (0, 1).
    resample : bool, default=False
        Also permute the data's columns independently.  With NaN entries the observed
        values of each column are permuted among its observed rows (the missingness
        pattern is kept) and each permuted data set's correlation is the saturated
        normal fit again: this reference reflects the missing data, the simulated
        (complete) one does not, and it is slower (one EM fit per data set).
    random_state : int, numpy.random.Generator, RandomState or None, default=None
        Seed of the simulations and permutations (anything
        :func:`numpy.random.default_rng` takes).

    Returns
    -------
    pandas.DataFrame
        One row per eigenvalue rank (index ``1..d``, named ``"eigenvalue"``), with
        columns ``observed_components``, ``observed_factors``, then for each
        reference (``simulated``, and ``resampled`` when asked) and each kind its
        ``..._mean`` and ``..._quantile`` (e.g. ``simulated_factors_quantile``); only
        the columns of the ``kind`` asked for.  ``attrs`` holds ``n_components`` and
        ``n_factors`` (None for a kind not asked for), ``reference`` (``"simulated"``
        or ``"resampled"``: which quantiles the counts are against), ``quantile``,
        ``n_iter`` and ``n_samples``.

    References
    ----------
    Horn, J. L. (1965). A rationale and test for the number of factors in factor
    analysis. *Psychometrika*, 30, 179-185.

    Humphreys, L. G., & Montanelli, R. G. (1975). An investigation of the parallel
    analysis criterion for determining the number of common factors. *Multivariate
    Behavioral Research*, 10, 193-205.

    Glorfeld, L. W. (1995). An improvement on Horn's parallel analysis methodology
    for selecting the correct number of factors to retain. *Educational and
    Psychological Measurement*, 55, 377-393.

    Examples
    --------
    The correlations of eight variables with two common factors, from 200
    observations:

    >>> import numpy as np
    >>> from latentlab.psychometrics.retention import parallel_analysis
    >>> L = np.array([[0.8, 0.75, 0.7, 0.65, 0.1, 0, 0, 0.1], [0, 0.1, 0, 0, 0.8, 0.7, 0.7, 0.6]])
    >>> R = L.T @ L + np.diag(1 - (L**2).sum(axis=0))
    >>> table = parallel_analysis(covariance=R, n_samples=200, n_iter=50, random_state=0)
    >>> print(table.attrs["n_components"], table.attrs["n_factors"])
    2 2
    >>> print(table["observed_factors"].round(2).tolist()[:3])
    [2.17, 1.71, -0.08]
    """
    check_option("kind", kind, ("both", "pc", "fa"))
    n_iter = check_positive_int("n_iter", n_iter)
    _check_quantile(quantile)
    if resample and X is None:
        raise ValueError("resample=True permutes the data: pass X, not covariance=")
    R, n, names = correlation_input(X, covariance=covariance, n_samples=n_samples, n_above_d=True)
    d = R.shape[0]
    rng = np.random.default_rng(random_state)

    columns = {}
    observed = _eigenvalue_table(R[None], kind, quantile)
    for what, values in observed.items():
        columns[f"observed_{what}"] = values[0]

    batch = max(1, BATCH_ENTRIES // (n * d))
    references = {"simulated": []}
    for start in range(0, n_iter, batch):
        size = min(batch, n_iter - start)
        references["simulated"].append(_correlations(rng.standard_normal((size, n, d))))

    if resample:
        A, _ = data_matrix(X)
        references["resampled"] = []
        missing = np.isnan(A)
        if not missing.any():
            for start in range(0, n_iter, batch):
                size = min(batch, n_iter - start)
                # each column permuted on its own (one data set at a time: a batched
                # call leaves the batch axis innermost in memory, far slower)
                stack = np.stack([rng.permuted(A, axis=0) for _ in range(size)])
                references["resampled"].append(_correlations(stack))
        else:
            rows = [np.flatnonzero(~missing[:, j]) for j in range(d)]
            permuted = []
            for _ in range(n_iter):
                B = A.copy()
                for j, r in enumerate(rows):
                    B[r, j] = rng.permutation(A[r, j])
                permuted.append(saturated_correlation(B))
            references["resampled"].append(np.stack(permuted))

    quantiles = {}
    for source, stacks in references.items():
        table = _eigenvalue_table(np.concatenate(stacks), kind, quantile)
        for what, values in table.items():
            columns[f"{source}_{what}_mean"] = values.mean(axis=0)
            q = np.quantile(values, quantile, axis=0)
            columns[f"{source}_{what}_quantile"] = q
            quantiles[source, what] = q

    reference = "resampled" if resample else "simulated"
    frame = pd.DataFrame(columns, index=pd.RangeIndex(1, d + 1, name="eigenvalue"))
    counts = {}
    for what, key in (("components", "n_components"), ("factors", "n_factors")):
        if (reference, what) in quantiles:
            counts[key] = _leading_count(columns[f"observed_{what}"], quantiles[reference, what])
        else:
            counts[key] = None
    frame.attrs.update(
        n_components=counts["n_components"],
        n_factors=counts["n_factors"],
        reference=reference,
        quantile=float(quantile),
        n_iter=n_iter,
        n_samples=n,
    )
    if names is not None:
        frame.attrs["variables"] = list(names)
    return frame


def map_criterion(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average squared and fourth-power partial correlations of a correlation matrix
    after partialling out its first m principal components, m = 0..d-1."""
    d = R.shape[0]
    values, vectors = np.linalg.eigh(R)
    values, vectors = values[::-1], vectors[:, ::-1]
    loadings = vectors * np.sqrt(np.clip(values, 0.0, None))
    off = ~np.eye(d, dtype=bool)
    squared, fourth = np.empty(d), np.empty(d)
    residual = R.copy()
    for m in range(d):
        if m:
            residual = residual - np.outer(loadings[:, m - 1], loadings[:, m - 1])
        s = np.sqrt(np.diag(residual))
        partial = (residual / np.outer(s, s))[off]
        squared[m] = np.mean(partial**2)
        fourth[m] = np.mean(partial**4)
    return squared, fourth


def velicer_map(X=None, *, covariance=None, n_samples=None) -> pd.DataFrame:
    """Velicer's minimum average partial (MAP) test for the number of components.

    For m = 0, 1, ..., d-1 the first m principal components of the correlation
    matrix R are partialled out: with loadings ``A_m`` (eigenvectors times the square
    roots of their eigenvalues), the residual ``C_m = R - A_m A_m^T`` is rescaled to
    unit diagonal, and its off-diagonal entries (the partial correlations given the
    components) are averaged squared (Velicer, 1976) or raised to the fourth power
    (Velicer, Eaton & Fava, 2000) over the d(d-1) ordered pairs.  The number of
    components retained is the m of the smallest average; m = 0 (the average of the
    correlations themselves) means none.

    R's ``psych::VSS``/``vss`` computes the same squared averages (its ``map``) but
    only for m = 1..min(n, d-1) (``n=8`` by default): it has no m = 0 row, so it
    never answers 0, and it does not report the fourth-power variant.  Its rows are
    the rows m >= 1 here.

    Parameters
    ----------
    X : array-like or DataFrame (n_samples, n_variables), optional
        Data, NaN for missing entries (then the correlation of the saturated normal
        model fitted by full-information ML).
    covariance : array-like or DataFrame (d, d), optional
        A covariance or correlation matrix instead of ``X``.
    n_samples : int, optional
        Number of observations behind ``covariance``; not used (checked if given).

    Returns
    -------
    pandas.DataFrame
        Index ``m`` = 0..d-1 (named ``"n_components"``), columns ``squared`` and
        ``fourth_power``; ``attrs["n_factors"]`` is the m minimising ``squared`` and
        ``attrs["n_factors_fourth"]`` the m minimising ``fourth_power``.

    References
    ----------
    Velicer, W. F. (1976). Determining the number of components from the matrix of
    partial correlations. *Psychometrika*, 41, 321-327.

    Velicer, W. F., Eaton, C. A., & Fava, J. L. (2000). Construct explication through
    factor or component analysis: A review and evaluation of alternative procedures
    for determining the number of factors or components. In R. D. Goffin & E.
    Helmes (Eds.), *Problems and Solutions in Human Assessment* (pp. 41-71). Kluwer.

    O'Connor, B. P. (2000). SPSS and SAS programs for determining the number of
    components using parallel analysis and Velicer's MAP test. *Behavior Research
    Methods, Instruments, & Computers*, 32, 396-402.

    Examples
    --------
    >>> import numpy as np
    >>> from latentlab.psychometrics.retention import velicer_map
    >>> L = np.array([[0.8, 0.75, 0.7, 0.65, 0.1, 0, 0, 0.1], [0, 0.1, 0, 0, 0.8, 0.7, 0.7, 0.6]])
    >>> R = L.T @ L + np.diag(1 - (L**2).sum(axis=0))
    >>> table = velicer_map(covariance=R)
    >>> print(table.attrs["n_factors"], table.attrs["n_factors_fourth"])
    2 2
    >>> print(table["squared"].round(2).tolist()[:4])
    [0.11, 0.14, 0.05, 0.1]
    """
    R, _, _ = correlation_input(X, covariance=covariance, n_samples=n_samples, need_n=False)
    squared, fourth = map_criterion(R)
    frame = pd.DataFrame(
        {"squared": squared, "fourth_power": fourth},
        index=pd.RangeIndex(R.shape[0], name="n_components"),
    )
    frame.attrs["n_factors"] = int(np.argmin(squared))
    frame.attrs["n_factors_fourth"] = int(np.argmin(fourth))
    return frame


#: How :func:`latentlab.compare`'s one warning for its models' fit warnings begins.
_FIT_WARNINGS = "compare: the fits of "


def _check_max_factors(max_factors, d: int) -> int:
    """``max_factors`` as an int in 0..ledermann_bound(d) (None: the bound)."""
    from latentlab.models.factor_analysis import ledermann_bound

    bound = ledermann_bound(d)
    if max_factors is None:
        return bound
    if isinstance(max_factors, bool) or not isinstance(max_factors, int | np.integer):
        raise ValueError(f"max_factors must be an integer or None, got {max_factors!r}")
    if max_factors < 0:
        raise ValueError(f"max_factors must be >= 0 (K = 0 is independence), got {max_factors}")
    if max_factors > bound:
        raise ValueError(
            f"max_factors={max_factors} exceeds the Ledermann bound for {d} variables "
            f"({bound}): beyond it the factors are not identified and FactorAnalysis "
            f"refuses them; pass max_factors <= {bound} or None"
        )
    return int(max_factors)


def _seeds(random_state):
    """(integer seed of the cross-validation folds, seed of parallel analysis).

    An integer seeds both as it is, so that :func:`latentlab.compare` and
    :func:`parallel_analysis` called with it reproduce the table; anything else goes
    through :func:`numpy.random.default_rng`, whose generator draws the folds' seed
    first and then the simulations."""
    if isinstance(random_state, int | np.integer) and not isinstance(random_state, bool):
        return int(random_state), int(random_state)
    rng = np.random.default_rng(random_state)
    return int(rng.integers(2**31 - 1)), rng


def _argbest(values: pd.Series, lowest: bool):
    """The index label of the lowest (or highest) finite value; None if none is."""
    finite = values[np.isfinite(values.to_numpy(dtype=np.float64))]
    if finite.empty:
        return None
    return int(finite.idxmin() if lowest else finite.idxmax())


def how_many_factors(
    X, *, max_factors=None, cv=5, n_iter=100, quantile=0.95, random_state=None
) -> pd.DataFrame:
    """How many factors: every criterion side by side, one row per number of factors.

    For K = 0, 1, ..., ``max_factors`` the table sets beside each other the
    criteria that each answer the question in their own way:

    * Horn's parallel analysis (:func:`parallel_analysis`, ``kind="fa"``): the K-th
      eigenvalue of the reduced correlation matrix (squared multiple correlations on
      the diagonal) and the ``quantile`` of the K-th eigenvalue of ``n_iter``
      simulated uncorrelated data sets of the same size; it retains the leading
      eigenvalues above their reference.
    * Velicer's MAP (:func:`velicer_map`): the average squared (and fourth-power)
      partial correlation left after partialling out the first K principal
      components; it retains the K of the smallest average.
    * Maximum-likelihood factor analysis with K factors
      (:class:`latentlab.FactorAnalysis`; K = 0 is the model of independent
      variables), scored by :func:`latentlab.compare` on the same data: BIC and AIC
      of the fit on all rows (lowest is best), and the log-likelihood per row of
      held-out rows, cross-validated over ``cv`` shared folds (highest is best),
      with its standard error and the paired standard error of its difference from
      the best K.

    Parallel analysis and MAP read the correlation matrix once: the sample
    correlation of complete data, or with NaN entries the correlation of the
    saturated normal model fitted by full-information maximum likelihood; the
    factor models are fitted to the observed entries by FIML too.  Rows with every
    entry missing are dropped.

    Parameters
    ----------
    X : array-like or DataFrame (n_samples, n_variables)
        Data, NaN for missing entries; needs more rows than columns.
    max_factors : int or None, default=None
        The largest K in the table, from 0 up to the Ledermann bound of the number
        of variables d (:func:`~latentlab.models.factor_analysis.ledermann_bound`,
        the largest K whose factor model is identified); None takes the bound.
    cv : int or scikit-learn splitter, default=5
        The folds of the held-out log-likelihood, as :func:`latentlab.compare`'s
        ``cv``.
    n_iter : int, default=100
        Simulated data sets of parallel analysis.
    quantile : float, default=0.95
        Parallel analysis's reference quantile, in (0, 1).
    random_state : int, numpy.random.Generator, RandomState or None, default=None
        Seeds the cross-validation folds and parallel analysis's simulations.  An
        integer is passed as it is to both, so that ``latentlab.compare(...,
        random_state=s)`` and ``parallel_analysis(..., random_state=s)`` reproduce
        the table's columns; otherwise a generator made from it by
        :func:`numpy.random.default_rng` draws the folds' seed (in
        ``attrs["random_state"]``) and then the simulations.

    Returns
    -------
    pandas.DataFrame
        Index K = 0..``max_factors`` (named ``"n_factors"``), columns:

        ``eigenvalue``, ``parallel_quantile``
            The K-th observed reduced-correlation eigenvalue and its simulated
            reference quantile (NaN at K = 0).
        ``map``, ``map_fourth``
            Velicer's average squared and fourth-power partial correlation after K
            components.
        ``n_params``, ``loglik``, ``bic``, ``aic``
            FactorAnalysis(K) fitted to all of X: free parameters, log-likelihood,
            BIC and AIC (``FactorAnalysis(K).fit(X).bic(X)``).
        ``heldout_loglik``, ``heldout_se``, ``heldout_diff``, ``heldout_se_diff``, ``near_best``
            :func:`latentlab.compare`'s columns: the mean held-out log-likelihood
            per row and its standard error over folds; the best K's minus this
            one's, its standard error paired over the held-out rows, and whether
            that difference is within 1 or 2 such SE (``"best"``, ``"within 1
            SE"``, ``"within 2 SE"``, ``"beyond 2 SE"``).
        ``warnings``, ``error``
            compare's: the warnings the fits of this K raised (Heywood cases are
            common beyond the K the data support), and why a fit failed (its
            columns are then NaN).

        ``attrs`` holds each criterion's choice of K (None where it has none):
        ``parallel_analysis`` (``parallel_analysis(...).attrs["n_factors"]``,
        counted over all d eigenvalues), ``map`` and ``map_fourth`` (the m of the
        smallest average over m = 0..d-1, as :func:`velicer_map`), ``bic`` and
        ``aic`` (lowest in the table), ``heldout`` (highest held-out
        log-likelihood) and ``heldout_one_se`` (the smallest K whose held-out
        log-likelihood is within one paired SE of the best: ``near_best`` is
        ``"best"`` or ``"within 1 SE"``); ``summary``, a one-line account of them;
        and ``max_factors``, ``ledermann_bound``, ``n_samples``, ``n_features``,
        ``cv`` (number of folds), ``random_state`` (the folds' seed),
        ``n_iter`` and ``quantile``.

    Raises
    ------
    ValueError
        For ``max_factors`` not an integer, negative or above the Ledermann bound;
        data that :func:`parallel_analysis` refuses (fewer rows than columns,
        constant columns, a singular correlation); a bad ``n_iter``, ``quantile``
        or ``cv``.

    Warns
    -----
    UserWarning
        When the fits of a K that some criterion chose raised warnings (a Heywood
        case, no convergence); those of the other K are only in the ``warnings``
        column, as a K beyond what the data support often ends at a Heywood case.
        And :func:`latentlab.compare`'s: a K whose fit failed, and a best held-out
        K at ``max_factors`` when that is below the Ledermann bound (a larger K may
        score better).

    Notes
    -----
    MAP partials out principal components, not factors, and parallel analysis
    counts eigenvalues; both may choose a K outside the table.  Held-out
    log-likelihood measures prediction, so with many rows it keeps small extra
    factors that BIC, which penalises each parameter by log(n), drops; AIC is in
    between.  Where the criteria disagree, the one-SE choice and the size of the
    paired differences say how much the held-out likelihood prefers its K.

    References
    ----------
    Horn, J. L. (1965). A rationale and test for the number of factors in factor
    analysis. *Psychometrika*, 30, 179-185.

    Velicer, W. F. (1976). Determining the number of components from the matrix of
    partial correlations. *Psychometrika*, 41, 321-327.

    Schwarz, G. (1978). Estimating the dimension of a model. *The Annals of
    Statistics*, 6, 461-464.

    Akaike, H. (1987). Factor analysis and AIC. *Psychometrika*, 52, 317-332.

    Hastie, T., Tibshirani, R., & Friedman, J. (2009). *The Elements of Statistical
    Learning* (2nd ed.), section 7.10 (cross-validation and the one-standard-error
    rule). Springer.

    Examples
    --------
    Six variables, two factors, 200 rows:

    >>> import numpy as np
    >>> from latentlab.psychometrics.retention import how_many_factors
    >>> rng = np.random.default_rng(0)
    >>> L = np.array([[0.8, 0.7, 0.8, 0, 0, 0], [0, 0, 0, 0.8, 0.7, 0.8]])
    >>> X = rng.normal(size=(200, 2)) @ L + 0.6 * rng.normal(size=(200, 6))
    >>> table = how_many_factors(X, cv=3, n_iter=20, random_state=0)
    >>> table.index.tolist()
    [0, 1, 2, 3]
    >>> print({key: table.attrs[key] for key in ("parallel_analysis", "map", "bic", "heldout")})
    {'parallel_analysis': 2, 'map': 2, 'bic': 2, 'heldout': 2}
    """
    from latentlab.compare import compare
    from latentlab.estimators.factor_analysis import FactorAnalysis
    from latentlab.models.factor_analysis import ledermann_bound

    A, _ = data_matrix(X)
    d = A.shape[1]
    max_factors = _check_max_factors(max_factors, d)
    n_iter = check_positive_int("n_iter", n_iter)
    _check_quantile(quantile)
    fold_seed, simulation_seed = _seeds(random_state)

    R, n, _ = correlation_input(A, n_above_d=True)
    parallel = parallel_analysis(
        covariance=R,
        n_samples=n,
        kind="fa",
        n_iter=n_iter,
        quantile=quantile,
        random_state=simulation_seed,
    )
    partial = velicer_map(covariance=R)

    names = {K: f"FactorAnalysis(K={K})" for K in range(max_factors + 1)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scored = compare(
            {name: FactorAnalysis(K) for K, name in names.items()},
            A,
            cv=cv,
            random_state=fold_seed,
        )
    bound = ledermann_bound(d)
    for warning in caught:
        text = str(warning.message)
        # the best K at the bound: no larger K can be fitted, so no advice to try one
        if max_factors == bound and text == scored.attrs["edge_of_grid"]:
            continue
        # the fits' warnings: only those of a chosen K are reported, below (Heywood
        # cases are common beyond the K the data support, which the table scans)
        if text.startswith(_FIT_WARNINGS):
            continue
        if text.startswith("compare:"):  # compare's own: at the caller's line
            warnings.warn(warning.message, warning.category, stacklevel=2)
        else:  # anything else where it arose, so that filters by module still apply
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )

    scored = scored.loc[list(names.values())]
    index = pd.RangeIndex(max_factors + 1, name="n_factors")
    eigenvalue = np.full(max_factors + 1, np.nan)
    reference = np.full(max_factors + 1, np.nan)
    eigenvalue[1:] = parallel["observed_factors"].to_numpy()[:max_factors]
    reference[1:] = parallel["simulated_factors_quantile"].to_numpy()[:max_factors]
    table = pd.DataFrame(
        {
            "eigenvalue": eigenvalue,
            "parallel_quantile": reference,
            "map": partial["squared"].to_numpy()[: max_factors + 1],
            "map_fourth": partial["fourth_power"].to_numpy()[: max_factors + 1],
            "n_params": scored["n_params"].to_numpy(),
            "loglik": scored["loglik"].to_numpy(dtype=np.float64),
            "bic": scored["BIC"].to_numpy(dtype=np.float64),
            "aic": scored["AIC"].to_numpy(dtype=np.float64),
            "heldout_loglik": scored["heldout_loglik"].to_numpy(dtype=np.float64),
            "heldout_se": scored["heldout_se"].to_numpy(dtype=np.float64),
            "heldout_diff": scored["heldout_diff"].to_numpy(dtype=np.float64),
            "heldout_se_diff": scored["heldout_se_diff"].to_numpy(dtype=np.float64),
            "near_best": scored["near_best"].to_numpy(),
            "warnings": scored["warnings"].to_numpy(),
            "error": scored["error"].to_numpy(),
        },
        index=index,
    )
    table["n_params"] = table["n_params"].astype("Int64")

    near = table.index[table["near_best"].isin(["best", "within 1 SE"])]
    choices = {
        "parallel_analysis": parallel.attrs["n_factors"],
        "map": partial.attrs["n_factors"],
        "map_fourth": partial.attrs["n_factors_fourth"],
        "bic": _argbest(table["bic"], lowest=True),
        "aic": _argbest(table["aic"], lowest=True),
        "heldout": _argbest(table["heldout_loglik"], lowest=False),
        "heldout_one_se": int(near.min()) if len(near) else None,
    }
    labels = {
        "parallel_analysis": "parallel analysis",
        "map": "MAP",
        "map_fourth": "MAP (4th power)",
        "bic": "BIC",
        "aic": "AIC",
        "heldout": "held-out",
        "heldout_one_se": "held-out one-SE",
    }
    chosen = sorted({K for K in choices.values() if K is not None and K <= max_factors})
    flagged = [K for K in chosen if pd.notna(table.loc[K, "warnings"])]
    if flagged:
        listed = "; ".join(f"K = {K}: {table.loc[K, 'warnings']}" for K in flagged)
        warnings.warn(
            f"how_many_factors: the factor analyses of a chosen K raised warnings "
            f"({listed}); the table's 'warnings' column lists those of every K",
            UserWarning,
            stacklevel=2,
        )
    picked = ", ".join(f"{labels[key]} {value}" for key, value in choices.items())
    distinct = {value for value in choices.values() if value is not None}
    verdict = f"all say {distinct.pop()}" if len(distinct) == 1 else "they disagree"
    summary = (
        f"How many factors (n = {n}, d = {d}, K = 0..{max_factors}, {scored.attrs['cv']}-fold "
        f"CV): {picked}; {verdict}"
    )
    table.attrs.update(
        choices,
        summary=summary,
        max_factors=max_factors,
        ledermann_bound=bound,
        n_samples=n,
        n_features=d,
        cv=scored.attrs["cv"],
        random_state=fold_seed,
        n_iter=n_iter,
        quantile=float(quantile),
    )
    return table
