"""The covariance-type algebra of the Gaussian mixture (:mod:`latentlab.models.gmm`).

Every switch on ``covariance_type`` lives here: the shapes of the ``scale`` site, its
prior, the component covariances and densities, each component's conditional given a
row's observed coordinates, the floored M-step covariance, and -- in NumPy, on the
host -- the quantities estimators report (covariances, precisions and their Cholesky
factors as scikit-learn shapes them, rescaling, conditional draws, where a covariance
reached its floor).

Covariances are kept as Cholesky factors (the ``scale`` site / ``Params.scale``):

    full       (K, d, d)  lower-triangular L_k,  Sigma_k = L_k L_k^T
    tied       (d, d)     one L shared by every component
    diag       (K, d)     standard deviations,   Sigma_k = diag(s_k^2)
    spherical  (K,)       standard deviations,   Sigma_k = s_k^2 I
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.linalg import solve_triangular
from numpyro.distributions import constraints

from latentlab.models._linalg import solve_refined, spd_inverse_columns

# no __all__: a private module; latentlab.models.gmm re-exports its public names

COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
LOG_2PI = math.log(2.0 * math.pi)
DENSE = ("full", "tied")  # types whose scale is a Cholesky factor, not standard deviations


def scale_shape(covariance_type: str, n_components: int, n_features: int) -> tuple:
    """Shape of the ``scale`` site (and of scikit-learn's precisions) for the type."""
    K, d = n_components, n_features
    return {"full": (K, d, d), "tied": (d, d), "diag": (K, d), "spherical": (K,)}[covariance_type]


def unit_scale(covariance_type: str, n_components: int, n_features: int, dtype, xp=np):
    """The ``scale`` of unit covariances (identity factors, unit deviations), in the
    array namespace ``xp`` (NumPy on the host, ``jax.numpy`` in a program)."""
    shape = scale_shape(covariance_type, n_components, n_features)
    if covariance_type in DENSE:
        return xp.broadcast_to(xp.eye(n_features, dtype=dtype), shape)
    return xp.ones(shape, dtype)


def scale_tril(scale, covariance_type: str, n_components: int, n_features: int):
    """(K, d, d) lower Cholesky factors of every component's covariance."""
    K, d = n_components, n_features
    if covariance_type == "full":
        return scale
    if covariance_type == "tied":
        return jnp.broadcast_to(scale, (K, d, d))
    if covariance_type == "diag":
        return jax.vmap(jnp.diag)(scale)
    return scale[:, None, None] * jnp.eye(d, dtype=scale.dtype)


def scale_prior(covariance_type, K, d):
    """Prior on the Cholesky factors (flat on lower-Cholesky matrices for full/tied)."""
    if covariance_type == "full":
        return dist.ImproperUniform(constraints.lower_cholesky, (), (K, d, d))
    if covariance_type == "tied":
        return dist.ImproperUniform(constraints.lower_cholesky, (), (d, d))
    shape = (K, d) if covariance_type == "diag" else (K,)
    return dist.LogNormal(0.0, 2.0).expand(shape).to_event(len(shape))


def covariance_penalty(scale, covariance_type: str, prior_rows, prior_variance, active=None):
    """The covariance penalty -(tau / 2) sum_k [tr(Sigma_k^-1 D) + log |Sigma_k|] (Chen &
    Tan 2009; the log density, up to a constant, of an improper inverse-Wishart prior
    with scale tau D), ``tau = prior_rows``, ``D = diag(prior_variance)`` (d,), summed
    over the ``active`` components (None: all; a tied covariance counts once).  It
    keeps the likelihood bounded where a component could collapse onto fewer rows than
    dimensions (rows with missing entries constrain only the coordinates they
    observe), and its M-step is the scatter plus tau pseudo-rows of variance D
    (:func:`penalised_scatter`)."""
    if covariance_type in DENSE:
        L = scale if covariance_type == "full" else scale[None]
        root = jnp.broadcast_to(jnp.diag(jnp.sqrt(prior_variance)), L.shape)
        trace = jnp.sum(solve_triangular(L, root, lower=True) ** 2, axis=(-2, -1))
        log_det = 2.0 * jnp.sum(jnp.log(jnp.abs(jnp.diagonal(L, axis1=-2, axis2=-1))), axis=-1)
    elif covariance_type == "diag":
        var = scale**2
        trace = jnp.sum(prior_variance / var, axis=-1)
        log_det = jnp.sum(jnp.log(var), axis=-1)
    else:  # spherical: Sigma_k = s_k^2 I
        var = scale**2
        trace = jnp.sum(prior_variance) / var
        log_det = prior_variance.shape[-1] * jnp.log(var)
    terms = trace + log_det
    if active is not None and covariance_type != "tied":
        terms = jnp.where(active, terms, 0.0)
    return -0.5 * prior_rows * jnp.sum(terms)


def penalised_scatter(cov, count, prior_rows):
    """The penalised M-step's covariance before its floor: (N_k S_k + tau I) / (N_k +
    tau), in the fit's standardised units (the penalty's D = I there); ``cov`` (K, d, d)
    or (d, d) scatters S_k, variances (K, d) or mean variances (K,), ``count`` N_k."""
    if cov.ndim == count.ndim:  # spherical: (K,)
        return (count * cov + prior_rows) / (count + prior_rows)
    if cov.ndim == count.ndim + 1:  # diag: (K, d)
        c = count[:, None]
        return (c * cov + prior_rows) / (c + prior_rows)
    eye = jnp.eye(cov.shape[-1], dtype=cov.dtype)
    c = jnp.reshape(count, count.shape + (1, 1))
    return (c * cov + prior_rows * eye) / (c + prior_rows)


def component_variances(scale, covariance_type: str, n_components: int, n_features: int):
    """Sigma_k as (K, d, d) for full/tied, per-coordinate variances (K, d) otherwise."""
    K, d = n_components, n_features
    if covariance_type in ("full", "tied"):
        L = scale_tril(scale, covariance_type, K, d)
        return L @ jnp.swapaxes(L, -1, -2)
    if covariance_type == "diag":
        return scale**2
    return jnp.broadcast_to(scale[:, None] ** 2, (K, d))


def precision_factor(L):
    """P = L^{-T} (upper triangular), so that (x - mu)^T Sigma^{-1} (x - mu) = |(x - mu) P|^2."""
    eye = jnp.broadcast_to(jnp.eye(L.shape[-1], dtype=L.dtype), L.shape)
    return jnp.swapaxes(solve_triangular(L, eye, lower=True), -1, -2)


def component_log_density(params, X, covariance_type: str):
    """log N(x_i | mu_k, Sigma_k) for every row and component, and the centred rows.

    Returns ``(log_density (n, K), diff (K, n, d))`` with ``diff[k] = X - mu_k``.
    A non-positive diagonal in a Cholesky factor (e.g. from an extrapolation step)
    gives NaN, never a crash.
    """
    means, scale = params.means, params.scale
    d = X.shape[1]
    diff = X[None, :, :] - means[:, None, :]  # (K, n, d)
    if covariance_type in ("full", "tied"):
        P = precision_factor(scale)
        if covariance_type == "full":
            y = jnp.einsum("knd,kde->kne", diff, P)
        else:
            y = jnp.einsum("knd,de->kne", diff, P)
        quad = jnp.sum(y**2, axis=-1)  # (K, n)
        log_det = jnp.sum(jnp.log(jnp.diagonal(scale, axis1=-2, axis2=-1)), axis=-1)
        log_det = jnp.broadcast_to(log_det, means.shape[:1])
    elif covariance_type == "diag":
        quad = jnp.einsum("knd,kd->kn", diff**2, 1.0 / scale**2)
        log_det = jnp.sum(jnp.log(scale), axis=-1)
    else:
        quad = jnp.sum(diff**2, axis=-1) / scale[:, None] ** 2
        log_det = d * jnp.log(scale)
    log_density = -0.5 * (d * LOG_2PI + quad) - log_det[:, None]
    return log_density.T, diff


def conditional_components(params, X, observed, covariance_type: str):
    """Each component's marginal over a row's observed coordinates, and the missing
    coordinates' conditional Gaussian given them.

    ``X`` (n, d) may hold anything where ``observed`` (n, d) is 0.  Returns
    ``(log_density (n, K), dx (n, K, d), cond_cov)``: log N(x_o | mu_ko, Sigma_k,oo);
    ``dx = E[x | x_o, k] - mu_k``; ``cond_cov`` = Cov[x | x_o, k], (n, K, d, d) for
    full/tied and its diagonal (n, K, d) otherwise, zero on observed coordinates.

    For full covariances the observed block is handled without gathering it: with
    D = diag(observed), S = D Sigma_k D + (I - D) is block diagonal after a
    permutation, with Sigma_oo on the observed block and the identity elsewhere, so
    log|S| = log|Sigma_oo| and S^{-1} D (x - mu_k) = Sigma_oo^{-1}(x_o - mu_o).  All n K
    inverses come from one batched call with the batch axis last (Gauss-Jordan for
    d <= 20, see :mod:`latentlab.models._linalg`).
    """
    K, d = params.means.shape
    cov = component_variances(params.scale, covariance_type, K, d)
    o = observed
    missing = 1.0 - o
    r = o[:, None, :] * (X[:, None, :] - params.means[None])  # (n, K, d), 0 where missing
    n_obs = jnp.sum(o, axis=1)
    if covariance_type in ("full", "tied"):
        n = X.shape[0]
        eye = jnp.eye(d, dtype=X.dtype)
        # S for every (row, component) with the batch axis last: (d, d, n K)
        S = jnp.einsum("nd,kde,ne->denk", o, cov, o) + (
            eye[:, :, None, None] * missing.T[:, None, :, None]
        )
        S = S.reshape(d, d, n * K)
        S_inv, log_det = spd_inverse_columns(S)
        r_last = jnp.moveaxis(r, -1, 0).reshape(d, n * K)
        v = jnp.moveaxis(solve_refined(S, S_inv, r_last).reshape(d, n, K), 0, -1)  # S^{-1} r
        quad = jnp.sum(r * v, axis=-1)
        log_det = log_det.reshape(n, K)
        dx = r + missing[:, None, :] * jnp.einsum("kde,nke->nkd", cov, v)
        # Sigma_k - Sigma_k D S^{-1} D Sigma_k: the conditional covariance of the missing block
        D_S_inv_D = (
            jnp.moveaxis(S_inv.reshape(d, d, n, K), (2, 3), (0, 1))
            * o[:, None, :, None]
            * o[:, None, None, :]
        )
        schur = cov[None] - cov[None] @ D_S_inv_D @ cov[None]
        cond_cov = missing[:, None, :, None] * schur * missing[:, None, None, :]
    else:
        quad = jnp.sum(r**2 / cov[None], axis=-1)
        log_det = jnp.einsum("nd,kd->nk", o, jnp.log(cov))
        dx = r  # the coordinates are independent given k: E[x_m | k] = mu_km
        cond_cov = missing[:, None, :] * cov[None]
    log_density = -0.5 * (n_obs[:, None] * LOG_2PI + log_det + quad)
    return log_density, dx, cond_cov


def missing_block_components(params, X, observed, index, covariance_type: str):
    """:func:`conditional_components` for full/tied covariances by way of each
    component's precision P_k = Sigma_k^{-1}, inverting only a row's missing block.

    ``index`` (n, s) holds each row's missing coordinates in its first entries (the
    rest, and every entry of a padding row -- ``observed`` all 0 --, are ignored); s
    is at least every row's number of missing coordinates and usually well below d,
    which is where the saving is: the n K inversions are s x s, not d x d.  With
    r = x - mu_k zero on the missing coordinates m, u = (P_k r)_m and C = (P_k)_mm^{-1}:
    Cov[x_m | x_o, k] = C, E[x_m | x_o, k] - mu_m = -C u, log|Sigma_oo| = log|Sigma_k| +
    log|P_mm| (the Schur complement's determinant), and the quadratic form is that of
    the completed residual dx, |L_k^{-1} dx|^2 -- a sum of squares, free of the
    cancellation in r'P r - u'C u.

    Returns ``(log_density (n, K), dx (n, K, d), cond_block (n, K, s, s))``, the last
    zero outside each row's missing entries.
    """
    K, d = params.means.shape
    n, s = index.shape
    L = scale_tril(params.scale, covariance_type, K, d)
    L_inv = jnp.swapaxes(precision_factor(L), -1, -2)
    P = jnp.swapaxes(L_inv, -1, -2) @ L_inv
    log_det_cov = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)
    n_obs = jnp.sum(observed, axis=1)
    n_missing = jnp.where(n_obs > 0, d - n_obs, 0)  # padding rows: no block
    valid = (jnp.arange(s)[None, :] < n_missing[:, None]).astype(X.dtype)  # (n, s)
    both = valid[:, :, None] * valid[:, None, :]
    r = jnp.asarray(observed[:, None, :] * (X[:, None, :] - params.means[None]))  # (n, K, d)
    Pr = jnp.einsum("kde,nke->nkd", P, r)
    # (P_k)_mm for every (row, component), identity on the unused slots, batch last
    P_mm = (
        P[:, index[:, :, None], index[:, None, :]] * both[None]
        + jnp.eye(s, dtype=X.dtype) * (1.0 - valid)[None, :, :, None]
    )  # (K, n, s, s)
    P_mm = jnp.moveaxis(P_mm, (0, 1), (2, 3)).reshape(s, s, K * n)
    C, log_det_mm = spd_inverse_columns(P_mm)
    u = jnp.take_along_axis(Pr, jnp.broadcast_to(index[:, None, :], (n, K, s)), axis=2)
    u = jnp.moveaxis(u * valid[:, None, :], -1, 0)  # (s, n, K)
    u = jnp.swapaxes(u, 1, 2).reshape(s, K * n)  # batch (k, i) as P_mm's
    shift = solve_refined(P_mm, C, u).reshape(s, K, n)  # C u
    shift = jnp.moveaxis(shift, 0, -1).swapaxes(0, 1) * valid[:, None, :]  # (n, K, s)
    rows, comps = jnp.arange(n)[:, None, None], jnp.arange(K)[None, :, None]
    dx = r.at[rows, comps, index[:, None, :]].add(-shift)  # unused slots add 0
    y = jnp.einsum("kde,nke->nkd", L_inv, dx)
    quad = jnp.sum(y * y, axis=-1)
    log_det = log_det_cov[None] + log_det_mm.reshape(K, n).T
    log_density = -0.5 * (n_obs[:, None] * LOG_2PI + log_det + quad)
    cond_block = jnp.moveaxis(C.reshape(s, s, K, n), (2, 3), (1, 0)) * both[:, None]
    return log_density, dx, cond_block


