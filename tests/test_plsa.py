"""pLSA: EM against KL-NMF, the declared-once contract, planted topics, fold-in, input.

Every fit here uses the same corpus shape (60 documents x 40 words, K = 3), so XLA
compiles the fit and fold-in programs once; tempered EM, max_iter=2 and the gradient
MAP fit add one program each (static settings), and the check of topic padding two
unpadded ones.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from numpyro import handlers
from oracles import is_monotone
from scipy.optimize import linear_sum_assignment
from scipy.special import gammaln, xlogy
from scipy.stats import multinomial
from sklearn.base import clone
from sklearn.decomposition import NMF
from sklearn.exceptions import ConvergenceWarning

import latentlab
from latentlab import PLSA
from latentlab.models import plsa

D, W, K = 60, 40, 3


def planted_topics():
    """Three topics with 12 words of their own each, 4 shared words, a little background."""
    phi = np.full((K, W), 0.01)
    for k in range(K):
        phi[k, 12 * k : 12 * (k + 1)] = 1.0 + np.linspace(0.0, 1.0, 12)
    phi[:, 36:] = 0.5
    return phi / phi.sum(axis=1, keepdims=True)


def sample_corpus(theta, phi, lengths, seed):
    """Counts drawn through the declaration (site "x") at the given parameters."""
    params = {"theta": jnp.asarray(theta), "phi": jnp.asarray(phi)}
    with jax.enable_x64(True):
        model = handlers.seed(handlers.condition(plsa.plsa_model, params), seed)
        trace = handlers.trace(model).get_trace(
            n_components=phi.shape[0], n_words=phi.shape[1], doc_lengths=jnp.asarray(lengths)
        )
    return np.asarray(trace["x"]["value"], dtype=np.float64)


@pytest.fixture(scope="module")
def planted():
    rng = np.random.default_rng(0)
    phi = planted_topics()
    theta = rng.dirichlet(np.full(K, 0.5), size=D)
    X = sample_corpus(theta, phi, rng.integers(150, 450, size=D), seed=0)
    return X, theta, phi


@pytest.fixture(scope="module")
def corpus(planted):
    return planted[0]


@pytest.fixture(scope="module")
def fit(corpus):
    return PLSA(K, random_state=0).fit(corpus)


def dense_loglik(X, theta, phi):
    """sum_d log Multinomial(x_d | N_d, theta_d phi), with SciPy."""
    return float(
        sum(multinomial(x.sum(), p).logpmf(x) for x, p in zip(X, theta @ phi, strict=True))
    )


def kl_divergence(X, Y):
    """Generalised KL divergence D(X || Y) as NMF's beta_loss="kullback-leibler"."""
    return float(np.sum(xlogy(X, X) - xlogy(X, Y) - X + Y))


def topic_distance(phi_fit, phi_true):
    """Total-variation distance of each planted topic to its Hungarian-matched fit."""
    tv = 0.5 * np.abs(phi_fit[:, None, :] - phi_true[None, :, :]).sum(-1)
    rows, cols = linear_sum_assignment(tv)
    order = np.empty(K, int)
    order[cols] = rows
    return tv[rows, cols], order


# -- EM --------------------------------------------------------------------------------


def test_em_never_decreases_loglik(fit):
    trace = fit.log_likelihoods_
    assert fit.converged_ and len(trace) > 5
    assert is_monotone(trace)
    assert trace[-1] - trace[0] > 100.0  # it did climb


def test_loglik_of_the_declaration_is_the_dense_multinomial_loglik(corpus, fit):
    from numpyro.infer.util import log_likelihood

    n = corpus.shape[0]
    with jax.enable_x64(True):
        ll = log_likelihood(fit.model_, {k: v[None] for k, v in fit.params_.items()}, corpus)
        total = float(sum(np.asarray(v).sum() for v in ll.values()))
    np.testing.assert_allclose(total, fit.log_likelihoods_[-1], rtol=1e-10)
    # score folds theta in afresh (from a uniform start, as the fit's last fold-in): it
    # stops within ~2e-5 nats per document of the maximum, as the fit's did
    np.testing.assert_allclose(n * fit.score(corpus), total, rtol=0, atol=1e-6 * n)
    # and an oracle that shares nothing with NumPyro or latentlab
    expected = dense_loglik(corpus, fit.params_["theta"], fit.params_["phi"])
    np.testing.assert_allclose(total, expected, rtol=1e-10)


