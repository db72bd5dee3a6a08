"""The persistent XLA compilation cache shared by the library and the command line."""

import logging
import os

_log = logging.getLogger("latentlab")


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


def enable_compilation_cache() -> None:
    """Persist compiled XLA programs in :func:`default_cache_dir`, unless the user
    configured a JAX cache of their own; an unusable directory means no cache."""
    path = default_cache_dir()
    if path is None:
        return
    try:
        import jax

        if jax.config.jax_compilation_cache_dir:
            return  # the user's own cache wins
        os.makedirs(path, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except (OSError, AttributeError) as err:
        _log.debug("latentlab: running without a compilation cache (%s)", err)
