"""latentlab.plots: each plot draws the right numbers on every model it accepts."""

import warnings

import matplotlib

matplotlib.use("Agg")

import arviz as az  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import EllipseCollection  # noqa: E402
from matplotlib.patches import Ellipse  # noqa: E402
from oracles import dense_conditional, hide_at_random, planted_factor_model  # noqa: E402
from scipy.stats import chi2, norm  # noqa: E402
from sklearn.base import BaseEstimator  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

from latentlab import (  # noqa: E402
    PCA,
    PPCA,
    BayesianPCA,
    FactorAnalysis,
    GaussianMixture,
    KernelPCA,
    SupervisedPCA,
    compare,
    plots,
)

# Shapes shared with tests/test_compare.py (d=25, rank 5) and tests/test_gmm.py
# (300 x 4, K=3): each compiled program is reused across the suite.
Q90 = chi2.ppf(0.9, df=2)  # squared radius of a 90% ellipse


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def data():
    X, _, _ = planted_factor_model(n=500, heteroscedastic=False, seed=0)
    return X


@pytest.fixture(scope="module")
def ppca(data):
    return PPCA(4, random_state=0).fit(data)


@pytest.fixture(scope="module")
def fa(data):
    return FactorAnalysis(5, random_state=0).fit(data)


@pytest.fixture(scope="module")
def bpca(data):
    return BayesianPCA(8, random_state=0).fit(data)


