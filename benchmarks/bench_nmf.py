"""Time latentlab's NMF against scikit-learn's, float64, at equal objective.

Data: 2,000 x 1,000 Poisson counts from a planted non-negative rank-10 model
(``--n``, ``--d``, ``--k``).  For each loss and solver both sides start from their
own NNDSVDa (the same start up to the randomized SVD's round-off) and run with
scikit-learn's defaults (``tol=1e-4``, ``max_iter=200``).  Then, "to the same
objective": latentlab runs with ``tol=0`` and the fewest iterations (found untimed
beforehand, by bisection) whose error is at most scikit-learn's, so the ratio compares
the time each needs to reach scikit-learn's objective.  Both sides run interleaved
(A, B, A, B, ...); medians, the ratio latentlab / scikit-learn (< 1: latentlab is
faster) and latentlab's first call (trace + compile + run) are printed, with the thread
settings and the load average.

    .venv/bin/python benchmarks/bench_nmf.py [--repeats 3] [--threads 1] [--only cd mu kl]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _threads import apply_thread_option  # noqa: E402
from _timing import bench, print_environment  # noqa: E402

CASES = {
    "cd": ("frobenius", "cd"),
    "mu": ("frobenius", "mu"),
    "kl": ("kullback-leibler", "mu"),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--d", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--only", nargs="*", default=["cd", "mu", "kl"], help="cd, mu, kl")
    args = parser.parse_args()
    apply_thread_option(args.threads)

    import numpy as np
    from sklearn import decomposition
    from threadpoolctl import threadpool_limits

    import latentlab

    print_environment(args.threads)
    limits = threadpool_limits(args.threads) if args.threads else None
    warnings.simplefilter("ignore")

    rng = np.random.default_rng(0)
    rate = rng.gamma(0.5, 1.0, (args.n, args.k)) @ rng.gamma(0.5, 1.0, (args.k, args.d))
    X = rng.poisson(rate).astype(float)
    print(f"X {X.shape}, {np.mean(X > 0):.0%} nonzero, K = {args.k}")

    def result(est):
        return est.reconstruction_err_, est.n_iter_

    def compare(ours, ref):
        return (
            f"error {ours[0]:.6g} vs {ref[0]:.6g} (rel. {(ours[0] - ref[0]) / ref[0]:+.1e}), "
            f"iterations {ours[1]} vs {ref[1]}"
        )

    for loss, solver in (CASES[name] for name in args.only):
        settings = dict(n_components=args.k, beta_loss=loss, solver=solver, init="nndsvda")

        def ours(settings=settings, **extra):
            return result(latentlab.NMF(**settings, **extra).fit(X))

        def ref(settings=settings):
            return result(decomposition.NMF(**settings).fit(X))

        bench(f"NMF {loss} {solver}, sklearn defaults", ours, ref, args.repeats, compare, 44)

        # the fewest iterations at which ours reaches sklearn's error
        target = ref()[0] * (1 + 1e-9)  # the same objective, to round-off
        iterations = 1
        while iterations < 20000 and ours(tol=0.0, max_iter=iterations)[0] > target:
            iterations *= 2
        low, high = iterations // 2, iterations
        while high - low > 1:
            middle = (low + high) // 2
            if ours(tol=0.0, max_iter=middle)[0] > target:
                low = middle
            else:
                high = middle
        bench(
            f"NMF {loss} {solver}, to sklearn's objective",
            lambda high=high: ours(tol=0.0, max_iter=high),
            ref,
            args.repeats,
            compare,
            44,
        )
    if limits is not None:
        limits.restore_original_limits()


if __name__ == "__main__":
    main()
