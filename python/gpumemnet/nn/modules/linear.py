"""Linear and Identity."""
import math

from ... import _C
from ..._core.arg_forms import as_int
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._donation import granted, over_slices
from ._utils import new_tensor
from .module import Module

__all__ = ["Identity", "Linear"]


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments (a placeholder in a tree)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        in_features, out_features = as_int(in_features), as_int(out_features)  # np.int64 sizes (SB3)
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise _C.ArgumentError(f"Linear: {name} must be a non-negative int, got {v!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(new_tensor((out_features, in_features), device, dtype))
        if bias:
            self.bias = Parameter(new_tensor((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # PyTorch's default: kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), for both
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        # weight is read once: a parametrization (spectral_norm's power iteration) runs once per read
        weight, bias = self.weight, self.bias
        # no grad, and a Sequential hands the input over: rows of the same width are computed over themselves
        if self.in_features == self.out_features and input.ndim >= 2 and granted(input):
            out = over_slices(input, lambda part: F.linear(part, weight, bias))
            if out is not None:
                return out
        return F.linear(input, weight, bias)

    _may_overwrite_input = forward  # reads its input once (a Sequential's grant: _donation.py)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's Linear of MultiheadAttention's out_proj (a quantization marker): a Linear here, so that a whole
    model PyTorch pickled with a Transformer in it loads (torch.nn.modules.linear.NonDynamicallyQuantizableLinear)."""
