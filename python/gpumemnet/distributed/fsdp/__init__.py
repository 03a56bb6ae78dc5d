"""torch.distributed.fsdp: PyTorch's fully sharded data parallelism. gpumemnet shards optimizer state with
ZeroRedundancyOptimizer and keeps whole parameters on each rank; FSDP's names exist for the checks libraries make
(accelerate's unwrap_model: `isinstance(model, FullyShardedDataParallel)`), and wrapping a model raises."""
import enum

from .fully_sharded_data_parallel import FullyShardedDataParallel, fully_shard  # noqa: F401

__all__ = ["FullyShardedDataParallel", "fully_shard", "ShardingStrategy", "BackwardPrefetch", "StateDictType",
           "CPUOffload", "MixedPrecision", "CPUOffloadPolicy", "MixedPrecisionPolicy", "FSDPModule"]


class ShardingStrategy(enum.Enum):
    FULL_SHARD = 1
    SHARD_GRAD_OP = 2
    NO_SHARD = 3
    HYBRID_SHARD = 4
    _HYBRID_SHARD_ZERO2 = 5


class BackwardPrefetch(enum.Enum):
    BACKWARD_PRE = 1
    BACKWARD_POST = 2


class StateDictType(enum.Enum):
    FULL_STATE_DICT = 1
    LOCAL_STATE_DICT = 2
    SHARDED_STATE_DICT = 3


class CPUOffload:
    def __init__(self, offload_params=False):
        self.offload_params = offload_params


class MixedPrecision:
    def __init__(self, param_dtype=None, reduce_dtype=None, buffer_dtype=None, **kwargs):
        self.param_dtype, self.reduce_dtype, self.buffer_dtype = param_dtype, reduce_dtype, buffer_dtype


class CPUOffloadPolicy:
    def __init__(self, pin_memory=True):
        self.pin_memory = pin_memory


class MixedPrecisionPolicy:
    def __init__(self, param_dtype=None, reduce_dtype=None, output_dtype=None, cast_forward_inputs=True):
        self.param_dtype, self.reduce_dtype, self.output_dtype = param_dtype, reduce_dtype, output_dtype


class FSDPModule:
    """FSDP2's mixin class of sharded modules: no module is one here."""
