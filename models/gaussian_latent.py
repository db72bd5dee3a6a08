"""Posterior-moment algebra shared by the Gaussian latent-variable models.

Every model here (PPCA, Bayesian PCA, factor analysis, supervised PCA) is

    z ~ N(0, I_K),    x | z ~ N(W z + mu, diag(1 / noise_precision)),

with the models differing only in how ``noise_precision`` is tied (one value for
PPCA, one per coordinate for FA, an alpha-weighted block for supervised PCA) and in
the prior on ``W``.  The marginal is ``N(mu, W W^T + Psi)`` (Tipping & Bishop 1999,
eq. 3-4); the posterior of z given the observed coordinates O of a row is Gaussian
with precision ``M = I + W_O^T Psi_O^{-1} W_O`` and mean
``M^{-1} W_O^T Psi_O^{-1} (x_O - mu_O)`` (PRML 12.42).

The algebra is in four private modules, re-exported here so that models and
estimators import ``latentlab.models.gaussian_latent`` alone:
:mod:`~latentlab.models._gaussian_latent_moments` (posterior moments, the E-step's
row sums, the regression M-step), :mod:`~latentlab.models._gaussian_latent_start`
(the PCA start, padding of the latent dimension, data preparation),
:mod:`~latentlab.models._gaussian_latent_online` (stepwise EM for streams) and
:mod:`~latentlab.models._gaussian_latent_chunked` (the E-step over rows read from an
out-of-core or Dask source).  This
module holds the pieces of the declarations, the fit's starts and its padded EM
(:func:`fit_padded_em`), the compiled row programs, and the host-side algebra
estimators report (covariances, rotation, imputation draws).  It is longer than a
model file: it is the one algebra four models share, and what would split off (the
fit) is written in terms of the declarations' pieces and starts here.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from latentlab._shapes import gaussian_latent_columns, signature
from latentlab.closed_form.rotation import rotate
from latentlab.inference.em import EMModel, fit_em
from latentlab.inference.posterior.spec import Site
from latentlab.inference.quasi_newton import BoxCoordinates
from latentlab.models._gaussian_latent_chunked import GaussianRowsPass, gaussian_rows
from latentlab.models._gaussian_latent_moments import (
    LOG_2PI,
    CompleteSummary,
    GaussianData,
    OutOfCoreRows,
    RegressionStats,
    complete_posterior_operator,
    conditional_missing,
    expected_stats,
    marginal_loglik_rows,
    row_posteriors,
    solve_regression,
)
from latentlab.models._gaussian_latent_online import (
    online_params,
    online_start,
    online_step,
    online_unrotated,
    pilot_coordinates,
    pilot_moments,
)
from latentlab.models._gaussian_latent_start import (
    PCAStart,
    column_normals,
    global_scale,
    mean_imputed_pca,
    missing_row_blocks,
    pca_solution,
    summarise,
)

__all__ = [
    # the algebra of the private modules
    "LOG_2PI",
    "CompleteSummary",
    "GaussianData",
    "OutOfCoreRows",
    "RegressionStats",
    "complete_posterior_operator",
    "conditional_missing",
    "expected_stats",
    "marginal_loglik_rows",
    "row_posteriors",
    "solve_regression",
    "PCAStart",
    "column_normals",
    "global_scale",
    "mean_imputed_pca",
    "missing_row_blocks",
    "pca_solution",
    "summarise",
    "GaussianRowsPass",
    "gaussian_rows",
    "online_params",
    "online_start",
    "online_step",
    "online_unrotated",
    "pilot_coordinates",
    "pilot_moments",
    # the declarations' pieces
    "UNIT_DENSITY_VARIANCE",
    "detect_missing",
    "sample_loadings_and_mean",
    "loadings_and_mean_sites",
    "replicate_settings",
    "masked_low_rank",
    "observe_rows",
    # the fit's starts, and the quasi-Newton phase's coordinates
    "em_model",
    "em_starts",
    "with_active_columns",
    "fit_padded_em",
    "em_from_starts",
    "drop_padding",
    "em_output",
    "row_posteriors_program",
    "conditional_missing_program",
    "free_loadings",
    "variance_coordinates",
    # host algebra
    "marginal_covariance",
    "marginal_precision",
    "draw_rows",
    "draw_imputations",
    "mixture_form",
    "central_quantile",
    "orient_columns",
    "canonical_loadings",
    "rotated_loadings",
    "FACTOR_SCORE_METHODS",
    "factor_scores",
]


# ----------------------------------------------------------------------------- declaration


def detect_missing(X, has_missing):
    """Whether X holds NaN; X must be concrete unless ``has_missing`` is given.

    Traced callers (SVI, NUTS) pass ``has_missing`` explicitly.
    """
    if has_missing is not None or X is None:
        return bool(has_missing)
    return bool(np.isnan(np.asarray(X)).any())


def sample_loadings_and_mean(n_features: int, n_components: int):
    """The sites ``W`` (d, K) ~ N(0, 1) and ``mu`` (d,) ~ N(0, 10^2) (priors for
    standardised data; callers wrap them in ``handlers.mask`` to switch them off)."""
    W = numpyro.sample("W", dist.Normal(0.0, 1.0).expand([n_features, n_components]).to_event(2))
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0).expand([n_features]).to_event(1))
    return W, mu


def loadings_and_mean_sites() -> dict:
    """Posterior metadata of the sites :func:`sample_loadings_and_mean` declares."""
    return {
        "W": Site(("feature", "component"), "real", "linear"),
        "mu": Site(("feature",), "real", "location"),
    }


def replicate_settings(X) -> dict:
    """The settings under which a declaration with one (n, d) data argument, given no
    data, draws a complete data set of X's shape (posterior and prior predictive)."""
    n, d = np.shape(X)
    return {"n_samples": int(n), "n_features": int(d), "has_missing": False}


