"""torch.utils.data._utils.pin_memory: pin_memory(data) pins every tensor in a batch, as the DataLoader's
pin_memory=True pins them (_collate._pin), through PyTorch's containers: mappings, sequences, named tuples, and any
object with its own pin_memory()."""
import collections.abc

from ...._core.tensor import Tensor
from .._collate import _pin

__all__ = ["pin_memory"]


def pin_memory(data, device=None):
    if isinstance(data, Tensor):
        return _pin(data)
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        pinned = {k: pin_memory(v, device) for k, v in data.items()}
        try:
            return type(data)(pinned)
        except TypeError:  # a mapping type that cannot be built from a dict
            return pinned
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a named tuple
        return type(data)(*(pin_memory(v, device) for v in data))
    if isinstance(data, collections.abc.Sequence):
        pinned = [pin_memory(v, device) for v in data]
        try:
            return type(data)(pinned)
        except TypeError:
            return pinned
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    return data
