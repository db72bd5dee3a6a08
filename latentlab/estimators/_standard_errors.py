"""The body of every generative estimator's ``covariance_of_estimates``,
``standard_errors`` and ``confidence_intervals``: the fit's posterior problem
(:mod:`latentlab.estimators._posterior_hooks`, the same target ``sample_posterior``
draws from), the estimator's reported quantities (its ``_reported_estimates``
hook), and the delta method of :mod:`latentlab.inference.information`.

A hook ``_reported_estimates(problem, X)`` returns a :class:`Reported`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from sklearn.utils.validation import check_is_fitted

from latentlab._validation import check_option
from latentlab.inference.information import VCOV_TYPES, EstimateCovariance, estimate_covariance

__all__ = [
    "Reported",
    "covariance_of_estimates",
    "estimates_table",
    "to_data_units",
    "principal_frame",
    "supervised_estimates",
]


class Reported(NamedTuple):
    """What an estimator reports, for the delta method."""

    # the reported quantities (a dict of arrays, in data units and the fit's own frame)
    # from the target's constrained site values, traceable
    report: Callable
    labels: dict  # name -> one list of coordinate labels per axis
    fixed: dict  # site -> bool array of the entries held at a bound
    gauge: bool  # loadings in the lower-trapezoidal gauge (likelihood flat in rotations)
    # the rows' Gaussian moments (mean, covariance) from the site values, for
    # vcov="expected"; None: not a Gaussian-rows model
    moments: Callable | None = None
    # align(values, reference) -> values: a refit's reported quantities (NumPy) put in
    # the order and signs of the fit's, for vcov="bootstrap"; None: no bootstrap
    align: Callable | None = None
    # at_fit() -> the reported quantities at the fit, read off its attributes (NumPy;
    # what ``report`` gives at the fitted point, without tracing it)
    at_fit: Callable | None = None


VCOV = (*VCOV_TYPES, "bootstrap")

# The Newton decrement (half g' H^-1 g, the gain a Newton step predicts) per row above
# which the fit is not taken for a maximum of X's likelihood: refused beyond the
# first, warned about beyond the second.
NOT_A_MAXIMUM = 1e-4
LOOSE_MAXIMUM = 1e-7


def _hook(est):
    hook = getattr(est, "_reported_estimates", None)
    if hook is None:
        raise ValueError(
            f"standard errors are not available for {type(est).__name__}: "
            f"{getattr(est, '_no_standard_errors', 'it has no declaration to differentiate')}"
        )
    return hook


def covariance_of_estimates(
    est, X, y=None, *, vcov=None, n_bootstrap=200, random_state=None
) -> EstimateCovariance:
    """:class:`~latentlab.inference.information.EstimateCovariance` of ``est``'s fit
    on its training data ``X``."""
    from numpyro.infer.util import log_likelihood

    from latentlab.inference.posterior.laplace import UnconstrainedCoordinates

    check_is_fitted(est)
    # an M-estimator (a tempered objective) has no information-based covariance of its own
    m_estimator = getattr(est, "_m_estimator", lambda: None)()
    if vcov is None:
        vcov = "observed" if m_estimator is None else "sandwich"
    check_option("vcov", vcov, VCOV)
    if m_estimator is not None and vcov in ("observed", "expected"):
        raise ValueError(
            f"vcov={vcov!r} is not a covariance of {type(est).__name__}'s estimates: "
            f"{m_estimator}; use vcov='sandwich' (the default) or 'bootstrap'"
        )
    hook = _hook(est)
    if vcov == "bootstrap":
        return _bootstrap(est, X, y, n_bootstrap, random_state)
    with est._precision():
        problem = est._posterior_problem(X, y, None)
        if vcov != "observed" and problem.use_prior:
            raise ValueError(
                f"vcov={vcov!r} is for maximum-likelihood fits; {type(est).__name__}'s fit "
                "maximises a log joint density with a prior (use vcov='observed': the Laplace "
                "approximation's covariance)"
            )
        reported = hook(problem, X)
        target = problem.target
        loadings = problem.spec.loadings if reported.gauge else ()
        coords = UnconstrainedCoordinates(target.model, target.args, target.init, loadings)
        fixed = _fixed_coordinates(coords, reported.fixed)
        expected, loglik = None, None
        if reported.moments is not None:
            groups = _pattern_statistics(target.args[0])
            expected = _expected_loglik(reported.moments, target.init, groups)
            if not problem.use_prior and len(groups) <= MAX_PATTERNS:
                loglik = _gaussian_loglik(reported.moments, groups)

        n_rows = len(np.asarray(target.args[0]))

        def row_loglik(values):
            # every observed term of the fit's objective, row by row (supervised PCA's
            # tempered objective adds a factor per row to its x and y sites)
            sites = log_likelihood(target.model, values, *target.args, batch_ndims=0)
            shapes = {name: np.shape(term) for name, term in sites.items()}
            if any(shape != (n_rows,) for shape in shapes.values()):
                raise ValueError(f"the objective's terms are not per row: {shapes}")
            return sum(sites.values())

        result = estimate_covariance(
            coords,
            reported.report,
            reported.labels,
            vcov=vcov,
            row_loglik=row_loglik,
            expected_loglik=expected,
            log_density=loglik,
            fixed=fixed,
        )
        _check_maximum(est, result.newton_decrement, n_rows=n_rows)
    return result


def _reported_at_fit(est, X, y):
    """The fit's :class:`Reported` and its reported quantities (NumPy, by name)."""
    with est._precision():
        problem = est._posterior_problem(X, y, None)
        reported = _hook(est)(problem, X)
    if reported.align is None or reported.at_fit is None:
        raise ValueError(
            f"vcov='bootstrap' is not available for {type(est).__name__}: its refits need "
            "not report the same quantities (a pruned rank, for one); use vcov='observed'"
        )
    values = reported.at_fit()
    return reported, {name: np.asarray(value, np.float64) for name, value in values.items()}


