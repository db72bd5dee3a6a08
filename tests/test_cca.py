"""CCA and kernel CCA against closed forms, the linnerud oracle and each other, in float64."""

import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.datasets import load_linnerud
from sklearn.utils.estimator_checks import check_estimator

import latentlab

LINNERUD = load_linnerud()
X, Y = LINNERUD.data, LINNERUD.target
LINNERUD_CORRELATIONS = [0.79560815, 0.20055604, 0.07257029]

# check_estimator: CCA passes every check.  KernelCCA fails the two checks that compare
# fit_transform with transform: fit_transform(X, y) returns (x_scores, y_scores), as
# scikit-learn's own CCA does, but the checks accept a tuple only from estimators whose
# class name is one of scikit-learn's cross-decomposition classes (CCA, PLSCanonical, ...).
CCA_EXPECTED_FAILED_CHECKS: dict[str, str] = {}
KERNEL_CCA_EXPECTED_FAILED_CHECKS = {
    "check_transformer_general": "fit_transform(X, y) returns (x_scores, y_scores)",
    "check_transformer_data_not_an_array": "fit_transform(X, y) returns (x_scores, y_scores)",
}


def unit(v):
    return v / np.linalg.norm(v)


def test_linnerud_canonical_correlations_match_oracle():
    cca = latentlab.CCA(n_components=3).fit(X, Y)
    assert_allclose(cca.correlations_, LINNERUD_CORRELATIONS, atol=5e-9)
    assert_allclose(cca.regularized_correlations_, cca.correlations_, rtol=1e-12)
    unscaled = latentlab.CCA(n_components=3, scale=False).fit(X, Y)  # CCA ignores column scales
    assert_allclose(unscaled.correlations_, LINNERUD_CORRELATIONS, atol=5e-9)


def test_scores_are_canonical_variates():
    cca = latentlab.CCA(n_components=3).fit(X, Y)
    T, U = cca.transform(X, Y)
    n = len(X)
    assert_allclose(T.T @ T / (n - 1), np.eye(3), atol=1e-10)  # unit variance, uncorrelated
    assert_allclose(U.T @ U / (n - 1), np.eye(3), atol=1e-10)
    assert_allclose(T.T @ U / (n - 1), np.diag(LINNERUD_CORRELATIONS), atol=5e-9)
    assert_allclose(cca.transform(X), T)
    # with unit-variance scores and scaled data, loadings are structure correlations
    Xs = (X - X.mean(0)) / X.std(0, ddof=1)
    assert_allclose(cca.x_loadings_, Xs.T @ T / (n - 1), atol=1e-10)


def test_regularization_moves_continuously_to_maximum_covariance():
    Xs = (X - X.mean(0)) / X.std(0, ddof=1)
    Ys = (Y - Y.mean(0)) / Y.std(0, ddof=1)
    u_cov, _, vt_cov = np.linalg.svd(Xs.T @ Ys)  # maximum-covariance (PLS-SVD) directions
    regs = [0.0, 1e-8, 0.01, 0.1, 1.0, 10.0, 100.0, 1e4, 1e7]
    fits = [latentlab.CCA(n_components=1, reg=r).fit(X, Y) for r in regs]
    u = [unit(f.x_weights_[:, 0]) for f in fits]
    v = [unit(f.y_weights_[:, 0]) for f in fits]
    # continuity at reg = 0
    assert_allclose(u[1], u[0], atol=1e-7)
    # monotone approach to the maximum-covariance directions, reached in the limit
    angles = [np.arccos(min(1.0, abs(a @ u_cov[:, 0]))) for a in u]
    assert all(b <= a + 1e-12 for a, b in zip(angles, angles[1:], strict=False)), angles
    assert angles[-1] < 1e-6 and abs(v[-1] @ vt_cov[0]) > 1 - 1e-12
    # small steps in reg give small steps in the solution
    steps = [np.linalg.norm(b - a) for a, b in zip(u[2:], u[3:], strict=False)]
    assert max(steps) < 0.6
    # the regularized objective decreases with reg
    objective = [f.regularized_correlations_[0] for f in fits]
    assert all(b <= a + 1e-12 for a, b in zip(objective, objective[1:], strict=False))


