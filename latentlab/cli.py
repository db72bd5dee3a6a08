"""The ``latentlab`` command line: ``impute``, ``compare`` and ``demo``."""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["main", "run_demo"]

DATASETS = ("wine", "digits", "breast_cancer", "diabetes")
FAMILY_NAMES = ("ppca", "fa", "bpca", "gmm")
DELIMITERS = ",;\t|"

EXIT_CODES = """\
exit status: 0 on success, 1 when the input cannot be used (missing or unparsable
file, non-numeric or empty column, model failure; the reason is printed on stderr),
2 for a malformed command line, 141 when the reader of standard output (e.g. head)
closes it early. Two outputs may not name the same file, and no output but -o may
name the input; files are replaced only once everything has been computed.

Compiled XLA programs are cached in $LATENTLAB_CACHE_DIR (default
~/.cache/latentlab/jax), so later runs on data of the same shape start faster; set
LATENTLAB_CACHE_DIR= (empty) to switch the cache off."""


class InputError(Exception):
    """A problem with the user's input, reported as one line on stderr (exit 1)."""


# -- demo ------------------------------------------------------------------------------


def _load(name: str) -> np.ndarray:
    from sklearn import datasets

    loader = getattr(datasets, f"load_{name}")
    X = loader().data.astype(np.float64)
    sd = X.std(axis=0)
    X = X[:, sd > 0]  # digits has constant (all-zero) pixels
    return (X - X.mean(axis=0)) / X.std(axis=0)


def run_demo(
    dataset: str = "wine",
    max_components: int = 10,
    folds: int = 5,
    missing: float = 0.1,
    seed: int = 0,
    out=sys.stdout,
):
    """Fit PPCA for K = 1..max_components, compare them, then impute hidden entries.

    Returns ``(table, report)``: the comparison DataFrame and a dict with the
    imputation results.
    """
    from latentlab import PPCA
    from latentlab.compare import compare

    def say(*args):
        print(*args, file=out, flush=True)

    X = _load(dataset)
    n, d = X.shape
    say(f"latentlab demo: probabilistic PCA on scikit-learn's {dataset} data")
    say(f"({n} samples x {d} features, standardised)")
    high = min(max_components, min(n, d) - 1)
    say(f"fitting PPCA for K = 1..{high}, each also on {folds} cross-validation folds")
    start = time.perf_counter()
    # compare() shuffles one KFold(folds, random_state=seed) shared by every K
    table, fitted = compare(
        {f"PPCA(K={K})": PPCA(K, random_state=seed) for K in range(1, high + 1)},
        X,
        cv=folds,
        random_state=seed,
        return_estimators=True,
    )
    table["em_iter"] = [fitted[name].n_iter_ for name in table.index]
    table = table.sort_values("K").set_index("K")
    columns = ["loglik", "n_params", "BIC", "heldout_loglik", "heldout_se"]
    table = table[[*columns, "heldout_se_diff", "near_best", "em_iter"]]
    say(f"  done in {time.perf_counter() - start:.1f} s")
    best_k = int(table["heldout_loglik"].idxmax())
    best_bic = int(table["BIC"].idxmin())
    say(f"\nModel comparison (log-likelihoods in nats; held-out is per sample, {folds}-fold):")
    say(table.to_string(float_format=lambda v: f"{v:.3f}"))
    say(f"\nBest K by held-out log-likelihood: {best_k};  by BIC: {best_bic}")
    close = [int(K) for K in table.index[table["near_best"] == "within 1 SE"]]
    if close:
        say(f"  within one paired standard error of the best: K = {close}")

    rng = np.random.default_rng(seed)
    hidden = rng.random(X.shape) < missing
    hidden[hidden.all(axis=1)] = False
    X_missing = np.where(hidden, np.nan, X)
    model = PPCA(best_k, random_state=seed).fit(X_missing)
    filled, std = model.impute(X_missing, return_std=True)
    col_means = np.nanmean(X_missing, axis=0)
    rmse_model = float(np.sqrt(np.mean((filled[hidden] - X[hidden]) ** 2)))
    rmse_mean = float(
        np.sqrt(np.mean((np.broadcast_to(col_means, X.shape)[hidden] - X[hidden]) ** 2))
    )
    coverage = float(np.mean(np.abs(filled[hidden] - X[hidden]) <= 1.645 * std[hidden]))
    say(f"\nImputation: {hidden.sum()} entries ({missing:.0%}) hidden at random, PPCA(K={best_k})")
    say(f"  RMSE  PPCA {rmse_model:.3f}   column means {rmse_mean:.3f}")
    say(f"  90% intervals cover {coverage:.1%} of the hidden values")
    report = {
        "best_k": best_k,
        "rmse_ppca": rmse_model,
        "rmse_mean": rmse_mean,
        "coverage": coverage,
    }
    return table, report


