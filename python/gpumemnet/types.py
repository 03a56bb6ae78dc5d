"""torch.types: the type aliases annotations in PyTorch libraries import (torchvision's tv_tensors)."""
from typing import Sequence, Union

from ._core.dtype import device as _device_cls, dtype as _dtype_cls
from ._core.tensor_select import Size

__all__ = ["_device", "_dtype", "_size", "Device", "Number"]

_device = _device_cls
_dtype = _dtype_cls
_size = Union[Size, Sequence[int]]
Device = Union[_device_cls, str, int, None]
Number = Union[int, float, bool]
