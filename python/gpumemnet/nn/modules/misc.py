"""Shape and resampling layers: Flatten, Upsample, UpsamplingNearest2d, UpsamplingBilinear2d."""
from .. import functional as F
from .module import Module

__all__ = ["Flatten", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Flatten(Module):
    """Flatten dims start_dim..end_dim into one (a view when the input's strides allow it)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Upsample(Module):
    """Resize (N, C, H, W) to `size` or by `scale_factor` with mode 'nearest', 'bilinear', ... (what
    F.interpolate supports). Also the cheap way to downsample an input that is too large (seed 000)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        if size is None and scale_factor is None:
            raise ValueError("Upsample: either size or scale_factor should be defined")
        if size is not None and scale_factor is not None:
            raise ValueError("Upsample: only one of size or scale_factor should be defined")
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self):
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode 'nearest' (PyTorch's older name)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode 'bilinear' and align_corners=True (PyTorch's older name, and its corner rule)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
