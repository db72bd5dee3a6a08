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


def is_monotone(trace, rel=1e-9):
    trace = np.asarray(trace)
    return bool(np.all(np.diff(trace) >= -rel * np.abs(trace[1:])))
