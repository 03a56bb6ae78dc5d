"""gpumemnet.nn.parallel: DataParallel under PyTorch's name, as a pass-through on the one device gpumemnet trains
on (scripts wrap their model in it unconditionally); DistributedDataParallel over gpumemnet.distributed."""
from .data_parallel import DataParallel  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401

__all__ = ["DataParallel", "DistributedDataParallel"]
