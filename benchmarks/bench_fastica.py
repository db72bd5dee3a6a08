"""Time latentlab's FastICA against scikit-learn's, float64.

100,000 x 20 (``--n``, ``--d``): 20 independent non-Gaussian sources (Laplace and
uniform) mixed by a random 20 x 20 matrix.  Both sides start from the same ``w_init``
with the same ``tol``, so they run the same iterations to the same unmixing (equal
accuracy by construction); printed: the iteration counts, each side's Amari distance to
the planted unmixing (0: exact separation) and the largest difference of
``components_``.  The parallel and deflation algorithms,
each with the logcosh contrast (and parallel with exp and cube), whitened by SVD (the
default) and for parallel also by eigh.  Both sides run interleaved (A, B, A, B, ...);
we report medians, the ratio latentlab / scikit-learn (< 1: latentlab is faster) and
latentlab's first call (trace + compile + run) separately.  Thread settings and the load
average are printed beside the numbers.

    .venv/bin/python benchmarks/bench_fastica.py [--repeats 3] [--n 100000] [--d 20]
        [--threads 1] [--only parallel deflation]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _threads import apply_thread_option  # noqa: E402
from _timing import bench, print_environment  # noqa: E402


def planted_sources(rng, n, d):
    """n x d independent non-Gaussian sources: Laplace (super-Gaussian) and uniform
    (sub-Gaussian), alternating."""
    import numpy as np

    return np.column_stack(
        [rng.laplace(size=n) if j % 2 == 0 else rng.uniform(-1.0, 1.0, size=n) for j in range(d)]
    )


def amari_distance(components, mixing):
    """Amari et al. (1996) distance of ``P = components @ mixing`` from a scaled
    permutation: 0 when every estimated source is exactly one planted source."""
    import numpy as np

    P = np.abs(components @ mixing)
    rows = (P.sum(axis=1) / P.max(axis=1) - 1).sum()
    cols = (P.sum(axis=0) / P.max(axis=0) - 1).sum()
    return (rows + cols) / (2 * P.shape[0] * (P.shape[0] - 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--only", nargs="*", default=["parallel", "deflation"])
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
    S = planted_sources(rng, args.n, args.d)
    A = rng.normal(size=(args.d, args.d))
    X = S @ A.T
    w_init = rng.normal(size=(args.d, args.d))

    def result(est):
        return est.components_, est.n_iter_

    def same_fit(ours, ref):
        scale = np.abs(ref[0]).max()
        return (
            f"iterations {ours[1]} vs {ref[1]}, Amari distance {amari_distance(ours[0], A):.1e} "
            f"vs {amari_distance(ref[0], A):.1e}, components max rel. diff "
            f"{np.abs(ours[0] - ref[0]).max() / scale:.1e}"
        )

    cases = []
    if "parallel" in args.only:
        cases += [
            ("parallel", "logcosh", "svd"),
            ("parallel", "exp", "svd"),
            ("parallel", "cube", "svd"),
            ("parallel", "logcosh", "eigh"),
        ]
    if "deflation" in args.only:
        cases += [("deflation", "logcosh", "svd")]
    for algorithm, fun, solver in cases:
        settings = dict(
            algorithm=algorithm, fun=fun, whiten_solver=solver, w_init=w_init, max_iter=1000
        )
        bench(
            f"FastICA {args.n}x{args.d} {algorithm} {fun} {solver}",
            lambda s=settings: result(latentlab.FastICA(**s).fit(X)),
            lambda s=settings: result(decomposition.FastICA(**s).fit(X)),
            args.repeats,
            same_fit,
            width=46,
        )
    if limits is not None:
        limits.unregister()


if __name__ == "__main__":
    main()
