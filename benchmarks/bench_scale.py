"""Exact EM at scale: seconds per EM iteration and peak memory of PPCA, FA
and GMM in memory, from a NumPy memmap (row chunks), on a Dask array (threaded
scheduler) and on a Dask ``LocalCluster``; beside them scikit-learn's
``IncrementalPCA`` (one pass of ``partial_fit``) and dask-ml's ``PCA`` on the same
Dask array (skipped with a message when dask-ml is not installed; it is not a
dependency of latentlab).

Every configuration runs in its own subprocess, so its peak RSS (``VmHWM``) is its
own; the table shows the peak and its growth over the same process after imports and
a warm-up fit (which keeps the compiles out of the timing): the same fit up to
n = 2e5 (``--warm-up-max-n``), a small fit of the same width above, where the
compiles for the large shapes are a small share of the time.  latentlab's fits use
``tol=0`` and a fixed ``max_iter``, so the run's time divided by ``max_iter`` is one
accelerated EM cycle (four E- and M-steps); for PPCA and FA on complete data that
includes the one pass over the rows that summarises them (the iterations then work
on d x d matrices), for the GMM every E-step reads every row.  On a ``LocalCluster``
the workers' peak RSS is the "workers" column.  ``IncrementalPCA`` and dask-ml's PCA
make one pass: their "s/iter" is the whole fit.

"explained" is the share of the data's variance in the span of the fitted components
(the top-K eigenvalues' share is the optimum), computed by the parent from one pass
over the data, so every method is judged on the same footing.

Run:  python benchmarks/bench_scale.py [--quick] [--max-n 1e7] [--n 10000 ...]
      [--models ppca fa gmm] [--routes memory memmap dask cluster] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from _threads import apply_thread_option

CHILD = r"""
import json, os, resource, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
cfg = json.loads(sys.argv[1])
path, n, d, K, model, route, iters = (cfg[k] for k in
    ("path", "n", "d", "K", "model", "route", "iterations"))

def peak_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def rows_per_block():
    return max(1, (1 << 24) // (8 * d))  # 16 MB blocks

def load(start, stop):
    return np.array(np.memmap(path, np.float64, "r", shape=(n, d))[start:stop])

def dask_array(m=None):
    # blocks read from the file by their tasks: nothing large in the graph
    import dask, dask.array as da
    m = n if m is None else m
    r = rows_per_block()
    return da.concatenate([
        da.from_delayed(dask.delayed(load)(s, min(s + r, m)), (min(s + r, m) - s, d), np.float64)
        for s in range(0, m, r)])

def latentlab_fit(X, small):
    import latentlab
    from latentlab.inference.chunked import RowChunks
    def est():
        if model == "gmm":
            return latentlab.GaussianMixture(K, tol=0.0, max_iter=iters, random_state=0)
        cls = {"ppca": latentlab.PPCA, "fa": latentlab.FactorAnalysis}[model]
        return cls(K, tol=0.0, max_iter=iters, random_state=0)
    wrap = (lambda A: RowChunks(A)) if route == "memmap" else (lambda A: A)
    # compile outside the measurement: small n, the same fit (the same shapes) once
    # before; large n, a small fit (the shapes' compiles are a small share then)
    est().fit(wrap(X() if n <= cfg["same_shape_max_n"] else small))
    data = wrap(X())  # in memory: read before the clock starts (the others read lazily)
    base = peak_mb()
    t = time.perf_counter()
    fitted = est().fit(data)
    seconds = time.perf_counter() - t
    components = getattr(fitted, "components_", None)
    if components is None:  # GMM: no subspace
        components = np.zeros((0, d))
    return seconds, fitted.n_iter_, base, np.asarray(components)

client = None
if route in ("dask", "cluster"):
    import dask
    if route == "cluster":
        from dask.distributed import Client, LocalCluster
        client = Client(LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None))
    else:
        dask.config.set(scheduler="threads")

if route == "ipca":
    from sklearn.decomposition import IncrementalPCA
    batch = 20 * d
    IncrementalPCA(K).partial_fit(load(0, batch))
    base = peak_mb()
    t = time.perf_counter()
    ipca = IncrementalPCA(K)
    for s in range(0, n, cfg["ipca_rows"]):
        ipca.partial_fit(load(s, min(n, s + cfg["ipca_rows"])))
    seconds, n_iter, components = time.perf_counter() - t, 1, ipca.components_
elif route == "daskml":
    from dask_ml.decomposition import PCA
    PCA(K, svd_solver="tsqr").fit(dask_array(min(n, 4 * rows_per_block())))
    base = peak_mb()
    t = time.perf_counter()
    pca = PCA(K, svd_solver="tsqr").fit(dask_array())
    seconds, n_iter, components = time.perf_counter() - t, 1, pca.components_
else:
    small = np.random.default_rng(1).normal(size=(4096, d))
    if route == "memory":
        X = lambda: load(0, n)
    elif route == "memmap":
        X = lambda: np.memmap(path, np.float64, "r", shape=(n, d))
    else:
        X = dask_array
    if route in ("dask", "cluster"):
        import dask.array as da
        small = da.from_array(small, chunks=(1024, d))
    seconds, n_iter, base, components = latentlab_fit(X, small)
workers = None
if client is not None:
    got = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    workers = max(got.values())
    client.close()
print(json.dumps({"seconds": seconds, "per_iter": seconds / max(n_iter, 1),
                  "peak_mb": peak_mb(), "growth_mb": peak_mb() - base, "workers_mb": workers,
                  "components": np.asarray(components).tolist()}))
