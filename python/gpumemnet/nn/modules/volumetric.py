"""The 3-D layers over nn/_functional_volumetric.py (Conv3d, ConvTranspose3d, MaxPool3d, AvgPool3d, the adaptive
3-D pools); nn imports __all__."""
from ..._core import unsupported
from .module import Module

__all__ = ["Conv3d"]

Conv3d = unsupported.module_class("torch.nn.Conv3d", Module)
