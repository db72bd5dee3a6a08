"""Writing files whole or not at all: the one writer behind every file latentlab writes
(:func:`latentlab.io.save` and the command line's outputs).

A regular file, or a path that does not exist yet, is written to a temporary file in the
same directory, flushed to disk, and renamed over the target (``os.replace``, atomic on
POSIX) only once it is complete.  An exception, an interrupt or a crash while writing
leaves the old file as it was (or no file), and no temporary file unless the process was
killed outright (SIGKILL, or SIGTERM with no handler) or the machine stopped.  Several
files written together are renamed one after the other once all of them are written; a
signal handler that ends the process waits for the last rename through
:func:`after_renames` (the command line's does), so an interrupt leaves either every old
file or every new one.

Anything else that already exists -- a FIFO, a terminal, ``/dev/null``, or a descriptor
such as ``/dev/stdout`` or ``/dev/fd/3`` -- is opened and written into: renaming a file
over it would cut off whoever reads it (and, for root, replace ``/dev/null``).  (A socket
cannot be opened: writing to one fails, naming it.)

Permissions: a replaced file keeps its permission bits (``0o777``; set-user-ID,
set-group-ID and sticky bits are dropped); a new file gets ``0o666`` less the umask, as
``open()`` would give it.  The umask is applied by the kernel when the temporary file is
created, never read by changing it (``os.umask`` is process-wide, a race for threads).
Like any writer that renames, replacing a file gives it a new inode: hard links to the
old one keep the old contents.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable
from typing import IO, Any

__all__ = ["after_renames", "discard_unfinished", "write_file", "write_files"]

# temporary files created and not yet renamed: what discard_unfinished removes when a
# signal handler ends the process without unwinding (latentlab.cli)
_unfinished: set[str] = set()
# how many batches of files written together are being renamed (threads may write at
# once), and what waits for the last rename
_renaming = 0
_after_renaming: list[Callable[[], object]] = []

# where Linux lists a process's open descriptors; /dev/fd and /dev/stdout lead there
_DESCRIPTOR_DIRECTORY = re.compile(r"/proc/(self|thread-self|\d+)(/task/\d+)?/fd|/dev/fd")
# the most symbolic links followed in a row, as Linux's limit
_MAX_LINKS = 40

Target = str | os.PathLike | IO[Any]
Writer = Callable[[IO[Any]], object]


def write_file(target: Target, write: Writer, *, text: bool = False) -> None:
    """Write ``target`` with ``write(handle)``, replacing it only once it is complete.

    Parameters
    ----------
    target : path-like or open stream
        The file to write (see the module docstring for which paths are replaced and
        which are written into), or an open stream such as ``sys.stdout``.
    write : callable
        Called once with a handle open for writing; writes the whole contents.
    text : bool, default=False
        Open the handle as UTF-8 text (newlines written as given) instead of binary.

    Raises
    ------
    OSError
        Whatever writing raised (or ``write`` raised), naming ``target``.
    """
    write_files([(target, write)], text=text)


def write_files(outputs: Iterable[tuple[Target, Writer]], *, text: bool = False) -> None:
    """Write several files with :func:`write_file`'s rule, all or none replaced.

    Every file that is replaced is written to its temporary file first; then the files
    written into and the streams; only then are the temporary files renamed over their
    targets.  So a failure while writing any of them (a full disk, a closed pipe)
    replaces no file.
    """
    into, replaced = [], []
    for target, write in outputs:
        (into if _writes_into(target) else replaced).append((target, write))
    staged: list[tuple[str, str, Target]] = []  # (temporary file, file, target as given)
    try:
        for target, write in replaced:
            with _naming(target):
                real = os.path.realpath(target)  # through links: replace the file, not a link
                staged.append((_stage(real, write, text), real, target))
        for target, write in into:
            with _naming(target):
                _write_into(target, write, text)
        with _renaming_together():
            for temp, real, target in staged:
                with _naming(target):
                    os.replace(temp, real)
                _unfinished.discard(temp)
    except BaseException:
        for temp, _, _ in staged:
            _remove(temp)
        raise
    for directory in {os.path.dirname(real) for _, real, _ in staged}:
        _sync_directory(directory)


def after_renames(action: Callable[[], object]) -> None:
    """Run ``action`` now or, while files written together are being renamed over their
    targets, right after the last rename: for a signal handler that ends the process,
    which would otherwise leave some of them replaced and others not.  (Blocking the
    signal during the renames would not do: ``pthread_sigmask`` blocks it for one
    thread, another of the process's threads receives it, and Python runs the handler
    in the main thread all the same.)"""
    if _renaming:
        _after_renaming.append(action)
    else:
        action()


def discard_unfinished() -> None:
    """Remove the temporary files of writes still in progress (for a signal handler
    that ends the process at once; an exception removes them on its own)."""
    for temp in list(_unfinished):
        _remove(temp)


def _is_stream(target) -> bool:
    return hasattr(target, "write")


def _writes_into(target) -> bool:
    """Whether ``target`` is written into rather than replaced: a stream, an existing
    file that is not a regular file, or a path that names an open descriptor."""
    if _is_stream(target):
        return True
    try:
        if not stat.S_ISREG(os.stat(target).st_mode):
            return True
    except OSError:  # no such file yet (or not reachable: creating it will say why)
        return False
    return _names_descriptor(target)


def _names_descriptor(path) -> bool:
    """Whether ``path`` leads through links to ``/proc/<pid>/fd/<n>``, as
    ``/dev/stdout`` does: the file behind it may be a shell's redirection, and a rename
    would replace the file while the shell's descriptor still pointed at the old one."""
    path = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        directory = os.path.realpath(os.path.dirname(path))
        if _DESCRIPTOR_DIRECTORY.fullmatch(directory):
            return True
        path = os.path.join(directory, os.path.basename(path))
        if not os.path.islink(path):
            return False
        path = os.path.join(directory, os.readlink(path))
    return False