# -- reading data ----------------------------------------------------------------------


def _delimiter(text: str) -> str:
    return "\t" if text.lower() in ("tab", "\\t") else text


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


def _formatter(texts, decimal: str):
    """Format numbers with the precision of a column's cells as written: as many
    decimals as its most precise cell, or as many significant digits in
    scientific notation if any cell uses an exponent."""
    places, digits, scientific = 0, 1, False
    for cell in texts.dropna():
        mantissa, exponent, _ = cell.strip().lower().partition("e")
        scientific |= bool(exponent)
        whole, _, fraction = mantissa.lstrip("+-").partition(decimal)
        places = max(places, len(fraction))
        digits = max(digits, len((whole + fraction).lstrip("0")) or 1)
    spec = f".{digits - 1}e" if scientific else f".{places}f"

    def fmt(value: float) -> str:
        return format(value, spec).replace(".", decimal)

    return fmt


def _filled_table(table: Table, data, filled, full_precision: bool):
    """The output table: every cell as written in the input, except the imputed ones,
    written with their column's precision (or in full: the shortest exact text)."""
    out = table.text.copy()
    for name in data.columns:
        gaps = data[name].isna().to_numpy()
        if not gaps.any():
            continue
        if full_precision:

            def fmt(value, decimal=table.decimal):
                return repr(float(value)).replace(".", decimal)

        else:
            fmt = _formatter(table.text[name][~gaps], table.decimal)
        column = out[name].to_numpy(dtype=object)
        column[gaps] = [fmt(v) for v in filled[name].to_numpy(dtype=np.float64)[gaps]]
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


def _write(frame, target, delimiter, decimal=".") -> None:
    """Write a CSV table to a file, or to stdout for '-'.

    A file is written to a temporary file beside it and renamed over the target, so
    a failure never leaves a half-written file, and the input can be the output.
    """
    options = dict(index=False, sep=delimiter, decimal=decimal)
    if str(target) == "-":
        frame.to_csv(sys.stdout, **options)
        return
    target = Path(os.path.realpath(target))  # through symlinks: replace the file, not the link
    if not target.parent.exists():
        raise InputError(f"cannot write {str(target)!r}: folder {str(target.parent)!r} missing")
    try:
        mode = target.stat().st_mode & 0o7777  # keep an existing file's permissions
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    temp = None
    try:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            frame.to_csv(handle, **options)
        os.chmod(temp, mode)
        os.replace(temp, target)
        temp = None
    except OSError as err:
        raise InputError(f"cannot write {str(target)!r}: {err.strerror}") from None
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)


# -- impute ----------------------------------------------------------------------------


