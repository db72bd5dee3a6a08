"""Shared input validation (latentlab._validation): every estimator refuses, with a
ValueError naming the problem, values whose sums of squares overflow float64, feature
columns whose spread squared underflows (when fitting), sparse matrices, dates (NumPy
arrays and DataFrame columns), ``None`` and scalars, and the masked entries of a NumPy
masked array -- which the models that take NaN read as missing instead.

The refusals happen before any XLA compilation, so these tests are cheap; the few fits
check that data just inside the limits still give correct numbers, and that masked
entries give the fit of the same data with NaN there.
"""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from estimator_recipes import COUNTS, RECIPES, exported_estimators
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA as SkPCA
from sklearn.utils import get_tags

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


# -- every exported estimator ------------------------------------------------------------


def make(name):
    """(an unfitted estimator, its fit arguments) from the shared recipes; Imputer
    has no recipe there (it wraps the models)."""
    if name == "Imputer":
        return latentlab.Imputer("ppca", n_components=2, random_state=0), RECIPES["PCA"][1]
    settings, fit_args, _ = RECIPES[name]
    return getattr(latentlab, name)(**settings), fit_args


def with_x(fit_args, X):
    return (X, *fit_args[1:])


@pytest.mark.parametrize("name", exported_estimators())
@pytest.mark.parametrize("bad", [3.0, None, []], ids=["scalar", "None", "empty"])
def test_scalars_none_and_empty_input_are_value_errors(name, bad):
    # SpectralEmbedding/SpectralClustering took len(X) before validating: fit(3.0)
    # raised "object of type 'float' has no len()", fit(None) a TypeError too
    est, fit_args = make(name)
    with pytest.raises(ValueError, match=r"Expected 2D array|X is None"):
        est.fit(*with_x(fit_args, bad))


@pytest.mark.parametrize("name", exported_estimators())
@pytest.mark.parametrize("unit", ["datetime64[D]", "timedelta64[s]"])
def test_numpy_date_arrays_are_refused(name, unit):
    # scikit-learn converts them to days (or seconds) since 1970, and every estimator
    # fitted those numbers; DataFrame date columns were already refused by name
    est, fit_args = make(name)
    dates = np.arange(fit_args[0].size).reshape(fit_args[0].shape).astype(unit)
    with pytest.raises(ValueError, match=r"NumPy array of dates or time spans") as info:
        est.fit(*with_x(fit_args, dates))
    assert isinstance(info.value, InputTypeError)


def _masked(X, row=3, column=1, value=1e6):
    """X as a masked array whose one masked entry holds ``value``, and X with NaN there."""
    held, with_nan = X.copy(), X.copy()
    held[row, column], with_nan[row, column] = value, np.nan
    mask = np.zeros(X.shape, dtype=bool)
    mask[row, column] = True
    return np.ma.masked_array(held, mask=mask), with_nan


def _fitted_parameters(est):
    if isinstance(est, latentlab.Imputer):
        return est.model_.params_  # the model it fitted
    return est.params_


@pytest.mark.parametrize("name", exported_estimators())
def test_masked_entries_are_missing_values_or_refused(name):
    # The mask used to be dropped (np.asarray of a masked array is its data): a masked
    # entry holding 1e6 was fitted as 1e6 by all 28 estimators.
    est, fit_args = make(name)
    masked, with_nan = _masked(fit_args[0])
    if not get_tags(est).input_tags.allow_nan:
        with pytest.raises(ValueError, match=r"masked array, and 1 of its entries are masked"):
            est.fit(*with_x(fit_args, masked))
        return
    fitted = est.fit(*with_x(fit_args, masked))
    reference = make(name)[0].fit(*with_x(fit_args, with_nan))
    ours, theirs = _fitted_parameters(fitted), _fitted_parameters(reference)
    assert ours.keys() == theirs.keys()
    for key in ours:
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


def test_masked_input_to_fitted_models_and_second_views():
    X = RECIPES["PPCA"][1][0]
    masked, with_nan = _masked(X)
    ppca = latentlab.PPCA(2, random_state=0).fit(X)
    np.testing.assert_array_equal(ppca.transform(masked), ppca.transform(with_nan))
    np.testing.assert_array_equal(ppca.score_samples(masked), ppca.score_samples(with_nan))
    # a mask with nothing masked is plain data
    unmasked = np.ma.masked_array(X, mask=np.zeros(X.shape, dtype=bool))
    np.testing.assert_array_equal(ppca.transform(unmasked), ppca.transform(X))
    _, (X2, Y), _ = RECIPES["CCA"]
    with pytest.raises(ValueError, match=r"Y is a masked array"):
        latentlab.CCA(1).fit(X2, _masked(Y, column=0)[0])


