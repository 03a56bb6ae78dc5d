"""convert_conv2d_weight_memory_format and convert_conv3d_weight_memory_format, as torch.nn.utils's. gpumemnet keeps
every tensor in its default (NCHW / NCDHW) layout and accepts memory formats without changing anything (see
gpumemnet.channels_last), so these check their arguments where PyTorch would use them (a module holding such a
convolution), keep the weights' values (as PyTorch does: only the strides would change) and return the module."""
from .. import modules
from ..modules.module import Module

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, kinds, fn):
    if not isinstance(module, Module):
        raise AttributeError(f"{fn}: module must be a gpumemnet.nn.Module (it has no children()), got "
                             f"{type(module).__name__}")
    kinds = tuple(getattr(modules, k) for k in kinds if hasattr(modules, k))
    if type(memory_format).__name__ != "memory_format" and any(isinstance(m, kinds) for m in module.modules()):
        raise TypeError(f"{fn}: argument 'memory_format' must be gpumemnet.memory_format (e.g. "
                        f"gpumemnet.channels_last), not {type(memory_format).__name__}")
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """The weights of module's Conv2d / ConvTranspose2d layers in memory_format (a no-op here); returns module."""
    return _convert(module, memory_format, ("Conv2d", "ConvTranspose2d"), "convert_conv2d_weight_memory_format")


def convert_conv3d_weight_memory_format(module, memory_format):
    """The weights of module's Conv3d / ConvTranspose3d layers in memory_format (a no-op here); returns module."""
    return _convert(module, memory_format, ("Conv3d", "ConvTranspose3d"), "convert_conv3d_weight_memory_format")