def floored_cholesky(cov, floor):
    """Lower Cholesky factor of the covariance Sigma >= G = diag(floor) that maximises
    the Gaussian likelihood of scatter ``cov`` (one or a stack of (d, d)); ``floor`` is
    () or (d,), positive.

    With R = G^{1/2}, Sigma = R T R turns the constraint into T >= I and the scatter into
    C~ = R^{-1} cov R^{-1}: the maximiser is T = C~ with its eigenvalues lambda below 1
    raised to 1, i.e. Sigma = cov + sum over lambda_i < 1 of (1 - lambda_i) R u_i u_i^T R.

    An eigendecomposition of C~ itself resolves its eigenpairs only to eps |C~|, and
    with floors from 1e10 down to round-off (features whose scales differ by 1e16 under
    an absolute ``reg_covar``) |C~| ~ 1e14 swamps exactly the eigenpairs near and below
    1 that the floor acts on (seen: EM losing 5e-4 nats).  So they are taken from
    F = R (cov + G)^{-1} R instead, whose eigenvalues are 1 / (1 + lambda) in (0, 1]:
    |F| <= 1, and the floored ones (lambda < 1, eigenvalue > 1/2) come out to eps.
    (cov + G) is inverted after scaling it to unit diagonal, where its conditioning does
    not depend on the features' units.  The factor of the result then comes from the
    eigendecomposition of its unit-diagonal form (R of the QR of diag(sqrt(omega)) W^T
    has R^T R = W diag(omega) W^T), so it exists even where the floor is at round-off
    level and a Cholesky of the matrix can fail.

    Most M-steps meet no floor: where cov - G is positive definite by a margin that
    round-off cannot fake (:func:`_clear_of_floor`), Sigma = cov and its Cholesky
    factor is returned directly, for a fraction of the cost of the eigendecompositions
    below (a third of a K = 5 fit on breast_cancer went to them).
    """
    d = cov.shape[-1]
    dtype = cov.dtype
    floor = jnp.broadcast_to(jnp.asarray(floor, dtype), (d,))
    floor = jnp.maximum(floor, jnp.finfo(dtype).tiny)
    cov = 0.5 * (cov + jnp.swapaxes(cov, -1, -2))
    return jax.lax.cond(
        _clear_of_floor(cov, floor),
        jnp.linalg.cholesky,
        lambda cov: _floored_by_eigenvalues(cov, floor),
        cov,
    )


