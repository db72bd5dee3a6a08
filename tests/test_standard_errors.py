"""Standard errors from the information of the exact likelihood (issue 33).

Oracles, independent of latentlab's JAX derivatives and coordinates:

- closed forms: a one-component Gaussian mixture is the multivariate normal, whose
  maximum-likelihood estimates have ``var(mean_j) = S_jj / n`` and ``var(S_ij) =
  (S_ij^2 + S_ii S_jj) / n`` (observed information at the maximum), and sandwich
  variance ``mean_n[((x_i - m_i)(x_j - m_j) - S_ij)^2] / n`` for ``S_ij``;
- finite differences: the observed-data log-likelihood written here in NumPy (each
  row's marginal over its observed entries), differentiated twice by central
  differences in a parametrisation of its own (another gauge for the loadings' rotation,
  log variances), its inverse carried to the reported quantities by finite-difference
  Jacobians of NumPy functions (the principal axes by NumPy's SVD).
"""

import numpy as np
import pytest
from sklearn.datasets import load_wine

import latentlab

RNG = np.random.default_rng(0)


def _wine(columns, missing=0.0, seed=0):
    X = load_wine().data[:, :columns]
    X = (X - X.mean(0)) / X.std(0)
    if missing:
        X = X.copy()
        X[np.random.default_rng(seed).random(X.shape) < missing] = np.nan
    return X


def _by_name(table, name):
    return table.loc[table.parameter == name]


# ----------------------------------------------------------------- NumPy oracles


def _gaussian_loglik(X, mean, cov):
    """Sum over rows of log N(x_o | mean_o, cov_oo), each row on its observed entries."""
    observed = ~np.isnan(X)
    total = 0.0
    for pattern in np.unique(observed, axis=0):
        rows = X[(observed == pattern).all(axis=1)][:, pattern]
        if rows.size == 0:
            continue
        C = cov[np.ix_(pattern, pattern)]
        L = np.linalg.cholesky(C)
        z = np.linalg.solve(L, (rows - mean[pattern]).T)
        total += -0.5 * np.sum(z**2) - rows.shape[0] * (
            np.sum(np.log(np.diag(L))) + 0.5 * pattern.sum() * np.log(2 * np.pi)
        )
    return total


def _fd_hessian(f, x, h=1e-4):
    p = len(x)
    H = np.zeros((p, p))
    for i in range(p):
        for j in range(i, p):
            ei, ej = np.eye(p)[i] * h, np.eye(p)[j] * h
            H[i, j] = H[j, i] = (
                f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)
            ) / (4 * h * h)
    return H


def _fd_jacobian(q, x, h=1e-6):
    return np.stack(
        [
            (q(x + h * np.eye(len(x))[i]) - q(x - h * np.eye(len(x))[i])) / (2 * h)
            for i in range(len(x))
        ],
        axis=1,
    )


def _principal_axes(W, units, reference):
    """The frame canonical_loadings reports, by NumPy's SVD, signed as ``reference``."""
    U, S, _ = np.linalg.svd(W / units[:, None], full_matrices=False)
    frame = U * S * units[:, None]
    return frame * np.sign(np.sum(frame * reference, axis=0))


def _lower_gauge(W):
    """W rotated so that its upper triangle is zero (another gauge than latentlab's)."""
    Q, R = np.linalg.qr(W.T)
    L = R.T
    return L * np.sign(np.diag(L))


# ----------------------------------------------------------------- closed forms


@pytest.mark.parametrize("vcov", ["observed", "sandwich"])
def test_one_component_mixture_has_the_normal_distributions_standard_errors(vcov):
    X = _wine(5)
    n, d = X.shape
    model = latentlab.GaussianMixture(1, covariance_type="full", tol=1e-12, max_iter=5000).fit(X)
    table = model.standard_errors(X, vcov=vcov)
    S, m = np.cov(X.T, bias=True), X.mean(0)
    iu = np.triu_indices(d)
    if vcov == "observed":
        se_cov = np.sqrt((S[iu] ** 2 + S[iu[0], iu[0]] * S[iu[1], iu[1]]) / n)
    else:
        products = (X - m)[:, iu[0]] * (X - m)[:, iu[1]]
        se_cov = np.sqrt(np.mean((products - S[iu]) ** 2, axis=0) / n)
    np.testing.assert_allclose(_by_name(table, "covariances").estimate, S[iu], rtol=1e-8)
    np.testing.assert_allclose(_by_name(table, "covariances").std_error, se_cov, rtol=1e-7)
    np.testing.assert_allclose(
        _by_name(table, "means").std_error, np.sqrt(np.diag(S) / n), rtol=1e-7
    )
    # a one-component mixture's weight is not an estimate: no spread, no test
    weight = _by_name(table, "weights").iloc[0]
    assert weight.estimate == 1.0 and weight.std_error == 0.0 and np.isnan(weight.z)