def test_unregularized_cca_is_refused_when_degenerate():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(12, 6)), rng.normal(size=(12, 5))  # p + q = 11 >= n - 1
    with pytest.raises(ValueError, match="reg > 0"):
        latentlab.CCA().fit(A, B)
    cca = latentlab.CCA(reg=0.1).fit(A, B)
    assert np.all(cca.correlations_ < 1 - 1e-6)


def test_singular_view_covariance_needs_regularization():
    Xc = np.c_[X, X[:, 0] + X[:, 1]]  # collinear column
    with pytest.raises(ValueError, match="singular"):
        latentlab.CCA().fit(Xc, Y)
    assert np.isfinite(latentlab.CCA(reg=(1e-3, 0.0)).fit(Xc, Y).correlations_).all()


def test_linear_kernel_cca_equals_regularized_linear_cca():
    for reg in (0.05, 2.0):
        linear = latentlab.CCA(n_components=3, reg=reg, scale=False).fit(X, Y)
        kernel = latentlab.KernelCCA(n_components=3, reg=reg, kernel="linear").fit(X, Y)
        assert_allclose(
            kernel.regularized_correlations_, linear.regularized_correlations_, rtol=1e-8
        )
        assert_allclose(kernel.correlations_, linear.correlations_, rtol=1e-8)
        new_x, new_y = X[:5] + 1.0, Y[:5] - 2.0
        for ours, ref in zip(
            kernel.transform(new_x, new_y), linear.transform(new_x, new_y), strict=True
        ):
            signs = np.sign(np.sum(ours * ref, axis=0))
            assert_allclose(ours * signs, ref, atol=1e-8 * np.abs(ref).max())


def test_kernel_cca_finds_nonlinear_dependence_on_held_out_data():
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, size=(240, 2))
    B = np.c_[A[:, 0] ** 2 + 0.05 * rng.normal(size=240), rng.normal(size=240)]
    train, test = slice(0, 160), slice(160, None)
    linear = latentlab.CCA(n_components=1).fit(A[train], B[train])
    kernel = latentlab.KernelCCA(n_components=1, reg=0.05, gamma=1.0).fit(A[train], B[train])
    held_out = [
        np.corrcoef(*(s[:, 0] for s in m.transform(A[test], B[test])))[0, 1]
        for m in (linear, kernel)
    ]
    assert abs(held_out[0]) < 0.3 < 0.9 < held_out[1]


def test_pandas_output_and_feature_names():
    cca = latentlab.CCA(n_components=2).set_output(transform="pandas").fit(pd.DataFrame(X), Y)
    out = cca.transform(pd.DataFrame(X))
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["cca0", "cca1"]
    assert list(cca.get_feature_names_out()) == ["cca0", "cca1"]
    kcca = latentlab.KernelCCA(n_components=2).set_output(transform="pandas").fit(X, Y)
    assert list(kcca.transform(X).columns) == ["kernelcca0", "kernelcca1"]


@pytest.mark.parametrize(
    ("estimator", "expected"),
    [
        # n_components=1: the checks fit 1-D targets, and the default n_components=2
        # (scikit-learn's) needs two (scikit-learn's own suite sets 1 for CCA too)
        (latentlab.CCA(n_components=1), CCA_EXPECTED_FAILED_CHECKS),
        (latentlab.KernelCCA(), KERNEL_CCA_EXPECTED_FAILED_CHECKS),
    ],
    ids=["CCA", "KernelCCA"],
)
def test_check_estimator(estimator, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None)
    failed = {r["check_name"]: r["exception"] for r in results if r["status"] == "failed"}
    assert set(failed) == set(expected), failed


def _wrong_shape(A, B):
    return A @ A.T


