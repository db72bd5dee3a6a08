"""Run the EM estimators on the default JAX device (a GPU where there is one) and on
the CPU, on the same data, and compare likelihoods and warm fit times.

Run:  python benchmarks/device_check.py [--n-samples 200000]

Prints, per model, the log-likelihood per row on each device (they must agree to
round-off: the fit is the same float64 program) and the warm-time ratio.
"""

from __future__ import annotations

import argparse
import time
import warnings


def _timed(make, X, repeats):
    first = time.perf_counter()
    est = make().fit(X)
    first = time.perf_counter() - first
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        est = make().fit(X)
        warm.append(time.perf_counter() - start)
    return est, first, min(warm)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n-samples", type=int, default=200_000)
    parser.add_argument("--n-features", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)

    import jax
    import numpy as np

    import latentlab

    rng = np.random.default_rng(0)
    n, d = args.n_samples, args.n_features
    W = rng.normal(size=(d, 5))
    X = rng.normal(size=(n, 5)) @ W.T + rng.normal(size=(n, d)) * rng.uniform(0.3, 2.0, d)
    X_missing = np.where(rng.random(X.shape) < 0.1, np.nan, X)
    labels = rng.integers(4, size=n)
    X_mix = X + 4.0 * rng.normal(size=(4, d))[labels]

    cases = [
        ("PPCA EM", lambda: latentlab.PPCA(5, random_state=0), X),
        ("PPCA EM, 10% NaN", lambda: latentlab.PPCA(5, random_state=0), X_missing),
        ("FactorAnalysis", lambda: latentlab.FactorAnalysis(5, random_state=0), X),
        (
            "GaussianMixture full",
            lambda: latentlab.GaussianMixture(4, tol=0.0, max_iter=20, random_state=0),
            X_mix,
        ),
    ]
    default = jax.devices()[0]
    cpu = jax.devices("cpu")[0]
    print(f"default device: {default.device_kind} ({default.platform}); jax {jax.__version__}")
    rows = []
    for name, make, data in cases:
        result = {"model": name}
        for label, device in (("default", default), ("cpu", cpu)):
            with jax.default_device(device), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est, first, warm = _timed(make, data, args.repeats)
                result[label] = (est.score(data), first, warm)
        (s_dev, f_dev, w_dev), (s_cpu, f_cpu, w_cpu) = result["default"], result["cpu"]
        print(
            f"{name:24s} loglik/row {s_dev: .10f} (device) {s_cpu: .10f} (cpu)  "
            f"|diff| {abs(s_dev - s_cpu):.1e}  warm {w_dev:.3f}s vs {w_cpu:.3f}s  "
            f"cpu/device {w_cpu / w_dev:.1f}x  (first call {f_dev:.1f}s / {f_cpu:.1f}s)",
            flush=True,
        )
        rows.append(result)
    return rows


if __name__ == "__main__":
    main()
