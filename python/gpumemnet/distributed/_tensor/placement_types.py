"""torch.distributed._tensor.placement_types: the same objects as torch.distributed.tensor.placement_types'."""
from ..tensor.placement_types import Partial, Placement, Replicate, Shard

__all__ = ["Placement", "Shard", "Replicate", "Partial"]
