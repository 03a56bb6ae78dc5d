"""torch.get_device_module and torch.Stream: the device-neutral ways PyTorch code reaches torch.cuda / torch.cpu and a
device's stream (diffusers' TorchDeviceBackend, its offloading hooks' `torch.cuda.Stream | torch.Stream`). In the
package's face (layer 4): under the torch alias get_device_module gives the alias's module (torch.cpu), as
PyTorch's does."""
import abc
import importlib

from . import cuda as _cuda
from ._core.dtype import device as _device
from .dropin import is_active as _alias_active

__all__ = ["get_device_module", "Stream"]

_MODULES = ("cpu", "cuda")
_DEVICE_TYPE_CODES = {"cpu": 0, "meta": 14}  # the device modules gpumemnet has (torch.mps, torch.xpu ... it has not)


def _default_type():
    return "cuda" if _cuda.is_available() else "cpu"


def get_device_module(device=None):
    """The module of a device type: torch.cuda for 'cuda' / 'cuda:1' / device('cuda'), torch.cpu for 'cpu'; None:
    the current accelerator's (CUDA where a device can be used, else the CPU's)."""
    if device is None:
        kind = _default_type()
    elif isinstance(device, _device):
        kind = device.type
    elif isinstance(device, str):
        kind = _device(device).type
    else:
        raise RuntimeError(f"Invalid value of device '{device}', expect torch.device, str, or None")
    if kind not in _MODULES:
        raise RuntimeError(f"Device '{kind}' does not have a corresponding module registered as 'torch.{kind}'.")
    return importlib.import_module(("torch." if _alias_active() else "gpumemnet.") + kind)


class Stream(metaclass=abc.ABCMeta):
    """torch.Stream(device=None, priority=0): a stream of a device. For CUDA it is torch.cuda.Stream (a virtual
    subclass: isinstance(torch.cuda.Stream(), torch.Stream) holds, as in PyTorch); for the CPU and meta devices
    a stream whose work is always complete (gpumemnet runs one stream per device)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        dev = _device(_default_type() if device is None else device)
        if dev.type == "cuda":
            return _cuda.Stream(dev, priority)
        if dev.type not in ("cpu", "meta"):
            raise RuntimeError(f"Stream: gpumemnet has no {dev.type} device")
        self = super().__new__(cls)
        self._type, self.device_index, self.stream_id, self.priority = dev.type, -1, 0, priority
        return self

    @property
    def device_type(self):
        """PyTorch's DeviceType number of the device (CPU 0, meta 14)."""
        return _DEVICE_TYPE_CODES[self._type]

    @property
    def device(self):
        return _device(self._type)

    def query(self):
        return True

    def synchronize(self):
        pass

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def __eq__(self, other):
        return isinstance(other, Stream) and getattr(other, "_type", None) == self._type

    def __hash__(self):
        return hash(("stream", self._type))

    def __repr__(self):
        return f"torch.Stream device_type={self._type}, device_index=-1, stream_id=0"


Stream.register(_cuda.Stream)
