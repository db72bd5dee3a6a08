"""The compiled programs and host-side passes that fit and query a Gaussian mixture,
built on the declaration and algebra of :mod:`latentlab.models.gmm` (this module
imports it; it does not import this one), as functions of explicit arguments with
nothing of an estimator in them.  :class:`latentlab.GaussianMixture` validates,
calls them and stores the fit.  In reading order:

- **shape policy** -- the E-step's rows per chunk (:data:`~latentlab._shapes.GMM_CHUNK`,
  :data:`~latentlab._shapes.GMM_MISSING_CHUNK`), components padded up to a power of two
  at weight exactly 0 (:func:`pad_components`) and programs called at one fixed row count
  (:func:`fixed_row_chunks`): they keep the number of compiled programs small (the
  compile budget).
- **starts** -- on the host in NumPy: the standardised units EM works in,
  (x - shift) / unit feature by feature (:func:`standardising_units`), the
  covariance floor there (:func:`variance_floor`), starting responsibilities as
  scikit-learn makes them (:func:`start_responsibilities`), and the user's or a
  previous fit's parameters (``*_init``, ``warm_start``) in those units.  The k-means
  and k-means++ starts run inside the fit program on latentlab's own k-means
  (:mod:`latentlab.models._gmm_starts`, handed a
  :class:`~latentlab.models.gmm.KMeansStart`), so a cold fit still compiles one
  program; :func:`make_starts` makes the starts as a program of their own for the
  MAP/SVI and online routes.
- **EM, in memory** -- what shapes the EM program (its cost per component and its
  key), EM's row blocks (:func:`em_data`) and its one compiled program from every
  start (:func:`run_em_program`, on :func:`latentlab.inference.em.fit_em`).
- **MAP / SVI** -- on the declaration through the shared multi-start driver
  (:func:`fit_svi`).  EM and MAP/SVI work in the standardised units the estimator
  maps the data to and from.
- **scoring a fitted mixture** -- its parameters about the mixture's mean in the
  working dtype, padded to a bucket of components (:func:`scoring_params`), scored
  by row-chunked programs of a fixed size (:func:`rows_per_call`), so nearby models
  share compiled programs and float32 keeps its digits on uncentred data
  (:func:`mixture_scores`).
- **conditionals (imputation)** -- given a row's observed entries,

      p(x_miss | x_obs) = sum_k p(k | x_obs) N(x_miss | x_obs, k),

  chunk by chunk over the rows with missing entries (:func:`conditional_chunks`),
  and the moments (:func:`mixture_moments`) and quantiles (:func:`mixture_quantile`)
  of such a mixture, per entry: ``impute``, ``impute_interval``,
  ``conditional_mixture`` and ``sample_imputations`` are built from them.
- **online EM** -- stepwise EM (Cappe & Moulines 2009): the stream's coordinates and
  first start from its first chunk (:func:`online_start`), a chunk's moments about
  the current means (:func:`centred_moments`), their running average
  (:func:`mix_moments`, Chan et al.'s pairwise update) and the M-step from it
  (:func:`online_m_step`); :func:`latentlab.inference.online.stepwise_update` drives
  them for ``GaussianMixture.partial_fit``.
- **chunked source** -- :class:`MixtureRowsPass`, the host side of the E-step on
  memmap, h5py, zarr or Dask rows that EM revisits every iteration: it reads every
  row each iteration and sums the statistics of
  :func:`latentlab._chunk_tasks.mixture_rows` (the in-memory E-step's,
  :mod:`latentlab.models._gmm_statistics`) over the chunks.  ``fit`` registers it
  with :func:`latentlab.inference.chunked.register` when a source's rows are too
  many to hold in the program.

At ~780 lines this file is over the convention's ~300: it is the one public module
that estimators import for the mixture's programs (a layer's private modules are its
own), and each section is short and reads on its own.
"""

from __future__ import annotations

from functools import cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from latentlab._chunk_tasks import mixture_rows
from latentlab._shapes import (
    GMM_CHUNK,
    GMM_MISSING_CHUNK,
    GMM_SCORE_WORK,
    bucket,
    chunked,
    component_bucket,
    em_rows,
    missing_block_groups,
    pad_rows,
    padded_size,
    signature,
    trace_capacity,
)
from latentlab.closed_form import kmeans as km
from latentlab.inference.chunked import RowChunks
from latentlab.inference.em import fit_em
from latentlab.inference.sharding import shard_fields
from latentlab.models import gmm
from latentlab.models.gaussian_latent import pilot_moments
from latentlab.models.gmm import KMeansStart