def _bootstrap(est, X, y, n_bootstrap, random_state) -> EstimateCovariance:
    """The covariance of the reported quantities over refits on rows drawn with
    replacement (Efron 1979), each refit's quantities aligned to the fit's (its
    columns or components matched and signed); the fit's settings, random_state
    included, for every refit."""
    from sklearn.base import clone
    from sklearn.utils import _safe_indexing, check_random_state

    from latentlab._validation import check_positive_int

    n_bootstrap = check_positive_int("n_bootstrap", n_bootstrap)
    if n_bootstrap < 2:
        raise ValueError(f"n_bootstrap must be at least 2, got {n_bootstrap}")
    reported, reference = _reported_at_fit(est, X, y)
    rng = check_random_state(random_state)
    n = len(X)
    flat = []
    with warnings.catch_warnings():  # a resample's Heywood case or slow fit is its own
        warnings.simplefilter("ignore")
        for _ in range(n_bootstrap):
            rows = rng.randint(0, n, n)
            X_b = _safe_indexing(X, rows)
            y_b = None if y is None else _safe_indexing(y, rows)
            refit = clone(est).fit(X_b) if y is None else clone(est).fit(X_b, y_b)
            _, values = _reported_at_fit(refit, X_b, y_b)
            values = reported.align(values, reference)
            flat.append(np.concatenate([np.ravel(values[name]) for name in sorted(values)]))
    names, index = [], []
    for name in sorted(reference):
        axes = reported.labels[name]
        for position in np.ndindex(*np.shape(reference[name])):
            names.append(name)
            index.append(tuple(axes[a][i] for a, i in enumerate(position)))
    return EstimateCovariance(
        names=names,
        index=index,
        estimate=np.concatenate([np.ravel(reference[name]) for name in sorted(reference)]),
        covariance=np.cov(np.asarray(flat), rowvar=False),
        at_boundary=np.zeros(len(names), bool),
        newton_decrement=float("nan"),
    )


def _matched_columns(L, reference):
    """The permutation and signs that best match L's columns to ``reference``'s
    (Hungarian matching on the absolute cross-products)."""
    from scipy.optimize import linear_sum_assignment

    cross = reference.T @ L
    _, order = linear_sum_assignment(-np.abs(cross))
    signs = np.sign(cross[np.arange(len(order)), order])
    return order, np.where(signs == 0, 1.0, signs)


