"""The one writer behind every file latentlab writes (``latentlab._files``): a file is
replaced only once complete, special files are written into, permissions are kept
without set-user-ID bits, and an interrupt leaves no temporary file."""

import errno
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading

import pytest

from latentlab import _files
from latentlab._files import write_file, write_files


def _write_bytes(data: bytes):
    def write(handle):
        handle.write(data)

    return write


def _failing_after(data: bytes, error: BaseException):
    def write(handle):
        handle.write(data)
        handle.flush()  # the partial contents reach the disk
        raise error

    return write


@pytest.mark.parametrize(
    "error",
    [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()],
    ids=["disk-full", "interrupt"],
)
def test_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, error):
    target = tmp_path / "model.npz"
    target.write_bytes(b"old contents")
    with pytest.raises(type(error)):
        write_file(target, _failing_after(b"new, half", error))
    assert target.read_bytes() == b"old contents"
    assert sorted(tmp_path.iterdir()) == [target]
    assert not _files._unfinished


def test_failed_write_of_a_new_file_creates_nothing(tmp_path):
    with pytest.raises(OSError):
        write_file(tmp_path / "new.csv", _failing_after(b"half", OSError(errno.EIO, "I/O")))
    assert list(tmp_path.iterdir()) == []


def test_errors_name_the_target_not_the_temporary_file(tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(OSError) as info:
        write_file(target, _failing_after(b"x", OSError(errno.ENOSPC, "No space left")))
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    with pytest.raises(FileNotFoundError) as info:
        write_file(tmp_path / "no-folder" / "out.csv", _write_bytes(b"x"))
    assert info.value.filename == str(tmp_path / "no-folder" / "out.csv")


def test_files_written_together_are_replaced_all_or_none(tmp_path):
    first, second = tmp_path / "filled.csv", tmp_path / "std.csv"
    first.write_bytes(b"old 1")
    second.write_bytes(b"old 2")
    outputs = [(first, _write_bytes(b"new 1")), (second, _failing_after(b"n", OSError(28, "")))]
    with pytest.raises(OSError):
        write_files(outputs)
    assert first.read_bytes() == b"old 1" and second.read_bytes() == b"old 2"
    assert sorted(tmp_path.iterdir()) == [first, second]
    write_files([(first, _write_bytes(b"new 1")), (second, _write_bytes(b"new 2"))])
    assert first.read_bytes() == b"new 1" and second.read_bytes() == b"new 2"


def test_an_exit_asked_for_during_the_renames_waits_for_the_last(tmp_path, monkeypatch):
    # a signal handler that ends the process goes through after_renames: one arriving
    # between two renames must not leave one output new and the other old
    targets = [tmp_path / "a.csv", tmp_path / "b.csv"]
    replaced, seen_by_exit = [], []
    real_replace = os.replace

    def replace(temp, target):
        real_replace(temp, target)
        replaced.append(target)
        if len(replaced) == 1:  # the "signal" arrives after the first rename
            _files.after_renames(lambda: seen_by_exit.append(len(replaced)))

    monkeypatch.setattr(os, "replace", replace)
    write_files([(t, _write_bytes(b"x")) for t in targets])
    assert seen_by_exit == [2]
    _files.after_renames(lambda: seen_by_exit.append("now"))  # no rename under way
    assert seen_by_exit == [2, "now"]


def test_permissions_new_file_umask_and_replaced_file_without_setuid(tmp_path):
    old_umask = os.umask(0o027)  # this test's own process; restored below
    try:
        write_file(tmp_path / "new.csv", _write_bytes(b"x"))
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o640
    for before, after in [(0o4755, 0o755), (0o2750, 0o750), (0o600, 0o600)]:
        target = tmp_path / f"existing-{before:o}.csv"
        target.write_bytes(b"old")
        target.chmod(before)
        write_file(target, _write_bytes(b"new"))
        assert stat.S_IMODE(target.stat().st_mode) == after
        assert target.read_bytes() == b"new"


def test_a_symbolic_link_is_followed_and_kept(tmp_path):
    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_bytes(b"old")
    link.symlink_to(real)
    write_file(link, _write_bytes(b"new"))
    assert link.is_symlink() and real.read_bytes() == b"new"


def test_a_fifo_is_written_into_not_replaced(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_file(fifo, _write_bytes(b"a,b\n1,2\n"))
    reader.join(timeout=30)
    assert received == [b"a,b\n1,2\n"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_dev_null_stays_a_character_device():
    write_file(os.devnull, _write_bytes(b"discarded"))
    write_file(os.devnull, lambda handle: handle.write("discarded"), text=True)
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_descriptor_path_is_written_into(tmp_path):
    # /dev/fd/N behind a shell's `>>`: appended to, not replaced by a rename
    log = tmp_path / "log.txt"
    log.write_bytes(b"earlier\n")
    with open(log, "ab") as handle:
        write_file(f"/dev/fd/{handle.fileno()}", _write_bytes(b"a,b\n"))
    assert log.read_bytes() == b"earlier\na,b\n"


INTERRUPTED_WRITE = """
import os, signal, sys
from latentlab._files import write_file
from latentlab.cli import _end_on_signals

_end_on_signals("impute")

def write(handle):
    handle.write(b"half of the new contents")
    handle.flush()
    os.kill(os.getpid(), signal.SIGINT)
    while True:  # the handler runs here, between two bytecodes
        pass

write_file(sys.argv[1], write)
"""


def test_the_command_lines_interrupt_removes_the_temporary_file(tmp_path):
    target = tmp_path / "filled.csv"
    target.write_bytes(b"old contents")
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(INTERRUPTED_WRITE), str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 128 + signal.SIGINT
    assert result.stderr == "latentlab impute: interrupted by SIGINT\n"
    assert target.read_bytes() == b"old contents"
    assert sorted(tmp_path.iterdir()) == [target]


def test_a_pipe_behind_dev_fd_is_written_into():
    # process substitution, `-o >(gzip > f.gz)`, gives the program /dev/fd/63: a pipe
    read_end, write_end = os.pipe()
    try:
        write_file(f"/dev/fd/{write_end}", _write_bytes(b"a,b\n1,2\n"))
        os.close(write_end)
        write_end = None
        with os.fdopen(read_end, "rb") as reader:
            read_end = None
            assert reader.read() == b"a,b\n1,2\n"
    finally:
        for fd in (read_end, write_end):
            if fd is not None:
                os.close(fd)