__all__ = [
    "pad_components",
    "fixed_row_chunks",
    "KMEANS_RUNS",
    "user_init",
    "warm_init",
    "scale_from_precisions",
    "standardising_units",
    "variance_floor",
    "start_responsibilities",
    "random_responsibilities",
    "given_start",
    "make_starts",
    "compiled_starts",
    "estep_work",
    "program_key",
    "em_data",
    "prior_rows",
    "run_em_program",
    "fit_svi",
    "row_scores",
    "mixture_centre",
    "centred_params",
    "scoring_params",
    "rows_per_call",
    "mixture_scores",
    "conditionals",
    "conditional_chunks",
    "mixture_moments",
    "mixture_quantile",
    "online_start",
    "online_m_step",
    "centred_moments",
    "mix_moments",
    "MixtureRowsPass",
]


# --------------------------------------------------------------------------- shape policy


# Rows per chunk of the E-step and per call of the scoring programs: GMM_CHUNK,
# GMM_MISSING_CHUNK and GMM_SCORE_WORK in latentlab._shapes.


def pad_components(weights, means, scale, pad, covariance_type):
    """Append ``pad`` padding components -- weight 0, mean 0, unit covariance -- to
    host arrays (any of them None stays None; a tied covariance has no component axis)."""
    if weights is not None:
        weights = np.concatenate([weights, np.zeros(pad, weights.dtype)])
    if means is not None:
        means = np.concatenate([means, np.zeros((pad, means.shape[1]), means.dtype)])
    if scale is not None and covariance_type != "tied":
        d = means.shape[1] if means is not None else scale.shape[-1]
        unit = gmm.unit_scale(covariance_type, pad, d, scale.dtype)
        scale = np.concatenate([scale, unit])
    return weights, means, scale


