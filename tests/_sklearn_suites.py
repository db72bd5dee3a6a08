"""The harness that runs scikit-learn's own unit tests against latentlab's classes.

The test modules ship inside the installed scikit-learn package; nothing is copied into
this repository.  Each module is imported, its ``test_*`` functions are expanded over
their own ``pytest.mark.parametrize`` grids, and every case runs with the names of the
scikit-learn objects under test (``PCA``, ``manifold.Isomap``, ...) replaced by
latentlab's, as are parameter values that are scikit-learn's class and module-level
lists of classes (``all_RandomProjection``).  The assertions are scikit-learn's,
untouched.

The suites are split over several test files (``tests/test_sklearn_suites*.py``) so that
pytest-xdist's ``--dist loadfile`` runs them on several workers; each file declares its
tables and calls :func:`suite_tests`:

- ``SUITES``: suite key -> :class:`Suite` (the installed module, and what is swapped).
  A name ``"attr.Name"`` is reached through a module the test module imports
  (``manifold.Isomap`` in ``test_isomap.py``): the attribute of that module is patched.
- ``EXCLUDED``: (suite key, "test_name", "test_name[param-id]" or a "prefix*") -> why
  the case cannot be a fair comparison or which feature latentlab lacks; reported as
  skipped.
- ``KEPT_PARAMS``: (suite key, test name) -> (the param ids that run, what the other ids
  only vary); the other ids are skipped as "repeat of" the kept ones.
- ``REPEATS``: whole functions whose behaviour another case already asserts.
- ``ADAPTED``: (suite key, test name) -> :class:`Adapt` (or a tuple of them): for that
  test only, one module global -- an assertion helper, or a swapped class -- is
  replaced by a documented wrapper of it (a comparison relaxed with the measured gap,
  a private attribute mapped to the public one); the rest runs untouched.

Only cases that exercise an object under test are generated: for a grid over estimator
classes only the cases with one of ours, otherwise the functions that name one of them,
directly, through a module-level helper function they call (``test_pca_dtype_preservation``
reaches PCA only inside ``check_pca_float_dtype_preservation``) or through a module-level
list of classes.

Fixtures: scikit-learn's conftest fixtures get their scikit-learn defaults
(``global_random_seed`` = 42, ``global_dtype`` = float64: scikit-learn runs more seeds
and float32 only when asked to through environment variables); pytest's own fixtures
(``monkeypatch``, ``capsys``, ...) are requested from pytest.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
from sklearn.base import BaseEstimator

__all__ = [
    "ARRAY_API",
    "PRIVATE",
    "SLOW",
    "Case",
    "Adapt",
    "Suite",
    "suite_tests",
]

# scikit-learn's conftest fixtures, at scikit-learn's defaults.
FIXTURES = {"global_random_seed": 42, "global_dtype": np.float64}

# Why a case is not run, by category.
ARRAY_API = "array API namespaces (torch, cupy, array-api-strict): latentlab computes in JAX"
PRIVATE = "reads or patches scikit-learn private internals of the class"
SLOW = "kept out to hold this file near a minute: {} (cold XLA compiles)"


class Suite(NamedTuple):
    """One installed test module and the objects swapped in it: global name (or
    ``"module_attr.Name"``) -> latentlab's object."""

    module: str
    swaps: dict[str, Any]


class Adapt(NamedTuple):
    """For one test, the module's global ``name`` (after the swaps: latentlab's class
    for a swapped name) is replaced by ``replacement(original)``; ``why`` says what
    the wrapper changes and why that keeps the comparison fair."""

    name: str
    replacement: Callable[[Any], Any]
    why: str


class Case(NamedTuple):
    suite: str
    name: str
    kwargs: dict[str, Any]


def _target(module, spec):
    """(object that holds the attribute, attribute name) of a swap spec."""
    *path, attr = spec.split(".")
    holder = module
    for part in path:
        holder = getattr(holder, part)
    return holder, attr


