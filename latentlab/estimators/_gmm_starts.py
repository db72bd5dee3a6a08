"""How :class:`latentlab.GaussianMixture` makes its starts, as pure functions of
the settings they need: the standardised units EM works in, the covariance floor
there, starting responsibilities as scikit-learn makes them, and the user's or a
previous fit's parameters (``*_init``, ``warm_start``) in those units.  All on the
host in NumPy, except the k-means and k-means++ starts: those run inside the fit
program (:func:`latentlab.models.gmm.start_responsibilities`) on latentlab's own
k-means, so a cold fit still compiles one program."""

from __future__ import annotations

import numpy as np

from latentlab._shapes import signature
from latentlab.closed_form import kmeans as km
from latentlab.estimators._gmm_programs import pad_components
from latentlab.models import gmm
from latentlab.models.gmm import KMeansStart

__all__ = [
    "KMEANS_RUNS",
    "estep_work",
    "given_start",
    "program_key",
    "random_responsibilities",
    "scale_from_precisions",
    "standardising_units",
    "start_responsibilities",
    "user_init",
    "variance_floor",
    "warm_init",
]

# k-means runs (best inertia kept) for init_params="kmeans"
KMEANS_RUNS = 3


def user_init(weights_init, means_init, precisions_init, K, d, shift, unit, covariance_type):
    """User-given starting values as (weights, means, scale) or None each, in the
    standardised units EM works in: (x - shift) / unit, feature by feature."""
    weights = means = scale = None
    if weights_init is not None:
        weights = np.asarray(weights_init, dtype=np.float64)
        if weights.shape != (K,):
            raise ValueError(f"weights_init must have shape ({K},), got {weights.shape}")
        if np.any(weights < 0) or not np.isclose(weights.sum(), 1.0, atol=1e-6):
            raise ValueError("weights_init must be non-negative and sum to 1")
    if means_init is not None:
        means = np.asarray(means_init, dtype=np.float64)
        if means.shape != (K, d):
            raise ValueError(f"means_init must have shape ({K}, {d}), got {means.shape}")
        if not np.all(np.isfinite(means)):
            raise ValueError("means_init must be finite")
        means = (means - shift) / unit
    if precisions_init is not None:
        scale = scale_from_precisions(np.asarray(precisions_init, float), K, d, covariance_type)
        scale = gmm.rescale(scale, 1.0 / unit, covariance_type)
    return weights, means, scale


def warm_init(previous, K, d, shift, unit, covariance_type):
    """A previous fit's parameters (``previous``: a dict of ``params_``, data units)
    as (weights, means, scale) in the standardised units of this fit (see
    :func:`user_init`)."""
    expected = {"full": (K, d, d), "tied": (d, d), "diag": (K, d), "spherical": (K,)}
    if previous["means"].shape != (K, d) or previous["scale"].shape != expected[covariance_type]:
        raise ValueError(
            "warm_start=True: the previous fit (means_ shape "
            f"{previous['means'].shape}, scale shape {previous['scale'].shape}) does not "
            f"match n_components={K}, covariance_type={covariance_type!r} and "
            f"{d} features; refit with warm_start=False"
        )
    means = (previous["means"] - shift) / unit
    scale = gmm.rescale(previous["scale"], 1.0 / unit, covariance_type)
    return previous["weights"], means, scale


def scale_from_precisions(prec, K, d, covariance_type):
    """``precisions_init`` checked against its shape and sign, as the model's scale
    (Cholesky factors or standard deviations)."""
    expected = gmm.scale_shape(covariance_type, K, d)
    if prec.shape != expected:
        raise ValueError(
            f"precisions_init must have shape {expected} for "
            f"covariance_type={covariance_type!r}, got {prec.shape}"
        )
    if covariance_type in ("diag", "spherical"):
        if not np.all(prec > 0) or not np.all(np.isfinite(prec)):
            raise ValueError("precisions_init must be positive")
    try:
        return gmm.scale_from_precisions(prec, covariance_type)
    except np.linalg.LinAlgError:
        raise ValueError("precisions_init must be symmetric positive definite") from None


def standardising_units(Xc, observed, covariance_type):
    """The unit s_j of each feature that EM works in: its standard deviation (about
    its mean, over its observed entries; ``Xc`` centred, 0 where missing), so that the
    fit is equivariant under rescaling features; spherical covariances are only
    equivariant under one global scale, so they get one, the root mean variance.  A
    constant feature has no scale of its own and gets the root mean variance of the
    others."""
    variance = np.sum(Xc**2, axis=0) / observed.sum(axis=0)
    if covariance_type == "spherical":
        variance = np.full_like(variance, np.mean(variance))
    positive = variance > 0
    typical = np.mean(variance[positive]) if positive.any() else 1.0
    return np.sqrt(np.where(positive, variance, typical))