def fixed_row_chunks(fn, *row_arrays, chunk: int):
    """``fn(*chunk_of_rows)`` over ``row_arrays`` with every call at exactly ``chunk``
    rows (a power of two >= 32; zero rows pad the last call): any row count then
    reuses one compiled program, where buckets would compile one per size class (a
    predict on 7 rows, then 100, then 178: three).  Every output of ``fn`` must be
    row-wise; returns float64 NumPy arrays (a tuple, or one array if ``fn`` returns
    one) cut back to the input's rows (views, for internal use)."""
    n = row_arrays[0].shape[0]
    rows = max(-(-n // chunk), 1) * chunk
    padded = [pad_rows(a, rows) for a in row_arrays]
    pieces = []
    for start in range(0, rows, chunk):
        out = fn(*(a[start : start + chunk] for a in padded))
        pieces.append(
            tuple(
                np.array(o, dtype=np.float64, copy=True)
                for o in (out if isinstance(out, tuple) else (out,))
            )
        )
    joined = tuple(np.concatenate(p)[:n] for p in zip(*pieces, strict=True))
    return joined if len(joined) > 1 else joined[0]


# --------------------------------------------------------------------------------- starts


# k-means runs (best inertia kept) for init_params="kmeans"
KMEANS_RUNS = 3


def user_init(weights_init, means_init, precisions_init, K, d, shift, unit, covariance_type):
    """User-given starting values as (weights, means, scale) or None each, in the
    standardised units EM works in: (x - shift) / unit, feature by feature."""
    weights = means = scale = None
    if weights_init is not None:
        weights = np.asarray(weights_init, dtype=np.float64)
        if weights.shape != (K,):
            raise ValueError(
                f"The parameter 'weights' should have the shape of ({K},), but got "
                f"{weights.shape}: weights_init gives one weight per component"
            )
        if np.any(weights < 0) or not np.isclose(weights.sum(), 1.0, atol=1e-6):
            raise ValueError(
                "The parameter 'weights' should be in the range [0, 1], but got min value "
                f"{weights.min():.5f}: weights_init must be non-negative and sum to 1"
                if np.any(weights < 0)
                else "The parameter 'weights' should be normalized, but got sum(weights) = "
                f"{weights.sum():.5f}: weights_init must be non-negative and sum to 1"
            )
    if means_init is not None:
        means = np.asarray(means_init, dtype=np.float64)
        if means.shape != (K, d):
            raise ValueError(
                f"The parameter 'means' should have the shape of ({K}, {d}), but got "
                f"{means.shape}: means_init gives one row per component (n_components={K}) "
                f"and one column per feature ({d})"
            )
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
            f"The parameter '{covariance_type} precision' should have the shape of "
            f"{expected}, but got {prec.shape}: precisions_init must have that shape for "
            f"covariance_type={covariance_type!r}"
        )
    if covariance_type in ("diag", "spherical"):
        if not np.all(prec > 0) or not np.all(np.isfinite(prec)):
            raise ValueError(
                f"The parameter '{covariance_type} precision' should be positive: "
                "precisions_init must be positive and finite"
            )
    try:
        return gmm.scale_from_precisions(prec, covariance_type)
    except np.linalg.LinAlgError:
        raise ValueError(
            f"The parameter '{covariance_type} precision' should be symmetric, "
            "positive-definite: precisions_init must be symmetric positive definite"
        ) from None


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


@partial(jax.jit, static_argnames="covariance_type")
def make_starts(X, row_mask, resp, reg_covar, active, user, use_user, covariance_type):
    """The starts of :func:`latentlab.models.gmm.em_starts` as a program of their own
    (for the MAP/SVI and online routes; EM makes them inside its fit program)."""
    inputs = (X, row_mask, resp, user, use_user)
    hyper = gmm.Hyper(reg_covar, active)
    return gmm.em_starts(inputs, None, hyper, covariance_type=covariance_type)


@cache
def compiled_starts(make_starts):
    # fit's starts as one compiled program (eagerly, k-means would run op by op)
    return jax.jit(make_starts, static_argnames="covariance_type")


# -------------------------------------------------------------------------- EM, in memory


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
        rows=(n, d, int(np.sum(~observed.all(axis=1))), block_slots(observed, covariance_type)),
        covariance_type=covariance_type,
        n_starts=int(n_starts),
        max_iter=trace_capacity(int(max_iter)),  # the limit itself is an input
        accelerate=bool(accelerate),
        verbose=int(verbose),
        dtype=str(np.dtype(dtype)),
        devices=repr(devices),
    )


def block_slots(observed, covariance_type):
    """The missing-block E-step's row groups, as their slots per row
    (:func:`~latentlab._shapes.missing_block_groups`), for full/tied covariances;
    None where the d x d route is used."""
    if covariance_type not in ("full", "tied") or observed.all():
        return None
    counts = np.sum(~observed, axis=1)
    return missing_block_groups(
        counts[counts > 0], observed.shape[1], GMM_MISSING_CHUNK[covariance_type]
    )


def missing_index(observed, slots):
    """(n, slots) int32: each row's missing coordinates first (in order), zeros after."""
    missing = ~observed
    # a stable sort of the flags puts the missing coordinates first, in their order
    order = np.argsort(~missing, axis=1, kind="stable")[:, :slots]
    return np.where(np.arange(slots) < missing.sum(axis=1)[:, None], order, 0).astype(np.int32)