def _clear_of_floor(cov, floor):
    """Whether every matrix of ``cov`` minus diag(``floor``) is certainly positive
    definite: the smallest eigenvalue of its unit-diagonal form A is at least
    1 / ||L^{-1}||_F^2 (L the Cholesky factor of A), and that bound must clear the
    round-off of the factorisation (~d eps |A|, |A| <= d) a thousandfold."""
    d = cov.shape[-1]
    excess = cov - jnp.diag(floor)
    diagonal = jnp.diagonal(excess, axis1=-2, axis2=-1)
    root = jnp.sqrt(jnp.where(diagonal > 0, diagonal, 1.0))
    L = jnp.linalg.cholesky(excess / (root[..., :, None] * root[..., None, :]))
    eye = jnp.broadcast_to(jnp.eye(d, dtype=cov.dtype), L.shape)
    L_inv = jax.lax.linalg.triangular_solve(L, eye, left_side=True, lower=True)
    bound = 1.0 / jnp.sum(L_inv**2, axis=(-2, -1))
    margin = 1e3 * d * d * jnp.finfo(cov.dtype).eps
    return jnp.all(diagonal > 0) & jnp.all(jnp.isfinite(bound) & (bound > margin))


def _floored_by_eigenvalues(cov, floor):
    """:func:`floored_cholesky` where the floor may bind (its method, above)."""
    dtype = cov.dtype
    r = jnp.sqrt(floor)

    def unit_diagonal(matrix, diagonal):
        """matrix / sqrt(d_i d_j), and the lower bound min_j floor_j / d_j on its
        eigenvalues that the constraint gives (round-off may not undercut it)."""
        root = jnp.sqrt(diagonal)
        bound = jnp.min(floor / diagonal, axis=-1, keepdims=True)
        return matrix / (root[..., :, None] * root[..., None, :]), root, bound

    # F = R (cov + G)^{-1} R, from the unit-diagonal form of cov + G
    shifted = cov + jnp.diag(floor)
    diagonal = jnp.maximum(jnp.diagonal(shifted, axis1=-2, axis2=-1), floor)
    scaled, root, bound = unit_diagonal(shifted, diagonal)
    alpha, V = jnp.linalg.eigh(scaled)
    EV = (r / root)[..., :, None] * V
    F = (EV / jnp.maximum(alpha, bound)[..., None, :]) @ jnp.swapaxes(EV, -1, -2)
    phi, U = jnp.linalg.eigh(0.5 * (F + jnp.swapaxes(F, -1, -2)))
    phi = jnp.clip(phi, jnp.finfo(dtype).tiny, 1.0)
    weight = jnp.maximum(2.0 - 1.0 / phi, 0.0)  # 1 - lambda where lambda < 1, else 0
    RU = r[:, None] * U
    sigma = cov + (RU * weight[..., None, :]) @ jnp.swapaxes(RU, -1, -2)

    # its Cholesky factor, from the unit-diagonal form's eigendecomposition
    diagonal = jnp.maximum(jnp.diagonal(sigma, axis1=-2, axis2=-1), floor)
    scaled, root, bound = unit_diagonal(sigma, diagonal)
    omega, W = jnp.linalg.eigh(scaled)
    half = jnp.sqrt(jnp.maximum(omega, bound))[..., :, None] * jnp.swapaxes(W, -1, -2)
    L = jnp.swapaxes(jnp.linalg.qr(half, mode="r"), -1, -2)
    sign = jnp.sign(jnp.diagonal(L, axis1=-2, axis2=-1))
    L = L * jnp.where(sign == 0, 1.0, sign)[..., None, :]  # positive diagonal
    return root[..., :, None] * L