@pytest.mark.parametrize(
    ("cls", "data", "params", "match"),
    [
        ("CCA", (X[:-1], Y), {}, "same number of rows"),
        ("CCA", (np.r_[X[:-1], [[np.nan, 1, 2]]], Y), {}, "NaN"),
        ("CCA", (X, np.r_[Y[:-1], [[np.inf, 1, 2]]]), {}, "infinity"),
        ("CCA", (X, None), {}, "requires y"),
        ("CCA", (X, Y), {"n_components": 4}, "n_components"),
        ("CCA", (X, Y), {"n_components": 0}, "n_components"),
        ("CCA", (X, Y), {"reg": -1.0}, "reg"),
        ("CCA", (X, Y), {"reg": (0.1, 0.1, 0.1)}, "reg"),
        ("KernelCCA", (X[:-2], Y), {}, "same number of rows"),
        ("KernelCCA", (X, Y), {"reg": 0.0}, "reg > 0"),
        ("KernelCCA", (X, Y), {"reg": (0.1, -0.1)}, "reg > 0"),
        ("KernelCCA", (X, Y), {"kernel": "laplacian"}, "Unknown kernel"),
        ("KernelCCA", (X, Y), {"kernel_y": _wrong_shape}, "shape"),
        ("KernelCCA", (X, Y), {"n_components": 21}, "n_components"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(cls, data, params, match):
    with pytest.raises(ValueError, match=match):
        getattr(latentlab, cls)(**params).fit(*data)


def test_transform_checks_y_width():
    cca = latentlab.CCA(n_components=3).fit(X, Y)
    with pytest.raises(ValueError, match="Y features"):
        cca.transform(X, Y[:, :2])


def test_quick_compile_path_matches_optimised_path(monkeypatch):
    from latentlab import _shapes

    quick = latentlab.CCA(n_components=3).fit(X, Y), latentlab.KernelCCA(reg=0.5).fit(X, Y)
    monkeypatch.setattr(_shapes, "QUICK_COMPILE_MAX_WORK", -1)  # every call optimised
    optimised = latentlab.CCA(n_components=3).fit(X, Y), latentlab.KernelCCA(reg=0.5).fit(X, Y)
    for a, b in zip(quick, optimised, strict=True):
        assert_allclose(b.correlations_, a.correlations_, rtol=1e-12)
        assert_allclose(b.transform(X[:4]), a.transform(X[:4]), atol=1e-10)


@pytest.mark.parametrize("dtype, atol", [("float64", 1e-9), ("float32", 1e-4)])
def test_cca_is_unchanged_by_a_huge_offset_in_either_precision(dtype, atol):
    # Centring now happens in float64 before any cast: with a mean of 1e8, float32
    # used to call the covariance singular.  linnerud holds integers, so X + 1e8 is exact.
    shift = 1e8
    ref = latentlab.CCA(n_components=3).fit(X, Y)
    cca = latentlab.CCA(n_components=3, dtype=dtype).fit(X + shift, Y - shift)
    assert_allclose(cca.correlations_, LINNERUD_CORRELATIONS, atol=atol)
    for ours, expected in zip(
        cca.transform(X + shift, Y - shift), ref.transform(X, Y), strict=True
    ):
        assert_allclose(ours, expected, atol=atol * 10 * np.abs(expected).max())


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize("dtype, atol", [("float64", 1e-9), ("float32", 1e-4)])
def test_kernel_cca_is_unchanged_by_a_huge_offset_in_either_precision(kernel, dtype, atol):
    # Multiples of 1/8 stay exact after adding 1e8, so any difference is the method's.
    # Before: float64 scores off by 2.9 and correlations by 0.16; float32 by 0.99.
    rng = np.random.default_rng(3)
    A = rng.integers(-12, 13, size=(60, 2)) / 8.0
    B = np.c_[A[:, 0] ** 2, A[:, 1]] + rng.integers(-2, 3, size=(60, 2)) / 8.0
    settings = dict(n_components=2, reg=0.1, kernel=kernel, gamma=0.5)
    ref = latentlab.KernelCCA(**settings).fit(A, B)
    shift = 1e8
    ours = latentlab.KernelCCA(**settings, dtype=dtype).fit(A + shift, B - shift)
    assert_allclose(ours.correlations_, ref.correlations_, atol=atol)
    for got, expected in zip(
        ours.transform(A[:7] + shift, B[:7] - shift), ref.transform(A[:7], B[:7]), strict=True
    ):
        assert_allclose(got, expected, atol=atol * 10 * np.abs(expected).max())


def deflation_cca_coef(X, Y, n_components):
    """Oracle for CCA.coef_: scikit-learn's algorithm (Wegelin 2000, canonical
    deflation, unit weights on the deflated views), with each pair found exactly by an
    SVD instead of scikit-learn's power iteration."""
    x_std, y_std = X.std(0, ddof=1), Y.std(0, ddof=1)
    Xk, Yk = (X - X.mean(0)) / x_std, (Y - Y.mean(0)) / y_std
    W, P, L = [], [], []
    for _ in range(n_components):
        Ux, sx, Vxt = np.linalg.svd(Xk, full_matrices=False)
        Uy, sy, Vyt = np.linalg.svd(Yk, full_matrices=False)
        rx, ry = np.sum(sx > sx[0] * 1e-10), np.sum(sy > sy[0] * 1e-10)
        g, _, ht = np.linalg.svd(Ux[:, :rx].T @ Uy[:, :ry])
        w = unit(Vxt[:rx].T @ (g[:, 0] / sx[:rx]))  # minimum-norm, then unit weights
        c = unit(Vyt[:ry].T @ (ht[0] / sy[:ry]))
        t, s = Xk @ w, Yk @ c
        p, q = Xk.T @ t / (t @ t), Yk.T @ s / (s @ s)
        Xk, Yk = Xk - np.outer(t, p), Yk - np.outer(s, q)
        W.append(w), P.append(p), L.append(q)
    W, P, L = np.array(W).T, np.array(P).T, np.array(L).T
    rotations = W @ np.linalg.pinv(P.T @ W)
    return ((rotations @ L.T) * y_std).T / x_std


# full-rank data with a planted 2-D shared signal (scikit-learn's iterative CCA
# converges there; on linnerud it stops early)
_RNG = np.random.default_rng(0)
_Z = _RNG.normal(size=(200, 2))
XP = (_Z @ _RNG.normal(size=(2, 4)) + _RNG.normal(size=(200, 4))) * [1, 2, 3, 0.5] + 5
YP = _Z @ _RNG.normal(size=(2, 3)) + 0.7 * _RNG.normal(size=(200, 3))


@pytest.mark.parametrize("n_components", [1, 2, 3])
def test_predict_coef_and_score_match_sklearn_cca(n_components):
    # CCA.predict, coef_, intercept_ and score (R^2) as scikit-learn's CCA
    from sklearn.cross_decomposition import CCA as SklearnCCA
    from sklearn.metrics import r2_score

    ours = latentlab.CCA(n_components=n_components).fit(XP, YP)
    oracle = deflation_cca_coef(XP, YP, n_components)
    assert ours.coef_.shape == (3, 4) and ours.intercept_.shape == (3,)
    assert_allclose(ours.coef_, oracle, rtol=1e-10, atol=1e-12)
    assert_allclose(ours.intercept_, YP.mean(0), rtol=1e-12)
    new = XP[:20] + 0.5
    assert_allclose(ours.predict(new), (new - XP.mean(0)) @ oracle.T + YP.mean(0), atol=1e-10)
    ref = SklearnCCA(n_components=n_components, max_iter=10_000, tol=1e-14).fit(XP, YP)
    assert_allclose(ours.coef_, ref.coef_, atol=1e-7)  # scikit-learn iterates to ~1e-8
    assert_allclose(ours.predict(new), ref.predict(new), atol=1e-6)
    assert_allclose(ours.score(XP, YP), r2_score(YP, ref.predict(XP)), atol=1e-8)


def test_predict_of_one_dimensional_y_is_one_dimensional():
    from sklearn.cross_decomposition import CCA as SklearnCCA

    ours = latentlab.CCA(n_components=1).fit(XP, YP[:, 0])
    ref = SklearnCCA(n_components=1, max_iter=10_000, tol=1e-14).fit(XP, YP[:, 0])
    assert ours.predict(XP[:5]).shape == (5,)
    assert_allclose(ours.predict(XP[:5]), ref.predict(XP[:5]), atol=1e-7)


def test_default_n_components_is_sklearns():
    from sklearn.cross_decomposition import CCA as SklearnCCA

    assert latentlab.CCA().n_components == SklearnCCA().n_components == 2
    assert latentlab.CCA().fit(XP, YP).n_components_ == 2


@pytest.mark.parametrize("copy", [True, False])
def test_copy_is_accepted_and_never_changes_the_inputs(copy):
    # scikit-learn's ``copy`` (constructor, transform, predict); latentlab never
    # writes into the caller's arrays, whatever its value
    from sklearn.cross_decomposition import CCA as SklearnCCA

    X, Y = XP.copy(), YP.copy()
    ours = latentlab.CCA(n_components=2, copy=copy).fit(X, Y)
    ref = SklearnCCA(n_components=2, copy=True, max_iter=10_000, tol=1e-14).fit(XP, YP)
    assert_allclose(ours.predict(X, copy=copy), ref.predict(XP), atol=1e-6)
    for got, want in zip(ours.transform(X, Y, copy=copy), ours.transform(XP, YP), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(X, XP)
    np.testing.assert_array_equal(Y, YP)
