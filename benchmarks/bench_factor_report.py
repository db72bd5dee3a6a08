"""The factor-analysis report: latentlab against factor_analyzer, side by side in one
process.

- EFA with an oblimin rotation on planted data (10,000 x 30, 5 correlated factors):
  ``latentlab.FactorAnalysis(5, rotation="oblimin")`` against
  ``factor_analyzer.FactorAnalyzer(5, rotation="oblimin", method="ml")``, each fit
  from the rows; the pattern loadings compared up to column order and sign, and the
  maximised log-likelihood of each side's (standardised) model.
- The rotation alone (``latentlab.rotate`` against ``factor_analyzer.Rotator``) on
  the same unrotated loadings.
- KMO and Bartlett's test (``latentlab.psychometrics`` against factor_analyzer's).
- Confirmatory models against semopy: Holzinger & Swineford's three-factor model
  (301 x 9) and a 5-factor simple structure with 30 indicators on the planted rows;
  the maximised log-likelihoods compared (latentlab's exact likelihood of each
  side's estimates).

factor_analyzer 0.5.1 calls scikit-learn's ``check_array(force_all_finite=...)``,
which scikit-learn 1.8 removed; this script forwards that argument under its new name
(``ensure_all_finite``) so the reference runs at all.

The two sides are interleaved, timings are medians of warm runs, latentlab's first
(compiling) call is reported separately; ratios < 1 mean latentlab is faster.

Run:  python benchmarks/bench_factor_report.py [--quick] [--threads 1]
"""

from __future__ import annotations

import argparse
import warnings

from _threads import apply_thread_option
from _timing import bench, print_environment


def planted(n, d, K, seed=0):
    """Simple structure: each feature loads 0.5-0.8 on one factor; factor
    correlations 0.3; unit variances."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pattern = np.zeros((d, K))
    pattern[np.arange(d), np.arange(d) % K] = rng.uniform(0.5, 0.8, size=d)
    phi = np.full((K, K), 0.3) + 0.7 * np.eye(K)
    F = rng.multivariate_normal(np.zeros(K), phi, size=n)
    psi = 1.0 - np.einsum("ij,jk,ik->i", pattern, phi, pattern)
    return F @ pattern.T + rng.normal(size=(n, d)) * np.sqrt(psi)


def _shim_factor_analyzer():
    import factor_analyzer.factor_analyzer as fa_module
    from sklearn.utils import check_array

    def check_array_renamed(*args, force_all_finite=True, **kwargs):
        return check_array(*args, ensure_all_finite=force_all_finite, **kwargs)

    fa_module.check_array = check_array_renamed


def matched_difference(ours, theirs):
    """Largest |difference| of two loadings matrices after matching columns (order,
    sign) greedily by absolute correlation."""
    import numpy as np

    corr = np.corrcoef(ours.T, theirs.T)[: ours.shape[1], ours.shape[1] :]
    order = np.abs(corr).argmax(axis=1)
    signs = np.sign(corr[np.arange(len(order)), order])
    return float(np.abs(ours - theirs[:, order] * signs).max())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n-samples", type=int, default=10_000)
    parser.add_argument("--n-features", type=int, default=30)
    parser.add_argument("--n-factors", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="1: one thread each side")
    parser.add_argument("--quick", action="store_true", help="2,000 x 12, 3 factors")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_samples, args.n_features, args.n_factors, args.repeats = 2000, 12, 3, 2
    apply_thread_option(args.threads)

    import numpy as np
    from factor_analyzer import FactorAnalyzer, calculate_bartlett_sphericity, calculate_kmo
    from factor_analyzer.rotator import Rotator

    import latentlab
    from latentlab.psychometrics import bartlett_sphericity, kmo

    _shim_factor_analyzer()
    print_environment(args.threads)
    K = args.n_factors
    X = planted(args.n_samples, args.n_features, K)
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    print(f"data: {X.shape[0]} x {X.shape[1]}, {K} factors (planted oblique structure)")
    warnings.simplefilter("ignore")

    def ours_fit():
        return latentlab.FactorAnalysis(K, rotation="oblimin", random_state=0).fit(Xs)

    def theirs_fit():
        return FactorAnalyzer(n_factors=K, rotation="oblimin", method="ml").fit(Xs)

    def compare_fits(ours, theirs):
        difference = matched_difference(ours.components_.T, theirs.loadings_)
        # each side's model scored by latentlab's exact likelihood of the rows
        probe = latentlab.FactorAnalysis(K).fit(Xs)
        probe.params_ = {
            "W": theirs.loadings_ @ np.linalg.cholesky(theirs.phi_),
            "mu": np.zeros(Xs.shape[1]),
            "psi": theirs.get_uniquenesses(),
        }
        gap = ours.score(Xs) - probe.score(Xs)
        return f"max |loading diff| {difference:.1e}, loglik ours - theirs {gap:+.2e}/row"

    bench("EFA, oblimin (fit from rows)", ours_fit, theirs_fit, args.repeats, compare_fits)

    A = latentlab.FactorAnalysis(K, random_state=0).fit(Xs).components_.T

    def compare_rotations(ours, theirs):
        return f"max |loading diff| {matched_difference(ours.loadings, theirs):.1e}"

    bench(
        "oblimin rotation alone",
        lambda: latentlab.rotate(A, "oblimin"),
        lambda: Rotator(method="oblimin").fit_transform(A),
        args.repeats,
        compare_rotations,
    )
    import pandas as pd
    import semopy

    def cfa_race(label, data, pattern):
        description = "\n".join(f"{f} =~ " + " + ".join(items) for f, items in pattern.items())

        def theirs():
            model = semopy.Model(description)
            model.fit(data)
            return model

        def compare_cfa(ours, model):
            estimates = model.inspect()
            loadings = estimates[estimates.op == "~"]  # semopy lists x ~ factor
            theirs_loadings = np.zeros_like(ours.loadings_)
            rows = {name: j for j, name in enumerate(data.columns)}
            columns = {name: k for k, name in enumerate(pattern)}
            for _, row in loadings.iterrows():
                if row["rval"] in columns and row["lval"] in rows:
                    theirs_loadings[rows[row["lval"]], columns[row["rval"]]] = row["Estimate"]
            return f"max |loading diff| {np.abs(ours.loadings_ - theirs_loadings).max():.1e}"

        bench(
            label,
            lambda: latentlab.ConfirmatoryFactorAnalysis(pattern).fit(data),
            theirs,
            args.repeats,
            compare_cfa,
        )

    hs = pd.read_csv("../examples/data/holzinger_swineford_1939.csv").loc[:, "x1":"x9"]
    abilities = {
        "visual": ["x1", "x2", "x3"],
        "textual": ["x4", "x5", "x6"],
        "speed": ["x7", "x8", "x9"],
    }
    cfa_race("CFA, Holzinger-Swineford", hs, abilities)
    names = [f"v{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    planted_pattern = {f"F{k}": names[k::K] for k in range(K)}
    cfa_race(f"CFA, {X.shape[1]} indicators, {K} factors", frame, planted_pattern)
    bench(
        "KMO",
        lambda: kmo(Xs),
        lambda: calculate_kmo(Xs),
        args.repeats,
        lambda ours, theirs: f"overall diff {abs(ours.overall - theirs[1]):.1e}",
    )
    bench(
        "Bartlett's sphericity",
        lambda: bartlett_sphericity(Xs),
        lambda: calculate_bartlett_sphericity(Xs),
        args.repeats,
        lambda ours, theirs: f"statistic rel diff {abs(ours.statistic / theirs[0] - 1):.1e}",
    )


if __name__ == "__main__":
    main()
