"""LinearDiscriminantAnalysis against scikit-learn (same data, float64) and closed forms."""

import warnings

import numpy as np
import pytest
from scipy.linalg import eigh
from sklearn.datasets import load_iris, load_wine
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as SkLDA
from sklearn.utils.estimator_checks import check_estimator

import latentlab

IRIS_X, IRIS_Y = load_iris(return_X_y=True)
WINE_X, WINE_Y = load_wine(return_X_y=True)
DATASETS = {"iris": (IRIS_X, IRIS_Y), "wine": (WINE_X, WINE_Y)}

# check_estimator: every check passes (none expected to fail).
LDA_EXPECTED_FAILED_CHECKS: dict[str, str] = {}


def _match_columns_up_to_sign(A, B):
    signs = np.sign(np.sum(A * B, axis=0))
    return A * signs


@pytest.mark.parametrize("solver", ["svd", "eigen"])
def test_iris_explained_variance_ratio(solver):
    lda = latentlab.LinearDiscriminantAnalysis(solver=solver).fit(IRIS_X, IRIS_Y)
    np.testing.assert_allclose(lda.explained_variance_ratio_, [0.9912126, 0.0087874], atol=1e-7)


@pytest.mark.parametrize("data", ["iris", "wine"])
@pytest.mark.parametrize(
    "settings",
    [
        dict(),
        dict(solver="eigen"),
        dict(solver="lsqr"),
        dict(solver="eigen", shrinkage="auto"),
        dict(solver="lsqr", shrinkage=0.3),
        dict(priors=[0.5, 0.3, 0.2]),
    ],
)
def test_classifier_matches_sklearn(data, settings):
    X, y = DATASETS[data]
    ours = latentlab.LinearDiscriminantAnalysis(**settings).fit(X, y)
    theirs = SkLDA(**settings).fit(X, y)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-10)
    np.testing.assert_allclose(
        ours.predict_log_proba(X[:20]), theirs.predict_log_proba(X[:20]), atol=1e-8
    )
    np.testing.assert_allclose(ours.decision_function(X), theirs.decision_function(X), atol=1e-8)
    np.testing.assert_allclose(ours.means_, theirs.means_, atol=1e-12)
    np.testing.assert_allclose(ours.priors_, theirs.priors_)
    assert ours.score(X, y) == theirs.score(X, y)


@pytest.mark.parametrize("solver", ["lsqr", "eigen"])
def test_ledoit_wolf_shrinkage_matches_sklearn(solver):
    X, y = WINE_X, WINE_Y
    ours = latentlab.LinearDiscriminantAnalysis(solver=solver, shrinkage="auto").fit(X, y)
    theirs = SkLDA(solver=solver, shrinkage="auto").fit(X, y)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(ours.covariance_, theirs.covariance_, rtol=1e-10, atol=1e-12)


