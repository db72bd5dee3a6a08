"""ArviZ-complete trees: ``to_datatree`` of a point fit and the data groups of
``sample_posterior`` (observed and constant data, log prior, posterior and prior
predictive), ArviZ's own checks on them, ``posterior.loo_pit`` and ``plots.ppc``.

Oracles: ``score_samples`` (each row's log-likelihood) and SciPy's densities; the
fitted model's moments (mean, covariance, expected counts) against the replicates'
averages within five Monte Carlo standard errors; the declared priors' densities
computed with SciPy; the empirical PIT of a point-mass posterior (equal weights).
"""

from __future__ import annotations

import warnings

import arviz as az
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from oracles import hide_at_random, planted_low_rank, planted_topics  # noqa: E402
from scipy.stats import lognorm, multinomial, norm  # noqa: E402

import latentlab  # noqa: E402
from latentlab import plots, posterior  # noqa: E402

N, D = 100, 5  # test_posterior's shapes: the programs compiled there are reused
R = 400  # replicates where moments are compared


@pytest.fixture(scope="module")
def data():
    X, _, _ = planted_low_rank(n=N, d=D, rank=2, noise=0.5, seed=0)
    X_missing, _ = hide_at_random(X, 0.1, seed=0)
    return X, X_missing


@pytest.fixture(scope="module")
def targets(data):
    X = data[0]
    return X[:, :2] @ np.array([1.0, -1.0]) + 0.3 * np.random.default_rng(1).normal(size=N)


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def stacked(tree, group, name):
    """A group's variable with chains and draws in one leading axis."""
    values = tree[group][name].values
    return values.reshape((-1,) + values.shape[2:])


def assert_within_monte_carlo(samples, expected, n_se=5.0):
    """The samples' mean (over axis 0) equals ``expected`` within ``n_se`` Monte Carlo
    standard errors, entry by entry."""
    mean = samples.mean(axis=0)
    se = samples.std(axis=0, ddof=1) / np.sqrt(len(samples))
    assert np.all(np.abs(mean - expected) <= n_se * se + 1e-12), np.max(
        np.abs(mean - expected) / (se + 1e-300)
    )


def covariances(replicates):
    return np.array([np.cov(r, rowvar=False, ddof=0) for r in replicates])


# ----------------------------------------------------------------------------- point trees


@pytest.mark.parametrize("model", ["ppca", "fa", "gmm", "bpca"])
def test_point_tree_scores_rows_and_replicates_the_fitted_model(model, data):
    X = data[1]  # 10% missing
    est = {
        "ppca": latentlab.PPCA(2),
        "fa": latentlab.FactorAnalysis(2),
        "gmm": latentlab.GaussianMixture(2, random_state=0),
        "bpca": latentlab.BayesianPCA(2),
    }[model]
    quiet(est.fit, X)
    tree = est.to_datatree(X, n_replicates=R, random_state=0)
    assert tree.attrs["inference_library"] == "latentlab"
    assert tree.attrs["model"] == type(est).__name__ and tree.attrs["method"] == "point"
    assert {"posterior", "log_likelihood", "observed_data", "constant_data", "log_prior"} <= set(
        tree.children
    )
    # each row's log-likelihood at every (identical) draw is score_samples'
    loglik = stacked(tree, "log_likelihood", "x")
    np.testing.assert_allclose(loglik, np.broadcast_to(est.score_samples(X), (R, N)), rtol=1e-10)
    np.testing.assert_allclose(loglik[0].sum(), N * est.score(X), rtol=1e-10)
    # the data as given, its mask, and complete replicates with the data's coordinates
    observed = tree["observed_data"]["x"]
    np.testing.assert_array_equal(observed.values, X)
    np.testing.assert_array_equal(tree["constant_data"]["x_missing"].values, np.isnan(X))
    replicated = tree["posterior_predictive"]["x"]
    assert replicated.dims == ("chain", "draw", "obs", "feature")
    assert replicated.shape == (1, R, N, D) and np.all(np.isfinite(replicated.values))
    for dim in ("obs", "feature"):
        np.testing.assert_array_equal(replicated[dim].values, observed[dim].values)
    replicates = stacked(tree, "posterior_predictive", "x")
    mean, covariance = model_moments(est)
    assert_within_monte_carlo(replicates.mean(axis=1), mean)
    assert_within_monte_carlo(covariances(replicates), covariance)