def run_impute(args) -> int:
    from latentlab.impute import Imputer

    _check_paths(
        args.data,
        [
            ("-o", args.output),
            ("--std", args.std),
            *(("--interval", p) for p in args.interval or ()),
        ],
        in_place=("-o",),
    )
    table = read_table(args.data, args.delimiter, args.na_values, args.decimal)
    frame = table.frame
    data = _numeric_part(table, args.exclude)
    missing = int(data.isna().to_numpy().sum())
    say = _stderr(args.quiet)
    say(
        f"latentlab impute: {frame.shape[0]} rows x {data.shape[1]} numeric columns, "
        f"{missing} missing entries"
    )
    imputer = Imputer(
        args.model, n_components=args.k, random_state=args.seed, verbose=int(not args.quiet)
    )
    filled, std = imputer.fit(data).transform(data, return_std=True)
    chosen = imputer.chosen_
    if imputer.selection_ is not None:
        say("model choice by held-out log-likelihood of masked entries (nats per entry):")
        # every candidate, the mixture included: the table is short (at most ~10 rows)
        shown = imputer.selection_.drop(columns=["note"])
        say(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    say(f"imputed with {chosen['model']} (K={chosen['n_components']})")
    # compute every table before writing any: a failure leaves no output half-done
    outputs = [(_filled_table(table, data, filled, args.full_precision), args.output)]
    if args.std is not None:
        outputs.append((_numeric_columns_of(table, std), args.std))
    if args.interval is not None:
        bounds = imputer.impute_interval(data, level=args.level, calibrate=not args.plug_in)
        for bound, path in zip(bounds, args.interval, strict=True):
            outputs.append((_numeric_columns_of(table, bound), path))
        if not args.plug_in:
            nominal = imputer.calibrated_level(args.level)
            say(f"{args.level:.0%} intervals calibrated on held-out cells (nominal {nominal:.1%})")
    for out, path in outputs:
        _write(out, path, table.delimiter, table.decimal)
    return 0


def _level(text: str) -> float:
    """An interval probability strictly between 0 and 1, for argparse."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"level must be a number between 0 and 1, got {text!r}")
    return value


def _numeric_columns_of(table: Table, values):
    """A float table shaped like the input: ``values``' columns, empty elsewhere
    (columns excluded from the model), under the input's header."""
    import pandas as pd

    frame = table.frame
    out = pd.DataFrame(index=frame.index, columns=frame.columns, dtype=np.float64)
    for name in values.columns:
        out[name] = values[name]
    out.columns = table.header
    return out


# -- compare ---------------------------------------------------------------------------


def parse_ks(text: str) -> list[int]:
    """``"3"``, ``"1:10"`` (inclusive) or ``"1,2,5"`` as a list of positive integers."""
    try:
        if ":" in text:
            low, high = (int(v) for v in text.split(":"))
            values = list(range(low, high + 1))
        else:
            values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid K list {text!r}: use K, LOW:HIGH or K1,K2,..."
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"K must be positive integers, got {text!r}")
    return values


def run_compare(args) -> int:

    from latentlab.impute import FAMILIES, family_class, max_components, progress

    _check_paths(args.data, [("-o", args.output)])
    source = read_table(args.data, args.delimiter, args.na_values, args.decimal)
    data = _numeric_part(source, args.exclude).to_numpy(dtype=np.float64, na_value=np.nan)
    data = data[~np.isnan(data).all(axis=1)]
    if np.isnan(data).all(axis=0).any():
        raise InputError("a column has no observed entry; drop it or pass it to --exclude")
    if not args.no_standardize:
        # divide by the largest |x| first: squares of values near 1e200 overflow
        peak = np.nanmax(np.abs(data), axis=0)
        data = data / np.where(peak > 0, peak, 1.0)
        scale = np.nanstd(data, axis=0)
        data = (data - np.nanmean(data, axis=0)) / np.where(scale > 0, scale, 1.0)
    n, d = data.shape
    ks = args.k or list(range(1, min(5, d - 1) + 1))
    models, skipped = {}, []
    for family in args.models:
        for K in ks:
            if K > max_components(family, n, d):
                skipped.append(f"{family} K={K}")
                continue
            est = family_class(family)(n_components=K, random_state=args.seed)
            models[f"{FAMILIES[family]}(K={K})"] = est
    say = _stderr(args.quiet)
    if skipped:
        say(f"skipped (K too large for {n} rows x {d} columns): {', '.join(skipped)}")
    if not models:
        raise InputError("no model left to compare; choose smaller K with -k")
    from latentlab.compare import compare

    table = compare(
        models,
        data,
        cv=args.folds,
        random_state=args.seed,
        progress=lambda items: progress(items, "compare", int(not args.quiet)),
    )
    if "error" in table and table["error"].isna().all():
        table = table.drop(columns="error")
    units = "standardised columns" if not args.no_standardize else "the data's units"
    print(
        f"Model comparison on {n} rows x {d} columns ({units}); log-likelihoods in nats, "
        f"held-out = mean per row over {args.folds} folds, se = standard error"
    )
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    if args.output is not None:
        _write(table.reset_index(), args.output, source.delimiter, source.decimal)
    return 0


