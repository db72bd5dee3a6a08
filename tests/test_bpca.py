"""Bayesian PCA: ARD pruning, MAP by EM and by gradient on one declaration, imputation."""

import jax
import numpy as np
import pytest
from numpyro.infer.util import log_density
from oracles import hide_at_random, is_monotone, planted_low_rank

import latentlab
from latentlab import PPCA, BayesianPCA


@pytest.fixture(scope="module")
def planted():
    return planted_low_rank(n=200, d=10, rank=3, noise=0.3, seed=0)


@pytest.fixture(scope="module")
def fitted(planted):
    X, _, _ = planted
    return BayesianPCA(9, random_state=0).fit(X)


@pytest.mark.parametrize("n, noise", [(100, 0.1), (300, 0.5), (200, 0.3)])
def test_started_with_nine_components_keeps_the_planted_three(n, noise):
    X, W, _ = planted_low_rank(n=n, d=10, rank=3, noise=noise, seed=0)
    est = BayesianPCA(9, random_state=0).fit(X)
    assert est.effective_rank_ == 3
    assert np.count_nonzero(np.linalg.norm(est.components_, axis=1)) == 3
    # the survivors span the planted subspace
    Q_true, _ = np.linalg.qr(W)
    Q_fit, _ = np.linalg.qr(est.components_[:3].T)
    assert np.linalg.svd(Q_true.T @ Q_fit, compute_uv=False).min() > 0.99
    assert est.noise_variance_ == pytest.approx(noise**2, rel=0.2)


def test_em_never_decreases_log_joint(fitted):
    assert fitted.converged_
    assert len(fitted.log_likelihoods_) == fitted.n_iter_
    assert is_monotone(fitted.log_likelihoods_)
    # the run before pruning is monotone too (pruning itself is a step to a constrained
    # problem and is allowed to lower the log joint)
    assert len(fitted.log_likelihoods_before_pruning_) > 10
    assert is_monotone(fitted.log_likelihoods_before_pruning_)


def test_map_on_the_declaration_reaches_the_em_optimum(planted):
    X, _, _ = planted
    em = BayesianPCA(3, random_state=0).fit(X)
    grad = BayesianPCA(3, method="map", svi_steps=4000, random_state=0).fit(X)
    with jax.enable_x64(True):
        joint_em, _ = log_density(em.model_, (X,), {}, em.params_)
        joint_map, _ = log_density(em.model_, (X,), {}, grad.params_)
    assert float(joint_map) == pytest.approx(float(joint_em), rel=1e-4)
    assert float(joint_map) <= float(joint_em) + 1e-6 * abs(float(joint_em))


def test_imputation_vs_ppca():
    X, _, _ = planted_low_rank(n=200, d=10, rank=3, noise=0.3, seed=0)
    X_missing, hidden = hide_at_random(X, 0.2, seed=1)

    def rmse(est):
        return np.sqrt(np.mean((est.impute(X_missing)[hidden] - X[hidden]) ** 2))

    bpca = BayesianPCA(9, random_state=0).fit(X_missing)
    assert bpca.effective_rank_ == 3
    ppca_true = PPCA(3, random_state=0).fit(X_missing)
    ppca_big = PPCA(9, random_state=0).fit(X_missing)
    assert rmse(bpca) <= 1.01 * rmse(ppca_true)  # no worse than knowing K, up to 1%
    assert rmse(bpca) < rmse(ppca_big)


def test_nuts_runs_on_the_declaration():
    from numpyro.infer import MCMC, NUTS

    X, _, _ = planted_low_rank(n=40, d=4, rank=1, noise=0.3, seed=2)
    est = BayesianPCA(2, random_state=0).fit(X)
    with jax.enable_x64(True):
        model = est.model_
        init = {k: np.asarray(v) for k, v in est.params_.items()}
        init["alpha"] = np.minimum(init["alpha"], 1e3)
        init["W"] = init["W"] + 0.01
        from numpyro.infer.initialization import init_to_value

        mcmc = MCMC(
            # the ARD funnel drives trees to the default depth 10: cap it (time)
            NUTS(model, init_strategy=init_to_value(values=init), max_tree_depth=6),
            num_warmup=100,
            num_samples=100,
            progress_bar=False,
        )
        mcmc.run(jax.random.PRNGKey(0), X)
        samples = {k: np.asarray(v) for k, v in mcmc.get_samples().items()}
    # the declaration of the kept component only: the second, pruned, is not sampled
    assert est.n_components_ == 1 and samples["W"].shape == (100, 4, 1)
    assert np.all(np.isfinite(samples["sigma2"])) and np.all(samples["sigma2"] > 0)
    assert abs(np.median(samples["sigma2"]) - est.noise_variance_) < 0.5 * est.noise_variance_


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"alpha_b": 0.0}, "alpha_b"),
        ({"alpha_a": -1.0}, "alpha_a"),
        ({"n_components": 10}, "n_components"),
    ],
)
def test_bad_settings(planted, kwargs, match):
    X, _, _ = planted
    with pytest.raises(ValueError, match=match):
        BayesianPCA(**{"n_components": 3, **kwargs}).fit(X)


