"""Conv1d, Conv2d and their transposes (and _ConvNd, which Conv3d shares), with PyTorch's constructor arguments, attribute names and initialisation."""
import math

from ... import _C
from ..._core.arg_forms import as_int
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._donation import granted, over_slices
from ._utils import new_tensor
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(value, name, n):
    if isinstance(value, (tuple, list)):
        t = tuple(as_int(v) for v in value)
        if len(t) == 1:  # one value for every dim, as PyTorch's functional forms read it (EfficientNet's [1])
            t = t * n
        if len(t) != n:
            raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {value!r}")
        return t
    return (as_int(value),) * n


class _ConvNd(Module):
    """The convolution layers' constructor, by the number of spatial dims _DIMS (Conv1d builds a 2-D one over a
    height of 1). padding_mode 'reflect' / 'replicate' / 'circular' pads with F.pad first, as PyTorch does
    (_reversed_padding_repeated_twice is PyTorch's attribute of the same name)."""
    _DIMS = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        name, n = type(self).__name__, self._DIMS
        in_channels, out_channels, groups = as_int(in_channels), as_int(out_channels), as_int(groups)
        # zero channels build, as PyTorch's (a zero-element weight; the forward then refuses it): vit-pytorch's
        # CrossFormer makes such a layer at small widths
        for arg, v in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            if isinstance(v, bool) or not isinstance(v, int) or v < (1 if arg == "groups" else 0):
                raise ValueError(f"{name}: {arg} must be a {'positive' if arg == 'groups' else 'non-negative'} "
                                 f"integer, got {v!r}")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
        if transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}, got {padding_mode!r}')
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, "kernel_size", n)
        self.stride = _ntuple(stride, "stride", n)
        self.dilation = _ntuple(dilation, "dilation", n)
        for arg in ("kernel_size", "stride", "dilation"):
            if any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in getattr(self, arg)):
                raise _C.ArgumentError(f"{name}: {arg} must be positive ints, got {getattr(self, arg)!r}")
        if isinstance(padding, str):
            if transposed:
                raise ValueError(f"{name}: padding must be ints, got {padding!r}")
            if padding not in ("valid", "same"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding = padding
            lows = [d * (k - 1) // 2 if padding == "same" else 0 for d, k in zip(self.dilation, self.kernel_size)]
            highs = [d * (k - 1) - lo if padding == "same" else 0
                     for d, k, lo in zip(self.dilation, self.kernel_size, lows)]
        else:
            self.padding = _ntuple(padding, "padding", n)
            if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in self.padding):
                raise ValueError(f"{name}: padding must be non-negative ints, got {self.padding!r}")
            lows = highs = list(self.padding)
        self._reversed_padding_repeated_twice = [p for i in reversed(range(n)) for p in (lows[i], highs[i])]
        self.transposed = transposed
        self.output_padding = _ntuple(output_padding, "output_padding", n)
        self.groups = groups
        self.padding_mode = padding_mode
        shape = ((in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)) \
            + self.kernel_size
        self.weight = Parameter(new_tensor(shape, device, dtype))
        if bias:
            self.bias = Parameter(new_tensor((out_channels,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _padded(self, input):
        """(input, padding) for the functional op: input padded by F.pad first in the non-zero padding modes."""
        if self.padding_mode == "zeros":
            return input, self.padding
        return F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), 0

    def reset_parameters(self):
        # PyTorch's default initialisation (see Linear): U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _output_padding(self, input, output_size):
        """The output_padding that makes a transposed convolution's output exactly output_size (PyTorch's rule)."""
        if output_size is None:
            return self.output_padding
        n, name = len(self.stride), type(self).__name__
        output_size = tuple(output_size)
        if len(output_size) == input.ndim:
            output_size = output_size[-n:]
        if len(output_size) != n:
            raise ValueError(f"{name}: output_size must have {n} or {input.ndim} elements, got {output_size}")
        pads = []
        for i in range(n):
            in_size = input.shape[input.ndim - n + i]
            min_size = (in_size - 1) * self.stride[i] - 2 * self.padding[i] + \
                self.dilation[i] * (self.kernel_size[i] - 1) + 1
            max_size = min_size + self.stride[i] - 1
            if not min_size <= output_size[i] <= max_size:
                raise ValueError(f"{name}: requested an output size of {output_size}, but valid sizes range from "
                                 f"({min_size}..{max_size}) in dimension {i} (for an input of "
                                 f"{tuple(input.shape[-n:])})")
            pads.append(output_size[i] - min_size)
        return tuple(pads)

    def _check_output_padding(self):
        for op, s, d in zip(self.output_padding, self.stride, self.dilation):
            if not 0 <= op < max(s, d):
                raise ValueError(f"{type(self).__name__}: output_padding {self.output_padding} must be smaller than "
                                 f"either stride {self.stride} or dilation {self.dilation}")


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W). weight: (out_channels, in_channels/groups, kH, kW).
    groups=in_channels gives a depthwise convolution (its own direct kernel)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, input):
        # weight is read once: a parametrization (spectral_norm's power iteration) runs once per read
        weight, bias = self.weight, self.bias
        if granted(input) and self._keeps_shape(input):  # no grad, and a Sequential hands the input over
            out = over_slices(input, lambda part: self._conv_forward(part, weight, bias))
            if out is not None:
                return out
        return self._conv_forward(input, weight, bias)

    _may_overwrite_input = forward  # reads its input once (a Sequential's grant: _donation.py)

    def _keeps_shape(self, input):
        """Whether the output has the input's shape (the same channels, stride 1, padding that keeps the size),
        computed by this class's own _conv_forward (a subclass's might mix the items of a batch)."""
        if type(self)._conv_forward is not Conv2d._conv_forward or self.padding_mode != "zeros" or \
                self.in_channels != self.out_channels or input.ndim != 4 or any(s != 1 for s in self.stride):
            return False
        if isinstance(self.padding, str):
            return self.padding == "same" or all(k == 1 for k in self.kernel_size)
        return all(2 * p == d * (k - 1) for p, d, k in zip(self.padding, self.dilation, self.kernel_size))

    def _conv_forward(self, input, weight, bias):
        """The layer's convolution with another weight and bias (PyTorch's hook for weight-standardised convs)."""
        x, padding = self._padded(input)
        return F.conv2d(x, weight, bias, self.stride, padding, self.dilation, self.groups)


class _ConvTransposeNd(_ConvNd):
    """The transposed convolutions' base class, as PyTorch's: libraries check isinstance against it and subclass
    it (mmengine, mmcv)."""


class _ConvTransposeMixin(_ConvTransposeNd):
    """PyTorch's deprecated name for _ConvTransposeNd, which libraries still import."""


class ConvTranspose2d(_ConvTransposeNd):
    """The gradient of Conv2d with respect to its input, used as an upsampling layer.
    weight: (in_channels, out_channels/groups, kH, kW)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, device, dtype)
        self._check_output_padding()

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                  self.groups, self.dilation)


def _one(value, name):
    """An int or a 1-tuple -> (1, value): the 1-D layers are 2-D ones over a height of 1."""
    if isinstance(value, str):
        return value
    v = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(v) != 1:
        raise ValueError(f"{name} must be an int or a tuple of 1 int, got {value!r}")
    return (0 if name in ("padding", "output_padding") else 1, v[0])


class _Conv1dShape:
    """After the 2-D constructor ran on (1, k) geometry: PyTorch's 1-D attributes and a 3-D weight (O, I, K)."""

    def _to_1d(self):
        for arg in ("kernel_size", "stride", "dilation", "output_padding"):
            setattr(self, arg, getattr(self, arg)[1:])
        if not isinstance(self.padding, str):
            self.padding = self.padding[1:]
        self._reversed_padding_repeated_twice = self._reversed_padding_repeated_twice[:2]  # the length's pads
        w = self.weight
        self.weight = Parameter(w.detach().reshape(tuple(w.shape[:2]) + (w.shape[3],)))


class Conv1d(_Conv1dShape, _ConvNd):
    """1-D convolution over (N, C_in, L). weight: (out_channels, in_channels/groups, K). Runs as a 2-D convolution
    over a height of 1 (nn/_functional_conv1d.py)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _one(kernel_size, "kernel_size"), _one(stride, "stride"),
                         _one(padding, "padding"), _one(dilation, "dilation"), False, 0, groups, bias,
                         padding_mode, device, dtype)
        self._to_1d()

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def _conv_forward(self, input, weight, bias):
        x, padding = self._padded(input)
        return F.conv1d(x, weight, bias, self.stride, padding, self.dilation, self.groups)


class ConvTranspose1d(_Conv1dShape, _ConvTransposeNd):
    """The gradient of Conv1d with respect to its input. weight: (in_channels, out_channels/groups, K)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _one(kernel_size, "kernel_size"), _one(stride, "stride"),
                         _one(padding, "padding"), _one(dilation, "dilation"), True,
                         _one(output_padding, "output_padding"), groups, bias, padding_mode, device, dtype)
        self._to_1d()
        self._check_output_padding()

    def forward(self, input, output_size=None):
        output_padding = self.output_padding
        if output_size is not None:  # PyTorch's rule: the output_padding that gives exactly that length
            length = tuple(output_size)[-1]
            min_size = (input.shape[-1] - 1) * self.stride[0] - 2 * self.padding[0] + \
                self.dilation[0] * (self.kernel_size[0] - 1) + 1
            if not min_size <= length <= min_size + self.stride[0] - 1:
                raise ValueError(f"ConvTranspose1d: requested an output size of {tuple(output_size)}, but valid "
                                 f"sizes range from ({min_size}..{min_size + self.stride[0] - 1})")
            output_padding = (length - min_size,)
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                  self.groups, self.dilation)