def test_eigen_directions_solve_the_generalised_eigenproblem():
    """Against SciPy's generalised eigh of the between- and within-class scatter."""
    X, y = WINE_X, WINE_Y
    lda = latentlab.LinearDiscriminantAnalysis(solver="eigen").fit(X, y)
    classes = np.unique(y)
    priors = np.bincount(y) / len(y)
    Sw = sum(p * np.cov(X[y == c].T, bias=True) for p, c in zip(priors, classes, strict=True))
    Sb = np.cov(X.T, bias=True) - Sw
    w, V = eigh(Sb, Sw)
    w, V = w[::-1], V[:, ::-1]
    np.testing.assert_allclose(lda.covariance_, Sw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        lda.explained_variance_ratio_, (w / w.sum())[:2], rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(
        _match_columns_up_to_sign(lda.scalings_[:, :2], V[:, :2]), V[:, :2], rtol=1e-7, atol=1e-9
    )


@pytest.mark.parametrize("data", ["iris", "wine"])
@pytest.mark.parametrize("solver", ["svd", "eigen"])
def test_transform_matches_sklearn_up_to_sign(data, solver):
    X, y = DATASETS[data]
    ours = latentlab.LinearDiscriminantAnalysis(solver=solver).fit(X, y)
    theirs = SkLDA(solver=solver).fit(X, y)
    Z = ours.transform(X)
    xbar = np.bincount(y) / len(y) @ theirs.means_  # scikit-learn's svd xbar_
    # scikit-learn's eigen transform does not centre at xbar_ (see the class Notes)
    expected = theirs.transform(X) - (theirs.transform(xbar[None]) if solver == "eigen" else 0)
    assert Z.shape == expected.shape == (len(X), 2)
    np.testing.assert_allclose(_match_columns_up_to_sign(Z, expected), expected, atol=1e-8)
    np.testing.assert_allclose(ours.xbar_, xbar, atol=1e-12)


def test_binary_problem_has_one_decision_function():
    mask = IRIS_Y > 0
    X, y = IRIS_X[mask], np.where(IRIS_Y[mask] == 1, "versicolor", "virginica")
    ours = latentlab.LinearDiscriminantAnalysis().fit(X, y)
    theirs = SkLDA().fit(X, y)
    assert ours.coef_.shape == (1, 4) and ours.intercept_.shape == (1,)
    np.testing.assert_allclose(ours.decision_function(X), theirs.decision_function(X), atol=1e-8)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-10)


def test_collinear_features_svd_drops_the_null_direction():
    X = np.c_[IRIS_X, IRIS_X[:, 0] + IRIS_X[:, 1]]
    with pytest.warns(UserWarning, match="collinear"):
        ours = latentlab.LinearDiscriminantAnalysis().fit(X, IRIS_Y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = SkLDA().fit(X, IRIS_Y)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-8)
    with pytest.raises(ValueError, match="singular"):
        latentlab.LinearDiscriminantAnalysis(solver="eigen").fit(X, IRIS_Y)


@pytest.mark.parametrize(
    ("X", "y", "params", "match"),
    [
        (IRIS_X, np.zeros(150), {}, "only one class"),
        (IRIS_X, IRIS_Y[:-1], {}, "different numbers of samples"),
        (IRIS_X, IRIS_Y, {"n_components": 3}, "n_components=3 is out of range"),
        (IRIS_X[:, :1], IRIS_Y, {"n_components": 2}, "n_components=2 is out of range"),
        (np.r_[IRIS_X[:-1], [[np.nan, 1, 2, 3]]], IRIS_Y, {}, "NaN"),
        (IRIS_X, IRIS_Y, {"shrinkage": "auto"}, "not available with solver='svd'"),
        (IRIS_X, IRIS_Y, {"solver": "eigen", "shrinkage": 1.5}, r"shrinkage must lie in \[0, 1\]"),
        (IRIS_X, IRIS_Y, {"solver": "qr"}, "Unknown solver"),
        (IRIS_X, IRIS_Y, {"priors": [0.5, 0.5]}, "priors has 2 entries"),
        (IRIS_X, IRIS_Y, {"priors": [1.2, -0.1, -0.1]}, "non-negative"),
    ],
)
def test_bad_input_names_the_problem(X, y, params, match):
    with pytest.raises(ValueError, match=match):
        latentlab.LinearDiscriminantAnalysis(**params).fit(X, y)


def test_lsqr_has_no_transform():
    lda = latentlab.LinearDiscriminantAnalysis(solver="lsqr").fit(IRIS_X, IRIS_Y)
    with pytest.raises(NotImplementedError, match="lsqr"):
        lda.transform(IRIS_X)


def test_priors_not_summing_to_one_are_renormalised():
    with pytest.warns(UserWarning, match="Renormalizing"):
        lda = latentlab.LinearDiscriminantAnalysis(priors=[2.0, 1.0, 1.0]).fit(IRIS_X, IRIS_Y)
    np.testing.assert_allclose(lda.priors_, [0.5, 0.25, 0.25])