# The variance whose normal density at its own mean is exactly 1.  ``handlers.mask``
# can only drop whole rows; the declarations instead put a missing coordinate at its
# mean, cut it from every covariance term and give it this variance, so it contributes
# a factor N(0 | 0, 1/(2 pi)) = 1 and a row's log-density is exactly its marginal over
# the observed coordinates (used by every model with NaN entries).
UNIT_DENSITY_VARIANCE = 1.0 / (2.0 * math.pi)


def masked_low_rank(observed, loc, value, cov_factor, cov_diag):
    """``(value filled, cov_factor, cov_diag)`` of a LowRankMultivariateNormal(loc,
    cov_factor, cov_diag) whose density at the filled value is the marginal of the
    ``observed`` coordinates (see :data:`UNIT_DENSITY_VARIANCE`)."""
    return (
        jnp.where(observed, value, loc),
        cov_factor * observed[..., None],
        jnp.where(observed, cov_diag, UNIT_DENSITY_VARIANCE),
    )


def _observed_marginal(X, W, mu, noise_var, has_missing):
    """The marginal of x over z as a LowRankMultivariateNormal, exact for missing
    entries (:func:`masked_low_rank`).  ``noise_var`` is (d,)."""
    if not has_missing:
        return dist.LowRankMultivariateNormal(mu, W, noise_var), X
    x_filled, cov_factor, cov_diag = masked_low_rank(~jnp.isnan(X), mu, X, W, noise_var)
    return dist.LowRankMultivariateNormal(mu, cov_factor, cov_diag), x_filled


def observe_rows(X, W, mu, noise_var, *, n_samples, has_missing, explicit_latent, subsample_size):
    """The local part of every Gaussian latent declaration: a plate over rows with
    ``x ~ N(mu, W W^T + diag(noise_var))`` (or z sampled explicitly, then x | z)."""
    K = W.shape[1]
    with numpyro.plate("rows", n_samples, subsample_size=subsample_size):
        X_batch = None if X is None else numpyro.subsample(X, event_dim=1)
        if explicit_latent:
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([K]).to_event(1))
            loc = z @ W.T + mu
            likelihood = dist.Normal(loc, jnp.sqrt(noise_var))
            if has_missing:
                observed = ~jnp.isnan(X_batch)
                X_batch = jnp.where(observed, X_batch, loc)
                likelihood = likelihood.mask(observed)
            numpyro.sample("x", likelihood.to_event(1), obs=X_batch)
        elif X_batch is None:
            numpyro.sample("x", dist.LowRankMultivariateNormal(mu, W, noise_var))
        else:
            marginal, obs = _observed_marginal(X_batch, W, mu, noise_var, has_missing)
            numpyro.sample("x", marginal, obs=obs)


# ----------------------------------------------------------------------------- init


