"""The ``latentlab impute`` and ``latentlab compare`` commands, end to end on CSV files.

Calls ``main([...])`` in-process (fast: compiled programs are shared with the other
tests through the same shapes, d = 6, n = 240) and runs the installed script once.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from oracles import hide_at_random, planted_low_rank

from latentlab import Imputer
from latentlab.cli import main, parse_ks

N, D = 240, 6
COLUMNS = list("abcdef")


@pytest.fixture(scope="module")
def frame():
    X, _, _ = planted_low_rank(n=N, d=D, rank=2, noise=0.7, seed=1)
    X_missing, _ = hide_at_random(X, 0.2, seed=2)
    return pd.DataFrame(X_missing, columns=COLUMNS)


@pytest.fixture()
def csv_file(frame, tmp_path):
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    return path


def test_impute_writes_the_inputs_columns_filled(frame, csv_file, tmp_path, capsys):
    out, std = tmp_path / "filled.csv", tmp_path / "std.csv"
    argv = ["impute", str(csv_file), "-o", str(out), "--model", "ppca", "-k", "2"]
    assert main([*argv, "--std", str(std)]) == 0
    filled = pd.read_csv(out)
    assert list(filled.columns) == COLUMNS and filled.shape == frame.shape
    observed = frame.notna().to_numpy()
    np.testing.assert_array_equal(filled.to_numpy()[observed], frame.to_numpy()[observed])
    assert not filled.isna().to_numpy().any()
    # the file holds exactly what the Python API gives with the same seed
    expected = Imputer("ppca", n_components=2, random_state=0).fit_transform(frame)
    np.testing.assert_array_equal(filled.to_numpy(), expected.to_numpy())
    sd = pd.read_csv(std).to_numpy()
    assert list(pd.read_csv(std).columns) == COLUMNS
    assert np.all(sd[observed] == 0) and np.all(sd[~observed] > 0)
    err = capsys.readouterr().err
    assert "missing entries" in err and "imputed with ppca (K=2)" in err


def test_impute_writes_calibrated_intervals(frame, csv_file, tmp_path, capsys):
    lower, upper = tmp_path / "lower.csv", tmp_path / "upper.csv"
    argv = ["impute", str(csv_file), "-o", str(tmp_path / "f.csv"), "--model", "ppca", "-k", "2"]
    assert main([*argv, "--interval", str(lower), str(upper), "--level", "0.8"]) == 0
    imp = Imputer("ppca", n_components=2, random_state=0).fit(frame)
    expected = imp.impute_interval(frame, level=0.8, calibrate=True)
    for path, bound in zip((lower, upper), expected, strict=True):
        written = pd.read_csv(path)
        assert list(written.columns) == COLUMNS
        np.testing.assert_allclose(written.to_numpy(), bound.to_numpy(), rtol=1e-12)
    assert f"(nominal {imp.calibrated_level(0.8):.1%})" in capsys.readouterr().err
    assert main([*argv, "--interval", str(lower), str(upper), "--plug-in"]) == 0
    plug_in = imp.impute_interval(frame, level=0.9)[0].to_numpy()
    np.testing.assert_allclose(pd.read_csv(lower).to_numpy(), plug_in, rtol=1e-12)
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--interval", str(lower), str(upper), "--level", "90"])
    assert exit_info.value.code == 2
    assert "level must be a number between 0 and 1" in capsys.readouterr().err


def test_semicolons_are_detected_and_non_numeric_columns_explained(frame, tmp_path, capsys):
    path = tmp_path / "semi.csv"
    frame.assign(name=[f"id{i}" for i in range(N)]).to_csv(path, index=False, sep=";")
    out = tmp_path / "out.csv"
    args = ["impute", str(path), "-o", str(out), "--model", "ppca", "-k", "2", "-q"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "non-numeric column(s) ['name']" in err and "--exclude 'name'" in err
    assert "Traceback" not in err
    assert main([*args, "--exclude", "name"]) == 0
    written = pd.read_csv(out, sep=";")
    assert list(written.columns) == [*COLUMNS, "name"]
    assert (written["name"] == [f"id{i}" for i in range(N)]).all()
    assert not written.isna().to_numpy().any()
    # told the wrong delimiter: the message says which one the header uses
    assert main([*args, "--exclude", "name", "--delimiter", ","]) == 1
    assert "try --delimiter ';'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        ("", "is empty"),
        ("a,b,c\n1,2,3\n4,5,6,7,8\n", "could not parse"),
        ("a,b\n1,\n,\n", "no observed entry"),
    ],
    ids=["missing-file", "empty", "ragged", "empty-column"],
)
def test_input_errors_exit_1_with_a_message(tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    if content is not None:
        path.write_text(content)
    assert main(["impute", str(path), "-o", str(tmp_path / "out.csv")]) == 1
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("latentlab impute: error:") and message in last
    assert "Traceback" not in captured.err and not (tmp_path / "out.csv").exists()


def test_help_explains_every_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["impute", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in (
        "--model",
        "-k K",
        "--std",
        "--interval",
        "--level",
        "--delimiter",
        "--exclude",
        "exit status",
    ):
        assert option in text
    with pytest.raises(SystemExit) as exit_info:
        main(["impute", "data.csv"])  # -o is required: a usage error
    assert exit_info.value.code == 2


def test_installed_script_runs():
    script = Path(sys.executable).with_name("latentlab")
    result = subprocess.run(
        [str(script), "compare", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "--models" in result.stdout and "held-out" in result.stdout


def test_compare_prints_a_table(csv_file, tmp_path, capsys):
    table_file = tmp_path / "table.csv"
    argv = ["compare", str(csv_file), "--models", "ppca", "fa", "-k", "2"]
    assert main([*argv, "-q", "-o", str(table_file)]) == 0
    text = capsys.readouterr().out
    assert "PPCA(K=2)" in text and "FactorAnalysis(K=2)" in text
    table = pd.read_csv(table_file)
    assert {"loglik", "AIC", "BIC", "heldout_loglik", "heldout_se"} <= set(table.columns)
    assert table["best"].sum() == 1 and table["heldout_loglik"].is_monotonic_decreasing


def test_parse_ks():
    assert parse_ks("1:4") == [1, 2, 3, 4]
    assert parse_ks("2,5") == [2, 5]
    assert parse_ks("3") == [3]
    for bad in ("0:3", "a", "2:"):
        with pytest.raises(Exception, match="K"):
            parse_ks(bad)