def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(latentlab.LinearDiscriminantAnalysis(), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(LDA_EXPECTED_FAILED_CHECKS), failed


def _pooled_within_covariance(X, y):
    """Oracle: sum_k (n_k / n) cov_k (ddof=0), each class centred exactly by NumPy."""
    return sum(np.mean(y == c) * np.cov(X[y == c].T, bias=True) for c in np.unique(y))


@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_pooled_scatter_is_exact_with_and_without_cancellation(offset):
    """The "eigen"/"lsqr" scatter comes from one Gram matrix X^T X less the class means'
    part; far from the origin that difference cancels (offset 1e6: every digit), and
    the class-centred product must take over."""
    X, y = WINE_X + offset, WINE_Y
    expected = _pooled_within_covariance(WINE_X, y)  # centring removes the offset exactly
    lda = latentlab.LinearDiscriminantAnalysis(solver="eigen").fit(X, y)
    np.testing.assert_allclose(lda.covariance_, expected, rtol=1e-9, atol=1e-9)
    theirs = SkLDA(solver="eigen").fit(WINE_X, y)
    np.testing.assert_allclose(lda.explained_variance_ratio_, theirs.explained_variance_ratio_)


@pytest.mark.parametrize(
    "settings",
    [dict(solver="eigen", shrinkage=0.3), dict(solver="eigen", priors=[0.5, 0.3, 0.2])],
)
def test_fixed_shrinkage_and_priors_match_sklearn_eigen(settings):
    """A float shrinkage on the pooled path (sum_k pi_k tr(S_k) from the same pass) and
    non-empirical priors (every class covariance formed) against scikit-learn."""
    ours = latentlab.LinearDiscriminantAnalysis(**settings).fit(WINE_X, WINE_Y)
    theirs = SkLDA(**settings).fit(WINE_X, WINE_Y)
    np.testing.assert_allclose(ours.covariance_, theirs.covariance_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("offset", [0.0, 1e6])
@pytest.mark.parametrize("n_classes", [3, 7])
def test_pooled_moments_match_class_centred_numpy(offset, n_classes):
    """The host Gram route of "eigen"/"lsqr" (class sums by a dense one-hot product
    for 3 classes < 13 features, a sparse one for 7 classes > 4) against each class
    centred by NumPy, near the origin and at offset 1e6 (where the Gram cancels and
    the class-centred product takes over)."""
    from latentlab.closed_form.lda import pooled_moments

    X, y = (WINE_X, WINE_Y) if n_classes == 3 else (IRIS_X, np.arange(150) % n_classes)
    counts, means, pooled = pooled_moments(X + offset, y, n_classes)
    np.testing.assert_array_equal(counts, np.bincount(y))
    expected_means = np.stack([X[y == c].mean(axis=0) for c in range(n_classes)])
    np.testing.assert_allclose(means - offset, expected_means, rtol=1e-9, atol=1e-9)
    expected = _pooled_within_covariance(X, y)
    np.testing.assert_allclose(pooled, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_class_moments_match_numpy_per_class_at_any_offset():
    """The host per-class route ("auto" shrinkage, non-empirical priors): every class
    covariance and the Ledoit-Wolf fourth moments (per class and of the totally centred
    rows) against NumPy on each class, at offset 1e6 too (each class is centred exactly)."""
    from latentlab.closed_form.lda import class_moments

    X, y = WINE_X, WINE_Y
    counts, means, covs, fourth, total = class_moments(X + 1e6, y, 3, True, True)
    weights = counts / len(y)

    def fourth_moment(Z, S):
        norms = np.sum((Z / np.sqrt(np.diag(S))) ** 2, axis=1)
        return np.sum(norms**2)

    for c in range(3):
        rows = X[y == c]
        S = np.cov(rows.T, bias=True)
        np.testing.assert_allclose(covs[c], S, rtol=1e-9, atol=1e-9 * np.abs(S).max())
        np.testing.assert_allclose(means[c] - 1e6, rows.mean(axis=0), atol=1e-9)
        np.testing.assert_allclose(fourth[c], fourth_moment(rows - rows.mean(axis=0), S), rtol=1e-9)
    St = np.cov(X.T, bias=True)  # within plus between, with the class frequencies
    np.testing.assert_allclose(
        np.tensordot(weights, covs, axes=1) + np.cov(means.T, aweights=weights, bias=True),
        St,
        rtol=1e-9,
        atol=1e-9 * np.abs(St).max(),
    )
    np.testing.assert_allclose(total, fourth_moment(X - X.mean(axis=0), St), rtol=1e-9)


@pytest.mark.parametrize("solver, estimator", [("lsqr", "OAS"), ("eigen", "LedoitWolf")])
def test_covariance_estimator_equals_sklearn(solver, estimator):
    from sklearn import covariance

    X, y = load_wine(return_X_y=True)
    est = getattr(covariance, estimator)()
    ref = SkLDA(solver=solver, covariance_estimator=est).fit(X, y)
    got = latentlab.LinearDiscriminantAnalysis(solver=solver, covariance_estimator=est).fit(X, y)
    np.testing.assert_allclose(got.covariance_, ref.covariance_, rtol=1e-12)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-10, atol=1e-12 * abs(ref.coef_).max())
    np.testing.assert_allclose(got.intercept_, ref.intercept_, rtol=1e-10)
    np.testing.assert_array_equal(got.predict(X), ref.predict(X))
    if solver == "eigen":
        np.testing.assert_allclose(
            got.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-10
        )
    # not the empirical covariance: the estimator's (OAS / Ledoit-Wolf) shrinkage is used
    plain = latentlab.LinearDiscriminantAnalysis(solver=solver).fit(X, y)
    assert not np.allclose(plain.covariance_, got.covariance_)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(solver="svd"), "not available with solver='svd'"),
        (dict(solver="lsqr", shrinkage=0.1), "only one of them"),
    ],
)
def test_covariance_estimator_refusals(params, match):
    from sklearn.covariance import OAS

    X, y = np.random.default_rng(0).normal(size=(30, 3)), np.arange(30) % 2
    with pytest.raises(ValueError, match=match):
        latentlab.LinearDiscriminantAnalysis(covariance_estimator=OAS(), **params).fit(X, y)


