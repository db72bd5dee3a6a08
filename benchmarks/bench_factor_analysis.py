"""Factor analysis: latentlab vs scikit-learn, side by side in one process.

scikit-learn's FactorAnalysis runs an SVD over all of X in every iteration;
latentlab's EM works on the d x d covariance once it is summarised, so each
iteration costs O(d^2 K) whatever n is.  Prints time ratios and log-likelihoods.

Run:  python benchmarks/bench_factor_analysis.py [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ppca import CompileCounter, print_settings, run_timings, thread_settings  # noqa: E402


def make_data(n, d, K, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d, K))
    psi = rng.uniform(0.2, 2.0, size=d)
    return rng.normal(size=(n, K)) @ W.T + rng.normal(size=(n, d)) * np.sqrt(psi) + 1.0


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument("--n-features", type=int, default=50)
    parser.add_argument("--rank", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="limit BLAS threads")
    parser.add_argument("--quick", action="store_true", help="2,000 x 20, for a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_samples, args.n_features, args.rank, args.repeats = 2000, 20, 3, 1

    import jax
    import sklearn
    from sklearn.decomposition import FactorAnalysis as SkFA
    from threadpoolctl import threadpool_limits

    import latentlab

    X = make_data(args.n_samples, args.n_features, args.rank)
    K = args.rank
    fits = {
        "sklearn FactorAnalysis": lambda X: SkFA(K, random_state=0).fit(X),
        "latentlab FactorAnalysis": lambda X: latentlab.FactorAnalysis(K, random_state=0).fit(X),
    }
    versions = {"jax": jax.__version__, "scikit-learn": sklearn.__version__}
    print(f"Factor analysis benchmark: {args.n_samples:,} x {args.n_features}, K = {K}")
    counter = CompileCounter()
    with threadpool_limits(args.threads):
        print_settings(thread_settings(), versions)
        cold, warm, compiles, models = run_timings(fits, X, args.repeats, counter)
    sk_name, ll_name = list(fits)
    n = len(X)
    print("\n== timings (s): first call, warm median, warm min; log-likelihood n*score")
    for name in fits:
        m = models[name]
        extra = f"  n_iter {m.n_iter_}"
        print(
            f"  {name:26s} {cold[name]:8.3f} {statistics.median(warm[name]):8.3f} "
            f"{min(warm[name]):8.3f}   loglik {n * m.score(X):16.4f}{extra}"
        )
    ratio = statistics.median(warm[sk_name]) / statistics.median(warm[ll_name])
    ratio_min = min(warm[sk_name]) / min(warm[ll_name])
    print(f"\n== scikit-learn time / latentlab time: median {ratio:.1f}x, best {ratio_min:.1f}x")
    print(f"   latentlab compile on first call: {compiles[ll_name]['cold_seconds']:.2f} s")
    gap = models[ll_name].score(X) - models[sk_name].score(X)
    print(f"   log-likelihood per row, latentlab - scikit-learn: {gap:+.2e}")
    return {"speedup": ratio, "speedup_best": ratio_min, "loglik_gap_per_row": gap}


if __name__ == "__main__":
    main()