@pytest.mark.parametrize("name", sorted(set(exported_estimators()) - {"Imputer"}))
@pytest.mark.parametrize("scale", [1e160, 1e-160])
def test_every_estimator_refuses_values_whose_squares_leave_float64(name, scale):
    # NMF had no magnitude check at all, pLSA and sparse input their own; now one check
    # covers both ends for all.  (Imputer standardises, so it rescales by itself.)
    est, fit_args = make(name)
    data = fit_args[0] * scale
    what = "as large as .* overflow float64" if scale > 1 else "as little as .* underflow float64"
    with pytest.raises(ValueError, match=what):
        est.fit(*with_x(fit_args, data))


# -- the small end: spreads whose squares underflow ------------------------------------


@pytest.fixture(scope="module")
def wine():
    X = load_wine().data
    return (X - X.mean(axis=0)) / X.std(axis=0)


GAUSSIAN_LATENT = {
    "PPCA": lambda: latentlab.PPCA(2, random_state=0),
    "FactorAnalysis": lambda: latentlab.FactorAnalysis(2, random_state=0),
    "BayesianPCA": lambda: latentlab.BayesianPCA(2, random_state=0),
    "VariationalAutoencoder": lambda: latentlab.VariationalAutoencoder(2, random_state=0),
}


@pytest.mark.parametrize("name", GAUSSIAN_LATENT)
@pytest.mark.parametrize("scale", [1e-160, 1e-200, 1e-300])
def test_spreads_whose_squares_underflow_are_refused(name, scale, wine):
    # Standardised wine times 1e-160: transform and score returned NaN with only
    # RuntimeWarnings; times 1e-200 or 1e-300 the score was finite but wrong (23.96
    # nats per row against about 1,838), with a warning that the data "lie in a
    # 2-dimensional subspace".
    with pytest.raises(
        ValueError,
        match=r"13 column\(s\) \(0, 1, .*\) whose values spread "
        r"over as little as .* underflow float64.* Rescale X",
    ):
        GAUSSIAN_LATENT[name]().fit(wine * scale)


@pytest.mark.parametrize("name", ["PLSRegression", "PLSCanonical"])
def test_pls_refuses_underflowing_spreads_in_either_view(name, wine):
    # X * 1e-160 gave NaN coefficients
    Y = np.c_[wine[:, 0] + wine[:, 1], wine[:, 2]]
    with pytest.raises(ValueError, match="underflow float64"):
        getattr(latentlab, name)(2).fit(wine * 1e-160, Y)
    with pytest.raises(ValueError, match=r"Y has .* underflow float64"):
        getattr(latentlab, name)(2).fit(wine, Y * 1e-160)


def test_one_tiny_column_beside_ordinary_ones_is_named(wine):
    # its variance, ~1e-320, is subnormal whatever the other columns hold
    X = wine.copy()
    X[:, 4] *= 1e-160
    with pytest.raises(ValueError, match=r"X has 1 column\(s\) \(4\) whose values spread"):
        latentlab.FactorAnalysis(2).fit(X)


def test_the_small_limit_keeps_variances_eps_times_smaller_normal():
    tiny, eps = np.finfo(np.float64).tiny, np.finfo(np.float64).eps
    floor = np.sqrt(tiny / eps)  # 1.0e-146
    assert (1.01 * floor) ** 2 * eps > tiny  # a variance eps times smaller: still normal
    two_values = np.array([[0.0, 1.0], [1.0, 1.0]])  # spreads 1 and 0 (constant)
    check_magnitude(two_values * 1.01 * floor)
    with pytest.raises(ValueError, match=r"1 column\(s\) \(0\) .* underflow float64"):
        check_magnitude(two_values * 0.99 * floor)
    check_magnitude(np.full((3, 2), 1e-300))  # constant columns are legal at any scale
    check_magnitude(two_values * 1e-300, check_spread=False)  # not a fit: no variances
    nan_column = np.c_[two_values[:, :1], [np.nan, np.nan]]
    check_magnitude(nan_column)  # a column with every entry missing has no spread


def test_float32_limits_follow_float32(wine):
    f32 = np.finfo(np.float32)
    floor = np.sqrt(f32.tiny / f32.eps)  # 3.1e-16
    two_values = np.array([[0.0], [1.0]])
    check_magnitude(two_values * 1.01 * floor, dtype=np.float32)
    with pytest.raises(ValueError, match=r"underflow float32.*dtype='float64'"):
        check_magnitude(two_values * 0.99 * floor, dtype=np.float32)
    # measured: a float32 PPCA of wine * 1e-20 scored NaN, of wine * 1e20 raised
    # LinAlgError ("SVD did not converge")
    with pytest.raises(ValueError, match=r"underflow float32.*dtype='float64'"):
        latentlab.PPCA(2, dtype="float32").fit(wine * 1e-20)
    with pytest.raises(ValueError, match=r"overflow float32, this estimator's dtype"):
        latentlab.PPCA(2, dtype="float32").fit(wine * 1e20)
    # ... while float64 takes both
    check_magnitude(wine * 1e-20)
    check_magnitude(wine * 1e20)


