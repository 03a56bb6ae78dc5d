"""Activation layers: ReLU, LeakyReLU, Sigmoid, Tanh, GELU, SiLU, Hardswish, Hardsigmoid, Mish, Hardtanh, ReLU6,
ELU, Softplus, Softmax, LogSoftmax, Softmax2d, PReLU."""
from .. import functional as F
from .. import init as _init  # PReLU's argument is called init
from ..parameter import Parameter
from ._utils import _inplace, new_tensor
from .module import Module

__all__ = ["ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Hardswish", "Hardsigmoid", "Mish", "Hardtanh",
           "ReLU6", "ELU", "Softplus", "Softmax", "LogSoftmax", "Softmax2d", "PReLU"]


class ReLU(Module):
    """max(x, 0). inplace=True overwrites the input and saves no extra activation for backward."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=_inplace(self, input))

    _may_overwrite_input = forward  # reads its input once (a Sequential's grant: _donation.py)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, _inplace(self, input))

    _may_overwrite_input = forward  # reads its input once (a Sequential's grant: _donation.py)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class GELU(Module):
    """x * Phi(x); approximate='tanh' uses the tanh approximation."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class _InplaceActivation(Module):
    """An activation whose only argument is inplace (SiLU, Hardswish, Hardsigmoid, Mish); `fn` names its
    functional form, looked up in nn.functional at each call as PyTorch's modules do (FLOP counters such as
    ptflops replace F.silu and count what the modules call)."""
    fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return getattr(F, type(self).fn)(input, inplace=_inplace(self, input))

    _may_overwrite_input = forward  # reads its input once (a Sequential's grant: _donation.py)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class SiLU(_InplaceActivation):
    """x * sigmoid(x). Its gradient needs the input: inplace=True still keeps a copy of it for backward, as
    PyTorch does."""
    fn = "silu"


class Hardswish(_InplaceActivation):
    """x * relu6(x + 3) / 6 (MobileNetV3). Its gradient needs the input (kept as a copy when inplace=True)."""
    fn = "hardswish"

    def extra_repr(self):  # PyTorch's repr does not show inplace here
        return ""


class Hardsigmoid(_InplaceActivation):
    """relu6(x + 3) / 6. Backward reads the output, so inplace=True saves a tensor."""
    fn = "hardsigmoid"
    extra_repr = Hardswish.extra_repr


class Mish(_InplaceActivation):
    """x * tanh(softplus(x)). Its gradient needs the input (kept as a copy when inplace=True)."""
    fn = "mish"


class Hardtanh(Module):
    """clamp(x, min_val, max_val). Backward reads the output, so inplace=True saves a tensor."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if not max_val > min_val:  # PyTorch asserts it too
            raise AssertionError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, _inplace(self, input))

    _may_overwrite_input = forward  # reads its input once (a Sequential's grant: _donation.py)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """min(max(x, 0), 6) (MobileNetV2), a Hardtanh(0, 6) as in PyTorch."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1). With alpha >= 0 backward reads the output, so inplace=True saves a
    tensor; with alpha < 0 the in-place form cannot be differentiated (PyTorch refuses it too)."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, _inplace(self, input))

    _may_overwrite_input = forward  # reads its input once (a Sequential's grant: _donation.py)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels of (C, H, W) or (N, C, H, W), at every position."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3)


class PReLU(Module):
    """x > 0 ? x : weight * x with a learned weight: one shared slope (num_parameters=1) or one per channel."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        if isinstance(num_parameters, bool) or not isinstance(num_parameters, int) or num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be a positive int, got {num_parameters!r}")
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(new_tensor((num_parameters,), device, dtype))
        self.reset_parameters()

    def reset_parameters(self):
        _init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


# PyTorch's torch.nn.modules.activation holds these too: code imports them from it (DETR's MultiheadAttention) or
# reads vars() of it (PyG's activation resolver)
from .more import (CELU, GLU, SELU, Hardshrink, LogSigmoid, Softmin, Softshrink, Softsign,  # noqa: E402,F401
                   Tanhshrink, Threshold)
from .extra import MultiheadAttention, RReLU  # noqa: E402,F401
