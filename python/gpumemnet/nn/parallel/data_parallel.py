"""DataParallel(module, device_ids=None, output_device=None, dim=0): PyTorch's wrapper, on one device.

gpumemnet trains on one device, so nothing is replicated or scattered: forward calls the wrapped module with the
inputs as given (what PyTorch's DataParallel does when it has one device or none). The wrapping itself is
PyTorch's: the model is `.module`, and state_dict keys carry the "module." prefix, so checkpoints saved from a
DataParallel model load into one here and the other way round."""
from ... import _C
from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be an nn.Module, got {type(module).__name__}")
        self.module = module
        if _C._cuda_device_count() == 0:  # PyTorch's on a machine without CUDA: the module alone, no devices
            self.device_ids = []
            return
        self.device_ids = [] if device_ids is None else list(device_ids)
        self.output_device = output_device if output_device is not None else (
            self.device_ids[0] if self.device_ids else None)
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """DataParallel's forward as a function: module(*inputs, **module_kwargs) on the one device."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
