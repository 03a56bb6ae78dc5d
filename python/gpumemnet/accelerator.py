"""gm.accelerator (layer 2, a library): PyTorch's torch.accelerator, the device-neutral spelling of torch.cuda
that current PyTorch examples use (`torch.accelerator.is_available()`, `current_accelerator()`). gpumemnet's one
accelerator is CUDA, so every name here is the gm.cuda one."""
import contextlib

from . import cuda as _cuda
from ._core.dtype import device as _device

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "current_device_idx",
           "set_device_index", "set_device_idx", "device_index", "synchronize", "empty_cache", "memory_stats",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "get_memory_info"]


def is_available():
    """Whether a CUDA device can be used."""
    return _cuda.is_available()


def current_accelerator(check_available=False):
    """device("cuda") in a CUDA build (with check_available, only where a device can be used), else None."""
    if not _cuda.is_built() or (check_available and not _cuda.is_available()):
        return None
    return _device("cuda")


def device_count():
    return _cuda.device_count()


def current_device_index():
    return _cuda.current_device()


def set_device_index(device):
    _cuda.set_device(device)


current_device_idx = current_device_index  # PyTorch 2.6's names, kept by it as aliases
set_device_idx = set_device_index


@contextlib.contextmanager
def device_index(device):
    """The current device within (None: unchanged)."""
    with _cuda.device(device):
        yield


def synchronize(device=None):
    """Wait for the work queued on the device (the current one when none is named)."""
    _cuda.synchronize(_cuda.current_device() if device is None and _cuda.is_available() else device)


def empty_cache():
    _cuda.empty_cache()


def memory_stats(device_index=None):
    return _cuda.memory_stats(device_index)


def memory_allocated(device_index=None):
    return _cuda.memory_allocated(device_index)


def max_memory_allocated(device_index=None):
    return _cuda.max_memory_allocated(device_index)


def memory_reserved(device_index=None):
    return _cuda.memory_reserved(device_index)


def max_memory_reserved(device_index=None):
    return _cuda.max_memory_reserved(device_index)


def reset_peak_memory_stats(device_index=None):
    _cuda.reset_peak_memory_stats(device_index)


def get_memory_info(device_index=None):
    """(free, total) bytes of the device, as the driver sees them."""
    return _cuda.mem_get_info(device_index)
