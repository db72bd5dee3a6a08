"""A memory-mapped file truncated while a fit reads it gives a ValueError naming the
file, never SIGBUS (reading a mapped page past the end of its file kills the process).

The fits run in subprocesses, so that a read that does touch such a page kills the
subprocess and not pytest.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from latentlab.inference.chunked import RowChunks, check_mapped_file

N, D = 2000, 5
KEPT_ROWS = 100  # the truncated file keeps these rows
KEPT_BYTES = KEPT_ROWS * D * 8

# argv: file, model, "missing" or "complete", and either "partial_fit" or the number of
# chunk reads after which the file is truncated (deterministic: a RowChunks subclass)
FIT_AND_TRUNCATE = textwrap.dedent(
    f"""
    import os, sys
    import numpy as np
    import latentlab
    from latentlab.inference.chunked import RowChunks

    path, model, data, when = sys.argv[1:5]
    rng = np.random.default_rng(0)
    X = rng.normal(size=({N}, {D})) @ rng.normal(size=({D}, {D}))
    if data == "missing":
        X[::5, 1] = np.nan  # 400 rows: more than a chunk, so EM reads them each step
    out = np.memmap(path, dtype=np.float64, mode="w+", shape=X.shape)
    out[:] = X
    out.flush()
    del out
    X = np.memmap(path, dtype=np.float64, mode="r", shape=({N}, {D}))
    est = getattr(latentlab, model)(2, random_state=0)

    if when == "partial_fit":
        est.partial_fit(X[:500])
        os.truncate(path, {KEPT_BYTES})
        est.partial_fit(X[500:1000])
    else:
        class TruncatedAfterReads(RowChunks):
            reads = 0

            def _count(self):
                TruncatedAfterReads.reads += 1
                if TruncatedAfterReads.reads == int(when):
                    os.truncate(path, {KEPT_BYTES})

            def read(self, start, stop):
                rows = super().read(start, stop)
                self._count()
                return rows

            def take(self, rows):
                taken = super().take(rows)
                self._count()
                return taken

        est.fit(TruncatedAfterReads(X, chunk_size=300))
    print("the fit did not notice the truncation")
    """
)


def _fit_and_truncate(tmp_path, model, data, when):
    path = tmp_path / "X.dat"
    done = subprocess.run(
        [sys.executable, "-c", FIT_AND_TRUNCATE, str(path), model, data, str(when)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    # a negative return code is the signal that killed it (SIGBUS: -7)
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ValueError: {path}: the file is {KEPT_BYTES} bytes"), last


@pytest.mark.parametrize(
    "model, data, reads",
    [
        # the first chunked pass (column moments, complete-data sums), read on the host
        ("PPCA", "complete", 1),
        # EM's per-row E-step: reads inside the compiled program, by host callbacks
        ("FactorAnalysis", "missing", 8),
        ("GaussianMixture", "complete", 9),
    ],
)
def test_file_truncated_during_a_chunked_fit_is_a_value_error(tmp_path, model, data, reads):
    _fit_and_truncate(tmp_path, model, data, reads)


@pytest.mark.parametrize("model", ["PPCA", "FactorAnalysis"])
def test_file_truncated_between_partial_fit_chunks_is_a_value_error(tmp_path, model):
    _fit_and_truncate(tmp_path, model, "complete", "partial_fit")


@pytest.fixture
def truncated(tmp_path):
    """A read-only memmap (after a 64-byte header) whose file then lost all rows but
    the first KEPT_ROWS.  Only views are made of it here: nothing reads past the end."""
    path = tmp_path / "X.dat"
    out = np.memmap(path, dtype=np.float64, mode="w+", offset=64, shape=(N, D))
    out[:] = 1.0
    out.flush()
    del out
    X = np.memmap(path, dtype=np.float64, mode="r", offset=64, shape=(N, D))
    os.truncate(path, 64 + KEPT_BYTES)
    return path, X


def test_rows_within_the_truncated_file_pass(truncated):
    _, X = truncated
    check_mapped_file(X[:KEPT_ROWS])
    check_mapped_file(X[:KEPT_ROWS, 1])
    check_mapped_file(np.asarray(X)[:KEPT_ROWS].T)  # a plain view of the memmap
    check_mapped_file(np.zeros((N, D)))  # not mapped


@pytest.mark.parametrize(
    "rows", [slice(0, KEPT_ROWS + 1), slice(KEPT_ROWS - 10, KEPT_ROWS + 10, 2), slice(None)]
)
def test_rows_past_the_end_of_the_file_are_refused_before_reading(truncated, rows):
    path, X = truncated
    last_row = np.arange(N)[rows][-1]
    needed = 64 + (last_row + 1) * D * 8
    with pytest.raises(ValueError, match=f"the file is {64 + KEPT_BYTES} bytes") as info:
        check_mapped_file(np.asarray(X)[rows])
    assert str(info.value).startswith(f"{path}: ")
    assert f"need {needed}" in str(info.value)
    with pytest.raises(ValueError, match="truncated"):  # the reads of every chunked route
        RowChunks(X, chunk_size=300).read(0, 300)
