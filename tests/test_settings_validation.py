"""Every exported estimator declares its settings in a table (``_settings``), and a bad
value of any of them is refused by name before any data are read or compiled.

The cases are generated from the tables: a new estimator, or a new setting, is
covered as soon as it is declared.
"""

import inspect
from contextlib import contextmanager

import jax.monitoring
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import latentlab.estimators as E
from latentlab._settings import (
    AnyOf,
    Integer,
    Options,
    Real,
    _as_constraint,
    validate_settings,
)
from latentlab.estimators.base import LatentEstimator, warn_not_converged

ESTIMATORS = sorted(
    (getattr(E, name) for name in E.__all__ if isinstance(getattr(E, name), type)),
    key=lambda cls: cls.__name__,
)
# Tiny data: a bad setting must be refused before any of it is looked at.
X = np.arange(1.0, 25.0).reshape(6, 4)
Y = np.array([0, 1, 0, 1, 0, 1])


def _settings_of(cls) -> list[str]:
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


def _bad_cases():
    for cls in ESTIMATORS:
        for name, constraint in cls._settings.items():
            constraint = _as_constraint(constraint)
            misses = [m for m in constraint.near_misses() if not constraint.is_satisfied_by(m)]
            # every constrained setting has at least one refused value to try
            yield pytest.param(cls, name, misses, id=f"{cls.__name__}-{name}")


@contextmanager
def _no_jax_work(monkeypatch):
    """Fail if a JAX program is traced or compiled, or the estimator enters its
    precision context (where all its JAX work runs), inside the block."""
    events = []

    def listener(event, duration, **kwargs):
        events.append(event)

    def precision(self):
        raise AssertionError(f"{type(self).__name__} started JAX work before validating")

    monkeypatch.setattr(LatentEstimator, "_precision", precision)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert not [e for e in events if "compile" in e], events


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda cls: cls.__name__)
def test_every_setting_is_declared_and_the_defaults_pass(cls):
    assert set(cls._settings) == set(_settings_of(cls)), "declare every constructor setting"
    validate_settings(cls())  # raises on a default the table does not allow


@pytest.mark.parametrize(("cls", "name", "misses"), list(_bad_cases()))
def test_a_bad_setting_is_refused_by_name_before_any_jax_work(cls, name, misses, monkeypatch):
    assert misses, f"{cls.__name__}._settings[{name!r}] has no value to refuse"
    for bad in misses:
        est = cls(**{name: bad})
        with _no_jax_work(monkeypatch):
            with pytest.raises(ValueError, match=rf"\b{name}\b") as info:
                est.fit(X, Y)
        assert repr(bad) in str(info.value)


def test_partial_fit_validates_too(monkeypatch):
    with _no_jax_work(monkeypatch):
        with pytest.raises(ValueError, match=r"^learning_decay must be in \(0.5, 1\], got 0.5$"):
            E.PPCA(2, learning_decay=0.5).partial_fit(X)


def test_constraint_messages_name_setting_value_and_what_is_allowed():
    class Toy(LatentEstimator):
        _settings = {
            "k": Integer(1, None) | None,
            "tol": Real(0, 1, closed="right"),
            "rate": Real(0, None, closed="neither", finite=True, verb="stay"),
            "kind": Options("a", "b", hints={"c": "c is spelled b here"}) | Integer(0, 3),
            "flag": Options(False, "auto"),
        }

        def __init__(self, k=None, tol=0.5, rate=1.0, kind="a", flag="auto"):
            self.k, self.tol, self.rate, self.kind, self.flag = k, tol, rate, kind, flag

        def fit(self, X, y=None):
            return self

    Toy().fit(X)  # defaults pass
    cases = [
        ({"k": 0}, "k must be a positive integer, got 0"),
        ({"k": True}, "k must be a positive integer or None, got True"),
        ({"k": 1.0}, r"k must be a positive integer or None, got 1\.0"),
        ({"tol": 0}, r"tol must be in \(0, 1\], got 0"),
        ({"tol": float("nan")}, r"tol must be in \(0, 1\], got nan"),
        ({"rate": -1}, "rate must stay a number > 0, got -1"),
        ({"rate": float("inf")}, "rate must stay a finite number > 0, got inf"),
        (
            {"kind": "c"},
            r"Unknown kind='c'; expected one of 'a', 'b' or an integer in \[0, 3\]: "
            "c is spelled b here",
        ),
        ({"kind": 4}, r"kind must be an integer in \[0, 3\], got 4"),
        ({"kind": 2.5}, r"kind must be one of 'a', 'b' or an integer in \[0, 3\], got 2\.5"),
        ({"flag": True}, "Unknown flag=True; expected one of False, 'auto'"),
        ({"flag": 0}, "Unknown flag=0; expected one of False, 'auto'"),
    ]
    for settings, message in cases:
        with pytest.raises(ValueError, match=f"^{message}$"):
            Toy(**settings).fit(X)
    assert isinstance(Integer(1) | None | "auto", AnyOf)
    assert (Integer(1) | "auto").is_satisfied_by("auto")
    assert not (Integer(1) | "auto").is_satisfied_by(np.array(["auto"]))
    assert Options(2, "x").is_satisfied_by(2.0) and not Options(1).is_satisfied_by(True)


