"""How many XLA programs a workflow compiles on a cold start.

Compile counts are deterministic for given shapes and settings, so they are asserted
here as numbers, never as timings.  Each count is taken in a fresh subprocess with
the persistent compilation cache off (``LATENTLAB_CACHE_DIR=""`` and no
``JAX_COMPILATION_CACHE_DIR``), by a ``jax.monitoring`` listener on
'/jax/core/compile/backend_compile_duration' (one event per backend compile).
"""

import json
import os
import subprocess
import sys

import pytest

# The compile budget: one fit compiles at most 4 programs (the EM program "plus at most a
# couple of shared helpers").
FIT_TARGET = 4

# ----------------------------------------------------------------------------- GaussianMixture

GMM_SCRIPT = r"""
import json, warnings
import jax
import numpy as np

compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: compiles.append(event)
    if event == "/jax/core/compile/backend_compile_duration"
    else None
)
import latentlab
from sklearn.datasets import load_wine

warnings.simplefilter("ignore")
X = load_wine().data
rng = np.random.default_rng(0)
X_nan = np.where(rng.random(X.shape) < 0.2, np.nan, X)
counts = {}


def count(name, work):
    before = len(compiles)
    result = work()
    counts[name] = len(compiles) - before
    return result


GM = latentlab.GaussianMixture
gm = count("fit", lambda: GM(3, random_state=0).fit(X))
count("score_any_rows", lambda: [gm.score_samples(X[:7]), gm.predict(X[:50]),
                                 gm.predict_proba(X[:100]), gm.score(X)])
count("sample", lambda: [gm.sample(5, random_state=0), gm.sample(9, random_state=1)])
gm_nan = count("fit_nan", lambda: GM(3, max_iter=20, random_state=0).fit(X_nan))
count("impute_any_rows", lambda: [gm_nan.impute(X_nan[:9]), gm_nan.impute(X_nan[:120])])
count("search_1_to_6", lambda: [GM(k, covariance_type="diag", random_state=0).fit(X)
                                 for k in range(1, 7)])
print("COUNTS", json.dumps(counts))
"""


def _counts(script):
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["LATENTLAB_CACHE_DIR"] = ""
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = [s for s in done.stdout.splitlines() if s.startswith("COUNTS ")][-1]
    return json.loads(line[len("COUNTS ") :])


@pytest.fixture(scope="module")
def gmm_counts():
    return _counts(GMM_SCRIPT)


def test_gmm_fit_compiles_one_program(gmm_counts):
    # once 5 (starts, EM, and eager casts and slices); now the starts and
    # the EM driver are one program and everything else runs on the host
    assert gmm_counts["fit"] <= FIT_TARGET
    assert gmm_counts["fit"] == 1
    assert gmm_counts["fit_nan"] == 1  # before: 4


def test_gmm_scoring_reuses_one_program_for_any_row_count(gmm_counts):
    # before: one program per row bucket (7, 50, 100, 178 rows: 4); now every call
    # runs at one fixed row count
    assert gmm_counts["score_any_rows"] == 1
    assert gmm_counts["impute_any_rows"] == 1  # before: 2


def test_gmm_search_over_n_components_compiles_once_per_bucket(gmm_counts):
    # n_components 1..6 pad to the buckets 2, 4, 8 (the shape policy's choice on data
    # this small, latentlab._shapes.mixture_components): three fit programs (before:
    # six without padding, four with powers of two from 1)
    assert gmm_counts["search_1_to_6"] == 3


def test_gmm_sample_compiles_nothing(gmm_counts):
    # before: 65 programs for the first draw and 32 for each new n_samples (the
    # declaration run eagerly, op by op); now a NumPy draw of the generative story
    assert gmm_counts["sample"] == 0