def em_data(Xc, observed, dtype, covariance_type, devices):
    """The standardised data ``Xc`` (missing entries 0) as EM's row blocks
    (a :class:`~latentlab.models.gmm.GMMData`): complete rows in chunks of
    :data:`~latentlab._shapes.GMM_CHUNK`, rows with missing entries (and their
    ``observed`` mask, and for full/tied covariances the index of their missing
    coordinates: :func:`block_slots`) in chunks of
    :data:`~latentlab._shapes.GMM_MISSING_CHUNK`, split over ``devices`` (axis 1 of
    every block)."""
    d = Xc.shape[1]
    complete = observed.all(axis=1)
    missing_chunk = GMM_MISSING_CHUNK[covariance_type]
    no_rows = np.zeros((0, 1, d))
    incomplete_rows = [np.flatnonzero(~complete)]
    slots = block_slots(observed, covariance_type)
    if slots is not None:  # rows grouped by how many entries they miss
        counts = np.sum(~observed[incomplete_rows[0]], axis=1)
        group = np.searchsorted(np.asarray(slots), counts)  # the first group that fits
        incomplete_rows = [incomplete_rows[0][group == g] for g in range(len(slots))]
    # every group in chunks of the same rows (one group: chunked's), one after another
    rows = padded_size(int(np.sum(~complete)), missing_chunk, em_rows)[0]

    def in_chunks(a):
        return chunked(a, rows, lambda _: rows)

    def missing_chunks(a):
        return np.concatenate([in_chunks(a[r]) for r in incomplete_rows])

    data = gmm.GMMData(
        *(
            a.astype(dtype)
            for a in (
                chunked(Xc[complete], GMM_CHUNK, em_rows),
                chunked(np.ones(int(complete.sum())), GMM_CHUNK, em_rows),
                missing_chunks(Xc) if not complete.all() else no_rows,
                missing_chunks(observed.astype(float)) if not complete.all() else no_rows,
            )
        )
    )
    if slots is not None:
        data = data._replace(
            missing_index=tuple(
                in_chunks(missing_index(observed[r], s))
                for r, s in zip(incomplete_rows, slots, strict=True)
            )
        )
    fields = ("X", "row_mask", "X_missing", "observed", "missing_index")
    return shard_fields(data, fields, devices)


def prior_rows(covariance_prior, dtype):
    """The covariance penalty's tau for EM's Hyper, None for maximum likelihood."""
    tau = float(covariance_prior)
    return np.asarray(tau, dtype) if tau > 0 else None


def run_em_program(
    start_data,
    data,
    reg,
    n,
    *,
    covariance_type,
    covariance_prior,
    tol,
    max_iter,
    accelerate,
    verbose,
):
    """The compiled EM fit (:func:`~latentlab.inference.em.fit_em`, starts included)
    on ``data`` (a :class:`~latentlab.models.gmm.GMMData`) of ``n`` rows from
    ``start_data`` = (X, row_mask, resp, active, user, use_user), with the floor
    ``reg``; returns (params, trace, converged, objective, breakdown)."""
    dtype = reg.dtype
    X, row_mask, resp, active, user, use_user = start_data
    result = fit_em(
        gmm.em_model(covariance_type),
        (X, row_mask, resp, user, use_user),
        data,
        gmm.Hyper(reg, active, prior_rows(covariance_prior, dtype)),
        np.asarray(n, dtype),
        np.asarray(tol, dtype),
        max_iter=int(max_iter),
        accelerate=bool(accelerate),
        verbose=int(verbose),
    )
    trace = np.asarray(result.trace)[: int(result.n_iter)]
    objective = float(result.objective)
    return result.params, trace, bool(result.converged), objective, bool(result.breakdown)


# ------------------------------------------------------------------------------ MAP / SVI


def fit_svi(starts, Z, observed, rng, *, covariance_type, method, prior, svi_steps, learning_rate):
    """MAP (AutoDelta) or SVI (AutoNormal) on the declaration from every start, by
    the shared multi-start driver (its keys drawn from ``rng``, the fit's random
    state), on the standardised data ``Z`` (missing entries 0) where Adam's step
    size makes sense; returns parameters and the objective trace in those units
    (``fit`` maps them to the data's)."""
    from latentlab.inference.svi import fit_best_of

    # sliced on the host: slicing device arrays would compile a program each
    host = {k: np.asarray(v) for k, v in starts._asdict().items()}
    Xs = jnp.asarray(np.where(observed, Z, np.nan))
    model = partial(
        gmm.gmm_model,
        n_components=int(starts.means.shape[1]),
        covariance_type=covariance_type,
        has_missing=not observed.all(),
        use_prior=method == "svi" or bool(prior),
    )
    best = fit_best_of(
        model,
        (Xs,),
        [{k: v[i] for k, v in host.items()} for i in range(len(starts.weights))],
        method=method,
        num_steps=svi_steps,
        learning_rate=learning_rate,
        random_state=rng,
    )
    params = gmm.Params(*(best.params[k] for k in gmm.Params._fields))
    return params, np.asarray(best.trace, np.float64), True


# --------------------------------------------------------------- scoring a fitted mixture


