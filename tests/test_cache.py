"""The shared compilation-cache helper, each check in a fresh interpreter."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

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


# --- the library sets the cache up itself, before its first compile -------------------

_FIT = """
import json, logging, os, sys, warnings
import jax, jax.monitoring
counts = {"hits": 0, "misses": 0}

def _count(event, **kwargs):
    # JAX 0.12 records a miss only when it writes the entry (compiler.py / compilation_cache.py)
    if event == "/jax/compilation_cache/cache_hits":
        counts["hits"] += 1
    elif event == "/jax/compilation_cache/cache_misses":
        counts["misses"] += 1

jax.monitoring.register_event_listener(_count)
logging.basicConfig(level=logging.WARNING)
logging.getLogger("latentlab").setLevel(logging.DEBUG)
import numpy as np
import latentlab

def entries(path):
    if not os.path.isdir(path):
        return []
    return sorted(f for f in os.listdir(path) if f.endswith("-cache"))

def fit(d, model="PPCA"):
    rng = np.random.default_rng(d)
    X = rng.normal(size=(40, 2)) @ rng.normal(size=(2, d)) + 0.3 * rng.normal(size=(40, d))
    kwargs = {"random_state": 0} if model == "PPCA" else {}
    return float(getattr(latentlab, model)(1, **kwargs).fit(X).score(X))

def state():
    return {
        "dir": jax.config.jax_compilation_cache_dir,
        "min_time": jax.config.jax_persistent_cache_min_compile_time_secs,
        "min_size": jax.config.jax_persistent_cache_min_entry_size_bytes,
        **counts,
    }

out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    exec(sys.argv[1])
out["cache_warnings"] = [str(w.message) for w in caught if "cache" in str(w.message).lower()]
print(json.dumps(out))
"""


def _fit(step, **env):
    """Run ``step`` in a fresh interpreter; its ``out`` dict comes back with stderr."""
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("JAX_", "LATENTLAB_CACHE", "XDG_CACHE"))
    }
    full.update(env)
    # run outside the checkout, so that the installed latentlab is the one imported
    res = subprocess.run(
        [sys.executable, "-c", _FIT, step],
        env=full,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["stderr"] = res.stderr
    return out


_ONE_FIT = "out['score'] = fit(4); out.update(state())"


def _ppca_ml_loglik(d):
    """Tipping & Bishop's closed-form maximum of the PPCA (K=1) log-likelihood per row
    on ``fit(d)``'s data."""
    rng = np.random.default_rng(d)
    X = rng.normal(size=(40, 2)) @ rng.normal(size=(2, d)) + 0.3 * rng.normal(size=(40, d))
    lam = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False, ddof=0)))[::-1]
    sigma2 = lam[1:].mean()
    return -(d * np.log(2 * np.pi) + np.log(lam[0]) + (d - 1) * np.log(sigma2) + d) / 2


def test_second_run_hits_every_entry_the_first_wrote(tmp_path):
    cache = tmp_path / "cache"
    first = _fit(_ONE_FIT, LATENTLAB_CACHE_DIR=str(cache))
    written = sorted(f for f in os.listdir(cache) if f.endswith("-cache"))
    assert first["dir"] == str(cache)
    # latentlab's programs compile in well under JAX's default 1 s: all are kept
    assert (first["min_time"], first["min_size"]) == (0.0, -1)
    assert first["misses"] == len(written) >= 2 and first["hits"] == 0
    second = _fit(_ONE_FIT, LATENTLAB_CACHE_DIR=str(cache))
    assert (second["misses"], second["hits"]) == (0, len(written))
    assert sorted(f for f in os.listdir(cache) if f.endswith("-cache")) == written
    # the programs read back compute what freshly compiled ones do
    assert second["score"] == first["score"]
    assert np.isclose(first["score"], _ppca_ml_loglik(4), rtol=1e-7)
    assert first["cache_warnings"] == second["cache_warnings"] == []


