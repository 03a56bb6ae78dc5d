"""gpumemnet.distributed.optim: ZeroRedundancyOptimizer (PyTorch's torch.distributed.optim name)."""
from .zero import ZeroRedundancyOptimizer  # noqa: F401

__all__ = ["ZeroRedundancyOptimizer"]