"""


def write_data(path, n, d, K, seed=0):
    """n rows of a planted K-factor model with unit noise, by blocks into a memmap."""
    X = np.memmap(path, dtype=np.float64, mode="w+", shape=(n, d))
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(K, d))
    step = 1 << 18
    for start in range(0, n, step):
        m = min(step, n - start)
        X[start : start + m] = rng.normal(size=(m, K)) @ W + rng.normal(size=(m, d))
    X.flush()
    del X


def covariance(path, n, d):
    """The data's covariance (ddof=0), from one chunked pass."""
    X = np.memmap(path, dtype=np.float64, mode="r", shape=(n, d))
    total, scatter = np.zeros(d), np.zeros((d, d))
    for start in range(0, n, 1 << 18):
        block = np.asarray(X[start : start + (1 << 18)])
        total += block.sum(axis=0)
        scatter += block.T @ block
    mean = total / n
    return scatter / n - np.outer(mean, mean)


def explained(components, cov):
    """Share of the variance in the span of ``components`` (rows)."""
    if len(components) == 0:
        return float("nan")
    basis, _ = np.linalg.qr(np.asarray(components).T)
    return float(np.trace(basis.T @ cov @ basis) / np.trace(cov))


def run(cfg, timeout):
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(cfg)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout} s"}
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1][:70]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def have_dask_ml() -> bool:
    probe = "import dask_ml.decomposition"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    parser.add_argument("--max-n", type=float, default=None, help="add sizes up to this (1e7)")
    parser.add_argument("--n-features", type=int, default=50)
    parser.add_argument("--n-components", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=5, help="EM cycles, PPCA and FA")
    parser.add_argument("--gmm-iterations", type=int, default=2, help="EM cycles, GMM")
    parser.add_argument("--models", nargs="+", default=["ppca", "fa", "gmm"])
    parser.add_argument(
        "--routes", nargs="+", default=["memory", "memmap", "dask", "cluster", "ipca", "daskml"]
    )
    parser.add_argument("--memory-max-n", type=float, default=1e6, help="in-memory fits up to")
    parser.add_argument("--gmm-max-n", type=float, default=1e6)
    parser.add_argument(
        "--warm-up-max-n", type=float, default=2e5, help="warm up on the same n up to"
    )
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per configuration")
    parser.add_argument("--quick", action="store_true", help="n = 10000 only")
    parser.add_argument("--tmp", default=None, help="folder for the data file")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    apply_thread_option(args.threads)
    if args.threads == 1:  # the children's BLAS too (they read these when NumPy starts)
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = "1"
    sizes = [1e4] if args.quick else list(args.n)
    if args.max_n is not None:
        sizes += [s for s in (1e7, 1e8) if s <= args.max_n and s not in sizes]
    sizes = sorted(int(s) for s in sizes if args.max_n is None or s <= args.max_n)
    d, K = args.n_features, args.n_components
    routes = list(args.routes)
    if "daskml" in routes and not have_dask_ml():
        print("dask-ml is not installed: its PCA column is skipped (pip install dask-ml)")
        routes.remove("daskml")
    print(f"d={d}, K={K}, tol=0, max_iter={args.iterations} (GMM {args.gmm_iterations})")
    print(f"load average: {os.getloadavg()}, cores: {os.cpu_count()}, threads: {args.threads}")
    print(
        f"{'model':<6}{'n':>10}  {'route':<8}{'s/iter':>9}{'total s':>9}"
        f"{'peak MB':>9}{'growth':>8}{'workers':>8}{'vs mem':>8}{'explained':>10}"
    )
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"X_{n}.dat")
            write_data(path, n, d, K)
            cov = covariance(path, n, d)
            top = explained(np.linalg.eigh(cov)[1][:, -K:].T, cov)
            print(f"# n={n}: optimum explained share (top-{K} eigenvalues) {top:.6f}", flush=True)
            for model in args.models:
                reference = None
                for route in routes:
                    if route in ("ipca", "daskml") and model != "ppca":
                        continue  # the PCA baselines sit beside PPCA
                    if route == "memory" and n > args.memory_max_n:
                        continue
                    if model == "gmm" and n > args.gmm_max_n:
                        continue
                    iters = args.gmm_iterations if model == "gmm" else args.iterations
                    cfg = dict(path=path, n=n, d=d, K=K, model=model, route=route)
                    cfg.update(iterations=iters, ipca_rows=max(20 * d, (1 << 22) // (8 * d)))
                    cfg.update(same_shape_max_n=args.warm_up_max_n)
                    r = run(cfg, args.timeout)
                    if "error" in r:
                        print(f"{model:<6}{n:>10}  {route:<8}  failed: {r['error']}", flush=True)
                        continue
                    if route == "memory":
                        reference = r["per_iter"]
                    ratio = f"{r['per_iter'] / reference:8.2f}" if reference else f"{'':>8}"
                    workers = f"{r['workers_mb']:8.0f}" if r["workers_mb"] else f"{'':>8}"
                    print(
                        f"{model:<6}{n:>10}  {route:<8}{r['per_iter']:>9.3f}{r['seconds']:>9.2f}"
                        f"{r['peak_mb']:>9.0f}{r['growth_mb']:>8.0f}{workers}{ratio}"
                        f"{explained(r['components'], cov):>10.6f}",
                        flush=True,
                    )
            os.remove(path)


if __name__ == "__main__":
    main()
