"""The persistent XLA compilation cache shared by the library and the command line.

JAX keeps one compilation cache per process, configured by the global option
``jax_compilation_cache_dir``. latentlab points it at a directory of its own the first
time it is about to compile (:func:`ensure_compilation_cache`, called when an
estimator enters its precision context), unless the user configured a JAX cache
themselves. :func:`set_cache_dir` moves or switches it off at run time.

Pitfalls of JAX 0.12's cache (``jax/_src/compilation_cache.py``, ``compiler.py``) that
shape this module:

- The cache object is created at the first compile that finds a directory set, and is
  then kept for the life of the process: a later change of ``jax_compilation_cache_dir``
  is ignored until ``reset_cache()`` (public in
  ``jax.experimental.compilation_cache.compilation_cache``). Compiles made while no
  directory is set do not initialise it, so setting the directory late is fine; moving
  it or switching it off needs the reset, which :func:`set_cache_dir` does.
- Only programs that took at least ``jax_persistent_cache_min_compile_time_secs``
  (default 1 s) to compile are written. Measured on this project's CPU runner, a
  session of fits (PPCA, FA, BPCA, GMM, PCA, pLSA, compare, MAP) compiled 245 programs
  with a median of 0.025 s, 90th percentile 0.08 s, and only 3 over 1 s, which together
  were a third of the 16 s spent compiling: with JAX's default almost nothing of
  latentlab's would be cached. Reading an entry back costs ~1 ms, less than the
  fastest compile, so the threshold is 0 (cache every program).
- Entries smaller than ``jax_persistent_cache_min_entry_size_bytes`` are not written;
  its default 0 lets JAX substitute a filesystem-dependent minimum at initialisation.
  latentlab's programs are small (kilobytes), so it is set to -1: no minimum, and no
  substitution.
- ``jax_persistent_cache_enable_xla_caches`` is left at JAX's default, which on GPUs
  keeps XLA's per-fusion autotuning results in a subdirectory of the cache (autotuning
  is much of a GPU compile) and does nothing on CPUs.

- Entries are written in place without a lock unless the cache has a size bound, which
  makes JAX take a file lock (``filelock``) around reads and writes: latentlab bounds
  it at 2 GiB (least recently used entries are evicted), so processes sharing the
  directory never read a half-written entry.
- JAX files an entry under its key (a hash of the program, its options, the versions
  and the device) but does not check, on reading, that the content is that key's
  program: it deserializes whatever the file holds. An entry swapped with another's
  (a fuzzer did it) loads another program, and every process fails inside JAX
  (``AssertionError: (13, 6)``, the loaded program's outputs against those expected;
  ``pxla.get_out_shardings_from_executable``) until the directory is deleted; a
  truncated one fails to decompress on every read, and JAX never rewrites it. So
  latentlab opens its own directory through :class:`_SealedCache`, which stores each
  entry behind a SHA-256 of its key and content and treats an entry that fails the
  check as a miss: it warns, deletes it, and JAX compiles and writes it afresh. JAX has
  no option for a cache class; :func:`_seal_latentlab_entries` wraps the function
  (``get_file_cache``) that JAX calls to open a directory, for latentlab's only.
- Whoever can write to the directory can hand the process code to run (JAX's
  ``set_cache_dir`` warns of it; the seal is no defence, anyone can compute it). So a
  directory that other users can write is refused (:func:`_open_to_others`): a warning
  and no cache when it comes from the environment, a ValueError from
  :func:`set_cache_dir`. latentlab creates its directory 0700 and its entries 0600.

These settings are process-wide JAX options: they are changed only while the directory
is latentlab's, only from JAX's defaults, and put back when latentlab's cache is
switched off.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import tempfile
import threading
import warnings

_log = logging.getLogger("latentlab")

_lock = threading.Lock()
# Whether latentlab's one-time setup has run (or set_cache_dir took over from it).
_configured = False
# The directory latentlab put into JAX's config, to tell it from a user's own.
_ours: str | None = None
# JAX options latentlab changed, with the values to put back when its cache goes off.
_saved: dict[str, object] = {}

# JAX's defaults for the two thresholds; only these are replaced (a value the user set
# through JAX, e.g. JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS, is kept).
_THRESHOLDS = {
    "jax_persistent_cache_min_compile_time_secs": (1.0, 0.0),
    "jax_persistent_cache_min_entry_size_bytes": (0, -1),
    # A size bound switches on JAX's LRU eviction, and with it a file lock around every
    # read and write: without it JAX writes entries in place, unlocked, so a process
    # can read another's half-written entry (the suite's parallel workers crashed in
    # the cache, once in a write, once after such reads).  Needs ``filelock``.
    "jax_compilation_cache_max_size": (-1, 2 << 30),
}


def default_cache_dir() -> str | None:
    """The cache directory latentlab would use: ``LATENTLAB_CACHE_DIR`` if set (``""``
    switches the cache off and gives None), else ``$XDG_CACHE_HOME/latentlab/jax``
    (``~/.cache/latentlab/jax`` when ``XDG_CACHE_HOME`` is unset)."""
    path = os.environ.get("LATENTLAB_CACHE_DIR")
    if path == "":
        return None
    if path is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        path = os.path.join(base, "latentlab", "jax")
    return os.path.expanduser(path)


def _usable(path: str) -> str | None:
    """None when ``path`` can hold the cache, else why not. Creating the directory is
    not enough: an existing read-only one would make JAX warn on every write."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)  # the mode applies to the leaf only
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        return str(err)
    return None


