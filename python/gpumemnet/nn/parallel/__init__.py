"""gpumemnet.nn.parallel: DataParallel under PyTorch's name, as a pass-through on the one device gpumemnet trains
on (scripts wrap their model in it unconditionally); DistributedDataParallel over gpumemnet.distributed;
scatter_gather's scatter and gather (PyTorch's, for CUDA devices)."""
from .data_parallel import DataParallel, data_parallel  # the function, as PyTorch's package binds the name
from .distributed import DistributedDataParallel
from .scatter_gather import gather, scatter  # also binds the submodule torch.nn.parallel.scatter_gather

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel", "scatter", "gather"]
