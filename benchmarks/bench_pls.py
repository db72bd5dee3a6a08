"""Time latentlab.PLSRegression against scikit-learn's, in float64.

100,000 x 50 data with 5 targets (``--n``, ``--d``, ``--q``, ``--k`` components).  Both
sides run interleaved (A, B, A, B, ...) so a busy machine slows them alike; medians of
wall and process CPU time, the ratio latentlab / scikit-learn (< 1: latentlab is
faster), and the first call (latentlab: trace + compile + fit) against scikit-learn's
first fit.  The fits must agree: the largest difference of ``coef_`` is printed.  On a
shared machine run it with ``--threads 1`` and read the CPU ratios.

    .venv/bin/python benchmarks/bench_pls.py [--repeats 7] [--n 100000] [--d 50] [--q 5]
        [--k 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _threads import apply_thread_option  # noqa: E402


def timed(fn):
    """(wall seconds, CPU seconds of this process, all threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=50)
    parser.add_argument("--q", type=int, default=5)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    apply_thread_option(args.threads)

    import jax
    import scipy.linalg  # noqa: F401  (load every BLAS before limiting them)
    from bench_closed_form import print_settings
    from sklearn.cross_decomposition import PLSRegression
    from threadpoolctl import threadpool_limits

    import latentlab

    if args.threads is not None:
        threadpool_limits(args.threads)
    print_settings(jax)

    rng = np.random.default_rng(0)
    X = 2.0 + rng.standard_normal((args.n, args.d)) @ rng.standard_normal((args.d, args.d))
    B = rng.standard_normal((args.d, args.q)) * (0.7 ** np.arange(args.d))[:, None]
    Y = X @ B + rng.standard_normal((args.n, args.q))
    print(
        f"PLSRegression: X {X.shape}, Y {Y.shape}, n_components={args.k}, "
        f"{args.repeats} interleaved repeats"
    )
    ours = latentlab.PLSRegression(n_components=args.k)
    ref = PLSRegression(n_components=args.k)
    first_ours = timed(lambda: ours.fit(X, Y))
    first_ref = timed(lambda: ref.fit(X, Y))
    times = {"ours": [], "ref": []}
    for _ in range(args.repeats):
        times["ours"].append(timed(lambda: ours.fit(X, Y)))
        times["ref"].append(timed(lambda: ref.fit(X, Y)))
    print("ratio = latentlab / scikit-learn (< 1: latentlab faster)")
    for clock, index in (("wall", 0), ("cpu", 1)):
        m = {key: statistics.median(t[index] for t in v) for key, v in times.items()}
        print(
            f"warm fit  {clock:<4} {m['ours'] * 1e3:8.1f} ms vs {m['ref'] * 1e3:8.1f} ms  "
            f"ratio {m['ours'] / m['ref']:5.3f} ({m['ref'] / m['ours']:4.1f}x)"
        )
    print(
        f"first call wall {first_ours[0] * 1e3:8.1f} ms vs {first_ref[0] * 1e3:8.1f} ms  "
        f"ratio {first_ours[0] / first_ref[0]:5.3f}"
    )
    print(
        f"n_iter_ ours {ours.n_iter_.tolist()} vs {list(ref.n_iter_)}; max |coef_ difference| "
        f"{np.abs(ours.coef_ - ref.coef_).max():.1e} (max |coef_| {np.abs(ref.coef_).max():.1e})"
    )


if __name__ == "__main__":
    main()