def test_spherical_and_diagonal_variances_have_their_closed_forms():
    X = _wine(4)
    n, d = X.shape
    S = np.cov(X.T, bias=True)
    diag = latentlab.GaussianMixture(1, covariance_type="diag", tol=1e-12).fit(X)
    se = _by_name(diag.standard_errors(X), "covariances").std_error
    np.testing.assert_allclose(se, np.sqrt(2 / n) * np.diag(S), rtol=1e-7)
    spherical = latentlab.GaussianMixture(1, covariance_type="spherical", tol=1e-12).fit(X)
    row = _by_name(spherical.standard_errors(X), "covariances").iloc[0]
    variance = np.trace(S) / d
    np.testing.assert_allclose(row.estimate, variance, rtol=1e-8)
    np.testing.assert_allclose(row.std_error, variance * np.sqrt(2 / (n * d)), rtol=1e-7)


# ----------------------------------------------------------------- finite differences


def _observed_column_sd(X):
    return np.sqrt(np.nanvar(X, axis=0))


def _fit_with_oracle_coordinates(Model, missing):
    """A fit of wine's first six columns (no Heywood case there; with five, a uniqueness
    at 0), and the oracle's coordinates: W in the lower gauge (W[0, 1] = 0), mu, log
    noise variance(s).  Returns ``(X, model, unpack, x0, reported)``: ``unpack(x) ->
    (W, mu, noise (d,))``, ``reported(x)`` the principal-axes W, mu and noise as the
    table reports them (and FA's communalities), flat."""
    X = _wine(6, missing)
    d, K = X.shape[1], 2
    model = Model(K, tol=1e-12, max_iter=20000).fit(X)
    fa = Model is latentlab.FactorAnalysis
    W0 = model.params_["W"]
    noise0 = model.params_["psi"] if fa else np.atleast_1d(model.params_["sigma2"])
    units = _observed_column_sd(X) if fa else np.ones(d)
    free = np.tril(np.ones((d, K), bool))

    def unpack(x):
        W = np.zeros((d, K))
        W[free] = x[: free.sum()]
        noise = np.exp(x[free.sum() + d :])
        return W, x[free.sum() : free.sum() + d], (noise if fa else np.full(d, noise[0]))

    x0 = np.concatenate([_lower_gauge(W0)[free], model.params_["mu"], np.log(noise0)])

    sd0 = np.sqrt(np.diag(_covariance(*unpack(x0))))

    def reported(x):
        W, mu, noise = unpack(x)
        # FA's units move with the model's standard deviations (see _standard_errors)
        scale = units * np.sqrt(np.diag(_covariance(W, mu, noise))) / sd0 if fa else units
        frame = _principal_axes(W, scale, W0)
        parts = [frame.ravel(), mu, noise if fa else noise[:1]]
        return np.concatenate(parts + ([np.sum(frame**2, axis=1)] if fa else []))

    return X, model, unpack, x0, reported


def _names(model):
    if isinstance(model, latentlab.FactorAnalysis):
        return ["W", "mu", "psi", "communality"]
    return ["W", "mu", "sigma2"]


def _column(table, names, column):
    return np.concatenate([_by_name(table, name)[column].to_numpy() for name in names])