# -- the shared end of a fit --------------------------------------------------------


class _Iterative(LatentEstimator):
    _settings = {"max_iter": Integer(1, None), "tol": Real(0, None)}

    def __init__(self, max_iter=3, tol=1e-3):
        self.max_iter, self.tol = max_iter, tol


def test_end_fit_stores_the_fit_and_ends_a_stream():
    est = _Iterative()
    est.online_state_, est.n_samples_seen_ = {"t": 1}, 10
    params = {"w": np.array([1.0, 2.0]), "s": np.float64(0.5)}
    est._end_fit(params, [1.0, 2.5], np.int32(2), np.bool_(True), advice="unused")
    assert est.params_ is params
    assert est.log_likelihoods_.dtype == np.float64
    np.testing.assert_array_equal(est.log_likelihoods_, [1.0, 2.5])
    assert est.n_iter_ == 2 and type(est.n_iter_) is int
    assert est.converged_ is True
    assert not hasattr(est, "online_state_") and not hasattr(est, "n_samples_seen_")


def test_end_fit_refuses_non_finite_values_naming_them():
    est = _Iterative()
    bad = {"w": np.array([1.0, np.nan]), "s": np.float64(0.5), "v": np.array([np.inf])}
    message = "^_Iterative fit produced non-finite values for w, v; try fewer components$"
    with pytest.raises(ValueError, match=message):
        est._end_fit(bad, [1.0], 1, True, advice="try fewer components")
    assert not hasattr(est, "params_")  # nothing of a refused fit is kept
    with pytest.raises(ValueError, match="for the objective; "):
        est._end_fit({"w": np.ones(2)}, [1.0], 1, True, advice="x", objective=np.nan)


def test_convergence_warning_has_one_wording_and_points_at_the_caller():
    with pytest.warns(ConvergenceWarning) as record:
        warn_not_converged(_Iterative(max_iter=7, tol=0.01), "coordinate descent")
    (warning,) = record
    assert str(warning.message) == (
        "_Iterative coordinate descent did not converge within max_iter=7 iterations "
        "(tol=0.01); increase max_iter or tol."
    )
    assert warning.filename == __file__  # not a line inside latentlab
    # a real fit: the warning names the estimator, its solver and its tolerance setting
    D = np.abs(X[:, :1] - X[:, :1].T)
    with pytest.warns(ConvergenceWarning) as record:
        E.MDS(1, algorithm="smacof", metric="precomputed", max_iter=1, eps=0.0).fit(D)
    (warning,) = [w for w in record if w.category is ConvergenceWarning]
    assert str(warning.message) == (
        "MDS SMACOF did not converge within max_iter=1 iterations (eps=0.0); "
        "increase max_iter or eps."
    )
    assert warning.filename == __file__


def test_load_checks_the_settings_table(tmp_path):
    """A file whose settings were edited to a value fit would refuse does not load."""
    import json

    import latentlab
    from latentlab import io as lio

    path = tmp_path / "m.npz"
    E.GaussianRandomProjection(2, random_state=0).fit(X).save(path)  # NumPy only
    latentlab.load(path)  # as saved: loads
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(arrays.pop("__meta__").tobytes().decode())
    meta["settings"]["eps"] = -1.0
    del meta["sha256"]
    meta["sha256"] = lio._digest(dict(meta), arrays)  # a valid checksum: only the table
    blob = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, __meta__=blob, **arrays)
    with pytest.raises(ValueError, match=r"eps must be a number > 0, got -1\.0"):
        latentlab.load(path)
