"""The shared compilation-cache helper (issue 14), each check in a fresh interpreter."""

import os
import subprocess
import sys

_PROBE = (
    "import jax\n"
    "from latentlab._cache import enable_compilation_cache\n"
    "enable_compilation_cache()\n"
    "print(repr(jax.config.jax_compilation_cache_dir))\n"
)


def _run(**env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION")}
    full.update(env)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=full, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_cache_dir_from_env(tmp_path):
    path = tmp_path / "cache"
    assert _run(LATENTLAB_CACHE_DIR=str(path)) == repr(str(path))
    assert path.is_dir()


def test_empty_env_switches_cache_off(tmp_path):
    assert _run(LATENTLAB_CACHE_DIR="") == "None"


def test_users_own_jax_cache_is_kept(tmp_path):
    mine = str(tmp_path / "mine")
    assert _run(LATENTLAB_CACHE_DIR=str(tmp_path / "ours"), JAX_COMPILATION_CACHE_DIR=mine) == repr(
        mine
    )
    assert not (tmp_path / "ours").exists()


def test_unwritable_dir_runs_without_cache():
    assert _run(LATENTLAB_CACHE_DIR="/proc/latentlab-no-such-dir") == "None"
