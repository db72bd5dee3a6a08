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

These settings are process-wide JAX options: they are changed only while the directory
is latentlab's, only from JAX's defaults, and put back when latentlab's cache is
switched off.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading

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
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        return str(err)
    return None


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
        for name, (default, ours) in _THRESHOLDS.items():
            if name not in _saved and getattr(jax.config, name) == default:
                _saved[name] = default
                jax.config.update(name, ours)
    else:
        for name, value in _saved.items():
            jax.config.update(name, value)
        _saved.clear()
    changed = jax.config.jax_compilation_cache_dir != path
    jax.config.update("jax_compilation_cache_dir", path)
    _ours = path
    if changed:
        _reset_jax_cache()


def enable_compilation_cache() -> None:
    """Persist compiled XLA programs in :func:`default_cache_dir`, unless the user
    configured a JAX cache of their own; an unusable directory means no cache
    (logged at debug level on the ``latentlab`` logger)."""
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
        If ``path`` is not a path, or the directory cannot be created or written.

    Notes
    -----
    Whoever can write to the directory can change the programs your process runs: keep
    it private. Deleting it is always safe; programs are compiled again.
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
            problem = _usable(path)
            if problem is not None:
                raise ValueError(f"Cannot use {path!r} as the compilation cache: {problem}")
            _point_jax_at(path)
        _configured = True
