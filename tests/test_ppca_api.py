"""PPCA's user surface: bad input, scikit-learn protocol, persistence, model selection."""

import pickle

import joblib
import numpy as np
import pytest
from oracles import hide_at_random, planted_low_rank
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import latentlab
from latentlab import PPCA


@pytest.fixture(scope="module")
def data():
    X, _, _ = planted_low_rank(n=300, d=8, rank=2, noise=0.3, seed=7)
    return X


@pytest.fixture(scope="module")
def fitted(data):
    X_missing, _ = hide_at_random(data, 0.1, seed=0)
    return PPCA(2, random_state=0).fit(data), X_missing


# -- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "X, match",
    [
        (np.ones(10), "2D array"),
        (np.ones((4, 3, 2)), "dim 3"),
        (np.array([[1.0, np.inf], [2.0, 3.0], [1.0, 0.0]]), "infinity"),
        (
            np.array([[1.0, 2.0, 3.0], [np.nan, np.nan, np.nan], [1.0, 0.0, 2.0]]),
            "every entry missing.*rows 1",
        ),
        (
            np.array([[1.0, np.nan, 3.0], [2.0, np.nan, 1.0], [1.0, np.nan, 2.0]]),
            "every entry missing.*columns 1",
        ),
    ],
)
def test_bad_input_is_rejected_with_a_named_problem(X, match):
    with pytest.raises(ValueError, match=match):
        PPCA(1).fit(X)


# (K = 0 is the isotropic-Gaussian baseline: tests/test_baseline_and_mle.py)
@pytest.mark.parametrize("K", [-1, 8, 2.5])
def test_n_components_out_of_range(data, K):
    with pytest.raises(ValueError, match="n_components"):
        PPCA(K).fit(data)


def test_unknown_method(data):
    with pytest.raises(ValueError, match="Unknown method='gibbs'"):
        PPCA(2, method="gibbs").fit(data)


def test_closed_form_with_missing_values_points_to_em(data):
    X_missing, _ = hide_at_random(data, 0.1)
    with pytest.raises(ValueError, match="method='em'"):
        PPCA(2, method="closed_form").fit(X_missing)


def test_score_rejects_wrong_width_and_empty_rows(fitted):
    est, _ = fitted
    with pytest.raises(ValueError, match="features"):
        est.score(np.ones((3, 5)))
    with pytest.raises(ValueError, match="every entry missing"):
        est.score_samples(np.full((2, 8), np.nan))