def n_parameters(n_features: int, n_components: int, covariance_type: str) -> int:
    """Free parameters, counted as scikit-learn counts them."""
    d, K = n_features, n_components
    covariance = {
        "full": K * d * (d + 1) // 2,
        "tied": d * (d + 1) // 2,
        "diag": K * d,
        "spherical": K,
    }[covariance_type]
    return covariance + K * d + K - 1


# ------------------------------------------------------------------ host side (NumPy)


def covariances(scale, covariance_type: str) -> np.ndarray:
    """scikit-learn's ``covariances_``: (K, d, d) full, (d, d) tied, variances (K, d)
    diag and (K,) spherical."""
    if covariance_type in DENSE:
        return scale @ np.swapaxes(scale, -1, -2)
    return scale**2


def precisions_cholesky(scale, covariance_type: str) -> np.ndarray:
    """Upper-triangular P = L^{-T} with precision P P^T (full/tied); 1/std otherwise."""
    if covariance_type in DENSE:
        eye = np.broadcast_to(np.eye(scale.shape[-1]), scale.shape)
        return np.swapaxes(np.linalg.solve(scale, eye), -1, -2)
    return 1.0 / scale


def precisions(scale, covariance_type: str) -> np.ndarray:
    """Inverse covariances in scikit-learn's shapes (P P^T, or 1/variance)."""
    P = precisions_cholesky(scale, covariance_type)
    if covariance_type in DENSE:
        return P @ np.swapaxes(P, -1, -2)
    return P**2


