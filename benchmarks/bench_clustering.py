"""Time latentlab's KMeans and AgglomerativeClustering against scikit-learn's, float64.

KMeans on 100,000 x 50 blobs with K = 10 (``--n-kmeans``), once from the same initial
centres on both sides (same labels and inertia expected: equal accuracy by
construction) and once with k-means++ seeding (n_init=3 each; the inertia ratio is
printed).  AgglomerativeClustering on n = 5,000 (``--n-agglo``) for each linkage.
Both sides run interleaved (A, B, A, B, ...); we report medians, the ratio latentlab /
scikit-learn (< 1: latentlab is faster) and latentlab's first call (trace + compile +
run) separately.  Thread settings and the load average are printed beside the numbers.

    .venv/bin/python benchmarks/bench_clustering.py [--repeats 3] [--n-kmeans 100000]
        [--n-agglo 5000] [--threads 1] [--only kmeans agglomerative]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _threads import apply_thread_option  # noqa: E402
from _timing import bench, print_environment  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-kmeans", type=int, default=100_000)
    parser.add_argument("--n-agglo", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--only", nargs="*", default=["kmeans", "agglomerative"])
    args = parser.parse_args()
    apply_thread_option(args.threads)

    import numpy as np
    from sklearn import cluster
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score
    from threadpoolctl import threadpool_limits

    import latentlab

    print_environment(args.threads)
    limits = threadpool_limits(args.threads) if args.threads else None
    warnings.simplefilter("ignore")

    def kmeans_result(est):
        return est.labels_, est.inertia_, est.n_iter_

    def same_fit(ours, ref):
        return (
            f"labels equal {np.array_equal(ours[0], ref[0])}, inertia rel. diff "
            f"{abs(ours[1] - ref[1]) / ref[1]:.1e}, iterations {ours[2]} vs {ref[2]}"
        )

    def seeded_fit(ours, ref):
        return f"inertia ratio {ours[1] / ref[1]:.4f}, iterations {ours[2]} vs {ref[2]}"

    if "kmeans" in args.only:
        X, _ = make_blobs(args.n_kmeans, n_features=50, centers=10, cluster_std=4.0, random_state=0)
        init = X[np.random.default_rng(0).choice(len(X), 10, replace=False)]
        bench(
            f"KMeans {args.n_kmeans}x50 K=10 same init",
            lambda: kmeans_result(latentlab.KMeans(10, init=init).fit(X)),
            lambda: kmeans_result(
                cluster.KMeans(10, init=init, n_init=1, algorithm="lloyd").fit(X)
            ),
            args.repeats,
            same_fit,
        )
        bench(
            f"KMeans {args.n_kmeans}x50 K=10 k-means++ n_init=3",
            lambda: kmeans_result(latentlab.KMeans(10, n_init=3, random_state=0).fit(X)),
            lambda: kmeans_result(cluster.KMeans(10, n_init=3, random_state=0).fit(X)),
            args.repeats,
            seeded_fit,
        )
    if "agglomerative" in args.only:
        X, _ = make_blobs(args.n_agglo, n_features=10, centers=8, cluster_std=2.0, random_state=0)
        for linkage in ("ward", "complete", "average", "single"):
            bench(
                f"Agglomerative n={args.n_agglo} {linkage}",
                lambda m=linkage: latentlab.AgglomerativeClustering(
                    8, linkage=m, compute_distances=True
                ).fit(X),
                lambda m=linkage: cluster.AgglomerativeClustering(
                    8, linkage=m, compute_distances=True
                ).fit(X),
                args.repeats,
                lambda a, b: (
                    f"ARI {adjusted_rand_score(a.labels_, b.labels_):.4f}, heights max diff "
                    f"{np.abs(a.distances_ - b.distances_).max():.1e}"
                ),
            )
    if limits is not None:
        limits.unregister()


if __name__ == "__main__":
    main()
