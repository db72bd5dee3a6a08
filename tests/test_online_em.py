"""Stepwise (online) EM: ``partial_fit`` of PPCA, FactorAnalysis and GaussianMixture
on a stream of chunks drawn from a planted model.

The oracle is scikit-learn's batch fit on the same rows (PCA, FactorAnalysis,
GaussianMixture; latentlab's batch fits agree with them to 1e-4 nats per row here).

Tolerance.  The batch ML fit is itself off the truth by its statistical error: its
expected held-out deficit per row is about p / (2 n) nats (Akaike), p free
parameters, n training rows.  Online EM passes if its held-out mean log-likelihood
is below the batch fit's by at most p / n (twice that error) plus three standard
errors of the paired mean difference over the held-out rows; with 10% of entries
missing, n is the number of observed rows' worth, 0.9 n.  The model after the first
chunk only (n / 8 rows) misses by more: the tolerance has the power to fail.
"""

from __future__ import annotations

import numpy as np
import pytest

import latentlab

N_TRAIN, N_TEST, N_CHUNKS = 4000, 4000, 8
D, K = 6, 2


def _planted_gaussian(psi, seed):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(D, K))
    mu = rng.normal(size=D) * 3.0

    def draw(n):
        return rng.normal(size=(n, K)) @ W.T + mu + rng.normal(size=(n, D)) * np.sqrt(psi)

    return draw(N_TRAIN), draw(N_TEST)


def _planted_mixture(seed):
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(3, D)) * 3.0
    factors = rng.normal(size=(3, D, D)) * 0.4
    weights = np.array([0.5, 0.3, 0.2])

    def draw(n):
        labels = rng.choice(3, size=n, p=weights)
        noise = np.einsum("nij,nj->ni", factors[labels], rng.normal(size=(n, D)))
        return means[labels] + noise + 0.5 * rng.normal(size=(n, D))

    return draw(N_TRAIN), draw(N_TEST)


def _n_parameters(name):
    if name == "ppca":
        return D * K + D + 1 - K * (K - 1) // 2
    if name == "fa":
        return D * K + 2 * D - K * (K - 1) // 2
    return 2 + 3 * D + 3 * D * (D + 1) // 2  # full covariances, 3 components


def _oracle(name, X):
    from sklearn.decomposition import PCA, FactorAnalysis
    from sklearn.mixture import GaussianMixture

    if name == "ppca":
        return PCA(K).fit(X)
    if name == "fa":
        return FactorAnalysis(K).fit(X)
    return GaussianMixture(3, n_init=3, random_state=0).fit(X)


def _make(name, **settings):
    if name == "ppca":
        return latentlab.PPCA(K, **settings)
    if name == "fa":
        return latentlab.FactorAnalysis(K, **settings)
    return latentlab.GaussianMixture(3, random_state=0, **settings)


def _data(name):
    if name == "ppca":
        return _planted_gaussian(0.5, 0)
    if name == "fa":
        return _planted_gaussian(np.linspace(0.2, 1.5, D), 1)
    return _planted_mixture(2)


def _stream(est, chunks, passes=1):
    for _ in range(passes):
        for chunk in chunks:
            est.partial_fit(chunk)
    return est


def _deficit(batch, online, X):
    """Mean held-out log-likelihood of ``batch`` minus ``online``, and its paired SE."""
    diff = batch.score_samples(X) - online.score_samples(X)
    return diff.mean(), diff.std(ddof=1) / np.sqrt(len(diff))


@pytest.fixture(scope="module", params=["ppca", "fa", "gmm"])
def planted(request):
    name = request.param
    X, X_test = _data(name)
    chunks = np.array_split(X, N_CHUNKS)
    batch = _oracle(name, X)
    online = _stream(_make(name), chunks, passes=2)
    first_only = _make(name).partial_fit(chunks[0])
    return name, chunks, X_test, batch, online, first_only


def test_online_em_reaches_batch_heldout_loglik(planted):
    name, _, X_test, batch, online, first_only = planted
    deficit, se = _deficit(batch, online, X_test)
    tolerance = _n_parameters(name) / N_TRAIN + 3.0 * se
    assert deficit <= tolerance, (name, deficit, tolerance)
    # the first chunk alone is not enough: the bound can fail
    early, early_se = _deficit(batch, first_only, X_test)
    assert early > _n_parameters(name) / N_TRAIN + 3.0 * early_se, (name, early)
    assert online.n_samples_seen_ == 2 * N_TRAIN
    assert online.n_iter_ == 2 * N_CHUNKS
    assert online.log_likelihoods_.shape == (2 * N_CHUNKS,)
    # the prequential trace: later chunks, scored before their update, near the
    # held-out score (same model, fresh rows; 500 rows per chunk)
    assert abs(online.log_likelihoods_[-1] - online.score(X_test)) < 0.3