@pytest.fixture(scope="module")
def spca(data):
    X = data[:200]
    rng = np.random.default_rng(1)
    y = X @ rng.normal(size=X.shape[1]) / 10 + rng.normal(size=len(X))
    return SupervisedPCA(5, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def mixture_data():
    rng = np.random.default_rng(1)
    means = 1.5 * rng.normal(size=(3, 4))
    labels = rng.choice(3, size=300, p=[0.5, 0.3, 0.2])
    return means[labels] + rng.normal(size=(300, 4))


@pytest.fixture(scope="module")
def mixtures(mixture_data):
    return {
        ct: GaussianMixture(3, covariance_type=ct, random_state=0).fit(mixture_data)
        for ct in ("full", "tied", "diag", "spherical")
    }


def sample_spectrum(X):
    return np.linalg.eigvalsh(np.cov(X, rowvar=False, ddof=0))[::-1]


def bar_heights(container):
    return np.array([patch.get_height() for patch in container.patches])


# -- scree ------------------------------------------------------------------------------


def test_scree_ppca_shows_ml_solution_against_the_sample_spectrum(ppca, data):
    ax = plots.scree(ppca, data)
    (bars,) = ax.containers
    (floor,) = [line for line in ax.lines if line.get_linestyle() == "--"]
    (spectrum,) = [line for line in ax.lines if line.get_marker() == "o"]
    eigenvalues = sample_spectrum(data)
    np.testing.assert_allclose(spectrum.get_ydata(), eigenvalues, rtol=1e-10)
    # Tipping & Bishop: at the ML solution the kept variances are the top sample
    # eigenvalues and sigma2 is the mean of the discarded ones.  EM stops at a
    # per-row change of tol=1e-8, which leaves parameters within ~sqrt(tol) relative.
    np.testing.assert_allclose(bar_heights(bars), eigenvalues[:4], rtol=3e-4)
    assert floor.get_ydata()[0] == pytest.approx(eigenvalues[4:].mean(), rel=3e-4)
    assert ax.get_xlabel() == "component" and ax.get_ylabel() == "variance"


def test_scree_pca_uses_ddof1_eigenvalues_and_their_noise_floor(data):
    ax = plots.scree(PCA(5).fit(data))
    eigenvalues = np.linalg.eigvalsh(np.cov(data, rowvar=False, ddof=1))[::-1]
    np.testing.assert_allclose(bar_heights(ax.containers[0]), eigenvalues[:5], rtol=1e-10)
    (floor,) = ax.lines
    assert floor.get_ydata()[0] == pytest.approx(eigenvalues[5:].mean(), rel=1e-10)
    assert "ddof=1" in ax.get_ylabel()


def test_scree_bayesian_pca_shows_column_variances_and_pruning(bpca):
    ax = plots.scree(bpca)
    active, pruned = ax.containers
    column_variance = np.sum(bpca.params_["W"] ** 2, axis=0)
    assert len(active) == bpca.effective_rank_ == 5  # the planted rank
    assert len(pruned) == 3
    np.testing.assert_allclose(bar_heights(active), column_variance[:5], rtol=1e-12)
    (threshold,) = [line for line in ax.lines if line.get_linestyle() == ":"]
    (noise,) = [line for line in ax.lines if line.get_linestyle() == "--"]
    # pruned below ||w_k||^2 = prune_threshold * 2b, not tied to the noise variance
    assert threshold.get_ydata()[0] == pytest.approx(bpca.prune_level_, rel=1e-12)
    assert noise.get_ydata()[0] == pytest.approx(bpca.noise_variance_, rel=1e-12)
    assert "effective rank 5 of 8" in ax.get_title()


def test_scree_factor_analysis_stacks_communality_on_noise_variance(fa):
    ax = plots.scree(fa)
    explained, noise = ax.containers
    communality = np.sum(fa.components_**2, axis=0)
    np.testing.assert_allclose(bar_heights(explained), communality, rtol=1e-12)
    np.testing.assert_allclose(bar_heights(noise), fa.noise_variance_, rtol=1e-12)
    np.testing.assert_allclose([p.get_y() for p in noise.patches], communality, rtol=1e-12)
    # communality + psi is the model's variance of each feature
    np.testing.assert_allclose(
        communality + fa.noise_variance_, np.diag(fa.get_covariance()), rtol=1e-10
    )
    assert ax.get_xlabel() == "feature"


def test_scree_kernel_pca_shows_squared_singular_values(data):
    X = data[:100]
    ax = plots.scree(KernelPCA(4).fit(X))
    singular = np.linalg.svd(X - X.mean(axis=0), compute_uv=False)
    np.testing.assert_allclose(bar_heights(ax.containers[0]), singular[:4] ** 2, rtol=1e-8)


def test_scree_rejects_what_it_cannot_show(mixtures, spca, data):
    with pytest.raises(TypeError, match="scree cannot show GaussianMixture.*accepts PCA"):
        plots.scree(mixtures["full"])
    with pytest.raises(TypeError, match="scree cannot show SupervisedPCA"):
        plots.scree(spca)
    with pytest.raises(NotFittedError):
        plots.scree(PPCA(2))
    with pytest.raises(ValueError, match="takes no X"):
        plots.scree(KernelPCA(2).fit(data[:100]), data[:100])


# -- convergence ------------------------------------------------------------------------


class Traced(BaseEstimator):
    """A fitted-looking model with a given EM trace."""

    method = "em"

    def fit(self, trace):
        self.log_likelihoods_ = np.asarray(trace, dtype=float)
        self.converged_ = True
        return self


def test_convergence_draws_the_whole_trace_and_flags_no_decrease(fa, bpca, mixtures):
    # factor analysis: PPCA now starts at its closed-form optimum and stops at once
    ax = plots.convergence(fa)
    (trace,) = ax.lines
    np.testing.assert_array_equal(trace.get_ydata(), fa.log_likelihoods_)
    assert len(trace.get_xdata()) == fa.n_iter_ > 1
    assert "monotone" in ax.get_title() and ax.get_ylabel() == "log-likelihood"
    assert plots.convergence(bpca).get_ylabel() == "log joint density"
    assert len(plots.convergence(mixtures["diag"]).lines) == 1


def test_convergence_flags_each_decrease():
    trace = [-10.0, -5.0, -4.0, -4.5, -3.0, -3.0 - 1e-12, -2.0]  # one real drop, one round-off
    ax = plots.convergence(Traced().fit(trace))
    trace_line, drops = ax.lines
    np.testing.assert_array_equal(drops.get_xdata(), [4])
    assert "1 decrease(s)" in ax.get_title()


def test_convergence_rejects_closed_form_models(data):
    with pytest.raises(TypeError, match="convergence cannot show PCA"):
        plots.convergence(PCA(2).fit(data))


# -- latent scatter ---------------------------------------------------------------------


def test_latent_scatter_draws_posterior_means_and_ellipses(ppca, data):
    ax = plots.latent_scatter(ppca, data, dims=(0, 2))
    (points,) = ax.collections[:1]
    (ellipses,) = [c for c in ax.collections if isinstance(c, EllipseCollection)]
    # Posterior of z (Tipping & Bishop): M = W^T W + s2 I, mean M^-1 W^T (x - mu),
    # covariance s2 M^-1, diagonal for the canonical (orthogonal) loadings
    W, mu, s2 = ppca.params_["W"], ppca.params_["mu"], ppca.noise_variance_
    M = W.T @ W + s2 * np.eye(4)
    mean = np.linalg.solve(M, W.T @ (data - mu).T).T
    np.testing.assert_allclose(points.get_offsets(), mean[:, [0, 2]], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ellipses.get_offsets(), mean[:, [0, 2]], rtol=1e-8, atol=1e-10)
    sd = np.sqrt(s2 / np.diag(M))[[0, 2]]
    lengths = np.sort(np.c_[ellipses.get_widths(), ellipses.get_heights()], axis=1)
    np.testing.assert_allclose(lengths, np.tile(np.sort(2 * np.sqrt(Q90) * sd), (500, 1)))
    assert ax.get_xlabel() == "E[z0 | x]" and ax.get_ylabel() == "E[z2 | x]"


def ellipse_areas(ax):
    (ellipses,) = [c for c in ax.collections if isinstance(c, EllipseCollection)]
    return ellipses.get_widths() * ellipses.get_heights()


def test_latent_scatter_ellipses_widen_for_rows_with_missing_entries(ppca, data):
    X_missing, hidden = hide_at_random(data, 0.1, seed=0)
    complete = ellipse_areas(plots.latent_scatter(ppca, data))
    partial = ellipse_areas(plots.latent_scatter(ppca, X_missing))
    # fewer observed entries, a wider posterior (its covariance grows in Loewner order)
    some = hidden.any(axis=1)
    assert some.sum() > 100 and (~some).sum() > 10
    assert np.all(partial[some] > complete[some] * (1 + 1e-9))
    np.testing.assert_allclose(partial[~some], complete[~some], rtol=1e-10)


@pytest.mark.parametrize("name", ["fa", "bpca", "spca"])
def test_latent_scatter_accepts_every_gaussian_latent_model(name, request, data):
    est = request.getfixturevalue(name)
    X = data[: len(data) if name != "spca" else 200]
    ax = plots.latent_scatter(est, X, ellipses=False)
    assert len(ax.collections) == 1
    np.testing.assert_allclose(ax.collections[0].get_offsets(), est.transform(X)[:, :2])


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_latent_scatter_mixture_draws_component_ellipses(mixtures, mixture_data, covariance_type):
    est = mixtures[covariance_type]
    dims = (1, 3)
    ax = plots.latent_scatter(est, mixture_data, dims=dims)
    patches = [p for p in ax.patches if isinstance(p, Ellipse)]
    assert len(patches) == 3
    cov = est.covariances_
    if covariance_type == "full":
        full = cov
    elif covariance_type == "tied":
        full = np.broadcast_to(cov, (3, 4, 4))
    elif covariance_type == "diag":
        full = np.stack([np.diag(v) for v in cov])
    else:
        full = cov[:, None, None] * np.eye(4)
    for k, patch in enumerate(patches):
        eigenvalues = np.linalg.eigvalsh(full[k][np.ix_(dims, dims)])
        lengths = sorted([patch.width, patch.height])
        np.testing.assert_allclose(lengths, 2 * np.sqrt(Q90 * eigenvalues), rtol=1e-10)
        np.testing.assert_allclose(patch.center, est.means_[k, list(dims)], rtol=1e-12)
    # a row all but certain of its component wears that component's colour
    points = ax.collections[0]
    resp = est.predict_proba(mixture_data)
    sure = np.flatnonzero(resp.max(axis=1) > 0.999)[0]
    palette = matplotlib.colormaps["tab10"](np.arange(3))[:, :3]
    np.testing.assert_allclose(
        points.get_facecolors()[sure, :3], palette[resp[sure].argmax()], atol=2e-3
    )
    assert ax.get_xlabel() == "x1" and ax.get_ylabel() == "x3"


def test_latent_scatter_rejects_what_it_cannot_show(ppca, data):
    with pytest.raises(TypeError, match="latent_scatter cannot show PCA.*accepts PPCA"):
        plots.latent_scatter(PCA(2).fit(data), data)
    with pytest.raises(ValueError, match="dims must be two different integers in \\[0, 4\\)"):
        plots.latent_scatter(ppca, data, dims=(0, 4))
    with pytest.raises(ValueError, match="dims must be"):
        plots.latent_scatter(ppca, data, dims=(1, 1))
    with pytest.raises(ValueError, match="level"):
        plots.latent_scatter(ppca, data, level=1.5)


# -- imputation -------------------------------------------------------------------------


def test_imputation_intervals_are_gaussian_conditionals(ppca, data):
    X_missing, hidden = hide_at_random(data, 0.1, seed=1)
    column = 4
    ax = plots.imputation(ppca, X_missing, column, level=0.9, X_true=data)
    container = ax.containers[0]
    rows = np.flatnonzero(hidden[:, column])
    np.testing.assert_array_equal(container.lines[0].get_xdata(), rows)
    # oracle: condition N(mu, C) on each row's observed entries, densely
    mean, sd = dense_conditional(X_missing[rows], ppca.mean_, ppca.get_covariance())
    half = norm.ppf(0.95) * sd[:, column]
    segments = np.array(container.lines[2][0].get_segments())  # (rows, 2 ends, (x, y))
    np.testing.assert_allclose(segments[:, 0, 1], mean[:, column] - half, rtol=1e-7)
    np.testing.assert_allclose(segments[:, 1, 1], mean[:, column] + half, rtol=1e-7)
    observed, truth = ax.collections[0], ax.collections[-1]
    assert len(observed.get_offsets()) == len(data) - len(rows)
    np.testing.assert_array_equal(truth.get_offsets()[:, 1], data[rows, column])
    assert f"of {len(rows)} inside" in ax.get_title()


def test_imputation_of_a_mixture_uses_its_mixture_quantiles(mixtures, mixture_data):
    est = mixtures["full"]
    X_missing, hidden = hide_at_random(mixture_data, 0.2, seed=2)
    ax = plots.imputation(est, X_missing, 0)
    lower, upper = est.impute_interval(X_missing, level=0.9)
    segments = ax.containers[0].lines[2][0].get_segments()
    rows = hidden[:, 0]
    np.testing.assert_allclose([s[0, 1] for s in segments], lower[rows, 0], rtol=1e-12)
    np.testing.assert_allclose([s[1, 1] for s in segments], upper[rows, 0], rtol=1e-12)


class MeanImputer(BaseEstimator):
    """Column means with a given sd: a model with impute but no impute_interval."""

    def fit(self, X):
        self.mean_ = np.nanmean(X, axis=0)
        return self

    def impute(self, X, return_std=False):
        missing = np.isnan(X)
        filled = np.where(missing, self.mean_, X)
        return filled, np.where(missing, 2.0, 0.0)


def test_imputation_falls_back_to_mean_plus_minus_z_sd(data):
    X_missing, hidden = hide_at_random(data[:50], 0.2, seed=3)
    est = MeanImputer().fit(X_missing)
    ax = plots.imputation(est, X_missing, 1, level=0.8)
    segments = ax.containers[0].lines[2][0].get_segments()
    half = norm.ppf(0.9) * 2.0
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in segments], 2 * half, rtol=1e-12)


