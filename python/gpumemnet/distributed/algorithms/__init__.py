"""gpumemnet.distributed.algorithms: PyTorch's torch.distributed.algorithms (DDP communication hooks, Join)."""
from . import ddp_comm_hooks, join  # noqa: F401
