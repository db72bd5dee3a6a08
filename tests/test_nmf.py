"""NMF against scikit-learn from the same starts, KL-NMF against pLSA (one KL update), and
the other beta-divergences against their definition and scikit-learn's updates."""

import warnings

import numpy as np
import pytest
from sklearn import decomposition
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import check_estimator

import latentlab

RNG = np.random.default_rng(0)
K = 3
# counts from a planted non-negative rank-3 model: a well-separated optimum
X = RNG.poisson(5 * RNG.gamma(1.0, 1.0, (60, K)) @ RNG.gamma(1.0, 1.0, (K, 20))).astype(float)
W0 = RNG.uniform(0.1, 1.0, (60, K))
H0 = RNG.uniform(0.1, 1.0, (K, 20))
FROBENIUS, KL = "frobenius", "kullback-leibler"

# check_estimator: every check passes (none expected to fail).
NMF_EXPECTED_FAILED_CHECKS: dict[str, str] = {}


def _pair(**settings):
    """(scikit-learn's fit, ours) from the custom start (W0, H0), warnings silenced."""
    accelerate = settings.pop("accelerate", True)  # ours only
    settings = dict(n_components=K, init="custom", **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = decomposition.NMF(**settings)
        ref_W = ref.fit_transform(X, W=W0.copy(), H=H0.copy())
        ours = latentlab.NMF(**settings, accelerate=accelerate)
        W = ours.fit_transform(X, W=W0, H=H0)
    return ref, ref_W, ours, W


@pytest.mark.parametrize(
    "loss, solver",
    [(FROBENIUS, "mu"), (FROBENIUS, "cd"), (KL, "mu")],
    ids=["fro-mu", "fro-cd", "kl-mu"],
)
def test_reaches_sklearn_objective_from_the_same_start(loss, solver):
    # Our default paths are accelerated (Frobenius: repeated cheap passes; KL: the EM
    # step), scikit-learn's are not; from the same start both must reach the same optimum.
    # Multiplicative updates crawl towards it (scikit-learn's "mu" is 2e-5 short after
    # 20,000 iterations): ours must get at least as far as scikit-learn's in 2,000, and
    # no further than the optimum scikit-learn's "cd" converges to.
    max_iter = 2000 if (loss, solver) == (FROBENIUS, "mu") else 20000
    ref, _, ours, W = _pair(beta_loss=loss, solver=solver, tol=1e-10, max_iter=max_iter)
    if solver == "mu" and loss == FROBENIUS:
        optimum = _pair(solver="cd", tol=1e-10, max_iter=20000, accelerate=False)[0]
        assert ours.reconstruction_err_ <= ref.reconstruction_err_ * (1 + 1e-12)
        assert ours.reconstruction_err_ >= optimum.reconstruction_err_ * (1 - 1e-9)
    else:
        assert ours.reconstruction_err_ == pytest.approx(ref.reconstruction_err_, rel=1e-6)
    # the reported error is the loss at the returned factors
    WH = W @ ours.components_
    if loss == FROBENIUS:
        expected = np.linalg.norm(X - WH)
    else:
        expected = np.sqrt(
            2 * np.sum(np.where(X > 0, X * np.log(np.where(X > 0, X, 1) / WH), 0) - X + WH)
        )
    assert ours.reconstruction_err_ == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("solver", ["mu", "cd"])
def test_unaccelerated_frobenius_is_sklearns_algorithm(solver):
    # accelerate=False: scikit-learn's updates, iterate for iterate
    max_iter = 2000 if solver == "mu" else 20000
    settings = dict(solver=solver, tol=1e-10, max_iter=max_iter, accelerate=False)
    ref, ref_W, ours, W = _pair(**settings)
    assert ours.n_iter_ == ref.n_iter_
    assert ours.reconstruction_err_ == pytest.approx(ref.reconstruction_err_, rel=1e-12)
    np.testing.assert_allclose(ours.components_, ref.components_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(W, ref_W, rtol=1e-8, atol=1e-10)


def test_accelerated_frobenius_needs_fewer_iterations():
    # Gillis & Glineur's repeated passes: the same optimum (above) in fewer products
    # with X; the gain must be real, not a stopping-rule artefact
    settings = dict(solver="cd", tol=1e-10, max_iter=20000)
    fast = _pair(**settings)[2]
    slow = _pair(accelerate=False, **settings)[2]
    assert fast.reconstruction_err_ == pytest.approx(slow.reconstruction_err_, rel=1e-9)
    assert fast.n_iter_ < 0.8 * slow.n_iter_


def test_extrapolated_cd_reaches_the_optimum_in_far_fewer_iterations():
    # Ang & Gillis's extrapolation on top of the repeated passes ("cd", accelerated):
    # the same optimum as scikit-learn's algorithm in under 0.3x its iterations (the
    # passes alone took 0.57x: 3123 against 5463 here)
    settings = dict(solver="cd", tol=1e-10, max_iter=20000)
    fast = _pair(**settings)[2]
    slow = _pair(accelerate=False, **settings)[2]
    assert fast.reconstruction_err_ == pytest.approx(slow.reconstruction_err_, rel=1e-12)
    assert fast.n_iter_ < 0.3 * slow.n_iter_


def test_penalised_objective_without_products_with_x_equals_the_direct_one():
    import jax

    from latentlab.closed_form.nmf import penalised_objective

    W, H = W0 + 0.3, H0 - 0.2  # any signs: the extrapolated points can leave the orthant
    penalties = (0.3, 0.1, 0.7, 0.2)  # l1_W, l1_H, l2_W, l2_H
    direct = (
        0.5 * np.sum((X - W @ H) ** 2)
        + 0.3 * W.sum()
        + 0.1 * H.sum()
        + 0.35 * np.sum(W**2)
        + 0.1 * np.sum(H**2)
    )
    with jax.enable_x64(True):
        got = penalised_objective(np.sum(X * X), W, H, W.T @ X, penalties)
    assert float(got) == pytest.approx(direct, rel=1e-12)


@pytest.mark.parametrize("l1_ratio", [0.0, 1.0])
@pytest.mark.parametrize(
    "loss, solver",
    [(FROBENIUS, "mu"), (FROBENIUS, "cd"), (KL, "mu")],
    ids=["fro-mu", "fro-cd", "kl-mu"],
)
def test_regularisation_as_sklearn(loss, solver, l1_ratio):
    # scikit-learn's penalty scaling (alpha_W by n_features, alpha_H="same" by n_samples)
    # and updates: from the same start the same factors after the same iterations
    # accelerate=False: scikit-learn's iterates (the accelerated path shares the penalty
    # terms: test_accelerated_penalised_fit_reaches_sklearns_optimum)
    settings = dict(
        beta_loss=loss, solver=solver, tol=0.0, max_iter=300, l1_ratio=l1_ratio, accelerate=False
    )
    ref, ref_W, ours, W = _pair(alpha_W=0.05, **settings)
    np.testing.assert_allclose(W, ref_W, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ours.components_, ref.components_, rtol=1e-7, atol=1e-9)
    assert ours.reconstruction_err_ == pytest.approx(ref.reconstruction_err_, rel=1e-9)
    # and the penalty does move the fit (by far more than the agreement above)
    plain_W = _pair(**settings)[3]
    assert np.max(np.abs(W - plain_W)) > 1e-3 * np.max(np.abs(W))


def test_accelerated_penalised_fit_reaches_sklearns_optimum():
    settings = dict(solver="cd", tol=1e-10, max_iter=20000, alpha_W=0.05, l1_ratio=0.5)
    ref, ref_W, ours, W = _pair(**settings)
    assert ours.n_iter_ < ref.n_iter_
    # both stop on a relative violation of 1e-10, each a little way from the optimum
    np.testing.assert_allclose(ours.components_, ref.components_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(W, ref_W, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("init", ["nndsvd", "nndsvda", "nndsvdar", "random"])
def test_starts_equal_sklearns(init):
    # X has 12 columns: K + 10 oversamples span them, so scikit-learn's randomized SVD
    # is exact and so is ours; one "cd" iteration (scikit-learn's) from each start must
    # then agree
    Xs = X[:, :12]
    settings = dict(n_components=K, init=init, solver="cd", max_iter=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = decomposition.NMF(**settings)
        ref_W = ref.fit_transform(Xs)
        ours = latentlab.NMF(**settings, accelerate=False)
        W = ours.fit_transform(Xs)
    np.testing.assert_allclose(W, ref_W, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(ours.components_, ref.components_, rtol=1e-9, atol=1e-10)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_kl_nmf_and_plsa_give_the_same_topics_from_the_same_start():
    # pLSA's EM step is the KL-NMF update of W = diag(N) theta, H = Phi followed by
    # normalisation (Gaussier & Goutte 2005): the same iterates, from one function
    counts = X[:, :16]  # dense counts: pLSA's dense E-step, the shared update
    assert np.mean(counts > 0) > 0.3
    theta0 = W0 / W0.sum(axis=1, keepdims=True)
    phi0 = H0[:, :16] / H0[:, :16].sum(axis=1, keepdims=True)
    lengths = counts.sum(axis=1, keepdims=True)
    steps = 60
    nmf = latentlab.NMF(K, init="custom", solver="mu", beta_loss=KL, tol=0.0, max_iter=steps)
    W = nmf.fit_transform(counts, W=lengths * theta0, H=phi0)
    plsa = latentlab.PLSA(
        K,
        accelerate=False,
        tol=0.0,
        max_iter=steps,
        doc_topic_init=theta0,
        topic_word_init=phi0,
    ).fit(counts)
    topics = nmf.components_ / nmf.components_.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(topics, plsa.components_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(W.sum(axis=1), lengths[:, 0], rtol=1e-10)


def test_transform_and_inverse_transform_as_sklearn():
    # the fit without acceleration has scikit-learn's H (the optimum is unique only up
    # to a positive scale per component: an accelerated fit ends at another scaling);
    # W given H is a convex problem, so the accelerated transform must find
    # scikit-learn's W
    settings = dict(beta_loss=FROBENIUS, solver="cd", tol=1e-10, max_iter=2000)
    ref, _, ours, W = _pair(accelerate=False, **settings)
    Xnew = X[:7] + 1.0
    expected = ref.transform(Xnew)
    np.testing.assert_allclose(ours.transform(Xnew), expected, rtol=1e-6, atol=1e-8)
    ours.set_params(accelerate=True)
    np.testing.assert_allclose(ours.transform(Xnew), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ours.inverse_transform(W), W @ ours.components_)
    ref_mu, _, ours_mu, _ = _pair(beta_loss=KL, solver="mu", alpha_W=0.01, tol=1e-10, max_iter=2000)
    np.testing.assert_allclose(ours_mu.components_, ref_mu.components_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(
        ours_mu.transform(Xnew), ref_mu.transform(Xnew), rtol=1e-5, atol=1e-8
    )


@pytest.mark.parametrize(
    "settings, fit_args, match",
    [
        (dict(), dict(X=-X), "Negative values"),
        (dict(), dict(X=np.where(X > 3, np.nan, X)), "NaN"),
        (dict(init="custom"), dict(), "needs W"),
        (dict(init="custom"), dict(W=W0, H=H0[:, :5]), r"H must have shape \(3, 20\)"),
        (dict(init="custom"), dict(W=W0[:5], H=H0), r"W must have shape \(60, 3\)"),
        (dict(init="custom"), dict(W=-W0, H=H0), "W contains negative"),
        (dict(solver="cd", beta_loss=KL), dict(), "solver='cd' handles beta_loss='frobenius'"),
        (dict(beta_loss="euclidean", solver="mu"), dict(), "Unknown beta_loss"),
        (dict(beta_loss=float("inf"), solver="mu"), dict(), "beta_loss"),
        (dict(solver="cd", beta_loss=0.5), dict(), "solver='cd' handles beta_loss='frobenius'"),
        (dict(beta_loss="itakura-saito", solver="mu"), dict(), "infinite where X is 0"),
        (dict(beta_loss=-0.5, solver="mu"), dict(), "cannot fit X with zeros"),
        (dict(solver="als"), dict(), "Unknown solver"),
        (dict(init="svd"), dict(), "Unknown init"),
        (dict(l1_ratio=2.0), dict(), "l1_ratio must be in"),
        (dict(alpha_W=-1.0), dict(), "alpha_W must be"),
        (dict(n_components=0), dict(), "n_components must be"),
        (dict(n_components=30, init="nndsvd"), dict(), "min\\(n_samples, n_features\\)"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(settings, fit_args, match):
    data = fit_args.pop("X", X)
    settings.setdefault("n_components", K)
    with pytest.raises(ValueError, match=match):
        latentlab.NMF(**settings).fit(data, **fit_args)


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # init="random" (drawn on the host): the NNDSVD program would compile for every
        # shape the checks use (+6 s); test_starts_equal_sklearns covers it
        estimator = latentlab.NMF(n_components=2, init="random", max_iter=500)
        results = check_estimator(estimator, on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(NMF_EXPECTED_FAILED_CHECKS), failed


@pytest.mark.parametrize("solver", ["cd", "mu"])
def test_float32_data_give_float32_factors(solver):
    """As scikit-learn: float32 in, float32 out; computed in float64 from the data
    float32 holds and rounded once, so the factors equal that fit's rounded."""
    X = np.abs(np.random.default_rng(0).normal(size=(30, 12)))
    X = X.astype(np.float32).astype(np.float64)
    fit32 = latentlab.NMF(3, solver=solver, random_state=0, max_iter=400)
    W32 = fit32.fit_transform(X.astype(np.float32))
    fit64 = latentlab.NMF(3, solver=solver, random_state=0, max_iter=400)
    W64 = fit64.fit_transform(X)
    assert W32.dtype == np.float32 and fit32.components_.dtype == np.float32
    np.testing.assert_array_equal(fit32.components_, fit64.components_.astype(np.float32))
    np.testing.assert_array_equal(W32, W64.astype(np.float32))
    assert fit32.transform(X.astype(np.float32)).dtype == np.float32
    ints = latentlab.NMF(3, solver=solver, random_state=0).fit(np.rint(X * 10).astype(np.int32))
    assert ints.components_.dtype == np.float64


# -- the other beta-divergences (Fevotte & Idier 2011) ------------------------------------

BETAS = [0, 0.5, 1.5, 2.5, "itakura-saito"]
# a planted positive rank-2 model with multiplicative noise: no zeros (beta <= 0 allowed),
# and the multiplicative updates reach a fixed point within a few thousand iterations
_PLANTED = np.random.default_rng(1)
XS = (
    _PLANTED.gamma(2.0, 1.0, (30, 2))
    @ _PLANTED.gamma(2.0, 1.0, (2, 10))
    * _PLANTED.gamma(20.0, 1 / 20, (30, 10))
)
WS0 = _PLANTED.uniform(0.5, 1.5, (30, 2))
HS0 = _PLANTED.uniform(0.5, 1.5, (2, 10))


def _beta(beta):
    return {"itakura-saito": 0.0}.get(beta, beta)


def _beta_divergence_reference(X, WH, beta):
    """D_beta(X || WH) entry by entry from its definition (Fevotte & Idier 2011, eq. 3-4),
    for X > 0: the limits beta = 1 (KL) and beta = 0 (Itakura-Saito) written out."""
    beta = _beta(beta)
    if beta == 0:
        return np.sum(X / WH - np.log(X / WH) - 1)
    if beta == 1:
        return np.sum(X * np.log(X / WH) - X + WH)
    return np.sum(
        (X**beta + (beta - 1) * WH**beta - beta * X * WH ** (beta - 1)) / (beta * (beta - 1))
    )


def _gradient_parts(X, W, H, beta):
    """The two non-negative parts of the divergence's gradient in W and in H,
    ``grad = denominator - numerator`` (the multiplicative update's ratio)."""
    beta = _beta(beta)
    WH = W @ H
    numerator, denominator = X * WH ** (beta - 2), WH ** (beta - 1)
    return (numerator @ H.T, denominator @ H.T), (W.T @ numerator, W.T @ denominator)


@pytest.mark.parametrize("beta", BETAS)
def test_beta_divergence_fit_reaches_sklearns_objective_from_the_same_start(beta):
    # scikit-learn's algorithm (Fevotte & Idier's MM updates, its stopping rule): from
    # the same start the same iterates, so a converged fit is at least as good
    settings = dict(n_components=2, init="custom", solver="mu", beta_loss=beta)
    settings.update(tol=1e-10, max_iter=5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = decomposition.NMF(**settings)
        ref_W = ref.fit_transform(XS, W=WS0.copy(), H=HS0.copy())
        ours = latentlab.NMF(**settings)
        W = ours.fit_transform(XS, W=WS0, H=HS0)
    assert ours.reconstruction_err_ <= ref.reconstruction_err_ * (1 + 1e-10)
    assert ours.reconstruction_err_ == pytest.approx(ref.reconstruction_err_, rel=1e-10)
    assert ours.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(W, ref_W, rtol=1e-7)
    np.testing.assert_allclose(ours.components_, ref.components_, rtol=1e-7)
    # reconstruction_err_ is sqrt(2 D_beta) at the returned factors, from the definition
    divergence = _beta_divergence_reference(XS, W @ ours.components_, beta)
    assert ours.reconstruction_err_ == pytest.approx(np.sqrt(2 * divergence), rel=1e-10)


def test_beta_divergence_with_zeros_in_x_as_sklearn():
    # beta > 0 accepts zeros: their terms in X vanish (0 * WH^(beta-1) = 0), WH^beta
    # stays; from scikit-learn's nndsvda start, after scikit-learn's iterations and
    # stopping rule, the same fit.  X is padded to a bucket inside: the padding must
    # change nothing (beta = 0.5 raises WH = 0 there to a negative power).
    sparse = np.where(X[:, :12] < 4, 0.0, X[:, :12])
    assert np.mean(sparse == 0) > 0.05
    for beta in (0.5, 2.5):
        settings = dict(n_components=K, solver="mu", beta_loss=beta, random_state=0)
        settings.update(init="nndsvda", max_iter=400)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            ref = decomposition.NMF(**settings)
            ref_W = ref.fit_transform(sparse)
            ours = latentlab.NMF(**settings)
            W = ours.fit_transform(sparse)
        assert ours.n_iter_ == ref.n_iter_
        assert ours.reconstruction_err_ == pytest.approx(ref.reconstruction_err_, rel=1e-8)
        np.testing.assert_allclose(W, ref_W, rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("beta", [-1.2, 0, 0.2, 0.5, 1.5, 2.5, 3.0])
def test_beta_divergence_updates_never_increase_the_penalised_objective(beta):
    # Fevotte & Idier's exponent gamma(beta) makes each update a maximisation-
    # minimisation step: the penalised objective never rises, one iteration at a time
    alpha, l1_ratio = 0.05, 0.5
    n, d = XS.shape
    W, H = WS0.copy(), HS0.copy()
    settings = dict(n_components=2, init="custom", solver="mu", beta_loss=beta, tol=0.0)
    settings.update(max_iter=1, alpha_W=alpha, l1_ratio=l1_ratio)
    trace = []
    for _ in range(40):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est = latentlab.NMF(**settings)
            W = est.fit_transform(XS, W=W, H=H)
        H = est.components_
        trace.append(
            _beta_divergence_reference(XS, W @ H, beta)
            + alpha * l1_ratio * (d * W.sum() + n * H.sum())
            + 0.5 * alpha * (1 - l1_ratio) * (d * np.sum(W**2) + n * np.sum(H**2))
        )
    trace = np.array(trace)
    assert np.all(np.diff(trace) <= 1e-12 * np.abs(trace[1:]))
    assert trace[-1] < 0.99 * trace[0]  # and the fit does move


@pytest.mark.parametrize("beta", BETAS)
def test_beta_divergence_fit_is_a_fixed_point_of_its_update(beta):
    # at convergence the multiplicative update's ratio is 1 wherever a factor is
    # positive: the divergence's gradient there is 0 (KKT, Fevotte & Idier 2011 sec. 4)
    est = latentlab.NMF(2, init="custom", solver="mu", beta_loss=beta, tol=0.0, max_iter=3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        W = est.fit_transform(XS, W=WS0, H=HS0)
    H = est.components_
    assert np.all(W > 0) and np.all(H > 0)  # an interior optimum here
    (num_W, den_W), (num_H, den_H) = _gradient_parts(XS, W, H, beta)
    np.testing.assert_allclose(num_W / den_W, 1.0, atol=1e-8)
    np.testing.assert_allclose(num_H / den_H, 1.0, atol=1e-8)
    # the gradient itself, on the scale of its parts
    assert np.max(np.abs(den_W - num_W)) < 1e-8 * np.max(den_W)
    assert np.max(np.abs(den_H - num_H)) < 1e-8 * np.max(den_H)


def test_beta_divergence_transform_as_sklearn():
    settings = dict(n_components=2, init="custom", solver="mu", beta_loss=1.5)
    settings.update(tol=1e-6, max_iter=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = decomposition.NMF(**settings)
        ref.fit(XS, W=WS0.copy(), H=HS0.copy())
        ours = latentlab.NMF(**settings).fit(XS, W=WS0, H=HS0)
        Xnew = XS[:7] * 1.1
        np.testing.assert_allclose(ours.transform(Xnew), ref.transform(Xnew), rtol=1e-7)


def test_every_beta_shares_one_compiled_program():
    # beta is an input of the compiled loop, not a static setting: after one fit of
    # the beta-divergence, the others compile nothing
    from compile_counter import count_compiles

    settings = dict(n_components=2, init="custom", solver="mu", max_iter=20, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        latentlab.NMF(beta_loss=0.5, **settings).fit(XS, W=WS0, H=HS0)
        with count_compiles() as compiles:
            for beta in (-1.0, 0.0, 1.5, 2.5, 3.0, "itakura-saito"):
                latentlab.NMF(beta_loss=beta, **settings).fit(XS, W=WS0, H=HS0)
    assert compiles() == 0


def test_beta_divergence_float32_data_give_float32_factors():
    X32 = XS.astype(np.float32)
    est = latentlab.NMF(2, solver="mu", beta_loss=0.5, random_state=0, max_iter=300)
    W = est.fit_transform(X32)
    assert W.dtype == np.float32 and est.components_.dtype == np.float32
    assert np.all(np.isfinite(W)) and est.transform(X32).dtype == np.float32