def test_imputation_rejects_bad_requests(ppca, data):
    X_missing, _ = hide_at_random(data, 0.1, seed=1)
    with pytest.raises(TypeError, match="imputation cannot show KernelPCA"):
        plots.imputation(KernelPCA(2).fit(data[:50]), X_missing, 0)
    with pytest.raises(ValueError, match="no missing entries"):
        plots.imputation(ppca, data, 0)
    with pytest.raises(ValueError, match="out of range"):
        plots.imputation(ppca, X_missing, 25)
    with pytest.raises(ValueError, match="X_true must have"):
        plots.imputation(ppca, X_missing, 0, X_true=data[:10])


# -- comparison -------------------------------------------------------------------------


def test_comparison_plots_each_family_against_k_with_standard_errors(data):
    with pytest.warns(UserWarning, match="largest K of its grid"):  # K = 4, 5: planted 5
        table = compare(
            [PPCA(4, random_state=0), PPCA(5, random_state=0), FactorAnalysis(5, random_state=0)],
            data,
            cv=5,
        )
    ax = plots.comparison(table)
    bars = {container.get_label(): container for container in ax.containers}
    assert set(bars) == {"PPCA", "FactorAnalysis"}
    ppca_bars = bars["PPCA"]
    np.testing.assert_array_equal(ppca_bars.lines[0].get_xdata(), [4, 5])
    ppca_rows = table[table["family"] == "PPCA"].sort_values("K")
    np.testing.assert_allclose(ppca_bars.lines[0].get_ydata(), ppca_rows["heldout_loglik"])
    spans = [s[1, 1] - s[0, 1] for s in ppca_bars.lines[2][0].get_segments()]
    # the paired SE of the difference from the best, as the table's near_best verdict
    # (the fold-to-fold heldout_se is wider and made the picture contradict the table)
    np.testing.assert_allclose(spans, 2 * ppca_rows["heldout_se_diff"])
    assert (ppca_rows["heldout_se_diff"] < ppca_rows["heldout_se"]).any()
    (star,) = [line for line in ax.lines if line.get_marker() == "*"]
    assert star.get_xdata()[0] == table["K"].iloc[0]  # compare's best row
    assert star.get_label() == f"best: {table.index[0]}"
    assert ax.get_xlabel() == "K (number of components)"


