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
- Files run longest first.  pytest-xdist's ``--dist loadfile`` hands a worker the next
  file in the queue when it is done with one; its default queue orders files by their
  number of tests, which puts the files with few but slow tests (subprocesses, fits on
  real data, notebooks) last, and one worker then runs them alone while the other
  idles.  With ``--no-loadscope-reorder`` (``pyproject.toml``) the queue is the
  collection order, which :func:`pytest_collection_modifyitems` sets: the files of
  :data:`SLOW_FILES` first, slowest first, then the rest by their number of tests, so
  the last file a worker starts is a short one (longest-processing-time-first).
"""

import os
from collections import Counter

import pytest

MAPPINGS_LIMIT = 30_000


UNOPTIMISED = "--xla_backend_optimization_level=0"

# The slowest test files, slowest first: every file that took a worker 45 s or more in
# a fresh-clone run on 2 cores (2026-11-29: 273 s for the first).  A file missing here only runs
# later; the order matters most for the first few.
SLOW_FILES = (
    "test_sklearn_suites.py",
    "test_plsa.py",
    "test_quasi_newton_phase.py",
    "test_standard_errors.py",  # 291 s in the fresh-clone run of 2026-11-29 (c8a522a)
    "test_gmm_missing.py",
    "test_bpca.py",
    "test_generative_contract.py",
    "test_padding.py",
    "test_factor_analysis.py",
    "test_cache.py",
    "test_posterior.py",
    "test_datatree.py",  # new in session 28: ~90 s on 2 workers alone
    "test_supervised_pca.py",
    "test_scale.py",
    "test_examples.py",
    "test_ppca.py",
    "test_fuzz.py",
    "test_gmm.py",
    "test_em_monotone.py",
    "test_sklearn_suites_projections.py",
    "test_sklearn_suites_cluster.py",
    "test_load_validation.py",
    "test_save_load.py",
    "test_cli.py",
    "test_scale_plsa.py",
    "test_spectral.py",
    "test_outputs_are_owned.py",
    "test_autoencoder.py",
    "test_imputer.py",
    "test_compare.py",
    "test_kmeans_estimator.py",
    "test_plots.py",
    "test_vae.py",
    "test_float32.py",
    "test_pls.py",
    "test_devices.py",
)


def pytest_configure(config):
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags and not os.environ.get(
        "LATENTLAB_TEST_OPTIMISED"
    ):
        os.environ["XLA_FLAGS"] = f"{flags} {UNOPTIMISED}".strip()  # before JAX starts
    if "LATENTLAB_CACHE_DIR" in os.environ or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return  # the caller chose a cache (or none) already
    os.environ["LATENTLAB_CACHE_DIR"] = ""


def pytest_collection_modifyitems(config, items):
    """Order the files longest first (see the module docstring); a file's tests keep
    their order.  Deterministic, so every xdist worker collects the same list."""
    files = [item.nodeid.split("::")[0] for item in items]
    tests_per_file = Counter(files)
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    order = {
        path: (rank.get(os.path.basename(path), len(rank)), -tests_per_file[path], path)
        for path in tests_per_file
    }
    items.sort(key=lambda item: order[item.nodeid.split("::")[0]])  # stable


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