def test_planted_topics_are_recovered(planted, fit):
    X, theta, phi = planted
    tv, order = topic_distance(fit.components_, phi)
    # 60 documents of ~300 tokens: sampling error alone is ~0.03 TV per topic; a fit
    # that mixed two topics would be off by > 0.3
    assert np.all(tv < 0.05), tv
    doc_tv = 0.5 * np.abs(fit.transform(X)[:, order] - theta).sum(axis=1)
    assert doc_tv.mean() < 0.04, doc_tv.mean()
    np.testing.assert_allclose(fit.components_.sum(axis=1), 1.0, rtol=1e-12)


def test_matches_kl_nmf_from_the_same_start(corpus):
    # Gaussier & Goutte (2005): pLSA's EM and KL-NMF's multiplicative updates share
    # their fixed points; N_d theta_d Phi is the NMF product W H.
    rng = np.random.default_rng(1)
    theta0, phi0 = rng.dirichlet(np.ones(K), D), rng.dirichlet(np.ones(W), K)
    # run to a tight tolerance (a traced value: no recompilation) and give NMF 2000 steps;
    # tol is relative to |l_1| ~ 6e4 nats here: 1e-14 is the former 1e-11 per document
    ours = PLSA(K, tol=1e-14, doc_topic_init=theta0, topic_word_init=phi0).fit(corpus)
    lengths = corpus.sum(axis=1)
    nmf = NMF(K, beta_loss="kullback-leibler", solver="mu", init="custom", tol=0, max_iter=2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        W_nmf = nmf.fit_transform(corpus, W=lengths[:, None] * theta0, H=phi0.copy())
    H_nmf = nmf.components_
    Y_ours = lengths[:, None] * (ours.params_["theta"] @ ours.params_["phi"])
    kl_ours, kl_nmf = kl_divergence(corpus, Y_ours), kl_divergence(corpus, W_nmf @ H_nmf)
    assert kl_ours <= kl_nmf + 1e-9 * kl_nmf
    # KL divergence = constant - log-likelihood once the row sums match (they do for EM)
    const = np.sum(xlogy(corpus, corpus) - xlogy(corpus, lengths[:, None]))
    coef = np.sum(gammaln(lengths + 1)) - np.sum(gammaln(corpus + 1))
    np.testing.assert_allclose(kl_ours, const + coef - ours.log_likelihoods_[-1], rtol=1e-10)
    # the fixed points correspond: normalise W H into theta, Phi
    scale = H_nmf.sum(axis=1)
    theta_nmf = W_nmf * scale / (W_nmf * scale).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ours.params_["phi"], H_nmf / scale[:, None], atol=2e-4)
    np.testing.assert_allclose(ours.params_["theta"], theta_nmf, atol=1e-3)


