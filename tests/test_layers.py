"""The layers' dependency direction (DESIGN.md §2): the models, the inference engine
and the closed forms are written in JAX and NumPy alone; scikit-learn (and with it
pandas) belongs to the estimator layer that mirrors its API."""

import ast
import sys
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


# The layers of latentlab/: a package (models, inference, closed_form, estimators,
# impute, plots, psychometrics) or a top-level module (compare, io, cli, posterior);
# latentlab/_*.py are shared utilities every layer may use.
def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "latentlab" or len(parts) < 2:
        return None
    return "shared" if parts[1].startswith("_") else parts[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("latentlab", *parts) if parts[0] == "models" else parts)


def private_imports_across_layers(path: Path) -> list[str]:
    """``module name`` for each import in ``path`` of a private module, or of a
    private name, of another layer."""
    mine = layer(module_name(path))
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in targets:
            other = layer(module)
            if other in (None, mine, "shared"):
                continue
            # "from latentlab.models import _gmm_covariances" names a private module too
            private = any(p.startswith("_") for p in module.split(".")[2:])
            private |= name is not None and name.startswith("_") and not name.startswith("__")
            if private:
                found.append(f"{module} {name or ''}".strip())
    return found


def test_no_layer_imports_another_layers_private_names():
    files = sorted([*(ROOT / "latentlab").rglob("*.py"), *(ROOT / "models").rglob("*.py")])
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in files
        if (found := private_imports_across_layers(path))
    }
    assert not offenders


def test_the_private_import_check_can_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "latentlab" / "estimators").mkdir(parents=True)
    source = tmp_path / "latentlab" / "estimators" / "m.py"
    source.write_text(
        "from latentlab.models._gmm_covariances import covariances\n"
        "from latentlab.models.gmm import _private\n"
        "from latentlab.estimators.base import _validating\n"  # its own layer: fine
        "from latentlab._shapes import bucket\n"  # a shared utility: fine
    )
    assert private_imports_across_layers(source) == [
        "latentlab.models._gmm_covariances covariances",
        "latentlab.models.gmm _private",
    ]
