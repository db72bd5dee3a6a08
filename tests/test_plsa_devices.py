"""PLSA's ``devices`` setting: documents sharded over several JAX devices
give the one-device fit.

Eight CPU devices are simulated in a subprocess (``XLA_FLAGS`` must be set before JAX
starts).  EM's topic-word sums are all-reduced across devices, so the topics and the
EM trace equal the one-device fit's to round-off.  theta comes out of the last
fold-in, whose per-document stop and SQUAREM steps a round-off difference in the
topics can move by one cycle (tests/test_scale_plsa.py): compared to 1e-7.
"""

from __future__ import annotations

import textwrap

import pytest
from simulated_devices import run_on_simulated_devices

SCRIPT = textwrap.dedent(
    """
    import json

    import jax
    import numpy as np

    import latentlab
    from latentlab.models import plsa
    from latentlab.models.plsa_programs import build_corpus

    assert jax.device_count() == 8, jax.devices()
    rng = np.random.default_rng(0)
    K, W = 4, 60
    phi = rng.dirichlet(np.full(W, 0.3), K)
    theta = rng.dirichlet(np.full(K, 0.3), 203)  # 203 documents, padded to 256 rows
    X = np.vstack([rng.multinomial(50, t @ phi) for t in theta]).astype(float)

    def compare(a, b):
        return {
            "n_iter": [a.n_iter_, b.n_iter_],
            "phi": float(np.abs(a.params_["phi"] - b.params_["phi"]).max()),
            "theta": float(np.abs(a.params_["theta"] - b.params_["theta"]).max()),
            "trace": float(
                np.max(np.abs(a.log_likelihoods_ - b.log_likelihoods_) / np.abs(a.log_likelihoods_))
            ),
        }

    # the fit places its documents through shard_documents: record the device counts
    import latentlab.models.plsa_programs as programs
    placements = []
    def record(starts, corpus, K, devices, _place=programs.shard_documents):
        placements.append(len(jax.devices()) if devices == "all" else len(devices))
        return _place(starts, corpus, K, devices)
    programs.shard_documents = record

    out = {}
    # dense counts (the dense E-step and fold-in's shrinking batches) on 8 devices;
    # tempered EM at the nonzeros on 3 devices by id (rows padded 256 -> 258 and the
    # nonzeros to a multiple of 3)
    for name, settings, devices in (
        ("dense-8", {}, "all"),
        ("tempered-3", {"tempering": 0.8}, [0, 1, 2]),
    ):
        a = latentlab.PLSA(K, random_state=0, **settings).fit(X)
        b = latentlab.PLSA(K, random_state=0, devices=devices, **settings).fit(X)
        out[name] = compare(a, b)
        out[name]["placements"] = placements.copy()
        placements.clear()
    # the documents really are split: 256 rows, 32 on each device
    import scipy.sparse as sp
    corpus = build_corpus(sp.csr_matrix(X), np.float64)
    starts = plsa.Params(np.full((1, 256, K), 1 / K), np.full((1, K, W), 1 / W))
    starts, placed = programs.shard_documents(starts, corpus, K, "all")
    out["shards"] = sorted({s.data.shape[0] for s in placed.dense.addressable_shards})
    out["theta_shards"] = sorted({s.data.shape[1] for s in starts.theta.addressable_shards})
    print("RESULT", json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def sharded_fits():
    return run_on_simulated_devices(SCRIPT)


@pytest.mark.parametrize("case", ["dense-8", "tempered-3"])
def test_sharded_plsa_fit_equals_one_device_fit(sharded_fits, case):
    result = sharded_fits[case]
    assert result["placements"] == [8 if case == "dense-8" else 3]  # the sharded fit only
    assert result["n_iter"][0] == result["n_iter"][1]
    assert result["phi"] <= 1e-12  # topics in [0, 1]
    assert result["trace"] <= 1e-10  # relative; entries ~1e4 nats
    assert result["theta"] <= 1e-7


def test_documents_are_split_over_the_devices(sharded_fits):
    assert sharded_fits["shards"] == [32]
    assert sharded_fits["theta_shards"] == [32]


def test_devices_setting_is_checked():
    import numpy as np

    import latentlab

    X = np.ones((4, 3))
    with pytest.raises(ValueError, match="devices"):
        latentlab.PLSA(2, devices="gpu").fit(X)