def test_comparison_marks_the_lowest_bic():
    table = pd.DataFrame(
        {"family": ["A", "A", "A", "B"], "K": [1, 2, 3, 2], "BIC": [10.0, 7.0, 9.0, 8.0]},
        index=["a1", "a2", "a3", "b2"],
    )
    ax = plots.comparison(table, "BIC")
    assert len(ax.containers) == 2
    (star,) = [line for line in ax.lines if line.get_marker() == "*"]
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (2, 7.0)
    assert "lower is better" in ax.get_ylabel()
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['heldout_loglik'\]"):
        plots.comparison(table)
    with pytest.raises(TypeError, match="DataFrame of latentlab.compare"):
        plots.comparison(table.to_dict())


# -- posterior of loadings -------------------------------------------------------------


def rotated_draws(W, n_chains=2, n_draws=200, noise=0.05, seed=0):
    """Draws W R_s + noise with a random orthogonal R_s (reflections included) each."""
    rng = np.random.default_rng(seed)
    d, K = W.shape
    out = np.empty((n_chains, n_draws, d, K))
    for c in range(n_chains):
        for s in range(n_draws):
            Q, _ = np.linalg.qr(rng.normal(size=(K, K)))
            out[c, s] = (W + noise * rng.normal(size=W.shape)) @ Q
    return out


