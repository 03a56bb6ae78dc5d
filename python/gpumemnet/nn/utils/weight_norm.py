"""torch.nn.utils.weight_norm as a module (`from torch.nn.utils.weight_norm import WeightNorm`); the package's
`weight_norm` stays the function, as in PyTorch. The implementation is weight_norms.py's."""
from .weight_norms import _WeightNorm as WeightNorm, remove_weight_norm, weight_norm  # noqa: F401

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]
