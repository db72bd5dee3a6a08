"""The command line's CSV files: reading a table (delimiter and decimal mark guessed or
given, cells kept as written), choosing its numeric columns, and writing the filled
table, its standard deviations and interval bounds (computed cells in full, every
other cell as written; atomically, never over the input).

Split from :mod:`latentlab.cli`, which runs the commands."""

from __future__ import annotations

import csv
import os
import re
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["InputError", "Table", "read_table"]

DELIMITERS = ",;\t|"


class InputError(Exception):
    """A problem with the user's input, reported as one line on stderr (exit 1)."""


class Table(NamedTuple):
    """A CSV file as read: typed values, the cells' text, and how it was written."""

    frame: object  # DataFrame with pandas' dtypes (unique column names)
    text: object  # the same cells as strings (NaN where missing), for verbatim output
    header: list  # the header row as written (duplicates kept)
    delimiter: str
    decimal: str


def read_table(path, delimiter=None, na_values=None, decimal=".") -> Table:
    """A CSV file as a :class:`Table` (the delimiter guessed when None).

    Raises :class:`InputError` with a message a user can act on.
    """
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise InputError(f"cannot read {str(path)!r}: no such file")
    if path.is_dir():
        raise InputError(f"cannot read {str(path)!r}: it is a directory, not a CSV file")
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            sample = handle.read(65536)
    except UnicodeDecodeError:
        raise InputError(f"{str(path)!r} is not UTF-8 text; is it a CSV file?") from None
    except OSError as err:
        raise InputError(f"cannot read {str(path)!r}: {err.strerror}") from None
    if not sample.strip():
        raise InputError(f"{str(path)!r} is empty")
    if delimiter is None:
        # with decimal commas the field separator cannot be a comma
        candidates = DELIMITERS.replace(decimal, "")
        try:
            delimiter = csv.Sniffer().sniff(sample, delimiters=candidates).delimiter
        except csv.Error:
            delimiter = candidates[0]
    if delimiter == decimal:
        raise InputError(f"--delimiter and --decimal are both {delimiter!r}; they must differ")
    options = dict(sep=delimiter, na_values=na_values)
    try:
        frame = pd.read_csv(path, decimal=decimal, **options)
        text = pd.read_csv(path, dtype=str, **options)
    except pd.errors.ParserError as err:
        reason = str(err).strip().splitlines()[-1]
        raise InputError(
            f"could not parse {str(path)!r} with delimiter {delimiter!r}: {reason}; "
            "check --delimiter"
        ) from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{str(path)!r} has no columns") from None
    if frame.shape[1] < 2:
        header = sample.splitlines()[0]
        other = [c for c in DELIMITERS if c != delimiter and c in header]
        hint = (
            f"; the header contains {other[0]!r}: try --delimiter {other[0]!r}"
            if other
            else "; imputing needs at least 2 columns"
        )
        raise InputError(
            f"{str(path)!r} has only {frame.shape[1]} column with delimiter {delimiter!r}{hint}"
        )
    if frame.shape[0] == 0:
        raise InputError(f"{str(path)!r} has a header row but no data rows")
    # pandas renames a repeated column "a" to "a.1"; the output keeps the header as written
    header = next(csv.reader(sample.splitlines()[:1], delimiter=delimiter), [])
    if len(header) != frame.shape[1]:
        header = [str(c) for c in frame.columns]
    return Table(frame, text, header, delimiter, decimal)


# a number written with a decimal comma, e.g. "-1,5", "1.234,5", "2,5e-3"
DECIMAL_COMMA = re.compile(r"[+-]?(\d+|\d{1,3}(\.\d{3})+)?(,\d+)?([eE][+-]?\d+)?")