# Gaussian rows grouped by their pattern of observed entries: one d x d algebra per
# pattern instead of one low-rank solve per row, so the Hessian's cost stops growing
# with n -- when the patterns are few (complete data: one).  Each pattern is a block
# of the compiled program: beyond a few (50 patterns of 500 rows: 8 s a call, mostly
# compiling, against 1 s) the declaration's vectorised rows are differentiated.
MAX_PATTERNS = 4


def _pattern_statistics(X):
    """Per pattern of observed entries: its mask, row count, and the observed block's
    sample mean and (ddof=0) scatter, in NumPy."""
    X = np.asarray(X, np.float64)
    observed = ~np.isnan(X)
    if observed.all():  # one pattern: spare the rows' sort
        mean = X.mean(axis=0)
        return [(np.arange(X.shape[1]), len(X), mean, (X - mean).T @ (X - mean) / len(X))]
    patterns, inverse, counts = np.unique(observed, axis=0, return_inverse=True, return_counts=True)
    groups = []
    for k, (pattern, count) in enumerate(zip(patterns, counts, strict=True)):
        o = np.flatnonzero(pattern)
        if o.size == 0:
            continue
        rows = X[np.ravel(inverse) == k][:, o]
        mean = rows.mean(axis=0)
        groups.append((o, int(count), mean, (rows - mean).T @ (rows - mean) / count))
    return groups


def _gaussian_loglik(moments, groups):
    """``values -> sum_i log N(x_io | mu_o, Sigma_oo)`` up to a constant, from each
    pattern's statistics ``(o, count, mean, scatter)``: the Gaussian-rows
    log-likelihood as a function of the moments alone."""
    import jax
    import jax.numpy as jnp

    def loglik(values):
        mean, cov = moments(values)
        total = 0.0
        for o, count, row_mean, scatter in groups:
            chol = jnp.linalg.cholesky(cov[np.ix_(o, o)])
            gap = row_mean - mean[o]
            second = scatter + jnp.outer(gap, gap)
            log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
            trace = jnp.trace(jax.scipy.linalg.cho_solve((chol, True), second))
            total = total - 0.5 * count * (log_det + trace)
        return total

    return loglik


def _expected_loglik(moments, point, groups):
    """``values -> sum_i E[log N(x_io | mu_o, Sigma_oo)]``, the expectation under the
    fitted moments, each row on its observed entries: the log-likelihood of each
    pattern's rows (``groups``, :func:`_pattern_statistics`) with their mean and
    scatter replaced by the fitted ones."""
    import jax

    mean0, cov0 = jax.tree.map(np.asarray, moments(point))
    expected = [(o, count, mean0[o], cov0[np.ix_(o, o)]) for o, count, _, _ in groups]
    return _gaussian_loglik(moments, expected)


def _fixed_coordinates(coords, fixed_sites) -> np.ndarray:
    """The coordinates (flat, as ``coords.point``) of the site entries held at a bound;
    only elementwise-transformed sites (positive variances) can hold some."""
    fixed = np.zeros(coords.size, bool)
    start = 0
    for name, size, _ in coords.layout:
        if name in fixed_sites:
            fixed[start : start + size] = np.ravel(fixed_sites[name])
        start += size
    return fixed


def _check_maximum(est, decrement, n_rows):
    """Refuse a point that is not a maximum of this data's likelihood (other data than
    the fit's), warn about one a long way from it (a fit stopped early)."""
    decrement = decrement / max(n_rows, 1)
    name = type(est).__name__
    if not decrement <= NOT_A_MAXIMUM:
        raise ValueError(
            f"{name}'s fitted parameters are not a maximum of X's likelihood (a Newton step "
            f"would gain {decrement:.3g} nats per row): standard errors come from the data the "
            "model was fitted to; pass those"
        )
    if decrement > LOOSE_MAXIMUM:
        warnings.warn(
            f"{name}'s fit is {decrement:.3g} nats per row short of the maximum (a Newton "
            "step's gain); the standard errors are those of a nearby point. Fit with a "
            "smaller tol or a larger max_iter.",
            UserWarning,
            stacklevel=3,
        )


