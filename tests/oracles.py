"""Data generators and independent oracles shared by the tests."""

from __future__ import annotations

import numpy as np
from scipy.stats import multivariate_normal


def planted_low_rank(n=400, d=10, rank=3, noise=0.5, seed=0, offset=3.0):
    """Data from x = W z + mu + noise with a known W (d, rank)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d, rank)) * 2.0
    mu = offset + rng.normal(size=d)
    X = rng.normal(size=(n, rank)) @ W.T + mu + noise * rng.normal(size=(n, d))
    return X, W, mu


def hide_at_random(X, fraction, seed=0):
    """Copy of X with a fraction of entries set to NaN (never a whole row or column)."""
    rng = np.random.default_rng(seed)
    hidden = rng.random(X.shape) < fraction
    hidden[hidden.all(axis=1), 0] = False
    X_missing = np.where(hidden, np.nan, X)
    return X_missing, hidden


def dense_observed_loglik(X, mean, cov):
    """log N(x_O | mean_O, cov_OO) row by row, with SciPy (independent of latentlab)."""
    total = 0.0
    for row in X:
        o = ~np.isnan(row)
        total += multivariate_normal(mean[o], cov[np.ix_(o, o)]).logpdf(row[o])
    return total


def mixture_covariance_penalty(est):
    """A fitted GaussianMixture's covariance penalty in NumPy, in the data's units:
    -(tau / 2) sum_k [tr(Sigma_k^-1 D) + log |Sigma_k|] (0 for maximum likelihood), so
    that its EM trace ends at n * score + this."""
    tau = getattr(est, "covariance_prior_", 0.0)
    if tau == 0:
        return 0.0
    D = np.diag(est.covariance_prior_variance_)
    covariances = np.asarray(est.covariances_, np.float64).reshape(-1, *D.shape)
    terms = [np.trace(np.linalg.solve(cov, D)) + np.linalg.slogdet(cov)[1] for cov in covariances]
    return -0.5 * tau * sum(terms)


def is_monotone(trace, rel=1e-9):
    trace = np.asarray(trace)
    return bool(np.all(np.diff(trace) >= -rel * np.abs(trace[1:])))


def planted_factor_model(n=500, d=25, rank=5, heteroscedastic=False, seed=0):
    """x = W z + mu + eps with eps ~ N(0, diag(psi)): psi = 1 everywhere (PPCA's
    homoscedastic noise), or log-uniform on [0.05, 5] per feature (a 100-fold range)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d, rank))
    psi = np.exp(rng.uniform(np.log(0.05), np.log(5.0), size=d)) if heteroscedastic else np.ones(d)
    X = rng.normal(size=(n, rank)) @ W.T + 3.0 + np.sqrt(psi) * rng.normal(size=(n, d))
    return X, W, psi


def dense_conditional(X, mean, cov):
    """Gaussian conditional mean and std of each NaN entry given the row's observed ones.

    Dense NumPy solves, row by row (independent of latentlab).  Observed entries keep
    their value and get std 0.
    """
    filled = np.array(X, dtype=np.float64)
    std = np.zeros_like(filled)
    for i, row in enumerate(filled):
        m = np.isnan(row)
        if not m.any():
            continue
        o = ~m
        gain = np.linalg.solve(cov[np.ix_(o, o)], cov[np.ix_(o, m)]).T
        filled[i, m] = mean[m] + gain @ (row[o] - mean[o])
        std[i, m] = np.sqrt(np.diag(cov[np.ix_(m, m)] - gain @ cov[np.ix_(o, m)]))
    return filled, std


def planted_topics(n_documents=20, length=100, seed=0):
    """Counts of two planted topics over ten words (each favours its own five), each
    document ``length`` words from its Dirichlet(2, 2) mixture of them."""
    rng = np.random.default_rng(seed)
    phi = np.array([[0.14] * 5 + [0.06] * 5, [0.06] * 5 + [0.14] * 5])
    theta = rng.dirichlet([2.0, 2.0], size=n_documents)
    return np.vstack([rng.multinomial(length, t @ phi) for t in theta])