def pooled_covariance(scale, covariance_type: str, n_features: int) -> np.ndarray:
    """The components' mean covariance (d, d) -- the tied one itself: the metric that
    tells components apart when draws are matched to the fit."""
    cov = covariances(scale, covariance_type)
    if covariance_type == "tied":
        return cov
    if covariance_type == "full":
        return cov.mean(axis=0)
    variances = cov if cov.ndim == 2 else np.repeat(cov[:, None], n_features, axis=1)
    return (variances[:, :, None] * np.eye(n_features)).mean(axis=0)


def rescale(scale, unit, covariance_type: str):
    """The ``scale`` for data multiplied by ``unit`` (d,) feature by feature
    (x -> U x: L -> U L, lower triangular again); spherical covariances take one
    global unit, ``unit[0]``."""
    if covariance_type in DENSE:
        return unit[:, None] * scale
    if covariance_type == "diag":
        return scale * unit
    return scale * unit[0]


def scale_from_precisions(precisions, covariance_type: str) -> np.ndarray:
    """The ``scale`` whose precisions are ``precisions`` (scikit-learn's shapes);
    raises ``np.linalg.LinAlgError`` if a precision matrix is not positive definite."""
    if covariance_type not in DENSE:
        return 1.0 / np.sqrt(precisions)
    cov = np.linalg.inv(precisions)
    return np.linalg.cholesky(0.5 * (cov + np.swapaxes(cov, -1, -2)))


