"""The layers' dependency direction (DESIGN.md §2): the models, the inference engine
and the closed forms are written in JAX and NumPy alone; scikit-learn (and with it
pandas) belongs to the estimator layer that mirrors its API."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("models", "latentlab/inference", "latentlab/closed_form")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_no_scikit_learn(layer):
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name for name in imported_modules(path) if name.split(".")[0] == "sklearn"
        )
        for path in sorted((ROOT / layer).rglob("*.py"))
    }
    assert not {path: names for path, names in offenders.items() if names}


def test_the_check_reads_imports_inside_functions(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from sklearn.utils import check_random_state\n")
    assert imported_modules(source) == {"sklearn.utils"}


def latentlab_bases(cls) -> list[str]:
    """The latentlab classes in ``cls``'s method resolution order, itself included."""
    return [
        c.__name__ for c in cls.__mro__ if c.__module__.split(".")[0] in ("latentlab", "models")
    ]


def test_every_estimator_has_at_most_one_family_base():
    # the estimator, at most one family base, LatentEstimator: shared behaviour is
    # written as functions, not stacked as mixins
    import inspect

    import latentlab
    from latentlab.estimators.base import LatentEstimator

    estimators = [
        obj
        for name in latentlab.__all__
        if inspect.isclass(obj := getattr(latentlab, name)) and issubclass(obj, LatentEstimator)
    ]
    assert len(estimators) >= 25
    deep = {
        cls.__name__: latentlab_bases(cls) for cls in estimators if len(latentlab_bases(cls)) > 3
    }
    assert not deep
