"""PPCA and FactorAnalysis reporting a rotated solution: the likelihood untouched,
the pattern, structure and factor correlations of :func:`latentlab.rotate`, and the
rotated factors' regression scores against their closed form."""

import numpy as np
import pytest
from oracles import hide_at_random

from latentlab import PPCA, FactorAnalysis
from latentlab.closed_form.rotation import rotate


def oblique_structure(n=2000, seed=0):
    """Six indicators of two correlated factors (Phi_12 = 0.5), simple structure,
    unit variances."""
    rng = np.random.default_rng(seed)
    pattern = np.array([[0.8, 0], [0.7, 0], [0.6, 0], [0, 0.8], [0, 0.7], [0, 0.6]])
    phi = np.array([[1.0, 0.5], [0.5, 1.0]])
    F = rng.multivariate_normal(np.zeros(2), phi, size=n)
    psi = 1.0 - np.einsum("ij,jk,ik->i", pattern, phi, pattern)
    X = F @ pattern.T + rng.normal(size=(n, 6)) * np.sqrt(psi) + 3.0
    return X, pattern, phi


@pytest.fixture(scope="module")
def data():
    return oblique_structure()


@pytest.fixture(scope="module")
def unrotated(data):
    X, _, _ = data
    return FactorAnalysis(2, random_state=0).fit(X)


@pytest.fixture(scope="module")
def oblimin(data):
    X, _, _ = data
    return FactorAnalysis(2, rotation="oblimin", random_state=0).fit(X)


def test_oblique_rotation_keeps_the_model_and_reports_rotate(data, unrotated, oblimin):
    X, pattern, phi = data
    assert oblimin.score(X) == pytest.approx(unrotated.score(X), rel=1e-12)
    np.testing.assert_allclose(oblimin.get_covariance(), unrotated.get_covariance(), atol=1e-12)
    reference = rotate(unrotated.components_.T, "oblimin")
    Lam, Phi = oblimin.components_.T, oblimin.factor_correlation_
    np.testing.assert_allclose(Lam, reference.loadings, atol=1e-8)
    np.testing.assert_allclose(Phi, reference.factor_correlation, atol=1e-8)
    np.testing.assert_allclose(oblimin.rotation_matrix_, reference.rotation_matrix, atol=1e-8)
    np.testing.assert_allclose(oblimin.structure_, Phi @ Lam.T, atol=1e-12)
    # the implied covariance from pattern and factor correlations
    implied = Lam @ Phi @ Lam.T + np.diag(oblimin.noise_variance_)
    np.testing.assert_allclose(implied, oblimin.get_covariance(), atol=1e-10)
    # the planted structure, up to column order and sign
    order = np.argmax(np.abs(Lam[[0, 3]]), axis=1)
    signs = np.sign(Lam[[0, 3], order])
    scale = np.sqrt(np.diag(unrotated.get_covariance()))[:, None]
    np.testing.assert_allclose(Lam[:, order] * signs / scale, pattern, atol=0.06)
    assert abs(Phi[0, 1]) == pytest.approx(0.5, abs=0.06)


def test_rotated_factor_scores_are_the_regression_scores(data, oblimin):
    # Thurstone's regression scores for correlated factors: E[f | x] = Phi Lam^T S^-1 (x - mu)
    X, _, _ = data
    Lam, Phi = oblimin.components_.T, oblimin.factor_correlation_
    S = oblimin.get_covariance()
    expected = (X - oblimin.mean_) @ np.linalg.solve(S, Lam @ Phi)
    np.testing.assert_allclose(oblimin.transform(X), expected, atol=1e-10)
    mean, cov = oblimin.posterior_latent(X[:5])
    # posterior covariance of f: Phi - Phi Lam^T S^-1 Lam Phi
    expected_cov = Phi - Phi @ Lam.T @ np.linalg.solve(S, Lam @ Phi)
    np.testing.assert_allclose(cov, np.broadcast_to(expected_cov, cov.shape), atol=1e-10)
    # back to data space through the pattern: the same point as the unrotated model's
    np.testing.assert_allclose(
        oblimin.inverse_transform(mean), mean @ Lam.T + oblimin.mean_, atol=1e-12
    )


def test_rotation_with_missing_entries_changes_no_imputation(data):
    X, _, _ = data
    holes, _ = hide_at_random(X, 0.15, seed=1)
    plain = FactorAnalysis(2, random_state=0).fit(holes)
    rotated = FactorAnalysis(2, rotation="geomin", random_state=0).fit(holes)
    assert rotated.score(holes) == pytest.approx(plain.score(holes), rel=1e-12)
    np.testing.assert_allclose(rotated.impute(holes), plain.impute(holes), atol=1e-10)
    reference = rotate(plain.components_.T, "geomin")
    np.testing.assert_allclose(rotated.components_.T, reference.loadings, atol=1e-8)


def test_orthogonal_rotation_of_ppca_and_a_criterion_function(data):
    import jax.numpy as jnp

    X, _, _ = data
    plain = PPCA(2, random_state=0).fit(X)
    varimax = PPCA(2, rotation="varimax", random_state=0).fit(X)
    reference = rotate(plain.components_.T, "varimax")
    np.testing.assert_allclose(varimax.components_.T, reference.loadings, atol=1e-8)
    np.testing.assert_array_equal(varimax.factor_correlation_, np.eye(2))
    assert varimax.score(X) == pytest.approx(plain.score(X), rel=1e-12)
    # orthogonal: the factors are the declaration's z, scored by the rotated loadings
    np.testing.assert_allclose(
        varimax.transform(X), plain.transform(X) @ reference.rotation_matrix, atol=1e-8
    )

    def varimax_by_hand(L):  # minimised: minus the variance of squared loadings
        return -jnp.sum(jnp.var(L**2, axis=0))

    custom = PPCA(2, rotation=varimax_by_hand, random_state=0).fit(X)
    np.testing.assert_allclose(custom.components_, varimax.components_, atol=1e-6)


