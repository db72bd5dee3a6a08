"""Test-suite setup: one persistent compilation cache for the whole suite.

latentlab caches compiled XLA programs (see ``latentlab._cache``). Pointing the suite's
cache into pytest's own cache directory (``.pytest_cache/d/jax-cache``, git-ignored and
emptied by ``--cache-clear``) lets the xdist workers, and the interpreters the tests
start, share compiled programs instead of each compiling them, without writing into
the user's home. The environment is set here, before any test module imports latentlab.
"""

import os


def pytest_configure(config):
    root = os.environ.get("LATENTLAB_SUITE_CACHE")  # set below, seen by xdist workers
    if root is None:
        if "LATENTLAB_CACHE_DIR" in os.environ or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
            return  # the caller chose a cache (or none) already
        try:
            root = str(config.cache.mkdir("jax-cache"))
        except (AttributeError, OSError):
            # No cache plugin (-p no:cacheprovider) or a read-only checkout: latentlab
            # then uses its default directory, or none when that is unusable either.
            return
        os.environ["LATENTLAB_SUITE_CACHE"] = root
    # one subfolder per xdist worker: workers never read each other's entries while
    # they are being written (the interpreters a test starts share their worker's)
    path = os.path.join(root, os.environ.get("PYTEST_XDIST_WORKER", "main"))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return
    os.environ["LATENTLAB_CACHE_DIR"] = path