def estimates_table(result, level=None):
    """A tidy table of the estimates: ``parameter``, ``index`` (the entry's coordinate
    labels), ``estimate``, ``std_error``, Wald ``z`` and two-sided ``p_value`` (of the
    hypothesis that the entry is 0), ``at_boundary``, and with ``level`` the Wald
    interval ``lower``, ``upper``.  Indexed by labels ``name[i, j]``."""
    import pandas as pd
    from scipy.stats import norm

    variance = np.diag(result.covariance).copy()
    se = np.sqrt(np.maximum(variance, 0.0))
    se[result.at_boundary] = np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        # no test of a constant (a one-component mixture's weight)
        z = np.where(se > 0, result.estimate / se, np.nan)
    table = pd.DataFrame(
        {
            "parameter": result.names,
            "index": result.index,
            "estimate": result.estimate,
            "std_error": se,
            "z": z,
            "p_value": 2.0 * norm.sf(np.abs(z)),
            "at_boundary": result.at_boundary,
        },
        index=labels_of(result),
    )
    if level is not None:
        half = norm.ppf(0.5 + level / 2.0) * se
        table["lower"] = result.estimate - half
        table["upper"] = result.estimate + half
    return table


def labels_of(result) -> list[str]:
    return [
        f"{name}[{', '.join(str(i) for i in index)}]" if index else name
        for name, index in zip(result.names, result.index, strict=True)
    ]


# ----------------------------------------------------------------------- for the hooks


def to_data_units(spec, values: dict, standardisation) -> dict:
    """Site values in the target's units -> data units (traceable: JAX arrays in,
    JAX arrays out; :func:`latentlab.inference.posterior.spec.to_data_units` is the
    NumPy version for draws)."""
    if standardisation is None:
        return dict(values)
    shift, scale = standardisation
    out = {}
    for name, value in values.items():
        units = spec.sites[name].units if name in spec.sites else None
        if units == "location":
            out[name] = value * scale + shift[spec.sites[name].dims[-1]]
        elif units == "linear":
            out[name] = value * scale
        elif units == "variance":
            out[name] = value * scale**2
        elif units == "precision":
            out[name] = value / scale**2
        else:
            out[name] = value
    return out


def principal_frame(W, units, reference):
    """Loadings ``W`` (d, K) rotated to the principal axes of ``W / units`` (columns
    orthogonal there, by decreasing norm), each column signed as the ``reference``
    (the fit's own loadings in that frame): the frame
    :func:`latentlab.models.gaussian_latent.canonical_loadings` reports, as a smooth
    function of W (traceable; distinct column norms)."""
    import jax.numpy as jnp

    units = jnp.asarray(units)[:, None]
    V = W / units
    _, vectors = jnp.linalg.eigh(V.T @ V)
    frame = (V @ vectors[:, ::-1]) * units
    return frame * jnp.sign(jnp.sum(frame * reference, axis=0))


def observed_column_variance(X) -> np.ndarray:
    """Each feature's variance over its observed entries, constant features given the
    typical one: the ``column_variance`` a Gaussian latent fit of ``X`` worked with."""
    X = np.asarray(X, np.float64)
    observed = ~np.isnan(X)
    count = np.maximum(observed.sum(axis=0), 1)
    filled = np.where(observed, X, 0.0)
    mean = filled.sum(axis=0) / count
    variance = np.maximum(np.where(observed, (X - mean) ** 2, 0.0).sum(axis=0) / count, 0.0)
    typical = np.mean(variance) if np.any(variance > 0) else 1.0
    return np.where(variance > 0, variance, typical)


# ------------------------------------------------------------------------------- hooks


