"""DDP communication hooks (PyTorch's torch.distributed.algorithms.ddp_comm_hooks): default_hooks."""
from . import default_hooks  # noqa: F401
