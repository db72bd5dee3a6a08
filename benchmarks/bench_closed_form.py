"""Time latentlab.PCA and KernelPCA against scikit-learn's, in float64.

PCA: 100,000 x 50 data, every svd_solver.  Kernel PCA (``--kpca-n``): rbf kernel,
n_components=10, on standard normal data in 10 dimensions, on scikit-learn's own
kernel-PCA benchmark data (``make_circles``) and (``--kpca-data ... digits``) on a flat
spectrum, against scikit-learn's ``KernelPCA`` default solver (for n_components >= 10:
dense ``eigh(subset_by_index=...)``) and its ``eigen_solver="arpack"``; the eigenvalues
are compared with the default's.  Wall and process CPU time are both printed; on a
shared machine run it with ``--threads 1`` and read the CPU ratios.

Both sides run interleaved (A, B, A, B, ...) so that a busy machine slows them alike;
we report medians, the ratio latentlab / scikit-learn (< 1: latentlab is faster), and
latentlab's first-call compile time separately.  Thread settings are printed beside
the numbers: XLA and OpenBLAS both lose badly when another process holds a core.

    .venv/bin/python benchmarks/bench_closed_form.py [--repeats 7] [--n 100000] [--d 50]
        [--threads N]   # pin both sides to N threads (XLA flags + threadpoolctl)
        [--kpca-n 3000 5000] [--kpca-only] [--kpca-data gauss10 circles digits]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def print_settings(jax):
    print(f"python {platform.python_version()}, jax {jax.__version__}, devices {jax.devices()}")
    print(f"os.cpu_count()={os.cpu_count()}, sched_getaffinity={len(os.sched_getaffinity(0))}")
    for name in ("XLA_FLAGS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        print(f"{name}={os.environ.get(name)!r}")
    for pool in threadpool_info():
        print(
            f"threadpoolctl: {pool['user_api']}/{pool['internal_api']} "
            f"num_threads={pool['num_threads']} ({os.path.basename(pool['filepath'])})"
        )
    print(f"load average: {os.getloadavg()}")


def bench(label, ours, ref, X, repeats):
    """Compile once, then interleave repeats of both fits and their transforms."""
    compile_s = timed(lambda: ours.fit(X).transform(X[:10]))  # first call: trace + compile
    ref.fit(X)
    fit_ours, fit_ref, tr_ours, tr_ref = [], [], [], []
    for _ in range(repeats):
        fit_ours.append(timed(lambda: ours.fit(X)))
        fit_ref.append(timed(lambda: ref.fit(X)))
        tr_ours.append(timed(lambda: ours.transform(X)))
        tr_ref.append(timed(lambda: ref.transform(X)))
    m = {
        k: statistics.median(v)
        for k, v in dict(fo=fit_ours, fr=fit_ref, to=tr_ours, tr=tr_ref).items()
    }
    print(
        f"{label:<28} fit {m['fo'] * 1e3:8.1f} ms vs {m['fr'] * 1e3:8.1f} ms  "
        f"ratio {m['fo'] / m['fr']:5.2f} | transform {m['to'] * 1e3:7.1f} ms vs "
        f"{m['tr'] * 1e3:7.1f} ms ratio {m['to'] / m['tr']:5.2f} | first call "
        f"(compile) {compile_s:5.2f} s"
    )
    agree = np.allclose(np.abs(ours.components_), np.abs(ref.components_), atol=1e-6)
    if not agree:
        print(f"   WARNING: components of {label} differ from scikit-learn's")


def kernel_pca_data(name, n, rng):
    """Benchmark inputs: ``gauss10`` (a moderately decaying rbf spectrum), ``circles``
    (scikit-learn's kernel-PCA solver benchmark: a fast-decaying one, with the 10th and
    11th eigenvalues 1% apart) and ``digits`` (8x8 digits tiled with jitter: a flat
    spectrum, the hard case for iterative solvers)."""
    if name == "gauss10":
        return rng.standard_normal((n, 10))
    if name == "circles":
        from sklearn.datasets import make_circles

        return make_circles(n_samples=n, factor=0.3, noise=0.05, random_state=0)[0]
    from sklearn.datasets import load_digits

    digits = load_digits().data
    X = np.tile(digits, (-(-n // len(digits)), 1))[:n]
    return X + rng.normal(scale=0.1, size=X.shape)


def timed_both(fn):
    """(wall seconds, CPU seconds of this process, all threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def bench_kernel_pca(n, k, data, repeats):
    """latentlab's default solver against scikit-learn's default and arpack, interleaved.

    Both wall and CPU time are reported: on a shared machine wall time swings with the
    other processes' load (multi-threaded BLAS and XLA wait for preempted threads),
    while the process's CPU time, with ``--threads 1``, measures the work done.
    """
    from sklearn import decomposition

    import latentlab

    X = kernel_pca_data(data, n, np.random.default_rng(0))
    settings = dict(n_components=k, kernel="rbf")
    ours = latentlab.KernelPCA(**settings, random_state=0)
    default = decomposition.KernelPCA(**settings, random_state=0)
    arpack = decomposition.KernelPCA(**settings, eigen_solver="arpack", random_state=0)
    compile_s = timed(lambda: ours.fit(X))
    times = {"ours": [], "default": [], "arpack": []}
    for i in range(repeats):
        times["ours"].append(timed_both(lambda: ours.fit(X)))
        times["arpack"].append(timed_both(lambda: arpack.fit(X)))
        if i < max(1, repeats // 2):  # the slow one: fewer repeats
            times["default"].append(timed_both(lambda: default.fit(X)))
    error = np.max(np.abs(ours.eigenvalues_ / default.eigenvalues_ - 1))
    error_arpack = np.max(np.abs(arpack.eigenvalues_ / default.eigenvalues_ - 1))
    for clock, index in (("wall", 0), ("cpu", 1)):
        m = {key: statistics.median(t[index] for t in v) for key, v in times.items()}
        print(
            f"kpca {data:<8} n={n:<6} {clock:<4} ours ({ours.solver_}) {m['ours']:7.3f} s | "
            f"default {m['default']:7.3f} s ratio {m['ours'] / m['default']:5.3f} "
            f"({m['default'] / m['ours']:5.1f}x faster) | arpack {m['arpack']:7.3f} s "
            f"ratio {m['ours'] / m['arpack']:5.2f}"
        )
    print(
        f"     eigenvalues vs default (max relative): ours {error:.1e}, arpack "
        f"{error_arpack:.1e} | ours first call (compile) {compile_s:5.2f} s"
    )


def pin_xla_threads(n_threads: int) -> None:
    """Must run before JAX starts: XLA reads its flags once."""
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = (
        f"{flags} --xla_cpu_multi_thread_eigen={'true' if n_threads > 1 else 'false'} "
        f"intra_op_parallelism_threads={n_threads}"
    ).strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=50)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--kpca-n", type=int, nargs="*", default=[3000, 5000])
    parser.add_argument("--kpca-data", nargs="*", default=["gauss10", "circles"])
    parser.add_argument("--kpca-repeats", type=int, default=3)
    parser.add_argument("--kpca-only", action="store_true")
    args = parser.parse_args()
    if args.threads is not None:
        pin_xla_threads(args.threads)

    import jax
    import scipy.linalg  # noqa: F401  (load every BLAS before limiting them)
    from sklearn import decomposition

    import latentlab

    if args.threads is not None:
        threadpool_limits(args.threads)

    print_settings(jax)
    print("kernel PCA: ratio = latentlab median / scikit-learn median (< 1: latentlab faster)")
    for n in args.kpca_n:
        for data in args.kpca_data:
            bench_kernel_pca(n, 10, data, args.kpca_repeats)
    if args.kpca_only:
        return

    rng = np.random.default_rng(0)
    scales = 10.0 * 0.8 ** np.arange(args.d)  # a decaying spectrum, plus an offset mean
    X = 3.0 + rng.standard_normal((args.n, args.d)) * scales
    print(f"X: {X.shape} float64, n_components={args.k}, {args.repeats} interleaved repeats")
    print("ratio = latentlab median / scikit-learn median (< 1: latentlab faster)")
    from latentlab.closed_form.pca import shifted_gram_is_safe

    mean = X.mean(axis=0)
    safe = shifted_gram_is_safe(len(X), mean, np.einsum("ij,ij->j", X, X) - len(X) * mean**2)
    print(
        "covariance_eigh scatter: "
        + ("X^T X - n mu mu^T (means small against spreads)" if safe else "centred in blocks")
    )
    for solver in ("auto", "covariance_eigh", "full", "randomized"):
        kwargs = dict(n_components=args.k, svd_solver=solver, random_state=0)
        bench(
            f"svd_solver={solver}",
            latentlab.PCA(**kwargs),
            decomposition.PCA(**kwargs),
            X,
            args.repeats,
        )


if __name__ == "__main__":
    main()
