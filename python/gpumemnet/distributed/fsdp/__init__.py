"""torch.distributed.fsdp: PyTorch's fully sharded data parallelism. gpumemnet shards optimizer state with
ZeroRedundancyOptimizer and keeps whole parameters on each rank; FSDP's names exist for the checks libraries make
(accelerate's unwrap_model: `isinstance(model, FullyShardedDataParallel)`), and wrapping a model raises."""
from .api import *  # noqa: F401,F403
from .api import __all__ as _api_all
from .fully_sharded_data_parallel import FullyShardedDataParallel, fully_shard  # noqa: F401

__all__ = ["FullyShardedDataParallel", "fully_shard", "CPUOffloadPolicy", "MixedPrecisionPolicy",
           "FSDPModule"] + _api_all


class CPUOffloadPolicy:
    def __init__(self, pin_memory=True):
        self.pin_memory = pin_memory


class MixedPrecisionPolicy:
    def __init__(self, param_dtype=None, reduce_dtype=None, output_dtype=None, cast_forward_inputs=True):
        self.param_dtype, self.reduce_dtype, self.output_dtype = param_dtype, reduce_dtype, output_dtype


class FSDPModule:
    """FSDP2's mixin class of sharded modules: no module is one here."""