def rotated_frame(est, d, K):
    """For a fit with a rotation (K >= 2): ``(rotate, unrotated, oblique)``, where
    ``rotate(A)`` maps unrotated loadings A (data units, near the fit's) to the pattern
    ``Lambda`` and factor correlations ``Phi`` of the rotation the fit's criterion
    picks for A, to first order in A (what the delta method needs): one Newton step,
    in local coordinates of the rotation group (orthogonal) or of the matrices with
    unit columns (oblique) at the fit's ``T0``, on the criterion from ``T0``, where
    its gradient is 0 -- the implicit function theorem's derivative, for any
    differentiable criterion.  ``unrotated`` are the fit's unrotated loadings."""
    import jax
    import jax.numpy as jnp

    from latentlab.closed_form.rotation import rotation_objective

    method, custom = ("custom", est.rotation) if callable(est.rotation) else (est.rotation, None)
    settings = dict(est.rotation_kwargs or {})
    if custom is not None:
        settings["criterion"] = custom
    if method == "promax":
        raise ValueError(
            "standard errors of promax-rotated loadings are not available: promax optimises "
            "no criterion whose optimality conditions the delta method could follow; use an "
            "oblique criterion (oblimin, quartimin, geomin)"
        )
    for setting in ("n_starts", "random_state", "tol", "max_iter"):  # the search's, not Q's
        settings.pop(setting, None)
    criterion, oblique, normalize = rotation_objective(method, (d, K), **settings)
    T0 = jnp.asarray(est.rotation_matrix_)
    W = np.asarray(est.params_["W"])
    if oblique:  # W = Lambda C, Lambda = A T0^-T: A = W C^-1 T0^T
        C = np.linalg.cholesky(np.asarray(est.factor_correlation_))
        unrotated = np.linalg.solve(C.T, W.T).T @ np.asarray(est.rotation_matrix_).T
        # a basis of each column's orthogonal complement: moves that keep it unit length
        bases = np.stack(
            [np.linalg.svd(np.asarray(T0)[:, [j]].T)[2][1:].T for j in range(K)]
        )  # (K, K, K - 1)
        n_local = K * (K - 1)
    else:
        unrotated = W @ np.asarray(est.rotation_matrix_).T
        upper = np.triu_indices(K, 1)
        n_local = len(upper[0])

    def local(u):
        if oblique:
            T = T0 + jnp.einsum("jkl,jl->kj", bases, u.reshape(K, K - 1))
            return T / jnp.linalg.norm(T, axis=0)
        S = jnp.zeros((K, K), u.dtype).at[upper].set(u)
        S = 0.5 * (S - S.T)  # Cayley: (I - S)^-1 (I + S) is orthogonal
        eye = jnp.eye(K, dtype=u.dtype)
        return T0 @ jnp.linalg.solve(eye - S, eye + S)

    def pattern(A, T):
        return jnp.linalg.solve(T, A.T).T if oblique else A @ T

    def rotate(A):
        norms = jnp.sqrt(jnp.sum(A * A, axis=1, keepdims=True)) if normalize else 1.0

        def q(u):
            return criterion(pattern(A / norms, local(u)))

        u0 = jnp.zeros(n_local, A.dtype)
        step = -jnp.linalg.solve(jax.hessian(q)(u0), jax.grad(q)(u0))
        T = local(step)
        return pattern(A, T), T.T @ T

    return rotate, unrotated, oblique


