"""Exchanging memory with other libraries: torch.frombuffer (a tensor over a Python buffer's bytes: safetensors
loads from bytes with it), DLPack (torch.from_dlpack, Tensor.__dlpack__, torch.utils.dlpack) through NumPy, and
the symbolic-shape types PyTorch code names in isinstance checks (gpumemnet's shapes are always plain ints).
Layer 2 (a library over the core)."""
import ctypes

import numpy as np

from ._core.creation import from_numpy
from ._core.dtype import bfloat16, dtype as _dtype_class

__all__ = ["frombuffer", "from_dlpack", "SymInt", "SymFloat", "SymBool"]


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over buffer's bytes from offset: count elements of dtype (-1: all that remain). It shares a
    writable buffer's memory, as PyTorch's; a read-only one (bytes) is copied (PyTorch shares it with a warning)."""
    if not isinstance(dtype, _dtype_class) or dtype.code is None:
        raise TypeError(f"frombuffer(): argument 'dtype' must be a gpumemnet dtype with tensors, got {dtype!r}")
    wide = dtype is bfloat16  # NumPy has no bfloat16: its bits are read as int16 and reinterpreted
    np_dtype = np.int16 if wide else np.dtype(dtype.name if dtype.name != "bool" else "bool")
    try:
        array = np.frombuffer(buffer, dtype=np_dtype, count=count, offset=offset)
    except (TypeError, ValueError) as e:
        raise ValueError(f"frombuffer: {e}") from None
    out = from_numpy(array)
    out = out.view(bfloat16) if wide else out
    if requires_grad:
        out.requires_grad_(True)
    return out


def from_dlpack(ext_tensor):
    """A CPU tensor sharing the memory of an object that speaks DLPack (a NumPy array, a JAX / CuPy CPU array, a
    PyTorch CPU tensor), through NumPy's DLPack import."""
    if type(ext_tensor).__name__ == "PyCapsule":  # torch.utils.dlpack.to_dlpack's (the legacy exchange)
        ext_tensor = _Capsule(ext_tensor)
    if not hasattr(ext_tensor, "__dlpack__"):
        raise RuntimeError(f"from_dlpack received an invalid capsule: a {type(ext_tensor).__name__} has no "
                           f"__dlpack__ (expected an array or tensor that speaks DLPack)")
    array = np.from_dlpack(ext_tensor)
    if isinstance(ext_tensor, _Capsule) and not array.flags.writeable:
        array = _writable(array)
    return from_numpy(array)


def _writable(array):
    """A writable array over a read-only one's memory, keeping it alive: NumPy marks what it imports from a legacy
    capsule read-only (that DLPack version has no flag to say), where PyTorch's import shares it for writing too.
    Negative strides: the array as it is (from_numpy then copies it)."""
    if any(st < 0 for st in array.strides) or array.size == 0:
        return array
    span = sum((n - 1) * st for n, st in zip(array.shape, array.strides)) + array.itemsize
    raw = (ctypes.c_byte * span).from_address(array.__array_interface__["data"][0])
    raw.owner = array
    flat = np.frombuffer(raw, dtype=array.dtype)  # (DLPack strides count elements: span is a whole number)
    return np.lib.stride_tricks.as_strided(flat, array.shape, array.strides, writeable=True)


class _Capsule:
    """A DLPack capsule, as the object NumPy's import takes (one that hands it over): host memory."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0


def to_dlpack(tensor):
    """A DLPack capsule over a CPU tensor's memory (torch.utils.dlpack.to_dlpack)."""
    return tensor.__dlpack__()


class SymInt:
    """PyTorch's symbolic int (shapes under its compiler); gpumemnet never makes one."""


class SymFloat:
    """PyTorch's symbolic float; gpumemnet never makes one."""


class SymBool:
    """PyTorch's symbolic bool; gpumemnet never makes one."""
