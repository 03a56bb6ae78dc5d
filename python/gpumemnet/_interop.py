"""Exchanging memory with other libraries: torch.frombuffer (a tensor over a Python buffer's bytes: safetensors
loads from bytes with it), DLPack (torch.from_dlpack, Tensor.__dlpack__, torch.utils.dlpack) through NumPy, and
the symbolic-shape types PyTorch code names in isinstance checks (gpumemnet's shapes are always plain ints).
Layer 2 (a library over the core)."""
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
    if not hasattr(ext_tensor, "__dlpack__"):
        raise RuntimeError(f"from_dlpack received an invalid capsule: a {type(ext_tensor).__name__} has no "
                           f"__dlpack__ (expected an array or tensor that speaks DLPack)")
    return from_numpy(np.from_dlpack(ext_tensor))


def to_dlpack(tensor):
    """A DLPack capsule over a CPU tensor's memory (torch.utils.dlpack.to_dlpack)."""
    return tensor.__dlpack__()


class SymInt:
    """PyTorch's symbolic int (shapes under its compiler); gpumemnet never makes one."""


class SymFloat:
    """PyTorch's symbolic float; gpumemnet never makes one."""


class SymBool:
    """PyTorch's symbolic bool; gpumemnet never makes one."""