def _write_into(target, write: Writer, text: bool) -> None:
    """Write into a stream, a special file or a descriptor, without a temporary file.

    A path is opened for appending: a FIFO or device has no end to append to, and a
    descriptor then continues after what its owner (a shell's ``>>``) already wrote.
    """
    if _is_stream(target):
        write(target)
        target.flush()  # a full disk or a closed pipe shows now, not at exit
        return
    with open(target, "a" if text else "ab", **_text_options(text)) as handle:
        write(handle)


def _stage(target: str, write: Writer, text: bool) -> str:
    """Write the contents for ``target`` to a new temporary file beside it, flushed to
    disk and given the permissions ``target`` will have; returns its path."""
    try:
        keep_mode = stat.S_IMODE(os.stat(target).st_mode) & 0o777
    except FileNotFoundError:
        keep_mode = None
    # a new file: 0o666, less the umask (applied by the kernel); a replacement is
    # private until written, then gets the old file's mode
    fd, temp = _create_temporary(target, 0o666 if keep_mode is None else 0o600)
    try:
        with os.fdopen(fd, "w" if text else "wb", **_text_options(text)) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())  # the contents are on disk before the rename
        if keep_mode is not None:
            os.chmod(temp, keep_mode)
    except BaseException:
        _remove(temp)
        raise
    return temp


def _create_temporary(target: str, mode: int) -> tuple[int, str]:
    """A new, empty file ``.<name>.<random>.tmp`` beside ``target``: its descriptor and path."""
    directory, name = os.path.split(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        temp = os.path.join(directory, f".{name[:64]}.{secrets.token_hex(4)}.tmp")
        _unfinished.add(temp)  # before it exists: an interrupt once it does finds it
        try:
            return os.open(temp, flags | getattr(os, "O_BINARY", 0), mode), temp
        except FileExistsError:
            _unfinished.discard(temp)
        except BaseException:
            _unfinished.discard(temp)
            raise


def _remove(temp: str) -> None:
    _unfinished.discard(temp)
    with contextlib.suppress(OSError):
        os.unlink(temp)


def _text_options(text: bool) -> dict:
    return {"encoding": "utf-8", "newline": ""} if text else {}


@contextlib.contextmanager
def _naming(target):
    """Re-raise an ``OSError`` naming ``target``, not a temporary file (a stream's
    errors pass unchanged)."""
    try:
        yield
    except OSError as err:
        if _is_stream(target):
            raise
        raise OSError(err.errno, err.strerror or str(err), os.fspath(target)) from err


@contextlib.contextmanager
def _renaming_together():
    """Mark the renames of files written together, then run what :func:`after_renames`
    put off."""
    global _renaming
    _renaming += 1
    try:
        yield
    finally:
        _renaming -= 1
        while not _renaming and _after_renaming:
            _after_renaming.pop(0)()


def _sync_directory(directory: str) -> None:
    """Flush a directory's entries to disk, so that after a crash its name holds the
    new file, not the old or none (not possible everywhere: skipped there)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