# -- plumbing --------------------------------------------------------------------------


def _stderr(quiet: bool):
    def say(*args):
        if not quiet:
            print(*args, file=sys.stderr, flush=True)

    return say


def _enable_compilation_cache() -> None:
    """Persist compiled XLA programs between runs of the command (never on import)."""
    from latentlab._cache import enable_compilation_cache

    enable_compilation_cache()


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so Python's final flush of what is still buffered
    does not print a second BrokenPipeError (the recipe of the ``signal`` docs)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a file descriptor (e.g. captured in tests)


def _short_warning(message, category, filename, lineno, file=None, line=None):
    print(f"latentlab: warning: {message}", file=sys.stderr)


def _input_options(sub) -> None:
    sub.add_argument("data", help="CSV file with a header row; empty cells are missing")
    sub.add_argument(
        "--delimiter",
        type=_delimiter,
        default=None,
        help="field separator (default: guessed among , ; tab |); write 'tab' for tabs",
    )
    sub.add_argument(
        "--decimal",
        choices=(".", ","),
        default=".",
        help="decimal mark of the numbers (default '.'); with ',' the field separator "
        "is guessed among ; tab |",
    )
    sub.add_argument(
        "--na-values",
        nargs="+",
        default=None,
        metavar="TEXT",
        help="extra cell texts meaning missing (empty, NA, NaN, null ... always do)",
    )
    sub.add_argument(
        "--exclude",
        nargs="+",
        default=[],
        metavar="COLUMN",
        help="columns to leave out of the model and copy through unchanged (e.g. ids, names); "
        "list them after the file name",
    )
    sub.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sub.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="latentlab",
        description="Latent-variable models declared once in NumPyro, fitted by jit-compiled EM.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    impute = sub.add_parser(
        "impute",
        help="fill in the missing cells of a CSV file from a fitted latent-variable model",
        description="Fill in the empty cells of a CSV file with their conditional mean "
        "given the observed cells of the same row, under a latent-variable model fitted "
        "to the observed cells (missing at random assumed). The output has exactly the "
        "input's columns and rows; observed cells are unchanged.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _input_options(impute)
    impute.add_argument(
        "-o", "--output", required=True, help="where to write the filled CSV ('-' = stdout)"
    )
    impute.add_argument(
        "--full-precision",
        action="store_true",
        help="write imputed cells in full (the shortest text that reads back as the exact "
        "float64 value); by default each column's imputed cells get the precision of "
        "its cells in the input (e.g. 2 decimals), and every other cell is copied as written",
    )
    impute.add_argument(
        "--model",
        choices=("auto", *FAMILY_NAMES),
        default="auto",
        help="ppca: probabilistic PCA; fa: factor analysis; bpca: Bayesian PCA (prunes "
        "its own rank); gmm: Gaussian mixture; auto (default): choose family and K by "
        "the held-out likelihood of masked cells",
    )
    impute.add_argument(
        "-k",
        type=int,
        default=None,
        metavar="K",
        help="rank (number of components for gmm); with --model auto, PPCA and FA compete "
        "at this rank; default: chosen from the data",
    )
    impute.add_argument(
        "--std",
        default=None,
        metavar="FILE",
        help="also write the conditional standard deviation of each cell (0 if observed)",
    )
    impute.add_argument(
        "--interval",
        nargs=2,
        default=None,
        metavar=("LOWER", "UPPER"),
        help="also write the lower and upper ends of a central interval for each cell "
        "(the cell itself if observed), calibrated so that it contains --level of "
        "observed cells hidden and predicted from a refit",
    )
    impute.add_argument(
        "--level",
        type=_level,
        default=0.9,
        help="probability of the --interval intervals (default 0.9)",
    )
    impute.add_argument(
        "--plug-in",
        action="store_true",
        help="--interval without calibration: the fitted model's own quantiles, which "
        "ignore the uncertainty of its parameters (too narrow for few rows)",
    )

    compare = sub.add_parser(
        "compare",
        help="compare models and ranks by likelihood (AIC, BIC, cross-validated held-out)",
        description="Fit each model at each K to a CSV file (missing cells allowed) and "
        "print log-likelihood, number of free parameters, AIC, BIC and the K-fold "
        "held-out log-likelihood per row with its standard error, best first.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _input_options(compare)
    compare.add_argument(
        "--models",
        nargs="+",
        choices=FAMILY_NAMES,
        default=["ppca", "fa"],
        help="model families to fit (default: ppca fa)",
    )
    compare.add_argument(
        "-k",
        type=parse_ks,
        default=None,
        metavar="KS",
        help="K values: K, LOW:HIGH (inclusive) or K1,K2,... (default 1:5)",
    )
    compare.add_argument("--folds", type=int, default=5, help="cross-validation folds")
    compare.add_argument(
        "--no-standardize",
        action="store_true",
        help="fit in the data's units (default: standardise each column first)",
    )
    compare.add_argument("-o", "--output", default=None, help="also write the table as CSV")

    demo = sub.add_parser(
        "demo",
        help="fit PPCA for several K on bundled data, compare them and impute hidden entries",
        description="Fit probabilistic PCA for K = 1..max-components on a data set bundled "
        "with scikit-learn, print log-likelihood, BIC and K-fold held-out log-likelihood, "
        "then hide entries at random, impute them and report RMSE and interval coverage.",
    )
    demo.add_argument("--dataset", choices=DATASETS, default="wine", help="bundled data set")
    demo.add_argument("--max-components", type=int, default=10, help="largest K to fit")
    demo.add_argument("--folds", type=int, default=5, help="cross-validation folds")
    demo.add_argument("--missing", type=float, default=0.1, help="fraction of entries to hide")
    demo.add_argument("--seed", type=int, default=0, help="random seed")
    return parser


def main(argv=None) -> int:
    """Run the command line; returns the exit status (see ``latentlab --help``)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        if not 0 < args.missing < 1:
            parser.error("--missing must be between 0 and 1")
        if args.max_components < 1 or args.folds < 2:
            parser.error("--max-components must be >= 1 and --folds >= 2")
    if args.command == "compare" and args.folds < 2:
        parser.error("--folds must be >= 2")
    if args.command == "impute" and args.k is not None and args.k < 1:
        parser.error("-k must be a positive integer")
    if argv is None:  # a real command-line run, not a call from Python
        _enable_compilation_cache()
    with warnings.catch_warnings():
        warnings.showwarning = _short_warning
        try:
            if args.command == "demo":
                run_demo(args.dataset, args.max_components, args.folds, args.missing, args.seed)
                return 0
            run = run_impute if args.command == "impute" else run_compare
            status = run(args)
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
            return status
        except (InputError, ValueError) as err:
            print(f"latentlab {args.command}: error: {err}", file=sys.stderr)
            return 1
        except BrokenPipeError:
            # e.g. `latentlab impute d.csv -o - | head`: the reader left; stop quietly
            _discard_stdout()
            return 141  # 128 + SIGPIPE, what `cat` reports in the same pipe


if __name__ == "__main__":
    sys.exit(main())