def errorbar_summary(ax):
    container = ax.containers[0]
    mean = container.lines[0].get_ydata()
    segments = container.lines[2][0].get_segments()
    return mean, np.array([s[1, 1] - s[0, 1] for s in segments])


def test_loadings_posterior_aligns_rotated_draws_onto_the_reference():
    W = np.random.default_rng(5).normal(size=(6, 2)) * 2
    tree = az.from_dict({"posterior": {"W": rotated_draws(W)}})
    ax = plots.loadings_posterior(tree, component=1, reference=W)
    mean, width = errorbar_summary(ax)
    np.testing.assert_allclose(mean, W[:, 1], atol=0.03)
    assert width.max() < 0.3  # about 2 x 1.645 x 0.05 plus rotation jitter
    np.testing.assert_array_equal(ax.collections[-1].get_offsets()[:, 1], W[:, 1])
    assert "rotated onto the reference" in ax.get_title()


def test_loadings_posterior_without_reference_uses_procrustes_mean():
    W = np.random.default_rng(5).normal(size=(6, 2)) * 2
    draws = rotated_draws(W)
    tree = az.from_dict({"posterior": {"W": draws}})
    mean, width = errorbar_summary(plots.loadings_posterior(tree, component=0))
    assert width.max() < 0.3
    # the mean frame is W up to one rotation: the same column norms overall
    assert np.sum(mean**2) <= np.sum(W**2) + 0.1
    raw = draws[..., 0].reshape(-1, 6)
    assert np.ptp(np.percentile(raw, [5, 95], axis=0), axis=0).min() > 1.0  # unaligned spread
    # a tree that says it is aligned is drawn as it is
    tree.attrs["aligned"] = "procrustes"
    raw_mean, _ = errorbar_summary(plots.loadings_posterior(tree, component=0))
    np.testing.assert_allclose(raw_mean, raw.mean(axis=0))