def _numeric_part(table: Table, exclude):
    """The columns to model, after checking --exclude and refusing non-numeric ones."""
    from pandas.api.types import is_complex_dtype, is_numeric_dtype

    frame = table.frame
    names = [str(c) for c in frame.columns]
    unknown = [c for c in exclude if c not in names]
    if unknown:
        raise InputError(f"--exclude names column(s) not in the file: {unknown}")
    repeated = [c for c in exclude if table.header.count(c) > 1]
    if repeated:
        raise InputError(
            f"--exclude {repeated[0]!r} is ambiguous: the header has {repeated[0]!r} "
            f"{table.header.count(repeated[0])} times; rename the columns"
        )
    keep = [c for c, name in zip(frame.columns, names, strict=True) if name not in exclude]
    bad = [
        str(c)
        for c in keep
        if not is_numeric_dtype(frame[c].dtype) or is_complex_dtype(frame[c].dtype)
    ]
    if bad and table.decimal != ",":
        comma = [c for c in bad if _decimal_commas(table.text[c])]
        if comma:
            example = next(t for t in table.text[comma[0]].dropna() if "," in t)
            raise InputError(
                f"column(s) {comma} hold numbers written with a decimal comma (e.g. "
                f"{example.strip()!r}): pass --decimal ','"
            )
    if bad:
        shown = " ".join(f"'{c}'" for c in bad)
        raise InputError(
            f"non-numeric column(s) {bad}: latentlab models numbers only. Fix the values "
            f"or copy those columns through unchanged with --exclude {shown}"
        )
    if len(keep) < 2:
        raise InputError(f"need at least 2 numeric columns to model, got {len(keep)}")
    return frame[keep]


def _decimal_commas(texts) -> bool:
    """Whether every cell is a number once its decimal comma is read as a point."""
    cells = [t.strip() for t in texts.dropna()]
    return (
        any("," in t for t in cells)
        and all(DECIMAL_COMMA.fullmatch(t) for t in cells)
        and all(any(ch.isdigit() for ch in t) for t in cells)
    )


def _shortest(value: float, decimal: str) -> str:
    """The shortest text that reads back as exactly ``value`` (Python's float repr,
    up to 17 significant digits), with the input's decimal mark."""
    return repr(float(value)).replace(".", decimal)


def _output_table(table: Table, values, computed=None):
    """A table shaped like the input, under its header: every cell as written in the
    input (the columns left out of the model included), except the cells of
    ``values``' columns where the boolean frame ``computed`` is true (all of them if
    None), which get the shortest text that reads back as their float."""
    out = table.text.copy()
    for name in values.columns:
        numbers = values[name].to_numpy(dtype=np.float64)
        rows = slice(None) if computed is None else computed[name].to_numpy(dtype=bool)
        column = out[name].to_numpy(dtype=object)
        column[rows] = [_shortest(v, table.decimal) for v in numbers[rows]]
        out[name] = column
    out.columns = table.header
    return out


def _check_paths(data, outputs, in_place=()):
    """Refuse two outputs naming one file, or an output that is the input (except the
    flags in ``in_place``: the input is read before anything is written).

    ``outputs`` are (flag, path) pairs; '-' is standard output.  Paths are compared
    after resolving links and '..', and by inode where both exist.
    """
    outputs = [(flag, path) for flag, path in outputs if path is not None]

    def same(a, b):
        if a == "-" or b == "-":
            return a == b
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        try:
            return os.path.samefile(a, b)
        except OSError:  # one does not exist yet
            return False

    for i, (flag, path) in enumerate(outputs):
        for flag2, path2 in outputs[:i]:
            if same(path, path2):
                where = "standard output" if path == "-" else f"the file {path2!r}"
                raise InputError(
                    f"{flag2} and {flag} both name {where}; give each output its own path"
                )
        if flag not in in_place and same(path, str(data)):
            raise InputError(f"{flag} {path!r} is the input file; refusing to overwrite the data")


def _write_tables(tables, delimiter, decimal=".") -> None:
    """Write ``(frame, target)`` CSV tables, each to a file or to stdout ('-'), through
    :func:`latentlab._files.write_files`: files are replaced, together, only once every
    table is written, so a failure or an interrupt leaves no file half-written and the
    input can be the output.

    Raises :class:`InputError` naming a file that cannot be written; a failure to write
    standard output propagates as the ``OSError`` it is (``BrokenPipeError`` when its
    reader has left).
    """
    from functools import partial

    from latentlab._files import write_files

    outputs = []
    for frame, target in tables:
        if str(target) == "-":
            target = sys.stdout
        elif not os.path.isdir(os.path.dirname(os.path.abspath(target))):
            folder = os.path.dirname(os.path.abspath(target))
            raise InputError(f"cannot write {str(target)!r}: folder {folder!r} missing")
        outputs.append((target, partial(frame.to_csv, index=False, sep=delimiter, decimal=decimal)))
    try:
        write_files(outputs, text=True)
    except OSError as err:
        if err.filename is None:  # standard output
            raise
        raise InputError(f"cannot write {err.filename!r}: {err.strerror}") from None
