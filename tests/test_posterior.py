"""Posterior draws (NUTS, SVI, Laplace), their alignment, LOO and latent intervals.

Oracles: K-fold held-out log-likelihood for LOO; the MLE's asymptotic covariance
C / n of the mean for the Laplace approximation; SciPy's dense Gaussian densities
for the pointwise log-likelihood; SciPy's orthogonal Procrustes; planted latents
for interval coverage.
"""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest
from oracles import dense_observed_loglik, hide_at_random, planted_low_rank, planted_topics
from scipy.linalg import orthogonal_procrustes
from scipy.stats import multivariate_normal, special_ortho_group
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import KFold

import latentlab
from latentlab import posterior

N, D = 100, 5  # one data shape for every Gaussian-latent test: few compilations


@pytest.fixture(scope="module")
def data():
    X, _, _ = planted_low_rank(n=N, d=D, rank=2, noise=0.5, seed=0)
    return X


@pytest.fixture(scope="module")
def ppca(data):
    return latentlab.PPCA(2, method="closed_form").fit(data)


@pytest.fixture(scope="module")
def nuts_tree(ppca, data):
    # the defaults: 4 chains, a dense mass matrix (16 unconstrained dimensions)
    return ppca.sample_posterior(
        data, method="nuts", num_samples=100, num_warmup=300, random_state=0
    )


@pytest.fixture(scope="module")
def laplace_tree(ppca, data):
    return ppca.sample_posterior(data, method="laplace", num_samples=4000, random_state=1)


@pytest.fixture(scope="module")
def bpca_missing(data):
    X_missing, _ = hide_at_random(data, 0.1, seed=0)
    est = latentlab.BayesianPCA(3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it keeps every component: not the point here
        est.fit(X_missing)
    return X_missing, est


@pytest.fixture(scope="module")
def supervised(data):
    y = data[:, :2] @ np.array([1.0, -1.0]) + 0.3 * np.random.default_rng(1).normal(size=N)
    return y, latentlab.SupervisedPCA(2).fit(data, y)


@pytest.fixture(scope="module")
def mixture():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(-3.0, 1.0, (50, 2)), rng.normal(3.0, 1.0, (50, 2))])
    gm = latentlab.GaussianMixture(2, random_state=0).fit(X)
    tree = gm.sample_posterior(X, num_samples=200, num_warmup=200, num_chains=1, random_state=0)
    return X, gm, tree


def quiet_loo(tree):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return posterior.loo(tree)


# ----------------------------------------------------------------------------- NUTS + LOO


