"""autocast as gpumemnet.amp (and so gm.autocast, torch.autocast and torch.amp.autocast under the drop-in) exports
it: the core's (_core/autocast.py), which also takes device_type "meta" while an estimate replays a training step
on the meta device. A forward that opens a region for its own input's device (x-transformers' and rotary
embeddings' `with autocast(t.device.type, enabled=False)`) gets "meta" there; the region then stands for the
device the estimate stands for, as in the real step it is that device's. Anywhere else "meta" is refused with the
core's words, as PyTorch refuses a device type autocast does not know."""
import threading

from .._core.autocast import autocast as _core_autocast

__all__ = ["autocast", "set_meta_stands_for"]


class _StandsFor(threading.local):
    """The device type ("cpu", "cuda") an estimate on this thread stands for, or None outside estimates."""
    device_type = None


_stands_for = _StandsFor()


def set_meta_stands_for(device_type):
    """While an estimate runs on this thread (gpumemnet.memory.estimator sets it, and sets the previous value
    back after): autocast("meta", ...) means autocast(device_type, ...); None: "meta" is refused. Returns the
    previous value."""
    prev, _stands_for.device_type = _stands_for.device_type, device_type
    return prev


class autocast(_core_autocast):
    __doc__ = _core_autocast.__doc__

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=True):
        if device_type == "meta" and _stands_for.device_type is not None:
            device_type = _stands_for.device_type
        super().__init__(device_type, dtype, enabled, cache_enabled)