def em_model(module, *, n_columns: int, n_init: int, pca_start: bool = True) -> EMModel:
    """The EM model of a Gaussian-latent model ``module`` (PPCA, factor analysis,
    Bayesian PCA, supervised PCA) for :func:`latentlab.inference.em.fit_em`, with
    loadings of ``n_columns`` columns and ``n_init`` starts (:func:`em_starts`)."""
    pca_start = bool(pca_start) and getattr(module, "init_from_pca", None) is not None
    model = EMModel(
        module.e_step,
        module.m_step,
        starts=em_starts,
        coordinates=getattr(module, "coordinates", None),
    )
    return model.with_settings(
        module=module, n_columns=int(n_columns), n_init=int(n_init), pca_start=pca_start
    )


def em_starts(inputs, data: GaussianData, hyper, *, module, n_columns, n_init, pca_start):
    """The starts of a fit, traced: the PCA start where the model has one, then random
    ones up to ``n_init``.  ``inputs = (n, n_components, seed, column_variance)``.

    The loadings have ``n_columns`` columns, of which the first ``n_components`` (a
    traced value) are the model's and the rest padding held at zero, so every K of a
    bucket runs the same program (:func:`latentlab._shapes.gaussian_latent_columns`)."""
    n, n_components, seed, column_variance = inputs
    d = data.X.shape[-1]
    active = (jnp.arange(n_columns) < n_components).astype(data.X.dtype)
    starts = []
    if pca_start:
        # Random starts alone can end, converged, in a worse local optimum when data
        # are missing (0.26 nats/row worse on a monotone pattern); the PCA start is
        # deterministic and near the optimum, and n_init > 1 adds random ones.
        pca = mean_imputed_pca(data, n, n_columns, n_components)
        starts.append(jax.tree.map(lambda leaf: leaf[None], module.init_from_pca(pca, hyper)))
    if n_init > len(starts):  # keys drawn for all n_init: the first is the PCA start's
        keys = jax.random.split(jax.random.PRNGKey(seed), n_init)[len(starts) :]

        def random_start(key):
            return module.init_params(key, d, n_columns, column_variance, active)

        starts.append(jax.vmap(random_start)(keys))
    return jax.tree.map(lambda *batches: jnp.concatenate(batches), *starts)


# ----------------------------------------------------------------------------- fit


def with_active_columns(hyper, active):
    """``hyper`` for loadings with the columns ``active`` (a 0/1 vector) of the model
    and the rest padding: models whose prior sees the columns (a ``columns`` field,
    Bayesian PCA's ARD prior) get them; the others' hyperparameters are unchanged."""
    return hyper._replace(columns=active) if "columns" in hyper._fields else hyper


def fit_padded_em(
    module, data, n, K, column_variance, hyper, *, n_init, max_iter, tol, verbose, seed, pca_start
):
    """EM with the loadings padded to a bucket of columns (``n_init`` starts, the first
    the PCA solution where ``pca_start``, the others drawn from ``seed``); returns
    ``(params, trace, n_iter, converged)`` as NumPy, W still padded."""
    dtype = data.X.dtype
    d = data.X.shape[-1]
    n_missing = data.X.shape[0] * data.X.shape[1]
    if data.rows is not None:  # rows with missing entries outside the program
        n_missing += int(data.rows.n_rows)
    # (at least one column: K = 0 is a model whose loadings are all padding)
    key = signature(
        data,
        module=module.__name__,
        n_init=int(n_init),
        max_iter=int(max_iter),
        verbose=int(verbose),
        pca_start=pca_start,
    )
    n_columns = gaussian_latent_columns(K, d, n_missing, key=key)
    active = np.arange(n_columns) < K
    hyper = with_active_columns(hyper, active.astype(dtype))
    model = em_model(module, n_columns=n_columns, n_init=int(n_init), pca_start=pca_start)
    start_inputs = (
        np.asarray(n, dtype),
        np.asarray(K, np.int32),
        np.asarray(seed, np.uint32),
        np.asarray(column_variance, dtype),
    )
    return _run_em(model, start_inputs, data, n, hyper, tol=tol, max_iter=max_iter, verbose=verbose)


def em_from_starts(module, starts, data, n, hyper, *, tol, max_iter, verbose, coordinates=None):
    """EM from a batch of starts (with the quasi-Newton phase where ``coordinates``
    are given); returns (params, trace, n_iter, converged)."""
    model = EMModel(module.e_step, module.m_step, coordinates=coordinates)
    return _run_em(model, starts, data, n, hyper, tol=tol, max_iter=max_iter, verbose=verbose)


