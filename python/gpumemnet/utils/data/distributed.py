"""DistributedSampler: PyTorch's sampler for data parallel training, the same index sequence on every rank count.

Each of num_replicas ranks reads every num_replicas-th index of one order shared by all ranks (padded with its own
head, or cut, to a multiple of num_replicas). The shuffled order is PyTorch's exactly: torch.randperm drawn from a
torch.Generator seeded with seed + epoch, which is a Fisher-Yates pass over the 32-bit outputs of MT19937 seeded by
init_genrand (ATen's randperm_cpu: swap i with i + random() % (n - i)). NumPy's legacy RandomState is that same
MT19937 with that same seeding, so a script moved from PyTorch feeds every rank the same samples in the same order
(checked against torch.utils.data.DistributedSampler in tests/test_ddp_sampler.py)."""
import math

import numpy as np

from ... import _C
from .sampler import Sampler

__all__ = ["DistributedSampler"]

# ATen draws 64-bit numbers instead at and above this size (randperm_cpu); datasets that large are out of reach of
# a Python list of indices anyway, and are refused rather than given a different order.
_RANDPERM_32BIT_LIMIT = (2 ** 32 - 1) // 20


def _torch_randperm(n, seed):
    """torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist(), without torch."""
    if n >= _RANDPERM_32BIT_LIMIT:
        raise ValueError(f"DistributedSampler: shuffling {n} samples is not supported (PyTorch's order for datasets "
                         f"of {_RANDPERM_32BIT_LIMIT} samples or more is not reproduced)")
    perm = list(range(n))
    if n < 2:
        return perm
    draws = np.random.RandomState(seed & 0xFFFFFFFF).randint(0, 2 ** 32, size=n - 1, dtype=np.uint64)
    z = (draws % np.arange(n, 1, -1, dtype=np.uint64)).tolist()  # draw i is taken modulo n - i
    for i, zi in enumerate(z):
        j = i + zi
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _dist():
    # The process group is asked only when num_replicas or rank is left out (PyTorch's rule), so the sampler
    # works without MPI when both are given.
    from ... import distributed
    if not distributed.is_available() or not distributed.is_initialized():
        raise _C.ArgumentError("DistributedSampler: num_replicas and rank default to the process group's, and none "
                               "is initialized (Default process group has not been initialized); call "
                               "gpumemnet.distributed.init_process_group() first, or pass both")
    return distributed


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None:
            num_replicas = _dist().get_world_size()
        if rank is None:
            rank = _dist().get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # the largest length that splits evenly: every rank gets the same number of samples
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        indices = _torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Use a different shuffled order in this epoch (the same on every rank)."""
        self.epoch = epoch