def principal_axes_estimates(est, problem, X):
    """PPCA and factor analysis: the loadings as the fit reports them -- ``W`` on the
    principal axes of ``W / units`` (the fit's :meth:`_feature_units`), or rotated
    (:func:`rotated_frame`; oblique: the ``pattern`` and the ``factor_correlation``
    pairs) --, ``mu``, the noise variance(s) and, for factor analysis, each feature's
    communality ``sum_k W_jk^2`` and its uniqueness ``psi``, held fixed where it is at
    its floor (a Heywood case).

    The units that scale factor analysis' principal axes, the features' observed
    standard deviations, move with the data: here in proportion to the model's
    (equal to them at a maximum-likelihood fit of complete data); without that the
    unrotated loadings' standard errors came out 1.7 times the bootstrap's on a
    planted model (a rotation's optimum, and every rotation-invariant quantity, does
    not depend on the units)."""
    import jax.numpy as jnp

    from latentlab.estimators.gaussian_latent import VARIANCE_FLOOR

    data = np.asarray(problem.scoring.args[0], np.float64)
    column_variance = observed_column_variance(data)
    units = est._feature_units(column_variance)
    d, K = np.shape(est.params_["W"])
    rotate, oblique = None, False
    reference = est.params_["W"]
    if getattr(est, "rotation", None) is not None and K >= 2:
        rotate, reference, oblique = rotated_frame(est, d, K)
    reference = jnp.asarray(reference)
    spec = problem.spec
    noise = spec.noise[0][0]
    per_feature = spec.sites[noise].dims == ("feature",)
    pairs = np.triu_indices(K, 1)

    # Factor analysis' principal axes are those of W scaled by the features' observed
    # standard deviations: statistics of the data, which move with it.  At a
    # maximum-likelihood fit of complete data they are the model's, sqrt(diag(W W^T +
    # Psi)) (its stationarity in psi), so they move with the estimates as those do:
    # held at the data's value at the fit, moved in proportion to the model's.
    fitted_sd = np.sqrt(np.sum(np.asarray(est.params_["W"]) ** 2, axis=1) + est.params_[noise])

    def report(values):
        v = to_data_units(spec, values, problem.standardisation)
        scale = units
        if per_feature:
            scale = units * jnp.sqrt(jnp.sum(v["W"] ** 2, axis=1) + v[noise]) / fitted_sd
        W = principal_frame(v["W"], scale, reference)
        out = {"mu": v["mu"], noise: v[noise]}
        if per_feature:
            out["communality"] = jnp.sum(W**2, axis=1)
        if rotate is None:
            out["W"] = W
        elif not oblique:
            out["W"] = rotate(W)[0]
        else:
            out["pattern"], phi = rotate(W)
            out["factor_correlation"] = phi[pairs]
        return out

    features = list(problem.coords["feature"])
    components = list(range(K))
    labels = {"mu": [features]}
    if oblique:
        labels["pattern"] = [features, components]
        labels["factor_correlation"] = [[f"{i}, {j}" for i, j in zip(*pairs, strict=True)]]
    else:
        labels["W"] = [features, components]
    labels[noise] = [features] if per_feature else []
    fixed = {}
    if per_feature:
        labels["communality"] = [features]
        floor = VARIANCE_FLOOR * column_variance
        fixed[noise] = np.asarray(est.params_[noise]) <= 1.000001 * floor

    def moments(values):  # in the target's units
        noise_variance = values[noise] * jnp.ones(d)
        return values["mu"], values["W"] @ values["W"].T + jnp.diag(noise_variance)

    def align(values, reference):
        key = "pattern" if oblique else "W"
        order, signs = _matched_columns(values[key], reference[key])
        values = dict(values, **{key: values[key][:, order] * signs})
        if oblique:  # the correlations of the matched, signed factors
            phi = np.eye(K)
            phi[pairs] = values["factor_correlation"]
            phi = np.triu(phi, 1) + np.triu(phi, 1).T + np.eye(K)
            phi = phi[np.ix_(order, order)] * np.outer(signs, signs)
            values["factor_correlation"] = phi[pairs]
        return values

    def at_fit():
        W = np.asarray(est.params_["W"])  # Lambda C where oblique: W W^T = A A^T
        out = {"mu": est.params_["mu"], noise: est.params_[noise]}
        if per_feature:
            out["communality"] = np.sum(W**2, axis=1)
        if oblique:
            out["pattern"] = np.linalg.solve(np.linalg.cholesky(est.factor_correlation_).T, W.T).T
            out["factor_correlation"] = np.asarray(est.factor_correlation_)[pairs]
        else:
            out["W"] = W
        return out

    return Reported(report, labels, fixed, True, moments, align, at_fit)


def bpca_estimates(est, problem, X):
    """Bayesian PCA: the MAP's own frame (its ARD prior is not rotation invariant, so
    every loading is identified and no gauge is taken), ``mu``, ``sigma2`` and the
    columns' precisions ``alpha``."""
    spec = problem.spec
    K = np.shape(est.params_["W"])[1]

    def report(values):
        v = to_data_units(spec, values, problem.standardisation)
        return {name: v[name] for name in ("W", "mu", "sigma2", "alpha")}

    features = list(problem.coords["feature"])
    components = list(range(K))
    labels = {"W": [features, components], "mu": [features], "sigma2": [], "alpha": [components]}
    return Reported(report, labels, {}, False)  # no bootstrap: a refit's rank can differ