def test_partial_fit_is_reproducible_bit_for_bit(planted):
    name, chunks, X_test, *_ = planted
    a = _stream(_make(name), chunks)
    b = _stream(_make(name), chunks)
    for site in a.params_:
        np.testing.assert_array_equal(a.params_[site], b.params_[site])
    np.testing.assert_array_equal(a.score_samples(X_test), b.score_samples(X_test))


def test_partial_fit_takes_nan_chunks(planted):
    """10% of entries missing at random: online EM on the NaN stream reaches the
    batch fit of the complete data within the tolerance for 0.9 n rows, and the
    fitted model imputes, scores and transforms rows with NaN."""
    name, chunks, X_test, batch, *_ = planted
    rng = np.random.default_rng(5)
    X_nan = np.concatenate(chunks)
    X_nan[rng.random(X_nan.shape) < 0.1] = np.nan
    online = _stream(_make(name), np.array_split(X_nan, N_CHUNKS), passes=2)
    deficit, se = _deficit(batch, online, X_test)
    assert deficit <= _n_parameters(name) / (0.9 * N_TRAIN) + 3.0 * se, (name, deficit)
    rows = X_nan[:500]
    filled = online.impute(rows)
    observed = ~np.isnan(rows)
    assert np.all(np.isfinite(filled))
    np.testing.assert_array_equal(filled[observed], rows[observed])
    assert np.all(np.isfinite(online.score_samples(rows)))


def test_partial_fit_sets_the_attributes_fit_sets(planted):
    name, chunks, X_test, _, online, _ = planted
    assert online.n_features_in_ == D
    if name == "gmm":
        assert online.means_.shape == (3, D) and online.covariances_.shape == (3, D, D)
        np.testing.assert_allclose(online.predict_proba(X_test).sum(axis=1), 1.0)
        return
    assert online.components_.shape == (K, D) and online.mean_.shape == (D,)
    assert online.transform(X_test).shape == (N_TEST, K)
    # the model covariance is W W^T + Psi of the reported parameters
    W = online.params_["W"]
    noise = online.noise_variance_ * np.ones(D)
    np.testing.assert_allclose(online.get_covariance(), W @ W.T + np.diag(noise))


def test_partial_fit_continues_after_save_and_load(planted, tmp_path):
    name, chunks, X_test, *_ = planted
    est = _stream(_make(name), chunks[:4])
    from latentlab.io import load, save

    save(est, tmp_path / "online.npz")
    loaded = load(tmp_path / "online.npz")
    for chunk in chunks[4:]:
        est.partial_fit(chunk)
        loaded.partial_fit(chunk)
    np.testing.assert_array_equal(est.score_samples(X_test), loaded.score_samples(X_test))
    assert loaded.n_samples_seen_ == N_TRAIN


def test_fit_ends_the_stream_and_partial_fit_starts_a_new_one(planted):
    name, chunks, *_ = planted
    if name == "fa":  # FA ends its stream where PPCA does (GaussianLatentEstimator)
        pytest.skip("the same code path as PPCA's case; one batch compile is enough")
    est = _make(name).partial_fit(chunks[0]).fit(chunks[1])
    assert not hasattr(est, "online_state_") and not hasattr(est, "n_samples_seen_")
    est.partial_fit(chunks[2])
    fresh = _make(name).partial_fit(chunks[2])
    assert est.n_samples_seen_ == len(chunks[2]) and est.n_iter_ == 1
    fitted = (lambda e: e.params_["W"]) if name == "ppca" else (lambda e: e.means_)
    np.testing.assert_array_equal(fitted(est), fitted(fresh))


def test_partial_fit_rejects_bad_input(planted):
    name, chunks, *_ = planted
    X = chunks[0]
    with pytest.raises(ValueError, match="learning_decay"):
        _make(name, learning_decay=0.5).partial_fit(X)
    with pytest.raises(ValueError, match="learning_decay"):
        _make(name, learning_decay=1.5).partial_fit(X)
    with pytest.raises(ValueError, match="learning_decay"):
        _make(name, learning_decay="fast").partial_fit(X)
    with pytest.raises(ValueError, match="empty chunk"):
        _make(name).partial_fit(np.zeros((0, D)))
    est = _make(name).partial_fit(X)
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(X[:, :-1])
    with pytest.raises(ValueError, match="empty chunk"):
        est.partial_fit(np.zeros((0, D)))
    with pytest.raises(ValueError, match="[Rr]ow"):
        est.partial_fit(np.where(np.arange(D) < D, np.nan, 0.0)[None, :].repeat(2, axis=0))
    with pytest.raises(ValueError, match="method"):
        _make(name, method="svi").partial_fit(X)
