"""Every array handed to a user is a writable NumPy array that owns its data:
``np.asarray`` of a JAX array is a read-only view of the device buffer, and a slice of a
padded result or of a larger solution is a view, so ``Z /= 2`` would fail or write
through.  The check runs over every estimator latentlab exports."""

import numpy as np
import pytest
from estimator_recipes import DEFAULT_CALLS, RECIPES, X_MISSING, X, Y

import latentlab

OUTPUTS = ("transform", "fit_transform", "score_samples", "predict", "predict_proba", "impute")


def _arrays(value):
    return list(value) if isinstance(value, tuple) else [value]


def _owned_problems(name, what, value):
    return [
        f"{name}.{what}"
        for a in _arrays(value)
        if isinstance(a, np.ndarray)
        and a.dtype != object
        and not (a.flags.writeable and a.flags.owndata)
    ]


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_output_is_a_writable_array_that_owns_its_data(name):
    settings, fit_args, calls = RECIPES[name]
    est = getattr(latentlab, name)(**settings).fit(*fit_args)
    problems = []
    for method in OUTPUTS:
        if not hasattr(est, method):
            continue
        if method == "impute":
            args = (X_MISSING,)
        elif method == "fit_transform":
            args = fit_args
        else:
            args = calls.get(method) or DEFAULT_CALLS[method]
        value = getattr(est, method)(*args)
        problems += _owned_problems(name, method, value)
        if method == "transform" and hasattr(est, "inverse_transform"):
            Z = _arrays(value)[0]
            try:
                back = est.inverse_transform(Z)
            except (ValueError, NotImplementedError):
                continue  # e.g. no pre-image fitted
            problems += _owned_problems(name, "inverse_transform", back)
    for attr, value in vars(est).items():
        if attr.endswith("_") and not attr.startswith("_"):
            if isinstance(value, dict):
                for key, leaf in value.items():
                    problems += _owned_problems(name, f"{attr}[{key!r}]", leaf)
            else:
                problems += _owned_problems(name, attr, value)
    assert not problems, f"read-only or non-owning outputs: {problems}"


def test_kernel_estimators_do_not_follow_the_callers_training_array():
    # a past bug: X_fit_ was the caller's array, so changing it changed transform
    for make, fit_args in (
        (lambda: latentlab.KernelPCA(2, kernel="rbf", gamma=0.3), (X.copy(),)),
        (lambda: latentlab.KernelCCA(2, reg=0.1), (X.copy(), Y.copy())),
    ):
        est = make().fit(*fit_args)
        queries = tuple(a[:5].copy() for a in fit_args)
        before = _arrays(est.transform(*queries))[0]
        for a in fit_args:
            a[:] = 0.0
        np.testing.assert_array_equal(_arrays(est.transform(*queries))[0], before)
