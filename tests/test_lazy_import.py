"""`import latentlab` stays light: heavy dependencies load on first use."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HEAVY = ("matplotlib", "pandas", "arviz", "numpyro.infer")

_PROBE = """
import json, sys
import numpy as np
import latentlab

report = {"after_import": [m for m in HEAVY if m in sys.modules]}
import latentlab.compare  # the submodule must not shadow the function
report["compare_is_function"] = callable(latentlab.compare)
report["posterior_is_module"] = type(latentlab.posterior).__name__ == "module"
report["missing_names"] = [n for n in latentlab.__all__ if not hasattr(latentlab, n)]
report["dir_lists_all"] = set(latentlab.__all__) <= set(dir(latentlab))
from latentlab import PPCA

rng = np.random.default_rng(0)
X = rng.normal(size=(60, 2)) @ rng.normal(size=(2, 4)) + 0.3 * rng.normal(size=(60, 4))
table = latentlab.compare({"ppca": PPCA(1, random_state=0)}, X, cv=2)
report["table_type"] = type(table).__module__.split(".")[0] + "." + type(table).__name__
report["loglik"] = float(table.loc["ppca", "loglik"])
report["X"] = X.tolist()
report["after_compare"] = [m for m in HEAVY if m in sys.modules]
print(json.dumps(report))
"""


def _ppca_ml_loglik(X, K):
    """Tipping & Bishop's closed-form maximum of the PPCA log-likelihood."""
    n, d = X.shape
    lam = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False, ddof=0)))[::-1]
    sigma2 = lam[K:].mean()
    return -n / 2 * (d * np.log(2 * np.pi) + np.log(lam[:K]).sum() + (d - K) * np.log(sigma2) + d)


def test_import_leaves_heavy_modules_out_and_public_api_works():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    out = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n" + _PROBE],
        env=env,
        cwd=tempfile.gettempdir(),  # import the installed latentlab, not the checkout's
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["after_import"] == []
    assert report["compare_is_function"]
    assert report["posterior_is_module"]
    assert report["missing_names"] == []
    assert report["dir_lists_all"]
    # The lazily reached function still works: its table, and the number in it.
    assert report["table_type"] == "pandas.DataFrame"
    X = np.asarray(report["X"])
    assert np.isclose(report["loglik"], _ppca_ml_loglik(X, 1), rtol=1e-6)
    assert "pandas" in report["after_compare"]


def test_the_lazy_names_are_the_estimators_modules_names():
    """latentlab writes its estimator names out (so that importing it stays light);
    they must be exactly latentlab.estimators' public names, or a new estimator would
    be missing from ``latentlab.X`` (or from save/load's registry)."""
    import latentlab
    import latentlab.estimators

    assert latentlab._ESTIMATORS == tuple(latentlab.estimators.__all__)


def test_every_name_that_dir_lists_resolves():
    """Tab completion offers ``dir(latentlab)``; each name must import (a submodule
    listed there once no longer existed)."""
    import latentlab

    unresolved = []
    for name in dir(latentlab):
        try:
            getattr(latentlab, name)
        except (AttributeError, ImportError) as err:
            unresolved.append(f"{name}: {err}")
    assert not unresolved
