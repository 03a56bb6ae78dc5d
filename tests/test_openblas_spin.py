"""OpenBLAS's idle workers sleep soon after a threaded gemm (python/gpumemnet/_loader.py, brief_openblas_spins):
with OpenBLAS's default timeout a worker busy-waits ~0.1 s after each threaded call, on a core the next OpenMP
region (a direct conv, the next layer) then shares. Each case runs in a fresh process: OpenBLAS reads the
variable when it loads."""
import os
import subprocess
import sys

import pytest

import gpumemnet

# the package this run imports (the sanitizer run's build is not the tree's python/)
PY = os.path.dirname(os.path.dirname(os.path.abspath(gpumemnet.__file__)))

# CPU the process burns while its main thread sleeps 200 ms right after a threaded sgemm: the spinning worker's.
SPIN = r"""
import os, time, numpy as np, gpumemnet as gm
gm.set_num_threads(2)
a = gm.tensor(np.ones((512, 512), np.float32))
gm.matmul(a, a)
ms = []
for _ in range(3):
    gm.matmul(a, a)
    c = time.process_time()
    time.sleep(0.2)
    ms.append((time.process_time() - c) * 1e3)
print(os.environ.get("OPENBLAS_THREAD_TIMEOUT"), min(ms), max(ms))
"""


def run(env_value):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    env["PYTHONPATH"] = PY + os.pathsep + env.get("PYTHONPATH", "")
    if env_value is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = env_value
    out = subprocess.run([sys.executable, "-c", SPIN], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    value, lo, hi = out.stdout.split()
    return value, float(lo), float(hi)


def test_default_timeout_is_set_and_workers_sleep():
    value, ms, _ = run(None)
    assert value == "20"
    assert ms < 5, f"the process burnt {ms:.1f} ms of CPU while idle after a threaded sgemm"


def test_user_setting_is_kept():
    value, _, _ = run("25")
    assert value == "25"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no worker on one CPU")
def test_openblas_default_spins():
    """The cost the setting removes (the test above could pass for other reasons): with OpenBLAS's own timeout
    the idle worker burns most of the 200 ms (98.9 ms on an idle 2-core machine; a busy machine gives the spinner
    its share of a core, ~20 ms beside 8 runnable processes)."""
    _, _, ms = run("28")
    assert ms > 8
