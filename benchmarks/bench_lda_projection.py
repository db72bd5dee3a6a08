"""Time latentlab's LinearDiscriminantAnalysis, MDS and random projections against
scikit-learn's, in float64, on the same data in one run.

* LDA: ``--lda-n`` x ``--lda-d`` Gaussian classes (``--lda-classes``), solvers svd,
  eigen and lsqr+shrinkage="auto"; accuracy: predictions agree, max |coef difference|.
* Random projection: ``--rp-n`` x ``--rp-d`` to the Johnson-Lindenstrauss dimension
  at eps=0.1 (fit + transform), Gaussian and sparse; accuracy: the worst distortion of
  squared distances over 2,000 random pairs, for both.
* Classical MDS: ``--mds-n`` points in 10 dimensions to 2, against
  ``sklearn.manifold.ClassicalMDS`` (the same closed form); accuracy: max |embedding
  difference| up to sign.  scikit-learn's default ``MDS`` (SMACOF) is timed too, for
  reference only (a different, iterative criterion).

Both sides run interleaved (A, B, A, B, ...), medians are reported with the ratio
latentlab / scikit-learn (< 1: latentlab is faster), for the first call (latentlab
compiles then) and warm calls, in wall and process CPU time.  Thread settings are
printed; on a shared machine run with ``--threads 1`` and read the CPU ratios.

    .venv/bin/python benchmarks/bench_lda_projection.py [--repeats 3] [--threads 1]
        [--lda-n 100000] [--lda-d 50] [--lda-classes 10]
        [--rp-n 10000] [--rp-d 10000] [--mds-n 2000] [--only lda rp mds]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _threads import apply_thread_option  # noqa: E402


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def compare(label, ours, theirs, repeats, accuracy=None):
    """First calls, then ``repeats`` interleaved warm calls; prints medians and ratios."""
    first_ours = timed(ours)
    first_theirs = timed(theirs)
    warm = {"ours": [], "theirs": []}
    for _ in range(repeats):
        warm["ours"].append(timed(ours)[:2])
        warm["theirs"].append(timed(theirs)[:2])
    med = {k: [statistics.median(t[i] for t in v) for i in (0, 1)] for k, v in warm.items()}
    print(
        f"{label:38s} first: {first_ours[0]:7.3f}s vs {first_theirs[0]:7.3f}s "
        f"(ratio {first_ours[0] / first_theirs[0]:5.2f})   "
        f"warm wall: {med['ours'][0]:7.3f}s vs {med['theirs'][0]:7.3f}s "
        f"(ratio {med['ours'][0] / med['theirs'][0]:5.2f})   "
        f"warm cpu ratio {med['ours'][1] / med['theirs'][1]:5.2f}",
        flush=True,
    )
    if accuracy is not None:
        print(f"{'':38s} accuracy: {accuracy(first_ours[2], first_theirs[2])}", flush=True)


def bench_lda(args):
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    import latentlab

    rng = np.random.default_rng(0)
    n, d, C = args.lda_n, args.lda_d, args.lda_classes
    means = 1.5 * rng.normal(size=(C, d))
    mixing = rng.normal(size=(d, d)) / np.sqrt(d)
    y = rng.integers(0, C, size=n)
    X = means[y] + rng.normal(size=(n, d)) @ mixing

    def agreement(a, b):
        same = np.mean(a.predict(X) == b.predict(X))
        relative = np.abs(a.coef_ - b.coef_).max() / np.abs(b.coef_).max()
        return f"predictions agree on {same:.6f}, max |coef diff| / max |coef| {relative:.1e}"

    print(f"\nLDA: {n} x {d}, {C} classes")
    for settings in (
        dict(solver="svd"),
        dict(solver="eigen"),
        dict(solver="lsqr", shrinkage="auto"),
        dict(solver="eigen", shrinkage="auto"),
    ):
        label = "LDA " + ", ".join(f"{k}={v}" for k, v in settings.items())
        compare(
            label,
            lambda s=settings: latentlab.LinearDiscriminantAnalysis(**s).fit(X, y),
            lambda s=settings: LinearDiscriminantAnalysis(**s).fit(X, y),
            args.repeats,
            agreement,
        )


def bench_rp(args):
    from sklearn import random_projection as skrp

    import latentlab

    rng = np.random.default_rng(1)
    n, d = args.rp_n, args.rp_d
    X = rng.normal(size=(n, d))
    i, j = rng.integers(0, n, size=(2, 2000))
    i, j = i[i != j], j[i != j]
    original = np.sum((X[i] - X[j]) ** 2, axis=1)

    def distortion(a, b):
        def worst(Z):
            return np.abs(np.sum((Z[i] - Z[j]) ** 2, axis=1) / original - 1).max()

        return (
            f"k={a.shape[1]} vs {b.shape[1]}; worst squared-distance distortion over "
            f"{len(i)} pairs: {worst(a):.4f} vs {worst(b):.4f} (eps=0.1)"
        )

    print(f"\nRandom projection: {n} x {d} -> Johnson-Lindenstrauss dimension at eps=0.1")
    for name in ("GaussianRandomProjection", "SparseRandomProjection"):
        compare(
            f"{name} fit_transform",
            lambda name=name: getattr(latentlab, name)(random_state=0).fit_transform(X),
            lambda name=name: np.asarray(getattr(skrp, name)(random_state=0).fit_transform(X)),
            args.repeats,
            distortion,
        )

    def stored_mb(R):
        parts = (R.data, R.indices, R.indptr) if hasattr(R, "indptr") else (np.asarray(R),)
        return sum(p.nbytes for p in parts) / 1e6

    ours = latentlab.SparseRandomProjection(random_state=0).fit(X).components_
    ref = skrp.SparseRandomProjection(random_state=0).fit(X).components_
    print(
        f"SparseRandomProjection components_ ({ours.shape[0]} x {d}): "
        f"{stored_mb(ours):.1f} MB ({type(ours).__name__}) vs {stored_mb(ref):.1f} MB "
        f"({type(ref).__name__})"
    )


def bench_mds(args):
    from sklearn.manifold import MDS, ClassicalMDS
    from sklearn.metrics import pairwise_distances

    import latentlab

    rng = np.random.default_rng(2)
    n = args.mds_n
    X = rng.normal(size=(n, 10)) * np.linspace(3, 0.3, 10)

    def up_to_sign(a, b):
        signs = np.sign(np.sum(a * b, axis=0))
        return f"max |embedding diff| up to sign {np.abs(a * signs - b).max():.2e}"

    print(f"\nClassical MDS: {n} points in 10 dimensions -> 2")
    compare(
        "MDS (classical) vs ClassicalMDS",
        lambda: latentlab.MDS(n_components=2, random_state=0).fit_transform(X),
        lambda: ClassicalMDS(n_components=2).fit_transform(X),
        args.repeats,
        up_to_sign,
    )
    D = pairwise_distances(X)

    def stress_1(Y):
        return np.sqrt(np.sum((D - pairwise_distances(Y)) ** 2) / np.sum(D**2))

    compare(
        "MDS (classical) vs MDS (SMACOF, ref.)",
        lambda: latentlab.MDS(n_components=2, random_state=0).fit_transform(X),
        lambda: MDS(n_components=2, n_init=1, init="random", random_state=0).fit_transform(X),
        1,
        lambda a, b: f"Kruskal stress-1 {stress_1(a):.4f} vs {stress_1(b):.4f}",
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--lda-n", type=int, default=100_000)
    parser.add_argument("--lda-d", type=int, default=50)
    parser.add_argument("--lda-classes", type=int, default=10)
    parser.add_argument("--rp-n", type=int, default=10_000)
    parser.add_argument("--rp-d", type=int, default=10_000)
    parser.add_argument("--mds-n", type=int, default=2_000)
    parser.add_argument("--only", nargs="+", default=["lda", "rp", "mds"])
    args = parser.parse_args()
    apply_thread_option(args.threads)

    import jax
    import scipy.linalg  # noqa: F401  (load SciPy's OpenBLAS, which XLA's LAPACK calls
    import sklearn.discriminant_analysis  # noqa: F401  use, so that the limit reaches it)
    from threadpoolctl import threadpool_info, threadpool_limits

    limits = threadpool_limits(1) if args.threads == 1 else None
    print(f"jax {jax.__version__}, devices {jax.devices()}, threads option {args.threads}")
    for pool in threadpool_info():
        print(f"threadpoolctl: {pool['user_api']} num_threads={pool['num_threads']}")
    import os

    print(f"load average {os.getloadavg()}")
    for name in args.only:
        {"lda": bench_lda, "rp": bench_rp, "mds": bench_mds}[name](args)
    del limits


if __name__ == "__main__":
    main()
