"""Time latentlab's Isomap, LocallyLinearEmbedding, SpectralEmbedding and
SpectralClustering against scikit-learn's on the S-curve, in float64.

Isomap and LLE at n = 3,000 (``--n-small``), spectral embedding and clustering at
n = 5,000 (``--n-large``), with the same neighbours on both sides.  Both sides run
interleaved (A, B, A, B, ...); we report medians, the ratio latentlab / scikit-learn
(< 1: latentlab is faster), latentlab's first call (trace + compile + run) separately,
and the largest difference of the embeddings (after matching the signs of the axes).
Thread settings are printed beside the numbers.

    .venv/bin/python benchmarks/bench_manifold.py [--repeats 3] [--n-small 3000]
        [--n-large 5000] [--threads 1] [--only isomap lle spectral clustering]
        [--affinities rbf nearest_neighbors]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _threads import apply_thread_option  # noqa: E402
from _timing import bench, print_environment  # noqa: E402


def aligned_difference(a, b):
    """max |a - b| over columns whose signs are matched (eigenvectors' signs are free)."""
    import numpy as np

    a = a * np.sign(np.sum(a * b, axis=0))
    return float(np.abs(a - b).max() / np.abs(b).max())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-small", type=int, default=3000)
    parser.add_argument("--n-large", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--only", nargs="*", default=["isomap", "lle", "spectral", "clustering"])
    parser.add_argument(
        "--affinities", nargs="*", default=["rbf", "nearest_neighbors"], help="spectral methods"
    )
    args = parser.parse_args()
    apply_thread_option(args.threads)

    from sklearn import cluster, manifold
    from sklearn.datasets import make_s_curve
    from sklearn.metrics import adjusted_rand_score
    from threadpoolctl import threadpool_limits

    import latentlab

    print_environment(args.threads)
    limits = threadpool_limits(args.threads) if args.threads else None
    warnings.simplefilter("ignore")

    def embedding_error(ours, ref):
        return f"max rel. difference {aligned_difference(ours, ref):.1e}"

    X, _ = make_s_curve(args.n_small, random_state=0)
    if "isomap" in args.only:
        bench(
            f"Isomap n={args.n_small} k=10",
            lambda: latentlab.Isomap(n_neighbors=10).fit_transform(X),
            lambda: manifold.Isomap(n_neighbors=10).fit_transform(X),
            args.repeats,
            embedding_error,
        )
    if "lle" in args.only:
        for solver in ("auto", "arpack"):
            bench(
                f"LLE n={args.n_small} k=10 (sk {solver})",
                lambda: latentlab.LocallyLinearEmbedding(n_neighbors=10).fit_transform(X),
                lambda s=solver: manifold.LocallyLinearEmbedding(
                    n_neighbors=10, eigen_solver=s, random_state=0
                ).fit_transform(X),
                args.repeats,
                embedding_error,
            )
    X, _ = make_s_curve(args.n_large, random_state=0)
    if "spectral" in args.only:
        for affinity in args.affinities:
            bench(
                f"SpectralEmbedding n={args.n_large} {affinity}",
                lambda a=affinity: latentlab.SpectralEmbedding(
                    affinity=a, n_neighbors=10
                ).fit_transform(X),
                lambda a=affinity: manifold.SpectralEmbedding(
                    affinity=a, n_neighbors=10, random_state=0
                ).fit_transform(X),
                args.repeats,
                embedding_error,
            )
    if "clustering" in args.only:
        for affinity in args.affinities:
            bench(
                f"SpectralClustering n={args.n_large} {affinity} k=4",
                lambda a=affinity: (
                    latentlab.SpectralClustering(4, affinity=a, random_state=0).fit(X).labels_
                ),
                lambda a=affinity: (
                    cluster.SpectralClustering(4, affinity=a, random_state=0).fit(X).labels_
                ),
                args.repeats,
                lambda a, b: f"adjusted Rand vs scikit-learn {adjusted_rand_score(a, b):.4f}",
            )
    if limits is not None:
        limits.unregister()


if __name__ == "__main__":
    main()
