"""The shared compilation-cache helper, each check in a fresh interpreter."""

import json
import os
import stat
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


# --- an entry must hold the program it is filed under ---------------------------------


def _entry_files(cache):
    return sorted(cache / f for f in os.listdir(cache) if f.endswith("-cache"))


def test_swapped_entries_are_compiled_again_with_a_warning(tmp_path):
    # the fuzzer's case: two entries swapped made every later process fail inside JAX
    # with a bare AssertionError ((13, 6) there, (3, 14) with these two programs) until
    # the directory was deleted
    cache = tmp_path / "cache"
    first = _fit(_ONE_FIT, LATENTLAB_CACHE_DIR=str(cache))
    entries = _entry_files(cache)
    assert len(entries) >= 2
    # latentlab creates its directory private, and its entries too
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert {stat.S_IMODE(e.stat().st_mode) for e in entries} == {0o600}
    a, b = entries[0].read_bytes(), entries[1].read_bytes()
    entries[0].write_bytes(b)
    entries[1].write_bytes(a)
    second = _fit(_ONE_FIT, LATENTLAB_CACHE_DIR=str(cache))
    assert second["score"] == first["score"]
    assert len(second["cache_warnings"]) == 2
    for message, entry in zip(sorted(second["cache_warnings"]), entries[:2], strict=True):
        assert entry.name.removesuffix("-cache") in message and str(cache) in message
        assert "delete the directory" in message
    # both were rewritten: the next process reads every entry back, silently
    assert (second["hits"], second["misses"]) == (len(entries) - 2, 2)
    third = _fit(_ONE_FIT, LATENTLAB_CACHE_DIR=str(cache))
    assert (third["hits"], third["misses"], third["cache_warnings"]) == (len(entries), 0, [])
    assert third["score"] == first["score"]


def test_truncated_entry_is_compiled_again_with_a_warning(tmp_path):
    cache = tmp_path / "cache"
    first = _fit(_ONE_FIT, LATENTLAB_CACHE_DIR=str(cache))
    entry = _entry_files(cache)[-1]
    entry.write_bytes(entry.read_bytes()[:100])
    second = _fit(_ONE_FIT, LATENTLAB_CACHE_DIR=str(cache))
    assert second["score"] == first["score"] and second["misses"] == 1
    [message] = second["cache_warnings"]
    assert entry.name.removesuffix("-cache") in message and str(cache) in message


def test_entries_jax_wrote_unsealed_are_replaced_silently(tmp_path):
    # a directory filled by JAX alone (or an earlier latentlab): its entries are not
    # trusted, but nothing is wrong with them, so no warning
    cache = tmp_path / "cache"
    jax_only = "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)\n" + _ONE_FIT
    first = _fit(jax_only, JAX_COMPILATION_CACHE_DIR=str(cache), LATENTLAB_CACHE_DIR="")
    unsealed = {e: e.read_bytes() for e in _entry_files(cache)}
    assert first["dir"] == str(cache) and len(unsealed) >= 2
    second = _fit(_ONE_FIT, LATENTLAB_CACHE_DIR=str(cache))
    assert second["score"] == first["score"] and second["cache_warnings"] == []
    assert second["hits"] == 0 and second["misses"] >= len(unsealed)
    assert all(e.read_bytes() != content for e, content in unsealed.items())


# --- a directory that other users can write is refused --------------------------------


def _shared(path, mode):
    path.mkdir(exist_ok=True)
    path.chmod(mode)  # (mkdir's mode is masked by the umask)
    return path


@pytest.mark.parametrize("mode", [0o777, 0o1777], ids=["world-writable", "sticky-tmp"])
def test_set_cache_dir_refuses_a_directory_others_can_write(tmp_path, mode):
    from latentlab import _cache, set_cache_dir

    configured = _cache._configured
    shared = _shared(tmp_path / "shared", mode)
    with pytest.raises(ValueError, match="shared is writable by every user"):
        set_cache_dir(shared)
    # so is a private directory inside a shared one (others can rename and replace
    # it), unless the sticky bit protects it, as in /tmp
    inside = _shared(shared / "mine", 0o700)
    if mode & stat.S_ISVTX:
        assert _cache._usable(str(inside)) is None and _cache._untrusted(str(inside)) is None
    else:
        with pytest.raises(ValueError, match="shared, a directory above it, is writable"):
            set_cache_dir(inside)
    assert _cache._configured == configured


def test_world_writable_cache_dir_from_env_means_no_cache_and_a_warning(tmp_path):
    shared = _shared(tmp_path / "shared", 0o777)
    out = _fit(_ONE_FIT, LATENTLAB_CACHE_DIR=str(shared))
    assert out["dir"] is None and out["misses"] == out["hits"] == 0
    assert os.listdir(shared) == []
    [message] = out["cache_warnings"]
    assert f"{shared} is writable by every user" in message
    assert "running without a compilation cache" in message
    assert np.isclose(out["score"], _ppca_ml_loglik(4), rtol=1e-7)


def test_who_else_can_write_a_directory():
    from latentlab._cache import _writers

    me, nobody_gid = os.geteuid(), 2**31 - 7  # a group that does not exist

    def writers(mode, uid=me, gid=nobody_gid, sticky_protects=False):
        st = os.stat_result((stat.S_IFDIR | mode, 0, 0, 2, uid, gid, 0, 0, 0, 0))
        return _writers(st, sticky_protects=sticky_protects)

    assert writers(0o700) is None and writers(0o755) is None
    assert writers(0o777) == writers(0o1777) == "is writable by every user"
    assert writers(0o1777, sticky_protects=True) is None
    assert writers(0o770) == "is writable by its group"
    other = 12345 if me != 12345 else 12346
    assert writers(0o700, uid=other) == f"is owned by another user (uid {other})"
    assert writers(0o755, uid=0) is None  # root can write anything anyway