@pytest.mark.parametrize("missing", [0.0, 0.15])
@pytest.mark.parametrize("Model", [latentlab.FactorAnalysis, latentlab.PPCA])
def test_gaussian_latent_standard_errors_match_finite_differences(Model, missing):
    X, model, unpack, x0, reported = _fit_with_oracle_coordinates(Model, missing)
    table = model.standard_errors(X)
    V = np.linalg.inv(
        -_fd_hessian(lambda x: _gaussian_loglik(X, unpack(x)[1], _covariance(*unpack(x))), x0)
    )
    J = _fd_jacobian(reported, x0)
    oracle = np.sqrt(np.diag(J @ V @ J.T))
    np.testing.assert_allclose(
        _column(table, _names(model), "estimate"), reported(x0), rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(_column(table, _names(model), "std_error"), oracle, rtol=2e-4)


@pytest.mark.parametrize("missing", [0.0, 0.15])
@pytest.mark.parametrize("Model", [latentlab.FactorAnalysis, latentlab.PPCA])
def test_expected_information_is_fishers(Model, missing):
    """Oracle: Fisher's information of normal rows, sum over rows of ``J_mu' S^-1 J_mu
    + tr(S^-1 dS_a S^-1 dS_b) / 2`` on each row's observed block, with the moments'
    derivatives by finite differences in the oracle's own parametrisation."""
    X, model, unpack, x0, reported = _fit_with_oracle_coordinates(Model, missing)
    h = 1e-6
    steps = np.eye(len(x0)) * h
    d_mu = np.stack([(unpack(x0 + e)[1] - unpack(x0 - e)[1]) / (2 * h) for e in steps])
    d_cov = np.stack(
        [(_covariance(*unpack(x0 + e)) - _covariance(*unpack(x0 - e))) / (2 * h) for e in steps]
    )
    cov0 = _covariance(*unpack(x0))
    information = np.zeros((len(x0), len(x0)))
    observed = ~np.isnan(X)
    for pattern, count in zip(*np.unique(observed, axis=0, return_counts=True), strict=True):
        o = np.flatnonzero(pattern)
        inverse = np.linalg.inv(cov0[np.ix_(o, o)])
        A = d_mu[:, o] @ inverse
        B = np.einsum("kl,alm->akm", inverse, d_cov[:, o][:, :, o])  # S^-1 dS_a
        information += count * (A @ d_mu[:, o].T + 0.5 * np.einsum("akm,bmk->ab", B, B))
    J = _fd_jacobian(reported, x0)
    oracle = np.sqrt(np.diag(J @ np.linalg.inv(information) @ J.T))
    table = model.standard_errors(X, vcov="expected")
    np.testing.assert_allclose(_column(table, _names(model), "std_error"), oracle, rtol=1e-5)
    if not missing:  # the mean's block: expected and observed agree at the maximum
        observed_se = _by_name(model.standard_errors(X), "mu").std_error
        np.testing.assert_allclose(_by_name(table, "mu").std_error, observed_se, rtol=1e-6)


def _signed_match(L, reference):
    """L's columns permuted and signed to match ``reference`` best."""
    import itertools

    K = L.shape[1]
    best = None
    for order in itertools.permutations(range(K)):
        M = L[:, list(order)]
        M = M * np.sign(np.sum(M * reference, axis=0))
        if best is None or np.sum((M - reference) ** 2) < np.sum((best - reference) ** 2):
            best = M
    return best


@pytest.mark.parametrize("rotation", ["varimax", "oblimin"])
def test_rotated_loadings_standard_errors_follow_the_rotation(rotation):
    """The oracle rotates by GPA to a projected-gradient norm of 1e-12 at every
    finite-difference point (``latentlab.rotate``, whose solutions agree with
    statsmodels' and factor_analyzer's to 2e-7: tests/test_rotation.py); latentlab's
    standard errors differentiate the criterion's optimality conditions instead."""
    X = _wine(6)
    d, K = X.shape[1], 2
    model = latentlab.FactorAnalysis(K, rotation=rotation, tol=1e-12, max_iter=20000).fit(X)
    table = model.standard_errors(X)
    oblique = rotation == "oblimin"
    fitted = model.components_.T  # the pattern
    units = _observed_column_sd(X)
    W_fit = model.params_["W"]  # Lambda C (C C^T = Phi): W W^T = A A^T, A unrotated
    sign_reference = _principal_axes(W_fit, units, np.ones((d, K)))
    free = np.tril(np.ones((d, K), bool))

    def unpack(x):
        W = np.zeros((d, K))
        W[free] = x[: free.sum()]
        return W, x[free.sum() : free.sum() + d], np.exp(x[free.sum() + d :])

    x0 = np.concatenate(
        [_lower_gauge(W_fit)[free], model.params_["mu"], np.log(model.params_["psi"])]
    )
    V = np.linalg.inv(
        -_fd_hessian(lambda x: _gaussian_loglik(X, unpack(x)[1], _covariance(*unpack(x))), x0)
    )

    def reported(x):
        A = _principal_axes(unpack(x)[0], units, sign_reference)
        L = _signed_match(latentlab.rotate(A, rotation, tol=1e-12, max_iter=5000).loadings, fitted)
        if oblique:  # Phi from L Phi L^T = A A^T
            pinv = np.linalg.pinv(L)
            return np.concatenate([L.ravel(), [(pinv @ A @ A.T @ pinv.T)[0, 1]]])
        return L.ravel()

    np.testing.assert_allclose(reported(x0)[: d * K], fitted.ravel(), atol=1e-7)
    J = _fd_jacobian(reported, x0, h=1e-5)
    oracle = np.sqrt(np.diag(J @ V @ J.T))
    names = ["pattern", "factor_correlation"] if oblique else ["W"]
    got = np.concatenate([_by_name(table, name).std_error.to_numpy() for name in names])
    np.testing.assert_allclose(got, oracle, rtol=1e-3)


def _covariance(W, mu, psi):
    return W @ W.T + np.diag(psi)


def test_mixture_with_missing_entries_matches_finite_differences():
    X = _wine(4, 0.15, seed=1)
    K, d = 2, X.shape[1]
    model = latentlab.GaussianMixture(K, covariance_type="diag", tol=1e-12, random_state=0).fit(X)
    w0, m0, s0 = (np.asarray(model.params_[k]) for k in ("weights", "means", "scale"))

    def unpack(x):
        logit = np.concatenate([[0.0], x[: K - 1]])
        weights = np.exp(logit - np.logaddexp.reduce(logit))
        means = x[K - 1 : K - 1 + K * d].reshape(K, d)
        variances = np.exp(x[K - 1 + K * d :]).reshape(K, d)
        return weights, means, variances

    x0 = np.concatenate([[np.log(w0[1] / w0[0])], m0.ravel(), np.log(s0**2).ravel()])

    def loglik(x):
        weights, means, variances = unpack(x)
        observed = ~np.isnan(X)
        per_component = []
        for k in range(K):
            z = np.where(observed, (X - means[k]) ** 2 / variances[k], 0.0)
            log_norm = np.where(observed, np.log(2 * np.pi * variances[k]), 0.0)
            per_component.append(np.log(weights[k]) - 0.5 * np.sum(z + log_norm, axis=1))
        return np.sum(np.logaddexp.reduce(np.stack(per_component), axis=0))

    V = np.linalg.inv(-_fd_hessian(loglik, x0))
    J = _fd_jacobian(lambda x: np.concatenate([a.ravel() for a in unpack(x)]), x0)
    oracle = np.sqrt(np.diag(J @ V @ J.T))
    table = model.standard_errors(X)
    got = np.concatenate(
        [_by_name(table, name).std_error.to_numpy() for name in ("weights", "means", "covariances")]
    )
    np.testing.assert_allclose(got, oracle, rtol=2e-4)


# ----------------------------------------------------------------- the bootstrap


def _planted_factors(n=400, seed=1):
    rng = np.random.default_rng(seed)
    L = np.zeros((8, 2))
    L[:4, 0], L[4:, 1], L[0, 1] = 0.8, 0.7, 0.3
    return rng.standard_normal((n, 2)) @ L.T + 0.5 * rng.standard_normal((n, 8))


@pytest.mark.parametrize("rotation", [None, "varimax", "oblimin"])
def test_bootstrap_agrees_with_the_delta_method_on_a_planted_factor_model(rotation):
    """Two independent routes to the same spread, on a model where the delta method's
    linearisation is good: per quantity, the median ratio of the two standard errors
    over its entries is within 15% of 1 (200 refits: the bootstrap's own error is ~5%)."""
    X = _planted_factors()
    model = latentlab.FactorAnalysis(2, rotation=rotation).fit(X)
    boot = model.standard_errors(X, vcov="bootstrap", n_bootstrap=200, random_state=0)
    delta = model.standard_errors(X)
    np.testing.assert_allclose(boot.estimate, delta.estimate, rtol=1e-7, atol=1e-9)
    ratio = (boot.std_error / delta.std_error).groupby(boot.parameter).median()
    assert set(ratio.index) >= {"mu", "psi", "communality"}
    assert ((ratio > 0.85) & (ratio < 1.15)).all(), ratio


def test_bootstrap_matches_mixture_components_by_their_means():
    rng = np.random.default_rng(2)
    X = np.concatenate([rng.standard_normal((200, 3)), 0.7 * rng.standard_normal((200, 3)) + 4.0])
    model = latentlab.GaussianMixture(2, covariance_type="diag", random_state=0).fit(X)
    boot = model.standard_errors(X, vcov="bootstrap", n_bootstrap=200, random_state=0)
    ratio = (boot.std_error / model.standard_errors(X).std_error).groupby(boot.parameter).median()
    assert ((ratio > 0.85) & (ratio < 1.15)).all(), ratio
    again = model.standard_errors(X, vcov="bootstrap", n_bootstrap=200, random_state=0)
    np.testing.assert_array_equal(again.std_error, boot.std_error)  # random_state fixes it


# ----------------------------------------------------------------- boundaries and refusals


def test_a_heywood_uniqueness_is_held_at_its_floor_and_flagged():
    X = _wine(6)
    X = np.column_stack([X, X[:, 0] + 1e-9 * RNG.standard_normal(len(X))])  # a copy
    with pytest.warns(UserWarning, match="Heywood"):
        model = latentlab.FactorAnalysis(2).fit(X)
    table = model.standard_errors(X)
    psi = _by_name(table, "psi")
    at_floor = psi.at_boundary.to_numpy()
    assert at_floor.any() and not at_floor.all()
    assert np.isnan(psi.std_error[at_floor]).all()
    assert np.isfinite(psi.std_error[~at_floor]).all() and (psi.std_error[~at_floor] > 0).all()
    assert np.isfinite(_by_name(table, "mu").std_error).all()


def test_intervals_are_wald_intervals_of_the_table():
    X = _wine(5)
    model = latentlab.PPCA(2).fit(X)
    table = model.confidence_intervals(X, level=0.9)
    half = 1.6448536269514722 * table.std_error
    np.testing.assert_allclose(table.lower, table.estimate - half)
    np.testing.assert_allclose(table.upper, table.estimate + half)
    cov = model.covariance_of_estimates(X)
    assert list(cov.index) == list(table.index)
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), table.std_error)


