"""Quickstart: choose the number of components of probabilistic PCA by likelihood,
then impute missing entries with calibrated intervals.

Run:  python examples/quickstart.py [--small]
"""

import argparse

import numpy as np
from sklearn.datasets import load_wine
from sklearn.model_selection import cross_val_score
from sklearn.preprocessing import StandardScaler

import latentlab


def main(small: bool = False) -> dict:
    X = StandardScaler().fit_transform(load_wine().data)
    candidates = [1, 2, 3] if small else [1, 2, 3, 4, 5, 6]

    # 1. Compare K by held-out log-likelihood (PPCA.score is the mean log-likelihood).
    held_out = {
        K: cross_val_score(latentlab.PPCA(K, random_state=0), X, cv=5).mean() for K in candidates
    }
    best_k = max(held_out, key=held_out.get)
    for K, ll in held_out.items():
        print(f"K={K}: held-out log-likelihood per sample {ll:8.3f}")
    print(f"best K = {best_k}")

    # 2. Hide 10% of the entries and impute them from the fitted model.
    rng = np.random.default_rng(0)
    hidden = rng.random(X.shape) < 0.1
    X_missing = np.where(hidden, np.nan, X)
    model = latentlab.PPCA(best_k, random_state=0).fit(X_missing)
    filled, std = model.impute(X_missing, return_std=True)
    rmse = np.sqrt(np.mean((filled[hidden] - X[hidden]) ** 2))
    covered = np.mean(np.abs(filled[hidden] - X[hidden]) <= 1.645 * std[hidden])
    print(
        f"imputation RMSE {rmse:.3f} (column means: {np.sqrt(np.mean(X[hidden] ** 2)):.3f}), "
        f"90% intervals cover {covered:.0%}"
    )
    return {"best_k": best_k, "rmse": rmse, "coverage": covered}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true", help="fewer candidates, for tests")
    main(parser.parse_args().small)