def model_moments(est):
    """The fitted model's mean and covariance (a mixture's: of its components')."""
    if not hasattr(est, "weights_"):
        return est.mean_, est.get_covariance()
    w, means = est.weights_, est.means_
    mean = w @ means
    second = np.einsum("k,kij->ij", w, est.covariances_ + np.einsum("ki,kj->kij", means, means))
    return mean, second - np.outer(mean, mean)


def test_point_tree_of_supervised_pca_replicates_x_and_y_jointly(data, targets):
    X = data[0]
    est = latentlab.SupervisedPCA(2).fit(X, targets)
    tree = est.to_datatree(X, targets, n_replicates=R, random_state=0)
    np.testing.assert_allclose(
        stacked(tree, "log_likelihood", "xy")[0], est.score_samples(X, targets), rtol=1e-10
    )
    np.testing.assert_array_equal(tree["observed_data"]["y"].values, targets[:, None])
    joint = np.concatenate([stacked(tree, "posterior_predictive", n) for n in ("x", "y")], axis=-1)
    p = est.params_
    W = np.vstack([p["W_x"], p["W_y"]])
    noise = np.r_[np.full(D, p["sigma2_x"]), p["sigma2_y"]]
    assert_within_monte_carlo(joint.mean(axis=1), np.r_[p["mu_x"], p["mu_y"]])
    assert_within_monte_carlo(covariances(joint), W @ W.T + np.diag(noise))
    assert tree["constant_data"]["y_shift"].shape == (1,)


def test_point_tree_of_plsa_replicates_documents_of_the_same_lengths():
    X = planted_topics()
    est = latentlab.PLSA(2, random_state=0).fit(X)
    tree = est.to_datatree(X, n_replicates=R, random_state=0)
    probabilities = est.params_["theta"] @ est.params_["phi"]
    loglik = stacked(tree, "log_likelihood", "x")[0]
    np.testing.assert_allclose(loglik, multinomial(100, probabilities).logpmf(X), rtol=1e-6)
    replicates = stacked(tree, "posterior_predictive", "x")
    np.testing.assert_array_equal(replicates.sum(axis=-1), np.full((R, 20), 100))
    assert_within_monte_carlo(replicates, 100 * probabilities)
    assert "constant_data" not in tree.children  # counts: no mask, no standardisation


# ----------------------------------------------------------------------------- posterior trees


@pytest.fixture(scope="module")
def ppca_missing(data):
    return latentlab.PPCA(2).fit(data[1])


@pytest.fixture(scope="module")
def laplace_tree(ppca_missing, data):
    return quiet(
        ppca_missing.sample_posterior, data[1], method="laplace", num_samples=800, random_state=0
    )


def test_each_draw_replicates_data_from_its_own_parameters(laplace_tree):
    mu = stacked(laplace_tree, "posterior", "mu")
    replicate_means = stacked(laplace_tree, "posterior_predictive", "x").mean(axis=1)
    # replicated at the draw's own mean: their difference is the replicates' noise alone
    assert_within_monte_carlo(replicate_means - mu, np.zeros(D))
    for j in range(D):  # and draws from a fixed point would not follow mu at all
        assert np.corrcoef(mu[:, j], replicate_means[:, j])[0, 1] > 0.4


def test_flat_prior_tree_has_zero_log_prior_and_no_prior_draws(laplace_tree):
    assert {"prior", "prior_predictive"}.isdisjoint(laplace_tree.children)
    for name in ("W", "mu", "sigma2"):
        np.testing.assert_array_equal(laplace_tree["log_prior"][name].values, 0.0)
    assert laplace_tree["log_prior"]["W"].dims == ("chain", "draw")


