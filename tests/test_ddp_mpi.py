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
def test_estimate_per_rank_equals_the_measured_step(n):
    check_ok(run("ddp_train.py", n, "memory", 0, timeout=300), n)