def test_bic_counts_only_effective_components(planted, fitted):
    X, _, _ = planted
    n, d, k = len(X), 10, fitted.effective_rank_
    p = d * k + d + 1 - k * (k - 1) // 2
    assert fitted.bic(X) == pytest.approx(-2 * n * fitted.score(X) + p * np.log(n))


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    check_estimator(BayesianPCA(1, random_state=0), expected_failed_checks={})


def test_save_load_round_trip(fitted, planted, tmp_path):
    X, _, _ = planted
    fitted.save(tmp_path / "bpca.npz")
    loaded = latentlab.load(tmp_path / "bpca.npz")
    assert loaded.score(X) == fitted.score(X)
    assert loaded.effective_rank_ == fitted.effective_rank_
    np.testing.assert_array_equal(loaded.impute(X), fitted.impute(X))


# -- the fitted model is the kept components -----------------------------------------


@pytest.fixture(scope="module")
def wine_fit():
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    X = StandardScaler().fit_transform(load_wine().data)
    return X, BayesianPCA(random_state=0).fit(X)


def test_reports_and_returns_only_the_kept_components(wine_fit):
    # measured before: n_components_ = 12 with effective_rank_ = 7, and transform gave
    # 12 columns, 5 of them identically zero
    X, est = wine_fit
    assert (est.n_components_max_, est.n_components_, est.effective_rank_) == (12, 7, 7)
    Z = est.transform(X)
    assert Z.shape == (178, 7) and np.all(np.std(Z, axis=0) > 0.1)
    assert est.components_.shape == (7, 13) and est.alpha_.shape == (7,)
    assert np.all(np.linalg.norm(est.components_, axis=1) > 0.4)
    assert list(est.get_feature_names_out()) == [f"bayesianpca{k}" for k in range(7)]
    assert est.inverse_transform(Z).shape == X.shape
    with pytest.raises(ValueError, match=r"codes of shape \(n_samples, 7\)"):
        est.inverse_transform(np.zeros((2, 12)))
    # the full set the fit started from: the kept components, then the pruned ones' zeros
    np.testing.assert_array_equal(est.components_all_[:7], est.components_)
    assert est.components_all_.shape == (12, 13) and not est.components_all_[7:].any()
    # BIC/AIC count the kept components' parameters, as PPCA(7)'s
    from latentlab.models.ppca import n_parameters

    assert est.n_parameters_ == n_parameters(13, 7)


def test_the_trace_ends_at_the_log_joint_of_the_kept_components_model(wine_fit):
    # after pruning, EM reruns on the model model_ declares (7 components), so the
    # declared-once contract holds for a pruned fit too
    X, est = wine_fit
    assert len(est.log_likelihoods_before_pruning_) > 0  # components were pruned
    assert is_monotone(est.log_likelihoods_)
    with jax.enable_x64(True):
        joint, _ = log_density(est.model_, (X,), {}, est.params_)
    assert est.log_likelihoods_[-1] == pytest.approx(float(joint), rel=1e-10)


def test_warns_when_it_keeps_every_component(planted):
    X, _, _ = planted  # planted rank 3
    with pytest.warns(UserWarning, match="kept all 3 components; start with more"):
        BayesianPCA(3, random_state=0).fit(X)


# -- pruning follows the ARD fixed point --------------------------------------------------


def rotated_low_rank(n=500, d=25, rank=5, sigma=1.0, seed=42, n_test=0):
    """Rank-``rank`` signal along the first columns of a random orthogonal U plus
    isotropic noise sigma^2 (the set-up of scikit-learn's PPCA/FA model-selection
    example); ``n_test`` more rows from the same U for held-out scores."""
    from scipy import linalg

    rng = np.random.RandomState(seed)
    U, _, _ = linalg.svd(rng.randn(d, d))
    X = rng.randn(n + n_test, rank) @ U[:, :rank].T + sigma * rng.randn(n + n_test, d)
    return X[:n], X[n:], U[:, :rank]