def _run_em(model, start_inputs, data, n, hyper, *, tol, max_iter, verbose):
    """The engine's fit on the data's dtype; (params, trace, n_iter, converged) as NumPy."""
    dtype = data.X.dtype
    result = fit_em(
        model,
        start_inputs,
        data,
        hyper,
        np.asarray(n, dtype),
        np.asarray(tol, dtype),
        max_iter=int(max_iter),
        verbose=int(verbose),
    )
    return em_output(result.params, result.trace, result.n_iter, result.converged)


def drop_padding(params, K):
    """The model's K columns of padded parameters: ``W`` (d, K) and any per-column
    vector (Bayesian PCA's ``alpha``)."""
    cut = {"W": lambda W: W[:, :K], "alpha": lambda alpha: alpha[:K]}
    fields = [name for name in cut if name in params._fields]
    return params._replace(**{name: cut[name](getattr(params, name)) for name in fields})


def em_output(params, trace, n_iter, converged):
    """An EM result on the host: NumPy parameters and the filled part of the trace."""
    n_iter = int(n_iter)
    params = jax.tree.map(np.asarray, params)
    return params, np.asarray(trace)[:n_iter], n_iter, bool(converged)


# The compiled row programs of the fitted model (scoring, the posterior of z,
# imputation), mapped over bucketed row chunks by the estimators.
row_posteriors_program = jax.jit(row_posteriors)
conditional_missing_program = jax.jit(conditional_missing)


# ----------------------------------------------------------------------------- coordinates
#
# The quasi-Newton phase of an EM fit (latentlab.inference.quasi_newton) moves in a
# box: loadings and means free, each variance as its logarithm above its floor's.


def free_loadings(W, mu):
    """``(x, lower, upper)`` of the loadings and mean: unbounded, except that a column
    of W that is exactly zero is held there (the padding columns of a shared program,
    and any column EM holds at zero: a zero column is a fixed point of its update)."""
    held = jnp.all(W == 0, axis=0)
    bound = jnp.where(held, 0.0, jnp.inf) * jnp.ones_like(W)
    infinite = jnp.full_like(mu, jnp.inf)
    return (W, mu), (-bound, -infinite), (bound, infinite)


def variance_coordinates(params_type, floors) -> BoxCoordinates:
    """The coordinates of parameters ``params_type(W, mu, *variances)``: loadings and
    mean by :func:`free_loadings`, each variance as its square root (a standard
    deviation) bounded below by its floor's (``floors(hyper)``: one floor per variance
    field), so that a variance whose optimum is its floor (a Heywood case) lands there.

    Standard deviations rather than log variances: the gradient in log(psi_j) vanishes
    as psi_j does, so a uniqueness that EM has taken near zero but whose optimum is
    interior creeps back (seen: 312 steps against 175 on breast_cancer, FA(8), 30%
    missing); the standard deviation's gradient vanishes only as its square root.
    """

    def to_free(params, hyper):
        (W, mu), (W_low, mu_low), (W_high, mu_high) = free_loadings(params.W, params.mu)
        variances = params[2:]
        lows = [
            jnp.broadcast_to(jnp.sqrt(floor), jnp.shape(v)).astype(v.dtype)
            for v, floor in zip(variances, floors(hyper), strict=True)
        ]
        highs = [jnp.full_like(v, jnp.inf) for v in variances]
        x = (W, mu, *[jnp.sqrt(v) for v in variances])
        return x, (W_low, mu_low, *lows), (W_high, mu_high, *highs)

    def from_free(x, hyper):
        W, mu, *deviations = x
        variances = [
            jnp.maximum(s**2, floor) for s, floor in zip(deviations, floors(hyper), strict=True)
        ]
        return params_type(W, mu, *variances)

    return BoxCoordinates(to_free, from_free)


# ----------------------------------------------------------------------------- host algebra


def marginal_covariance(W, noise_variance) -> np.ndarray:
    """The model covariance of x, ``W W^T + diag(noise_variance)`` (NumPy)."""
    W = np.asarray(W)
    return W @ W.T + np.diag(noise_variance)


