"""new_group with a subset of the ranks over MPI (MPI_Comm_split), on 3 ranks with a group of 2
(tests/dist_workers/groups.py): PyTorch's semantics for members and non-members, every collective with group=,
src/dst as global ranks and group_src/group_dst as the group's, DDP and SyncBatchNorm on the subgroup, destroying
one group. A rank that never calls new_group is tested in test_distributed_failures.py."""
from dist_util import check_ok, run


def test_new_group_of_two_of_three_ranks():
    check_ok(run("groups.py", 3, timeout=300), 3)