def _warn(message: str) -> None:
    """A RuntimeWarning shown at the caller's line, outside latentlab and JAX."""
    import jax

    inside = (os.path.dirname(__file__), os.path.dirname(jax.__file__))
    warnings.warn(message, RuntimeWarning, skip_file_prefixes=tuple(d + os.sep for d in inside))


def _private_group(gid: int) -> bool:
    """Whether group ``gid`` is this user's own (a "user private group": named after
    the user and listing nobody else), the usual owner of files made under umask 002."""
    import grp
    import pwd

    try:
        group, user = grp.getgrgid(gid), pwd.getpwuid(os.geteuid())
    except KeyError:
        return False
    return group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _writers(st: os.stat_result, *, sticky_protects: bool) -> str | None:
    """Who other than this user (or root) can write into a directory, or None."""
    if st.st_uid not in (os.geteuid(), 0):
        return f"is owned by another user (uid {st.st_uid})"
    # In a sticky directory (/tmp) others cannot rename or delete what is ours, but
    # they can still create files there, such as an entry under a predictable key.
    if sticky_protects and st.st_mode & stat.S_ISVTX:
        return None
    if st.st_mode & stat.S_IWOTH:
        return "is writable by every user"
    if st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid):
        return "is writable by its group"
    return None


def _open_to_others(path: str) -> str | None:
    """Why other users could put entries into the cache directory ``path``, or None:
    they can write to it, or to a directory above it (there they could replace it)."""
    if os.name != "posix":
        return None  # ownership and modes mean something else under Windows' ACLs
    real = os.path.realpath(path)
    who = _writers(os.stat(real), sticky_protects=False)
    if who is not None:
        return f"{real} {who}"
    above = os.path.dirname(real)
    while True:
        who = _writers(os.stat(above), sticky_protects=True)
        if who is not None:
            return f"{above}, a directory above it, {who}"
        if os.path.dirname(above) == above:
            return None
        above = os.path.dirname(above)


def _untrusted(path: str) -> str | None:
    """Why the existing directory ``path`` cannot be trusted with the cache, or None."""
    who = _open_to_others(path)
    if who is not None:
        return (
            f"{who}, and whoever can write to the cache can change the programs this "
            f"process runs; make it private (chmod go-w) or choose another directory"
        )
    return None


_MAGIC = b"latentlab-sealed-1\n"


def _seal_digest(key: str, content: bytes) -> bytes:
    """SHA-256 of an entry's key and content: binds the content to its file name."""
    digest = hashlib.sha256(key.encode())
    digest.update(b"\0")
    digest.update(content)
    return digest.digest()


class _SealedCache:
    """JAX's file cache for latentlab's directory, with each entry sealed to its key.

    ``put`` stores ``magic + SHA-256(key, content) + content`` (and makes the file
    0600); ``get`` returns the content only when the seal matches the key asked for.
    An entry that fails the check (swapped, truncated, altered) is a miss: a warning
    names the directory, the entry is deleted, and JAX compiles the program again and
    writes it afresh. An entry without the seal (written before latentlab sealed them)
    is replaced the same way, without a warning.
    """

    def __init__(self, base):
        self._base = base  # jax._src.lru_cache.LRUCache

    @property
    def _path(self):  # JAX logs it on reset_cache
        return self._base._path

    def _locked(self):
        """JAX's file lock, when it takes one (a size bound): the check and the
        deletion happen under it, so a process never deletes an entry just rewritten."""
        if getattr(self._base, "eviction_enabled", False):
            return self._base.lock.acquire(timeout=self._base.lock_timeout_secs)
        return contextlib.nullcontext()

    def _entry(self, key: str) -> str:
        return os.path.join(str(self._base._path), f"{key}-cache")  # lru_cache.py's name

    def get(self, key: str) -> bytes | None:
        with self._locked():
            sealed = self._base.get(key)
            if sealed is None:
                return None
            head = len(_MAGIC) + hashlib.sha256().digest_size
            content = sealed[head:]
            if not sealed.startswith(_MAGIC):
                _log.debug("latentlab: replacing unsealed cache entry %s", key)
            elif sealed[len(_MAGIC) : head] == _seal_digest(key, content):
                return content
            else:
                _warn(
                    f"latentlab: the compilation cache entry {key} in "
                    f"{os.path.abspath(self._base._path)} does not hold the program it is "
                    "filed under (swapped with another, truncated or altered); it was "
                    "deleted and the program compiled again. If this recurs, delete the "
                    "directory (always safe: programs are compiled again), and check who "
                    "else writes to it."
                )
            with contextlib.suppress(OSError):
                os.remove(self._entry(key))
            return None

    def put(self, key: str, content: bytes) -> None:
        with self._locked():
            self._base.put(key, _MAGIC + _seal_digest(key, content) + content)
            with contextlib.suppress(OSError):
                os.chmod(self._entry(key), 0o600)