def marginal_precision(W, noise_variance) -> np.ndarray:
    """Inverse of :func:`marginal_covariance` by the Woodbury identity, O(d^2 K):
    ``Psi^{-1} - Psi^{-1} W M^{-1} W^T Psi^{-1}`` with ``M = I + W^T Psi^{-1} W``
    (the posterior precision of z)."""
    W = np.asarray(W)
    psi_inv = 1.0 / np.asarray(noise_variance)
    M = np.eye(W.shape[1]) + (W.T * psi_inv) @ W
    B = np.linalg.solve(M, W.T * psi_inv)
    return np.diag(psi_inv) - (W * psi_inv[:, None]) @ B


def draw_rows(z_mean, z_cov, W, mu, noise_variance, rng) -> np.ndarray:
    """One draw of every row from the model given its posterior of z: z ~ N(z_mean,
    z_cov) (n, K) and (n, K, K), then x | z ~ N(W z + mu, diag(noise_variance)), so the
    coordinates keep their correlations (NumPy, ``rng`` a ``RandomState``)."""
    chol = np.linalg.cholesky(z_cov)
    z = z_mean + np.einsum("nkl,nl->nk", chol, rng.standard_normal(z_mean.shape))
    n, d = z.shape[0], np.shape(W)[0]
    return z @ np.asarray(W).T + mu + np.sqrt(noise_variance) * rng.standard_normal((n, d))


def draw_imputations(X, mask, z_mean, z_cov, W, mu, noise, n_imputations, rng):
    """``n_imputations`` draws of the missing entries (n_imputations, n, d): z from its
    posterior ``(z_mean, z_cov)``, then x given z (:func:`draw_rows`); observed
    entries kept."""
    draws = np.empty((n_imputations, *X.shape))
    for m in range(n_imputations):
        draws[m] = np.where(mask > 0, X, draw_rows(z_mean, z_cov, W, mu, noise, rng))
    return draws


def mixture_form(mean, std):
    """Conditional means and sds (n, d) as the one-component mixture every imputing
    model reports: ``(weights (n, 1), means (n, 1, d), sds (n, 1, d))``."""
    return np.ones((mean.shape[0], 1)), mean[:, None, :], std[:, None, :]


def central_quantile(level):
    """z with ``mean -/+ z * sd`` the central ``level`` interval of a Gaussian."""
    from scipy.stats import norm

    return norm.ppf(0.5 + 0.5 * level)


def orient_columns(W, *columns_along):
    """Loadings ``W`` (d, K) with columns by decreasing sum of squares, each with its
    largest-magnitude entry positive (as scikit-learn's ``svd_flip``), in NumPy.

    Arrays in ``columns_along`` (one entry per column, e.g. Bayesian PCA's alpha) are
    reordered with the columns.  Returns ``W`` alone, or ``(W, *columns_along)``.
    """
    W = np.asarray(W)
    order = np.argsort(-np.sum(W**2, axis=0), kind="stable")
    W = W[:, order]
    signs = np.sign(W[np.abs(W).argmax(axis=0), np.arange(W.shape[1])])
    W = W * np.where(signs == 0, 1.0, signs)
    if not columns_along:
        return W
    return (W, *(np.asarray(a)[order] for a in columns_along))


def canonical_loadings(W) -> np.ndarray:
    """Rotate loadings to their principal axes and fix each column's sign (NumPy).

    The likelihood depends on W only through W W^T, so W R for any orthogonal R is
    equally good.  Reporting W = U S (from W = U S V^T) makes the columns orthogonal
    and ordered by norm, and :func:`orient_columns` makes the result deterministic.
    Computed on the host: a d x K SVD costs microseconds, a compiled program for it a
    compile.
    """
    U, S, _ = np.linalg.svd(np.asarray(W), full_matrices=False)
    return orient_columns(U * S)