def test_weak_real_components_survive_and_give_the_best_held_out_score():
    """Real components with ||w||^2 of 0.65-1.2 sigma2 are supported at n = 500: the
    old rule ||w||^2 < sigma2 pruned them (effective rank 0 or 1)."""
    X, X_test, U = rotated_low_rank(n_test=500)
    est = BayesianPCA(random_state=0).fit(X)
    assert est.effective_rank_ == 5
    assert est.noise_variance_ == pytest.approx(1.0, rel=0.05)
    assert est.prune_level_ == pytest.approx(10 * 2e-3 * np.mean(np.var(X, axis=0)))
    # the survivors span PPCA's rank-5 ML subspace, and the planted one as closely as
    # 500 rows allow (weakest direction: sin^2 ~ (d - 5)(1 + 0.65) / (n 0.65^2) ~ 0.16)
    Q, _ = np.linalg.qr(est.components_[:5].T)
    Q_ppca, _ = np.linalg.qr(PPCA(5, method="closed_form").fit(X).components_.T)
    assert np.linalg.svd(Q_ppca.T @ Q, compute_uv=False).min() > 0.99
    assert np.linalg.svd(U.T @ Q, compute_uv=False).min() > 0.9
    # held out: at least as good as PPCA told the right rank, better than any other
    ppca = {k: PPCA(k, method="closed_form").fit(X).score(X_test) for k in range(1, 11)}
    assert est.score(X_test) >= ppca[5] - 1e-3
    assert est.score(X_test) > max(v for k, v in ppca.items() if k != 5)


@pytest.mark.parametrize(
    "n, d, rank, noise",
    [
        (500, 25, 8, 3.0),  # many weak components in strong noise
        (100, 25, 5, 1.0),
        # little noise: 2b exceeds sigma2, unsupported columns stall near 2b instead of
        # collapsing (the old rule kept them)
        (100, 25, 5, 0.1),
        (60, 10, 2, 1.0),  # few rows
    ],
)
def test_recovers_the_planted_rank_over_a_grid(n, d, rank, noise):
    X, W, _ = planted_low_rank(n=n, d=d, rank=rank, noise=noise, seed=0)
    est = BayesianPCA(random_state=0).fit(X)  # starts from min(n, d) - 1 components
    assert est.effective_rank_ == rank
    assert np.count_nonzero(np.linalg.norm(est.components_, axis=1)) == rank
    # the kept columns carry far more than the pruning level, which is far above the
    # pruned ones' (all exactly zero)
    assert np.sum(est.components_[:rank] ** 2, axis=1).min() > 10 * est.prune_level_
    assert not est.components_all_[rank:].any()
    Q_true, _ = np.linalg.qr(W)
    Q_fit, _ = np.linalg.qr(est.components_[:rank].T)
    assert np.linalg.svd(Q_true.T @ Q_fit, compute_uv=False).min() > 0.95
    assert est.noise_variance_ == pytest.approx(noise**2, rel=0.2)


def test_prune_level_is_the_alpha_fixed_point_rule():
    """A column is pruned exactly when alpha_k is within a factor 1 + prune_threshold of
    its data-free value (d + 2a - 2) / 2b, i.e. ||w_k||^2 < prune_threshold * 2b."""
    from latentlab.models.bpca import active_columns

    d, a, b = 10, 1.0, 0.01
    norms = np.array([0.0, 0.05, 0.19, 0.21, 3.0])
    W = np.zeros((d, len(norms)))
    W[0] = np.sqrt(norms)
    alpha = (d + 2 * a - 2) / (norms + 2 * b)
    alpha_free = (d + 2 * a - 2) / (2 * b)
    expected = alpha_free / alpha > 1 + 10.0
    np.testing.assert_array_equal(np.asarray(active_columns(W, b, 10.0)), expected)
    assert expected.tolist() == [False, False, False, True, True]


# -- pruning before the first run converges ---------------------------------------------


@pytest.fixture(scope="module")
def wine_with_holes():
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    X = StandardScaler().fit_transform(load_wine().data)
    return np.where(np.random.default_rng(0).random(X.shape) < 0.3, np.nan, X)


