"""gm.cuda (layer 2, a library; its memory reports come from gpumemnet.memory through _core/hooks.py): is CUDA
usable here, which devices, and the few device-wide actions (empty_cache, synchronize).

A CUDA build runs on a machine with no GPU or driver: everything here then answers "0 devices" instead of
raising, except where a specific device is asked for. Memory statistics live in gm.memory, not here.
"""
from .. import _C
from .._core import hooks
from . import _device, _streams
from ._streams import Event, Stream, current_stream, default_stream, stream, set_stream, StreamContext  # noqa: F401
from ._device import (device_count, current_device, set_device, device, manual_seed, manual_seed_all,  # noqa: F401
                      seed, seed_all, initial_seed, get_rng_state, set_rng_state, get_rng_state_all, set_rng_state_all,
                      is_bf16_supported, is_initialized, init, OutOfMemoryError)

__all__ = ["is_available", "device_count", "get_device_properties", "get_device_name", "get_device_capability",
           "empty_cache", "synchronize", "is_built", "is_emulated", "mem_get_info", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
           "memory_stats", "memory_summary", "set_per_process_memory_fraction", "host_memory_stats"] \
    + _device.__all__ + _streams.__all__


def is_built():
    """True when gpumemnet was compiled with CUDA (whether or not this machine has a GPU)."""
    return _C._build_info()["cuda"] is not None


def is_emulated():
    """True for a GPUMEMNET_CUDA=emu build: "cuda" devices are the CPU emulator of kernels/cuda/README.md."""
    return _C._build_info()["cuda"] == "emulator"


def is_available():
    """True when at least one CUDA device can be used."""
    return device_count() > 0


class _CudaDeviceProperties:
    __slots__ = ("index", "name", "total_memory", "major", "minor", "multi_processor_count")

    def __init__(self, index, props):
        self.index = index
        for key in self.__slots__[1:]:
            setattr(self, key, props[key])

    def __repr__(self):
        return (f"_CudaDeviceProperties(index={self.index}, name={self.name!r}, major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory / 2**30:.2f} GiB, "
                f"multi_processor_count={self.multi_processor_count})")


def _index(device, what):
    """Device index from None or "cuda" (the current device), an int, "cuda:N", or anything whose str() is one of
    those."""
    return _C._cuda_current_device() if device is None else _device._index_of(device, what)


def _require(device, what):
    return _device.require(what, _index(device, what))


def get_device_properties(device=None):
    """Name, total memory (bytes), compute capability (major, minor) and SM count of a CUDA device."""
    i = _require(device, "get_device_properties")
    return _CudaDeviceProperties(i, _C._cuda_get_device_properties(i))


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    p = get_device_properties(device)
    return (p.major, p.minor)


def _devices(device, what):
    """The indices an action applies to: all devices when none is named (possibly none at all)."""
    if device is None:
        return range(device_count())
    return [_require(device, what)]


def empty_cache(device=None):
    """Give the allocator's cached, unused blocks back to the driver (all devices unless one is named).

    Rarely useful: cached blocks are reused by the next allocations anyway; it helps only another process, or
    when fragmentation of the cache is what makes a large request fail (see gm.memory.memory_summary)."""
    devices = _devices(device, "empty_cache")
    release = getattr(_C, "empty_cache", None)
    if release is None:  # the allocator is not built yet: nothing is cached
        return
    for i in devices:
        release(f"cuda:{i}")


def synchronize(device=None):
    """Wait until all work queued on a device (all devices unless one is named) has finished.

    A no-op when there is no CUDA device and none is named; naming one that does not exist raises."""
    for i in _devices(device, "synchronize"):
        _C._cuda_synchronize(i)


# ---- PyTorch's torch.cuda memory names, answered by gpumemnet's allocator (see gm.memory for the full API) ----
def _dev(device, what):
    return f"cuda:{_require(device, what)}"


def mem_get_info(device=None):
    """(free, total) bytes of the device as the driver sees them (other processes included)."""
    return _C._cuda_mem_get_info(_require(device, "mem_get_info"))


# Where CUDA cannot be used, the counters read 0 and the statistics are empty, as PyTorch's (training scripts log
# torch.cuda.max_memory_allocated() on CPU runs too)
def memory_allocated(device=None):
    return _C.memory_allocated(_dev(device, "memory_allocated")) if is_initialized() else 0


def max_memory_allocated(device=None):
    return _C.max_memory_allocated(_dev(device, "max_memory_allocated")) if is_initialized() else 0


def memory_reserved(device=None):
    return _C.memory_reserved(_dev(device, "memory_reserved")) if is_initialized() else 0


def max_memory_reserved(device=None):
    if not is_initialized():
        return 0
    return _C.memory_stats(_dev(device, "max_memory_reserved"))["reserved"]["peak"]


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(_dev(device, "reset_peak_memory_stats"))


def memory_stats(device=None):
    return _C.memory_stats(_dev(device, "memory_stats")) if is_initialized() else {}


def memory_summary(device=None):
    return hooks.require("memory_summary")(_dev(device, "memory_summary"))


def set_per_process_memory_fraction(fraction, device=None):
    """Cap gpumemnet's reserved bytes on the device at fraction x its capacity (gm.memory.set_limit)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError(f"set_per_process_memory_fraction: fraction must be a float, got {type(fraction).__name__}")
    hooks.require("set_limit")(_dev(device, "set_per_process_memory_fraction"), float(fraction))


def host_memory_stats():
    """Statistics of the pinned host memory allocator (PyTorch's name): gm.memory.memory_stats("cpu-pinned")."""
    return _C.memory_stats("cpu-pinned")


from . import amp  # noqa: E402,F401  (torch.cuda.amp's spelling: gm.cuda.amp.autocast, gm.cuda.amp.GradScaler)
from . import nvtx  # noqa: E402,F401  (profiler ranges: no-ops)
from . import random  # noqa: E402,F401  (torch.cuda.random.manual_seed: the generator's functions again)
from .graphs import *  # noqa: E402,F401,F403  (CUDA graphs: the names, refused)
from .._core.legacy_types import CUDA as _LEGACY  # noqa: E402

globals().update(_LEGACY)  # torch.cuda.FloatTensor... (isinstance: that dtype on CUDA)
__all__ += list(_LEGACY)


def __getattr__(name):
    if name == "_initialized":  # PyTorch's flag (Performer's reversible layers read it to save CUDA's RNG state)
        return is_initialized()
    raise AttributeError(f"module 'gpumemnet.cuda' has no attribute '{name}'")