def rotated_loadings(W, rotation, rotation_kwargs, n_rotation_starts, seed):
    """The loadings W (d, K) of the rotated solution, in the frame of uncorrelated
    factors the declaration has (z ~ N(0, I)): ``Lambda C`` with ``Lambda`` the
    pattern loadings and ``C`` the Cholesky factor of the factor correlations
    ``Phi = C C^T``, so that ``W W^T = Lambda Phi Lambda^T`` and every likelihood is
    the unrotated one.  The rotated factors are ``f = C z``.  ``rotation`` is a
    method of :func:`latentlab.closed_form.rotation.rotate` or a criterion function
    of the loadings; ``seed`` seeds its random starts.  Returns ``(W,
    rotation_matrix, factor_correlation)``; W unchanged without a rotation (or K < 2)."""
    K = W.shape[1]
    identity = np.eye(K)
    if rotation is None or K < 2:
        return W, identity, identity
    method, criterion = ("custom", rotation) if callable(rotation) else (rotation, None)
    kwargs = dict(rotation_kwargs or {})
    if criterion is not None:
        kwargs["criterion"] = criterion
    result = rotate(
        np.asarray(W, np.float64),
        method,
        n_starts=n_rotation_starts,
        random_state=seed,
        **kwargs,
    )
    rotation_matrix = np.asarray(result.rotation_matrix, np.float64)
    if not result.oblique:
        return np.asarray(result.loadings, np.float64), rotation_matrix, identity
    phi = np.asarray(result.factor_correlation, np.float64)
    return np.asarray(result.loadings, np.float64) @ np.linalg.cholesky(phi), rotation_matrix, phi


FACTOR_SCORE_METHODS = ("regression", "bartlett", "anderson_rubin", "ten_berge")


def _symmetric_power(A, power):
    """A^power for a stack of symmetric positive definite matrices (n, K, K)."""
    values, vectors = np.linalg.eigh(A)
    return np.einsum("...ik,...k,...jk->...ij", vectors, values**power, vectors)


def factor_scores(pattern, phi, noise_variance, Xc, mask, method):
    """Factor scores of centred rows ``Xc`` (n, d; 0 where ``mask`` is 0) for the
    pattern loadings ``Lambda`` (d, K), factor correlations ``Phi`` and noise
    variances ``psi``, each row scored from its observed entries (NumPy):

    - ``"regression"`` (Thurstone 1935): the posterior mean
      ``Phi Lambda^T Sigma^-1 x = (Phi^-1 + M)^-1 b``;
    - ``"bartlett"`` (Bartlett 1937): weighted least squares, ``M^-1 b``, unbiased
      given the factors;
    - ``"anderson_rubin"`` (Anderson & Rubin 1956): ``(M Phi M + M)^(-1/2) b``,
      uncorrelated unit-variance scores;
    - ``"ten_berge"`` (ten Berge, Krijnen, Wansbeek & Shapiro 1999): the
      correlation-preserving scores, covariance ``Phi``:
      ``Phi^(1/2) (L^T Sigma^-1 L)^(-1/2) L^T Sigma^-1 x`` with ``L = Lambda Phi^(1/2)``
      (Anderson-Rubin's where Phi = I);

    with ``b = Lambda^T Psi^-1 x`` and ``M = Lambda^T Psi^-1 Lambda`` over the row's
    observed entries, and ``Sigma^-1`` by the Woodbury identity in K dimensions, so a
    row with missing entries gets the scores of its observed block's model.  On
    complete data the last two have exactly their stated covariance under the model.
    """
    pattern, phi = np.asarray(pattern, np.float64), np.asarray(phi, np.float64)
    weights = np.asarray(mask, np.float64) / np.asarray(noise_variance, np.float64)
    b = (Xc * weights) @ pattern  # (n, K)
    M = np.einsum("ik,ni,il->nkl", pattern, weights, pattern)  # (n, K, K)
    if method == "bartlett":
        return np.linalg.solve(M, b[..., None])[..., 0]
    if method == "anderson_rubin":
        scale = _symmetric_power(M @ phi @ M + M, -0.5)
        return np.einsum("nkl,nl->nk", scale, b)
    # Lambda^T Sigma^-1 Lambda = M - M (Phi^-1 + M)^-1 M, Lambda^T Sigma^-1 x likewise
    inner = np.linalg.inv(phi) + M
    projected = b - np.einsum("nkl,nl->nk", M, np.linalg.solve(inner, b[..., None])[..., 0])
    if method == "regression":
        return np.einsum("kl,nl->nk", phi, projected)
    if method != "ten_berge":
        raise ValueError(f"method must be one of {FACTOR_SCORE_METHODS}, got {method!r}")
    information = M - M @ np.linalg.solve(inner, M)  # Lambda^T Sigma^-1 Lambda
    root = _symmetric_power(phi, 0.5)
    scale = root @ _symmetric_power(root @ information @ root, -0.5) @ root
    return np.einsum("nkl,nl->nk", scale, projected)
