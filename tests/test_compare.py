"""latentlab.compare: model choice by held-out likelihood, and its numbers by hand."""

import warnings

import numpy as np
import pandas as pd
import pytest
from oracles import planted_factor_model
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import KFold

import latentlab
from latentlab import PPCA, FactorAnalysis, SupervisedPCA, compare

# One data shape (500 x 25, planted rank 5) and one K range for every sweep: each
# (model, K) compiles once and every later fit reuses it.
KS = range(4, 8)
RANK = 5


def sweep(X):
    models = {f"PPCA-{K}": PPCA(K, random_state=0) for K in KS}
    models |= {f"FA-{K}": FactorAnalysis(K, random_state=0) for K in KS}
    return compare(models, X, cv=5, random_state=0)


def by_k(table, family, column):
    return table[table["family"] == family].set_index("K")[column].sort_index()


@pytest.fixture(scope="module")
def data():
    X, _, _ = planted_factor_model(n=500, heteroscedastic=False, seed=0)
    return X


@pytest.fixture(scope="module")
def homoscedastic(data):
    return data, sweep(data)


@pytest.fixture(scope="module")
def heteroscedastic():
    X, _, _ = planted_factor_model(n=500, heteroscedastic=True, seed=0)
    return X, sweep(X)


# Checked over seeds 0..29 of planted_factor_model (n=500, K = 4..7): every assertion
# of the two tests below held for every seed.  The held-out margin of K=5 over K=4 and
# K=6 was 0.006 to 0.07 nats per row (standard errors ~0.2 are larger, but they mostly
# measure the spread of the folds, which all models share); under heteroscedastic noise
# PPCA always peaked at K=7.  With psi uniform on [0.1, 3] instead of log-uniform on
# [0.05, 5], PPCA peaked at K=5 within 4..7 for one seed in 30 (at K > 8 beyond it).


def test_heldout_loglik_and_bic_recover_planted_rank(homoscedastic):
    _, table = homoscedastic
    for family in ("PPCA", "FactorAnalysis"):
        assert by_k(table, family, "heldout_loglik").idxmax() == RANK
        assert by_k(table, family, "BIC").idxmin() == RANK
    assert table["K"].iloc[0] == RANK  # the best row: sorted, best first
    assert table["best"].tolist() == [True] + [False] * (len(table) - 1)
    assert table.attrs["best"] == table.index[0]
    assert table.attrs["criterion"] == "heldout_loglik"
    assert table["heldout_loglik"].is_monotonic_decreasing
    assert table["error"].isna().all()


def test_factor_analysis_finds_rank_where_ppca_overshoots_under_heteroscedastic_noise(
    heteroscedastic,
):
    _, table = heteroscedastic
    fa = by_k(table, "FactorAnalysis", "heldout_loglik")
    ppca = by_k(table, "PPCA", "heldout_loglik")
    assert fa.idxmax() == RANK
    # PPCA spends extra components on the noisiest features
    assert ppca.idxmax() > RANK
    assert fa.max() > ppca.max()  # the true model predicts best
    assert table.index[0] == "FA-5"


def test_numbers_equal_hand_computation(homoscedastic):
    X, table = homoscedastic
    n, d = X.shape
    folds = list(KFold(5, shuffle=True, random_state=0).split(X))
    expected_params = {
        "PPCA-5": d * 5 + d + 1 - 5 * 4 // 2,  # dK + d + 1 - K(K-1)/2 = 141
        "FA-4": d * 4 + 2 * d - 4 * 3 // 2,  # dK + 2d - K(K-1)/2 = 144
    }
    for name, est in (("PPCA-5", PPCA(5, random_state=0)), ("FA-4", FactorAnalysis(4))):
        est.set_params(random_state=0)
        row = table.loc[name]
        per_fold = [clone(est).fit(X[train]).score(X[test]) for train, test in folds]
        total = sum(clone(est).fit(X[train]).score_samples(X[test]).sum() for train, test in folds)
        assert row["heldout_loglik"] == pytest.approx(np.mean(per_fold), rel=1e-12)
        assert row["heldout_se"] == pytest.approx(np.std(per_fold, ddof=1) / np.sqrt(5), rel=1e-9)
        assert row["heldout_total"] == pytest.approx(total, rel=1e-12)
        full = clone(est).fit(X)
        assert row["loglik"] == pytest.approx(n * full.score(X), rel=1e-12)
        assert row["AIC"] == pytest.approx(full.aic(X), rel=1e-12)
        assert row["BIC"] == pytest.approx(full.bic(X), rel=1e-12)
        assert row["n_params"] == expected_params[name] == full._n_parameters()
        assert row["AIC"] == pytest.approx(-2 * row["loglik"] + 2 * row["n_params"], rel=1e-12)