def test_default_dir_follows_xdg_and_env(monkeypatch, tmp_path):
    from latentlab._cache import default_cache_dir

    monkeypatch.delenv("LATENTLAB_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == str(tmp_path / "latentlab" / "jax")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert default_cache_dir() == str(tmp_path / "h" / ".cache" / "latentlab" / "jax")
    monkeypatch.setenv("LATENTLAB_CACHE_DIR", "~/c")
    assert default_cache_dir() == str(tmp_path / "h" / "c")
    monkeypatch.setenv("LATENTLAB_CACHE_DIR", "")
    assert default_cache_dir() is None


def test_empty_env_writes_nothing_until_set_cache_dir(tmp_path):
    home, later = tmp_path / "home", tmp_path / "later"
    home.mkdir()
    step = (
        "fit(4, 'PCA'); out['off'] = state()\n"
        f"latentlab.set_cache_dir({str(later)!r}); fit(5, 'PCA'); out.update(state())"
    )
    out = _fit(step, LATENTLAB_CACHE_DIR="", HOME=str(home))
    assert out["off"]["dir"] is None and out["off"]["misses"] == out["off"]["hits"] == 0
    assert not (home / ".cache").exists()  # (the CUDA driver may write ~/.nv)
    # switched on at run time, after programs were compiled without a cache
    assert out["dir"] == str(later)
    # (entries end in "-cache"; JAX's LRU bookkeeping adds "-atime" files and a lock)
    entries = [name for name in os.listdir(later) if name.endswith("-cache")]
    assert out["misses"] == len(entries) >= 2
    assert (later / ".lockfile").exists()  # reads and writes are locked (a size bound)


def test_users_jax_cache_and_thresholds_are_left_alone(tmp_path):
    mine, ours = tmp_path / "mine", tmp_path / "ours"
    step = (
        f"jax.config.update('jax_compilation_cache_dir', {str(mine)!r})\n"
        "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.25)\n"
        "fit(4, 'PCA'); out['fitted'] = state()\n"
        # set_cache_dir(None) switches off only latentlab's own cache
        "latentlab.set_cache_dir(None); fit(5, 'PCA'); out.update(state())"
    )
    out = _fit(step, LATENTLAB_CACHE_DIR=str(ours))
    fitted = out["fitted"]
    assert (fitted["dir"], fitted["min_time"], fitted["min_size"]) == (str(mine), 0.25, 0)
    assert (out["dir"], out["min_time"], out["min_size"]) == (str(mine), 0.25, 0)
    assert not ours.exists()


def test_set_cache_dir_moves_and_switches_off_after_compiles(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    step = (
        "fit(4, 'PCA'); out['a_first'] = entries(os.environ['LATENTLAB_CACHE_DIR'])\n"
        f"latentlab.set_cache_dir({str(b)!r}); out['moved'] = state(); fit(5, 'PCA')\n"
        f"out['b'] = entries({str(b)!r}); out['after_b'] = state()\n"
        "latentlab.set_cache_dir(None); out['off'] = state(); fit(6, 'PCA')\n"
        f"out['a'] = entries({str(a)!r}); out['b_end'] = entries({str(b)!r}); out.update(state())"
    )
    out = _fit(step, LATENTLAB_CACHE_DIR=str(a))
    assert len(out["a_first"]) >= 2
    assert out["moved"]["dir"] == str(b)
    # JAX opened its cache at a; without a reset the d=5 programs would land there
    assert out["a"] == out["a_first"]
    assert len(out["b"]) == out["after_b"]["misses"] - len(out["a_first"]) >= 1
    # off: no directory, JAX's own thresholds back, nothing written anywhere
    assert (out["off"]["dir"], out["off"]["min_time"], out["off"]["min_size"]) == (None, 1.0, 0)
    assert out["b_end"] == out["b"] and out["misses"] == out["after_b"]["misses"]


def test_unwritable_home_falls_back_silently(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    out = _fit(_ONE_FIT, HOME=str(not_a_dir))
    assert out["dir"] is None and out["misses"] == out["hits"] == 0
    assert out["cache_warnings"] == []
    # only the debug line on the 'latentlab' logger says why
    assert "running without a compilation cache" in out["stderr"]
    assert "WARNING" not in out["stderr"]
    assert np.isclose(out["score"], _ppca_ml_loglik(4), rtol=1e-7)


def test_set_cache_dir_rejects_bad_input(tmp_path):
    from latentlab import _cache, set_cache_dir

    configured = _cache._configured
    with pytest.raises(ValueError, match="directory path or None"):
        set_cache_dir(3)
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    with pytest.raises(ValueError, match="Cannot use .* as the compilation cache"):
        set_cache_dir(not_a_dir / "sub")
    # a refused call leaves the automatic setup to happen as it would have
    assert _cache._configured == configured
