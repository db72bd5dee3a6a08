"""PLSRegression, PLSCanonical and PLSSVD against scikit-learn on the same data, in float64
(scikit-learn's own ``test_pls.py`` runs against them in tests/test_sklearn_suites.py)."""

import warnings

import numpy as np
import pytest
import sklearn.cross_decomposition as skl
from numpy.testing import assert_allclose
from sklearn.datasets import load_linnerud
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import check_estimator

import latentlab

X_LIN, Y_LIN = load_linnerud(return_X_y=True)
RNG = np.random.default_rng(0)
X_SIM = RNG.normal(size=(200, 10)) @ RNG.normal(size=(10, 10))
Y_SIM = X_SIM[:, :4] @ RNG.normal(size=(4, 3)) + RNG.normal(size=(200, 3))
DATA = {"linnerud": (X_LIN, Y_LIN), "simulated": (X_SIM, Y_SIM)}

# (class, settings): the three classes and both PLSCanonical algorithms
VARIANTS = {
    "regression": ("PLSRegression", {}),
    "canonical-nipals": ("PLSCanonical", {"algorithm": "nipals"}),
    "canonical-svd": ("PLSCanonical", {"algorithm": "svd"}),
    "svd": ("PLSSVD", {}),
}
FITTED = (
    "x_weights_",
    "y_weights_",
    "x_loadings_",
    "y_loadings_",
    "x_rotations_",
    "y_rotations_",
    "coef_",
    "intercept_",
)


def fit_both(variant, X, Y, n_components=3, **extra):
    name, settings = VARIANTS[variant]
    settings = settings | extra
    ours = getattr(latentlab, name)(n_components=n_components, **settings).fit(X, Y)
    theirs = getattr(skl, name)(n_components=n_components, **settings).fit(X, Y)
    return ours, theirs


def component_signs(ours, theirs):
    """+-1 per component aligning our x weights with scikit-learn's."""
    return np.sign(np.sum(ours.x_weights_ * theirs.x_weights_, axis=0))


@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_matches_sklearn_weights_loadings_rotations_and_predictions(variant, data):
    X, Y = DATA[data]
    ours, theirs = fit_both(variant, X, Y)
    signs = component_signs(ours, theirs)
    # the sign rule (largest |x weight| positive) is scikit-learn's, so no flip is needed
    assert_allclose(signs, 1.0)
    for name in FITTED:
        if hasattr(theirs, name):
            expected = getattr(theirs, name)
            scale = signs if np.ndim(expected) == 2 and name != "coef_" else 1.0
            assert_allclose(getattr(ours, name), expected * scale, atol=1e-8, err_msg=name)
    x_ours, y_ours = ours.transform(X, Y)
    x_theirs, y_theirs = theirs.transform(X, Y)
    assert_allclose(x_ours, x_theirs * signs, atol=1e-8 * np.abs(x_theirs).max())
    assert_allclose(y_ours, y_theirs * signs, atol=1e-8 * np.abs(y_theirs).max())
    if hasattr(theirs, "predict"):
        atol = 1e-8 * np.abs(Y).max()
        assert_allclose(ours.predict(X), theirs.predict(X), atol=atol)
        assert_allclose(ours.score(X, Y), theirs.score(X, Y), atol=1e-10)
        assert_allclose(
            ours.inverse_transform(x_ours), theirs.inverse_transform(x_theirs), atol=1e-8 * 1e3
        )
        if VARIANTS[variant][1].get("algorithm", "nipals") == "nipals":
            assert list(ours.n_iter_) == list(theirs.n_iter_)


def test_pls_regression_scores_are_the_transform():
    pls = latentlab.PLSRegression(n_components=3).fit(X_SIM, Y_SIM)
    theirs = skl.PLSRegression(n_components=3).fit(X_SIM, Y_SIM)
    assert_allclose(pls.x_scores_, theirs.x_scores_, atol=1e-8)
    assert_allclose(pls.y_scores_, theirs.y_scores_, atol=1e-8)
    # deflated scores T = X_s W (P^T W)^-1: the rotations reproduce them from X
    assert_allclose(pls.transform(X_SIM), pls.x_scores_, atol=1e-10)


def test_full_rank_pls_regression_is_least_squares():
    # with n_components = n_features PLS2 spans X's whole column space: OLS (closed form)
    X, Y = X_SIM, Y_SIM
    pls = latentlab.PLSRegression(n_components=X.shape[1], tol=1e-14, max_iter=2000).fit(X, Y)
    A = np.c_[np.ones(len(X)), X]
    ols = np.linalg.lstsq(A, Y, rcond=None)[0]
    assert_allclose(pls.coef_, ols[1:].T, rtol=1e-7, atol=1e-9)
    assert_allclose(pls.predict(X), A @ ols, atol=1e-8)


@pytest.mark.parametrize("variant", ["regression", "canonical-nipals"])
def test_single_target_as_1d_y(variant):
    y = Y_SIM[:, 0]
    ours, theirs = fit_both(variant, X_SIM, y, n_components=1)
    assert ours.predict(X_SIM).shape == (200,)
    assert_allclose(ours.predict(X_SIM), theirs.predict(X_SIM), atol=1e-8)
    assert_allclose(ours.coef_, theirs.coef_, atol=1e-10)
    assert list(ours.n_iter_) == [1]  # exact after one step for a single target


