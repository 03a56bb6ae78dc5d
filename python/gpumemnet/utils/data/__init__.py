"""gpumemnet.utils.data: datasets, samplers and DataLoader with PyTorch's names and batching rules (a package:
dataset.py, sampler.py, _collate.py, dataloader.py; every public name is gm.utils.data.X as in torch.utils.data).
Loading runs in the calling process (see dataloader.py for what num_workers > 0 means here)."""
from ._collate import default_collate, default_convert  # noqa: F401
from .dataloader import DataLoader, get_worker_info  # noqa: F401
from .distributed import DistributedSampler  # noqa: F401
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset,  # noqa: F401
                      TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,  # noqa: F401
                      WeightedRandomSampler)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset", "StackDataset",
           "random_split",
           "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "DistributedSampler", "DataLoader", "get_worker_info", "default_collate", "default_convert"]