def test_loadings_posterior_rejects_bad_input():
    tree = az.from_dict({"posterior": {"W": np.zeros((1, 10, 4, 2)), "mu": np.zeros((1, 10))}})
    with pytest.raises(TypeError, match="xarray DataTree"):
        plots.loadings_posterior({"W": np.zeros((1, 10, 4, 2))})
    with pytest.raises(ValueError, match="no variable 'Wx'"):
        plots.loadings_posterior(tree, var_name="Wx")
    with pytest.raises(ValueError, match=r"dims \(chain, draw, d, K\)"):
        plots.loadings_posterior(tree, var_name="mu")
    with pytest.raises(ValueError, match="component=2 is out of range"):
        plots.loadings_posterior(tree, component=2)
    with pytest.raises(ValueError, match="reference must have shape"):
        plots.loadings_posterior(tree, reference=np.zeros((3, 2)))


# -- what a reader sees ------------------------------------------------------------------


def visible_ticks(axis, limits):
    axis.figure.canvas.draw()
    ticks = np.asarray(axis.get_majorticklocs())
    low, high = sorted(limits)
    return ticks[(ticks >= low - 1e-9) & (ticks <= high + 1e-9)]


def test_count_axes_have_integer_ticks(ppca, fa, data):
    """K, component, iteration and row axes never show ticks such as K = 1.25."""
    table = pd.DataFrame(
        {"family": ["A", "A", "A"], "K": [1, 2, 3], "heldout_loglik": [-3.0, -2.8, -2.7]},
        index=["a1", "a2", "a3"],
    )
    X_missing, _ = hide_at_random(data, 0.1, seed=1)
    axes = [
        plots.comparison(table),
        plots.scree(ppca, data),
        plots.scree(PCA(2).fit(data)),
        plots.convergence(fa),
        plots.imputation(ppca, X_missing, 4),
    ]
    for ax in axes:
        ticks = visible_ticks(ax.xaxis, ax.get_xlim())
        assert len(ticks) >= 2, ax.get_title()
        np.testing.assert_array_equal(ticks, np.round(ticks), err_msg=ax.get_title())


def test_factor_analysis_scree_keeps_the_tallest_bar_inside_the_frame():
    """Iris, one factor: the petal length's small psi sits on a communality of 3.1; the
    stacked bars' sticky edges used to pin the frame's top to it, hiding psi."""
    from sklearn.datasets import load_iris

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a Heywood case on that feature: the point here
        fa = FactorAnalysis(1, random_state=0).fit(load_iris().data)
    ax = plots.scree(fa)
    total = np.sum(fa.components_**2, axis=0) + fa.noise_variance_
    assert ax.get_ylim()[1] > 1.01 * total.max()


def ellipse_extents(est, X, dims=(0, 1), level=0.9):
    mean, cov = est.posterior_latent(X)
    half = np.sqrt(chi2.ppf(level, 2) * np.stack([cov[:, d, d] for d in dims], axis=1))
    centre = mean[:, list(dims)]
    return centre - half, centre + half


def test_latent_scatter_limits_hold_every_ellipse(ppca, data):
    """The axes hold every posterior ellipse whole (its extent along x is
    r sqrt(S_xx), r^2 the chi-square quantile), with or without missing entries."""
    X_missing, _ = hide_at_random(data, 0.3, seed=2)
    for X in (data, X_missing):
        ax = plots.latent_scatter(ppca, X)
        low, high = ellipse_extents(ppca, X)
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert x0 <= low[:, 0].min() and high[:, 0].max() <= x1
        assert y0 <= low[:, 1].min() and high[:, 1].max() <= y1
        plt.close("all")


def test_latent_scatter_colours_rows_by_group_with_a_legend(ppca, data):
    groups = np.where(data[:, 0] > 0, "high", "low")
    mean = ppca.transform(data)
    for kwargs in ({"c": groups}, {"hue": pd.Series(groups, name="x0 sign")}):
        ax = plots.latent_scatter(ppca, data, **kwargs)
        points = [c for c in ax.collections if not isinstance(c, EllipseCollection)]
        assert [p.get_label() for p in points] == ["high", "low"]
        palette = matplotlib.colormaps["tab10"](np.arange(2))
        for i, (group, collection) in enumerate(zip(["high", "low"], points, strict=True)):
            np.testing.assert_allclose(collection.get_offsets(), mean[groups == group, :2])
            np.testing.assert_allclose(collection.get_facecolors()[0], palette[i])
        legend = ax.get_legend()
        assert [t.get_text() for t in legend.get_texts()] == ["high", "low"]
        if "hue" in kwargs:
            assert legend.get_title().get_text() == "x0 sign"
        # each row's ellipse wears its group's colour
        (ellipses,) = [c for c in ax.collections if isinstance(c, EllipseCollection)]
        edges = ellipses.get_edgecolors()[:, :3]
        np.testing.assert_allclose(edges, palette[(groups == "low").astype(int)][:, :3])
        plt.close("all")