def variance_floor(unit, dtype, reg_covar):
    """The covariance floor in standardised units, one per feature: ``reg_covar``
    (a variance in the data's units) over s_j^2, but never below the working
    precision's resolution, 10 eps: a covariance eigenvalue under ~eps times the
    feature's variance is round-off, and a component collapsed onto tied points
    would otherwise have an infinite (NaN) likelihood -- scikit-learn lands there
    by luck of cancellation."""
    resolution = 10.0 * np.finfo(dtype).eps
    return np.maximum(float(reg_covar) / unit**2, resolution)


def start_responsibilities(
    Z, K, need_resp, n_starts, shape, rng, dtype, *, init_params, covariance_type
):
    """Starting responsibilities for the fit program, (n_starts, rows, padded) with
    ``shape = (rows, padded)``: an array in ``dtype``, or for k-means starts a
    :class:`KMeansStart` that the program turns into one.  Its k-means++ draws are
    ``rng``'s, in the order scikit-learn's ``KMeans(n_init=runs, random_state=rng)``
    (or ``kmeans_plusplus``) takes them, one start after another: on the same
    data, the same seeds as scikit-learn's.  Z is the standardised data with
    missing entries at their column means (0): the k-means start sees mean-imputed
    data; EM then uses only the observed entries."""
    n = Z.shape[0]
    rows, padded = shape
    if need_resp and init_params in ("kmeans", "k-means++"):
        # Z is standardised feature by feature (see fit), which weighs a
        # low-variance feature as much as the others and makes k-means' local optima
        # likelier than in the data's geometry (a planted 3-cluster case: 8 of 50
        # single runs stuck); the best of a few runs costs little next to EM.
        # Spherical mixtures are standardised by one global scale: k-means sees
        # the data's own geometry, as scikit-learn's single run does.
        runs = 1
        if init_params == "kmeans" and covariance_type != "spherical":
            runs = KMEANS_RUNS
        trials = km.local_trials(K)
        used = km.plusplus_uniforms_size(K, trials)
        uniforms = np.zeros((n_starts, runs, km.plusplus_uniforms_size(padded, trials)))
        for start in uniforms:
            for run in start:
                run[:used] = rng.random_sample(used)
        return KMeansStart(uniforms.astype(dtype), init_params, trials)
    resp = np.stack(
        [
            random_responsibilities(Z, K, rng, init_params)
            if need_resp
            else np.full((n, K), 1.0 / K)
            for _ in range(n_starts)
        ]
    )
    return np.pad(resp, ((0, 0), (0, rows - n), (0, padded - K))).astype(dtype)


def random_responsibilities(X, K, rng, init_params):
    """Starting responsibilities (n, K) for one random start, as scikit-learn makes
    them (the k-means starts are made in the fit program, see
    :func:`start_responsibilities`)."""
    n = X.shape[0]
    resp = np.zeros((n, K))
    if init_params == "random":
        resp = rng.uniform(size=(n, K))
        resp /= resp.sum(axis=1, keepdims=True)
    else:
        resp[rng.choice(n, size=K, replace=False), np.arange(K)] = 1.0
    return resp


def estep_work(observed, covariance_type):
    """Rough cost (flops) of one E-step per component: complete rows cost d^2
    each (d for diag/spherical), rows with missing entries d^3 (d)."""
    n, d = observed.shape
    dense = covariance_type in ("full", "tied")
    missing = int(np.sum(~observed.all(axis=1)))
    return (n - missing) * (d * d if dense else d) + missing * (d**3 if dense else d)


def program_key(
    observed, n_starts, *, covariance_type, max_iter, accelerate, verbose, dtype, devices
):
    """What, besides the component count, shapes the in-memory EM program (the
    shape policy reuses an exact program it has: :func:`latentlab._shapes.padded_count`)."""
    n, d = observed.shape
    return signature(
        rows=(n, d, int(np.sum(~observed.all(axis=1)))),
        covariance_type=covariance_type,
        n_starts=int(n_starts),
        max_iter=int(max_iter),
        accelerate=bool(accelerate),
        verbose=int(verbose),
        dtype=str(np.dtype(dtype)),
        devices=repr(devices),
    )


def given_start(weights, means, scale, n_components, padded, n_features, dtype, covariance_type):
    """``(user, use_user)`` for :func:`latentlab.models.gmm.em_starts`: the user's
    starting values with padding components up to ``padded`` (zeros where none were
    given) and which were given."""
    pad = padded - n_components
    K, d = padded, n_features
    given = pad_components(weights, means, scale, pad, covariance_type)
    shape = ((K,), (K, d), gmm.scale_shape(covariance_type, K, d))
    user = gmm.Params(
        *(
            np.zeros(s, dtype) if v is None else np.asarray(v, dtype)
            for v, s in zip(given, shape, strict=True)
        )
    )
    return user, np.array([v is not None for v in given])
