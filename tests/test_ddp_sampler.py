"""gm.utils.data.DistributedSampler gives every rank PyTorch's indices: the same shuffled order (torch.randperm
from seed + epoch), padding and drop_last rules, for even and uneven splits. num_replicas and rank are given, so no
process group (and no MPI) is needed."""
import pytest

import gpumemnet as gm
from gpumemnet.utils.data import DistributedSampler


class _Len:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


CASES = [(n, r, shuffle, drop, seed) for n in (1, 2, 7, 10, 101) for r in (1, 2, 3, 4)
         for shuffle in (True, False) for drop in (False, True) for seed in (0, 5)]


@pytest.mark.parametrize("n,replicas,shuffle,drop_last,seed", CASES)
def test_same_indices_as_torch(n, replicas, shuffle, drop_last, seed):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DistributedSampler as TorchSampler
    for rank in range(replicas):
        mine = DistributedSampler(_Len(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                                  drop_last=drop_last)
        ref = TorchSampler(_Len(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                           drop_last=drop_last)
        for epoch in (0, 3):
            mine.set_epoch(epoch)
            ref.set_epoch(epoch)
            assert list(mine) == list(ref), (rank, epoch)
            assert len(mine) == len(ref)
    del torch


def test_large_shuffle_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DistributedSampler as TorchSampler
    mine = DistributedSampler(_Len(60000), num_replicas=2, rank=1, seed=42)
    ref = TorchSampler(_Len(60000), num_replicas=2, rank=1, seed=42)
    mine.set_epoch(7)
    ref.set_epoch(7)
    assert list(mine) == list(ref)
    del torch


def test_ranks_partition_the_dataset():
    """Without torch too: the ranks' indices together are every index once (n divisible), the order changes with
    the epoch and is the same on every call within one."""
    samplers = [DistributedSampler(_Len(12), num_replicas=3, rank=r, seed=1) for r in range(3)]
    first = [list(s) for s in samplers]
    assert sorted(i for part in first for i in part) == list(range(12))
    assert [list(s) for s in samplers] == first
    for s in samplers:
        s.set_epoch(1)
    assert [list(s) for s in samplers] != first
    assert [len(s) for s in samplers] == [4, 4, 4]


def test_padding_and_drop_last():
    assert [list(DistributedSampler(_Len(5), 2, r, shuffle=False)) for r in range(2)] == [[0, 2, 4], [1, 3, 0]]
    assert [list(DistributedSampler(_Len(5), 2, r, shuffle=False, drop_last=True)) for r in range(2)] == \
        [[0, 2], [1, 3]]


def test_bad_rank():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(_Len(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="Invalid rank -1"):
        DistributedSampler(_Len(4), num_replicas=2, rank=-1)


def test_needs_a_process_group_for_its_defaults():
    import gpumemnet.distributed as dist
    if dist.is_initialized():
        pytest.skip("a process group is initialized in this process")
    with pytest.raises(RuntimeError, match="call gpumemnet.distributed.init_process_group"):
        DistributedSampler(_Len(4))


def test_with_dataloader():
    data = gm.utils.data.TensorDataset(gm.arange(10))
    sampler = DistributedSampler(data, num_replicas=2, rank=0, shuffle=False)
    batches = [b[0].tolist() for b in gm.utils.data.DataLoader(data, batch_size=2, sampler=sampler)]
    assert batches == [[0, 2], [4, 6], [8]]
