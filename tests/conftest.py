"""Test-suite setup.

- The suite runs without the persistent compilation cache (``LATENTLAB_CACHE_DIR=""``,
  unless the caller chose a cache), so no test depends on what an earlier run left;
  the tests of the cache itself (``tests/test_cache.py``) give their subprocesses a
  cache of their own.
- Each compiled XLA program keeps ~3 memory mappings for as long as JAX caches it, and
  Linux allows a process 65,530 (``vm.max_map_count``).  A worker that runs many test
  files compiles tens of thousands of programs (``test_sklearn_suites.py`` alone takes
  a process to ~20,000 mappings); past the limit XLA's compiler crashed (segfaults in
  ``backend_compile_and_load`` and ``executable.serialize``).  So after any test that
  leaves the process above :data:`MAPPINGS_LIMIT`, JAX's caches are cleared, which
  releases the programs (they are compiled again when next needed).
- XLA compiles machine code without LLVM's optimisations
  (``--xla_backend_optimization_level=0``), unless the caller set that flag or
  ``LATENTLAB_TEST_OPTIMISED=1``.  The suite compiles a few thousand programs and runs
  most of them a handful of times: backend compiles are ~80% of its time, and LLVM's
  passes a quarter to two thirds of each compile (SupervisedPCA's EM program: 2.2 s
  against 0.8 s), more than they save.  XLA's graph-level optimisations are the same
  at every level; the machine code may round differently (another summation order),
  within the tolerances the tests state.
"""

import os

import pytest

MAPPINGS_LIMIT = 30_000


UNOPTIMISED = "--xla_backend_optimization_level=0"


def pytest_configure(config):
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags and not os.environ.get(
        "LATENTLAB_TEST_OPTIMISED"
    ):
        os.environ["XLA_FLAGS"] = f"{flags} {UNOPTIMISED}".strip()  # before JAX starts
    if "LATENTLAB_CACHE_DIR" in os.environ or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return  # the caller chose a cache (or none) already
    os.environ["LATENTLAB_CACHE_DIR"] = ""


def _mappings() -> int:
    try:
        with open(f"/proc/{os.getpid()}/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:  # not Linux: no such limit to watch
        return 0


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    yield
    if _mappings() > MAPPINGS_LIMIT:
        import gc

        import jax

        jax.clear_caches()
        gc.collect()
