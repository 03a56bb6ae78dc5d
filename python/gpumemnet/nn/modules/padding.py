"""Padding layers with PyTorch's names: Constant/Zero/Reflection/Replication/CircularPad{1,2,3}d, over F.pad.
padding is an int (the same on every side) or a tuple (left, right[, top, bottom[, front, back]]). The classes
derive from PyTorch's private bases (_ConstantPadNd, ...), as PyTorch's do."""
from .. import functional as F
from .module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


def _padding(padding, dims, cls):
    if isinstance(padding, int) and not isinstance(padding, bool):
        return (padding,) * (2 * dims)
    padding = tuple(padding)
    if len(padding) != 2 * dims or not all(isinstance(p, int) and not isinstance(p, bool) for p in padding):
        raise ValueError(f"{cls}: padding must be an int or a tuple of {2 * dims} ints, got {padding!r}")
    return padding


class _PadNd(Module):
    mode = "constant"
    dims = 2

    def __init__(self, padding, value=None):
        super().__init__()
        self.padding = _padding(padding, self.dims, type(self).__name__)
        if value is not None:
            self.value = float(value)

    def forward(self, input):
        if self.mode == "circular" and input.dim() not in (self.dims + 1, self.dims + 2):
            # PyTorch's CircularPadNd checks the rank itself (F.pad would say something about padding sizes)
            raise ValueError(f"{type(self).__name__}: expected {self.dims + 1}D or {self.dims + 2}D input (got "
                             f"{input.dim()}D input of shape {tuple(input.shape)})")
        return F.pad(input, self.padding, self.mode, getattr(self, "value", None))

    def extra_repr(self):
        return f"{self.padding}"


# PyTorch's private bases, one per mode (flop counters such as thop key their hooks on them); ZeroPadNd derive from
# ConstantPadNd, as PyTorch's do
class _ConstantPadNd(_PadNd):
    mode = "constant"

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ReflectionPadNd(_PadNd):
    mode = "reflect"


class _ReplicationPadNd(_PadNd):
    mode = "replicate"


class _CircularPadNd(_PadNd):
    mode = "circular"


def _make(name, base, dims, doc):
    if base is _ConstantPadNd:
        def init(self, padding, value):
            _PadNd.__init__(self, padding, value)
    elif issubclass(base, _ConstantPadNd):  # ZeroPadNd: no value argument, and PyTorch's repr omits it
        def init(self, padding):
            _PadNd.__init__(self, padding, 0.0)
        return type(name, (base,), {"dims": dims, "__init__": init, "__doc__": doc, "__module__": __name__,
                                    "extra_repr": _PadNd.extra_repr})
    else:
        def init(self, padding):
            _PadNd.__init__(self, padding)
    return type(name, (base,), {"dims": dims, "__init__": init, "__doc__": doc, "__module__": __name__})


ConstantPad1d = _make("ConstantPad1d", _ConstantPadNd, 1, "Pad the last dim with a constant.")
ConstantPad2d = _make("ConstantPad2d", _ConstantPadNd, 2, "Pad the last 2 dims with a constant.")
ConstantPad3d = _make("ConstantPad3d", _ConstantPadNd, 3, "Pad the last 3 dims with a constant.")
ZeroPad1d = _make("ZeroPad1d", ConstantPad1d, 1, "Pad the last dim with zeros.")
ZeroPad2d = _make("ZeroPad2d", ConstantPad2d, 2, "Pad the last 2 dims with zeros.")
ZeroPad3d = _make("ZeroPad3d", ConstantPad3d, 3, "Pad the last 3 dims with zeros.")
ReflectionPad1d = _make("ReflectionPad1d", _ReflectionPadNd, 1, "Mirror the last dim about its edges.")
ReflectionPad2d = _make("ReflectionPad2d", _ReflectionPadNd, 2,
                        "Mirror the last 2 dims about their edges (style transfer, CycleGAN).")
ReflectionPad3d = _make("ReflectionPad3d", _ReflectionPadNd, 3, "Mirror the last 3 dims about their edges.")
ReplicationPad1d = _make("ReplicationPad1d", _ReplicationPadNd, 1, "Repeat the edge values of the last dim.")
ReplicationPad2d = _make("ReplicationPad2d", _ReplicationPadNd, 2, "Repeat the edge values of the last 2 dims.")
ReplicationPad3d = _make("ReplicationPad3d", _ReplicationPadNd, 3, "Repeat the edge values of the last 3 dims.")
CircularPad1d = _make("CircularPad1d", _CircularPadNd, 1, "Wrap the last dim around.")
CircularPad2d = _make("CircularPad2d", _CircularPadNd, 2, "Wrap the last 2 dims around.")
CircularPad3d = _make("CircularPad3d", _CircularPadNd, 3, "Wrap the last 3 dims around.")