@pytest.mark.parametrize("prune_after", [1, 20])
def test_pruning_before_convergence_reaches_the_fit_pruned_at_convergence(
    wine_with_holes, prune_after, monkeypatch
):
    """The first run stops after PRUNE_AFTER steps (breast_cancer's speed-up: the
    unsupported columns crawl for thousands of steps); the runs after pruning (the
    quasi-Newton phase, a program as wide as the kept columns) must reach the fit of a
    first run left to converge (185 steps here), and prune again while columns fall
    below the threshold.  Log joint to 1e-7 per row, not 1e-9: the ARD prior's nearly
    flat direction (see test_quasi_newton_phase's Bayesian PCA test)."""
    from latentlab.estimators import bpca as bpca_estimator

    X = wine_with_holes
    n = len(X)
    reference = BayesianPCA(tol=1e-10).fit(X)
    assert len(reference.log_likelihoods_before_pruning_) < bpca_estimator.PRUNE_AFTER

    runs = []
    fit_kept = bpca_estimator.BayesianPCA._fit_kept

    def spy(self, data, n_rows, params, kept, hyper, long_fit):
        runs.append((int(kept.sum()), long_fit))
        return fit_kept(self, data, n_rows, params, kept, hyper, long_fit)

    monkeypatch.setattr(bpca_estimator, "PRUNE_AFTER", prune_after)
    monkeypatch.setattr(bpca_estimator.BayesianPCA, "_fit_kept", spy)
    early = BayesianPCA(tol=1e-10).fit(X)

    assert len(early.log_likelihoods_before_pruning_) == prune_after
    assert all(long_fit for _, long_fit in runs)
    if prune_after == 1:  # seen: 10 columns kept after one step, then 7
        assert len(runs) >= 2 and runs[0][0] > runs[-1][0]
    assert early.converged_ and is_monotone(early.log_likelihoods_)
    assert (early.n_components_max_, early.n_components_) == (12, reference.n_components_)
    assert early.components_all_.shape == (12, 13) and not early.components_all_[7:].any()
    with jax.enable_x64(True):
        joint_early = float(log_density(early.model_, (X,), {}, early.params_)[0])
        joint_reference = float(log_density(reference.model_, (X,), {}, reference.params_)[0])
    # the declared-once contract: the trace ends at model_'s log joint at params_
    assert early.log_likelihoods_[-1] == pytest.approx(joint_early, rel=1e-10)
    assert abs(joint_early - joint_reference) / n < 1e-7
    np.testing.assert_allclose(
        early.get_covariance(), reference.get_covariance(), rtol=0, atol=1e-4
    )


def test_the_diagonalising_rotation_maximises_the_log_prior_over_rotations():
    """The quasi-Newton phase turns W by this rotation (the rotation profiled out of
    its objective): the likelihood's W W^T is unchanged, the model's columns come out
    orthogonal in decreasing norm, padding columns stay zero, and the log prior (alpha
    at its maximiser) reaches its maximum over rotations, the closed form
    -(d + 2a - 2)/2 log det(W^T W + 2b I) + const, above every other rotation's."""
    from latentlab.models import bpca

    rng = np.random.default_rng(3)
    d, K, m = 8, 6, 4
    W = np.zeros((d, K))
    W[:, :m] = rng.normal(size=(d, m)) * np.array([3.0, 0.5, 1.2, 0.8])
    columns = (np.arange(K) < m).astype(float)
    hyper = bpca.Hyper(
        variance_floor=np.asarray(1e-6), a=np.asarray(1.5), b=np.asarray(0.3), columns=columns
    )

    def profiled_prior(V):
        alpha = bpca.best_alpha(V, hyper, np.ones(K))
        return float(bpca.log_prior(V, alpha, hyper.a, hyper.b, columns))

    with jax.enable_x64(True):
        R = np.asarray(bpca.diagonalising_rotation(W, columns))
        V = W @ R
        np.testing.assert_allclose(R @ R.T, np.eye(K), atol=1e-12)
        np.testing.assert_allclose(V @ V.T, W @ W.T, atol=1e-12)
        assert not V[:, m:].any()
        gram = V.T @ V
        np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-12)
        assert np.all(np.diff(np.diag(gram)[:m]) <= 0)
        # the closed form of the maximum: per column -(d + 2a - 2)/2 log(||v_k||^2 + 2b)
        c = (d + 2 * 1.5 - 2) / 2
        _, logdet = np.linalg.slogdet(W[:, :m].T @ W[:, :m] + 2 * 0.3 * np.eye(m))
        norms = np.sum(W[:, :m] ** 2, axis=0)
        gain = -c * (logdet - np.sum(np.log(norms + 2 * 0.3)))
        assert gain > 0.01
        assert profiled_prior(V) - profiled_prior(W) == pytest.approx(gain, rel=1e-10)
        for _ in range(20):
            Q = np.eye(K)
            Q[:m, :m] = np.linalg.qr(rng.normal(size=(m, m)))[0]
            assert profiled_prior(W @ Q) <= profiled_prior(V) + 1e-10


def test_the_rotation_free_quasi_newton_phase_ends_the_first_run_early():
    """diabetes standardised, 30% of its entries missing: with the rotation profiled out
    of the quasi-Newton phase the first run (9 columns) converges in 32 steps (seen;
    it ran into PRUNE_AFTER, 170 steps when it was 300, before), keeping 8 columns
    (test_quasi_newton_phase checks the fit against EM alone on this data)."""
    from sklearn.datasets import load_diabetes
    from sklearn.preprocessing import StandardScaler

    X = StandardScaler().fit_transform(load_diabetes().data)
    X = np.where(np.random.default_rng(0).random(X.shape) < 0.3, np.nan, X)
    est = BayesianPCA().fit(X)
    assert est.converged_ and is_monotone(est.log_likelihoods_)
    assert len(est.log_likelihoods_before_pruning_) < 60
    assert est.n_components_ == 8