def _originals(module, suite):
    """scikit-learn's object -> latentlab's, for every swap of the suite."""
    return {id(getattr(*_target(module, spec))): ours for spec, ours in suite.swaps.items()}


def _swapped_containers(module, originals):
    """Module-level lists/tuples holding a swapped object: name -> substituted copy."""
    out = {}
    for name, value in vars(module).items():
        if isinstance(value, (list, tuple)) and any(id(v) in originals for v in value):
            out[name] = type(value)(originals.get(id(v), v) for v in value)
    return out


def _value_id(value, argname, index):
    # pytest's own rule for ids of values it cannot print.
    if value is None or isinstance(value, (str, int, float, bool, complex)):
        return str(value)
    if inspect.isclass(value) or inspect.isfunction(value):
        return value.__name__
    return f"{argname}{index}"


def _grid(mark):
    """The cases of one parametrize mark: list of (kwargs, id, marks)."""
    argnames = mark.args[0]
    if isinstance(argnames, str):
        argnames = [a.strip() for a in argnames.split(",") if a.strip()]
    values = list(mark.args[1])
    ids = mark.kwargs.get("ids")
    cases = []
    for index, value in enumerate(values):
        marks, explicit_id = (), None
        if isinstance(value, type(pytest.param(None))):
            explicit_id, param_marks, value = value.id, value.marks, value.values
            marks = tuple(m for m in param_marks if m.name in MARKS)
        elif len(argnames) == 1:
            value = (value,)
        if explicit_id is None and ids is not None:
            if callable(ids):
                explicit_id = ids(value[0]) if len(argnames) == 1 else None
            else:
                explicit_id = ids[index]
        if explicit_id is None:
            explicit_id = "-".join(
                _value_id(v, a, index) for a, v in zip(argnames, value, strict=True)
            )
        cases.append((dict(zip(argnames, value, strict=True)), str(explicit_id), tuple(marks)))
    return cases


# scikit-learn's marks that mean something here (its own, such as no_check_spmatrix,
# are for its conftest)
MARKS = ("skip", "skipif", "xfail", "filterwarnings")


def _expand(func):
    """All parametrized cases of one test function: (kwargs, id, marks)."""
    marks = getattr(func, "pytestmark", [])
    grids = [_grid(m) for m in marks if m.name == "parametrize"]
    other = tuple(m for m in marks if m.name in MARKS)
    if not grids:
        return [({}, "", other)]
    out = []
    for combo in itertools.product(*grids):
        kwargs = {k: v for kw, _, _ in combo for k, v in kw.items()}
        marks = other + tuple(m for _, _, ms in combo for m in ms)
        out.append((kwargs, "-".join(i for _, i, _ in combo), marks))
    return out


