"""Gaussian mixture EM: latentlab vs scikit-learn, side by side in one process.

Both start from the same parameters (weights_init, means_init, precisions_init) and
run the same number of plain EM iterations (tol=0; latentlab with accelerate=False),
so the timings compare the cost of an iteration and the log-likelihoods must agree.
The two sides are interleaved, timings are medians of warm runs, and latentlab's
first (compiling) call is reported separately.

``--small``: the other end, small real data (iris, wine, breast_cancer, standardised;
K = 2 and 5, full and diagonal covariances), each side with its own defaults (its
own start, tol and stopping rule), as a user would call it: warm medians of
interleaved runs over 5 seeds and their ratio.

Run:  python benchmarks/bench_gmm.py [--quick] [--threads 1] [--small]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

from _threads import apply_thread_option


def make_data(n, d, K, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    means = 3.0 * rng.normal(size=(K, d))
    labels = rng.integers(K, size=n)
    factors = np.eye(d) + 0.3 * rng.normal(size=(K, d, d))
    return means[labels] + np.einsum("nde,ne->nd", factors[labels], rng.normal(size=(n, d)))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument("--n-features", type=int, default=50)
    parser.add_argument("--n-components", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="1: one thread each side")
    parser.add_argument("--quick", action="store_true", help="5,000 x 10, for a smoke run")
    parser.add_argument("--small", action="store_true", help="small real data, defaults")
    args = parser.parse_args(argv)
    if args.small:
        return small_data_table()
    if args.quick:
        args.n_samples, args.n_features, args.repeats = 5000, 10, 2
    apply_thread_option(args.threads)  # before JAX starts

    import jax
    import sklearn
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture as SkGaussianMixture
    from threadpoolctl import threadpool_info, threadpool_limits

    import latentlab

    K, iters = args.n_components, args.iterations
    X = make_data(args.n_samples, args.n_features, K)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = SkGaussianMixture(K, max_iter=1, random_state=0).fit(X)
    init = dict(
        weights_init=start.weights_, means_init=start.means_, precisions_init=start.precisions_
    )
    fits = {
        "scikit-learn": lambda: SkGaussianMixture(K, tol=0.0, max_iter=iters, **init).fit(X),
        "latentlab": lambda: latentlab.GaussianMixture(
            K, tol=0.0, max_iter=iters, accelerate=False, **init
        ).fit(X),
    }
    print(
        f"GaussianMixture EM benchmark: {args.n_samples:,} x {args.n_features}, K = {K}, "
        f"full covariance, {iters} iterations from the same start"
    )
    with threadpool_limits(args.threads):
        blas = ", ".join(f"{p['internal_api']}:{p['num_threads']}" for p in threadpool_info())
        print(f"   threads: BLAS {blas}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
        print(
            f"   jax {jax.__version__}, scikit-learn {sklearn.__version__}, cores {os.cpu_count()}"
        )
        warm = {name: [] for name in fits}
        cold, models = {}, {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for name, fit in fits.items():
                t = time.perf_counter()
                models[name] = fit()
                cold[name] = time.perf_counter() - t
            for _ in range(args.repeats):  # interleaved
                for name, fit in fits.items():
                    t = time.perf_counter()
                    models[name] = fit()
                    warm[name].append(time.perf_counter() - t)
    n = len(X)
    print("\n== timings (s): first call, warm median, warm min; log-likelihood n*score")
    for name, m in models.items():
        print(
            f"  {name:14s} {cold[name]:8.3f} {statistics.median(warm[name]):8.3f} "
            f"{min(warm[name]):8.3f}   loglik {n * m.score(X):18.6f}  n_iter {m.n_iter_}"
        )
    ratio = statistics.median(warm["scikit-learn"]) / statistics.median(warm["latentlab"])
    compile_s = cold["latentlab"] - statistics.median(warm["latentlab"])
    gap = models["latentlab"].score(X) - models["scikit-learn"].score(X)
    print(f"\n== scikit-learn time / latentlab time (median): {ratio:.2f}x")
    print(f"   latentlab compile (first call minus warm median): {compile_s:.2f} s")
    print(f"   log-likelihood per row, latentlab - scikit-learn: {gap:+.2e}")
    return {"speedup": ratio, "compile_seconds": compile_s, "loglik_gap_per_row": gap}


def small_data_table() -> dict:
    """Warm time of each side's default fit on small real data, and the ratio."""
    from sklearn import datasets
    from sklearn.mixture import GaussianMixture as SkGaussianMixture

    import latentlab

    print("GaussianMixture on small data, each side's defaults: warm medians over 5 seeds (ms)")
    print(f"{'data':<15}{'K':>2} {'covariance':<11}{'latentlab':>10}{'sklearn':>9}{'ratio':>7}")
    ratios = {}
    warnings.simplefilter("ignore")
    for name in ("iris", "wine", "breast_cancer"):
        X = getattr(datasets, f"load_{name}")().data
        X = (X - X.mean(0)) / X.std(0)
        for K in (2, 5):
            for covariance in ("full", "diag"):
                settings = {"covariance_type": covariance}
                sides = {
                    "latentlab": (latentlab.GaussianMixture, K, settings, X),
                    "sklearn": (SkGaussianMixture, K, settings, X),
                }

                def fit(cls, K, settings, X, seed):
                    return cls(K, random_state=seed, **settings).fit(X)

                fit(*sides["latentlab"], 0)  # compiles
                times = {side: [] for side in sides}
                for seed in range(5):
                    for side, args in sides.items():
                        t = time.perf_counter()
                        fit(*args, seed)
                        times[side].append(time.perf_counter() - t)
                ours, theirs = (1e3 * statistics.median(times[side]) for side in sides)
                ratios[(name, K, covariance)] = ours / theirs
                print(
                    f"{name:<15}{K:>2} {covariance:<11}{ours:>10.1f}{theirs:>9.1f}"
                    f"{ours / theirs:>7.2f}"
                )
    return ratios


if __name__ == "__main__":
    main()
