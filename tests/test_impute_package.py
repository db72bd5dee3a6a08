"""The ``latentlab.impute`` package: its public helpers and the CLI's use of them.

No test here fits a model: every estimator refusal below happens before compiling.
"""

import ast
import tomllib
from pathlib import Path

import numpy as np
import pytest

import latentlab
import latentlab.impute as impute

ROOT = Path(__file__).resolve().parents[1]


def test_old_names_still_import_from_the_package():
    from latentlab.impute import (  # noqa: F401
        FAMILIES,
        MODELS,
        SEARCH_TOL,
        Imputer,
        PooledEstimate,
        default_candidates,
        gmm_supports_missing,
        mixture_interval,
        rubin_pool,
    )

    assert latentlab.Imputer is Imputer and latentlab.rubin_pool is rubin_pool
    assert MODELS == ("auto", "ppca", "fa", "bpca", "gmm")
    assert set(impute.__all__) <= set(dir(impute))


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("ppca", "PPCA"),
        ("FA", "FactorAnalysis"),
        ("FactorAnalysis", "FactorAnalysis"),
        ("bpca", "BayesianPCA"),
        ("gaussianmixture", "GaussianMixture"),
    ],
)
def test_family_class_accepts_keys_and_class_names(name, cls):
    assert impute.family_class(name) is getattr(latentlab, cls)


@pytest.mark.parametrize("name", ["auto", "pca", "", 3])
def test_family_class_names_an_unknown_family(name):
    with pytest.raises(ValueError, match="Unknown model family"):
        impute.family_class(name)


@pytest.mark.parametrize(("n", "d"), [(500, 13), (5, 13), (13, 13), (2, 4)])
def test_max_components_matches_each_estimators_limit(n, d):
    # the closed forms: PPCA/BPCA keep one direction for the noise, FA up to the
    # Ledermann bound, a mixture at most one component per row
    from latentlab.models.factor_analysis import ledermann_bound

    expected = {"ppca": min(n, d) - 1, "bpca": min(n, d) - 1, "fa": ledermann_bound(d), "gmm": n}
    got = {family: impute.max_components(family, n, d) for family in impute.FAMILIES}
    assert got == expected


@pytest.mark.parametrize("family", ["ppca", "fa", "bpca", "gmm"])
def test_estimators_refuse_one_more_component_than_max_components(family):
    X = np.random.default_rng(0).normal(size=(6, 4))
    high = impute.max_components(family, *X.shape)
    est = impute.family_class(family)(n_components=high + 1)
    with pytest.raises(ValueError, match="n_components"):
        est.fit(X)  # refused by the settings check, before anything compiles


def test_max_components_asks_the_estimator(monkeypatch):
    # no copy of the limits in latentlab.impute: a changed estimator is followed
    monkeypatch.setattr(latentlab.FactorAnalysis, "_max_components", lambda self, n, d: (2, "2"))
    assert impute.max_components("fa", 500, 13) == 2
    assert impute.default_candidates("fa", 500, 13) == [("fa", 1), ("fa", 2)]


def test_progress_passes_items_through_silently(capsys):
    assert list(impute.progress(range(4), "x", 0)) == [0, 1, 2, 3]
    assert capsys.readouterr().err == ""


def test_cli_imports_only_public_names():
    tree = ast.parse((ROOT / "latentlab" / "cli.py").read_text())
    imported = [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("latentlab.impute")
        for alias in node.names
    ]
    assert imported, "the CLI builds its models through latentlab.impute"
    assert [n for _, n in imported if n.startswith("_") or n not in impute.__all__] == []


def test_every_subpackage_is_packaged():
    # setuptools' explicit package list: a subpackage missing from it is missing
    # from the wheel while the editable install hides that
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "latentlab").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - listed == set()
