"""skip_init: build a module without running its parameter initialisation, as torch.nn.utils.skip_init: the module
is constructed on the meta device (no data, no random draws) and then given uninitialised storage on the requested
device (to_empty). The module's class must take a `device` argument, as PyTorch requires."""
import inspect

from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with uninitialised parameters and buffers on kwargs' device (default "cpu")."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    kwargs["device"] = "meta"
    return module_cls(*args, **kwargs).to_empty(device=final_device)
