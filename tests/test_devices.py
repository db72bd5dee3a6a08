"""The ``devices`` setting: rows sharded over several JAX devices give the
one-device fit -- parameters and trace -- to round-off.

Eight CPU devices are simulated in a subprocess (``XLA_FLAGS`` must be set before JAX
starts); one subprocess runs every case, since the compiles are the cost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from simulated_devices import run_on_simulated_devices

import latentlab
from latentlab.inference.sharding import pad_axis, resolve_devices

RTOL = 1e-10

# Runs in the subprocess: each case fits once with devices=None and once sharded, and
# reports the largest parameter difference (relative to each array's scale), the
# largest trace difference (relative) and both iteration counts.
SCRIPT = textwrap.dedent(
    """
    import json
    import warnings

    import jax
    import numpy as np

    import latentlab
    from latentlab.inference.chunked import RowChunks
    from latentlab.inference.sharding import row_mesh, shard_rows

    assert jax.device_count() == 8, jax.devices()
    N, D = 997, 6  # 997 rows: not a multiple of 8 (nor 3)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 2)) @ rng.normal(size=(2, D)) + 0.5 * rng.normal(size=(N, D))
    X += np.arange(D)
    X[rng.random((N, D)) < 0.1] = np.nan
    rng = np.random.default_rng(1)
    centres = rng.normal(scale=1.5, size=(3, D))
    Y = centres[rng.integers(0, 3, N)] + rng.normal(size=(N, D))
    Y[rng.random((N, D)) < 0.1] = np.nan
    start = {
        "weights_init": np.full(3, 1 / 3),
        "means_init": centres + rng.normal(scale=1.0, size=(3, D)),
        "precisions_init": np.stack([np.eye(D)] * 3),
    }

    def compare(a, b):
        params = max(
            float(np.max(np.abs(value - b.params_[k])) / max(1.0, np.max(np.abs(value))))
            for k, value in a.params_.items()
        )
        m = min(a.n_iter_, b.n_iter_)
        ta, tb = a.log_likelihoods_[:m], b.log_likelihoods_[:m]
        trace = float(np.max(np.abs(ta - tb) / np.abs(ta)))
        return {"params": params, "trace": trace, "n_iter": [a.n_iter_, b.n_iter_]}

    cases = {
        "PPCA": (lambda **k: latentlab.PPCA(2, random_state=0, **k), X, "all"),
        "FactorAnalysis": (lambda **k: latentlab.FactorAnalysis(2, random_state=0, **k), X, "all"),
        "GaussianMixture": (lambda **k: latentlab.GaussianMixture(3, **start, **k), Y, "all"),
        # three devices by id: the 512-row block is padded to 513 rows
        "PPCA-3-devices": (lambda **k: latentlab.PPCA(2, random_state=0, **k), X, [0, 1, 2]),
    }
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for name, (make, data, devices) in cases.items():
            out[name] = compare(make().fit(data), make(devices=devices).fit(data))
        # out of core: the host's chunk function runs sharded
        a = latentlab.PPCA(2, random_state=0).fit(X)
        b = latentlab.PPCA(2, random_state=0, devices="all", chunk_size=300).fit(RowChunks(X))
        out["PPCA-chunked"] = compare(a, b)
        # partial_fit: each chunk's E-step split over the devices (3 chunks of 333+);
        # the meshes the rows are placed on are recorded
        import latentlab._chunk_tasks as tasks
        import latentlab.models._gaussian_latent_online as online

        placements = []
        for module in (tasks, online):
            def record(array, mesh, *args, _place=module.shard_rows):
                placements.append(mesh.size)
                return _place(array, mesh, *args)
            module.shard_rows = record
        for name, (make, data, _) in cases.items():
            if name.endswith("devices"):
                continue
            fits = [make(), make(devices="all")]
            for part in np.array_split(data, 3):
                for fit in fits:
                    fit.partial_fit(part)
            out[name + "-partial_fit"] = compare(*fits)
            out[name + "-partial_fit-meshes"] = sorted(set(placements))
            placements.clear()
    # the rows really are split: 13 rows padded to 16, two on each device
    placed = shard_rows(np.ones((13, 2)), row_mesh("all"))
    out["shards"] = sorted({s.data.shape[0] for s in placed.addressable_shards})
    out["n_shards"] = len(placed.addressable_shards)
    print("RESULT", json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def sharded_fits():
    return run_on_simulated_devices(SCRIPT)


@pytest.mark.parametrize(
    "case",
    [
        "PPCA",
        "FactorAnalysis",
        "GaussianMixture",
        "PPCA-3-devices",
        "PPCA-chunked",
        "PPCA-partial_fit",
        "FactorAnalysis-partial_fit",
        "GaussianMixture-partial_fit",
    ],
)
def test_sharded_fit_equals_one_device_fit(sharded_fits, case):
    result = sharded_fits[case]
    assert result["n_iter"][0] == result["n_iter"][1]
    assert result["params"] <= RTOL
    assert result["trace"] <= RTOL


@pytest.mark.parametrize("model", ["PPCA", "FactorAnalysis", "GaussianMixture"])
def test_partial_fit_splits_rows_over_the_devices(sharded_fits, model):
    assert sharded_fits[model + "-partial_fit-meshes"] == [8]


def test_rows_are_split_over_all_devices(sharded_fits):
    assert sharded_fits["n_shards"] == 8
    assert sharded_fits["shards"] == [2]


def test_pad_axis_appends_zero_rows():
    a = np.arange(10.0).reshape(5, 2)
    padded = pad_axis(a, 0, 4)
    assert padded.shape == (8, 2)
    np.testing.assert_array_equal(padded[:5], a)
    assert not padded[5:].any()
    assert pad_axis(a, 1, 2) is a


@pytest.mark.parametrize(
    "devices, problem",
    [
        ("gpus", "'all' or a list"),
        ([], "empty"),
        ([10**6], "device id"),
        (["cpu"], "got an entry"),
        (3, "'all' or a list"),
    ],
)
def test_bad_devices_are_refused(devices, problem):
    with pytest.raises(ValueError, match=problem):
        resolve_devices(devices)


def test_repeated_device_is_refused():
    import jax

    device = jax.devices()[0]
    with pytest.raises(ValueError, match="more than once"):
        resolve_devices([device, device])
    assert resolve_devices([device.id]) == (device,)
    assert resolve_devices(None) is None


def test_settings_round_trip_through_save_load(tmp_path):
    import jax

    X = np.random.default_rng(0).normal(size=(20, 3))
    est = latentlab.PPCA(1, method="closed_form", chunk_size=64, devices="all").fit(X)
    for devices, saved in (("all", "all"), ([0], [0]), (jax.devices()[:1], None)):
        est.set_params(devices=devices)
        est.save(tmp_path / "ppca.npz")
        back = latentlab.load(tmp_path / "ppca.npz")
        # a Device object is not portable (nor JSON): saved as unset, like a RandomState
        assert back.get_params()["devices"] == saved
        assert back.get_params()["chunk_size"] == 64


# Each process runs the same fit on the same data after jax.distributed.initialize (the
# README's multi-host recipe): devices="all" spans both processes' devices.
MULTI_PROCESS_SCRIPT = textwrap.dedent(
    """
    import json
    import sys
    import warnings

    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(sys.argv[1], num_processes=2, process_id=int(sys.argv[2]))
    import numpy as np

    import latentlab

    assert len(jax.devices()) == 4 and len(jax.local_devices()) == 2
    N, D = 997, 6
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 2)) @ rng.normal(size=(2, D)) + 0.5 * rng.normal(size=(N, D))
    X[rng.random((N, D)) < 0.1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = latentlab.PPCA(2, random_state=0, devices=jax.local_devices()[:1]).fit(X)
        b = latentlab.PPCA(2, random_state=0, devices="all").fit(X)
    diff = max(
        float(np.max(np.abs(value - b.params_[k])) / max(1.0, np.max(np.abs(value))))
        for k, value in a.params_.items()
    )
    ta, tb = a.log_likelihoods_, b.log_likelihoods_
    trace = float(np.max(np.abs(ta - tb) / np.abs(ta)))
    print("RESULT", json.dumps({"params": diff, "trace": trace}))
    """
)


@pytest.mark.skipif(
    not os.environ.get("LATENTLAB_DISTRIBUTED_TESTS"),
    reason="two JAX processes (~30 s here); set LATENTLAB_DISTRIBUTED_TESTS=1",
)
def test_devices_all_spans_processes_after_distributed_initialize():
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    env.pop("JAX_PLATFORMS", None)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", MULTI_PROCESS_SCRIPT, f"localhost:{port}", str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-4000:]
        line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1]
        result = json.loads(line[len("RESULT ") :])
        assert result["params"] <= RTOL
        assert result["trace"] <= RTOL