@partial(jax.jit, static_argnames="covariance_type")
def row_scores(params, X, observed, covariance_type):
    """log p(x_i) (n,) and log responsibilities (n, K); rows with NaN (``observed`` 0
    there) by their marginal over the observed coordinates."""
    if observed is None:
        log_density, _ = gmm.component_log_density(params, X, covariance_type)
    else:
        log_density, _, _ = gmm.conditional_components(params, X, observed, covariance_type)
    weighted = log_density + jnp.log(params.weights)
    row = jax.scipy.special.logsumexp(weighted, axis=1)
    return row, weighted - row[:, None]


def mixture_centre(params):
    """The mixture's mean sum_k w_k mu_k (float64) of ``params`` (a dict like
    ``params_``: ``weights``, ``means``, ``scale``)."""
    return params["weights"] @ params["means"]


def centred_params(params, dtype):
    """``(params, centre)``: the fitted parameters (a dict like ``params_``) in
    ``dtype`` with the means taken about ``centre`` (float64, the mixture's mean), on
    the host.

    Densities, responsibilities and conditionals are translation-equivariant, so
    callers subtract ``centre`` from X in float64 before the cast and add it back to
    means in float64 after: float32 then keeps its digits on uncentred data.  Call
    inside the estimator's ``_precision()``.
    """
    centre = mixture_centre(params)
    values = {**params, "means": params["means"] - centre}
    # host arrays in the working dtype (an eager jnp cast would compile a program)
    dtype = np.dtype(dtype)
    return gmm.Params(*(np.asarray(values[k], dtype) for k in gmm.Params._fields)), centre


def scoring_params(params, n_components, covariance_type, dtype):
    """:func:`centred_params` with padding components up to
    :func:`~latentlab._shapes.component_bucket` (weight 0: log-responsibility -inf, no
    effect on the rows' likelihoods), so that models with nearby ``n_components``
    share the scoring programs; callers cut the outputs back to ``n_components``."""
    params, centre = centred_params(params, dtype)
    pad = component_bucket(n_components) - n_components
    padded = pad_components(*params, pad, covariance_type)
    return gmm.Params(*padded), centre