def _code_names(code):
    """Names a code object reads (globals and attributes), nested code included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _code_names(const)
    return names


def _names(module, func, seen=None):
    """Names ``func`` reads, followed into the module-level helper functions it calls
    (defined in the test module itself, not imported)."""
    seen = set() if seen is None else seen
    seen.add(func.__name__)
    names = _code_names(func.__code__)
    for name in list(names):
        helper = vars(module).get(name)
        if name not in seen and inspect.isfunction(helper) and helper.__module__ == module.__name__:
            names |= _names(module, helper, seen)
    return names


def _is_estimator_class(value):
    return inspect.isclass(value) and issubclass(value, BaseEstimator)


class _Tables(NamedTuple):
    suites: dict[str, Suite]
    excluded: dict[tuple[str, str], str]
    kept_params: dict[tuple[str, str], tuple[tuple[str, ...], str]]
    repeats: dict[tuple[str, str], str]
    adapted: dict[tuple[str, str], Adapt | tuple[Adapt, ...]]

    def skip_reason(self, suite, test_id, func_name):
        for (key, pattern), reason in self.excluded.items():
            if key != suite:
                continue
            if pattern in (test_id, func_name) or (
                pattern.endswith("*") and test_id.startswith(pattern[:-1])
            ):
                return reason
        for (key, pattern), reason in self.repeats.items():
            if key == suite and pattern in (test_id, func_name):
                return reason
        kept = self.kept_params.get((suite, func_name))
        if kept is not None and test_id != func_name:
            ids, varies = kept
            if test_id[len(func_name) + 1 : -1] not in ids:
                return f"repeat of {func_name}[{' | '.join(ids)}]: only varies {varies}"
        return None

    def cases(self):
        params = []
        for key, suite in self.suites.items():
            module = importlib.import_module(suite.module)
            originals = _originals(module, suite)
            # the names under which a test reaches an object under test
            reach = {spec.split(".")[-1] for spec in suite.swaps}
            reach |= set(_swapped_containers(module, originals))
            for func_name, func in vars(module).items():
                if not func_name.startswith("test_") or not inspect.isfunction(func):
                    continue
                names_ours = bool(reach & _names(module, func))
                for kwargs, param_id, marks in _expand(func):
                    classes = [v for v in kwargs.values() if _is_estimator_class(v)]
                    if classes:
                        if not any(id(c) in originals for c in classes):
                            continue  # a case for another estimator (MiniBatchKMeans, ...)
                    elif not names_ours:
                        continue  # a test of a private helper: no object under test
                    kwargs = {k: originals.get(id(v), v) for k, v in kwargs.items()}
                    test_id = f"{func_name}[{param_id}]" if param_id else func_name
                    reason = self.skip_reason(key, test_id, func_name)
                    if reason:
                        marks = marks + (pytest.mark.skip(reason=reason),)
                    params.append(
                        pytest.param(
                            Case(key, func_name, kwargs), id=f"{key}::{test_id}", marks=marks
                        )
                    )
        return params

    def run(self, case, request, monkeypatch):
        suite = self.suites[case.suite]
        module = importlib.import_module(suite.module)
        originals = _originals(module, suite)
        for name, value in _swapped_containers(module, originals).items():
            monkeypatch.setattr(module, name, value)
        for spec, ours in suite.swaps.items():
            monkeypatch.setattr(*_target(module, spec), ours)
        adapts = self.adapted.get((case.suite, case.name), ())
        for adapt in (adapts,) if isinstance(adapts, Adapt) else adapts:
            monkeypatch.setattr(module, adapt.name, adapt.replacement(getattr(module, adapt.name)))
        func = getattr(module, case.name)
        kwargs = dict(case.kwargs)
        for arg, parameter in inspect.signature(func).parameters.items():
            if arg in kwargs or parameter.default is not inspect.Parameter.empty:
                continue  # a grid value, or a default (``seed=0``) pytest leaves alone
            kwargs[arg] = FIXTURES[arg] if arg in FIXTURES else request.getfixturevalue(arg)
        func(**kwargs)


def suite_tests(suites, excluded, kept_params=None, repeats=None, adapted=None):
    """The two test functions of one suite file: every generated case, and a check that
    the tables name cases that exist.  Assign them to module-level ``test_*`` names."""
    tables = _Tables(suites, excluded, kept_params or {}, repeats or {}, adapted or {})

    # generated once: some grids are generators (scikit-learn's array API namespaces)
    params = tables.cases()

    @pytest.mark.parametrize("case", params)
    def test_sklearn_suite(case, request, monkeypatch):
        tables.run(case, request, monkeypatch)

    def test_tables_name_existing_cases():
        # a kept id that no longer exists (scikit-learn renamed a parameter value) would
        # silently skip the whole grid; an exclusion of a vanished test hides nothing
        ids = {p.id for p in params}
        names = {(p.values[0].suite, p.values[0].name) for p in params}
        for (key, name), (kept, _) in tables.kept_params.items():
            for param_id in kept:
                assert f"{key}::{name}[{param_id}]" in ids, (key, name, param_id)
        for key, pattern in [*tables.excluded, *tables.repeats, *tables.adapted]:
            base = pattern.split("[")[0].rstrip("*")
            assert (key, base) in names, (key, pattern)

    return test_sklearn_suite, test_tables_name_existing_cases