def test_bayesian_pca_gives_the_laplace_covariance_of_its_map():
    X = _wine(6)
    model = latentlab.BayesianPCA().fit(X)
    table = model.standard_errors(X)
    np.testing.assert_allclose(_by_name(table, "W").estimate, model.params_["W"].ravel())
    assert np.isfinite(table.std_error).all() and (table.std_error > 0).all()
    for vcov in ("sandwich", "expected"):
        with pytest.raises(ValueError, match=f"{vcov}.*maximum-likelihood"):
            model.standard_errors(X, vcov=vcov)
    with pytest.raises(ValueError, match="bootstrap.*rank"):
        model.standard_errors(X, vcov="bootstrap")


def test_refusals_name_the_problem():
    X = _wine(6)
    model = latentlab.FactorAnalysis(2).fit(X)
    with pytest.raises(ValueError, match="vcov"):
        model.standard_errors(X, vcov="robust")
    with pytest.raises(ValueError, match="n_bootstrap"):
        model.standard_errors(X, vcov="bootstrap", n_bootstrap=1)
    mixture = latentlab.GaussianMixture(2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="expected.*Gaussian latent"):
        mixture.standard_errors(X, vcov="expected")
    with pytest.raises(ValueError, match="level"):
        model.confidence_intervals(X, level=95)
    with pytest.raises(ValueError, match="(not a maximum|not positive definite)"):
        model.standard_errors(X[::-1] * 2.0 + 1.0)
    promax = latentlab.FactorAnalysis(2, rotation="promax").fit(X)
    with pytest.raises(ValueError, match="promax"):
        promax.standard_errors(X)
    with pytest.raises(ValueError, match="not available for PCA"):
        latentlab.PCA(2).fit(X).standard_errors(X)