def rows_per_call(n_components, n_features, covariance_type, missing: bool) -> int:
    """Rows per call of the scoring programs, fixed for a fitted model (see
    :func:`fixed_row_chunks`): about ``GMM_SCORE_WORK`` flops per call, so padding a
    single row costs little, capped by the E-step's chunk sizes, which bound the
    memory of the (rows, K, d, d) conditional covariances."""
    K, d = component_bucket(n_components), n_features
    dense = covariance_type in ("full", "tied")
    if missing:
        per_row, cap = (K * d**3 if dense else K * d), GMM_MISSING_CHUNK[covariance_type]
    else:
        per_row, cap = (K * d * d if dense else K * d), GMM_CHUNK
    rows = 1 << (max(GMM_SCORE_WORK // max(per_row, 1), 1).bit_length() - 1)
    return int(min(max(rows, 32), cap))


def mixture_scores(X, observed, params, centre, n_components, covariance_type):
    """(log p(x_i) (n,), log responsibilities (n, K)) as float64 NumPy arrays, for
    ``X`` (NaN at 0) with its ``observed`` mask (float) under :func:`scoring_params`'
    ``(params, centre)``.  Rows with NaN are scored by their marginal over the
    observed coordinates.  Call inside the estimator's ``_precision()``."""
    complete = observed.all(axis=1)
    row = np.empty(X.shape[0])
    log_resp = np.empty((X.shape[0], n_components))
    K, d = n_components, X.shape[1]
    X = np.where(observed > 0, X - centre, 0.0)
    if complete.any():
        row[complete], padded = fixed_row_chunks(
            lambda x: row_scores(params, x, None, covariance_type),
            X[complete],
            chunk=rows_per_call(K, d, covariance_type, missing=False),
        )
        log_resp[complete] = padded[:, :K]
    if not complete.all():
        row[~complete], padded = fixed_row_chunks(
            lambda x, o: row_scores(params, x, o, covariance_type),
            X[~complete],
            observed[~complete],
            chunk=rows_per_call(K, d, covariance_type, missing=True),
        )
        log_resp[~complete] = padded[:, :K]
    return row, log_resp


# -------------------------------------------------------------- conditionals (imputation)


@partial(jax.jit, static_argnames="covariance_type")
def conditionals(params, X, observed, covariance_type):
    """Log responsibilities given the observed entries, and each component's
    conditional mean (n, K, d) and covariance of the row."""
    log_density, dx, cond_cov = gmm.conditional_components(params, X, observed, covariance_type)
    weighted = log_density + jnp.log(params.weights)
    log_resp = weighted - jax.scipy.special.logsumexp(weighted, axis=1, keepdims=True)
    return log_resp, dx + params.means[None], cond_cov


def conditional_chunks(X, observed, params, centre, n_components, covariance_type):
    """Chunk by chunk over the rows of ``X`` (NaN at 0) with missing entries (where
    the float mask ``observed`` is 0): ``(rows, resp (m, K), means (m, K, d), cov)``,
    the conditional mixture p(x - c | x_obs) = sum_k resp_k N(means_k, cov_k) under
    :func:`scoring_params`' ``(params, centre)``
    (c = ``centre``), padding components cut off.

    The means stay centred so that mixing them (resp sums to 1 only to the working
    precision) and second moments lose nothing; callers add c at the end.  Iterate
    inside the estimator's ``_precision()``."""
    incomplete = np.flatnonzero(~observed.all(axis=1))
    chunk = rows_per_call(n_components, X.shape[1], covariance_type, missing=True)
    step = 8 * chunk
    for start in range(0, incomplete.size, step):
        rows = incomplete[start : start + step]
        o = observed[rows]
        log_resp, means, cov = fixed_row_chunks(
            lambda x, o: conditionals(params, x, o, covariance_type),
            np.where(o > 0, X[rows] - centre, 0.0),
            o,
            chunk=chunk,
        )
        K = n_components  # padding components cut off
        yield rows, np.exp(log_resp[:, :K]), means[:, :K], cov[:, :K]


def mixture_moments(resp, means, variances):
    """Mean and standard deviation (m, d) of each entry's mixture sum_k resp_mk
    N(means_mkd, variances_mkd): the spread between components included."""
    mean = np.einsum("mk,mkd->md", resp, means)
    second = np.einsum("mk,mkd->md", resp, variances + means**2)
    return mean, np.sqrt(np.maximum(second - mean**2, 0.0))


def mixture_quantile(resp, means, sd, p):
    """Quantile p of sum_k resp_mk N(means_mkd, sd_mkd^2) for every (m, d), by bisection
    (the CDF is monotone; 100 halvings of a +-40 sd bracket reach round-off)."""
    from scipy.special import ndtr

    lo = np.min(means - 40.0 * sd, axis=1)
    hi = np.max(means + 40.0 * sd, axis=1)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        below = np.einsum("mk,mkd->md", resp, ndtr((mid[:, None, :] - means) / sd)) < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


# ------------------------------------------------------------------------------ online EM


def online_start(
    X,
    observed,
    K,
    dtype,
    rng,
    *,
    covariance_type,
    reg_covar,
    init_params,
    weights_init,
    means_init,
    precisions_init,
):
    """The stream's coordinates (``shift``, ``unit``, the floor ``reg_covar`` in
    them, the rows per compiled call) and ``fit``'s start (one, by ``init_params`` or
    the ``*_init`` values) from the first chunk ``X``; returns (state, params)."""
    n, d = X.shape
    shift, _ = pilot_moments(X, observed)
    unit = standardising_units(np.where(observed, X - shift, 0.0), observed, covariance_type)
    Z = np.where(observed, (X - shift) / unit, 0.0)  # missing at the column mean
    weights, means, scale = user_init(
        weights_init, means_init, precisions_init, K, d, shift, unit, covariance_type
    )
    need_resp = weights is None or means is None or scale is None
    rows = int(bucket(n))
    reg = variance_floor(unit, dtype, reg_covar).astype(dtype)
    resp = start_responsibilities(
        Z,
        K,
        need_resp,
        1,
        (rows, K),
        rng,
        dtype,
        init_params=init_params,
        covariance_type=covariance_type,
    )
    user, use_user = given_start(weights, means, scale, K, K, d, dtype, covariance_type)
    starts = compiled_starts(make_starts)(
        pad_rows(Z, rows).astype(dtype),
        pad_rows(np.ones(n), rows).astype(dtype),
        resp,
        reg,
        np.ones(K, bool),
        user,
        use_user,
        covariance_type=covariance_type,
    )
    params = jax.tree.map(lambda a: np.asarray(a[0], dtype), starts)
    state = {
        "shift": shift,
        "unit": unit,
        "reg_covar": np.asarray(reg, np.float64),
        "rows_per_call": np.asarray(rows, np.int64),
    }
    return state, params


def online_m_step(moments, params, reg_covar, covariance_type, dtype):
    """The M-step from the running moments (mass (K,), component means, scatter
    about them) at the current ``params`` (their weights and scale), in ``dtype``;
    returns float64 :class:`~latentlab.models.gmm.Params` in standardised units."""
    mass, mean, scatter = moments
    stats = gmm.MixtureStats(mass, np.zeros_like(mean), scatter)
    hyper = gmm.Hyper(np.asarray(reg_covar, dtype))
    centre = gmm.Params(np.asarray(params.weights), mean, np.asarray(params.scale))
    params = gmm.m_step(
        jax.tree.map(lambda a: np.asarray(a, dtype), stats),
        jax.tree.map(lambda a: np.asarray(a, dtype), centre),
        hyper,
        covariance_type=covariance_type,
    )
    return gmm.Params(*(np.asarray(a, np.float64) for a in params))


def centred_moments(count, sum_dx, sum_dxx, means, n_rows, covariance_type):
    """Per-row averages of a chunk's mixture statistics about the current means
    (``gmm.MixtureStats``, summed), as (mass (K,), component mean (K, d), scatter
    about it (K, d, d) or (K, d))."""
    safe = np.where(count > 0, count, 1.0)
    delta = sum_dx / safe[:, None]
    if covariance_type in ("full", "tied"):
        scatter = sum_dxx - count[:, None, None] * delta[:, :, None] * delta[:, None, :]
    else:
        scatter = sum_dxx - count[:, None] * delta**2
    return count / n_rows, means + delta, scatter / n_rows


def mix_moments(old, new, eta):
    """(1 - eta) old + eta new for the mixture's per-component moments, merged about
    the new mean by Chan et al.'s pairwise update (vectorised over components)."""
    (ca, ma, Sa), (cb, mb, Sb) = old, new
    ca, Sa, cb, Sb = (1.0 - eta) * ca, (1.0 - eta) * Sa, eta * cb, eta * Sb
    count = ca + cb
    safe = np.where(count > 0, count, 1.0)
    delta = mb - ma
    mean = ma + delta * (cb / safe)[:, None]
    weight = ca * cb / safe
    if Sa.ndim == 3:
        scatter = Sa + Sb + weight[:, None, None] * delta[:, :, None] * delta[:, None, :]
    else:
        scatter = Sa + Sb + weight[:, None] * delta**2
    return count, mean, scatter


# ------------------------------------------------------------------------- chunked source


class MixtureRowsPass:
    """The host side of the mixture's E-step: every row, every iteration."""

    def __init__(self, source: RowChunks, shift, unit, covariance_type, dtype, mesh=None):
        self.source = source
        self.mesh = mesh
        self.shift, self.unit = shift, unit
        self.covariance_type = covariance_type
        self.dtype = np.dtype(dtype)
        size = source.chunk_size
        self.rows_per_call = (min(size, GMM_CHUNK), min(size, GMM_MISSING_CHUNK[covariance_type]))

    def reduce(self, name, weights, means, scale):
        assert name == "gmm_rows"
        params = gmm.Params(*(np.asarray(a, self.dtype) for a in (weights, means, scale)))
        block_fn = partial(
            mixture_rows,
            params=params,
            shift=self.shift,
            unit=self.unit,
            covariance_type=self.covariance_type,
            dtype=self.dtype,
            rows_per_call=self.rows_per_call,
            mesh=self.mesh,
            calls=-(-self.source.chunk_size // self.rows_per_call[0]),
        )
        if self.source.dask:
            template = block_fn(np.zeros((0, self.source.shape[1])))
            return self.source.map_reduce(block_fn, template)
        total = None
        for start, stop in self.source.slices():
            out = block_fn(self.source.read(start, stop))
            total = out if total is None else [a + b for a, b in zip(total, out, strict=True)]
        return total
