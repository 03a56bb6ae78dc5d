"""GroupNorm and LayerNorm, with PyTorch's attributes (weight, bias; normalized_shape, num_groups, eps, affine /
elementwise_affine), defaults and initialisation (weight 1, bias 0). Both run through F.group_norm's kernel
(nn/_functional_norm.py)."""
from ..._core.arg_forms import as_int
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._utils import new_tensor
from .module import Module

__all__ = ["GroupNorm", "LayerNorm"]


def _positive_int(owner, name, v):
    v = as_int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"{owner}: {name} must be a positive int, got {v!r}")


def _affine_parameters(module, affine, bias, shape, device, dtype):
    """The scale (and shift, unless bias=False) of shape `shape`, or None for both when not affine; initialised."""
    module.register_parameter("weight", Parameter(new_tensor(shape, device, dtype)) if affine else None)
    module.register_parameter("bias", Parameter(new_tensor(shape, device, dtype)) if affine and bias else None)
    module.reset_parameters()


def _reset_affine(module):
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)

class GroupNorm(Module):
    """Normalize each of num_groups groups of consecutive channels of (N, C, *) input per sample; then scale and
    shift each channel (affine; bias=False keeps the scale only, as PyTorch 2.x's keyword)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        _positive_int("GroupNorm", "num_groups", num_groups)
        _positive_int("GroupNorm", "num_channels", num_channels)
        if num_channels % num_groups != 0:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, affine, bias, (num_channels,), device, dtype)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class LayerNorm(Module):
    """Normalize over the last len(normalized_shape) dims; then scale and shift elementwise (elementwise_affine;
    bias=False keeps the scale only)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        normalized_shape = as_int(normalized_shape)
        if isinstance(normalized_shape, (tuple, list)):
            normalized_shape = tuple(as_int(n) for n in normalized_shape)
        if isinstance(normalized_shape, int) and not isinstance(normalized_shape, bool):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, elementwise_affine, bias, self.normalized_shape, device, dtype)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")
