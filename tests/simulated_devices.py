"""Run a script in a subprocess that sees 8 simulated CPU devices (XLA's flag must be
set before JAX starts, hence the subprocess); the script prints one line
``RESULT <json>`` with what the test checks."""

import json
import os
import subprocess
import sys


def run_on_simulated_devices(script: str, count: int = 8) -> dict:
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}"
    env = {**os.environ, "XLA_FLAGS": flags.strip()}
    env.pop("JAX_PLATFORMS", None)
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-4000:]
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])
