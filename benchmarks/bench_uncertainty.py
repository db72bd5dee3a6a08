"""Standard errors: the information (Hessian) route against the bootstrap, side by side
in one process.

- Factor analysis, 10,000 rows x 30 variables, 5 factors (planted simple structure),
  unrotated and varimax: ``model.standard_errors(X)`` (observed information, delta
  method) against ``model.standard_errors(X, vcov="bootstrap", n_bootstrap=200)``.
- A full-covariance Gaussian mixture, K = 5 in d = 10 (well-separated planted
  components, 5,000 rows), the same two routes.

Printed per case: the Hessian route's first call (trace + compile + run) and warm
median, the bootstrap's time, their ratio (bootstrap / Hessian: how many times
faster the information route is), and the agreement of the two sets of standard
errors (median over the reported quantities of SE_hessian / SE_bootstrap, and its
10%-90% range).  The bootstrap's own Monte Carlo error with 200 refits is about
1/sqrt(2 * 200) = 5% per standard error.

Run:  python benchmarks/bench_uncertainty.py [--quick] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import warnings

from _threads import apply_thread_option
from _timing import print_environment, timed


def planted_factors(n, d, K, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    loadings = np.zeros((d, K))
    loadings[np.arange(d), np.arange(d) % K] = rng.uniform(0.5, 0.8, size=d)
    psi = 1.0 - (loadings**2).sum(axis=1)
    return rng.normal(size=(n, K)) @ loadings.T + rng.normal(size=(n, d)) * np.sqrt(psi)


def planted_clusters(n, d, K, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6.0, size=(K, d))
    labels = rng.integers(0, K, size=n)
    scales = rng.uniform(0.5, 1.5, size=(K, d, d)) * 0.3 + np.eye(d)
    return np.einsum("nij,nj->ni", scales[labels], rng.normal(size=(n, d))) + centres[labels]


def compare(label, model, X, n_bootstrap, repeats):
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X)
        first, hessian = timed(lambda: model.standard_errors(X))
        warm = [timed(lambda: model.standard_errors(X))[0] for _ in range(repeats)]
        boot_time, boot = timed(
            lambda: model.standard_errors(
                X, vcov="bootstrap", n_bootstrap=n_bootstrap, random_state=0
            )
        )
    ratio = (hessian.std_error / boot.std_error).to_numpy()
    ratio = ratio[np.isfinite(ratio)]
    h = statistics.median(warm)
    low, mid, high = np.quantile(ratio, [0.1, 0.5, 0.9])
    print(
        f"{label:<34} hessian {h:6.3f} s (first {first:5.1f} s) | bootstrap x{n_bootstrap} "
        f"{boot_time:7.1f} s | {boot_time / h:6.0f}x faster | SE ratio median {mid:.3f} "
        f"[{low:.2f}, {high:.2f}] over {len(ratio)} quantities",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data, 50 refits")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    apply_thread_option(args.threads)
    print_environment(args.threads)

    import latentlab

    n_fa, n_gmm, n_bootstrap = (2_000, 1_000, 50) if args.quick else (10_000, 5_000, 200)
    X = planted_factors(n_fa, 30, 5)
    for rotation in (None, "varimax"):
        compare(
            f"FA(5) 30 vars, {n_fa} rows, {rotation or 'unrotated'}",
            latentlab.FactorAnalysis(5, rotation=rotation),
            X,
            n_bootstrap,
            repeats=3,
        )
    Y = planted_clusters(n_gmm, 10, 5)
    compare(
        f"GMM full K=5 d=10, {n_gmm} rows",
        latentlab.GaussianMixture(5, random_state=0),
        Y,
        n_bootstrap,
        repeats=3,
    )


if __name__ == "__main__":
    main()
