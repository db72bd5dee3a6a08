"""The demo, the examples and the packaging work as a user meets them."""

import io
import runpy
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from sklearn.model_selection import KFold, cross_val_score

from latentlab import PPCA
from latentlab.cli import _load, main, run_demo

ROOT = Path(__file__).resolve().parents[1]


def test_demo_fits_compares_and_imputes():
    out = io.StringIO()
    table, report = run_demo("wine", max_components=3, folds=3, out=out)
    text = out.getvalue()
    assert list(table.index) == [1, 2, 3]
    assert {"loglik", "BIC", "heldout_loglik"} <= set(table.columns)
    assert table["loglik"].is_monotonic_increasing  # nested models fit better
    assert "Model comparison" in text and "RMSE" in text
    assert report["rmse_ppca"] < report["rmse_mean"]
    # oracle: scikit-learn's cross_val_score of PPCA on the same shuffled folds
    X = _load("wine")
    cv = KFold(3, shuffle=True, random_state=0)
    for K in (1, 3):
        held_out = cross_val_score(PPCA(K, random_state=0), X, cv=cv)
        assert table.loc[K, "heldout_loglik"] == pytest.approx(held_out.mean(), rel=1e-9)


def test_cli_help_and_argument_errors(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--help"])
    assert exit_info.value.code == 0
    assert "--max-components" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--missing", "1.5"])
    assert exit_info.value.code == 2


@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_example_runs(script, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(script), "--small"])
    runpy.run_path(str(script), run_name="__main__")


def test_models_ship_only_as_latentlab_models(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("latentlab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "latentlab/models/ppca.py" in names
    assert "latentlab/models/gaussian_latent.py" in names
    assert not [n for n in names if n.startswith("models/")]


def test_bare_models_is_not_importable_outside_the_repo(tmp_path):
    probe = (
        "import importlib.util, latentlab.models.ppca;"
        "assert importlib.util.find_spec('models') is None, 'bare models importable'"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=tmp_path)
