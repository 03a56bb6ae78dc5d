"""The 3-D layers over nn/_functional_volumetric.py (Conv3d, ConvTranspose3d, MaxPool3d, AvgPool3d, the adaptive
3-D pools), on the constructors the 1-D and 2-D layers share (conv.py's _ConvNd, pooling.py's bases); nn imports
__all__."""
from .. import functional as F
from .conv import _ConvNd, _ConvTransposeNd
from .pooling import _AdaptiveAvgPoolNd, _AdaptiveMaxPoolNd, _AvgPoolNd, _MaxPoolNd

__all__ = ["Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d"]


class _ConvNd3(_ConvNd):
    _DIMS = 3


class Conv3d(_ConvNd3):
    """3-D convolution over (N, C_in, D, H, W). weight: (out_channels, in_channels/groups, kD, kH, kW).
    padding_mode 'reflect', 'replicate' or 'circular' pads with F.pad first, as PyTorch does."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def _conv_forward(self, input, weight, bias):
        x, padding = self._padded(input)
        return F.conv3d(x, weight, bias, self.stride, padding, self.dilation, self.groups)


class ConvTranspose3d(_ConvNd3, _ConvTransposeNd):
    """The gradient of Conv3d with respect to its input, used as an upsampling layer.
    weight: (in_channels, out_channels/groups, kD, kH, kW)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                  self.groups, self.dilation)


class MaxPool3d(_MaxPoolNd):
    _op = "max_pool3d"


class AvgPool3d(_AvgPoolNd):
    _op = "avg_pool3d"


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    _op = "adaptive_avg_pool3d"


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    _op = "adaptive_max_pool3d"