def marginal_variances(cond_cov, covariance_type: str) -> np.ndarray:
    """Per-coordinate variances (m, K, d) from :func:`conditional_components`' ``cond_cov``."""
    if covariance_type in DENSE:
        return np.diagonal(cond_cov, axis1=-2, axis2=-1)
    return cond_cov


def draw_conditional(rng, resp, means, cond_cov, missing, covariance_type: str, n_draws: int):
    """Draws (n_draws, m, d) from the conditional mixture sum_k resp_k N(means_k, cov_k)
    of :func:`conditional_components` (means, cond_cov per row and component): a
    component from ``resp`` (m, K), then its Gaussian (correlations kept).  Only the
    ``missing`` (m, d) coordinates are meaningful; ``rng`` is a NumPy RandomState."""
    m, d = missing.shape
    if covariance_type in DENSE:
        # unit variance on observed coordinates makes every covariance PD; callers
        # overwrite those coordinates
        root = np.linalg.cholesky(
            cond_cov + np.einsum("md,de->mde", 1.0 - missing, np.eye(d))[:, None]
        )
    else:
        root = np.sqrt(cond_cov)
    cumulative = np.cumsum(resp, axis=1)
    draws = np.empty((n_draws, m, d))
    for t in range(n_draws):
        u = rng.uniform(size=(m, 1))
        k = np.minimum((u > cumulative).sum(axis=1), resp.shape[1] - 1)
        eps = rng.standard_normal((m, d))
        pick = np.arange(m), k
        if root.ndim == 4:
            draws[t] = means[pick] + np.einsum("mde,me->md", root[pick], eps)
        else:
            draws[t] = means[pick] + root[pick] * eps
    return draws


