"""Shared input validation (latentlab._validation): every estimator refuses, with a
ValueError naming the problem, values whose sums of squares overflow float64, sparse
matrices and non-numeric DataFrame columns.

The refusals happen before any XLA compilation, so these tests are cheap; the one fit
(PCA on 40 x 4) checks that data just inside the limit still give correct numbers.
"""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.decomposition import PCA as SkPCA

import latentlab
from latentlab._validation import InputTypeError, check_magnitude

N, D = 40, 4
ESTIMATORS = {
    "PCA": lambda: latentlab.PCA(2),
    "KernelPCA": lambda: latentlab.KernelPCA(2),
    "PPCA": lambda: latentlab.PPCA(1),
    "FactorAnalysis": lambda: latentlab.FactorAnalysis(1),
    "BayesianPCA": lambda: latentlab.BayesianPCA(2),
    "GaussianMixture": lambda: latentlab.GaussianMixture(2),
}


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(N, D))


@pytest.mark.parametrize("name", ESTIMATORS)
def test_values_whose_squares_overflow_are_refused(name, X):
    # |x| = 1e160: x**2 = inf, so scatter matrices and log-densities were inf/NaN
    # (PCA used to report explained_variance_ = [nan, nan] without a word)
    with pytest.raises(ValueError, match=r"as large as .* overflow float64.* Rescale X"):
        ESTIMATORS[name]().fit(X * 1e160)


def test_the_limit_is_where_the_sum_of_squares_overflows():
    big = np.finfo(np.float64).max
    limit = np.sqrt(big / (N * D))  # N * D entries of that size sum to the largest float
    with np.errstate(over="ignore"):
        assert np.isfinite(np.sum(np.full((N, D), 0.99 * limit) ** 2))
        assert np.isinf(np.sum(np.full((N, D), 1.01 * limit) ** 2))
    check_magnitude(np.full((N, D), 0.99 * limit))
    with pytest.raises(ValueError, match="overflow"):
        check_magnitude(np.full((N, D), 1.01 * limit))
    check_magnitude(np.full((N, D), np.nan))  # all missing: nothing to square


def test_large_values_inside_the_limit_give_scikit_learns_answer(X):
    # 1e150: squares near 1e300, summed over 40 rows still finite
    ours = latentlab.PCA(2).fit(X * 1e150)
    ref = SkPCA(2).fit(X)
    np.testing.assert_allclose(ours.explained_variance_, ref.explained_variance_ * 1e300, rtol=1e-9)
    np.testing.assert_allclose(np.abs(ours.components_), np.abs(ref.components_), atol=1e-9)
    with pytest.raises(ValueError, match="overflow"):  # transform checks too
        ours.transform(X * 1e160)


@pytest.mark.parametrize("name", ["PPCA", "FactorAnalysis"])  # PCA takes sparse X
def test_sparse_input_to_dense_estimators_is_a_value_error(name, X):
    with pytest.raises(ValueError, match=r"sparse matrix.*X\.toarray\(\)") as info:
        ESTIMATORS[name]().fit(sp.csr_matrix(X))
    # scikit-learn's own check raises TypeError: code catching that keeps working
    assert isinstance(info.value, TypeError) and isinstance(info.value, InputTypeError)


@pytest.mark.parametrize("name", ["PCA", "PPCA"])
def test_datetime_columns_are_named_in_a_value_error(name, X):
    frame = pd.DataFrame(X, columns=list("abcd")).assign(when=pd.date_range("2020", periods=N))
    # used to be NumPy's DTypePromotionError about Float64DType and DateTime64DType
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['when'\] holding dates"):
        ESTIMATORS[name]().fit(frame)
    spans = frame.assign(when=frame["when"] - frame["when"].iloc[0])
    with pytest.raises(ValueError, match=r"\['when'\] holding dates or time spans"):
        ESTIMATORS[name]().fit(spans)


def test_numbers_stored_as_objects_are_still_accepted(X):
    frame = pd.DataFrame(X, columns=list("abcd")).astype(object)
    np.testing.assert_allclose(
        latentlab.PCA(2).fit(frame).explained_variance_,
        SkPCA(2).fit(X).explained_variance_,
        rtol=1e-10,
    )


@pytest.mark.parametrize("cls", [latentlab.CCA, latentlab.KernelCCA])
def test_second_view_with_overflowing_or_sparse_values_is_refused(cls, X):
    from scipy import sparse

    Y = X[:, :2] + 0.1 * np.random.default_rng(1).normal(size=(N, 2))
    with pytest.raises(ValueError, match=r"Y has values as large as .* overflow float64"):
        cls(1).fit(X, Y * 1e160)
    with pytest.raises(ValueError, match="Y is a sparse matrix"):
        cls(1).fit(X, sparse.csr_matrix(Y))
    cls(1).fit(X, Y * 1e100)  # large but representable: fits
