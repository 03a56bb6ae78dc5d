"""PyTorch's legacy tensor types: torch.FloatTensor, torch.LongTensor, torch.cuda.FloatTensor... Code from
before dtypes still uses them, and so does torchvision's ToTensor (`isinstance(pic, torch.ByteTensor)`).

Each is a class that makes tensors and that isinstance() recognises by dtype and device, as PyTorch's:
- FloatTensor(2, 3) or FloatTensor(Size) is uninitialised memory of that shape; FloatTensor() is empty.
- FloatTensor(data) copies a sequence or NumPy array, converting to the type's dtype.
- FloatTensor(t) of a tensor of that type shares its memory; another dtype is a TypeError.
- isinstance(x, FloatTensor) is True for float32 tensors on the CPU; cuda.FloatTensor for those on CUDA.
- x.type(LongTensor) converts.
They are not Tensor's subclasses (issubclass is False, as in PyTorch)."""
import numbers

import numpy as np

from .creation import empty, tensor
from .dtype import DTYPES
from .tensor import Tensor
from .tensor_select import Size

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
           "CharTensor", "ByteTensor", "BoolTensor"]

_CODES = {"FloatTensor": 0, "DoubleTensor": 1, "HalfTensor": 2, "BFloat16Tensor": 3, "LongTensor": 4,
          "BoolTensor": 5, "ByteTensor": 6, "CharTensor": 7, "ShortTensor": 8, "IntTensor": 9}


class _LegacyType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj._dtype == cls._code and obj._device.startswith("cuda") == cls.is_cuda

    def __repr__(cls):
        return f"<class '{cls._torch_name}'>"


class _Legacy(metaclass=_LegacyType):
    def __new__(cls, *args, device=None):
        dtype = DTYPES[cls._code]
        where = device if device is not None else ("cuda" if cls.is_cuda else "cpu")
        if not args:
            return empty(0, dtype=dtype, device=where)
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args) or \
                (len(args) == 1 and isinstance(args[0], Size)):
            return empty(*args, dtype=dtype, device=where)
        if len(args) > 1:
            raise TypeError(f"{cls.__name__}(): expected sizes (ints) or one sequence of data, got "
                            f"{', '.join(type(a).__name__ for a in args)}")
        (data,) = args
        if isinstance(data, Tensor):
            if not isinstance(data, cls):
                raise TypeError(f"{cls.__name__}(): expected a tensor of dtype {dtype} on "
                                f"{'cuda' if cls.is_cuda else 'cpu'}, got dtype {data.dtype} on {data._device}")
            return data.detach()
        if isinstance(data, (str, bytes)) or not isinstance(data, (list, tuple, np.ndarray, numbers.Number)):
            raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
        return tensor(data, dtype=dtype, device=where)


def _make(name, cuda):
    return _LegacyType(name, (_Legacy,), {"_code": _CODES[name], "is_cuda": cuda, "dtype": DTYPES[_CODES[name]],
                                          "_torch_name": f"torch.{'cuda.' if cuda else ''}{name}",
                                          "__module__": "gpumemnet.cuda" if cuda else "gpumemnet"})


CPU = {name: _make(name, False) for name in __all__}
CUDA = {name: _make(name, True) for name in __all__}
globals().update(CPU)  # FloatTensor... by name, for __all__