@pytest.mark.parametrize("solver", ["svd", "lsqr", "eigen"])
def test_float32_data_give_float32_coefficients_and_outputs(solver):
    """As scikit-learn: float32 in, float32 out; computed in float64 and rounded once,
    so each equals the float64 fit's to float32's rounding."""
    X, y = load_wine(return_X_y=True)
    X = X.astype(np.float32).astype(np.float64)  # the data float32 holds, in float64
    fit32 = latentlab.LinearDiscriminantAnalysis(solver=solver).fit(X.astype(np.float32), y)
    fit64 = latentlab.LinearDiscriminantAnalysis(solver=solver).fit(X, y)
    for name in ("coef_", "intercept_", "means_"):
        value = getattr(fit32, name)
        assert value.dtype == np.float32, name
        expected = getattr(fit64, name)
        np.testing.assert_array_equal(value, expected.astype(np.float32))
    scores = fit32.decision_function(X.astype(np.float32))
    assert scores.dtype == np.float32
    np.testing.assert_array_equal(fit32.predict(X.astype(np.float32)), fit64.predict(X))
    if solver != "lsqr":
        assert fit32.transform(X.astype(np.float32)).dtype == np.float32
    ints = latentlab.LinearDiscriminantAnalysis(solver=solver).fit(np.rint(X).astype(np.int32), y)
    assert ints.coef_.dtype == np.float64
