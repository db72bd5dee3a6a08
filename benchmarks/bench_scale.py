"""Chunked exact EM (issue 20): seconds per EM iteration and peak memory, in memory vs
from a NumPy memmap vs a Dask array (threaded scheduler).

Every fit runs in its own subprocess, so its peak RSS (``ru_maxrss``) is its own; the
baseline is the same subprocess after imports and a small warm-up fit.  Fits use
``tol=0`` and a fixed ``max_iter``, so a run's time divided by ``max_iter`` is the
time of one accelerated EM cycle (four E- and M-steps); the first fit's compile is
excluded by the warm-up on data of the same width.

The memmap route's memory stays at a few chunks whatever n is: the complete rows are
summarised once, and only rows with missing entries are read again each E-step (PPCA,
FA); a mixture reads every row each E-step.

Run:  python benchmarks/bench_scale.py [--quick] [--n 100000 1000000] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from _threads import apply_thread_option

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np
import latentlab
from latentlab.inference.chunked import RowChunks

path, n, d, model, route, missing, iters = sys.argv[1:8]
n, d, iters, missing = int(n), int(d), int(iters), float(missing)
warnings.simplefilter("ignore")

def make(route, X):
    if route == "memory":
        return np.asarray(X)
    if route == "memmap":
        return RowChunks(X)
    import dask.array as da
    return da.from_array(X, chunks=(max(1, (1 << 24) // (8 * d)), d))

def estimator():
    if model == "gmm":
        return latentlab.GaussianMixture(5, tol=0.0, max_iter=iters, random_state=0)
    cls = {"ppca": latentlab.PPCA, "fa": latentlab.FactorAnalysis}[model]
    return cls(5, tol=0.0, max_iter=iters, random_state=0)

small = np.random.default_rng(1).normal(size=(4096, d))
small[np.random.default_rng(2).random(small.shape) < missing] = np.nan
estimator().fit(make(route, small))  # compile outside the measurement
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
X = np.memmap(path, dtype=np.float64, mode="r", shape=(n, d))
if route == "memory":
    X = np.array(X)
t = time.perf_counter()
est = estimator().fit(make(route, X))
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "per_iter": seconds / est.n_iter_,
                  "rss_mb": (peak - base) / 1024, "score": float(est.log_likelihoods_[-1]) / n}))
"""


def write_data(path, n, d, missing, seed=0):
    import numpy as np

    X = np.memmap(path, dtype=np.float64, mode="w+", shape=(n, d))
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(5, d))
    step = 1 << 18
    for start in range(0, n, step):
        m = min(step, n - start)
        block = rng.normal(size=(m, 5)) @ W + rng.normal(size=(m, d))
        block[rng.random((m, d)) < missing] = np.nan
        X[start : start + m] = block
    X.flush()


def run(path, n, d, model, route, missing, iters):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path, str(n), str(d), model, route, str(missing), str(iters)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--n-features", type=int, default=20)
    parser.add_argument("--missing", type=float, default=0.0, help="fraction of NaN entries")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=["ppca", "fa", "gmm"])
    parser.add_argument("--routes", nargs="+", default=["memory", "memmap", "dask"])
    parser.add_argument("--quick", action="store_true", help="n = 20000 only")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    apply_thread_option(args.threads)
    sizes = [20_000] if args.quick else args.n
    d = args.n_features
    print(f"d={d}, missing={args.missing}, max_iter={args.iterations}, tol=0")
    print(f"load average: {os.getloadavg()}")
    print(f"{'model':<6}{'n':>10}  {'route':<8}{'s/iter':>9}{'peak MB':>10}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"X_{n}.dat")
            write_data(path, n, d, args.missing)
            for model in args.models:
                reference = None
                for route in args.routes:
                    r = run(path, n, d, model, route, args.missing, args.iterations)
                    reference = reference or r["per_iter"]
                    print(
                        f"{model:<6}{n:>10}  {route:<8}{r['per_iter']:>9.3f}"
                        f"{r['rss_mb']:>10.0f}{r['per_iter'] / reference:>8.2f}",
                        flush=True,
                    )
            os.remove(path)


if __name__ == "__main__":
    main()