# ----------------------------------------------------------------- supervised PCA


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_supervised_pca_standard_errors_are_the_tempered_objectives_sandwich(alpha):
    """At alpha = 1 the fit maximises the joint likelihood of (x, y): the oracle is the
    inverse finite-difference Hessian.  Otherwise it maximises sum_i F_i, each row's
    log N((x_i, y_i) | mu, W W^T + diag(sigma2_x / alpha, sigma2_y)) plus its x
    entries' log c(alpha, sigma2_x) (the tempered likelihood, declared in
    models/supervised_pca.py), an M-estimator: the oracle is H^-1 B H^-1 with B the
    rows' finite-difference score outer products."""
    from oracles import planted_low_rank

    # two strong factors (on wine's columns the tempered fit at alpha = 0.5 drops the
    # second: a zero column has no principal axis to differentiate)
    V_planted, _, _ = planted_low_rank(n=150, d=6, rank=2, noise=0.5, seed=3)
    X, y = V_planted[:, :5], V_planted[:, 5]
    d_x, K = X.shape[1], 2
    V_data = np.column_stack([X, y])
    D = d_x + 1
    model = latentlab.SupervisedPCA(K, alpha=alpha, tol=1e-12, max_iter=50000).fit(X, y)
    W0 = np.vstack([model.params_["W_x"], model.params_["W_y"]])
    free = np.tril(np.ones((D, K), bool))

    def unpack(x):
        W = np.zeros((D, K))
        W[free] = x[: free.sum()]
        mu = x[free.sum() : free.sum() + D]
        return W, mu, np.exp(x[-2]), np.exp(x[-1])

    def row_objective(x):
        W, mu, s2x, s2y = unpack(x)
        C = W @ W.T + np.diag(np.r_[np.full(d_x, s2x / alpha), s2y])
        L = np.linalg.cholesky(C)
        z = np.linalg.solve(L, (V_data - mu).T)
        log_normal = (
            -0.5 * np.sum(z**2, axis=0) - np.sum(np.log(np.diag(L))) - 0.5 * D * np.log(2 * np.pi)
        )
        log_c = 0.5 * (1 - alpha) * (np.log(2 * np.pi) + np.log(s2x)) - 0.5 * np.log(alpha)
        return log_normal + d_x * log_c

    x0 = np.concatenate(
        [
            _lower_gauge(W0)[free],
            np.r_[model.params_["mu_x"], model.params_["mu_y"]],
            np.log([model.params_["sigma2_x"], model.params_["sigma2_y"]]),
        ]
    )

    def reported(x):
        W, mu, s2x, s2y = unpack(x)
        frame = _principal_axes(W, np.ones(D), W0)
        return np.concatenate([frame[:d_x].ravel(), frame[d_x:].ravel(), mu, [s2x, s2y]])

    H_inverse = np.linalg.inv(-_fd_hessian(lambda x: row_objective(x).sum(), x0))
    if alpha == 1.0:
        V = H_inverse
    else:
        scores = _fd_jacobian(row_objective, x0)  # (n, p)
        V = H_inverse @ (scores.T @ scores) @ H_inverse
    J = _fd_jacobian(reported, x0)
    oracle = np.sqrt(np.diag(J @ V @ J.T))
    table = model.standard_errors(X, y)  # the default: observed at 1, sandwich otherwise
    np.testing.assert_allclose(table.estimate.to_numpy(), reported(x0), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(table.std_error.to_numpy(), oracle, rtol=2e-4)
    if alpha != 1.0:
        with pytest.raises(ValueError, match="alpha-weighted.*sandwich"):
            model.standard_errors(X, y, vcov="observed")


def test_sandwich_differs_from_the_observed_information_only_under_misspecification():
    """Normal rows: the sandwich estimates the same variance as the inverse information
    (their ratio near 1).  Rows from a multivariate t with 6 degrees of freedom
    (kurtosis 6 per coordinate, a normal's 3): the normal model's information
    understates the variances' sampling variance by (kurtosis - 1) / 2 = 2.5, which the
    sandwich recovers: standard-error ratio near sqrt(2.5) = 1.58."""
    n, d = 3000, 3
    rng = np.random.default_rng(11)
    normal = rng.normal(size=(n, d))
    heavy = normal / np.sqrt(rng.chisquare(6, size=(n, 1)) / 6)
    ratios = {}
    for name, X in (("normal", normal), ("t6", heavy)):
        model = latentlab.GaussianMixture(1, covariance_type="full", tol=1e-12).fit(X)
        observed = model.standard_errors(X)
        sandwich = model.standard_errors(X, vcov="sandwich")
        variances = [f"covariances[0, {j}, {j}]" for j in range(d)]
        ratios[name] = (sandwich.std_error / observed.std_error)[variances].to_numpy()
        # the means' variance is the covariance / n under both: no kurtosis in it
        means = observed.parameter == "means"
        np.testing.assert_allclose(sandwich.std_error[means], observed.std_error[means], rtol=0.05)
    assert np.all(np.abs(ratios["normal"] - 1.0) < 0.1), ratios
    assert np.all((ratios["t6"] > 1.3) & (ratios["t6"] < 2.0)), ratios