def test_rotation_survives_save_and_load(tmp_path, data, oblimin):
    import latentlab

    X, _, _ = data
    path = tmp_path / "fa.npz"
    latentlab.io.save(oblimin, path)
    loaded = latentlab.load(path)
    np.testing.assert_array_equal(loaded.factor_correlation_, oblimin.factor_correlation_)
    np.testing.assert_array_equal(loaded.components_, oblimin.components_)
    np.testing.assert_allclose(loaded.transform(X[:10]), oblimin.transform(X[:10]), atol=1e-14)


def test_rotation_settings_are_checked(data):
    X, _, _ = data
    with pytest.raises(ValueError, match="rotation"):
        FactorAnalysis(2, rotation="oblique").fit(X)
    with pytest.raises(ValueError, match="n_rotation_starts"):
        FactorAnalysis(2, rotation="geomin", n_rotation_starts=0).fit(X)
    with pytest.raises(ValueError, match="rotation_kwargs"):
        FactorAnalysis(2, rotation="oblimin", rotation_kwargs=[("gamma", 0.5)]).fit(X)


def score_map(model, method):
    """The linear map A of a complete-data scoring method, f = A (x - mu)."""
    d = model.n_features_in_
    return model.factor_scores(model.mean_ + np.eye(d), method=method).T


@pytest.mark.parametrize("fixture", ["oblimin", "unrotated"])
def test_factor_score_methods_have_their_defining_properties(fixture, request):
    model = request.getfixturevalue(fixture)
    Lam, Phi = model.components_.T, model.factor_correlation_
    S = model.get_covariance()
    K = Lam.shape[1]
    regression = score_map(model, "regression")
    np.testing.assert_allclose(regression, Phi @ Lam.T @ np.linalg.inv(S), atol=1e-10)
    bartlett = score_map(model, "bartlett")
    np.testing.assert_allclose(bartlett @ Lam, np.eye(K), atol=1e-10)  # unbiased
    psi_inv = np.diag(1.0 / model.noise_variance_)
    np.testing.assert_allclose(  # weighted least squares: A = (L' P L)^-1 L' P
        bartlett, np.linalg.solve(Lam.T @ psi_inv @ Lam, Lam.T @ psi_inv), atol=1e-10
    )
    anderson_rubin = score_map(model, "anderson_rubin")
    np.testing.assert_allclose(anderson_rubin @ S @ anderson_rubin.T, np.eye(K), atol=1e-10)
    ten_berge = score_map(model, "ten_berge")
    np.testing.assert_allclose(ten_berge @ S @ ten_berge.T, Phi, atol=1e-10)
    X_probe = model.mean_ + np.eye(model.n_features_in_)
    np.testing.assert_array_equal(  # transform(X, method=...) is factor_scores
        model.transform(X_probe, method="bartlett"), bartlett.T
    )
    if fixture == "unrotated":  # uncorrelated factors: ten Berge's are Anderson-Rubin's
        np.testing.assert_allclose(ten_berge, anderson_rubin, atol=1e-10)


def test_factor_scores_with_missing_entries_use_each_rows_observed_block(data, oblimin):
    X, _, _ = data
    holes, _ = hide_at_random(X[:40], 0.3, seed=2)
    # regression scores are the posterior means transform computes its own way
    np.testing.assert_allclose(oblimin.factor_scores(holes), oblimin.transform(holes), atol=1e-10)
    Lam, psi, mu = oblimin.components_.T, oblimin.noise_variance_, oblimin.mean_
    short = (~np.isnan(holes)).sum(axis=1) < 2  # fewer entries than factors
    assert short.any()
    with pytest.warns(UserWarning, match="at least 2 observed entries"):
        scores = oblimin.factor_scores(holes, method="bartlett")
    assert np.isnan(scores[short]).all() and np.isfinite(scores[~short]).all()
    for i in np.flatnonzero(~short):
        seen = ~np.isnan(holes[i])
        w = 1.0 / np.sqrt(psi[seen])
        by_hand = np.linalg.lstsq(Lam[seen] * w[:, None], (holes[i, seen] - mu[seen]) * w)[0]
        np.testing.assert_allclose(scores[i], by_hand, atol=1e-10)
    with pytest.raises(ValueError, match="method must be one of"):
        oblimin.factor_scores(X, method="thomson")


def test_posterior_draws_of_the_pattern_loadings(data, oblimin):
    X, _, _ = data
    tree = oblimin.sample_posterior(X[:300], method="laplace", num_samples=100, random_state=0)
    W, pattern = tree["posterior"]["W"].values, tree["posterior"]["pattern"].values
    C = np.linalg.cholesky(oblimin.factor_correlation_)
    np.testing.assert_allclose(pattern @ C, W, atol=1e-12)  # W = Lambda C, draw by draw
    # the draws sit about the reported solution (aligned, then mapped by the fit's C)
    centre = pattern.mean(axis=(0, 1))
    spread = pattern.std(axis=(0, 1))
    assert np.all(np.abs(centre - oblimin.components_.T) < 4 * spread / np.sqrt(100) + 0.05)