def mixture_estimates(est, problem, X):
    """Gaussian mixtures at the fitted labelling: ``weights``, ``means`` and the
    covariances as ``covariances_`` holds them (full and tied: the entries on and
    above the diagonal)."""
    import jax.numpy as jnp

    from latentlab.models import gmm

    kind = est.covariance_type
    K, d = np.shape(est.params_["means"])

    upper = np.triu_indices(d)

    def entries(cov, xp):  # covariances_ as reported: full/tied on and above the diagonal
        if kind == "full":
            return cov[:, upper[0], upper[1]]
        if kind == "tied":
            return cov[0][upper]
        if kind == "diag":
            return xp.diagonal(cov, axis1=-2, axis2=-1)
        return cov[:, 0, 0]

    def report(values):
        L = gmm.scale_tril(values["scale"], kind, K, d)
        covariances = entries(L @ jnp.swapaxes(L, -1, -2), jnp)
        return {"weights": values["weights"], "means": values["means"], "covariances": covariances}

    features = list(problem.coords["feature"])
    components = list(range(K))
    pairs = [f"{features[i]}, {features[j]}" for i, j in zip(*upper, strict=True)]
    labels = {
        "weights": [components],
        "means": [components, features],
        "covariances": {
            "full": [components, pairs],
            "tied": [pairs],
            "diag": [components, features],
            "spherical": [components],
        }[kind],
    }
    tied = kind == "tied"

    def align(values, reference):  # components matched by their means
        from scipy.optimize import linear_sum_assignment

        gaps = values["means"][None, :, :] - reference["means"][:, None, :]
        _, order = linear_sum_assignment(np.sum(gaps**2, axis=2))
        return {
            name: value if (tied and name == "covariances") else value[order]
            for name, value in values.items()
        }

    def at_fit():
        L = np.asarray(gmm.scale_tril(jnp.asarray(est.params_["scale"]), kind, K, d))
        covariances = entries(L @ np.swapaxes(L, -1, -2), np)
        return {
            "weights": est.params_["weights"],
            "means": est.params_["means"],
            "covariances": covariances,
        }

    return Reported(report, labels, {}, False, align=align, at_fit=at_fit)


def supervised_estimates(est, problem, X):
    """Supervised PCA: ``W_x`` and ``W_y`` on the principal axes of the stacked
    loadings (as the fit reports them: their common rotation is not identified),
    ``mu_x``, ``mu_y``, ``sigma2_x`` and ``sigma2_y``, from the tempered objective the
    fit maximises (the likelihood at ``alpha = 1``)."""
    import jax.numpy as jnp

    spec = problem.spec
    d_x, K = np.shape(est.params_["W_x"])
    d_y = np.shape(est.params_["W_y"])[0]
    stacked = np.vstack([est.params_["W_x"], est.params_["W_y"]])
    reference = jnp.asarray(stacked)
    units = jnp.ones(d_x + d_y)
    names = ("mu_x", "mu_y", "sigma2_x", "sigma2_y")

    def report(values):
        v = to_data_units(spec, values, problem.standardisation)
        W = principal_frame(jnp.concatenate([v["W_x"], v["W_y"]]), units, reference)
        return {"W_x": W[:d_x], "W_y": W[d_x:], **{name: v[name] for name in names}}

    features, targets = list(problem.coords["feature"]), list(problem.coords["target"])
    components = list(range(K))
    labels = {
        "W_x": [features, components],
        "W_y": [targets, components],
        "mu_x": [features],
        "mu_y": [targets],
        "sigma2_x": [],
        "sigma2_y": [],
    }

    def align(values, reference):
        both = np.vstack([values["W_x"], values["W_y"]])
        order, signs = _matched_columns(both, np.vstack([reference["W_x"], reference["W_y"]]))
        both = both[:, order] * signs
        return dict(values, W_x=both[:d_x], W_y=both[d_x:])

    def at_fit():
        return {name: np.asarray(est.params_[name]) for name in ("W_x", "W_y", *names)}

    return Reported(report, labels, {}, True, align=align, at_fit=at_fit)
