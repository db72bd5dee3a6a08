"""latentlab.FastICA: planted sources recovered, scikit-learn's FastICA reproduced from the
same start, and the PCA whitening it runs on (closed_form.whitening.principal_whitening)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from sklearn import decomposition
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import check_estimator

import latentlab
from latentlab.closed_form.whitening import principal_whitening

# check_estimator: every check passes (none expected to fail).
FASTICA_EXPECTED_FAILED_CHECKS: dict[str, str] = {}

# Three independent non-Gaussian sources (super-Gaussian, sub-Gaussian, periodic) mixed
# into four features with a little Gaussian noise: n_components=3 exercises the
# truncated whitening, n_components=None (4) the square unmixing.
N = 1000
RNG = np.random.default_rng(0)
SOURCES = np.c_[
    RNG.laplace(size=N),
    RNG.uniform(-1.0, 1.0, size=N),
    np.sin(np.linspace(0.0, 37.0, N)),
]
MIXING = RNG.normal(size=(4, 3))
X = SOURCES @ MIXING.T + 0.01 * RNG.normal(size=(N, 4)) + np.array([1.0, -2.0, 0.5, 3.0])
W_INIT = RNG.normal(size=(3, 3))


def _matched_abs_correlations(estimated, planted):
    """|corr| of each planted source with the estimated one matched to it (Hungarian)."""
    k = planted.shape[1]
    corr = np.abs(np.corrcoef(estimated.T, planted.T)[:k, k:])
    rows, cols = linear_sum_assignment(-corr)
    return corr[rows, cols], rows, cols


@pytest.fixture(scope="module")
def fitted():
    return latentlab.FastICA(n_components=3, random_state=0).fit(X)


@pytest.mark.parametrize("algorithm", ["parallel", "deflation"])
def test_recovers_planted_sources_up_to_sign_and_permutation(algorithm, fitted):
    est = (
        fitted
        if algorithm == "parallel"
        else latentlab.FastICA(n_components=3, algorithm=algorithm, random_state=0).fit(X)
    )
    S = est.transform(X)
    corr, rows, cols = _matched_abs_correlations(S, SOURCES)
    assert np.all(corr > 0.99), corr
    # unit-variance sources, and the mixing columns point along the planted ones
    np.testing.assert_allclose(S.std(axis=0), 1.0, rtol=1e-10)
    cosines = [
        abs(est.mixing_[:, r] @ MIXING[:, c])
        / (np.linalg.norm(est.mixing_[:, r]) * np.linalg.norm(MIXING[:, c]))
        for r, c in zip(rows, cols, strict=True)
    ]
    assert min(cosines) > 0.999, cosines


CASES = [
    dict(algorithm=a, fun=f) for a in ("parallel", "deflation") for f in ("logcosh", "exp", "cube")
] + [
    dict(whiten_solver="eigh", whiten="arbitrary-variance"),
    dict(fun_args={"alpha": 1.5}, algorithm="deflation", whiten_solver="eigh"),
]


@pytest.mark.parametrize("settings", CASES, ids=lambda s: "-".join(map(str, s.values())))
def test_equals_sklearn_from_the_same_start(settings):
    kw = dict(n_components=3, w_init=W_INIT, tol=1e-6, max_iter=500) | settings
    ref = decomposition.FastICA(**kw).fit(X)
    got = latentlab.FastICA(**kw).fit(X)
    assert got.n_iter_ == ref.n_iter_ > 3  # a real iteration, not a first step
    for name in ("components_", "mixing_", "whitening_", "mean_"):
        a, b = getattr(got, name), getattr(ref, name)
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8 * np.abs(b).max(), err_msg=name)
    np.testing.assert_allclose(got.transform(X[:50]), ref.transform(X[:50]), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("n_components", [3, None])
def test_blocks_with_a_remainder_give_sklearns_result(monkeypatch, n_components):
    # 997 rows in blocks of 900 elements: n_components=3, the whitened data in blocks
    # of 300 columns (three and a 97-column tail); None (k = d = 4), X's own rows in
    # blocks of 225 (four and a 97-row tail)
    from latentlab import _shapes

    monkeypatch.setattr(_shapes, "BLOCK_ELEMENTS", 3 * 300)
    k = 3 if n_components else 4
    w_init = W_INIT if n_components else np.random.default_rng(3).normal(size=(k, k))
    kw = dict(n_components=n_components, w_init=w_init, tol=1e-6, algorithm="deflation")
    got = latentlab.FastICA(**kw).fit(X[:997])
    ref = decomposition.FastICA(**kw).fit(X[:997])
    assert got.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-8, atol=1e-10)


def test_same_integer_random_state_draws_sklearns_start(fitted):
    ref = decomposition.FastICA(n_components=3, random_state=0).fit(X)
    np.testing.assert_allclose(fitted.components_, ref.components_, rtol=1e-8, atol=1e-10)
    assert fitted.n_iter_ == ref.n_iter_


def test_without_whitening_equals_sklearn_on_white_data():
    Xc = X - X.mean(axis=0)
    U = np.linalg.svd(Xc, full_matrices=False)[0]
    white = U[:, :3] * np.sqrt(N)  # identity covariance
    kw = dict(whiten=False, w_init=W_INIT, tol=1e-6)
    ref = decomposition.FastICA(**kw).fit(white)
    got = latentlab.FastICA(**kw).fit(white)
    assert not hasattr(got, "mean_") and not hasattr(got, "whitening_")
    assert got.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got.transform(white), ref.transform(white), atol=1e-9)


def test_callable_contrast_equals_the_named_one(fitted):
    def logcosh(u, alpha=1.0):
        t = jnp.tanh(alpha * u)
        return t, alpha * (1.0 - t * t)  # per element: averaged by latentlab

    got = latentlab.FastICA(n_components=3, fun=logcosh, random_state=0).fit(X)
    np.testing.assert_allclose(got.components_, fitted.components_, rtol=1e-12, atol=1e-14)


def test_inverse_transform_undoes_transform_with_all_components():
    est = latentlab.FastICA(random_state=0)
    S = est.fit_transform(X)
    assert S.shape == (N, 4)
    np.testing.assert_allclose(est.inverse_transform(S), X, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(est.mixing_ @ est.components_, np.eye(4), atol=1e-10)


def test_principal_whitening_gives_identity_covariance_on_the_leading_axes():
    whitening = jax.jit(principal_whitening, static_argnums=1, static_argnames=("solver", "ddof"))
    with jax.enable_x64(True):
        svd = whitening(jnp.asarray(X), 3, solver="svd", ddof=0)
        eigh = whitening(jnp.asarray(X), 3, solver="eigh", ddof=1)
    np.testing.assert_allclose(np.cov(np.asarray(svd.X).T, ddof=0), np.eye(3), atol=1e-10)
    np.testing.assert_allclose(np.cov(np.asarray(eigh.X).T, ddof=1), np.eye(3), atol=1e-10)
    pca = decomposition.PCA(3).fit(X)  # axes V_k / sqrt(variance), up to sign
    expected = pca.components_.T / np.sqrt(pca.explained_variance_)
    np.testing.assert_allclose(np.abs(np.asarray(eigh.matrix)), np.abs(expected), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(svd.mean), X.mean(axis=0), rtol=1e-12)


def test_stopping_at_max_iter_warns():
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        est = latentlab.FastICA(n_components=3, max_iter=1, w_init=W_INIT).fit(X)
    assert est.n_iter_ == 1


def test_eigh_whitening_of_rank_deficient_data_warns_and_svd_does_not():
    # a fifth feature that is the sum of two others: the centred scatter has an
    # eigenvalue at round-off level, which eigh cannot resolve (scikit-learn warns too)
    collinear = np.c_[X, X[:, 0] + X[:, 1]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(UserWarning, match="small singular values.*whiten_solver='svd'"):
            latentlab.FastICA(3, whiten_solver="eigh", w_init=W_INIT).fit(collinear)
        warnings.simplefilter("error", UserWarning)
        latentlab.FastICA(3, whiten_solver="svd", w_init=W_INIT).fit(collinear)
        latentlab.FastICA(3, whiten_solver="eigh", w_init=W_INIT).fit(X)  # full rank


@pytest.mark.parametrize(
    "settings, data, match",
    [
        (dict(n_components=5), X, r"n_components=5 is out of range"),
        (dict(n_components=3), np.where(X > 2.5, np.nan, X), "NaN"),
        (dict(n_components=3, w_init=np.eye(4)), X, r"w_init has shape \(4, 4\)"),
        (dict(n_components=2, w_init=np.full((2, 2), np.inf)), X, "w_init has NaN"),
        (dict(algorithm="symmetric"), X, "Unknown algorithm"),
        (dict(fun="tanh"), X, "Unknown fun"),
        (dict(whiten=True), X, "Unknown whiten"),
        (dict(whiten_solver="qr"), X, "Unknown whiten_solver"),
        (dict(fun_args={"alpha": 3.0}), X, r"alpha"),
        (dict(max_iter=0), X, "max_iter"),
        (dict(tol=-1.0), X, "tol"),
        (dict(), X[:1], "sample"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(settings, data, match):
    with pytest.raises(ValueError, match=match):
        latentlab.FastICA(**settings).fit(data)


def test_transform_and_inverse_need_the_fitted_shapes(fitted):
    with pytest.raises(ValueError, match="features"):
        fitted.transform(X[:, :2])
    with pytest.raises(ValueError, match=r"shape \(n_samples, 3\)"):
        fitted.inverse_transform(X)


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.FastICA(random_state=0), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(FASTICA_EXPECTED_FAILED_CHECKS), failed


def _numpy_logcosh(x, alpha=1.0):
    # calls NumPy on its input: not JAX-traceable
    t = np.tanh(alpha * x)
    return t, (alpha * (1.0 - t**2)).mean(axis=-1)


@pytest.mark.parametrize("algorithm", ["parallel", "deflation"])
def test_numpy_contrast_runs_on_the_host_and_equals_sklearn(algorithm):
    rng = np.random.RandomState(0)
    S = np.c_[np.sign(np.sin(np.linspace(0, 40, 500))), rng.laplace(size=500)]
    X = S @ rng.randn(2, 2)
    kw = dict(n_components=2, algorithm=algorithm, random_state=0, fun_args={"alpha": 1.5})
    ref = decomposition.FastICA(fun=_numpy_logcosh, **kw).fit(X)
    got = latentlab.FastICA(fun=_numpy_logcosh, **kw).fit(X)
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-8, atol=1e-10)
    assert got.n_iter_ == ref.n_iter_
    # the same contrast written with jax.numpy, compiled: the same unmixing
    traced = latentlab.FastICA(fun="logcosh", **kw).fit(X)
    np.testing.assert_allclose(got.components_, traced.components_, rtol=1e-8, atol=1e-10)


def test_a_contrast_that_fails_on_numpy_too_raises_value_error():
    X = np.random.default_rng(0).laplace(size=(100, 2))
    with pytest.raises(ValueError, match="not JAX-traceable"):
        latentlab.FastICA(2, fun=lambda u: (np.tanh(u), "not a number"), random_state=0).fit(X)