def test_latent_scatter_colours_rows_by_a_number_with_a_colorbar(
    ppca, data, mixtures, mixture_data
):
    value = data[:, 1]
    ax = plots.latent_scatter(ppca, data, c=value, ellipses=False)
    (points,) = ax.collections
    expected = matplotlib.colormaps["viridis"]((value - value.min()) / np.ptp(value))
    np.testing.assert_allclose(points.get_facecolors(), expected, atol=1e-2)
    assert len(ax.figure.axes) == 2  # the colorbar's own axes
    # a mixture: rows coloured by the given labels, with a legend, not by responsibility
    labels = np.arange(len(mixture_data)) % 3
    ax = plots.latent_scatter(mixtures["full"], mixture_data, c=labels)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["0", "1", "2"]
    assert "coloured by c" in ax.get_title()


def test_plots_name_the_problem_with_bad_input(ppca, data):
    X_nan = data.copy()
    X_nan[3, 2] = np.nan
    with pytest.raises(ValueError, match="scree needs complete data: X has 1 missing entries"):
        plots.scree(ppca, X_nan)
    with pytest.raises(ValueError, match=r"X must have shape \(n_samples, 25\), got shape"):
        plots.scree(ppca, data[:, :3])
    with pytest.raises(ValueError, match=r"c/hue must have one value per row of X \(500\)"):
        plots.latent_scatter(ppca, data, c=np.zeros(10))
    with pytest.raises(ValueError, match="give c or hue"):
        plots.latent_scatter(ppca, data, c=np.zeros(500), hue=np.zeros(500))
    with pytest.raises(ValueError, match="must be finite"):
        plots.latent_scatter(ppca, data, c=np.full(500, np.nan))


def test_loadings_posterior_takes_the_fitted_model_as_reference(ppca, mixtures):
    W = ppca.params_["W"]
    tree = az.from_dict({"posterior": {"W": rotated_draws(W, n_draws=50)}})
    ax = plots.loadings_posterior(tree, component=1, reference=ppca)
    mean, _ = errorbar_summary(ax)
    np.testing.assert_allclose(mean, W[:, 1], atol=0.03)
    np.testing.assert_array_equal(ax.collections[-1].get_offsets()[:, 1], W[:, 1])
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [f"x{j}" for j in range(W.shape[0])]
    with pytest.raises(ValueError, match=r"GaussianMixture has no params_\['W'\]"):
        plots.loadings_posterior(tree, reference=mixtures["full"])
    with pytest.raises(ValueError, match="reference must be a"):
        plots.loadings_posterior(tree, reference="PPCA")


def test_parallel_analysis_plots_observed_against_the_reference():
    from latentlab.psychometrics import parallel_analysis

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2)) @ rng.normal(size=(2, 8)) + rng.normal(size=(300, 8))
    table = parallel_analysis(X, n_iter=20, resample=True, random_state=0)
    ax = plots.parallel_analysis(table)
    lines = {line.get_label(): line for line in ax.get_lines()}
    observed = lines["observed (SMC-reduced correlations)"]
    np.testing.assert_allclose(observed.get_ydata(), table["observed_factors"])
    retained = lines[f"retained: {table.attrs['n_factors']}"]
    assert len(retained.get_xdata()) == table.attrs["n_factors"] == 2
    np.testing.assert_allclose(
        lines["simulated data, 95% quantile"].get_ydata(), table["simulated_factors_quantile"]
    )
    assert "resampled data, 95% quantile" in lines
    ax = plots.parallel_analysis(table, kind="components")
    assert "observed (correlations)" in {line.get_label() for line in ax.get_lines()}
    with pytest.raises(TypeError, match="parallel_analysis"):
        plots.parallel_analysis(table.to_numpy())
    with pytest.raises(ValueError, match="kind"):
        plots.parallel_analysis(table, kind="both")
    only = parallel_analysis(X, kind="pc", n_iter=5, random_state=0)
    with pytest.raises(ValueError, match="no eigenvalues of factors"):
        plots.parallel_analysis(only)