def test_declared_priors_give_log_prior_and_prior_draws(ppca_missing, data):
    X = data[1]
    tree = quiet(
        ppca_missing.sample_posterior,
        X,
        method="laplace",
        num_samples=800,
        random_state=0,
        prior=True,
    )
    shift = tree["constant_data"]["x_shift"].values
    scale = float(tree["constant_data"]["scale"].values)
    np.testing.assert_allclose(shift, ppca_missing.fit_shift_)
    np.testing.assert_allclose(scale, ppca_missing.fit_scale_)
    # the declared priors, on the standardised data: W ~ N(0, 1), mu ~ N(0, 10^2),
    # sigma2 ~ LogNormal(0, 2); the log prior of the first draws computed by SciPy
    W, mu, sigma2 = (stacked(tree, "posterior", n)[:5] for n in ("W", "mu", "sigma2"))
    rotation = stacked(tree, "alignment", "rotation")[:5]
    W_raw = W @ np.swapaxes(rotation, -1, -2)  # the prior is rotation-invariant anyway
    np.testing.assert_allclose(
        stacked(tree, "log_prior", "W")[:5],
        norm.logpdf(W_raw / scale).sum(axis=(1, 2)),
        rtol=1e-9,
    )
    np.testing.assert_allclose(
        stacked(tree, "log_prior", "mu")[:5],
        norm(0, 10).logpdf((mu - shift) / scale).sum(axis=1),
        rtol=1e-9,
    )
    np.testing.assert_allclose(
        stacked(tree, "log_prior", "sigma2")[:5],
        lognorm(s=2.0).logpdf(sigma2 / scale**2),
        rtol=1e-9,
    )
    # prior draws in data units, and a data set replicated at each
    prior = {n: stacked(tree, "prior", n) for n in ("W", "mu", "sigma2")}
    assert prior["W"].shape == (800, D, 2)
    np.testing.assert_allclose(prior["W"].std() / scale, 1.0, atol=0.05)
    assert_within_monte_carlo(prior["mu"], shift)
    np.testing.assert_allclose(np.log(prior["sigma2"] / scale**2).std(), 2.0, atol=0.15)
    replicates = stacked(tree, "prior_predictive", "x")
    assert replicates.shape == (800, N, D)
    assert_within_monte_carlo(replicates.mean(axis=1) - prior["mu"], np.zeros(D))
    # ArviZ's prior-sensitivity check runs on it (psense_summary concatenates along a
    # dimension it names "component", which clashes with the loadings' own: select)
    sensitivity = az.psense(tree)
    assert np.all(np.isfinite(sensitivity["mu"].values))
    summary = az.psense_summary(tree, var_names=["mu", "sigma2"])
    assert len(summary) == D + 1


def test_improper_priors_leave_out_the_prior_groups(data):
    X = data[0]
    gm = latentlab.GaussianMixture(2, random_state=0).fit(X)  # flat on Cholesky factors
    tree = gm.to_datatree(X, n_replicates=10, random_state=0)
    assert {"prior", "prior_predictive"}.isdisjoint(tree.children)
    bpca = quiet(latentlab.BayesianPCA(2).fit, X)  # flat on mu and sigma2
    tree = bpca.to_datatree(X, n_replicates=10, random_state=0)
    assert {"prior", "prior_predictive"}.isdisjoint(tree.children)
    assert np.all(tree["log_prior"]["alpha"].values < 0)  # the ARD prior is on


