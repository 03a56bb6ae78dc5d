"""torch.distributed._tensor.experimental: the same objects as torch.distributed.tensor.experimental's."""
from ..tensor.experimental import context_parallel, implicit_replication, local_map, register_sharding

__all__ = ["context_parallel", "implicit_replication", "local_map", "register_sharding"]
