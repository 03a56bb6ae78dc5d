"""Pooling layers. GlobalAvgPool2d / GlobalMaxPool2d (not in PyTorch) reduce (N, C, H, W) to (N, C): the head
that replaces a huge flatten + Linear (seed 000's fc1: 583.7M parameters) by nothing at all."""
from .. import functional as F
from ..._core import unsupported
from .module import Module

__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "GlobalAvgPool2d", "GlobalMaxPool2d", "MaxPool1d",
           "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "FractionalMaxPool2d",
           "FractionalMaxPool3d"]


class _MaxPoolNd(Module):
    """MaxPool1d/2d/3d: the same arguments, the functional op named by _op (PyTorch's _MaxPoolNd)."""
    _op = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None and stride != []) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return getattr(F, self._op)(input, self.kernel_size, self.stride, self.padding, self.dilation,
                                    self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class _AvgPoolNd(Module):
    """AvgPool2d/3d (AvgPool1d has no divisor_override)."""
    _op = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None and stride != []) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return getattr(F, self._op)(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                    self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptiveAvgPoolNd(Module):
    _op = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return getattr(F, self._op)(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _AdaptiveMaxPoolNd(Module):
    _op = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        return getattr(F, self._op)(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class MaxPool2d(_MaxPoolNd):
    _op = "max_pool2d"


class AvgPool2d(_AvgPoolNd):
    _op = "avg_pool2d"


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    _op = "adaptive_avg_pool2d"


class GlobalAvgPool2d(Module):
    """(N, C, H, W) -> (N, C): the mean over each channel's plane (Network in Network's classifier head)."""

    def forward(self, input):
        return F.global_avg_pool2d(input)


class GlobalMaxPool2d(Module):
    """(N, C, H, W) -> (N, C): the maximum over each channel's plane."""

    def forward(self, input):
        return F.global_max_pool2d(input)


class MaxPool1d(_MaxPoolNd):
    _op = "max_pool1d"


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None and stride != []) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    _op = "adaptive_avg_pool1d"


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    _op = "adaptive_max_pool2d"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    _op = "adaptive_max_pool1d"


class _MaxUnpoolNd(Module):
    """PyTorch's base of MaxUnpool1d/2d (nn/modules/extra.py); flop counters (thop) key their hooks on it."""

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


# gpumemnet has no fractional max pooling: the names exist so that code naming them at import (thop's hook table)
# loads; building one raises NotImplementedError.
FractionalMaxPool2d = unsupported.module_class("torch.nn.FractionalMaxPool2d", Module)
FractionalMaxPool3d = unsupported.module_class("torch.nn.FractionalMaxPool3d", Module)