def test_failed_model_gets_nan_and_message_and_the_rest_survive(data):
    X = data
    models = [PPCA(4, random_state=0), PPCA(4, random_state=0), PPCA(30)]
    with pytest.warns(UserWarning, match=r"PPCA\(K=30\).*out of range"):
        table = compare(models, X, cv=5, random_state=0)
    assert set(table.index) == {"PPCA(K=4)", "PPCA(K=4) #2", "PPCA(K=30)"}
    failed = table.loc["PPCA(K=30)"]
    assert "n_components=30 is out of range" in failed["error"]
    assert np.isnan(failed[["loglik", "AIC", "BIC", "heldout_loglik"]].astype(float)).all()
    assert table.index[-1] == "PPCA(K=30)" and not failed["best"]
    ok = table.loc[["PPCA(K=4)", "PPCA(K=4) #2"]]
    assert ok["error"].isna().all() and np.isfinite(ok["heldout_loglik"]).all()
    # identical settings on identical folds give identical rows
    assert ok["heldout_loglik"].iloc[0] == ok["heldout_loglik"].iloc[1]


def test_fold_failure_keeps_the_full_fit_columns(data):
    X = data
    # 6 rows: the full fit allows K <= 5, a 3-fold training set (4 rows) only K <= 3
    with pytest.warns(UserWarning, match="fold 0"):
        table = compare({"K4": PPCA(4, random_state=0)}, X[:6], cv=3)
    row = table.loc["K4"]
    assert np.isfinite(row["loglik"]) and np.isfinite(row["BIC"])
    assert np.isnan(row["heldout_loglik"]) and not row["best"]
    assert row["error"].startswith("fold 0:")


class NoPosterior(BaseEstimator):
    """A generative model without posterior draws (only what compare needs)."""

    def fit(self, X, y=None):
        self.mean_ = X.mean(axis=0)
        return self

    def score_samples(self, X):
        return -0.5 * np.sum((X - self.mean_) ** 2, axis=1)

    def _n_parameters(self):
        return len(self.mean_)


def test_bad_arguments_raise_clear_errors(data):
    X = data
    one = {"a": PPCA(4)}
    with pytest.raises(ValueError, match="models is empty"):
        compare({}, X)
    with pytest.raises(ValueError, match="models is empty"):
        compare([], X)
    with pytest.raises(ValueError, match="cv must be >= 2"):
        compare(one, X, cv=1)
    with pytest.raises(ValueError, match="cv must be an integer"):
        compare(one, X, cv="five")
    with pytest.raises(ValueError, match="need at least 7 rows"):
        compare(one, X[:6], cv=7)
    with pytest.raises(ValueError, match="must be 2-D"):
        compare(one, X[:, 0])
    with pytest.raises(ValueError, match="infinity"):
        compare(one, np.where(np.eye(*X.shape) > 0, np.inf, X))
    with pytest.raises(ValueError, match="y must have one entry"):
        compare(one, X, y=np.zeros(3))
    with pytest.raises(ValueError, match="is the class PPCA"):
        compare({"a": PPCA}, X)
    with pytest.raises(ValueError, match="KernelPCA.*has no likelihood"):
        compare([latentlab.KernelPCA(2)], X)
    with pytest.raises(ValueError, match="Unknown loo='exact'"):
        compare(one, X, loo="exact")
    with pytest.raises(ValueError, match=r"\['plain'\] have no sample_posterior"):
        compare({"plain": NoPosterior()}, X, loo="laplace")
    with pytest.raises(ValueError, match="need targets: pass y"):
        compare([SupervisedPCA(2)], X)