def _seal_latentlab_entries() -> None:
    """Make JAX open latentlab's directory (``_ours``, read when JAX opens it) through
    :class:`_SealedCache`; other directories are opened as JAX would. Once per
    process."""
    from jax._src import compilation_cache as jax_cache

    open_directory = getattr(jax_cache, "get_file_cache", None)
    if open_directory is None:
        _log.debug("latentlab: this JAX has no get_file_cache; cache entries unsealed")
        return
    if getattr(open_directory, "latentlab_sealed", False):
        return

    def get_file_cache(path):
        opened = open_directory(path)
        if opened is None or _ours is None or path != _ours:
            return opened
        cache, where = opened
        verifying = getattr(jax_cache, "VerificationCache", ())
        if isinstance(cache, verifying):  # jax_compilation_cache_check_contents
            cache._base_cache = _SealedCache(cache._base_cache)
            return cache, where
        return _SealedCache(cache), where

    get_file_cache.latentlab_sealed = True
    jax_cache.get_file_cache = get_file_cache


def _reset_jax_cache() -> None:
    """Make JAX open the directory now configured at its next compile (see above)."""
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()


def _point_jax_at(path: str | None) -> None:
    """Put ``path`` (None: no cache) into JAX's config as latentlab's own directory.
    Call with ``_lock`` held."""
    import jax

    global _ours
    if path is not None:
        _seal_latentlab_entries()
        for name, (default, ours) in _THRESHOLDS.items():
            if name not in _saved and getattr(jax.config, name) == default:
                _saved[name] = default
                jax.config.update(name, ours)
    else:
        for name, value in _saved.items():
            jax.config.update(name, value)
        _saved.clear()
    jax.config.update("jax_compilation_cache_dir", path)
    _ours = path
    # also when the directory is unchanged: JAX may hold it open unsealed
    _reset_jax_cache()


def enable_compilation_cache() -> None:
    """Persist compiled XLA programs in :func:`default_cache_dir`, unless the user
    configured a JAX cache of their own. An unusable directory means no cache (logged
    at debug level on the ``latentlab`` logger); one that other users can write means
    no cache and a warning (not an error: a fit should not fail for its cache)."""
    global _configured
    with _lock:
        _configured = True
        path = default_cache_dir()
        if path is None:
            return
        import jax

        if jax.config.jax_compilation_cache_dir:
            return  # the user's own cache wins
        problem = _usable(path)
        if problem is not None:
            _log.debug("latentlab: running without a compilation cache (%s)", problem)
            return
        problem = _untrusted(path)
        if problem is not None:
            _warn(
                f"latentlab: running without a compilation cache: {problem} "
                "(LATENTLAB_CACHE_DIR, latentlab.set_cache_dir)."
            )
            return
        _point_jax_at(path)


def ensure_compilation_cache() -> None:
    """:func:`enable_compilation_cache` once per process, before latentlab's first
    compile; after that a flag test, cheap enough for every estimator call."""
    if not _configured:
        enable_compilation_cache()


def set_cache_dir(path) -> None:
    """Move latentlab's persistent compilation cache, or switch it off, at run time.

    JAX has one compilation cache per process, so this sets JAX's
    ``jax_compilation_cache_dir`` for every program the process compiles, yours
    included. It takes effect at the next compile, also after programs were compiled
    and cached elsewhere (JAX's cache is reset so that it opens the new directory).

    Parameters
    ----------
    path : str, os.PathLike or None
        The directory (created if missing; ``~`` is expanded). It replaces a directory
        you configured for JAX yourself. None (or ``""``) switches off the cache
        latentlab set up, and stops latentlab from setting one up later in this
        process; a directory you configured for JAX yourself (``JAX_COMPILATION_CACHE_DIR``
        or ``jax.config.update("jax_compilation_cache_dir", ...)``) stays in use.

    Raises
    ------
    ValueError
        If ``path`` is not a path, or the directory cannot be created or written, or
        other users can write to it (world-writable, ``/tmp`` itself included;
        group-writable, unless the group is your own private one; owned by someone
        else) or replace it (it lies in a directory they can write, without the
        sticky bit).

    Notes
    -----
    Whoever can write to the directory can change the programs your process runs: keep
    it private (latentlab creates it 0700, entries 0600). An entry found not to hold
    the program it is filed under is deleted with a warning and compiled again.
    Deleting the directory is always safe; programs are compiled again.
    """
    global _configured
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"set_cache_dir expects a directory path or None, got {path!r}")
    if path is not None:
        path = os.path.expanduser(os.fspath(path)) or None
    with _lock:
        if path is None:
            import jax

            if _ours is not None and jax.config.jax_compilation_cache_dir == _ours:
                _point_jax_at(None)
        else:
            problem = _usable(path) or _untrusted(path)
            if problem is not None:
                raise ValueError(f"Cannot use {path!r} as the compilation cache: {problem}")
            _point_jax_at(path)
        _configured = True
