"""The ``latentlab`` command line: ``impute``, ``compare`` and ``demo``.

This module runs the commands; their arguments are declared in
:mod:`latentlab._cli_parser` and the CSV files are read and written by
:mod:`latentlab._cli_tables`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import warnings

import numpy as np

from latentlab._cli_parser import parse_args
from latentlab._cli_parser import parse_ks as parse_ks  # re-exported: latentlab.cli.parse_ks
from latentlab._cli_tables import (
    InputError,
    _check_paths,
    _numeric_part,
    _output_table,
    _write_tables,
    read_table,
)
from latentlab._files import after_renames, discard_unfinished

__all__ = ["main", "run_demo"]


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
    # compute every table before writing any: a failure leaves no output half-done.
    # Observed cells are copied as written (bounds equal them there), so each output
    # joins back to the input row by row, by its --exclude columns too
    gaps = data.isna()
    outputs = [(_output_table(table, filled, gaps), args.output)]
    if args.std is not None:
        outputs.append((_output_table(table, std), args.std))
    if args.interval is not None:
        bounds = imputer.impute_interval(data, level=args.level, calibrate=not args.plug_in)
        for bound, path in zip(bounds, args.interval, strict=True):
            outputs.append((_output_table(table, bound, gaps), path))
        if not args.plug_in:
            nominal = imputer.calibrated_level(args.level)
            say(f"{args.level:.0%} intervals calibrated on held-out cells (nominal {nominal:.1%})")
    _write_tables(outputs, table.delimiter, table.decimal)
    return 0


# -- compare ---------------------------------------------------------------------------


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
        _write_tables([(table.reset_index(), args.output)], source.delimiter, source.decimal)
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
    does not fail a second time (the recipe of the ``signal`` docs for a closed pipe;
    the same for a full disk)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a file descriptor (e.g. captured in tests)


def _reserve_closed_standard_descriptors() -> None:
    """Open /dev/null as each of descriptors 0-2 the caller closed (``>&-``).

    Otherwise the next file opened (an output's temporary file) takes that number, and
    whatever writes to descriptor 1 or 2 (a C library's warning) writes into it.
    Python still sees the stream closed: ``sys.stdout`` stays None.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)  # the lowest free number: fd itself
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def _end_on_signals(command: str) -> None:
    """Make SIGINT (Ctrl-C) and SIGTERM end the command with status 128 + the signal's
    number (130, 143) and one line on stderr, leaving every output file as it was.

    The handler removes the temporary files of outputs being written and exits with
    ``os._exit``; it does not raise KeyboardInterrupt, which prints a traceback of
    dozens of lines and which code on its way up can swallow (a fuzzer saw one
    interrupted imputation in 20 run on and exit 0).  Nothing else needs undoing:
    outputs are replaced only by renames, and renames already under way are finished
    first (:func:`latentlab._files.after_renames`).  Python runs the handler once the
    main thread is back in Python (after the compile or computation in progress).  A
    signal the caller ignores (``nohup``, ``command &`` in a script) stays ignored.
    """

    def end_now(signum):
        discard_unfinished()
        clear = "\r\x1b[K" if os.isatty(2) else ""  # over a progress bar or the "^C"
        line = f"{clear}latentlab {command}: interrupted by {signal.Signals(signum).name}\n"
        with contextlib.suppress(OSError):
            os.write(2, line.encode())
        os._exit(128 + signum)

    def handler(signum, frame):
        after_renames(lambda: end_now(signum))

    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, handler)


def _writes_to_stdout(args) -> bool:
    """Whether the command's results go to standard output: always for ``demo`` and
    ``compare``; for ``impute``, an output '-' or a path leading to descriptor 1
    (``/dev/stdout``, ``/dev/fd/1``)."""
    if args.command in ("demo", "compare"):
        return True
    descriptor_1 = os.path.realpath("/dev/stdout")
    outputs = [p for p in (args.output, args.std, *(args.interval or ())) if p is not None]
    return any(p == "-" or os.path.realpath(p) == descriptor_1 for p in outputs)


def _short_warning(message, category, filename, lineno, file=None, line=None):
    print(f"latentlab: warning: {message}", file=sys.stderr)


def main(argv=None) -> int:
    """Run the command line; returns the exit status (see ``latentlab --help``)."""
    args = parse_args(argv)
    if sys.stdout is None and _writes_to_stdout(args):
        # e.g. `latentlab impute d.csv -o - >&-`: Python drops what is printed to a
        # closed stdout, so the results would be lost without a word
        print(f"latentlab {args.command}: error: standard output is closed", file=sys.stderr)
        return 1
    if argv is None:  # a real command-line run, not a call from Python
        _reserve_closed_standard_descriptors()
        _end_on_signals(args.command)
        _enable_compilation_cache()
    with warnings.catch_warnings():
        warnings.showwarning = _short_warning
        try:
            if args.command == "demo":
                run_demo(args.dataset, args.max_components, args.folds, args.missing, args.seed)
                return 0
            run = run_impute if args.command == "impute" else run_compare
            status = run(args)
            if sys.stdout is not None:
                sys.stdout.flush()  # a closed pipe or full disk shows here, not at exit
            return status
        except (InputError, ValueError) as err:
            print(f"latentlab {args.command}: error: {err}", file=sys.stderr)
            return 1
        except BrokenPipeError:
            # e.g. `latentlab impute d.csv -o - | head`: the reader left; stop quietly
            _discard_stdout()
            return 141  # 128 + SIGPIPE, what `cat` reports in the same pipe
        except OSError as err:
            # files are reported above, by name (InputError); what is left is writing
            # standard output, e.g. `-o - > /dev/full`
            reason = err.strerror or str(err)
            problem = f"cannot write standard output: {reason}"
            if err.filename is not None:  # not expected: name the file
                problem = f"{err.filename!r}: {reason}"
            print(f"latentlab {args.command}: error: {problem}", file=sys.stderr)
            _discard_stdout()
            return 1


if __name__ == "__main__":
    sys.exit(main())
