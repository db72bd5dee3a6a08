"""Benchmark: the jobs latentlab exists for, timed whole, beside the tools people use.

On wine, diabetes and breast_cancer (standardised), with 30% of the entries hidden
at random (MAR: the first column stays observed, and an entry of another column is
hidden with a probability that rises with that row's first-column value, 30% on
average):

* ``fa``: factor analysis with missing entries, ``FactorAnalysis(K)`` (EM, then the
  engine's quasi-Newton phase: :mod:`latentlab.inference.quasi_newton`) against EM
  alone (the same program without the quasi-Newton phase: SQUAREM cycles from the same
  start, same tol, up to 5000 cycles): iterations, converged or not, warm time and
  log-likelihood per row.
  Target: under 100 iterations, and a log-likelihood no lower.
* ``impute``: the automatic ``Imputer()`` (model family and K chosen by held-out
  likelihood) against scikit-learn's ``IterativeImputer`` (defaults) and
  ``KNNImputer``, on columns standardised by their observed mean and sd: fit +
  transform time (first call of the process, then warm) and RMSE on the hidden
  entries in units of each column's sd.  R's ``mice`` is not run here (no R on the
  machines this project uses).  Target: no slower than ``IterativeImputer``.
* ``compare`` (with ``--compare``): ``latentlab.compare`` of PPCA and FA with
  K = 1..8, Bayesian PCA and GaussianMixture with K = 1..5, 5-fold CV: time, with
  every model on every fold and with ``stop_early=True``.

Usage::

    python benchmarks/bench_jobs.py                # fa + impute on the three data sets
    python benchmarks/bench_jobs.py --compare      # and the compare grid
    python benchmarks/bench_jobs.py --only fa --datasets wine
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

DATASETS = {"wine": 6, "diabetes": 4, "breast_cancer": 8}  # data set -> FA factors
FRACTION = 0.3
EM_ALONE_CYCLES = 5000


def load(name):
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    return StandardScaler().fit_transform(getattr(datasets, f"load_{name}")().data)


def hide_mar(X, fraction, seed=0):
    """MAR holes: column 0 observed; elsewhere hidden with probability rising with the
    row's column-0 value (a logistic in its rank), ``fraction`` on average."""
    rng = np.random.default_rng(seed)
    rank = np.argsort(np.argsort(X[:, 0])) / (len(X) - 1)  # 0..1
    weight = 1.0 / (1.0 + np.exp(-4.0 * (rank - 0.5)))
    p = np.clip(fraction * weight / weight.mean(), 0.0, 0.95)
    hidden = rng.random(X.shape) < p[:, None]
    hidden[:, 0] = False
    return np.where(hidden, np.nan, X), hidden


def seconds(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def fa_table(names):
    import jax

    import latentlab._shapes
    import latentlab.inference.em as engine
    from latentlab import FactorAnalysis

    def fit(X, K, max_iter):
        est = FactorAnalysis(K, max_iter=max_iter)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X)
            warm, _ = seconds(lambda: est.fit(X))
        row = f"{est.n_iter_:>7}{est.converged_!s:>6}{warm:>9.3f}{est.score(X):>18.10f}"
        return row

    print(f"\nFactor analysis, {FRACTION:.0%} MAR holes: EM + quasi-Newton vs EM alone")
    print(f"{'data':<14}{'method':<22}{'iters':>7}{'conv':>6}{'warm s':>9}{'loglik/row':>18}")
    rows = {}
    for name in names:
        X, _ = hide_mar(load(name), FRACTION)
        rows[name] = [fit(X, DATASETS[name], 5000)]
    # EM alone: the estimator's own program (same start, tol and stopping rule) with the
    # quasi-Newton phase taken out, compiled afresh
    polish = engine.polish_coordinates
    engine.polish_coordinates = lambda *args: None
    jax.clear_caches()
    latentlab._shapes.forget_programs()
    try:
        for name in names:
            X, _ = hide_mar(load(name), FRACTION)
            rows[name].append(fit(X, DATASETS[name], EM_ALONE_CYCLES))
    finally:
        engine.polish_coordinates = polish
        jax.clear_caches()
    for name, (polished, alone) in rows.items():
        print(f"{name:<14}{'EM + quasi-Newton':<22}{polished}")
        print(f"{'':<14}{'EM alone (SQUAREM)':<22}{alone}", flush=True)


def impute_table(names):
    from bench_impute import standardised  # scikit-learn's imputers on standardised columns
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer, KNNImputer

    from latentlab import Imputer

    methods = {
        "Imputer() (auto)": lambda X: Imputer(random_state=0).fit_transform(X),
        "IterativeImputer": standardised(lambda: IterativeImputer(random_state=0)),
        "KNNImputer": standardised(KNNImputer),
    }
    print(f"\nImputation, {FRACTION:.0%} MAR holes: fit + transform")
    print(f"{'data':<14}{'method':<20}{'first s':>9}{'warm s':>9}{'RMSE (sd)':>11}")
    for name in names:
        X_full = load(name)
        X, hidden = hide_mar(X_full, FRACTION)
        sd = X_full.std(axis=0)
        for label, run in methods.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                first, filled = seconds(lambda run=run, X=X: run(X))
                warm, filled = seconds(lambda run=run, X=X: run(X))
            error = ((filled - X_full) / sd)[hidden]
            rmse = float(np.sqrt(np.mean(error**2)))
            print(f"{name:<14}{label:<20}{first:>9.2f}{warm:>9.2f}{rmse:>11.4f}", flush=True)


def compare_table(names):
    from latentlab import PPCA, BayesianPCA, FactorAnalysis, GaussianMixture, compare

    models = (
        [PPCA(K) for K in range(1, 9)]
        + [FactorAnalysis(K) for K in range(1, 9)]
        + [BayesianPCA()]
        + [GaussianMixture(K, random_state=0) for K in range(1, 6)]
    )
    print("\ncompare: PPCA/FA K=1..8, BayesianPCA, GaussianMixture K=1..5, 5-fold CV")
    print(f"{'':<14}{'stop_early':>12}{'every fold':>12}  (stop_early runs first, with compiles)")
    for name in names:
        X, _ = hide_mar(load(name), FRACTION)
        times = []
        for stop_early in (True, False):  # stop_early first: it pays the compiles
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                elapsed, _ = seconds(
                    lambda X=X, s=stop_early: compare(models, X, cv=5, progress=False, stop_early=s)
                )
            times.append(elapsed)
        print(f"{name:<14}{times[0]:>10.1f} s{times[1]:>10.1f} s", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--only", choices=["fa", "impute", "compare"])
    parser.add_argument("--compare", action="store_true", help="also time the compare grid")
    args = parser.parse_args(argv)
    if args.only in (None, "fa"):
        fa_table(args.datasets)
    if args.only in (None, "impute"):
        impute_table(args.datasets)
    if args.only == "compare" or (args.only is None and args.compare):
        compare_table(args.datasets)


if __name__ == "__main__":
    main()
