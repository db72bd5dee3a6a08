"""Aligning posterior draws of non-identified parameters, and summaries that need none.

Loadings are identified only up to rotation (the likelihood depends on W through
W W^T) and mixture components only up to relabelling: draws are aligned to the point
estimate by orthogonal Procrustes (:func:`align_loadings`) or Hungarian matching
(:func:`match_components`, :func:`relabel`); :func:`loading_spectrum` and
:func:`loading_covariance` do not depend on the rotation at all.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "procrustes_rotations",
    "align_loadings",
    "match_components",
    "relabel",
    "loading_spectrum",
    "loading_covariance",
]


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
