"""torch.distributed._tensor: PyTorch's former name of torch.distributed.tensor (DTensor), still imported by
libraries (Opacus); the same objects as gpumemnet.distributed.tensor's."""
from ..tensor import (DeviceMesh, DTensor, Partial, Placement, Replicate, Shard, distribute_module,
                      distribute_tensor, experimental, init_device_mesh, placement_types)

__all__ = ["DTensor", "DeviceMesh", "Placement", "Shard", "Replicate", "Partial", "distribute_tensor",
           "distribute_module", "init_device_mesh", "experimental", "placement_types"]