def test_supervised_pca_is_scored_on_x_and_y(data):
    X = data[:200]
    rng = np.random.default_rng(1)
    y = X @ rng.normal(size=X.shape[1]) / 10 + rng.normal(size=len(X))
    est = SupervisedPCA(RANK, random_state=0)
    with pytest.warns(UserWarning, match="not comparable"):
        table = compare({"spca": est, "ppca": PPCA(RANK, random_state=0)}, X, y, cv=3)
    folds = KFold(3, shuffle=True, random_state=0).split(X)
    hand = [clone(est).fit(X[tr], y[tr]).score_samples(X[te], y[te]).mean() for tr, te in folds]
    assert table.loc["spca", "heldout_loglik"] == pytest.approx(np.mean(hand), rel=1e-12)
    full = clone(est).fit(X, y)
    assert table.loc["spca", "BIC"] == pytest.approx(full.bic(X, y), rel=1e-12)
    # log p(x, y) < log p(x) row by row: y's density is below 1 here
    assert table.loc["spca", "loglik"] < table.loc["ppca", "loglik"]


class GaussianMean(NoPosterior):
    """x ~ N(mu, 1) with a flat prior on mu: posterior N(mean(x), 1/n), drawn exactly."""

    def sample_posterior(self, X, *, method, random_state=None, num_samples=4000):
        import arviz as az

        rng = np.random.default_rng(random_state)
        x = X[:, 0]
        mu = x.mean() + rng.normal(size=(2, num_samples // 2, 1)) / np.sqrt(len(x))
        log_lik = -0.5 * (x - mu) ** 2 - 0.5 * np.log(2 * np.pi)
        return az.from_dict({"posterior": {"mu": mu[..., 0]}, "log_likelihood": {"x": log_lik}})


def test_elpd_loo_matches_exact_leave_one_out_of_a_conjugate_model():
    from scipy.stats import norm

    x = np.random.default_rng(0).normal(size=(200, 1))
    n = len(x)
    table = compare({"gauss": GaussianMean()}, x, cv=5, loo="nuts")
    # exact LOO predictive: x_i | x_-i ~ N(mean(x_-i), 1 + 1/(n-1))
    loo_mean = (x.sum() - x[:, 0]) / (n - 1)
    exact = norm.logpdf(x[:, 0], loo_mean, np.sqrt(1 + 1 / (n - 1))).sum()
    row = table.loc["gauss"]
    assert row["elpd_loo"] == pytest.approx(exact, abs=0.05)  # PSIS error, 4000 draws
    assert row["elpd_loo_se"] == pytest.approx(
        np.sqrt(n) * np.std(norm.logpdf(x[:, 0], loo_mean, np.sqrt(1 + 1 / (n - 1)))), rel=0.01
    )
    assert row["p_loo"] == pytest.approx(1.0, abs=0.1)  # one parameter
    assert row["n_high_pareto_k"] == 0
    assert table.attrs["loo"] == "nuts"


def test_elpd_loo_of_ppca_agrees_with_kfold():
    X, _, _ = planted_factor_model(n=120, d=6, rank=2, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        table = compare(
            [PPCA(2, random_state=0)], X, loo="laplace", loo_kwargs={"num_samples": 400}
        )
    row = table.loc["PPCA(K=2)"]
    assert row["error"] is None
    # leave-one-out and 5-fold estimate the same predictive density; they differ by
    # O(parameters) nats (here 7), far less than the standard error (20)
    assert abs(row["elpd_loo"] - row["heldout_total"]) < row["elpd_loo_se"]
    assert row["p_loo"] == pytest.approx(row["n_params"], rel=0.25)  # 18 parameters
    assert 0 <= row["n_high_pareto_k"] <= len(X)


def test_high_pareto_k_rows_are_warned_about_and_listed():
    """A gross outlier (row 0) makes PSIS-LOO unreliable there: the table counts the
    rows, a warning names the model and the rows, ``attrs`` lists them.  (On wine, 178
    of 178 rows were high without a word, and a ranking by elpd_loo picked another
    model.)  Same data shape as the test above: its programs are reused."""
    X, _, _ = planted_factor_model(n=120, d=6, rank=2, seed=3)
    X[0] = 25.0 * np.sign(X[0])
    with pytest.warns(UserWarning, match=r"PSIS-LOO is unreliable.*'PPCA\(K=2\)': \d+ of 120 rows"):
        table = compare(
            [PPCA(2, random_state=0)], X, loo="laplace", loo_kwargs={"num_samples": 400}
        )
    rows = table.attrs["high_pareto_k_rows"]["PPCA(K=2)"]
    assert 0 in rows and len(rows) == table.loc["PPCA(K=2)", "n_high_pareto_k"]
    assert "_high_pareto_k_rows" not in table  # the helper column is not shown


def test_warnings_of_the_fits_are_gathered_per_model():
    """A Heywood case (a column repeated) warned once per fit -- five folds and the
    full fit -- without naming the model; now the table's ``warnings`` column says
    which fits raised it, and one warning sums the table up."""
    X, _, _ = planted_factor_model(n=120, d=6, rank=2, seed=3)
    X = np.c_[X, X[:, 0]]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        table = compare(
            {"fa": FactorAnalysis(2, random_state=0), "ppca": PPCA(2, random_state=0)}, X, cv=5
        )
    messages = [str(w.message) for w in record]
    assert not any(m.startswith("Heywood") for m in messages)
    (summary,) = [m for m in messages if "raised warnings" in m]
    assert "'fa': Heywood case" in summary and "'ppca'" not in summary
    text = table.loc["fa", "warnings"]
    assert text.startswith("Heywood case") and text.count("Heywood case") == 1
    assert text.endswith("[full fit; folds 0, 1, 2, 3, 4]")
    assert pd.isna(table.loc["ppca", "warnings"])


def test_plsa_heldout_is_document_completion():
    rng = np.random.default_rng(0)
    n_docs, n_words, K = 60, 30, 3
    phi = rng.dirichlet(np.full(n_words, 2.0), size=K)
    theta = rng.dirichlet(np.full(K, 0.3), size=n_docs)
    counts = np.stack([rng.multinomial(100, p) for p in theta @ phi]).astype(float)
    est = latentlab.PLSA(K, random_state=0)
    table = compare({"plsa": est}, counts, cv=3, random_state=0)
    assert table.loc["plsa", "error"] is None
    folds = KFold(3, shuffle=True, random_state=0).split(counts)
    completion, folded_in = [], []
    for train, test in folds:
        assert (counts[train].sum(axis=0) > 0).all()  # every word seen in training
        fitted = clone(est).fit(counts[train])
        held = fitted.completion_log_likelihood(counts[test], fraction=0.5, random_state=0)
        completion.append(held.mean())
        folded_in.append(fitted.score_samples(counts[test]).mean())
    assert table.loc["plsa", "heldout_loglik"] == pytest.approx(np.mean(completion), rel=1e-12)
    assert table.loc["plsa", "heldout_loglik"] != pytest.approx(np.mean(folded_in), rel=1e-3)
    assert table.attrs["completion_models"] == ["plsa"]
    assert "completion" in table.attrs["completion"]


def test_paired_se_of_the_difference_to_the_best_equals_hand_computation(homoscedastic):
    """heldout_se_diff is the SE of the per-row held-out difference to the best model,
    paired over the same rows (arviz.compare's dse, per row), computed by hand."""
    X, table = homoscedastic
    folds = list(KFold(5, shuffle=True, random_state=0).split(X))
    templates = {f"PPCA-{K}": PPCA(K, random_state=0) for K in KS}
    templates |= {f"FA-{K}": FactorAnalysis(K, random_state=0) for K in KS}

    def per_row(est):
        return np.concatenate([clone(est).fit(X[tr]).score_samples(X[te]) for tr, te in folds])

    best = table.index[0]
    best_rows = per_row(templates[best])
    m = len(best_rows)
    for name in (best, "PPCA-4", "FA-7"):
        d = best_rows - per_row(templates[name])
        row = table.loc[name]
        assert row["heldout_se_diff"] == pytest.approx(np.sqrt(m * np.var(d, ddof=1)) / m, rel=1e-9)
        assert row["heldout_diff"] == pytest.approx(
            table.loc[best, "heldout_loglik"] - row["heldout_loglik"], abs=1e-12
        )
    assert table.loc[best, "heldout_diff"] == 0 and table.loc[best, "near_best"] == "best"
    # pairing removes the spread between rows that every model shares
    assert (table["heldout_se_diff"].iloc[1:] < table["heldout_se"].iloc[1:]).all()
    # near_best follows diff / se_diff
    ratio = (table["heldout_diff"] / table["heldout_se_diff"]).iloc[1:]
    expected = np.where(
        ratio <= 1, "within 1 SE", np.where(ratio <= 2, "within 2 SE", "beyond 2 SE")
    )
    assert table["near_best"].iloc[1:].tolist() == expected.tolist()
    # K=4 misses a planted dimension: clearly worse, by many paired SE
    assert table.loc["PPCA-4", "near_best"] == "beyond 2 SE"
    assert table.attrs["edge_of_grid"] is None  # K=5 is inside 4..7


def test_stop_early_skips_the_folds_of_a_clearly_worse_model(data):
    """PPCA(3) on rank-5 data trails PPCA(5) by far more than 4 paired SE on the first
    fold: it is scored on that fold alone.  Oracles: its fold-1 values and the rule by
    hand (fits on the same folds), and the same comparison without stopping, where it
    also loses."""
    X = data
    models = {"K5": PPCA(5, random_state=0), "K3": PPCA(3, random_state=0)}
    table = compare(models, X, cv=5, random_state=0, stop_early=True)
    full = compare(models, X, cv=5, random_state=0)
    assert table["folds"].tolist() == [5, 1] and full["folds"].tolist() == [5, 5]
    assert table.index.tolist() == ["K5", "K3"] and table.attrs["stopped_early"]
    train, test = next(iter(KFold(5, shuffle=True, random_state=0).split(X)))
    best = clone(models["K5"]).fit(X[train]).score_samples(X[test])
    worse = clone(models["K3"]).fit(X[train]).score_samples(X[test])
    d = worse - best
    # the rule, by hand: differences winsorised from below at their 10th percentile
    clipped = np.maximum(d, np.quantile(d, 0.1))
    assert clipped.sum() < -4.0 * np.sqrt(d.size) * clipped.std(ddof=1)
    row = table.loc["K3"]
    assert row["heldout_loglik"] == pytest.approx(worse.mean(), rel=1e-12)
    assert row["heldout_total"] == pytest.approx(worse.sum(), rel=1e-12)
    assert np.isnan(row["heldout_se"])
    # the difference to the best on the same fold, and its paired SE
    assert row["heldout_diff"] == pytest.approx(best.mean() - worse.mean(), rel=1e-9)
    assert row["heldout_se_diff"] == pytest.approx(d.std(ddof=1) / np.sqrt(d.size), rel=1e-9)
    assert row["near_best"] == "beyond 2 SE"
    pd.testing.assert_series_equal(table.loc["K5"], full.loc["K5"])  # the leader: unchanged
    assert full.loc["K3", "heldout_loglik"] < full.loc["K5", "heldout_loglik"]


def test_warns_when_the_best_k_is_at_the_edge_of_the_grid(data):
    X = data  # planted rank 5
    with pytest.warns(UserWarning, match=r"largest K of its grid \(K = 4, 5\).*larger K"):
        table = compare([PPCA(4, random_state=0), PPCA(5, random_state=0)], X, cv=5)
    assert table.index[0] == "PPCA(K=5)" and "larger K" in table.attrs["edge_of_grid"]
    with pytest.warns(UserWarning, match=r"smallest K of its grid \(K = 5, 6, 7\).*smaller K"):
        compare([PPCA(K, random_state=K) for K in (5, 6, 7)], X, cv=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # K=5 inside the grid: no warning
        table = compare([PPCA(K, random_state=0) for K in (4, 5, 6)], X, cv=5)
    assert table.attrs["edge_of_grid"] is None
    # models that differ in more than K are no grid: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compare([PPCA(4, random_state=0), FactorAnalysis(5, random_state=0)], X, cv=5)


def test_the_stopping_rule_sees_a_deficit_that_a_few_catastrophic_rows_hide():
    """A candidate worse by 0.5 on every row and by 1e5 on three: the plain z-test on
    the sum cannot stop it (the three rows inflate the SE as much as the sum), the
    winsorised one does; a candidate better on average is never stopped, however
    heavy its tails."""
    from latentlab._early_stop import clearly_worse

    rng = np.random.default_rng(0)
    d = -0.5 + 0.1 * rng.normal(size=200)
    d[:3] = -1e5
    assert d.sum() + 4.0 * np.sqrt(d.size) * d.std(ddof=1) > 0  # the plain test: no
    assert clearly_worse(d)
    better = 0.5 + 0.1 * rng.normal(size=200)
    better[:3] = -10.0
    assert better.sum() > 0
    assert not clearly_worse(better) and not clearly_worse(-d)
