"""Latent-dimension padding: one compiled EM program serves every K of a bucket.

A loadings column held at exactly zero is a fixed point of the Gaussian-latent EM
updates, so a fit with W padded by zero columns must be the K-column fit itself:
same parameters, same log-likelihood, same trace.  The unpadded fit is obtained by
turning padding off (``latentlab.config_context(padding=False)``).
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from oracles import planted_low_rank

import latentlab
from latentlab import _shapes
from latentlab._shapes import em_rows
from latentlab._shapes import gaussian_latent_columns as padded_columns


def _data(missing: bool, n=120, fraction=0.15, seed=0):
    X, _, _ = planted_low_rank(n=n, d=9, rank=3, noise=0.4, seed=seed)
    if missing:
        X = X.copy()
        X[np.random.default_rng(seed).random(X.shape) < fraction] = np.nan
    return X


def _fit(estimator, X, y, padded: bool):
    with latentlab.config_context(padding=padded):
        return estimator.fit(X) if y is None else estimator.fit(X, y)


def _fitted_arrays(est):
    return {name: np.asarray(value) for name, value in est.params_.items()}


CASES = {
    # tight tolerances (still above the objective's round-off): compare the optima,
    # not two stopping points on a flat ridge
    "PPCA": lambda: latentlab.PPCA(3, tol=1e-10, random_state=0),
    "FactorAnalysis": lambda: latentlab.FactorAnalysis(3, tol=1e-10, random_state=0),
    "BayesianPCA": lambda: latentlab.BayesianPCA(5, tol=1e-10, random_state=0),
    # With missing entries Bayesian PCA's EM often crawls for hundreds of cycles along
    # a flat ridge of W, and a crawl amplifies round-off: two programs that sum in a
    # different order part visibly.  Not padding's doing: the unpadded fit of the
    # 120-row data below with its columns permuted (an exactly equivalent problem)
    # parts from the unpadded fit by 7e-7 in the trace.  So this case uses data on
    # which EM converges in ~50 cycles, where the fixed point can be checked tightly.
    "BayesianPCA-missing": lambda: latentlab.BayesianPCA(3, tol=1e-10, random_state=0),
    "SupervisedPCA": lambda: latentlab.SupervisedPCA(3, alpha=0.5, tol=1e-10, random_state=0),
}


@pytest.mark.parametrize("missing", [False, True], ids=["complete", "missing"])
@pytest.mark.parametrize("name", ["PPCA", "FactorAnalysis", "BayesianPCA", "SupervisedPCA"])
def test_zero_padded_columns_give_the_unpadded_fit(name, missing):
    if name == "BayesianPCA" and missing:
        name = "BayesianPCA-missing"
    X = (
        _data(missing)
        if name != "BayesianPCA-missing"
        else _data(True, n=300, fraction=0.1, seed=1)
    )
    y = None
    if name == "SupervisedPCA":
        y = np.nan_to_num(X[:, 0]) + 0.1 * np.random.default_rng(1).standard_normal(len(X))
        X = X[:, 1:]
    K = CASES[name]().n_components
    incomplete = em_rows(np.isnan(X).any(axis=1).sum()) if missing else 0
    assert padded_columns(K, X.shape[1], incomplete) > K  # the default fit really is padded
    padded = _fit(CASES[name](), X, y, padded=True)
    unpadded = _fit(CASES[name](), X, y, padded=False)
    # The two programs differ only in the shapes XLA multiplies, so their sums round
    # differently (~1e-16): a stopping test that compares two consecutive objectives
    # may then fire one cycle apart, so the traces are compared where both exist.
    assert abs(padded.n_iter_ - unpadded.n_iter_) <= 1
    steps = min(padded.n_iter_, unpadded.n_iter_)
    np.testing.assert_allclose(
        padded.log_likelihoods_[:steps], unpadded.log_likelihoods_[:steps], rtol=1e-10, atol=0
    )
    p, u = _fitted_arrays(padded), _fitted_arrays(unpadded)
    assert p.keys() == u.keys()
    for key in p:
        assert p[key].shape == u[key].shape, key
        np.testing.assert_allclose(p[key], u[key], rtol=1e-7, atol=1e-9, err_msg=key)
    scores = (
        (padded.score(X) if y is None else padded.score(X, y)),
        (unpadded.score(X) if y is None else unpadded.score(X, y)),
    )
    assert scores[0] == pytest.approx(scores[1], rel=1e-10, abs=0)


def test_bucket_rule():
    # small complete data: one shared bucket of 16 columns for every K up to 16 (an
    # iteration's work there is a fixed overhead, whatever K)
    assert {padded_columns(K, 10) for K in range(1, 17)} == {16}
    # beyond it the M-step's K^3 algebra outweighs the overhead: 17 -> 24 would cost 2x
    assert padded_columns(17, 10) == 17
    # rows with missing entries: the buckets of a K grid 1..8 on wine's shape with 20%
    # of the entries missing (168 incomplete rows, padded to 192) are four
    grid = [padded_columns(K, 13, em_rows(168)) for K in range(1, 9)]
    assert grid == [2, 4, 4, 4, 6, 6, 8, 8]
    # large problems are fitted with exactly K columns: padding would cost more than
    # a compile saves
    assert padded_columns(5, 5000) == 5
    assert padded_columns(3, 200, n_missing_rows=10**6) == 3
    with latentlab.config_context(padding=False):
        assert padded_columns(3, 10) == 3


@pytest.mark.parametrize("n_features", [5, 13, 30, 100])
@pytest.mark.parametrize("n_missing_rows", [0, 40, 192, 640, 5000])
def test_padding_costs_at_most_half_again_the_unpadded_work(n_features, n_missing_rows):
    # the policy's bound, checked on its own cost model for every K up to 64: an EM
    # iteration at most 1.5x (or negligibly more), a one-pass map at most 2x
    bounds = {
        False: (1.5, _shapes.NEGLIGIBLE_EXTRA_WORK),
        True: (2.0, _shapes.ONE_PASS_NEGLIGIBLE_WORK),
    }
    for one_pass, (ratio, negligible) in bounds.items():
        for K in range(1, 65):
            padded = padded_columns(K, n_features, n_missing_rows, one_pass=one_pass)
            assert padded >= K
            exact = _shapes.gaussian_latent_work(K, n_features, n_missing_rows)
            work = _shapes.gaussian_latent_work(padded, n_features, n_missing_rows)
            assert work <= ratio * exact or work - exact <= negligible, (K, one_pass)


@pytest.mark.parametrize("n_missing_rows", [0, 192, 448, 5000])
def test_a_search_keeps_its_whole_grid_within_half_again_the_unpadded_work(n_missing_rows):
    grid = range(1, 13)
    with _shapes.search_grid(grid):
        columns = [padded_columns(K, 13, n_missing_rows) for K in grid]
    exact = sum(_shapes.gaussian_latent_work(K, 13, n_missing_rows) for K in grid)
    padded = sum(_shapes.gaussian_latent_work(c, 13, n_missing_rows) for c in columns)
    assert all(c >= K for K, c in zip(grid, columns, strict=True))
    assert columns == sorted(columns)  # contiguous groups, each at its largest K
    assert padded <= 1.5 * exact
    cap = _shapes.GAUSSIAN_LATENT_MAX_WORK
    if n_missing_rows <= 448:
        assert len(set(columns)) <= 3  # K = 1..12: three programs (five fit by fit)
    else:  # fits whose own work is over the size cap run at their exact K
        large = [K for K in grid if _shapes.gaussian_latent_work(K, 13, n_missing_rows) > cap]
        assert large and all(columns[K - 1] == K for K in large)
    # a problem large enough for a compile to be cheap is not padded inside a search
    with _shapes.search_grid(grid):
        assert padded_columns(3, 200, 10**6) == 3
    # outside the search, each fit is bounded on its own again
    one = _shapes.gaussian_latent_work(1, 13, n_missing_rows)
    alone = _shapes.gaussian_latent_work(padded_columns(1, 13, n_missing_rows), 13, n_missing_rows)
    assert alone <= 1.5 * one or alone - one <= _shapes.NEGLIGIBLE_EXTRA_WORK


def test_row_buckets_pad_by_at_most_a_quarter():
    rows = range(33, 5000)
    sizes = [_shapes.em_rows(n) for n in rows]
    assert all(n <= size <= 1.25 * n for n, size in zip(rows, sizes, strict=True))
    assert len(set(sizes)) == 4 * 7 + 1  # four sizes per doubling from 32 to 4096, then 5120
    assert _shapes.em_rows(5) == 32


def test_a_shape_whose_exact_program_exists_is_not_padded():
    key = ("test_padding", object())  # a program shape no fit has used
    assert padded_columns(3, 10, key=key) == 16
    with latentlab.config_context(padding=False):
        assert padded_columns(5, 10, key=key) == 5
    assert padded_columns(5, 10, key=key) == 5  # its exact program ran: no padding
    assert padded_columns(6, 10, key=key) == 16


def test_padding_setting_is_checked():
    with pytest.raises(ValueError, match="padding"):
        latentlab.set_config(padding="no")
    with pytest.raises(ValueError, match="unknown latentlab setting"):
        latentlab.set_config(paddding=False)
    assert latentlab.get_config()["padding"] is True


# -- compile counts ---------------------------------------------------------------------
#
# Counted in a fresh interpreter with every persistent cache off: the number of XLA
# backend compiles is deterministic (it depends on shapes, not on timing).

_COUNTER = textwrap.dedent(
    """
    import collections, json, sys
    from jax import monitoring
    counts = collections.Counter()
    monitoring.register_event_duration_secs_listener(lambda name, d, **k: counts.update([name]))
    import numpy as np
    import latentlab
    from sklearn.datasets import load_wine
    X = load_wine().data
    out = {}
    def compiles():
        n = counts["/jax/core/compile/backend_compile_duration"]
        counts.clear()
        return n
    latentlab.PPCA(3).fit(X)
    out["ppca_fit"] = compiles()
    for K in range(1, 9):
        latentlab.PPCA(K).fit(X).score(X)
    out["ppca_rank_search"] = compiles()
    Xm = X.copy()
    Xm[np.random.default_rng(0).random(X.shape) < 0.2] = np.nan
    # max_iter bounds the run, not the count: on wine with NaN, FA at K >= 3 takes
    # 2,000-3,600 cycles to reach tol (40 s of this test); max_iter is one setting for
    # every K, so the programs compiled are the same as with the default
    import warnings
    warnings.simplefilter("ignore")
    for K in range(1, 9):
        latentlab.FactorAnalysis(K, max_iter=100).fit(Xm).score(Xm)
    out["fa_rank_search_missing"] = compiles()
    print(json.dumps(out))
    """
)


def test_compile_counts_of_a_fit_and_of_a_rank_search():
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env["LATENTLAB_CACHE_DIR"] = ""
    result = subprocess.run(
        [sys.executable, "-c", _COUNTER], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout.strip().splitlines()[-1])
    assert counts["ppca_fit"] <= 4, counts  # the compile budget; 13-22 before
    # one EM program per bucket (K <= 4, 5..8) and one scoring program per bucket;
    # the first fit above already compiled the K <= 4 pair
    assert counts["ppca_rank_search"] <= 4, counts
    # with missing entries, beside those: the quasi-Newton phase's program, once per
    # bucket where a fit needs it (a program of its own since the fits EM settles
    # skip it; 6 before the phase)
    assert counts["fa_rank_search_missing"] <= 8, counts


# -- iteration limits --------------------------------------------------------------------


def test_trace_capacity_rule():
    assert [_shapes.trace_capacity(m) for m in (0, 1, 5, 8, 9, 100, 500)] == [
        0, 8, 8, 8, 16, 128, 512,
    ]  # fmt: skip


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_fits_that_differ_only_in_max_iter_share_a_program(covariance_type):
    """max_iter is an input of EM's program: after the first fit, limits within its
    power of two compile nothing, and a limited fit is the unlimited one cut short
    (same start, same iterates: its trace is a prefix of the longer one's)."""
    from jax import monitoring

    X = np.random.default_rng(3).random((83, 3))  # no clusters: EM creeps
    compiles = []

    def count(name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            compiles.append(name)

    def fit(max_iter):
        return latentlab.GaussianMixture(
            3,
            covariance_type=covariance_type,
            max_iter=max_iter,
            tol=1e-12,
            accelerate=False,  # single EM steps: many before tol
            random_state=0,
        ).fit(X)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the limited fits do not converge
        longest = fit(16)
        monitoring.register_event_duration_secs_listener(count)
        try:
            limited = {m: fit(m) for m in (9, 12, 15)}
        finally:
            monitoring.unregister_event_duration_listener(count)
    assert compiles == []
    assert longest.n_iter_ > 9, longest.n_iter_  # the limits bind
    for m, est in limited.items():
        assert est.n_iter_ == min(m, longest.n_iter_)
        np.testing.assert_array_equal(est.log_likelihoods_, longest.log_likelihoods_[: est.n_iter_])
