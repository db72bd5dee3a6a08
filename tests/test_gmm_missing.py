"""Gaussian mixtures with missing entries: exact observed-data likelihood, EM,
the declaration, imputation, intervals and draws, against independent computations."""

import jax
import numpy as np
import pytest
from numpyro.infer.util import log_likelihood
from oracles import hide_at_random, is_monotone
from scipy.special import logsumexp, ndtr
from scipy.stats import multivariate_normal
from test_gmm import (
    COVARIANCE_TYPES,
    D,
    K,
    assert_same_fit,
    fit_with_and_without_padding,
    planted_mixture,
)

from latentlab import GaussianMixture


def dense_mixture_loglik(X, weights, means, covariances):
    """log sum_k w_k N(x_o | mu_ko, Sigma_k,oo), row by row with SciPy."""
    out = []
    for row in X:
        o = ~np.isnan(row)
        terms = [
            np.log(w) + multivariate_normal(m[o], S[np.ix_(o, o)]).logpdf(row[o])
            for w, m, S in zip(weights, means, covariances, strict=True)
        ]
        out.append(logsumexp(terms))
    return np.array(out)


def full_covariances(est):
    cov = est.covariances_
    d = est.n_features_in_
    if est.covariance_type == "tied":
        return np.broadcast_to(cov, (K, d, d))
    if est.covariance_type == "diag":
        return np.stack([np.diag(c) for c in cov])
    if est.covariance_type == "spherical":
        return cov[:, None, None] * np.eye(d)
    return cov


def conditional_by_blocks(est, row):
    """p(k | x_o), E[x_m | x_o, k] and Cov[x_m | x_o, k] with explicit block algebra."""
    o = ~np.isnan(row)
    m = ~o
    covs = full_covariances(est)
    log_w = [
        np.log(w) + multivariate_normal(mu[o], S[np.ix_(o, o)]).logpdf(row[o])
        for w, mu, S in zip(est.weights_, est.means_, covs, strict=True)
    ]
    resp = np.exp(np.array(log_w) - logsumexp(log_w))
    means, variances = [], []
    for mu, S in zip(est.means_, covs, strict=True):
        gain = S[np.ix_(m, o)] @ np.linalg.inv(S[np.ix_(o, o)])
        means.append(mu[m] + gain @ (row[o] - mu[o]))
        variances.append(S[np.ix_(m, m)] - gain @ S[np.ix_(o, m)])
    return resp, np.array(means), np.array(variances)


@pytest.fixture(scope="module")
def data():
    X, labels, means = planted_mixture(n=300, seed=3, separation=3.0)
    X_missing, hidden = hide_at_random(X, 0.15, seed=4)
    return X, X_missing, hidden, means


@pytest.fixture(scope="module")
def fits(data):
    """Maximum-likelihood fits (covariance_prior=0: "auto" would penalise full ones)."""
    _, X_missing, _, _ = data
    return {
        ct: GaussianMixture(
            K, covariance_type=ct, covariance_prior=0.0, n_init=2, random_state=0
        ).fit(X_missing)
        for ct in COVARIANCE_TYPES
    }


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_observed_data_loglik_matches_dense_computation(data, fits, covariance_type):
    _, X_missing, _, _ = data
    est = fits[covariance_type]
    dense = dense_mixture_loglik(X_missing, est.weights_, est.means_, full_covariances(est))
    np.testing.assert_allclose(est.score_samples(X_missing), dense, rtol=1e-10)
    # the fit's objective is the observed-data log-likelihood at the fitted parameters
    np.testing.assert_allclose(est.log_likelihoods_[-1], dense.sum(), rtol=1e-10)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_em_with_missing_entries_never_decreases_loglik(fits, covariance_type):
    trace = fits[covariance_type].log_likelihoods_
    assert len(trace) >= 2 and fits[covariance_type].converged_
    assert is_monotone(trace)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_declaration_gives_the_observed_data_loglik(data, fits, covariance_type):
    _, X_missing, _, _ = data
    est = fits[covariance_type]
    with jax.enable_x64(True):
        params = {k: v[None] for k, v in est.params_.items()}
        ll = log_likelihood(est.model_, params, X_missing)
        total = float(sum(np.asarray(v, dtype=np.float64).sum() for v in ll.values()))
    assert total == pytest.approx(len(X_missing) * est.score(X_missing), rel=1e-10)


