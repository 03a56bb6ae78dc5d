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

from .creation import empty, from_numpy, tensor
from .dtype import DTYPES, get_default_dtype, set_default_device, set_default_dtype
from .tensor import Tensor
from .tensor_misc_extra import as_parameter
from .size import Size

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
        where = device if device is not None else ("cuda" if cls.is_cuda else "cpu")
        return legacy_new(cls.__name__, DTYPES[cls._code], args, where, lambda t: isinstance(t, cls),
                          "cuda" if cls.is_cuda else "cpu")


def legacy_new(name, dtype, args, device, fits, where_name):
    """What name(*args) makes (FloatTensor(2, 3), torch.Tensor([1, 2])...): sizes give uninitialised memory, data
    a copy in `dtype`, a tensor that fits() itself (shared), nothing an empty tensor."""
    if not args:
        return empty(0, dtype=dtype, device=device)
    if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args) or \
            (len(args) == 1 and isinstance(args[0], Size)):
        return empty(*args, dtype=dtype, device=device)
    if len(args) > 1:
        raise TypeError(f"{name}(): expected sizes (ints) or one sequence of data, got "
                        f"{', '.join(type(a).__name__ for a in args)}")
    (data,) = args
    if isinstance(data, Tensor):
        if not fits(data):
            raise TypeError(f"{name}(): expected a tensor of dtype {dtype} on {where_name}, got dtype {data.dtype} "
                            f"on {data._device}")
        return data.detach()
    if isinstance(data, (str, bytes)) or not (isinstance(data, (list, tuple, np.ndarray, numbers.Number, range)) or
                                              hasattr(data, "__array__")):  # a pandas Series, as PyTorch reads it
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    if isinstance(data, np.ndarray) and (device is None or str(device) == "cpu") and data.dtype.kind in "fiub":
        # an array of the type's own dtype is shared, as PyTorch's legacy constructors do (CleanRL's
        # torch.Tensor(next_obs) over a buffer the environment rewrites)
        try:
            shared = from_numpy(data)
        except TypeError:  # a dtype gpumemnet has no tensors of (uint16 ...): converted below
            shared = None
        if shared is not None and shared.dtype == dtype:
            return shared
    return tensor(list(data) if isinstance(data, range) else data, dtype=dtype, device=device)


def _make(name, cuda):
    return _LegacyType(name, (_Legacy,), {"_code": _CODES[name], "is_cuda": cuda, "dtype": DTYPES[_CODES[name]],
                                          "_torch_name": f"torch.{'cuda.' if cuda else ''}{name}",
                                          "__module__": "gpumemnet.cuda" if cuda else "gpumemnet"})


CPU = {name: _make(name, False) for name in __all__}
CUDA = {name: _make(name, True) for name in __all__}
globals().update(CPU)  # FloatTensor... by name, for __all__


def _tensor_new(cls, *args, device=None, requires_grad=None):
    """Tensor(...), PyTorch's legacy constructor: Tensor(2, 3) uninitialised, Tensor([1, 2]) a copy, in the default
    dtype (custom layers' `nn.Parameter(torch.Tensor(out, in))`, then an init); Tensor(t) is t's memory whatever
    its dtype (FloatTensor(t) takes float32 alone). Installed here: tensor.py sits below the factories it needs.

    requires_grad= is Parameter's argument: a gm Parameter's type is Tensor, so code that rebuilds a parameter as
    `type(p)(data, requires_grad=p.requires_grad)` (accelerate) reaches here and gets a Parameter back."""
    if requires_grad is not None:  # nn.Parameter's making
        data = args[0] if args else empty(0)
        if len(args) > 1 or not isinstance(data, Tensor):
            raise TypeError("Tensor(data, requires_grad=...): expected one tensor (a Parameter's data)")
        return as_parameter(data, bool(requires_grad))
    t = legacy_new("Tensor", get_default_dtype(), args, device, lambda x: True, "")
    return t if cls is Tensor else t.as_subclass(cls)


Tensor.__new__ = staticmethod(_tensor_new)


def set_default_tensor_type(t):
    """torch.set_default_tensor_type (deprecated in PyTorch, still in older code): a legacy type, or its name
    ('torch.DoubleTensor'), sets the default dtype; a CUDA one ('torch.cuda.FloatTensor') the default device too
    (PyTorch's rule: only floating point types)."""
    if isinstance(t, str):
        name = t.split(".")[-1]
        cuda = ".cuda." in t
        t = (CUDA if cuda else CPU).get(name)
        if t is None:
            raise TypeError(f"invalid type: '{name}'")
    if not isinstance(t, _LegacyType):
        raise TypeError(f"set_default_tensor_type: expected a legacy tensor type (torch.DoubleTensor) or its name, "
                        f"got {t!r}")
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    set_default_dtype(t.dtype)
    set_default_device("cuda" if t.is_cuda else "cpu")