def test_max_iter_warns_and_matches_sklearn_iterates():
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        ours = latentlab.PLSCanonical(n_components=3, max_iter=2).fit(X_LIN, Y_LIN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        theirs = skl.PLSCanonical(n_components=3, max_iter=2).fit(X_LIN, Y_LIN)
    assert_allclose(ours.x_weights_, theirs.x_weights_, atol=1e-10)
    assert list(ours.n_iter_) == [2, 2, 2]


@pytest.mark.parametrize("cls", ["PLSRegression", "PLSCanonical"])
def test_constant_target_with_scaling_fits_no_component_as_sklearn(cls):
    # scale=True: the constant column's standard deviation 0 is taken as 1, so Y is
    # zero after centring and no component covaries with it
    y = np.full(len(X_SIM), -2.0)
    with pytest.warns(UserWarning, match="y residual is constant at iteration 0"):
        ours = getattr(latentlab, cls)(n_components=1).fit(X_SIM, y)
    with pytest.warns(UserWarning, match="y residual is constant at iteration 0"):
        theirs = getattr(skl, cls)(n_components=1).fit(X_SIM, y)
    for name in ("x_weights_", "x_rotations_", "coef_"):
        assert_allclose(getattr(ours, name), getattr(theirs, name), atol=1e-12)
    assert_allclose(ours.x_rotations_, 0.0)
    assert_allclose(ours.predict(X_SIM).ravel(), -2.0)


def test_a_constant_target_column_among_others_equals_sklearn():
    # the constant column is a zero column after centring (scale 1): the other two
    # targets are fitted as without it, and its prediction is its constant
    Y = np.c_[Y_SIM[:, :2], np.full(len(X_SIM), 5.0)]
    ours = latentlab.PLSRegression(n_components=3).fit(X_SIM, Y)
    theirs = skl.PLSRegression(n_components=3).fit(X_SIM, Y)
    assert_allclose(ours.coef_, theirs.coef_, rtol=1e-8, atol=1e-12)
    assert_allclose(ours.predict(X_SIM), theirs.predict(X_SIM), rtol=1e-8, atol=1e-10)
    assert_allclose(ours.predict(X_SIM)[:, 2], 5.0)
    svd = latentlab.PLSSVD(n_components=2).fit(X_SIM, Y)
    assert_allclose(svd.y_weights_[2], 0.0, atol=1e-12)
    assert_allclose(
        np.abs(svd.x_weights_),
        np.abs(skl.PLSSVD(n_components=2).fit(X_SIM, Y).x_weights_),
        rtol=1e-8,
    )


def test_constant_target_without_scaling_stops_with_a_warning():
    # scikit-learn's behaviour: the y residual is zero from the start, no component
    y = np.full(len(X_SIM), 3.0)
    with pytest.warns(UserWarning, match="y residual is constant at iteration 0"):
        pls = latentlab.PLSRegression(scale=False).fit(X_SIM, y)
    assert_allclose(pls.x_rotations_, 0.0)
    assert_allclose(pls.predict(X_SIM), 3.0)


@pytest.mark.parametrize(
    ("cls", "X", "Y", "params", "match"),
    [
        ("PLSRegression", X_LIN[:1], Y_LIN[:1], {}, "minimum of 2"),
        ("PLSRegression", X_LIN[:-1], Y_LIN, {}, "same number of rows"),
        ("PLSRegression", X_LIN, Y_LIN, {"n_components": 4}, "n_components"),
        ("PLSCanonical", X_LIN[:, :2], Y_LIN, {"n_components": 3}, "n_components"),
        ("PLSSVD", X_LIN, Y_LIN[:, :1], {"n_components": 2}, "n_components"),
        ("PLSRegression", np.r_[X_LIN[:-1], [[np.nan, 1, 2]]], Y_LIN, {}, "NaN"),
        ("PLSCanonical", X_LIN, np.r_[Y_LIN[:-1], [[np.nan, 1, 2]]], {}, "NaN"),
        ("PLSRegression", X_LIN, None, {}, "requires y"),
        ("PLSCanonical", X_LIN, Y_LIN, {"algorithm": "qr"}, "algorithm"),
        ("PLSRegression", X_LIN, Y_LIN, {"max_iter": 0}, "max_iter"),
        ("PLSRegression", X_LIN, Y_LIN, {"tol": -1.0}, "tol"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(cls, X, Y, params, match):
    with pytest.raises(ValueError, match=match):
        getattr(latentlab, cls)(**params).fit(X, Y)


def test_inverse_transform_rejects_wrong_width():
    pls = latentlab.PLSRegression(n_components=2).fit(X_LIN, Y_LIN)
    with pytest.raises(ValueError, match="n_components_=2"):
        pls.inverse_transform(np.ones((3, 3)))


# check_estimator: every check passes for the three classes.
@pytest.mark.parametrize("name", ["PLSRegression", "PLSCanonical", "PLSSVD"])
def test_check_estimator(name):
    # n_components=1: the checks fit 1-D targets (scikit-learn's own suite does the same)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(getattr(latentlab, name)(n_components=1), on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert not failed, failed
