"""The ``latentlab impute`` and ``latentlab compare`` commands, end to end on CSV files.

Calls ``main([...])`` in-process (fast: compiled programs are shared with the other
tests through the same shapes, d = 6, n = 240) and runs the installed script once.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from oracles import hide_at_random, planted_low_rank

from latentlab import Imputer
from latentlab._cli_parser import parse_args
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
        ("a,b,c\n", "has a header row but no data rows"),
        ("a;b\n1,5;2\n-0,25;3,75\n", "decimal comma (e.g. '1,5'): pass --decimal ','"),
    ],
    ids=["missing-file", "empty", "ragged", "empty-column", "header-only", "decimal-comma"],
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


def test_options_before_the_file_name_give_the_same_output(frame, tmp_path):
    # measured: `impute --exclude id name data.csv` failed with "the following
    # arguments are required: data": --exclude took the file name as a third column
    path = tmp_path / "named.csv"
    frame.assign(id=range(N), name="n").to_csv(path, index=False)
    out = [tmp_path / f"out{i}.csv" for i in range(3)]
    exclude, model = ["--exclude", "id", "name"], ["--model", "ppca", "-k", "2", "-q"]
    assert main(["impute", str(path), *exclude, "-o", str(out[0]), *model]) == 0
    assert main(["impute", *exclude, str(path), "-o", str(out[1]), *model]) == 0
    assert main(["impute", *model, "-o", str(out[2]), *exclude, str(path)]) == 0
    assert out[0].read_bytes() == out[1].read_bytes() == out[2].read_bytes()
    assert pd.read_csv(out[1])["name"].eq("n").all()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["impute", "--exclude", "id", "name", "data.csv", "-o", "o.csv"], {}),
        (["impute", "-o", "o.csv", "--exclude", "id", "name", "data.csv"], {}),
        (["impute", "data.csv", "-o", "o.csv", "--exclude", "id", "name"], {}),
        (
            # two options could have taken it: the one whose last word is a file did
            ["impute", "--na-values", "NA", "data.csv", "-o", "o.csv", "--exclude", "id", "name"],
            {"na_values": ["NA"]},
        ),
        (["impute", "--interval", "lo.csv", "up.csv", "data.csv", "-o", "o.csv"], {"exclude": []}),
        (
            ["compare", "--models", "ppca", "fa", "data.csv"],
            {"exclude": [], "models": ["ppca", "fa"]},
        ),
        (
            ["compare", "--na-values", "-", "data.csv", "--models", "fa"],
            {"exclude": [], "models": ["fa"]},
        ),
    ],
    ids=["before", "last", "first", "two-lists", "interval", "models", "models-after"],
)
def test_file_name_is_found_before_or_after_options_of_several_words(
    argv, expected, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    Path("data.csv").write_text("a,b\n1,2\n")
    args = parse_args(argv)
    assert args.data == "data.csv"
    for option, words in {"exclude": ["id", "name"], **expected}.items():
        assert getattr(args, option) == words


@pytest.mark.parametrize(
    "argv, message",
    [
        (["impute", "-o", "o.csv"], "required: data"),
        (["impute", "--na-values", "NA", "x", "--exclude", "a", "b", "-o", "o"], "required: data"),
        (["compare", "--models", "ppca", "pca", "data.csv"], "invalid choice: 'pca'"),
        (["compare", "data.csv", "--models", "ppca", "pca"], "invalid choice: 'pca'"),
        (["compare", "data.csv", "--folds", "1"], "--folds must be >= 2"),
    ],
    ids=["no-file", "ambiguous", "bad-model", "bad-model-last", "folds"],
)
def test_malformed_command_lines_exit_2_naming_the_problem(argv, message, tmp_path, capsys):
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / w) if w == "data.csv" else w for w in argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: latentlab " + argv[0]) and message in err.splitlines()[-1]


# -- output paths, precision, pipes, headers -------------------------------------------


@pytest.mark.parametrize(
    "outputs, message",
    [
        (["-o", "filled.csv", "--std", "data.csv"], "--std 'data.csv' is the input file"),
        (["-o", "f.csv", "--std", "./f.csv"], "-o and --std both name the file 'f.csv'"),
        (["--interval", "lo.csv", "f.csv", "-o", "f.csv"], "both name the file"),
        (["-o", "f.csv", "--interval", "lo.csv", "lo.csv"], "both name the file 'lo.csv'"),
        (["-o", "f.csv", "--std", "sub/../link.csv"], "is the input file"),
        (["-o", "-", "--std", "-"], "both name standard output"),
    ],
    ids=["std-is-input", "dot-slash", "interval-is-output", "lower-is-upper", "link", "stdout"],
)
def test_colliding_output_paths_are_refused_before_reading(
    outputs, message, csv_file, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.csv").symlink_to(csv_file)
    before = csv_file.read_bytes()
    assert main(["impute", "data.csv", *outputs]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert csv_file.read_bytes() == before  # the data are intact ...
    assert not (tmp_path / "f.csv").exists() and not (tmp_path / "filled.csv").exists()
    # ... and compare's table may not replace its input either
    assert main(["compare", "data.csv", "-o", "./data.csv"]) == 1
    assert "-o './data.csv' is the input file" in capsys.readouterr().err
    assert csv_file.read_bytes() == before


def test_in_place_output_is_atomic_and_keeps_permissions(frame, csv_file, tmp_path, monkeypatch):
    argv = ["impute", str(csv_file), "-o", str(csv_file), "--model", "ppca", "-k", "2", "-q"]
    csv_file.chmod(0o640)
    before = csv_file.read_bytes()
    # a write that fails half-way (disk full) leaves the old file and no temporary one
    real_to_csv = pd.DataFrame.to_csv

    def disk_full(self, handle, **kwargs):
        handle.write("a,b\n1,")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", disk_full)
    assert main(argv) == 1
    assert csv_file.read_bytes() == before and sorted(tmp_path.iterdir()) == [csv_file]
    monkeypatch.setattr(pd.DataFrame, "to_csv", real_to_csv)
    assert main(argv) == 0  # -o may name the input: it is read before anything is written
    filled = pd.read_csv(csv_file)
    expected = Imputer("ppca", n_components=2, random_state=0).fit_transform(frame)
    np.testing.assert_array_equal(filled.to_numpy(), expected.to_numpy())
    assert sorted(tmp_path.iterdir()) == [csv_file] and (csv_file.stat().st_mode & 0o777) == 0o640


def test_imputed_cells_round_trip_and_observed_cells_are_copied_as_written(frame, tmp_path):
    # measured: with cells like 4.1296 and 12.5 in a column, imputed cells
    # were rounded to its longest cell's decimals and padded with zeros (4.129600)
    path, out = tmp_path / "mixed.csv", tmp_path / "out.csv"
    formats = dict(a="{:.4f}", b="{:.4f}", c="{:.1f}", d="{:.1f}", e="{:.2f}", f="{:g}")
    text_in = pd.DataFrame({c: frame[c].map(formats[c].format) for c in COLUMNS})
    text_in = text_in.mask(frame.isna(), "")
    text_in.loc[0, ["a", "c", "e"]] = ["4.1296", "12.5", "12.50"]
    text_in.to_csv(path, index=False)
    argv = ["impute", str(path), "--model", "ppca", "-k", "2", "-q", "-o", str(out)]
    assert main(argv) == 0
    text_out = pd.read_csv(out, dtype=str).to_numpy()
    observed = pd.read_csv(path).notna().to_numpy()
    np.testing.assert_array_equal(text_out[observed], text_in.to_numpy()[observed])
    assert list(text_out[0, [0, 2, 4]]) == ["4.1296", "12.5", "12.50"]
    # imputed: the shortest text that reads back as exactly the imputer's float
    expected = Imputer("ppca", n_components=2, random_state=0).fit_transform(pd.read_csv(path))
    imputed = text_out[~observed]
    assert all(cell == repr(float(cell)) for cell in imputed)  # no padding zeros
    np.testing.assert_array_equal(imputed.astype(float), expected.to_numpy()[~observed])
    assert max(len(cell.partition(".")[2]) for cell in imputed) > 4  # not cut to 4 places
    # --full-precision, once needed for this, is still accepted and changes nothing
    before = out.read_bytes()
    assert main([*argv, "--full-precision"]) == 0
    assert out.read_bytes() == before


def test_std_and_interval_files_carry_the_excluded_columns(frame, tmp_path):
    # measured: the id and text columns were empty in --std/--interval files
    path = tmp_path / "ids.csv"
    ids = frame.assign(id=[f"r{i:03d}" for i in range(N)], name=["x y"] * (N - 1) + [None])
    ids.to_csv(path, index=False)
    files = {name: tmp_path / f"{name}.csv" for name in ("out", "std", "lower", "upper")}
    argv = ["impute", str(path), "-o", str(files["out"]), "--model", "ppca", "-k", "2", "-q"]
    argv += ["--exclude", "id", "name", "--std", str(files["std"]), "--plug-in"]
    assert main([*argv, "--interval", str(files["lower"]), str(files["upper"])]) == 0
    imp = Imputer("ppca", n_components=2, random_state=0).fit(frame)
    _, std = imp.transform(frame, return_std=True)
    lower, upper = imp.impute_interval(frame, level=0.9)
    text_in = pd.read_csv(path, dtype=str)
    observed = frame.notna().to_numpy()
    for name, values in dict(std=std, lower=lower, upper=upper).items():
        text = pd.read_csv(files[name], dtype=str)
        assert list(text.columns) == [*COLUMNS, "id", "name"]
        pd.testing.assert_frame_equal(text[["id", "name"]], text_in[["id", "name"]])
        # computed cells in full: they read back as exactly the library's floats
        np.testing.assert_array_equal(text[COLUMNS].to_numpy(dtype=float), values.to_numpy())
        if name != "std":  # bounds are the observed cells themselves, as written
            np.testing.assert_array_equal(
                text[COLUMNS].to_numpy()[observed], text_in[COLUMNS].to_numpy()[observed]
            )


def test_decimal_commas_and_duplicate_headers_round_trip(frame, tmp_path):
    # a European CSV: ';' between fields, ',' as decimal mark, a repeated column name
    path, out = tmp_path / "eu.csv", tmp_path / "out.csv"
    header = ["a", "b", "a", "d", "e", "f"]
    frame.set_axis(header, axis=1).to_csv(path, index=False, sep=";", decimal=",")
    argv = ["impute", str(path), "-o", str(out), "--model", "ppca", "-k", "2", "-q"]
    assert main([*argv, "--decimal", ","]) == 0
    assert out.read_text().splitlines()[0] == "a;b;a;d;e;f"  # not a.1
    written = pd.read_csv(out, sep=";", decimal=",")
    expected = Imputer("ppca", n_components=2, random_state=0).fit_transform(frame)
    np.testing.assert_array_equal(written.to_numpy(), expected.to_numpy())


def test_huge_values_are_imputed_not_written_as_empty_cells(frame, tmp_path):
    # |x| ~ 1e200 (squares overflow): the imputer rescales, so the file holds 1e200 x
    # the imputations of the data as given, not empty cells
    path, out = tmp_path / "big.csv", tmp_path / "out.csv"
    (frame * 1e200).to_csv(path, index=False)
    assert main(["impute", str(path), "-o", str(out), "--model", "ppca", "-k", "2", "-q"]) == 0
    written = pd.read_csv(out).to_numpy()
    expected = Imputer("ppca", n_components=2, random_state=0).fit_transform(frame).to_numpy()
    assert np.all(np.isfinite(written))
    np.testing.assert_allclose(written, expected * 1e200, rtol=1e-8)


def test_non_finite_imputations_exit_1_and_write_nothing(csv_file, tmp_path, monkeypatch, capsys):
    import latentlab

    def broken(self, X, return_std=False):
        return np.full_like(X, np.nan), np.full_like(X, np.nan)

    monkeypatch.setattr(latentlab.PPCA, "impute", broken)
    out = tmp_path / "out.csv"
    assert main(["impute", str(csv_file), "-o", str(out), "--model", "ppca", "-k", "2"]) == 1
    assert "non-finite imputations" in capsys.readouterr().err and not out.exists()


def test_model_choice_table_lists_every_candidate(csv_file, tmp_path, monkeypatch, capsys):
    # ten candidates (PPCA's seven ranks, FA twice, one mixture): the mixture, ranked
    # last, was cut off by a head(8)
    import latentlab.impute

    table = pd.DataFrame(
        {
            "model": ["ppca"] * 7 + ["fa", "fa", "gmm"],
            "n_components": [1, 2, 3, 5, 8, 12, 18, 2, 1, 2],
            "heldout_loglik": -np.arange(10.0),
            "note": "",
        }
    )

    class Shown(Imputer):
        def fit(self, X, y=None):
            super().fit(X)
            self.selection_ = table
            return self

    monkeypatch.setattr(latentlab.impute, "Imputer", Shown)
    argv = ["impute", str(csv_file), "-o", str(tmp_path / "o.csv"), "--model", "ppca", "-k", "2"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "gmm" in err and err.count("ppca") >= 7


def test_output_piped_into_head_ends_quietly(tmp_path):
    # more output than a pipe buffer holds, so the writer meets the closed pipe
    X, _, _ = planted_low_rank(n=3000, d=D, rank=2, noise=0.7, seed=1)
    pd.DataFrame(hide_at_random(X, 0.2, seed=2)[0], columns=COLUMNS).to_csv(
        tmp_path / "big.csv", index=False
    )
    script = Path(sys.executable).with_name("latentlab")
    command = f"'{script}' impute big.csv -o - --model ppca -k 2 -q 2> err.txt | head -1"
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "LATENTLAB_CACHE_DIR": ""},
        check=False,
    )
    err = (tmp_path / "err.txt").read_text()
    assert result.stdout == "a,b,c,d,e,f\n"
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception" not in err
    assert result.returncode == 141  # 128 + SIGPIPE, as documented in --help


# -- special outputs, interrupts, unwritable standard output ----------------------------

SCRIPT = Path(sys.executable).with_name("latentlab")
PPCA_2 = ["--model", "ppca", "-k", "2", "-q"]


def _expected_csv(csv_file, tmp_path) -> bytes:
    reference = tmp_path / "reference.csv"
    assert main(["impute", str(csv_file), "-o", str(reference), *PPCA_2]) == 0
    return reference.read_bytes()


def test_output_to_a_fifo_is_written_into_not_replaced(csv_file, tmp_path):
    # measured on main: the FIFO was replaced by a regular file; its reader blocked forever
    import stat
    import threading

    expected = _expected_csv(csv_file, tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert main(["impute", str(csv_file), "-o", str(fifo), *PPCA_2]) == 0
    reader.join(timeout=60)
    assert received == [expected]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_output_to_dev_null_leaves_the_device(csv_file):
    # as root, the rename of the old writer replaced /dev/null with a CSV file
    import stat

    assert main(["impute", str(csv_file), "-o", os.devnull, *PPCA_2]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_replaced_output_keeps_its_permissions_but_not_a_setuid_bit(csv_file, tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("old")
    out.chmod(0o4755)
    assert main(["impute", str(csv_file), "-o", str(out), *PPCA_2]) == 0
    assert (out.stat().st_mode & 0o7777) == 0o755
    assert out.read_bytes() == _expected_csv(csv_file, tmp_path)


def test_output_to_dev_stdout_works_when_stdout_is_a_pipe(csv_file, tmp_path):
    # measured on main: "cannot write '/proc/<pid>/fd/pipe:[...]'"
    expected = _expected_csv(csv_file, tmp_path)
    result = subprocess.run(
        [str(SCRIPT), "impute", str(csv_file), "-o", "/dev/stdout", *PPCA_2],
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0 and result.stderr == b""
    assert result.stdout == expected


def _fitting(pid: int) -> bool:
    """Whether process ``pid`` has loaded JAX, which the command line imports for its
    first fit (Linux)."""
    return "jaxlib" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.parametrize(
    "signum, old_output",
    [(2, None), (15, "old contents\n")],  # SIGINT, new output; SIGTERM, over an old one
    ids=["SIGINT", "SIGTERM"],
)
def test_interrupt_exits_128_plus_signal_with_one_line_and_no_output(
    csv_file, tmp_path, signum, old_output
):
    # measured on main: one interrupted imputation in 20 ran on and exited 0; the others
    # printed tracebacks of 28-74 lines
    import signal
    import time

    out = tmp_path / "out.csv"
    if old_output is not None:
        out.write_text(old_output)
    # --model auto: a search of many fits, tens of seconds of work to interrupt
    command = [str(SCRIPT), "impute", str(csv_file), "-o", str(out), "--model", "auto", "-q"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not _fitting(process.pid):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 128 + signum
    assert err.splitlines() == [f"latentlab impute: interrupted by {signal.Signals(signum).name}"]
    if old_output is None:
        assert not out.exists()
    else:
        assert out.read_text() == old_output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["data.csv", *(["out.csv"] if old_output else [])]
    )


@pytest.mark.parametrize(
    "stdout, status, message",
    [
        ("/dev/full", 1, "latentlab impute: error: cannot write standard output: No space left"),
        ("closed", 1, "latentlab impute: error: standard output is closed"),
        ("reader gone", 141, None),  # quietly, as `cat` in a pipe whose reader left
    ],
    ids=["full-disk", "closed", "reader-gone"],
)
def test_unwritable_stdout_is_one_line_not_a_traceback(csv_file, stdout, status, message):
    # measured on main: tracebacks (OSError: [Errno 28]; AttributeError on None)
    command = [str(SCRIPT), "impute", str(csv_file), "-o", "-", *PPCA_2]
    if stdout == "closed":
        line = " ".join(f"'{part}'" for part in command)
        result = subprocess.run(
            ["sh", "-c", f"{line} >&-"], capture_output=True, text=True, timeout=300, check=False
        )
        returncode, err = result.returncode, result.stderr
    elif stdout == "/dev/full":
        with open("/dev/full", "w") as full:
            result = subprocess.run(
                command, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300, check=False
            )
        returncode, err = result.returncode, result.stderr
    else:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        process.stdout.close()  # the reader leaves before anything is written
        err = process.stderr.read()
        returncode = process.wait(timeout=300)
        process.stderr.close()
    assert returncode == status
    if message is None:
        assert err == ""
    else:
        assert len(err.splitlines()) == 1 and err.startswith(message)