def test_fold_in_reproduces_fitted_topic_proportions(corpus, fit):
    # fold-in starts from uniform proportions, and so does the fit's last fold-in: both
    # stop near each document's maximum, so close to each other in theta (curvature ~
    # document length)
    np.testing.assert_allclose(fit.transform(corpus), fit.params_["theta"], atol=1e-5)
    # the training documents in reverse order: same shapes, a different batch
    reversed_theta = fit.transform(corpus[::-1])[::-1]
    np.testing.assert_allclose(reversed_theta, fit.params_["theta"], atol=1e-5)
    np.testing.assert_allclose(fit.transform(corpus).sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(fit.fit_transform(corpus), fit.params_["theta"], rtol=1e-12)


def test_sparse_and_dense_input_give_identical_fits(corpus, fit):
    for matrix in (sp.csr_matrix(corpus), sp.coo_matrix(corpus), sp.csc_matrix(corpus)):
        est = PLSA(K, random_state=0).fit(matrix)
        for name in ("theta", "phi"):
            np.testing.assert_array_equal(est.params_[name], fit.params_[name])
        np.testing.assert_array_equal(est.score_samples(matrix), fit.score_samples(corpus))


# -- MAP: smoothed pLSA ------------------------------------------------------------------

PRIORS = dict(doc_topic_prior=1.5, topic_word_prior=1.2)


@pytest.fixture(scope="module")
def smoothed(corpus):
    return PLSA(K, random_state=0, **PRIORS).fit(corpus)


def test_smoothed_objective_is_the_declarations_log_joint(corpus, smoothed):
    from numpyro.infer.util import log_density, log_likelihood

    est = smoothed
    assert is_monotone(est.log_likelihoods_)
    with jax.enable_x64(True):
        params = {k: jnp.asarray(v) for k, v in est.params_.items()}
        joint, _ = log_density(est.model_, (corpus,), {}, params)
        ll = log_likelihood(est.model_, {k: v[None] for k, v in est.params_.items()}, corpus)
        loglik = float(sum(np.asarray(v).sum() for v in ll.values()))
    np.testing.assert_allclose(est.log_likelihoods_[-1], float(joint), rtol=1e-10)
    np.testing.assert_allclose(D * est.score(corpus), loglik, rtol=0, atol=1e-6 * D)  # fold-in
    # the M-step is the exact MAP on the simplex: at an interior maximum of the log
    # joint every coordinate of its gradient in theta_d equals the Lagrange multiplier,
    # which is sum_k theta_dk * gradient_dk = N_d + K (alpha - 1)
    theta, phi = est.params_["theta"], est.params_["phi"]
    alpha = PRIORS["doc_topic_prior"]
    gradient = (corpus / (theta @ phi)) @ phi.T + (alpha - 1.0) / theta
    multiplier = corpus.sum(axis=1) + K * (alpha - 1.0)
    # fold-in stops within ~1e-9 nats of the maximum: gradients agree to ~1e-6
    np.testing.assert_allclose(gradient, np.repeat(multiplier[:, None], K, 1), rtol=1e-5)


def test_gradient_map_reaches_the_em_map_objective(corpus, smoothed):
    # AutoDelta + Adam on the declaration, from a random start of its own
    est = PLSA(K, method="map", random_state=0, svi_steps=10_000, learning_rate=0.1, **PRIORS)
    est.fit(corpus)
    assert np.isfinite(est.log_likelihoods_).all()
    gap = smoothed.log_likelihoods_[-1] - est.log_likelihoods_[-1]
    assert abs(gap) < 1e-4, gap  # nats, out of ~4300
    tv, _ = topic_distance(est.components_, smoothed.components_)
    assert np.all(tv < 0.01), tv


def test_svi_random_state_reproduces_the_fit_through_the_shared_driver(corpus):
    # pLSA's MAP/SVI goes through latentlab.inference.svi.fit_best_of, whose
    # seeds come from random_state: the same random_state gives the same fit, another
    # one reaches the SVI (its starts and its gradient noise)
    def fit(seed):
        return PLSA(K, method="svi", svi_steps=40, n_init=2, random_state=seed).fit(corpus)

    a, b, c = fit(3), fit(3), fit(4)
    for key in a.params_:
        np.testing.assert_array_equal(a.params_[key], b.params_[key])
    np.testing.assert_array_equal(a.log_likelihoods_, b.log_likelihoods_)
    assert not np.array_equal(a.log_likelihoods_, c.log_likelihoods_)
    assert len(a.log_likelihoods_) == a.n_iter_ == 40


# -- tempered EM -----------------------------------------------------------------------


def test_tempered_em_climbs_the_tempered_objective(corpus):
    beta = 0.8
    est = PLSA(K, tempering=beta, random_state=0).fit(corpus)
    assert is_monotone(est.log_likelihoods_)
    theta, phi = est.params_["theta"], est.params_["phi"]
    lengths = corpus.sum(axis=1)
    coef = np.sum(gammaln(lengths + 1)) - np.sum(gammaln(corpus + 1))
    tempered = np.einsum("dk,kw->dkw", theta, phi) ** beta
    expected = coef + np.sum(corpus * np.log(tempered.sum(axis=1))) / beta
    np.testing.assert_allclose(est.log_likelihoods_[-1], expected, rtol=1e-10)
    # score is still the plain log-likelihood at the folded-in theta
    np.testing.assert_allclose(
        D * est.score(corpus), dense_loglik(corpus, est.transform(corpus), phi), rtol=1e-10
    )


# -- scores ----------------------------------------------------------------------------


def test_scores_perplexity_and_criteria(corpus, fit):
    theta, phi = fit.transform(corpus), fit.components_
    np.testing.assert_allclose(fit.score_samples(corpus).sum(), dense_loglik(corpus, theta, phi))
    tokens = corpus.sum()
    expected = np.exp(-np.sum(xlogy(corpus, theta @ phi)) / tokens)
    np.testing.assert_allclose(fit.perplexity(corpus), expected, rtol=1e-12)
    n_params = K * (W - 1) + D * (K - 1)  # 237: grows with the corpus
    np.testing.assert_allclose(fit.bic(corpus), -2 * D * fit.score(corpus) + n_params * np.log(D))
    np.testing.assert_allclose(fit.aic(corpus), -2 * D * fit.score(corpus) + 2 * n_params)


def test_document_completion_scores_held_out_tokens(corpus, fit):
    out = fit.completion_log_likelihood(corpus, fraction=0.3, random_state=7)
    assert out.shape == (D,) and np.all(np.isfinite(out))
    # the same binomial thinning, by hand
    csr = sp.csr_matrix(corpus)
    held = np.random.RandomState(7).binomial(csr.data.astype(np.int64), 0.3)
    scored = sp.csr_matrix((held.astype(float), csr.indices, csr.indptr), shape=csr.shape)
    scored = scored.toarray()
    theta = fit.transform(corpus - scored)
    expected = [
        multinomial(x.sum(), p).logpmf(x)
        for x, p in zip(scored, theta @ fit.components_, strict=True)
    ]
    np.testing.assert_allclose(out, expected, rtol=1e-9)
    tokens = scored.sum()
    np.testing.assert_allclose(
        fit.completion_perplexity(corpus, fraction=0.3, random_state=7),
        np.exp(-np.sum(xlogy(scored, theta @ fit.components_)) / tokens),
        rtol=1e-9,
    )
    # folding in on the scored words themselves is optimistic
    assert fit.completion_perplexity(corpus, random_state=0) > fit.perplexity(corpus)


def test_sample_draws_documents_of_the_training_lengths(corpus, fit):
    X, z = fit.sample(random_state=0)
    assert X.shape == (D, W) and z.shape == (D, K)
    np.testing.assert_array_equal(X.sum(axis=1), corpus.sum(axis=1))
    np.testing.assert_array_equal(z.sum(axis=1), corpus.sum(axis=1))
    expected = corpus.sum(axis=1)[:, None] * (fit.params_["theta"] @ fit.components_)
    # ~18,000 tokens: column totals within 5 standard deviations of their means
    sd = np.sqrt(expected.sum(axis=0))
    assert np.all(np.abs(X.sum(axis=0) - expected.sum(axis=0)) < 5 * sd + 1)


@pytest.fixture(scope="module")
def without_two_words(corpus):
    """The corpus without words 5 and 17 (no document left empty), and its fit."""
    X = corpus.copy()
    X[:, [5, 17]] = 0.0
    X[X.sum(axis=1) == 0, 0] = 1.0
    with pytest.warns(UserWarning, match="2 word.*never occur"):
        est = PLSA(K, random_state=0).fit(X)
    return X, est


def test_never_seen_words_get_probability_zero_without_nan(corpus, without_two_words):
    X, est = without_two_words
    assert np.all(est.components_[:, [5, 17]] == 0.0)
    assert np.all(np.isfinite(est.score_samples(X))) and np.isfinite(est.perplexity(X))
    # documents that use those words score -inf under the ML topics, never NaN
    uses = np.arange(D) % 2 == 1
    new = np.where(uses[:, None], corpus, X)
    with pytest.warns(UserWarning, match="probability 0"):
        scores = est.score_samples(new)
    assert np.all(scores[uses] == -np.inf) and np.all(np.isfinite(scores[~uses]))
    with pytest.warns(UserWarning, match="probability 0"):
        assert np.all(np.isfinite(est.transform(new)))


def test_max_iter_warns(corpus):
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        est = PLSA(K, max_iter=2, random_state=0).fit(corpus)
    assert not est.converged_ and est.n_iter_ == 2 and len(est.log_likelihoods_) == 2


def test_nuts_warns_about_the_theta_phi_ridge_before_sampling(corpus, fit, monkeypatch):
    """theta @ phi is all the likelihood sees, so NUTS on K > 1 topics gets a warning
    (it would report divergences only after a long run); K = 1 is identified."""
    from latentlab.inference import mcmc

    class Sampled(Exception):
        pass

    def stop(*args, **kwargs):
        raise Sampled

    monkeypatch.setattr(mcmc, "run_nuts", stop)
    with pytest.warns(UserWarning, match="theta @ phi") as caught, pytest.raises(Sampled):
        fit.sample_posterior(corpus, method="nuts")
    assert caught[0].filename == __file__  # points at the caller
    one = PLSA(1, random_state=0).fit(corpus)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(Sampled):
            one.sample_posterior(corpus, method="nuts")


# -- surface ---------------------------------------------------------------------------


def test_top_words_and_save_load_round_trip(tmp_path, corpus, fit):
    vocabulary = [f"w{j:02d}" for j in range(W)]
    est = PLSA(K, random_state=0, vocabulary=vocabulary).fit(corpus)
    top = est.top_words(4)
    assert top.shape == (K, 4)
    indices = fit.top_words(4)
    np.testing.assert_array_equal(top, np.asarray(vocabulary)[indices])
    # each topic's four most probable words lie in one planted block of 12 own words
    blocks = indices // 12
    assert np.all(blocks == blocks[:, :1]) and sorted(blocks[:, 0]) == [0, 1, 2]
    path = tmp_path / "plsa.npz"
    est.save(path)
    loaded = latentlab.load(path)
    assert loaded.get_params() == est.get_params()  # the vocabulary setting too
    np.testing.assert_array_equal(loaded.top_words(4), top)
    np.testing.assert_array_equal(loaded.score_samples(corpus), est.score_samples(corpus))
    np.testing.assert_array_equal(loaded.transform(corpus), est.transform(corpus))


def test_sklearn_protocol(corpus, fit):
    est = clone(fit)
    assert est.get_params() == fit.get_params() and not hasattr(est, "params_")
    est.set_params(n_components=2)
    assert est.get_params()["n_components"] == 2
    for out in (fit.transform(corpus), fit.score_samples(corpus), fit.components_):
        assert type(out) is np.ndarray and out.dtype == np.float64
    np.testing.assert_array_equal(fit.get_feature_names_out(), ["plsa0", "plsa1", "plsa2"])


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "X, kwargs, match",
    [
        (np.array([[1.0, -1.0], [2.0, 3.0]]), {}, "negative count"),
        (np.array([[1.0, 0.5], [2.0, 3.0]]), {}, "non-integer count"),
        (np.array([[1.0, 2.0], [0.0, 0.0]]), {}, "empty document.*rows 1"),
        (np.array([[1.0, np.nan], [2.0, 3.0]]), {}, "NaN"),
        (np.array([[1.0, np.inf], [2.0, 3.0]]), {}, "infinity"),
        (sp.csr_matrix(np.array([[1.0, -2.0], [2.0, 3.0]])), {}, "negative count"),
        (np.ones(4), {}, "2D array"),
        (np.ones((3, 2)), {"n_components": 0}, "n_components"),
        (np.ones((3, 2)), {"method": "gibbs"}, "method"),
        (np.ones((3, 2)), {"tempering": 1.5}, "tempering"),
        (np.ones((3, 2)), {"tempering": 0.5, "method": "map"}, "tempering"),
        (np.ones((3, 2)), {"doc_topic_prior": 0.5}, "doc_topic_prior must be a number >= 1"),
        (np.ones((3, 2)), {"topic_word_prior": 0.5, "method": "svi"}, "topic_word_prior"),
        (np.ones((3, 2)), {"vocabulary": ["a", "b", "c"]}, "vocabulary has 3 words"),
        (np.ones((3, 2)), {"doc_topic_init": np.ones((2, 1))}, "doc_topic_init must have"),
        (np.ones((3, 2)), {"tol": -1.0}, "tol"),
    ],
)
def test_bad_input_is_rejected_with_a_named_problem(X, kwargs, match):
    kwargs = {"n_components": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        PLSA(**kwargs).fit(X)


def test_bad_input_to_a_fitted_model(corpus, fit):
    with pytest.raises(ValueError, match="non-integer"):
        fit.transform(corpus + 0.5)
    with pytest.raises(ValueError, match="empty document"):
        fit.score_samples(np.zeros((1, W)))
    with pytest.raises(ValueError, match="features"):
        fit.transform(corpus[:, :10])
    with pytest.raises(ValueError, match="fraction"):
        fit.completion_log_likelihood(corpus, fraction=1.0)


# -- defaults on digits, the dense E-step, held-out scoring of unseen words -------------


def test_dense_and_nonzero_e_steps_agree(corpus):
    # the E-step by dense matrix products (chosen for dense corpora) against the one at
    # the nonzeros: same statistics and objective up to round-off, EM and fold-in alike
    from latentlab.models.plsa_programs import build_corpus

    rng = np.random.default_rng(3)
    csr = sp.csr_matrix(corpus)
    with jax.enable_x64(True):
        dense, sparse = (build_corpus(csr, jnp.float64, dense=flag) for flag in (True, False))
        assert dense.dense is not None and sparse.dense is None
        n = dense.doc_mask.shape[0]
        params = plsa.Params(
            jnp.asarray(rng.dirichlet(np.ones(K), n)), jnp.asarray(rng.dirichlet(np.ones(W), K))
        )
        hyper = plsa.Hyper(*(jnp.asarray(v, jnp.float64) for v in (1.0, 1.0, 0.0, 1.0)))
        (a, fa), (b, fb) = (plsa.e_step(params, c, hyper) for c in (dense, sparse))
        np.testing.assert_allclose(a.doc_counts, b.doc_counts, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.word_counts, b.word_counts, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fa, fb, rtol=1e-13)
        np.testing.assert_allclose(fa, dense_loglik(corpus, params.theta[:D], params.phi))
        topics = plsa.DocTopics(params.theta)
        (a, fa), (b, fb) = (
            plsa.fold_in_e_step(topics, c, plsa.fold_in_hyper(params.phi, c, hyper))
            for c in (dense, sparse)
        )
        for x, y in zip(a, b, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fa, fb, rtol=1e-13)


@pytest.fixture(scope="module")
def digits_counts():
    from sklearn.datasets import load_digits

    return load_digits().data  # 1797 x 64 pixel intensities 0..16, read as counts


@pytest.mark.parametrize("n_topics", [5, 10, 20])
def test_default_fits_of_digits_converge_near_a_long_fit(digits_counts, n_topics):
    # The old default (an absolute 1e-8 nats per document) hit max_iter=1000 with a
    # ConvergenceWarning at K = 10 and 20.  The relative rule (tol=1e-8 of the one-topic
    # log-likelihood, 2.1e6 nats here) stops within 100-1,600 SQUAREM cycles, and
    # within 1e-3 nats per token of 2,000 cycles from the same start; pLSA's likelihood
    # has long plateaus, so that reference is not the optimum either (scikit-learn's
    # KL-NMF after 1,000 iterations is 3e-3 per token below it at K = 10).
    X = digits_counts
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.filterwarnings("ignore", message=".*never occur", category=UserWarning)
        fit = PLSA(n_topics, random_state=0).fit(X)
    assert fit.converged_ and fit.n_iter_ < 2000
    assert is_monotone(fit.log_likelihoods_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        long = PLSA(n_topics, random_state=0, tol=0.0, max_iter=2000).fit(X)
    gap = long.log_likelihoods_[-1] - fit.log_likelihoods_[-1]
    assert 0 <= gap < 1e-3 * X.sum(), (gap, gap / X.sum())


def test_fold_in_in_shrinking_batches_reaches_every_documents_maximum(digits_counts):
    # Fold-in gathers the documents still moving into batches of D, D/4, D/16 rows
    # (models/_plsa_fold_in.py).  Oracle: each document's concave problem solved apart,
    # by 20,000 plain EM steps in NumPy, which the KKT conditions confirm.
    X = digits_counts[:300]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PLSA(6, random_state=0).fit(X)
    assert len(plsa.fold_in_batch_sizes(512)) == 3  # 300 new documents: 512, 128, 32 rows
    phi = est.components_

    def ratio(theta):  # x_dw / p_dw at the nonzeros (words of probability 0 never occur)
        return np.divide(X, theta @ phi, out=np.zeros_like(X), where=X > 0)

    theta = np.full((X.shape[0], 6), 1 / 6)
    for _ in range(20_000):
        theta *= ratio(theta) @ phi.T
        theta /= theta.sum(axis=1, keepdims=True)
    gradient = ratio(theta) @ phi.T / X.sum(axis=1, keepdims=True)
    assert np.all(gradient <= 1 + 1e-6)  # KKT: no topic would gain share
    best = xlogy(X, theta @ phi).sum(axis=1)
    for got in (est.transform(X), est.params_["theta"]):
        shortfall = best - xlogy(X, got @ phi).sum(axis=1)
        # measured 2e-5 at most (1e-4 with the former per-cycle tolerance 1e-8)
        assert shortfall.max() < 5e-5 and shortfall.min() > -1e-9, (
            shortfall.min(),
            shortfall.max(),
        )


def test_held_out_tokens_of_unseen_words_are_scored_at_the_floor(corpus, without_two_words):
    # Cross-validation on digits gave -inf: a rare pixel present only in the held-out
    # fold has probability 0 under ML topics.  Completion scoring now gives such words
    # the add-one floor 1 / (N + W) and rescales the rest; oracle: SciPy's multinomial
    # at that (normalised) distribution.
    X, est = without_two_words
    with pytest.warns(UserWarning, match="absent from the training corpus"):
        out = est.completion_log_likelihood(corpus, fraction=0.3, random_state=7)
    assert np.all(np.isfinite(out))
    csr = sp.csr_matrix(corpus)
    held = np.random.RandomState(7).binomial(csr.data.astype(np.int64), 0.3)
    scored = sp.csr_matrix((held.astype(float), csr.indices, csr.indptr), shape=csr.shape)
    scored = scored.toarray()
    with pytest.warns(UserWarning, match="probability 0"):
        theta = est.transform(corpus - scored)
    floor = 1.0 / (X.sum() + W)
    p = (1.0 - 2 * floor) * (theta @ est.components_)
    p[:, [5, 17]] = floor
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    expected = [multinomial(x.sum(), q).logpmf(x) for x, q in zip(scored, p, strict=True)]
    np.testing.assert_allclose(out, expected, rtol=1e-9)
    # and latentlab.compare, which scores folds this way, reports a finite held-out
    # log-likelihood when a word occurs in one document only
    rare = X.copy()
    rare[0, 5] = 40.0  # 40 tokens: some are held out in its completion split
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*never occur", category=UserWarning)
        warnings.filterwarnings(
            "ignore", message=".*absent from the training", category=UserWarning
        )
        table = latentlab.compare({"plsa": PLSA(K, random_state=0)}, rare, cv=3)
    assert table.loc["plsa", "error"] is None
    assert np.isfinite(table.loc["plsa", "heldout_loglik"])


def test_fit_does_not_depend_on_the_padding_rows_draws(corpus):
    # The corpus is padded to a bucket of rows (60 -> 64 here).  Their random starting
    # proportions moved in the first M-step and entered SQUAREM's step length, so two
    # fits from the same given start differed with random_state (digits: 0.2% of the
    # log-likelihood); the padding now starts at its fixed point.
    rng = np.random.default_rng(2)
    start = dict(doc_topic_init=rng.dirichlet(np.ones(K), D), topic_word_init=planted_topics())
    a, b = (PLSA(K, random_state=seed, **start).fit(corpus) for seed in (0, 1))
    np.testing.assert_array_equal(a.log_likelihoods_, b.log_likelihoods_)
    for name in ("theta", "phi"):
        np.testing.assert_array_equal(a.params_[name], b.params_[name])


# -- few compiled programs ----------------------------------------------------------------


def test_padded_topics_give_the_unpadded_fit(corpus):
    # EM runs with the topic axis padded to a multiple of 4 (K = 3 -> 4 here) by topics
    # of exactly zero weight, a fixed point of EM, so that a search over K reuses one
    # compiled program.  Oracle: the same fit without padding, ML, MAP and tempered.
    # (SQUAREM's floor for a coordinate pushed below zero, 1e-3 of the uniform, counted
    # the padding topics at first: the trace then differed from the 10th cycle on.)
    for settings in ({}, PRIORS, {"tempering": 0.8}):
        padded = PLSA(K, random_state=0, **settings).fit(corpus)
        with latentlab.config_context(padding=False):
            plain = PLSA(K, random_state=0, **settings).fit(corpus)
        assert padded.n_iter_ == plain.n_iter_, settings
        np.testing.assert_allclose(
            padded.log_likelihoods_, plain.log_likelihoods_, rtol=1e-10, err_msg=str(settings)
        )
        np.testing.assert_allclose(padded.components_, plain.components_, rtol=0, atol=1e-10)
        # theta comes out of the last fold-in, whose stop (a threshold on each cycle's
        # change) a round-off difference can move by one cycle: seen 7e-10 here
        np.testing.assert_allclose(
            padded.params_["theta"], plain.params_["theta"], rtol=0, atol=1e-8
        )
        assert padded.params_["theta"].shape == (D, K) and padded.components_.shape == (K, W)


COMPILE_COUNT = """
import json, warnings
import jax.monitoring
from sklearn.datasets import load_digits
from latentlab import PLSA

compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kwargs: compiles.append(event)
    if event == "/jax/core/compile/backend_compile_duration" else None
)
X = load_digits().data
warnings.simplefilter("ignore")  # ConvergenceWarning at max_iter, unused pixels
counts = {}
est = PLSA(5, max_iter=50, random_state=0).fit(X)
counts["fit"] = len(compiles)
for n_components in (6, 7, 8):
    PLSA(n_components, max_iter=50, random_state=0).fit(X)
counts["more_topics"] = len(compiles) - counts["fit"]
est.transform(X[:40])
est.score(X[:50])
counts["fold_in"] = len(compiles) - counts["fit"] - counts["more_topics"]
print(json.dumps(counts))
"""


def test_a_cold_fit_compiles_few_programs():
    # formerly one cold PLSA(5).fit(digits) compiled 31 XLA programs (~0.6 s of which
    # was EM; the rest eager key, initialisation, normalisation and gather ops), a K
    # search over 5-8 compiled 54 more, and fold-in 10 per new row count.  Now EM and
    # the last fold-in are one program, with topics padded to a multiple of 4 and new
    # documents' rows to a power of two.  In a fresh process (compile counts are
    # deterministic there), without the persistent compilation cache.
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "LATENTLAB_CACHE_DIR": "", "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", COMPILE_COUNT], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["fit"] <= 4, counts
    assert counts["more_topics"] == 0, counts  # 6, 7, 8 topics pad to 8 as 5 does
    assert counts["fold_in"] <= 1, counts  # 40 and 50 rows share the 64-row program
