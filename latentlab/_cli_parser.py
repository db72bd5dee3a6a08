"""The command line's arguments: the ``impute``, ``compare`` and ``demo`` subcommands,
their options and the argparse types that check them.

Split from :mod:`latentlab.cli`, which runs the commands."""

from __future__ import annotations

import argparse

__all__ = ["parse_ks"]

DATASETS = ("wine", "digits", "breast_cancer", "diabetes")
FAMILY_NAMES = ("ppca", "fa", "bpca", "gmm")

EXIT_CODES = """\
exit status: 0 on success, 1 when the input cannot be used (missing or unparsable
file, non-numeric or empty column, model failure) or an output cannot be written
(full disk, standard output closed); the reason is printed on stderr. 2 for a
malformed command line, 130 when interrupted (Ctrl-C, SIGINT), 143 when terminated
(SIGTERM), 141 when the reader of standard output (e.g. head) closes it early.

Two outputs may not name the same file, and no output but -o may name the input.
Output files are replaced only once everything has been computed and every output
written (each to a temporary file, then all renamed): a failure or an interrupt
leaves the old files as they were. A FIFO, a device or /dev/stdout is written into,
not replaced.

Compiled XLA programs are cached in $LATENTLAB_CACHE_DIR (default
~/.cache/latentlab/jax), so later runs on data of the same shape start faster; set
LATENTLAB_CACHE_DIR= (empty) to switch the cache off."""


def _delimiter(text: str) -> str:
    return "\t" if text.lower() in ("tab", "\\t") else text


def _level(text: str) -> float:
    """An interval probability strictly between 0 and 1, for argparse."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"level must be a number between 0 and 1, got {text!r}")
    return value


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
