"""Minka's (2000) choice of the PCA rank (``n_components="mle"``): the Laplace
approximation to the evidence of each rank, on the sample covariance's spectrum."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

__all__ = ["laplace_evidence", "mle_dimension"]


def laplace_evidence(spectrum, rank, n_samples):
    """Minka's (2000) Laplace approximation to log p(X | rank) for probabilistic PCA.

    ``spectrum``: all ``d`` eigenvalues of the sample covariance, decreasing.  The
    terms, in the order of Minka's eq. (30) and as scikit-learn computes them: the
    uniform prior over the Stiefel manifold (``p(U)``), the kept eigenvalues, the noise
    variance ``v`` (mean of the discarded ones, floored at 1e-15), the volume of the
    parameter space, and the determinant of the Hessian, in which discarded
    eigenvalues are replaced by ``v`` in the ``1 / lambda`` factor.
    """
    d = len(spectrum)
    eps = 1e-15
    if spectrum[rank - 1] < eps:
        return -np.inf
    i = np.arange(1, rank + 1)
    log_prior = -rank * np.log(2.0) + np.sum(
        gammaln((d - i + 1) / 2.0) - np.log(np.pi) * (d - i + 1) / 2.0
    )
    log_kept = -np.sum(np.log(spectrum[:rank])) * n_samples / 2.0
    v = max(eps, float(np.sum(spectrum[rank:])) / (d - rank))
    log_noise = -np.log(v) * n_samples * (d - rank) / 2.0
    m = d * rank - rank * (rank + 1.0) / 2.0
    log_volume = np.log(2.0 * np.pi) * (m + rank) / 2.0
    inverse = 1.0 / np.where(np.arange(d) < rank, spectrum, v)
    top = spectrum[:rank, None]
    pairs = np.arange(d)[None, :] > np.arange(rank)[:, None]  # i < rank, j > i
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.log((top - spectrum[None, :]) * (inverse[None, :] - 1.0 / top))
    log_hessian = np.sum(np.where(pairs, terms + np.log(n_samples), 0.0))
    return (
        log_prior
        + log_kept
        + log_noise
        + log_volume
        - log_hessian / 2.0
        - rank * np.log(n_samples) / 2.0
    )


def mle_dimension(spectrum, n_samples) -> int:
    """The number of components that maximises Minka's (2000) Laplace evidence.

    ``spectrum``: the ddof=1 eigenvalues of the sample covariance (PCA's full
    ``explained_variance_``), decreasing.  Ranks 1 .. len(spectrum) - 1 are compared
    (scikit-learn's ``n_components="mle"``); NaN evidences (ties in the spectrum) lose.
    Where every rank has evidence -inf (a spectrum of zeros), scikit-learn returns 0;
    this returns 1, as a PCA keeps at least one component.
    """
    spectrum = np.asarray(spectrum, dtype=np.float64)
    evidence = np.array([laplace_evidence(spectrum, r, n_samples) for r in range(1, len(spectrum))])
    evidence = np.where(np.isnan(evidence), -np.inf, evidence)
    if not len(evidence) or np.all(evidence == -np.inf):
        return 1
    return int(np.argmax(evidence)) + 1
