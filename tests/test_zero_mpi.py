"""ZeroRedundancyOptimizer over MPI, on 2 and 3 ranks (uneven shards; tests/dist_workers/ddp_train.py): stage 1
(under DDP) and stage 2 match plain Adam, each rank's optimizer state measured by the allocator is 1/N of plain
Adam's, the consolidated state_dict is plain Adam's, and each rank's estimate(..., zero=1|2) equals its measured
step byte for byte."""
import pytest

from dist_util import check_ok, run


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("stage", [1, 2])
def test_zero_matches_adam_with_a_shard_of_the_state(n, stage):
    check_ok(run("ddp_train.py", n, f"zero{stage}", timeout=300), n)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("stage", [1, 2])
def test_estimate_per_rank_equals_the_measured_step(n, stage):
    check_ok(run("ddp_train.py", n, "memory", stage, timeout=300), n)
