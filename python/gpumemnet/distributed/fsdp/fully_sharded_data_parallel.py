"""torch.distributed.fsdp.fully_sharded_data_parallel (fsdp/__init__.py says what gpumemnet does instead)."""
from ...nn.modules.module import Module
from .api import *  # noqa: F401,F403  (PyTorch's module exports the configuration types too)

_WHY = ("gpumemnet has no FSDP; shard the optimizer state with torch.distributed.optim.ZeroRedundancyOptimizer "
        "under DistributedDataParallel")


class FullyShardedDataParallel(Module):
    def __init__(self, module, *args, **kwargs):
        raise NotImplementedError(f"FullyShardedDataParallel: {_WHY}")


def fully_shard(module, *args, **kwargs):
    raise NotImplementedError(f"fully_shard: {_WHY}")