def test_planted_means_recovered_with_missing_entries(data, fits):
    _, _, _, planted = data
    est = fits["full"]
    # relabel: nearest planted mean for each fitted one (well separated here)
    order = [np.argmin(np.linalg.norm(planted - m, axis=1)) for m in est.means_]
    assert sorted(order) == list(range(K))
    assert np.max(np.abs(est.means_ - planted[order])) < 0.5


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_impute_is_the_posterior_weighted_conditional_mean(data, fits, covariance_type):
    _, X_missing, hidden, _ = data
    est = fits[covariance_type]
    filled, std = est.impute(X_missing, return_std=True)
    np.testing.assert_array_equal(filled[~hidden], X_missing[~hidden])
    assert np.all(std[~hidden] == 0) and np.all(std[hidden] > 0)
    for i in np.flatnonzero(hidden.any(axis=1))[:15]:
        resp, means, covs = conditional_by_blocks(est, X_missing[i])
        mean = resp @ means
        var = resp @ (np.array([np.diag(c) for c in covs]) + means**2) - mean**2
        np.testing.assert_allclose(filled[i, hidden[i]], mean, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(std[i, hidden[i]], np.sqrt(var), rtol=1e-7)


def test_intervals_are_mixture_quantiles(data, fits):
    _, X_missing, hidden, _ = data
    est = fits["full"]
    lower, upper = est.impute_interval(X_missing, level=0.9)
    np.testing.assert_array_equal(lower[~hidden], X_missing[~hidden])
    for i in np.flatnonzero(hidden.any(axis=1))[:15]:
        resp, means, covs = conditional_by_blocks(est, X_missing[i])
        sd = np.sqrt(np.array([np.diag(c) for c in covs]))
        for q, p in ((lower[i, hidden[i]], 0.05), (upper[i, hidden[i]], 0.95)):
            cdf = resp @ ndtr((q - means) / sd)
            np.testing.assert_allclose(cdf, p, atol=1e-9)


def test_intervals_cover_at_their_level_on_data_from_the_model(fits):
    est = fits["full"]
    X, _ = est.sample(2000, random_state=5)
    X_missing, hidden = hide_at_random(X, 0.25, seed=6)
    lower, upper = est.impute_interval(X_missing, level=0.9)
    inside = (X[hidden] >= lower[hidden]) & (X[hidden] <= upper[hidden])
    # ~2000 hidden values, but rows share components: allow ~4 binomial SEs
    se = np.sqrt(0.9 * 0.1 / hidden.sum())
    assert abs(inside.mean() - 0.9) < 4 * se + 0.005


def test_draws_centre_on_the_conditional_mean_with_its_spread(data, fits):
    _, X_missing, hidden, _ = data
    est = fits["full"]
    n_draws = 400
    draws = est.sample_imputations(X_missing, n_imputations=n_draws, random_state=0)
    assert draws.shape == (n_draws, *X_missing.shape)
    np.testing.assert_array_equal(
        draws[:, ~hidden], np.broadcast_to(X_missing[~hidden], (n_draws, (~hidden).sum()))
    )
    filled, std = est.impute(X_missing, return_std=True)
    z = (draws.mean(axis=0)[hidden] - filled[hidden]) / (std[hidden] / np.sqrt(n_draws))
    assert np.mean(np.abs(z) < 3.0) > 0.98
    np.testing.assert_allclose(draws.std(axis=0)[hidden].mean(), std[hidden].mean(), rtol=0.05)
    assert np.all(draws[0][hidden] != draws[1][hidden])


def test_predict_uses_the_observed_entries(data, fits):
    X, X_missing, hidden, _ = data
    est = fits["full"]
    proba = est.predict_proba(X_missing)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    # rows without NaN get the same answer as on complete data
    complete = ~hidden.any(axis=1)
    np.testing.assert_allclose(proba[complete], est.predict_proba(X[complete]), rtol=1e-10)
    empty = np.full((1, X.shape[1]), np.nan)
    np.testing.assert_allclose(est.predict_proba(empty)[0], est.weights_, rtol=1e-12)
    with pytest.raises(ValueError, match="every entry missing"):
        est.score_samples(empty)


@pytest.mark.parametrize("covariance_type", ["full", "diag"])  # both conditional paths
def test_padding_components_change_nothing_with_missing_entries(
    monkeypatch, data, fits, covariance_type
):
    _, X_missing, _, _ = data
    # full covariances: with "auto"'s penalty on (fits is maximum likelihood)
    kwargs = dict(covariance_type=covariance_type, n_init=2, random_state=0)
    padded, plain = fit_with_and_without_padding(monkeypatch, X_missing, **kwargs)
    assert_same_fit(padded, plain, X_missing)
    np.testing.assert_allclose(padded.impute(X_missing), plain.impute(X_missing), rtol=1e-10)


# -- MAP / SVI on the declaration ------------------------------------------------------


@pytest.fixture(scope="module")
def em_complete(data):
    return GaussianMixture(K, random_state=0).fit(data[0])


def test_map_on_the_declaration_reaches_the_em_optimum(data, em_complete):
    X = data[0]
    # Adam on the declaration (priors off) from EM's own start
    fit = GaussianMixture(K, method="map", random_state=0, svi_steps=2000).fit(X)
    assert fit.score(X) == pytest.approx(em_complete.score(X), rel=1e-4)
    # the trace ends at the returned parameters, in the data's units
    assert fit.log_likelihoods_[-1] == pytest.approx(len(X) * fit.score(X), rel=1e-10)


# -- data far from the origin ----------------------------------------------------------

OFFSET = 1e8  # float32 spacing there is 8


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_uncentred_data_keeps_its_digits(data, fits, covariance_type, dtype):
    """A fit to X + 1e8 is the float64 fit to X shifted by 1e8 (the likelihood is
    translation-equivariant), to float32 round-off: centring and un-centring happen in
    float64 on the host.  Before, float32 means were off by ~2, imputations by ~50,
    log-likelihoods by ~27, and even float64 imputation sds lost every digit to
    E[x^2] - E[x]^2 at 1e16."""
    _, X_missing, hidden, _ = data
    ref = fits[covariance_type]  # float64 on X itself
    est = GaussianMixture(
        K,
        covariance_type=covariance_type,
        covariance_prior=0.0,
        n_init=2,
        random_state=0,
        dtype=dtype,
    )
    X_far = X_missing + OFFSET
    est.fit(X_far)
    # the starts may converge to the same optimum under another labelling
    order = [int(np.argmin(np.linalg.norm(ref.means_ - (m - OFFSET), axis=1))) for m in est.means_]
    assert sorted(order) == list(range(K))
    # float64: X + 1e8 itself is rounded to 1.5e-8
    tol = 1e-4 if dtype == "float32" else 1e-6
    np.testing.assert_allclose(est.means_ - OFFSET, ref.means_[order], atol=tol)
    np.testing.assert_allclose(est.weights_, ref.weights_[order], atol=tol)
    np.testing.assert_allclose(est.covariances_, ref.covariances_[order], atol=tol)
    np.testing.assert_allclose(
        est.weights_ @ est.means_ - OFFSET, ref.weights_ @ ref.means_, atol=tol
    )
    np.testing.assert_allclose(est.score_samples(X_far), ref.score_samples(X_missing), atol=tol)
    np.testing.assert_allclose(
        est.predict_proba(X_far), ref.predict_proba(X_missing)[:, order], atol=tol
    )
    filled, std = est.impute(X_far, return_std=True)
    ref_filled, ref_std = ref.impute(X_missing, return_std=True)
    np.testing.assert_allclose(filled - OFFSET, ref_filled, atol=tol)
    np.testing.assert_allclose(std, ref_std, atol=tol)
    lower, upper = est.impute_interval(X_far)
    ref_lower, ref_upper = ref.impute_interval(X_missing)
    np.testing.assert_allclose(lower - OFFSET, ref_lower, atol=10 * tol)
    np.testing.assert_allclose(upper - OFFSET, ref_upper, atol=10 * tol)
    # draws: each component's draws centre on its mean with its spread
    X_new, labels = est.sample(3000, random_state=0)
    for k in range(K):
        rows = X_new[labels == k] - OFFSET
        sd = np.sqrt(
            np.diagonal(ref.covariances_[order][k])
            if covariance_type == "full"
            else ref.covariances_[order][k]
        )
        np.testing.assert_allclose(
            rows.mean(axis=0), ref.means_[order][k], atol=5 * sd.max() / np.sqrt(len(rows))
        )
        np.testing.assert_allclose(rows.std(axis=0), sd, rtol=0.15)


# -- units of the features ---------------------------------------------------------------

SCALE = np.array([1e-8, 1e8, 3.0, 1e-3])  # per feature; D = 4
SHIFT = SCALE * np.array([1e7, -1e3, 0.0, 5e6])


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag"])
def test_fit_is_equivariant_to_the_units_of_the_features(data, covariance_type):
    """x_j -> s_j x_j + c_j with s from 1e-8 to 1e8: the mixture is equivariant, and so
    is the fit (default k-means start, SQUAREM) -- each row's log-likelihood moves by
    -sum of log s_j over its observed entries, means and covariances and imputations
    map through the same affine map, responsibilities are unchanged.  Before, the
    covariance floor was 10 eps times the *mean* feature variance (~20 here), which
    swamped the 1e-8 feature, and EM ran in the data's units: log-likelihoods were off
    by up to 33 nats per row."""
    _, X, _, _ = data  # with NaN
    X_far = X * SCALE + SHIFT
    settings = dict(
        covariance_type=covariance_type, covariance_prior=0.0, reg_covar=0.0, random_state=0
    )
    ref = GaussianMixture(K, **settings).fit(X)
    est = GaussianMixture(K, **settings).fit(X_far)
    log_jacobian = np.where(np.isnan(X), 0.0, np.log(SCALE)).sum(axis=1)
    np.testing.assert_allclose(
        est.score_samples(X_far) + log_jacobian, ref.score_samples(X), atol=1e-6
    )
    n = len(X)
    assert est.log_likelihoods_[-1] == pytest.approx(n * est.score(X_far), rel=1e-12)
    assert est.log_likelihoods_[-1] + log_jacobian.sum() == pytest.approx(
        ref.log_likelihoods_[-1], abs=1e-6 * n
    )
    np.testing.assert_allclose(est.predict_proba(X_far), ref.predict_proba(X), atol=1e-6)
    np.testing.assert_allclose(est.weights_, ref.weights_, atol=1e-6)
    np.testing.assert_allclose((est.means_ - SHIFT) / SCALE, ref.means_, atol=1e-6)
    unit = np.outer(SCALE, SCALE) if covariance_type != "diag" else SCALE**2
    np.testing.assert_allclose(est.covariances_ / unit, ref.covariances_, atol=1e-6)
    filled, std = est.impute(X_far, return_std=True)
    ref_filled, ref_std = ref.impute(X, return_std=True)
    np.testing.assert_allclose((filled - SHIFT) / SCALE, ref_filled, atol=1e-6)
    np.testing.assert_allclose(std / SCALE, ref_std, atol=1e-6)


@pytest.mark.parametrize("covariance_type", ["full", "tied"])
def test_absolute_floor_across_feature_scales_keeps_em_monotone(data, covariance_type):
    """With the default reg_covar (a variance in the data's units) on features at 1e-8
    to 1e8, the floor in standardised units, reg_covar / s_j^2, runs from 1e10 (it
    swamps the 1e-8 feature's variance, 1e-16) down to round-off (the 1e8 feature).
    The constrained M-step must stay exact there: taking the floored eigenpairs from
    an eigendecomposition of G^{-1/2} S G^{-1/2} (norm ~1e14) instead lost up to 5e-4
    nats per SQUAREM cycle.  Every covariance respects Sigma >= reg_covar I."""
    _, X, _, _ = data
    X_far = X * SCALE + SHIFT
    est = GaussianMixture(
        K, covariance_type=covariance_type, covariance_prior=0.0, random_state=0
    ).fit(X_far)
    trace = est.log_likelihoods_
    assert is_monotone(trace), np.diff(trace).min()
    assert trace[-1] == pytest.approx(len(X) * est.score(X_far), rel=1e-12)
    # the 1e-8 feature sits at the floor: its variance is reg_covar to round-off
    cov = est.covariances_.reshape(-1, D, D)
    np.testing.assert_allclose(cov[:, 0, 0], est.reg_covar, rtol=1e-9)
    # Sigma - reg_covar I >= 0, checked in units where it is well scaled
    unit = np.sqrt(np.maximum(np.diagonal(cov, axis1=1, axis2=2), est.reg_covar))
    excess = (cov - est.reg_covar * np.eye(D)) / (unit[:, :, None] * unit[:, None, :])
    assert np.linalg.eigvalsh(excess).min() > -1e-9


# -- the covariance penalty (covariance_prior) -----------------------------------------


def wine_with_mar_holes(fraction=0.3, seed=0):
    """Standardised wine with MAR holes: column 0 observed, the others hidden with a
    probability rising with its value (178 rows, 11 of them complete at 30%)."""
    from sklearn.datasets import load_wine

    X = load_wine().data
    X = (X - X.mean(0)) / X.std(0)
    rng = np.random.default_rng(seed)
    rank = np.argsort(np.argsort(X[:, 0])) / (len(X) - 1)
    weight = 1.0 / (1.0 + np.exp(-4.0 * (rank - 0.5)))
    hidden = rng.random(X.shape) < np.clip(fraction * weight / weight.mean(), 0, 0.95)[:, None]
    hidden[:, 0] = False
    return np.where(hidden, np.nan, X)


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
def test_the_penalised_fit_is_a_fixed_point_of_its_closed_form_m_step(covariance_type):
    """Complete data: at convergence each covariance is (sum_i r_ik (x_i - mu_k)(x_i -
    mu_k)^T + tau D) / (N_k + tau), D = diag of the features' variances (ddof 0), with
    the responsibilities and means of the fit itself -- in NumPy, from predict_proba."""
    X = planted_mixture()[0]
    tau = 4.0
    est = GaussianMixture(
        3, covariance_type=covariance_type, covariance_prior=tau, tol=1e-12, random_state=0
    ).fit(X)
    assert est.converged_ and is_monotone(est.log_likelihoods_)
    assert est.objective_name_ == "penalised log-likelihood"
    r = est.predict_proba(X)
    N = r.sum(0)
    D = X.var(0)
    np.testing.assert_allclose(est.means_, (r.T @ X) / N[:, None], rtol=1e-7, atol=1e-7)
    scatter = np.stack(
        [(r[:, k, None] * (X - est.means_[k])).T @ (X - est.means_[k]) for k in range(3)]
    )
    if covariance_type == "full":
        expected = (scatter + tau * np.diag(D)) / (N + tau)[:, None, None]
    elif covariance_type == "tied":
        expected = (scatter.sum(0) + tau * np.diag(D)) / (N.sum() + tau)
    elif covariance_type == "diag":
        expected = (np.diagonal(scatter, axis1=1, axis2=2) + tau * D) / (N + tau)[:, None]
    else:
        expected = (np.trace(scatter, axis1=1, axis2=2) + tau * D.sum()) / (X.shape[1] * (N + tau))
    np.testing.assert_allclose(est.covariances_, expected, rtol=1e-6, atol=1e-8)


def test_the_penalty_ends_the_crawl_towards_collapsed_components():
    """Wine with 30% MAR holes, K = 3 full: by maximum likelihood EM runs to max_iter
    towards covariances collapsed onto reg_covar (the likelihood has no maximum there:
    few rows observe every coordinate of a direction) and scores thousands of nats per
    row below a single Gaussian on held-out rows; tau = 5 converges in a few cycles,
    no component reaches the floor, and held-out rows score as a regular model's."""
    X = wine_with_mar_holes()
    order = np.random.default_rng(0).permutation(len(X))  # wine's rows come by class
    train, test = X[order[:140]], X[order[140:]]
    penalised = GaussianMixture(3, covariance_prior=5.0, random_state=0).fit(train)
    with pytest.warns(Warning):  # the collapse and max_iter warnings
        crawl = GaussianMixture(3, covariance_prior=0.0, max_iter=100, random_state=0).fit(train)
    single = GaussianMixture(1, random_state=0).fit(train)
    assert penalised.converged_ and penalised.n_iter_ <= 30  # seen: 5
    assert not crawl.converged_
    smallest = min(np.linalg.eigvalsh(c)[0] for c in penalised.covariances_)
    assert smallest > 1e-3  # the crawl's reach 1e-6
    assert penalised.score(test) > single.score(test)  # seen: -13.3 against -15.1
    assert crawl.score(test) < single.score(test) - 1000.0  # seen: -32,509


def test_auto_penalises_full_covariances_only_where_missing_entries_leave_no_maximum():
    """covariance_prior="auto" (the default) is tau = 1 for full covariances fitted by EM
    to data with missing entries -- the very fit covariance_prior=1 gives, converged in
    a few cycles where maximum likelihood crawls (above) -- and maximum likelihood
    everywhere else: complete data (scikit-learn's fit, bit for bit the tau = 0 one),
    tied covariances (they pool every row), MAP and partial_fit."""
    X = wine_with_mar_holes()
    auto = GaussianMixture(3, random_state=0).fit(X)
    given = GaussianMixture(3, covariance_prior=1.0, random_state=0).fit(X)
    assert auto.covariance_prior_ == 1.0 and auto.objective_name_ == "penalised log-likelihood"
    assert auto.converged_ and auto.n_iter_ <= 30  # seen: 6
    np.testing.assert_array_equal(auto.covariances_, given.covariances_)
    np.testing.assert_array_equal(auto.log_likelihoods_, given.log_likelihoods_)
    np.testing.assert_allclose(auto.covariance_prior_variance_, np.nanvar(X, axis=0), rtol=1e-12)

    complete = np.nan_to_num(X)  # holes at the (zero) column means: no NaN left
    auto = GaussianMixture(3, random_state=0).fit(complete)
    ml = GaussianMixture(3, covariance_prior=0.0, random_state=0).fit(complete)
    assert auto.covariance_prior_ == 0.0 and not hasattr(auto, "covariance_prior_variance_")
    np.testing.assert_array_equal(auto.covariances_, ml.covariances_)

    tied = GaussianMixture(3, covariance_type="tied", random_state=0).fit(X)
    assert tied.covariance_prior_ == 0.0 and tied.objective_name_ == "log-likelihood"
    stream = GaussianMixture(3, random_state=0).fit(X).partial_fit(X)
    assert stream.covariance_prior_ == 0.0 and not hasattr(stream, "covariance_prior_variance_")


def test_the_covariance_prior_is_refused_where_it_does_not_apply():
    X = planted_mixture()[0]
    with pytest.raises(ValueError, match="covariance_prior"):
        GaussianMixture(2, method="map", covariance_prior=1.0).fit(X)
    with pytest.raises(ValueError, match="covariance_prior"):
        GaussianMixture(2, covariance_prior=1.0).partial_fit(X)
    with pytest.raises(ValueError, match="covariance_prior"):
        GaussianMixture(2, covariance_prior=-1.0).fit(X)


@pytest.mark.parametrize("covariance_type", ["full", "tied"])
def test_the_missing_block_e_step_equals_the_block_algebra(covariance_type):
    """The missing-block route (each component's precision, only the missing block
    inverted) against SciPy's marginal densities and the conditional moments by the
    explicit block formulas, row by row; and its chunk statistics against the d x d
    route's, with padding rows (nothing observed) and unused slots in the index."""
    from latentlab._shapes import ladder, missing_block_size
    from latentlab.models import gmm
    from latentlab.models._gmm_covariances import missing_block_components
    from latentlab.models._gmm_statistics import _missing_block_chunk, _missing_chunk
    from latentlab.models.gmm_programs import missing_index

    rng = np.random.default_rng(5)
    d, n_components, n = 7, 3, 40
    shape = (n_components, d, d) if covariance_type == "full" else (d, d)
    A = rng.normal(size=shape)
    covariance = A @ np.swapaxes(A, -1, -2) + 0.5 * np.eye(d)
    params = gmm.Params(
        np.array([0.5, 0.3, 0.2]),
        rng.normal(size=(n_components, d)),
        np.linalg.cholesky(covariance),
    )
    observed = rng.random((n, d)) > 0.35
    observed[:, 0] = True  # every real row observes something
    observed[-3:] = False  # padding rows
    X = np.where(observed, rng.normal(size=(n, d)), 0.0)
    most = int((~observed[:-3]).sum(axis=1).max())
    slots = ladder(most)
    assert missing_block_size(most, 30) == slots  # large d: the block route
    assert missing_block_size(d, d) is None  # no smaller than d x d: the d x d route
    index = missing_index(observed, slots)
    for i in range(n):
        missing = np.flatnonzero(~observed[i])[:slots]
        np.testing.assert_array_equal(index[i, : len(missing)], missing)

    with jax.enable_x64(True):
        log_density, dx, block = (
            np.asarray(a)
            for a in missing_block_components(
                params, X, observed.astype(float), index, covariance_type
            )
        )
        dense_args = (params, X, observed.astype(float))
        by_blocks = _missing_block_chunk(*dense_args, index, covariance_type)
        by_dense = _missing_chunk(*dense_args, covariance_type)
    covs = np.broadcast_to(covariance, (n_components, d, d))
    for i in range(n - 3):
        o, m = observed[i], ~observed[i]
        s = int(m.sum())
        for k in range(n_components):
            S, mu = covs[k], params.means[k]
            expected = multivariate_normal(mu[o], S[np.ix_(o, o)]).logpdf(X[i, o])
            np.testing.assert_allclose(log_density[i, k], expected, rtol=1e-12)
            gain = S[np.ix_(m, o)] @ np.linalg.inv(S[np.ix_(o, o)])
            np.testing.assert_allclose(dx[i, k, m], gain @ (X[i, o] - mu[o]), atol=1e-12)
            np.testing.assert_allclose(dx[i, k, o], X[i, o] - mu[o], atol=1e-12)
            schur = S[np.ix_(m, m)] - gain @ S[np.ix_(o, m)]
            np.testing.assert_allclose(block[i, k, :s, :s], schur, atol=1e-12)
            assert np.all(block[i, k, s:] == 0) and np.all(block[i, k, :, s:] == 0)
    for a, b in zip(jax.tree.leaves(by_blocks), jax.tree.leaves(by_dense), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("covariance_type", ["full", "tied"])
def test_rows_grouped_by_their_missing_count_give_the_d_by_d_e_step(covariance_type):
    """Where most rows miss few entries and some miss many, em_data sorts the rows into
    two groups (blocks of s/2 and of s slots, one group's chunks after the other's):
    the E-step's statistics and log-likelihood equal the d x d route's on the same
    rows, and the layout holds every row once."""
    from latentlab._shapes import missing_block_groups
    from latentlab.models import gmm
    from latentlab.models.gmm_programs import block_slots, em_data

    rng = np.random.default_rng(11)
    n, d, n_components = 400, 30, 3
    # 300 rows miss 1-5 entries, 90 miss 8-20, 10 are complete
    missing_count = np.concatenate(
        [rng.integers(1, 6, 300), rng.integers(8, 21, 90), np.zeros(10, int)]
    )
    observed = np.ones((n, d), bool)
    for i, c in enumerate(missing_count):
        observed[i, rng.choice(np.arange(1, d), c, replace=False)] = False
    X = np.where(observed, rng.normal(size=(n, d)), 0.0)
    slots = block_slots(observed, covariance_type)
    assert slots == (12, 24)
    assert missing_block_groups(missing_count[missing_count > 0], d, 1000) == (24,)

    shape = (n_components, d, d) if covariance_type == "full" else (d, d)
    A = rng.normal(size=shape) / np.sqrt(d)
    params = gmm.Params(
        np.array([0.5, 0.3, 0.2]),
        rng.normal(size=(n_components, d)),
        np.linalg.cholesky(A @ np.swapaxes(A, -1, -2) + 0.5 * np.eye(d)),
    )
    hyper = gmm.Hyper(np.asarray(1e-6), np.ones(n_components), None)
    with jax.enable_x64(True):
        grouped = em_data(X, observed, np.float64, covariance_type, None)
        dense = grouped._replace(missing_index=None)  # X_missing holds every row either way
        assert [index.shape[-1] for index in grouped.missing_index] == [12, 24]
        chunks = sum(index.shape[0] for index in grouped.missing_index)
        assert chunks == grouped.X_missing.shape[0]
        real = np.asarray(grouped.observed).sum(axis=-1) > 0
        assert real.sum() == 390  # every incomplete row once, padding rows empty
        by_groups = gmm.e_step(params, grouped, hyper, covariance_type=covariance_type)
        by_dense = gmm.e_step(params, dense, hyper, covariance_type=covariance_type)
    for a, b in zip(jax.tree.leaves(by_groups), jax.tree.leaves(by_dense), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-10)