@pytest.mark.parametrize("scale", [1e-140, 1e-8, 1e8])
def test_small_but_safe_scales_give_the_unit_scale_fit(scale, wine):
    # PPCA is scale-equivariant: the log-likelihood moves by -log(scale) per feature
    unit = GAUSSIAN_LATENT["PPCA"]().fit(wine)
    scaled = GAUSSIAN_LATENT["PPCA"]().fit(wine * scale)
    d = wine.shape[1]
    assert scaled.score(wine * scale) + d * np.log(scale) == pytest.approx(
        unit.score(wine), abs=1e-8
    )
    # a fitted model takes rows near one point (tiny spread) in transform and score
    near = unit.mean_ + 1e-200 * wine[:5]
    assert np.all(np.isfinite(unit.score_samples(near)))


def test_imputer_rescales_tiny_data_itself():
    # Imputer standardises each column, so 1e-160 data are 1e-160 times the unit fit
    X_missing = RECIPES["PPCA"][1][0].copy()
    X_missing[::5, 1] = np.nan
    kwargs = dict(model="ppca", n_components=2, random_state=0)
    unit = latentlab.Imputer(**kwargs).fit(X_missing).transform(X_missing)
    tiny = latentlab.Imputer(**kwargs).fit(X_missing * 1e-160).transform(X_missing * 1e-160)
    np.testing.assert_allclose(tiny, unit * 1e-160, rtol=1e-8)


def test_nmf_refuses_overflowing_values():
    with pytest.raises(ValueError, match=r"as large as .* overflow float64"):
        latentlab.NMF(2).fit(COUNTS * 1e160)
    with pytest.raises(ValueError, match=r"as large as .* overflow float64"):
        latentlab.NMF(2).fit(sp.csr_matrix(COUNTS * 1e160))


def test_compare_reads_masked_entries_as_missing():
    # compare converted X with np.asarray, which drops the mask
    X = RECIPES["PPCA"][1][0]
    masked, with_nan = _masked(X)
    models = {"ppca": latentlab.PPCA(1, random_state=0)}
    ours = latentlab.compare(models, masked, cv=2)
    reference = latentlab.compare(models, with_nan, cv=2)
    pd.testing.assert_frame_equal(ours, reference)
    with pytest.raises(ValueError, match="X is a NumPy array of dates"):
        latentlab.compare(models, np.zeros((10, 2), dtype="datetime64[D]"), cv=2)


# -- DataFrame columns that are not numbers, named ----------------------------------


@pytest.mark.parametrize("name", exported_estimators())
def test_every_estimator_names_the_text_columns_of_a_dataframe(name):
    # measured: PPCA().fit(frame) said only "could not convert string to float: 'a'"
    estimator, fit_args = make(name)
    X = fit_args[0]
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    frame.insert(1, "label", ["a", "b"] * (len(X) // 2))
    # (Imputer words its own refusal of non-numeric dtypes: "column(s): [...]")
    with pytest.raises(ValueError, match=r"non-numeric column\(s\):? \['label'\]"):
        estimator.fit(*with_x(fit_args, frame))


@pytest.mark.parametrize(
    "column, accepted",
    [
        (pd.Categorical(["low", "high"] * (N // 2)), False),
        (pd.Series([1.0, pd.NA] * (N // 2), dtype=object), False),  # TypeError before
        (pd.Series(["x", None] * (N // 2), dtype="string"), False),
        (pd.Categorical([1.0, 2.0] * (N // 2)), True),  # numbers, as categories
        (pd.Series(["1.5", "2"] * (N // 2), dtype=object), True),  # numbers, as text
    ],
    ids=["text categories", "pd.NA object", "string dtype", "numeric categories", "numerals"],
)
def test_only_columns_that_do_not_convert_to_numbers_are_refused(X, column, accepted):
    # the same columns as scikit-learn's conversion refuses, now by name; every text
    # column is named, not only the first
    frame = pd.DataFrame(X, columns=list("abcd")).assign(odd=column, more=column)
    if accepted:
        assert latentlab.PPCA(1).fit(frame).n_features_in_ == D + 2
        return
    with pytest.raises(InputTypeError, match=r"non-numeric column\(s\) \['odd', 'more'\]"):
        latentlab.PPCA(1).fit(frame)


def test_a_text_column_of_y_is_named_too(X):
    Y = pd.DataFrame({"y0": X[:, 0], "kind": ["a", "b"] * (N // 2)})
    with pytest.raises(ValueError, match=r"Y has non-numeric column\(s\) \['kind'\]"):
        latentlab.CCA(1).fit(X, Y)
