"""The ``latentlab`` command line."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

__all__ = ["main", "run_demo"]

DATASETS = ("wine", "digits", "breast_cancer", "diabetes")


def _load(name: str) -> np.ndarray:
    from sklearn import datasets

    loader = getattr(datasets, f"load_{name}")
    X = loader().data.astype(np.float64)
    sd = X.std(axis=0)
    X = X[:, sd > 0]  # digits has constant (all-zero) pixels
    return (X - X.mean(axis=0)) / X.std(axis=0)


def run_demo(
    dataset: str = "wine",
    max_components: int = 6,
    folds: int = 5,
    missing: float = 0.1,
    seed: int = 0,
    out=sys.stdout,
):
    """Fit PPCA for K = 1..max_components, compare them, then impute hidden entries.

    Returns ``(table, report)``: the comparison DataFrame and a dict with the
    imputation results.
    """
    import pandas as pd
    from sklearn.model_selection import KFold, cross_val_score

    from latentlab import PPCA

    def say(*args):
        print(*args, file=out, flush=True)

    X = _load(dataset)
    n, d = X.shape
    say(f"latentlab demo: probabilistic PCA on scikit-learn's {dataset} data")
    say(f"({n} samples x {d} features, standardised)")
    high = min(max_components, min(n, d) - 1)
    cv = KFold(folds, shuffle=True, random_state=seed)
    rows = []
    for K in range(1, high + 1):
        start = time.perf_counter()
        model = PPCA(K, random_state=seed).fit(X)
        held_out = cross_val_score(PPCA(K, random_state=seed), X, cv=cv)
        rows.append(
            {
                "K": K,
                "loglik": model.score(X) * n,
                "n_params": model._n_parameters(),
                "BIC": model.bic(X),
                "heldout_loglik": held_out.mean(),
                "heldout_se": held_out.std(ddof=1) / np.sqrt(folds),
                "em_iter": model.n_iter_,
            }
        )
        say(f"  fitted K={K}  ({time.perf_counter() - start:.1f} s)")
    table = pd.DataFrame(rows).set_index("K")
    best_k = int(table["heldout_loglik"].idxmax())
    best_bic = int(table["BIC"].idxmin())
    say(f"\nModel comparison (log-likelihoods in nats; held-out is per sample, {folds}-fold):")
    say(table.to_string(float_format=lambda v: f"{v:.3f}"))
    say(f"\nBest K by held-out log-likelihood: {best_k};  by BIC: {best_bic}")

    rng = np.random.default_rng(seed)
    hidden = rng.random(X.shape) < missing
    hidden[hidden.all(axis=1)] = False
    X_missing = np.where(hidden, np.nan, X)
    model = PPCA(best_k, random_state=seed).fit(X_missing)
    filled, std = model.impute(X_missing, return_std=True)
    col_means = np.nanmean(X_missing, axis=0)
    rmse_model = float(np.sqrt(np.mean((filled[hidden] - X[hidden]) ** 2)))
    rmse_mean = float(
        np.sqrt(np.mean((np.broadcast_to(col_means, X.shape)[hidden] - X[hidden]) ** 2))
    )
    coverage = float(np.mean(np.abs(filled[hidden] - X[hidden]) <= 1.645 * std[hidden]))
    say(f"\nImputation: {hidden.sum()} entries ({missing:.0%}) hidden at random, PPCA(K={best_k})")
    say(f"  RMSE  PPCA {rmse_model:.3f}   column means {rmse_mean:.3f}")
    say(f"  90% intervals cover {coverage:.1%} of the hidden values")
    report = {
        "best_k": best_k,
        "rmse_ppca": rmse_model,
        "rmse_mean": rmse_mean,
        "coverage": coverage,
    }
    return table, report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="latentlab",
        description="Latent-variable models declared once in NumPyro, fitted by jit-compiled EM.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="fit PPCA for several K on bundled data, compare them and impute hidden entries",
        description="Fit probabilistic PCA for K = 1..max-components on a data set bundled "
        "with scikit-learn, print log-likelihood, BIC and K-fold held-out log-likelihood, "
        "then hide entries at random, impute them and report RMSE and interval coverage.",
    )
    demo.add_argument("--dataset", choices=DATASETS, default="wine", help="bundled data set")
    demo.add_argument("--max-components", type=int, default=6, help="largest K to fit")
    demo.add_argument("--folds", type=int, default=5, help="cross-validation folds")
    demo.add_argument("--missing", type=float, default=0.1, help="fraction of entries to hide")
    demo.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)
    if args.command == "demo":
        if not 0 < args.missing < 1:
            parser.error("--missing must be between 0 and 1")
        if args.max_components < 1 or args.folds < 2:
            parser.error("--max-components must be >= 1 and --folds >= 2")
        run_demo(args.dataset, args.max_components, args.folds, args.missing, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
