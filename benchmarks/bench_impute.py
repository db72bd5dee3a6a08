"""Benchmark: imputation accuracy, interval coverage and speed against scikit-learn.

On data sets bundled with scikit-learn (iris, wine, diabetes, breast_cancer; digits
with ``--digits``) a fraction (10%, 20%, 40%) of the entries is hidden completely at
random (never a whole row), over several seeds, and filled in by

* latentlab's :class:`~latentlab.Imputer`: ``auto`` (family and K by held-out
  likelihood of masked entries), ``ppca`` and ``fa`` (K chosen the same way),
  ``bpca`` with ``--bpca`` (ARD prunes the rank; it starts from d - 1 components,
  which is slow on wide data), and ``chosen`` (the model ``auto`` picked, refitted
  with its K fixed: the cost of imputing once the model is known);
* scikit-learn's ``SimpleImputer(mean)``, ``KNNImputer`` and ``IterativeImputer``
  (defaults), all given columns standardised by their observed mean and sd (what
  Imputer does inside; KNN needs it).

Reported per data set, fraction and method (means over seeds): RMSE on the hidden
entries in units of each column's sd; for latentlab, the share of hidden values
inside the 90% intervals (``impute_interval``, plug-in and ``calibrate=True``); fit
+ transform time, warm (the same masked data run once before, so XLA compilation is
excluded) and cold (first call in the process: tracing + compilation + fit) beside it.  Then:

* targets: at 20% missing, the best latentlab method has lower RMSE than
  IterativeImputer on at least two of three data sets, and is at least 5x faster;
* calibration on data simulated from the fitted model family (the chosen model's
  ``sample``, same n, 20% hidden, same family and K refitted): 90% intervals should
  cover 88-92%: plug-in, with bootstrap parameter draws, and calibrated on held-out
  entries (``calibrate=True``);
* per-column coverage on the real data (best latentlab method, 20%), naming the
  columns outside 80-97%.

With ``--padding`` it prints instead the shape policy's cost table
(:mod:`latentlab._shapes`): on wine, diabetes and breast_cancer with 30% of the entries
hidden completely at random, the warm time of a fixed-model imputation
(``Imputer(model=PPCA(n_components=3))``, fit + transform) against
``IterativeImputer(max_iter=10)`` (targets: at least 15x faster), and the warm time of
PPCA and FactorAnalysis fits for K = 1..8 with the default padding against the same fit
at its exact shape (``latentlab.config_context(padding=False)``), each at most
``FIT_CYCLES`` EM cycles: the padded work
should stay within ~1.5x of the exact fit's, and the K grid compile at most 4 programs
(counted in a fresh process by ``bench_cold_start.py``'s ``grid_*`` scenarios).

Usage::

    python benchmarks/bench_impute.py            # 4 data sets x 3 fractions x 3 seeds
    python benchmarks/bench_impute.py --quick    # iris + wine, 20%, one seed
    python benchmarks/bench_impute.py --padding  # the shape policy's cost table

``main(argv)`` returns the results table (a pandas DataFrame) and the summaries.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from functools import partial

import numpy as np

DATASETS = ("iris", "wine", "diabetes", "breast_cancer")
LATENTLAB = ("auto", "chosen", "ppca", "fa", "bpca")
DEFAULT_LATENTLAB = ("auto", "ppca", "fa")  # + "chosen", measured beside "auto"
SKLEARN = ("mean", "knn", "iterative")
LEVEL = 0.9
COVERAGE_BAND = (0.80, 0.97)  # per-column band on real data
SIMULATED_BAND = (0.88, 0.92)
FIT_CYCLES = 100  # EM cycles at most per fit in the --padding table


def load(name: str) -> np.ndarray:
    from sklearn import datasets

    X = getattr(datasets, f"load_{name}")().data.astype(np.float64)
    return X[:, X.std(axis=0) > 0]  # digits has constant pixels


def hide(X, fraction, seed):
    """MCAR mask: each entry hidden with probability ``fraction``, never a whole row."""
    rng = np.random.default_rng(seed)
    hidden = rng.random(X.shape) < fraction
    full = np.flatnonzero(hidden.all(axis=1))
    hidden[full, rng.integers(0, X.shape[1], size=full.size)] = False
    return np.where(hidden, np.nan, X), hidden


def standardised(method):
    """A scikit-learn imputer run on columns scaled by their observed mean and sd."""

    def run(X):
        center, scale = np.nanmean(X, axis=0), np.nanstd(X, axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        return method().fit_transform((X - center) / scale) * scale + center

    return run


def sklearn_methods(seed):
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer, KNNImputer, SimpleImputer

    return {
        "mean": standardised(SimpleImputer),
        "knn": standardised(KNNImputer),
        "iterative": standardised(lambda: IterativeImputer(random_state=seed)),
    }


def latentlab_run(name, seed, chosen=None):
    """fit + transform + 90% intervals with a latentlab Imputer; returns a callable."""
    from latentlab import Imputer

    def run(X):
        if name == "chosen":
            imp = Imputer(chosen["model"], n_components=chosen["n_components"], random_state=seed)
        else:
            imp = Imputer(name, random_state=seed)
        filled = imp.fit(X).transform(X)
        run.imputer = imp
        return filled

    return run


def timed(run, X):
    start = time.perf_counter()
    out = run(X)
    return out, time.perf_counter() - start


def evaluate(dataset, X, fractions, seeds, repeats, seen, say, names=DEFAULT_LATENTLAB):
    """Rows of the results table for one data set, plus per-column coverage counts."""
    rows, per_column = [], {}
    sd = X.std(axis=0)
    for fraction in fractions:
        for seed in seeds:
            X_missing, hidden = hide(X, fraction, seed)
            methods = {name: latentlab_run(name, seed) for name in names}
            methods.update(sklearn_methods(seed))
            results = {}
            for name, run in methods.items():
                filled, first = timed(run, X_missing)
                results[name] = [run, filled, first, []]
                if name == "auto":  # the model auto picked, refitted with K fixed
                    chosen = run.imputer.chosen_
                    results["chosen"] = [latentlab_run("chosen", seed, chosen), None, None, []]
                    results["chosen"][1], results["chosen"][2] = timed(
                        results["chosen"][0], X_missing
                    )
            for _ in range(repeats):  # warm timings, interleaved
                for entry in results.values():
                    entry[1], seconds = timed(entry[0], X_missing)
                    entry[3].append(seconds)
            for name, (run, filled, first, warm) in results.items():
                err = (filled - X)[hidden] / np.broadcast_to(sd, X.shape)[hidden]
                row = {
                    "dataset": dataset,
                    "missing": fraction,
                    "seed": seed,
                    "method": name,
                    "rmse": float(np.sqrt(np.mean(err**2))),
                    "coverage": np.nan,
                    "coverage_cal": np.nan,
                    "warm_ms": 1e3 * statistics.median(warm),
                    "cold_ms": np.nan,
                    "chosen": "",
                }
                key = (dataset, name)
                if name in LATENTLAB:
                    imp = run.imputer
                    lower, upper = imp.impute_interval(X_missing, level=LEVEL)
                    inside = (lower <= X) & (X <= upper)
                    row["coverage"] = float(inside[hidden].mean())
                    lower, upper = imp.impute_interval(X_missing, level=LEVEL, calibrate=True)
                    row["coverage_cal"] = float(((lower <= X) & (X <= upper))[hidden].mean())
                    row["chosen"] = f"{imp.chosen_['model']}(K={imp.chosen_['n_components']})"
                    counts = per_column.setdefault((fraction, name), np.zeros((2, X.shape[1])))
                    counts += [(inside & hidden).sum(axis=0), hidden.sum(axis=0)]
                if key not in seen:  # first call in this process: compilation included
                    seen.add(key)
                    row["cold_ms"] = 1e3 * first
                rows.append(row)
            say(
                f"  {dataset} {fraction:.0%} seed {seed}: chose "
                f"{results['auto'][0].imputer.chosen_}"
            )
    return rows, per_column


def simulated_coverage(X, seeds, say, n_large=2000, min_replicates=10):
    """Coverage of 90% intervals on data drawn from the model auto fits at 20% missing.

    With as many rows as the real data (plug-in intervals then miss the parameters'
    uncertainty; also with ``impute_interval(draw_parameters=True)``, 20 bootstrap
    refits) and with ``n_large`` rows (where it no longer matters).  A small data set
    hides only a few hundred values per draw (a coverage standard error of ~0.015),
    so at the real size at least ``min_replicates`` data sets are drawn.  Coverage
    pools the data sets' hidden values; see :func:`_pooled_coverage` for its error.
    Returns ``{"n=...": (coverage, hidden values, Monte-Carlo standard error)}``.
    """
    from latentlab import Imputer

    X_missing, _ = hide(X, 0.2, seeds[0])
    fitted = Imputer(random_state=0).fit(X_missing)
    chosen = fitted.chosen_
    counts = {}
    replicates = {X.shape[0]: max(len(seeds), min_replicates), n_large: len(seeds)}
    for n, count in replicates.items():
        for seed in range(count):
            draw = fitted.model_.sample(n, random_state=seed)
            Z = draw[0] if isinstance(draw, tuple) else draw
            Z_missing, hidden = hide(Z, 0.2, 1000 + seed)
            imp = Imputer(  # its own seed: independent starts and calibration masks
                chosen["model"],
                n_components=chosen["n_components"],
                standardize=False,
                random_state=seed,
            ).fit(Z_missing)
            intervals = {f"n={n}": imp.impute_interval(Z_missing, level=LEVEL)}
            if n == X.shape[0]:  # where parameter uncertainty matters: the remedies too
                intervals[f"n={n} boot"] = imp.impute_interval(
                    Z_missing, level=LEVEL, draw_parameters=True, n_draws=20, random_state=seed
                )
                intervals[f"n={n} calib"] = imp.impute_interval(
                    Z_missing, level=LEVEL, calibrate=True
                )
            for key, (lower, upper) in intervals.items():
                inside = int(((lower <= Z) & (Z <= upper))[hidden].sum())
                counts.setdefault(key, []).append((inside, int(hidden.sum())))
    say(f"  simulated from {chosen}: {counts}")
    return chosen, {key: _pooled_coverage(parts) for key, parts in counts.items()}


def _pooled_coverage(parts):
    """(coverage, hidden values, standard error) from per-data-set (inside, total).

    Coverage varies from one simulated data set to the next by more than binomial
    error (the fitted parameters, and a calibrated level, change with the data), so
    with 5 or more data sets the standard error is their spread / sqrt(count).
    """
    inside, total = np.array(parts, dtype=float).T
    coverage = inside.sum() / total.sum()
    if len(parts) >= 5:
        se = np.std(inside / total, ddof=1) / np.sqrt(len(parts))
    else:  # too few data sets to estimate the spread: binomial, an underestimate
        se = np.sqrt(coverage * (1.0 - coverage) / total.sum())
    return coverage, int(total.sum()), float(se)


def _warm_ms(run, X, repeats, best=False):
    """Median (``best``: smallest) wall milliseconds of ``run(X)`` over ``repeats``
    calls after one warm-up."""
    run(X)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(X)
        times.append(time.perf_counter() - start)
    return 1e3 * (min(times) if best else statistics.median(times))


def padding_table(datasets=("wine", "diabetes", "breast_cancer"), fraction=0.3, repeats=7):
    """The ``--padding`` tables (see the module docstring); returns two DataFrames."""
    import pandas as pd
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer

    import latentlab
    from latentlab import PPCA, FactorAnalysis, Imputer
    from latentlab._shapes import forget_programs

    def fixed_model(X):
        return Imputer(model=PPCA(n_components=3)).fit_transform(X)

    def iterative(X):
        return IterativeImputer(max_iter=10).fit_transform(X)

    imputation, fits = [], []
    for name in datasets:
        X = load(name)
        X_missing, _ = hide((X - X.mean(axis=0)) / X.std(axis=0), fraction, seed=0)
        # (the policy reuses an exact program it has run: forget those, so the padded
        # timings below are of the padded programs)
        forget_programs()
        ours = _warm_ms(fixed_model, X_missing, repeats)
        theirs = _warm_ms(iterative, X_missing, repeats)
        with latentlab.config_context(padding=False):
            exact = _warm_ms(fixed_model, X_missing, repeats)
        imputation.append(
            {
                "dataset": name,
                "latentlab_ms": ours,
                "unpadded_ms": exact,
                "iterative_ms": theirs,
                "speedup": theirs / ours,
            }
        )
        for model in (PPCA, FactorAnalysis):
            for K in range(1, 9):
                fit = partial(_fit, model, K)
                forget_programs()
                # best of N: other processes on a shared machine only ever add time
                padded = _warm_ms(fit, X_missing, repeats, best=True)
                with latentlab.config_context(padding=False):
                    plain = _warm_ms(fit, X_missing, repeats, best=True)
                row = {"dataset": name, "model": model.__name__, "K": K}
                fits.append(
                    {**row, "padded_ms": padded, "exact_ms": plain, "ratio": padded / plain}
                )
    return pd.DataFrame(imputation), pd.DataFrame(fits)


def _fit(model, K, X):
    # A bounded number of EM cycles: FactorAnalysis with missing entries can crawl for
    # thousands (the subject of another benchmark); padded and exact fits run the same
    # cycles, so the ratio is the padding's cost per cycle.
    return model(K, max_iter=FIT_CYCLES).fit(X)


def thread_note() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    flags = os.environ.get("XLA_FLAGS", "")
    return f"cores {os.cpu_count()}, load average {load:.1f}, XLA_FLAGS={flags!r}"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="iris + wine, 20%%, one seed")
    parser.add_argument("--seeds", type=int, default=3, help="masks per data set and fraction")
    parser.add_argument("--repeats", type=int, default=1, help="warm timings per method")
    parser.add_argument("--digits", action="store_true", help="add digits (1797 x 61)")
    parser.add_argument(
        "--bpca",
        action="store_true",
        help="add Bayesian PCA (starts from d - 1 components: slow for wide data)",
    )
    parser.add_argument("--datasets", nargs="+", choices=DATASETS + ("digits",), default=None)
    parser.add_argument("--quiet", action="store_true", help="only the final tables")
    parser.add_argument(
        "--padding", action="store_true", help="the shape policy's cost table (only)"
    )
    return parser.parse_args(argv)


def main(argv=None):
    import pandas as pd
    from sklearn.exceptions import ConvergenceWarning

    args = parse_args(argv)
    if args.padding:
        print(thread_note())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            imputation, fits = padding_table(repeats=max(args.repeats, 5))
        print("\nFixed-model imputation, 30% MCAR, warm medians (ms):")
        print(imputation.round(2).to_string(index=False))
        print("\nWarm fit time (best of N), default padding against the exact shape (ms):")
        print(fits.round(2).to_string(index=False))
        worst = fits.groupby(["dataset", "model"])["ratio"].max()
        print("\nlargest padded/exact ratio per data set and model:")
        print(worst.round(2).to_string())
        return imputation, fits
    datasets = ("iris", "wine") if args.quick else DATASETS + (("digits",) if args.digits else ())
    datasets = args.datasets or datasets
    names = DEFAULT_LATENTLAB + (("bpca",) if args.bpca else ())
    fractions = (0.2,) if args.quick else (0.1, 0.2, 0.4)
    seeds = list(range(1 if args.quick else args.seeds))

    def say(*parts):
        if not args.quiet:
            print(*parts, file=sys.stderr, flush=True)

    rows, coverage_by_column, simulated = [], {}, {}
    seen: set = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name in datasets:
            X = load(name)
            say(f"{name}: {X.shape[0]} x {X.shape[1]}")
            new_rows, per_column = evaluate(
                name, X, fractions, seeds, args.repeats, seen, say, names
            )
            part = pd.DataFrame(new_rows).groupby(["missing", "method"], sort=False)
            say(part[["rmse", "coverage", "coverage_cal", "warm_ms"]].mean().to_string())
            rows += new_rows
            coverage_by_column[name] = per_column
            simulated[name] = simulated_coverage(X, seeds, say)

    table = pd.DataFrame(rows)
    summary = (
        table.groupby(["dataset", "missing", "method"], sort=False)
        .agg(
            rmse=("rmse", "mean"),
            rmse_sd=("rmse", "std"),
            coverage90=("coverage", "mean"),
            calibrated90=("coverage_cal", "mean"),
            warm_ms=("warm_ms", "median"),
            cold_ms=("cold_ms", "max"),
            chosen=("chosen", lambda c: ", ".join(sorted(set(c) - {""}))),
        )
        .reset_index()
    )
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    print(f"\n== imputation of hidden entries ({len(seeds)} seed(s); {thread_note()})")
    print(
        "rmse in units of each column's sd; coverage of 90% intervals, plug-in and "
        "calibrated (impute_interval(calibrate=True)); times fit+transform"
    )
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep=""))

    # targets at 20% missing: the best latentlab method against IterativeImputer
    print("\n== targets at 20% missing: best latentlab method vs IterativeImputer")
    wins, fast = 0, 0
    at20 = summary[summary["missing"] == 0.2]
    verdicts = {}
    for name, part in at20.groupby("dataset", sort=False):
        ours = part[part["method"].isin(LATENTLAB)].sort_values("rmse").iloc[0]
        iterative = part[part["method"] == "iterative"].iloc[0]
        ratio = iterative["warm_ms"] / ours["warm_ms"]
        chosen_ratio = iterative["warm_ms"] / part[part["method"] == "chosen"]["warm_ms"].iloc[0]
        better = ours["rmse"] < iterative["rmse"]
        wins += better
        fast += ratio >= 5
        verdicts[name] = (ours["method"], ours["rmse"], iterative["rmse"], ratio, chosen_ratio)
        print(
            f"  {name:14s} best {ours['method']:7s} rmse {ours['rmse']:.3f} vs iterative "
            f"{iterative['rmse']:.3f} ({'lower' if better else 'higher'}); iterative time / "
            f"best's time {ratio:.1f}x (/ chosen model's {chosen_ratio:.1f}x)"
        )
    print(
        f"  lower RMSE on {wins} of {len(verdicts)} data sets (target: >= 2 of 3); "
        f">= 5x faster on {fast} of {len(verdicts)}"
    )

    print(f"\n== 90% intervals on data simulated from the fitted model (target {SIMULATED_BAND})")
    for name, (chosen, results) in simulated.items():
        label = f"{chosen['model']}(K={chosen['n_components']})"
        for key, (cov, total, se) in results.items():
            flag = "" if SIMULATED_BAND[0] <= cov <= SIMULATED_BAND[1] else "  <-- outside"
            print(f"  {name:14s} {label:10s} {key:12s} {cov:.3f} +- {se:.3f} of {total}{flag}")

    print(f"\n== per-column coverage on the real data at 20% (band {COVERAGE_BAND})")
    outside = {}
    for name, per_column in coverage_by_column.items():
        best = verdicts[name][0] if name in verdicts else "auto"
        counts = per_column.get((0.2, best))
        if counts is None:
            continue
        cov = counts[0] / np.maximum(counts[1], 1)
        bad = [
            f"col {j}: {c:.2f}"
            for j, c in enumerate(cov)
            if not COVERAGE_BAND[0] <= c <= COVERAGE_BAND[1]
        ]
        outside[name] = bad
        print(
            f"  {name:14s} ({best}) overall {counts[0].sum() / counts[1].sum():.3f}; "
            f"columns {np.round(cov, 2).tolist()}"
        )
        print(f"  {'':14s} outside the band: {', '.join(bad) if bad else 'none'}")
    return {
        "table": summary,
        "targets": verdicts,
        "simulated": simulated,
        "columns_outside": outside,
    }


if __name__ == "__main__":
    main()