class TestNUTS:
    def test_loo_elpd_matches_10_fold_heldout_loglik(self, nuts_tree, data):
        result = quiet_loo(nuts_tree)
        heldout = 0.0
        for train, test in KFold(10, shuffle=True, random_state=0).split(data):
            fold = latentlab.PPCA(2, method="closed_form").fit(data[train])
            heldout += fold.score_samples(data[test]).sum()
        # measured: elpd_loo -717.8 (SE 15.3) vs 10-fold -717.0
        assert abs(result.elpd - heldout) < 2 * result.se
        assert abs(result.elpd - heldout) < 0.01 * abs(heldout)
        assert np.mean(result.pareto_k.values < 0.7) >= 0.95

    def test_arviz_loo_and_summary_work_directly(self, nuts_tree, ppca):
        result = az.loo(nuts_tree)
        assert result.elpd == pytest.approx(quiet_loo(nuts_tree).elpd, rel=1e-12)
        assert result.n_data_points == N
        table = az.summary(nuts_tree, var_names=["mu", "sigma2"])
        assert len(table) == D + 1
        # posterior means in data units, near the MLE (within half a posterior SD)
        mu = nuts_tree.posterior["mu"]
        gap = np.abs(mu.mean(("chain", "draw")).values - ppca.mean_)
        assert np.all(gap < 0.5 * mu.std(("chain", "draw")).values)

    def test_layout_and_diagnostics(self, nuts_tree):
        assert nuts_tree.log_likelihood["x"].dims == ("chain", "draw", "obs")
        assert nuts_tree.log_likelihood["x"].shape == (4, 100, N)
        assert nuts_tree.posterior["W"].shape == (4, 100, D, 2)
        assert nuts_tree.attrs["aligned"] == "procrustes"
        assert "flat" in nuts_tree.attrs["prior"]
        assert nuts_tree.attrs["num_divergences"] == int(nuts_tree.sample_stats.diverging.sum())
        stats = nuts_tree.sample_stats
        np.testing.assert_array_equal(stats.reached_max_treedepth, stats.tree_depth >= 10)
        assert nuts_tree.attrs["num_max_treedepth"] == int(stats.reached_max_treedepth.sum())
        assert nuts_tree.attrs["min_ess_bulk"] > 30
        for name in ("diverging", "acceptance_rate", "energy", "lp"):
            assert name in nuts_tree.sample_stats

    def test_nuts_options_reach_the_sampler_and_full_trees_warn(self, ppca, data, monkeypatch):
        """Options pass through to the sampler; trees at the depth cap are counted and
        warned about (a stand-in sampler returns the start 4 times, every tree full)."""
        from latentlab.inference import mcmc

        seen = {}

        def stand_in(model, *args, init_values, num_samples, num_chains, **kwargs):
            seen.update(kwargs)
            shape = (num_chains, num_samples)
            draws = {
                k: np.broadcast_to(np.asarray(v), shape + np.shape(v))
                for k, v in init_values.items()
            }
            stats = {
                "diverging": np.zeros(shape, bool),
                "reached_max_treedepth": np.ones(shape, bool),
            }
            return mcmc.NUTSResult(draws=draws, sample_stats=stats)

        monkeypatch.setattr(mcmc, "run_nuts", stand_in)
        options = {
            "max_tree_depth": 3,
            "dense_mass": True,
            "target_accept_prob": 0.9,
            "chain_method": "vectorized",
        }
        with pytest.warns(UserWarning, match="4 of 4 NUTS transitions stopped at the maximum"):
            tree = ppca.sample_posterior(
                data, num_samples=4, num_chains=1, random_state=0, nuts_options=options
            )
        assert {k: seen[k] for k in options} == options
        assert tree.attrs["num_max_treedepth"] == 4 and tree.attrs["num_divergences"] == 0

    def test_default_is_four_chains_with_finite_rhat(self, nuts_tree):
        """One chain (the old default) left R-hat NaN in az.summary; four define it, and
        chains started at the MLE of this well-identified posterior agree."""
        assert nuts_tree.posterior.sizes["chain"] == 4
        table = az.summary(nuts_tree, var_names=["mu", "sigma2", "explained_variance"])
        assert np.all(np.isfinite(table["r_hat"]))
        assert table["r_hat"].max() < 1.05
        assert 1.0 <= nuts_tree.attrs["max_rhat"] < 1.05

    def test_dense_mass_by_default_for_small_models(self, ppca, data, mixture, monkeypatch):
        """dense_mass=None is dense up to DENSE_MASS_MAX_DIM unconstrained dimensions,
        counted by hand: PPCA d K + d + 1; a full-covariance mixture (K - 1) weights,
        K d means and K d(d + 1)/2 Cholesky entries."""
        import numpyro.infer

        from latentlab.inference import mcmc

        X_mix, gm, _ = mixture
        with ppca._precision():
            problem = ppca._posterior_problem(data, None, None)
            assert mcmc.num_unconstrained(problem.target.model, *problem.target.args) == (
                D * 2 + D + 1
            )
        with gm._precision():
            problem = gm._posterior_problem(X_mix, None, None)
            assert mcmc.num_unconstrained(problem.target.model, *problem.target.args) == (
                1 + 2 * 2 + 2 * 3
            )

        class Stop(Exception):
            pass

        seen = []

        def recording_nuts(model, **kwargs):
            seen.append(kwargs["dense_mass"])
            raise Stop

        monkeypatch.setattr(numpyro.infer, "NUTS", recording_nuts)
        with ppca._precision():
            problem = ppca._posterior_problem(data, None, None)
            for limit in (16, 15):  # PPCA here has 16 dimensions
                monkeypatch.setattr(mcmc, "DENSE_MASS_MAX_DIM", limit)
                with pytest.raises(Stop):
                    mcmc.run_nuts(
                        problem.target.model, *problem.target.args, init_values=problem.target.init
                    )
        assert seen == [True, False]
        with pytest.raises(ValueError, match="Unknown chain_method='threads'"):
            mcmc.run_nuts(problem.target.model, *problem.target.args, chain_method="threads")

    def test_aligned_loadings_have_small_spread_unaligned_do_not(self, nuts_tree, ppca):
        W = nuts_tree.posterior["W"].values
        R = nuts_tree.alignment["rotation"].values
        raw = W @ np.swapaxes(R, -1, -2)
        # the likelihood is flat along rotations: raw NUTS draws wander around the orbit
        spread_aligned = W.std(axis=(0, 1)).mean()
        spread_raw = raw.std(axis=(0, 1)).mean()
        assert spread_raw > 5 * spread_aligned  # measured ratio ~11
        # aligned draws sit around the MLE (the flat-prior posterior of W is skewed in
        # ||w||, so its mean is not the MLE: measured up to 0.65 SD away)
        centre = np.abs(W.mean(axis=(0, 1)) - ppca.params_["W"])
        assert np.all(centre < W.std(axis=(0, 1)))
        # rotation-invariant summaries do not care about alignment
        ev = nuts_tree.posterior["explained_variance"].values
        expected = np.linalg.svd(raw, compute_uv=False) ** 2
        np.testing.assert_allclose(ev, expected, rtol=1e-10)
        WWt = posterior.loading_covariance(nuts_tree)
        np.testing.assert_allclose(WWt, raw @ np.swapaxes(raw, -1, -2), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- alignment


def test_procrustes_matches_scipy_and_undoes_random_rotations():
    rng = np.random.default_rng(0)
    reference = rng.normal(size=(6, 3))
    draws = reference + 0.05 * rng.normal(size=(20, 6, 3))
    R = posterior.procrustes_rotations(draws, reference)
    for s in range(3):
        np.testing.assert_allclose(R[s], orthogonal_procrustes(draws[s], reference)[0], atol=1e-12)
    aligned, _ = posterior.align_loadings({"W": draws}, {"W": reference}, ["W"])
    Q = special_ortho_group.rvs(3, size=20, random_state=1)
    rotated, _ = posterior.align_loadings({"W": draws @ Q}, {"W": reference}, ["W"])
    np.testing.assert_allclose(rotated["W"], aligned["W"], atol=1e-12)
    assert np.abs(rotated["W"] - reference).max() < 0.25


class TestMixture:
    def test_relabelled_means_are_unimodal_switched_are_not(self, mixture):
        _, gm, tree = mixture
        assert tree.attrs["aligned"] == "relabelled"
        draws = {k: tree.posterior[k].values[0] for k in ("weights", "means", "scale")}
        sd = draws["means"].std(axis=0)
        z = np.abs(draws["means"] - gm.means_) / sd
        assert z.max() < 5
        # induce label switching, then relabel
        rng = np.random.default_rng(0)
        perm = np.array([rng.permutation(2) for _ in range(200)])
        axes = {"weights": 0, "means": 0, "scale": 0}
        switched = posterior.relabel(draws, perm, axes)
        assert (np.abs(switched["means"] - gm.means_) / sd).max() > 20
        assert switched["means"][:, 0, 0].std() > 10 * sd[0, 0]  # bimodal
        found = posterior.match_components(
            switched["means"],
            gm.means_,
            metric=np.linalg.inv(gm.covariances_.mean(axis=0)),
            weights=switched["weights"],
            reference_weights=gm.weights_,
        )
        restored = posterior.relabel(switched, found, axes)
        for k in axes:
            np.testing.assert_array_equal(restored[k], draws[k])

    def test_log_likelihood_is_mixture_density(self, mixture):
        X, _, tree = mixture
        draw = {k: tree.posterior[k].values[0, 7] for k in ("weights", "means", "scale")}
        density = sum(
            w * multivariate_normal(m, L @ L.T).pdf(X)
            for w, m, L in zip(draw["weights"], draw["means"], draw["scale"], strict=True)
        )
        np.testing.assert_allclose(
            tree.log_likelihood["x"].values[0, 7], np.log(density), rtol=1e-10
        )

    def test_loo_elpd_matches_10_fold_heldout_loglik(self, mixture):
        X, _, tree = mixture
        result = quiet_loo(tree)
        heldout = 0.0
        for train, test in KFold(10, shuffle=True, random_state=0).split(X):
            fold = latentlab.GaussianMixture(2, random_state=0).fit(X[train])
            heldout += fold.score_samples(X[test]).sum()
        assert abs(result.elpd - heldout) < 2 * result.se


# ----------------------------------------------------------------------------- Laplace, SVI


class TestLaplace:
    def test_mean_sd_is_mle_asymptotic(self, laplace_tree, ppca):
        # At the MLE the Hessian's mean block is n C^{-1} and its cross terms vanish
        # (they carry sum_i (x_i - mu) = 0), so the Laplace covariance of mu is C / n.
        expected = np.sqrt(np.diag(ppca.get_covariance()) / N)
        sd = laplace_tree.posterior["mu"].std(("chain", "draw")).values
        np.testing.assert_allclose(sd, expected, rtol=0.05)  # 4000 draws: SD error ~1.1%
        assert laplace_tree.attrs["method"] == "laplace"

    def test_identified_coordinates_round_trip(self, ppca, data):
        import jax

        with jax.enable_x64(True):
            problem = ppca._posterior_problem(data, None, None)
            target = problem.target
            coords = posterior.UnconstrainedCoordinates(
                target.model, target.args, target.init, problem.spec.loadings
            )
            back = coords.constrain(coords.point)
        # lower-trapezoidal W: dK - K(K-1)/2 free entries, then mu (d) and log sigma2
        assert coords.layout[0] == ("loadings", D * 2 - 1, None)
        assert coords.size == (D * 2 - 1) + D + 1
        for name, value in problem.target.init.items():
            np.testing.assert_allclose(back[name], value, rtol=1e-12, atol=1e-14)

    def test_missing_data_log_likelihood_is_exact_marginal(self, bpca_missing):
        X_missing, est = bpca_missing
        tree = est.sample_posterior(X_missing, method="laplace", num_samples=50, random_state=0)
        assert "declaration's priors" in tree.attrs["prior"]
        for s in (0, 31):
            W, mu, s2 = (tree.posterior[k].values[0, s] for k in ("W", "mu", "sigma2"))
            dense = dense_observed_loglik(X_missing, mu, W @ W.T + s2 * np.eye(D))
            assert tree.log_likelihood["x"].values[0, s].sum() == pytest.approx(dense, rel=1e-10)

    def test_loo_agrees_with_nuts_and_compare_runs(self, laplace_tree, nuts_tree):
        laplace, nuts = quiet_loo(laplace_tree), quiet_loo(nuts_tree)
        assert laplace.approx_posterior  # importance-corrected for the approximation
        # measured: -716.7 vs -717.8 (SE 15.3)
        assert abs(laplace.elpd - nuts.elpd) < 0.25 * nuts.se
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = az.compare({"laplace": laplace_tree, "nuts": nuts_tree})
        assert set(table.index) == {"laplace", "nuts"}
        assert table["weight"].sum() == pytest.approx(1.0)


# ----------------------------------------------------------------------------- assembly
# Supervised PCA and pLSA through the shared assembly, with chosen draws: the sampling
# engines are model-agnostic and covered above, and compiling them on these heavier
# declarations would double this file's run time.


def _tree_from(est, X, y, draws_in_target_units):

    from latentlab.inference.posterior.sampling import datatree_from_draws

    with est._precision():
        problem = est._posterior_problem(X, y, None)
        draws = {k: np.stack(v)[None] for k, v in draws_in_target_units(problem).items()}
        tree = datatree_from_draws(
            problem, draws, {}, method="nuts", align=True, model_name=type(est).__name__
        )
    return problem, tree


def test_supervised_draws_in_data_units_scored_by_joint_density(data, supervised):
    y, est = supervised
    Q = special_ortho_group.rvs(2, random_state=0)

    def draws(problem):
        p = {k: np.asarray(v) for k, v in problem.target.init.items()}
        moved = {k: v * 1.1 if k.startswith("W") else v + 0.05 for k, v in p.items()}
        rotated = {k: v @ Q if k.startswith("W") else v for k, v in p.items()}
        return {k: [p[k], moved[k], rotated[k]] for k in p}

    problem, tree = _tree_from(est, data, y, draws)
    post = {k: tree.posterior[k].values[0] for k in est.params_}
    for name, value in est.params_.items():  # draw 0 is the fit, in data units
        np.testing.assert_allclose(post[name][0], value, rtol=1e-10, atol=1e-12)
    # the joint rotation of W_x and W_y is undone, and recorded
    for name in ("W_x", "W_y"):
        np.testing.assert_allclose(post[name][2], est.params_[name], atol=1e-10)
    np.testing.assert_allclose(tree.alignment["rotation"].values[0, 2], Q.T, atol=1e-10)
    # log-likelihood: the unweighted joint log p(x, y) of each row
    loglik = tree.log_likelihood["xy"].values[0]
    np.testing.assert_allclose(loglik[0], est.score_samples(data, y), rtol=1e-10)
    W = np.vstack([post["W_x"][1], post["W_y"][1]])
    noise = np.r_[np.full(D, post["sigma2_x"][1]), post["sigma2_y"][1]]
    mean = np.r_[post["mu_x"][1], post["mu_y"][1]]
    dense = dense_observed_loglik(np.column_stack([data, y]), mean, W @ W.T + np.diag(noise))
    assert loglik[1].sum() == pytest.approx(dense, rel=1e-10)
    assert tree.attrs["loadings"] == "W_x,W_y"
    ratio = tree.posterior["explained_variance_ratio"].values
    assert np.all(ratio > 0) and np.all(ratio.sum(axis=-1) < 1)


def test_topic_draws_relabelled_and_scored_by_multinomial():
    from scipy.stats import multinomial

    X = planted_topics()
    est = latentlab.PLSA(2, random_state=0).fit(X)

    def draws(problem):
        t, p = (np.asarray(problem.target.init[k]) for k in ("theta", "phi"))
        return {"theta": [t, t[:, ::-1]], "phi": [p, p[::-1]]}  # draw 1: topics swapped

    _, tree = _tree_from(est, X, None, draws)
    assert tree.attrs["aligned"] == "relabelled"
    np.testing.assert_array_equal(tree.alignment["permutation"].values[0], [[0, 1], [1, 0]])
    theta_draws, phi_draws = tree.posterior["theta"].values[0], tree.posterior["phi"].values[0]
    np.testing.assert_array_equal(theta_draws[1], theta_draws[0])
    np.testing.assert_allclose(phi_draws[0], est.params_["phi"], atol=1e-5)  # nudged inside
    expected = multinomial(100, theta_draws[0] @ phi_draws[0]).logpmf(X)
    np.testing.assert_allclose(tree.log_likelihood["x"].values[0, 0], expected, rtol=1e-10)
    with pytest.raises(ValueError, match="training counts"):
        est.sample_posterior(X[:10], method="laplace")


def test_svi_draws_make_a_valid_datatree(data):
    fa = latentlab.FactorAnalysis(2).fit(data)
    tree = fa.sample_posterior(
        data, method="svi", num_samples=200, svi_steps=500, random_state=0, num_chains=2
    )
    assert tree.posterior["psi"].shape == (2, 200, D)
    assert tree.log_likelihood["x"].shape == (2, 200, N)
    assert set(tree.sample_stats.data_vars) == {"lp", "log_q"}
    assert np.all(np.isfinite(tree.log_likelihood["x"].values))
    assert np.all(tree.posterior["psi"].values > 0)
    # the guide is centred near the ML point: mu's guide mean within 0.1 data SD of it
    gap = np.abs(tree.posterior["mu"].mean(("chain", "draw")).values - fa.mean_)
    assert np.all(gap < 0.1 * data.std(axis=0))
    assert len(az.summary(tree, var_names=["psi"])) == D
    result = quiet_loo(tree)  # importance-corrected for the approximation
    assert result.approx_posterior
    assert np.isfinite(result.elpd)


# ----------------------------------------------------------------------------- LOO warning


def test_loo_warns_naming_rows_with_large_pareto_k():
    rng = np.random.default_rng(0)
    loglik = rng.normal(-1.0, 0.1, size=(1, 400, 30))
    # log importance ratio -loglik = 1.2 * Exp(1): Pareto ratios with shape k = 1.2
    loglik[0, :, :3] = -1.2 * rng.exponential(size=(400, 3))
    tree = az.from_dict(
        {"posterior": {"a": rng.normal(size=(1, 400))}, "log_likelihood": {"x": loglik}},
        dims={"x": ["obs"]},
    )
    with pytest.warns(UserWarning, match=r"unreliable for 3 of 30 rows"):
        posterior.loo(tree)


# ----------------------------------------------------------------------------- latent


def test_latent_intervals_cover_planted_latents_at_their_level(ppca):
    X, z = ppca.sample(2000, random_state=0, return_latent=True)
    intervals = posterior.latent_intervals(ppca, X, level=0.9)
    mean, cov = ppca.posterior_latent(X)
    np.testing.assert_allclose(intervals.mean, mean)
    np.testing.assert_allclose(intervals.upper - mean, 1.6448536269514722 * intervals.sd)
    covered = (intervals.lower <= z) & (z <= intervals.upper)
    assert abs(covered.mean() - 0.9) < 0.02  # 4000 Bernoulli(0.9): SD 0.0047


def test_latent_intervals_refuse_mixtures_and_bad_levels(ppca, data, mixture):
    X, gm, _ = mixture
    with pytest.raises(ValueError, match="predict_proba"):
        posterior.latent_intervals(gm, X)
    with pytest.raises(ValueError, match="level"):
        posterior.latent_intervals(ppca, data, level=1.5)


# ----------------------------------------------------------------------------- bad input


class TestBadInput:
    def test_unknown_method(self, ppca, data):
        with pytest.raises(ValueError, match="method"):
            ppca.sample_posterior(data, method="gibbs")

    def test_unfitted(self, data):
        with pytest.raises(NotFittedError):
            latentlab.PPCA(2).sample_posterior(data)

    def test_models_without_a_declaration(self, data):
        with pytest.raises(ValueError, match="not available for PCA"):
            latentlab.PCA(2).fit(data).sample_posterior(data, method="laplace")

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"num_samples": 0}, "num_samples"),
            ({"num_chains": 1.5}, "num_chains"),
            ({"num_warmup": -1}, "num_warmup"),
            ({"prior": "yes"}, "prior"),
            ({"align": "no"}, "align"),
            ({"nuts_options": {"max_depth": 5}}, "unknown nuts_options"),
            ({"nuts_options": [("dense_mass", True)]}, "nuts_options must be a dict"),
            ({"method": "svi", "nuts_options": {"dense_mass": True}}, "method='nuts' only"),
        ],
    )
    def test_bad_settings(self, ppca, data, kwargs, match):
        with pytest.raises(ValueError, match=match):
            ppca.sample_posterior(data, **kwargs)

    def test_wrong_width_and_infinite(self, ppca, data):
        with pytest.raises(ValueError, match="features"):
            ppca.sample_posterior(data[:, :3])
        bad = data.copy()
        bad[0, 0] = np.inf
        with pytest.raises(ValueError, match="infinity"):
            ppca.sample_posterior(bad)

    def test_model_specific(self, data, bpca_missing, supervised, mixture):
        X_missing, bpca = bpca_missing
        with pytest.raises(ValueError, match="prior=False"):
            bpca.sample_posterior(X_missing, prior=False)
        _, spca = supervised
        with pytest.raises(ValueError, match="requires y"):
            spca.sample_posterior(data)
        with pytest.raises(ValueError, match="target"):
            spca.sample_posterior(data, np.ones((N, 2)))
        X, gm, _ = mixture
        empty = X.copy()
        empty[3] = np.nan
        with pytest.raises(ValueError, match="missing"):
            gm.sample_posterior(empty)
