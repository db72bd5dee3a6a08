"""The command line's arguments: the ``impute``, ``compare`` and ``demo`` subcommands,
their options, the argparse types that check them, and :func:`parse_args`, which
takes back a file name written after an option of several words.

Split from :mod:`latentlab.cli`, which runs the commands."""

from __future__ import annotations

import argparse
import os

__all__ = ["parse_args", "parse_ks"]

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


class _Words(argparse.Action):
    """An option of one or more words (``nargs="+"``) that records each occurrence's
    words on the namespace, so that :func:`parse_args` can take back the file name
    argparse gave it. ``allowed``: the words it accepts, checked after that."""

    def __init__(self, option_strings, dest, allowed=None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.allowed = allowed

    def __call__(self, parser, namespace, values, option_string=None):
        words = list(values)
        setattr(namespace, self.dest, words)
        occurrences = getattr(namespace, "_words_given", [])
        namespace._words_given = [*occurrences, (option_string, self, words)]


def _input_options(sub) -> None:
    data = sub.add_argument("data", help="CSV file with a header row; empty cells are missing")
    data.required = False  # parse_args requires it, once it has looked in --exclude etc.
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
        action=_Words,
        nargs="+",
        default=None,
        metavar="TEXT",
        help="extra cell texts meaning missing (empty, NA, NaN, null ... always do)",
    )
    sub.add_argument(
        "--exclude",
        action=_Words,
        nargs="+",
        default=[],
        metavar="COLUMN",
        help="columns to leave out of the model and copy through unchanged into every "
        "output (e.g. ids, names)",
    )
    sub.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sub.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The command line's parser and its subcommands' parsers, by name."""
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
        "input's columns and rows; observed cells are copied as written, imputed ones "
        "written as the shortest number that reads back as the computed value.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _input_options(impute)
    impute.add_argument(
        "-o", "--output", required=True, help="where to write the filled CSV ('-' = stdout)"
    )
    # once the choice of full precision over the input's; now always so, kept for scripts
    impute.add_argument("--full-precision", action="store_true", help=argparse.SUPPRESS)
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
        help="also write the conditional standard deviation of each cell (0 if observed; "
        "the --exclude columns copied through)",
    )
    impute.add_argument(
        "--interval",
        nargs=2,
        default=None,
        metavar=("LOWER", "UPPER"),
        help="also write the lower and upper ends of a central interval for each cell "
        "(the cell itself if observed; the --exclude columns copied through), calibrated "
        "so that it contains --level of observed cells hidden and predicted from a refit",
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
        action=_Words,
        nargs="+",
        allowed=FAMILY_NAMES,  # not choices: argparse would refuse a file name among them
        default=["ppca", "fa"],
        metavar="{" + ",".join(FAMILY_NAMES) + "}",
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
    return parser, {"impute": impute, "compare": compare, "demo": demo}


def parse_args(argv=None) -> argparse.Namespace:
    """The command line, parsed and checked; a malformed one exits with status 2 and
    a usage message, as argparse does.

    argparse gives an option of several words (``--exclude``, ``--na-values``,
    ``--models``) every word up to the next option, so in ``impute --exclude id name
    data.csv -o out.csv`` the file name becomes a column to exclude and no file name
    is left. Where none is left, it is taken back from the last word of such an
    option that got two words or more (the option keeps at least one): the only such
    option, or of several, the only one whose last word names an existing path. A
    command line that names its file anywhere else means what it meant to argparse.
    """
    parser, commands = _parsers()
    args = parser.parse_args(argv)
    command = commands[args.command]
    occurrences = vars(args).pop("_words_given", [])
    if args.command != "demo" and args.data is None:
        args.data = _take_back_file_name(occurrences)
        if args.data is None:
            command.error(
                "the following arguments are required: data (write the file name before "
                "an option that takes several words, such as --exclude)"
            )
    for option, action, words in occurrences:
        wrong = [w for w in words if action.allowed is not None and w not in action.allowed]
        if wrong:
            choices = ", ".join(map(repr, action.allowed))
            command.error(
                f"argument {option}: invalid choice: {wrong[0]!r} (choose from {choices})"
            )
    if args.command == "demo":
        if not 0 < args.missing < 1:
            command.error("--missing must be between 0 and 1")
        if args.max_components < 1 or args.folds < 2:
            command.error("--max-components must be >= 1 and --folds >= 2")
    if args.command == "compare" and args.folds < 2:
        command.error("--folds must be >= 2")
    if args.command == "impute" and args.k is not None and args.k < 1:
        command.error("-k must be a positive integer")
    return args


def _take_back_file_name(occurrences) -> str | None:
    """The file name an option of several words took, removed from its words; None
    when no option, or more than one, can have taken it."""
    candidates = [words for _, _, words in occurrences if len(words) >= 2]
    if len(candidates) > 1:
        candidates = [words for words in candidates if os.path.exists(words[-1])]
    if len(candidates) != 1:
        return None
    return candidates[0].pop()
