"""`optcc run` of a saved schedule on local gloo processes, for the construction tests."""
import json
import subprocess
import sys

import pytest


def run_on_gloo(path: str, p: int, dtype: str = "float32", size: int = 4 * 10007) -> dict:
    """The run's JSON (asserted to have exited 0); skips where gloo cannot bind a local port.
    The default size is not a multiple of any piece count."""
    out = subprocess.run([sys.executable, "-m", "optcc", "run", "--nproc", str(p), "--schedule", path,
                          "--size", str(size), "--dtype", dtype, "--json", "--timeout", "60",
                          "--backend", "gloo", "--iters", "1", "--warmup", "0"],
                         capture_output=True, text=True, timeout=240)
    if out.returncode != 0 and "Address already in use" in out.stderr:
        pytest.skip("gloo could not bind a local port on this machine: " + out.stderr[-200:])
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)