def test_trees_follow_arviz_conventions(laplace_tree, ppca_missing, data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # from_dict's convention checks warn
        point = ppca_missing.to_datatree(data[1], n_replicates=20, random_state=0)
    for tree in (laplace_tree, point):
        for group, node in tree.children.items():
            dims = set(node.to_dataset().dims)
            if group in ("observed_data", "constant_data"):
                assert not dims & {"chain", "draw"}, group
            else:
                assert {"chain", "draw"} <= dims, group
        for group in ("posterior_predictive", "log_likelihood", "constant_data"):
            for dim in ("obs", "feature"):
                if dim in tree[group].dims:
                    np.testing.assert_array_equal(
                        tree[group][dim].values, tree["observed_data"][dim].values
                    )
        assert {"numpyro_version", "arviz_version", "model_settings"} <= set(tree.attrs)
        assert tree["posterior"].attrs["creation_library"] == "ArviZ"
    elpd = quiet(az.loo, laplace_tree, pointwise=True)
    assert elpd.elpd_i.shape == (N,)


def test_loo_pit_of_a_point_mass_is_the_empirical_pit(ppca_missing, data):
    X = data[1]
    tree = ppca_missing.to_datatree(X, n_replicates=200, random_state=0)
    pit = quiet(posterior.loo_pit, tree)["x"].values
    replicates = stacked(tree, "posterior_predictive", "x")
    # equal weights: the fraction of replicates below each value (continuous: no ties)
    expected = np.mean(replicates < X, axis=0)
    expected[np.isnan(X)] = np.nan
    np.testing.assert_allclose(pit, expected, atol=1e-9)


def test_loo_pit_of_posterior_draws_is_calibrated_and_masks_missing(laplace_tree, data):
    from scipy.stats import kstest

    pit = quiet(posterior.loo_pit, laplace_tree)["x"].values
    missing = np.isnan(data[1])
    np.testing.assert_array_equal(np.isnan(pit), missing)
    values = pit[~missing]
    assert np.all((values >= 0) & (values <= 1))
    assert kstest(values, "uniform").statistic < 0.08  # the model is the planted one


def test_arviz_ppc_plot_runs_on_the_tree(laplace_tree):
    plot = az.plot_ppc_dist(laplace_tree, num_samples=20, backend="matplotlib")
    assert plot is not None
    plt.close("all")


# ----------------------------------------------------------------------------- plots.ppc


def test_ppc_spectrum_flags_the_missing_component(data):
    X = data[1]  # rank 2 planted
    titles = {}
    for K in (1, 2):
        tree = latentlab.PPCA(K).fit(X).to_datatree(X, n_replicates=100, random_state=0)
        ax = plots.ppc(tree, n_replicates=100)
        assert len(ax.lines) == 101  # every replicate and the observed spectrum
        np.testing.assert_allclose(
            ax.lines[-1].get_ydata(), np.sort(np.linalg.eigvalsh(_pairwise_cov(X)))[::-1]
        )
        titles[K] = ax.get_title()
        plt.close("all")
    assert "eigenvalue 2, p = 0.00" in titles[1]
    p = float(titles[2].rsplit("p = ", 1)[1])
    assert 0.02 < p < 0.98


def _pairwise_cov(X):
    import pandas as pd

    return pd.DataFrame(X).cov().to_numpy()


def test_ppc_columns_draw_one_panel_per_column(laplace_tree):
    axes = plots.ppc(laplace_tree, kind="columns", n_replicates=10)
    assert len(axes) == D
    assert all(len(ax.patches) == 11 for ax in axes)  # 10 replicates + the observed
    axes = plots.ppc(laplace_tree, kind="columns", columns=[3], n_replicates=5)
    assert len(axes) == 1 and axes[0].get_title() == "3"
    plt.close("all")


def test_ppc_refuses_what_it_cannot_check(laplace_tree, ppca_missing, data):
    with pytest.raises(ValueError, match="kind"):
        plots.ppc(laplace_tree, kind="trace")
    with pytest.raises(ValueError, match="var_name"):
        plots.ppc(laplace_tree, var_name="y")
    with pytest.raises(ValueError, match="columns"):
        plots.ppc(laplace_tree, kind="columns", columns=[D])
    with pytest.raises(ValueError, match="n_replicates"):
        plots.ppc(laplace_tree, n_replicates=0)
    with pytest.raises(TypeError, match="DataTree"):
        plots.ppc(data[0])
    bare = quiet(
        ppca_missing.sample_posterior,
        data[1],
        method="laplace",
        num_samples=20,
        random_state=0,
        predictive=False,
    )
    assert "posterior_predictive" not in bare.children
    with pytest.raises(ValueError, match="posterior_predictive"):
        plots.ppc(bare)
    with pytest.raises(ValueError, match="posterior_predictive"):
        posterior.loo_pit(bare)
    with pytest.raises(ValueError, match="n_replicates"):
        ppca_missing.to_datatree(data[1], n_replicates=0)
    with pytest.raises(ValueError, match="predictive"):
        ppca_missing.sample_posterior(data[1], method="laplace", predictive="yes")