def draw_samples(rng, weights, means, scale, covariance_type: str, n_samples: int):
    """``n_samples`` draws of the generative story on the host, ``(X, c)``:
    c ~ Categorical(weights), x = mu_c + L_c eps with eps ~ N(0, I) (diag/spherical:
    s_c * eps).  ``rng`` is a NumPy RandomState; NumPy throughout, so a draw compiles
    no program whatever ``n_samples`` is."""
    labels = rng.choice(len(weights), size=n_samples, p=weights / np.sum(weights))
    eps = rng.standard_normal((n_samples, means.shape[1]))
    if covariance_type == "full":
        noise = np.einsum("nde,ne->nd", scale[labels], eps)
    elif covariance_type == "tied":
        noise = eps @ scale.T
    elif covariance_type == "diag":
        noise = scale[labels] * eps
    else:
        noise = scale[labels][:, None] * eps
    return means[labels] + noise, labels.astype(np.int64)


def features_at_floor(scale, floor, covariance_type):
    """(K, d) bool (tied: (1, d)): where a component's covariance reached the floor
    G = diag(``floor``) -- for full/tied, an eigenvector of G^{-1/2} Sigma G^{-1/2}
    with eigenvalue at 1 (the floor), attributed to the features that carry at
    least half as much of it as the largest; for diag, the variances; for
    spherical, every feature."""
    if covariance_type in ("full", "tied"):
        relative = scale / np.sqrt(floor)[:, None]
        values, vectors = np.linalg.eigh(relative @ np.swapaxes(relative, -1, -2))
        floored = values <= 1.01  # (..., d) directions
        weight = vectors**2  # (..., feature, direction)
        heavy = weight >= 0.5 * weight.max(axis=-2, keepdims=True)
        at_floor = np.any(heavy & floored[..., None, :], axis=-1)
        return at_floor.reshape(-1, len(floor))
    if covariance_type == "diag":
        return scale**2 / floor <= 1.01
    spherical = scale**2 / np.max(floor) <= 1.01  # (K,)
    return np.repeat(spherical[:, None], len(floor), axis=1)
