"""Working with posterior draws of latent-variable models.

Loadings are identified only up to rotation (the likelihood depends on W through
W W^T) and mixture components only up to relabelling, so raw posterior draws of W or
of component means are not summarisable as they are.  This module

- aligns draws to the point estimate: orthogonal Procrustes for loadings
  (:func:`align_loadings`), Hungarian matching for mixture components
  (:func:`match_components`, :func:`relabel`);
- gives rotation-invariant summaries: :func:`loading_spectrum` (the eigenvalues of
  W W^T, "explained variance" per component) and :func:`loading_covariance`
  (W W^T itself, from a DataTree);
- builds Laplace approximations in an identified, unconstrained parametrisation
  (:func:`laplace_approximation`);
- wraps ArviZ's PSIS-LOO with a clear warning when it is unreliable (:func:`loo`);
- gives credible intervals of the latent variables (:func:`latent_intervals`).

Draws come from ``estimator.sample_posterior(X, method=...)``.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab._validation import check_level

__all__ = [
    "procrustes_rotations",
    "align_loadings",
    "match_components",
    "relabel",
    "loading_spectrum",
    "loading_covariance",
    "UnconstrainedCoordinates",
    "GaussianDraws",
    "laplace_approximation",
    "gaussian_draws",
    "loo",
    "LatentIntervals",
    "latent_intervals",
]


# ----------------------------------------------------------------------------- alignment


def procrustes_rotations(W, reference) -> np.ndarray:
    """Orthogonal R minimising ``||W R - reference||_F`` for each draw.

    Parameters
    ----------
    W : (..., d, K) loadings draws.   reference : (d, K) loadings to align to.

    Returns
    -------
    R : (..., K, K) orthogonal matrices (reflections included: the likelihood is
        invariant under the whole orthogonal group).  With ``W^T reference = U S V^T``,
        ``R = U V^T`` (Schoenemann 1966).
    """
    W, reference = np.asarray(W, np.float64), np.asarray(reference, np.float64)
    U, _, Vt = np.linalg.svd(np.swapaxes(W, -1, -2) @ reference)
    return U @ Vt


def align_loadings(draws: dict, reference: dict, sites) -> tuple[dict, np.ndarray]:
    """Rotate the loadings draws of ``sites`` jointly onto the reference.

    ``sites`` name loadings blocks (each (..., d_i, K)) that share one latent space
    (e.g. supervised PCA's ``W_x`` and ``W_y``); they are stacked by rows for the
    Procrustes fit and all rotated by the same R.  Other sites are returned as they
    are.

    Returns
    -------
    aligned : dict
        New dict with ``aligned[s] = draws[s] @ R``.
    R : (..., K, K)
        The rotations; ``aligned[s] @ R^T`` gives the raw draws back.
    """
    sites = tuple(sites)
    W = np.concatenate([np.asarray(draws[s]) for s in sites], axis=-2)
    W_ref = np.concatenate([np.asarray(reference[s]) for s in sites], axis=-2)
    R = procrustes_rotations(W, W_ref)
    out = dict(draws)
    for s in sites:
        out[s] = np.asarray(draws[s]) @ R
    return out, R


def match_components(key, reference, *, metric=None, weights=None, reference_weights=None):
    """Hungarian matching of each draw's components to the reference components.

    Parameters
    ----------
    key : (n_draws, K, m)
        What identifies a component in each draw (mixture means, topic-word rows...).
    reference : (K, m)
        The same for the point estimate.
    metric : (m, m), optional
        Precision matrix of the distance, e.g. the inverse pooled covariance, so that
        the cost is a squared Mahalanobis distance; Euclidean if None.
    weights, reference_weights : (n_draws, K) and (K,), optional
        Mixing weights; their squared log-ratio is added to the cost, which separates
        components that share a location.

    Returns
    -------
    perm : (n_draws, K) int
        ``perm[s, k]`` is the component of draw s that matches reference component k,
        so ``x[s, perm[s]]`` is in the reference's order.
    """
    from scipy.optimize import linear_sum_assignment

    key = np.asarray(key, np.float64)
    reference = np.asarray(reference, np.float64)
    diff = key[:, :, None, :] - reference[None, None, :, :]  # (S, K_draw, K_ref, m)
    P = np.eye(key.shape[-1]) if metric is None else np.asarray(metric, np.float64)
    cost = np.einsum("sjkm,mn,sjkn->sjk", diff, P, diff)
    if weights is not None:
        log_w = np.log(np.maximum(np.asarray(weights, np.float64), 1e-300))
        log_ref = np.log(np.maximum(np.asarray(reference_weights, np.float64), 1e-300))
        cost = cost + (log_w[:, :, None] - log_ref[None, None, :]) ** 2
    perm = np.empty(key.shape[:2], dtype=np.int64)
    for s in range(key.shape[0]):
        rows, cols = linear_sum_assignment(cost[s])
        perm[s, cols] = rows
    return perm


def relabel(draws: dict, perm, axes: dict[str, int]) -> dict:
    """Reorder the component axis of each site in ``axes`` by ``perm`` (n_draws, K).

    ``axes[site]`` is the component axis within the site's own shape (after the
    leading draw axis).  Returns a new dict.
    """
    perm = np.asarray(perm)
    out = dict(draws)
    for site, axis in axes.items():
        value = np.asarray(draws[site])
        shape = [perm.shape[0]] + [1] * (value.ndim - 1)
        shape[1 + axis] = perm.shape[1]
        out[site] = np.take_along_axis(value, perm.reshape(shape), axis=1 + axis)
    return out


# ----------------------------------------------------------------------------- summaries


def loading_spectrum(W, noise_variance=None):
    """Rotation-invariant summary of loadings: eigenvalues of W W^T, largest first.

    Parameters
    ----------
    W : (..., d, K) loadings.
    noise_variance : (..., d), optional
        Noise variance of each feature.

    Returns
    -------
    explained_variance : (..., K)
        Variance the latent factors carry along the k-th principal axis of W W^T
        (the squared singular values of W).  PPCA's ``explained_variance_`` adds
        ``sigma2`` to this (it is the data's variance along the axis).
    explained_variance_ratio : (..., K)
        The same over the model's total variance ``tr(W W^T) + sum(noise_variance)``;
        only when ``noise_variance`` is given, else None.
    """
    W = np.asarray(W, np.float64)
    s = np.linalg.svd(W, compute_uv=False)
    explained = s**2
    if noise_variance is None:
        return explained, None
    total = np.sum(W**2, axis=(-2, -1)) + np.sum(np.asarray(noise_variance), axis=-1)
    return explained, explained / total[..., None]


def loading_covariance(datatree) -> np.ndarray:
    """Posterior draws of ``W W^T`` from a DataTree made by ``sample_posterior``.

    The loadings blocks named in the tree's ``loadings`` attribute are stacked by
    rows, so for supervised PCA the result covers x then y.  Returns an array of
    shape (chain, draw, d, d): unlike W it does not depend on the rotation.
    """
    sites = datatree.attrs.get("loadings", "")
    sites = [s for s in str(sites).split(",") if s]
    if not sites:
        raise ValueError("this DataTree holds no loadings (its 'loadings' attribute is empty)")
    post = datatree["posterior"]
    W = np.concatenate([np.asarray(post[s].values) for s in sites], axis=-2)
    return W @ np.swapaxes(W, -1, -2)


# ----------------------------------------------------------------------------- Laplace


class UnconstrainedCoordinates:
    """A flat, unconstrained and identified parametrisation of a model's latent sites.

    Each site is mapped to the real line by NumPyro's ``biject_to`` of its support
    (log for positive parameters, stick-breaking for simplex weights, log-diagonal
    Cholesky factors).  Loadings are rotated once to lower-trapezoidal form,
    ``W = L R0`` with ``W0^T = Q R`` (QR), ``L0 = R^T``, ``R0 = Q^T``, and only the
    ``dK - K(K-1)/2`` entries of L on or below the diagonal are free: the likelihood
    is flat along the K(K-1)/2 rotation directions, and fixing R0 removes them.

    Parameters
    ----------
    model : callable
        NumPyro model; ``model(*args)`` must run.
    args : tuple
        Its arguments (the data).
    point : dict
        Constrained values of every latent site (e.g. the fitted parameters).
    loadings : tuple of str
        Loadings sites (each (d_i, K)) sharing one latent space, stacked by rows.
    """

    def __init__(self, model, args, point: dict, loadings=()):
        from numpyro import handlers
        from numpyro.distributions import biject_to

        self.model, self.args = model, tuple(args)
        point = {k: jnp.asarray(v) for k, v in point.items()}
        supports = {}

        def record_supports(point, args):
            trace = handlers.trace(handlers.substitute(model, data=point)).get_trace(*args)
            for name, site in trace.items():
                if site["type"] == "sample" and not site["is_observed"]:
                    supports[name] = site["fn"].support

        # abstract evaluation: the site structure without compiling every operation
        jax.eval_shape(record_supports, point, self.args)
        self.sites = list(supports)
        missing = [s for s in self.sites if s not in point]
        if missing:
            raise ValueError(f"no starting value for the latent site(s) {missing}")
        self.loadings = tuple(loadings)
        self.transforms = {s: biject_to(supports[s]) for s in self.sites}
        self.shapes = {s: tuple(point[s].shape) for s in self.sites}
        pieces, self.layout = [], []
        if self.loadings:
            W0 = jnp.concatenate([point[s] for s in self.loadings], axis=0)
            D, K = W0.shape
            Q, R = jnp.linalg.qr(W0.T)  # W0 = R^T Q^T: R^T lower trapezoidal
            self.rotation = Q.T
            self.tril = np.tril_indices(D, 0, K)
            pieces.append(R.T[self.tril])
            self.layout.append(("loadings", len(self.tril[0]), None))
        for s in self.sites:
            if s in self.loadings:
                continue
            u = self.transforms[s].inv(point[s])
            pieces.append(jnp.ravel(u))
            self.layout.append((s, u.size, u.shape))
        self.point = jnp.concatenate(pieces)

    @property
    def size(self) -> int:
        return int(self.point.size)

    def _split(self, theta):
        out, start = {}, 0
        for name, size, shape in self.layout:
            out[name] = (theta[start : start + size], shape)
            start += size
        return out

    def constrain(self, theta) -> dict:
        """Site name -> constrained value for one flat vector ``theta``."""
        values = {}
        for name, (piece, shape) in self._split(theta).items():
            if name == "loadings":
                K = self.rotation.shape[0]
                D = sum(self.shapes[s][0] for s in self.loadings)
                L = jnp.zeros((D, K), theta.dtype).at[self.tril].set(piece)
                W, row = L @ self.rotation, 0
                for s in self.loadings:
                    values[s] = W[row : row + self.shapes[s][0]]
                    row += self.shapes[s][0]
            else:
                values[name] = self.transforms[name](jnp.reshape(piece, shape))
        return values

    def log_jacobian(self, theta):
        """log |d constrained / d theta| (the loadings map is linear: constant, omitted)."""
        total = 0.0
        for name, (piece, shape) in self._split(theta).items():
            if name != "loadings":
                u = jnp.reshape(piece, shape)
                t = self.transforms[name]
                total = total + jnp.sum(t.log_abs_det_jacobian(u, t(u)))
        return total

    def log_density(self, theta):
        """The model's log joint density at ``constrain(theta)``, without the Jacobian."""
        from numpyro.infer.util import log_density

        return log_density(self.model, self.args, {}, self.constrain(theta))[0]


class GaussianDraws(NamedTuple):
    draws: dict[str, np.ndarray]  # site -> (num_samples, *site_shape), constrained
    log_p: np.ndarray  # (num_samples,) target log density in theta coordinates
    log_q: np.ndarray  # (num_samples,) approximation's log density in theta coordinates


def gaussian_draws(coords: UnconstrainedCoordinates, mean, factor, key, num_samples: int):
    """Draws ``theta = mean + factor @ eps`` mapped to constrained site values.

    ``factor`` (p, p) is a square root of the covariance.  Also returns, per draw, the
    target's log density in theta coordinates (log joint + log Jacobian) and the
    Gaussian's: their difference is the importance ratio that
    ``arviz.loo_approximate_posterior`` corrects with.
    """
    mean, factor = jnp.asarray(mean), jnp.asarray(factor)
    p = mean.size
    eps = jax.random.normal(key, (int(num_samples), p), mean.dtype)
    theta = mean + eps @ factor.T
    log_det = jnp.linalg.slogdet(factor)[1]
    log_q = -0.5 * jnp.sum(eps**2, axis=1) - 0.5 * p * jnp.log(2 * jnp.pi) - log_det

    from latentlab.inference.mcmc import map_in_chunks

    @jax.jit
    @jax.vmap
    def evaluate(t):
        return coords.constrain(t), coords.log_density(t) + coords.log_jacobian(t)

    draws, log_p = map_in_chunks(evaluate, theta)
    return GaussianDraws(
        draws={k: np.asarray(v) for k, v in draws.items()},
        log_p=np.asarray(log_p, np.float64),
        log_q=np.asarray(log_q, np.float64),
    )


def laplace_approximation(coords: UnconstrainedCoordinates):
    """Gaussian at ``coords.point`` with the inverse Hessian of the negative log density.

    The Hessian is that of the log joint density as a function of the unconstrained,
    identified coordinates *without* the transforms' Jacobian, so the Gaussian's mean
    is exactly the fitted point (a mode of that function: the ML or MAP estimate).

    Returns ``(mean, factor)`` with ``factor @ factor.T`` the covariance.  Raises
    ValueError if the Hessian is not positive definite (the point is not a mode, or
    the model is not identified in these coordinates).
    """
    theta0 = coords.point
    H = jax.jit(jax.hessian(lambda t: -coords.log_density(t)))(theta0)
    H = 0.5 * (H + H.T)
    if not bool(jnp.all(jnp.isfinite(H))):
        raise ValueError("the Hessian of the log density at the fitted point is not finite")
    eigvals, eigvecs = jnp.linalg.eigh(H)
    smallest = float(eigvals[0])
    if smallest <= 1e-10 * max(float(eigvals[-1]), 1e-300):
        raise ValueError(
            "the log density is not strictly concave at the fitted point (smallest Hessian "
            f"eigenvalue {smallest:.3g}): the point is not a mode or the model is not "
            "identified there; use method='nuts'"
        )
    return theta0, eigvecs / jnp.sqrt(eigvals)


# ----------------------------------------------------------------------------- LOO


def loo(datatree, var_name: str | None = None, *, k_threshold: float = 0.7):
    """PSIS-LOO of a DataTree from ``sample_posterior``, with a warning for bad rows.

    For NUTS draws this is ``arviz.loo(datatree, pointwise=True)``.  For Laplace and SVI
    draws (whose ``sample_stats`` hold ``lp`` and ``log_q``) it is
    ``arviz.loo_approximate_posterior``, which corrects for drawing from an
    approximation.  Rows whose Pareto k exceeds ``k_threshold`` have unreliable
    importance weights (the posterior changes too much without them): a warning
    names how many, and K-fold held-out log-likelihood (``latentlab.compare`` with
    ``cv=...``) is the reliable alternative.

    Returns
    -------
    arviz ELPDDataLOO
        ``.elpd``, ``.se``, ``.p``, ``.pareto_k`` (one per row), ``.elpd_i``...
    """
    import arviz as az

    stats = datatree.children.get("sample_stats")
    approximate = (
        datatree.attrs.get("method") in ("laplace", "svi")
        and stats is not None
        and "log_q" in stats.data_vars
    )
    if approximate:
        result = az.loo_approximate_posterior(
            datatree,
            log_p=stats["lp"].values.ravel(),
            log_q=stats["log_q"].values.ravel(),
            pointwise=True,
            var_name=var_name,
        )
    else:
        result = az.loo(datatree, pointwise=True, var_name=var_name)
    k = np.asarray(result.pareto_k).ravel()
    bad = int(np.sum(~(k <= k_threshold)))  # NaN: the smoothing itself failed
    if bad:
        warnings.warn(
            f"PSIS-LOO is unreliable for {bad} of {k.size} rows (Pareto k > {k_threshold}); "
            "use K-fold held-out log-likelihood instead (e.g. latentlab.compare with cv=10)",
            UserWarning,
            stacklevel=2,
        )
    return result


# ----------------------------------------------------------------------------- latent


class LatentIntervals(NamedTuple):
    mean: np.ndarray  # (n_samples, n_components) E[z | x]
    sd: np.ndarray  # (n_samples, n_components) posterior standard deviation
    lower: np.ndarray  # (n_samples, n_components)
    upper: np.ndarray  # (n_samples, n_components)


def latent_intervals(estimator: Any, X, level: float = 0.9) -> LatentIntervals:
    """Central credible intervals of each latent coordinate of each row.

    For the Gaussian latent models (PPCA, BayesianPCA, FactorAnalysis,
    SupervisedPCA) the posterior of z given a row's observed entries is Gaussian,
    ``N(mean, cov)`` from ``estimator.posterior_latent(X)``, so the interval of z_k is
    ``mean_k -/+ q sd_k`` with q the standard normal quantile at (1 + level) / 2.
    Plug-in: the fitted parameters are taken as known.  Intervals are per coordinate
    (marginal), in the estimator's rotation of W (``components_``).

    For mixtures the latent is the discrete component label and its posterior is the
    responsibilities themselves, ``estimator.predict_proba(X)``; there is no interval
    to give, so this raises ValueError.

    Parameters
    ----------
    estimator : fitted latentlab estimator with ``posterior_latent``.
    X : (n_samples, n_features) data; NaN marks missing entries where the model allows.
    level : float in (0, 1).

    Returns
    -------
    LatentIntervals
        ``mean``, ``sd``, ``lower``, ``upper``, each (n_samples, n_components).
    """
    from scipy.stats import norm

    level = check_level(level)
    if not hasattr(estimator, "posterior_latent"):
        if hasattr(estimator, "predict_proba"):
            raise ValueError(
                f"{type(estimator).__name__} has a discrete latent (the component label): its "
                "posterior is predict_proba(X) itself, with no interval to compute"
            )
        raise ValueError(f"{type(estimator).__name__} has no latent posterior")
    mean, cov = estimator.posterior_latent(X)
    sd = np.sqrt(np.maximum(np.diagonal(cov, axis1=1, axis2=2), 0.0))
    q = norm.ppf(0.5 + 0.5 * level)
    return LatentIntervals(mean=mean, sd=sd, lower=mean - q * sd, upper=mean + q * sd)
