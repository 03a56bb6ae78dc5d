"""DistributedDataParallel over MPI, on 2 and 3 ranks (tests/dist_workers/ddp_train.py): N ranks with batch B/N
match one process with batch B after several Adam steps, with no_sync accumulation too; and each rank's
gm.memory.estimate(..., world_size=N) equals its measured step byte for byte. Skipped with the reason where MPI
is missing, failed instead under GPUMEMNET_REQUIRE_MPI=1 (tests/dist_util.py)."""
import pytest

from dist_util import check_ok, run


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_matches_one_process(n):
    check_ok(run("ddp_train.py", n, "ddp", timeout=300), n)


@pytest.mark.parametrize("n", [2, 3])
def test_syncbatchnorm_matches_batchnorm_in_one_process(n):
    check_ok(run("ddp_train.py", n, "syncbn", timeout=300), n)


@pytest.mark.parametrize("n", [2, 3])
def test_estimate_per_rank_equals_the_measured_step(n):
    check_ok(run("ddp_train.py", n, "memory", 0, timeout=300), n)


@pytest.mark.parametrize("zero", [0, 2])
def test_example_ddp_digits(zero):
    """examples/ddp_digits.py on 2 ranks, one epoch: each rank's first step and all its steps are what its estimate
    said."""
    pytest.importorskip("sklearn")
    import os
    import re
    import subprocess
    import sys
    from dist_util import env, launcher_flags, mpiexec_or_skip
    exe = mpiexec_or_skip()
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "ddp_digits.py")
    proc = subprocess.run([exe, *launcher_flags(exe), "-n", "2", sys.executable, script, "--epochs", "1",
                           "--zero", str(zero)], env=env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.findall(r"rank (\d)/2: first step (\d+) bytes \(estimated (\d+)\), all steps (\d+) bytes \(estimated "
                       r"before training (\d+):", proc.stdout)
    assert sorted(r for r, _, _, _, _ in found) == ["0", "1"], proc.stdout
    assert all(a == b and c == d for _, a, b, c, d in found), proc.stdout
    assert f"ZeRO stage {zero}" in proc.stdout
