"""Cold start: what a new user meets in a fresh process, against scikit-learn.

Every scenario runs in fresh subprocesses, first with an empty persistent compilation
cache and then again with the same (now warm) cache directory, a temporary
``LATENTLAB_CACHE_DIR`` of its own (``JAX_COMPILATION_CACHE_DIR`` is removed from the
children's environment, so the library's own cache setup is what is measured).  For
each run the table gives the wall time of the scenario's call alone (imports and data
loading excluded), the number of XLA backend compiles and the persistent-cache
misses and hits, all counted with ``jax.monitoring`` listeners:

* programs: '/jax/core/compile/backend_compile_duration' events, one per program
  handed to XLA -- compiled, or loaded from the persistent cache on a hit (so the
  programs actually compiled are programs minus hits);
* hits: '/jax/compilation_cache/cache_hits';
* misses: '/jax/compilation_cache/compile_requests_use_cache' minus hits -- programs
  looked up and compiled (JAX's own '/jax/compilation_cache/cache_misses' event counts
  only the entries it *writes*, leaving out programs under its min-compile-time
  threshold, which miss again in every process).

Beside each, scikit-learn's time for its nearest equivalent, in a fresh process too,
and latentlab's cold-start targets.  Above the table: the time ``import latentlab`` adds to
``import jax``, and the time its lazily imported estimators (scikit-learn with them)
add at first use (medians of 3 fresh processes).  The scenarios' calls are timed
after that first use.

Usage::

    python benchmarks/bench_cold_start.py                      # everything, ~3-5 min
    python benchmarks/bench_cold_start.py --scenarios ppca gmm --repeats 3
    python benchmarks/bench_cold_start.py --force-jax-env      # see below

``--force-jax-env`` also sets ``JAX_COMPILATION_CACHE_DIR`` (the same directory) and
``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0`` in the children, for a library that
does not turn the cache on by itself.  ``--repeats N`` runs each (empty, warm) pair and
scikit-learn's process N times, each pair with a fresh empty directory, and reports
medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SCENARIOS = {
    # name: (what latentlab runs, scikit-learn's nearest equivalent, cold-start target)
    "ppca": ("PPCA(3).fit(wine)", "PCA(3).fit", "warm <= 0.3 s; empty <= 4 compiles"),
    "fa": ("FactorAnalysis(3).fit(wine)", "FactorAnalysis(3).fit", ""),
    "gmm": ("GaussianMixture(3).fit(wine)", "GaussianMixture(3).fit", ""),
    "plsa": ("PLSA(5).fit(digits)", "NMF(5, KL, mu).fit", ""),
    "imputer_auto": (
        "Imputer().fit_transform(wine 20% NaN)",
        "IterativeImputer()",
        "warm <= 3 s; empty <= 15 s",
    ),
    "imputer_ppca": (
        'Imputer("ppca").fit_transform(wine 20% NaN)',
        "IterativeImputer()",
        "warm <= 1 s",
    ),
    "compare": (
        "compare(PPCA, FA K=1..6, wine, cv=5)",
        "GridSearchCV(PCA(K), K=1..6, cv=5)",
        "empty <= 10 compiles",
    ),
    # the shape policy (latentlab._shapes): a K grid with missing entries shares few
    # programs, each within ~1.5x of its exact shape's work (bench_impute.py --padding)
    "grid_ppca_nan": (
        "PPCA(K).fit(wine 20% NaN), K=1..8",
        "PCA(K).fit(mean-imputed), K=1..8",
        "empty <= 4 compiles",
    ),
    "grid_fa_nan": (
        "FactorAnalysis(K).fit(wine 20% NaN), K=1..8",
        "FactorAnalysis(K).fit(mean-imputed), K=1..8",
        "empty <= 4 compiles",
    ),
}
WARM_MISSES_TARGET = "warm: 0 misses"
IMPORT_TARGET = 0.5  # seconds that import latentlab may add to import jax

# ----------------------------------------------------------------------------- children


def _data(name):
    import numpy as np
    from sklearn.datasets import load_digits, load_wine

    if name == "digits":
        return load_digits().data
    X = load_wine().data
    if name == "wine_nan":
        X = X.copy()
        X[np.random.default_rng(0).random(X.shape) < 0.2] = np.nan
    return X


def _latentlab_call(scenario):
    """The scenario's call, with its data loaded and the (lazily imported) classes
    it uses resolved beforehand."""
    from latentlab import (
        PLSA,
        PPCA,
        FactorAnalysis,
        GaussianMixture,
        Imputer,
        compare,
    )

    wine = _data("wine")
    if scenario == "ppca":
        return lambda: PPCA(3).fit(wine)
    if scenario == "fa":
        return lambda: FactorAnalysis(3).fit(wine)
    if scenario == "gmm":
        return lambda: GaussianMixture(3, random_state=0).fit(wine)
    if scenario == "plsa":
        digits = _data("digits")
        return lambda: PLSA(5, random_state=0).fit(digits)
    if scenario in ("imputer_auto", "imputer_ppca"):
        X = _data("wine_nan")
        model = "auto" if scenario == "imputer_auto" else "ppca"
        return lambda: Imputer(model, random_state=0).fit_transform(X)
    if scenario == "compare":
        models = [PPCA(k) for k in range(1, 7)] + [FactorAnalysis(k) for k in range(1, 7)]
        return lambda: compare(models, wine, cv=5, random_state=0)
    if scenario in ("grid_ppca_nan", "grid_fa_nan"):
        X = _data("wine_nan")
        model = PPCA if scenario == "grid_ppca_nan" else FactorAnalysis
        return lambda: [model(k).fit(X) for k in range(1, 9)]
    raise ValueError(f"unknown scenario {scenario!r}")


def _sklearn_call(scenario):
    from sklearn.decomposition import NMF, PCA, FactorAnalysis
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer
    from sklearn.mixture import GaussianMixture
    from sklearn.model_selection import GridSearchCV, KFold

    wine = _data("wine")
    if scenario == "ppca":
        return lambda: PCA(3).fit(wine)
    if scenario == "fa":
        return lambda: FactorAnalysis(3).fit(wine)
    if scenario == "gmm":
        return lambda: GaussianMixture(3, random_state=0).fit(wine)
    if scenario == "plsa":
        digits = _data("digits")
        nmf = NMF(5, beta_loss="kullback-leibler", solver="mu", random_state=0)
        return lambda: nmf.fit(digits)
    if scenario in ("imputer_auto", "imputer_ppca"):
        X = _data("wine_nan")
        return lambda: IterativeImputer(random_state=0).fit_transform(X)
    if scenario == "compare":
        # PCA.score is the mean log-likelihood of the probabilistic PCA model
        grid = {"n_components": list(range(1, 7))}
        cv = KFold(5, shuffle=True, random_state=0)
        return lambda: GridSearchCV(PCA(), grid, cv=cv).fit(wine)
    if scenario in ("grid_ppca_nan", "grid_fa_nan"):
        from sklearn.impute import SimpleImputer

        X = _data("wine_nan")
        model = PCA if scenario == "grid_ppca_nan" else FactorAnalysis
        return lambda: [model(k).fit(SimpleImputer().fit_transform(X)) for k in range(1, 9)]
    raise ValueError(f"unknown scenario {scenario!r}")


def _worker(side, scenario):
    """Run one scenario once in this (fresh) process; print its numbers as JSON."""
    import warnings

    warnings.simplefilter("ignore")
    events = {"compiles": 0, "requests": 0, "hits": 0, "writes": 0}
    if side == "latentlab":
        import jax

        names = {
            "/jax/compilation_cache/compile_requests_use_cache": "requests",
            "/jax/compilation_cache/cache_hits": "hits",
            "/jax/compilation_cache/cache_misses": "writes",
        }

        def on_event(event, **kwargs):
            if event in names:
                events[names[event]] += 1

        def on_duration(event, duration, **kwargs):
            if event == "/jax/core/compile/backend_compile_duration":
                events["compiles"] += 1

        jax.monitoring.register_event_listener(on_event)
        jax.monitoring.register_event_duration_secs_listener(on_duration)
        call = _latentlab_call(scenario)
    else:
        call = _sklearn_call(scenario)
    before = dict(events)  # imports and data loading are not the scenario's
    start = time.perf_counter()
    call()
    seconds = time.perf_counter() - start
    counts = {k: events[k] - before[k] for k in events}
    print("RESULT " + json.dumps({"seconds": seconds, **counts}), flush=True)


def _import_worker():
    start = time.perf_counter()
    import jax  # noqa: F401

    middle = time.perf_counter()
    import latentlab

    end = time.perf_counter()
    for name in ("PPCA", "FactorAnalysis", "GaussianMixture", "PLSA", "Imputer"):
        getattr(latentlab, name)  # the lazy imports a first fit triggers
    lazy = time.perf_counter() - end
    times = {"jax": middle - start, "latentlab": end - middle, "lazy": lazy}
    print("RESULT " + json.dumps(times))


# ----------------------------------------------------------------------------- parent


def _child_env(cache_dir, force_jax_env):
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["LATENTLAB_CACHE_DIR"] = cache_dir
    if force_jax_env:
        env["JAX_COMPILATION_CACHE_DIR"] = cache_dir
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    return env


def _run_child(args, env, timeout):
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [s for s in done.stdout.splitlines() if s.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        sys.exit(f"child {args} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def _median(runs, key):
    return statistics.median(r[key] for r in runs)


def _summary(runs):
    return {
        "seconds": _median(runs, "seconds"),
        "programs": _median(runs, "compiles"),
        "misses": _median(runs, "requests") - _median(runs, "hits"),
        "hits": _median(runs, "hits"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--force-jax-env", action="store_true")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per child")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--import-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(*args.worker)
    if args.import_worker:
        return _import_worker()

    scenarios = args.scenarios or list(SCENARIOS)
    started = time.perf_counter()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    print(f"cache: LATENTLAB_CACHE_DIR per scenario, force JAX env: {args.force_jax_env}")

    with tempfile.TemporaryDirectory() as scratch:
        env = _child_env(os.path.join(scratch, "import"), args.force_jax_env)
        imports = [_run_child(["--import-worker"], env, args.timeout) for _ in range(3)]
        jax_s, extra_s = _median(imports, "jax"), _median(imports, "latentlab")
        lazy_s = _median(imports, "lazy")
        rows = []
        for name in scenarios:
            cold, warm, sk = [], [], []
            for repeat in range(args.repeats):
                cache = os.path.join(scratch, f"{name}-{repeat}")  # empty, then warm
                env = _child_env(cache, args.force_jax_env)
                cold.append(_run_child(["--worker", "latentlab", name], env, args.timeout))
                warm.append(_run_child(["--worker", "latentlab", name], env, args.timeout))
                sk.append(_run_child(["--worker", "sklearn", name], env, args.timeout))
            rows.append((name, _summary(cold), _summary(warm), _median(sk, "seconds")))
            print(f"  {name}: done", file=sys.stderr, flush=True)

    print()
    print(
        f"import latentlab adds {extra_s:.2f} s to import jax ({jax_s:.2f} s), "
        f"median of 3 fresh processes; target <= {IMPORT_TARGET} s"
    )
    print(f"first use of the estimators (lazy imports, scikit-learn) adds {lazy_s:.2f} s")
    print()
    header = (
        f"{'scenario':<13}{'empty cache':>26}{'warm cache':>26}{'sklearn':>9}  target\n"
        f"{'':<13}{'s':>8}{'prog':>6}{'miss':>6}{'hit':>6}"
        f"{'s':>8}{'prog':>6}{'miss':>6}{'hit':>6}{'s':>9}"
    )
    print(header)
    for name, c, w, sk_s in rows:
        target = SCENARIOS[name][2]
        print(
            f"{name:<13}"
            f"{c['seconds']:>8.2f}{c['programs']:>6.0f}{c['misses']:>6.0f}{c['hits']:>6.0f}"
            f"{w['seconds']:>8.2f}{w['programs']:>6.0f}{w['misses']:>6.0f}{w['hits']:>6.0f}"
            f"{sk_s:>9.3f}  {target}"
        )
    print(
        f"(all scenarios: {WARM_MISSES_TARGET}; prog = programs compiled or loaded from "
        "the cache, so compiled = prog - hit; compile targets count prog with an empty cache)"
    )
    print()
    for name in scenarios:
        ours, theirs, _ = SCENARIOS[name]
        print(f"  {name:<13} {ours}  vs  scikit-learn {theirs}")
    print(f"\nbenchmark wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