def test_inverse_transform_refuses_nan_like_pca(fitted):
    est, _ = fitted
    Z = est.transform(est.sample(3, random_state=0))
    Z[1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.inverse_transform(Z)
    with pytest.raises(ValueError, match="NaN"):
        latentlab.PCA(2).fit(est.sample(20, random_state=0)).inverse_transform(Z)


def _floor_warnings(X, K):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = PPCA(K, random_state=0).fit(X)
    return est, [str(w.message) for w in caught if "floor" in str(w.message)]


def test_subspace_warning_is_scale_aware():
    """Unequal column scales are not a K-dimensional subspace."""
    from sklearn.datasets import load_wine

    # wine's raw columns: variances from 0.015 to 1e5, full rank (smallest ML noise
    # eigenvalue 0.0065, yet below the old absolute criterion, 1e-6 x mean variance)
    wine = load_wine().data[::2]
    _, messages = _floor_warnings(wine, 12)
    assert not any("subspace" in m for m in messages)
    assert all("very different scales" in m for m in messages)
    # truly rank-3 data (column scales within a factor 10) do get the subspace warning
    rng = np.random.default_rng(0)
    rank3 = (rng.normal(size=(100, 3)) @ rng.normal(size=(3, 6))) * [10, 1, 1, 0.3, 3, 1] + 5
    est, messages = _floor_warnings(rank3, 3)
    assert len(messages) == 1 and "3-dimensional affine subspace" in messages[0]
    # fewer components than the rank: no floor, no warning
    assert _floor_warnings(rank3, 2)[1] == []


def test_unfitted_estimator_raises(data):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        PPCA(2).transform(data)


# -- scikit-learn protocol ------------------------------------------------------------

# Checks that cannot pass, each with its reason.
EXPECTED_FAILED_CHECKS = {}


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    check_estimator(PPCA(1, random_state=0), expected_failed_checks=EXPECTED_FAILED_CHECKS)


def test_clone_and_grid_search_pick_planted_rank():
    X, _, _ = planted_low_rank(n=300, d=10, rank=3, noise=0.5, seed=11)
    est = clone(PPCA(2, random_state=0))
    assert est.get_params()["n_components"] == 2
    search = GridSearchCV(PPCA(random_state=0), {"n_components": [1, 2, 3, 4, 5, 6]}, cv=KFold(5))
    search.fit(X)
    assert search.best_params_["n_components"] == 3


def test_works_in_a_pipeline(data):
    pipe = make_pipeline(StandardScaler(), PPCA(2, random_state=0)).fit(data)
    assert pipe.transform(data).shape == (300, 2)
    assert np.isfinite(pipe.score(data))


def test_set_output_pandas_and_feature_names(data):
    est = PPCA(2, random_state=0).set_output(transform="pandas").fit(data)
    out = est.transform(data)
    assert list(out.columns) == ["ppca0", "ppca1"]
    np.testing.assert_array_equal(est.get_feature_names_out(), ["ppca0", "ppca1"])


# -- persistence ----------------------------------------------------------------------


def test_pickle_and_joblib_round_trip(fitted, tmp_path):
    est, X_missing = fitted
    for restored in (
        pickle.loads(pickle.dumps(est)),
        joblib.load(joblib.dump(est, tmp_path / "m.joblib")[0]),
    ):
        assert restored.score(X_missing) == est.score(X_missing)
        np.testing.assert_array_equal(restored.impute(X_missing), est.impute(X_missing))


def test_save_load_gives_identical_results(fitted, tmp_path):
    est, X_missing = fitted
    path = tmp_path / "ppca.npz"
    est.save(path)
    loaded = latentlab.load(path)
    assert type(loaded) is PPCA and loaded.get_params() == est.get_params()
    assert loaded.score(X_missing) == est.score(X_missing)
    np.testing.assert_array_equal(loaded.transform(X_missing), est.transform(X_missing))
    np.testing.assert_array_equal(loaded.impute(X_missing), est.impute(X_missing))
    np.testing.assert_array_equal(loaded.log_likelihoods_, est.log_likelihoods_)
    assert loaded.n_iter_ == est.n_iter_ and loaded.converged_ == est.converged_


def test_tampered_file_fails_clearly(fitted, tmp_path):
    est, _ = fitted
    path = tmp_path / "ppca.npz"
    est.save(path)
    with np.load(path) as f:
        contents = {k: f[k] for k in f.files}
    contents["params_/sigma2"] = contents["params_/sigma2"] * 2
    with open(path, "wb") as f:
        np.savez(f, **contents)
    with pytest.raises(ValueError, match="checksum mismatch"):
        latentlab.load(path)


def test_file_with_pickled_payload_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, __meta__=np.array([{"format": "latentlab-model"}], dtype=object))
    with pytest.raises(ValueError, match="not a readable latentlab model file"):
        latentlab.load(path)


def test_save_keeps_feature_names(tmp_path):
    import pandas as pd

    X, _, _ = planted_low_rank(n=50, d=4, rank=1, seed=2)
    df = pd.DataFrame(X, columns=list("abcd"))
    est = PPCA(1, random_state=0).fit(df)
    est.save(tmp_path / "m.npz")
    loaded = latentlab.load(tmp_path / "m.npz")
    assert list(loaded.feature_names_in_) == list("abcd")
    assert loaded.score(df) == est.score(df)
