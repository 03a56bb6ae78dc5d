"""Tensor creation: from data, filled, ranges, random (Philox), *_like, and cat/stack/where."""
import numbers

import numpy as np

from .. import _C
from . import functions as F
from .autograd import needs_grad as _needs_grad
from .dtype import as_dtype, device_str, float32
from .tensor import Tensor, _shape_arg


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad = True
    return t


def _code(dtype, default=float32):
    return (default if dtype is None else as_dtype(dtype)).code


def tensor(data, dtype=None, device=None, requires_grad=False):
    """Copy data (a number, nested lists, an ndarray or a Tensor) into a new tensor. Python floats become
    float32 and ints int64 (PyTorch's defaults); an ndarray or a NumPy scalar keeps its float width."""
    dev = device_str(device)
    if isinstance(data, _C.TensorBase):
        out = data.detach().to(dtype=dtype, device=dev, copy=True)
        return _finish(out, requires_grad)
    if isinstance(data, (np.ndarray, np.generic)):  # a NumPy scalar keeps its dtype too, as in PyTorch
        arr = np.asarray(data)
    else:
        try:
            arr = np.asarray(data)
        except ValueError as e:
            raise ValueError(f"tensor: data must be a rectangular nested sequence of numbers ({e})") from None
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float32) if dtype is None else arr
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"tensor: data of NumPy dtype {arr.dtype} is not numeric; expected numbers, bools, or "
                        f"nested lists of them")
    out = _C.from_numpy(arr, None if dtype is None else as_dtype(dtype).code, dev)
    return _finish(out, requires_grad)


def from_numpy(array, device=None):
    """Copy an ndarray (any strides, byte order, numeric dtype) into tracked storage."""
    return _C.from_numpy(array, None, device_str(device))


def empty(*size, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialised tensor. pin_memory=True (CPU only, needs CUDA): in pinned host memory, counted under
    "cpu-pinned", as Tensor.pin_memory() makes, without a pageable copy first."""
    return _finish(_C.empty(_shape_arg(size), _code(dtype), device_str(device), bool(pin_memory)), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False, pin_memory=False):
    if dtype is None:
        dtype = "bool" if isinstance(fill_value, bool) else \
            "int64" if isinstance(fill_value, numbers.Integral) else "float32"
    t = _C.empty(_shape_arg((size,)) if isinstance(size, int) else tuple(size), _code(dtype), device_str(device),
                 bool(pin_memory))
    _C.fill_(t, fill_value)
    return _finish(t, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False, pin_memory=False):
    return full(_shape_arg(size), 0, dtype=dtype or float32, device=device, requires_grad=requires_grad,
                pin_memory=pin_memory)


def ones(*size, dtype=None, device=None, requires_grad=False, pin_memory=False):
    return full(_shape_arg(size), 1, dtype=dtype or float32, device=device, requires_grad=requires_grad,
                pin_memory=pin_memory)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = "int64" if all(isinstance(v, numbers.Integral) for v in (start, end, step)) else "float32"
    return _finish(_C.arange(float(start), float(end), float(step), _code(dtype), device_str(device)),
                   requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False):
    """Uniform [0, 1) from the Philox generator (gpumemnet.manual_seed)."""
    return _finish(_C.rand(_shape_arg(size), _code(dtype), device_str(device)), requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False):
    """Standard normal from the Philox generator (gpumemnet.manual_seed)."""
    return _finish(_C.randn(_shape_arg(size), _code(dtype), device_str(device)), requires_grad)


def _like(fn):
    def like(t, *args, dtype=None, device=None, requires_grad=False):
        return fn(tuple(t.shape), *args, dtype=dtype or t.dtype, device=device or t._device,
                  requires_grad=requires_grad)
    like.__name__ = fn.__name__ + "_like"
    like.__doc__ = f"{fn.__name__} with the shape (and by default dtype and device) of a tensor."
    return like


zeros_like, ones_like, empty_like, rand_like, randn_like, full_like = (
    _like(zeros), _like(ones), _like(empty), _like(rand), _like(randn), _like(full))


def cat(tensors, dim=0):
    tensors = list(tensors)
    if _needs_grad(*tensors):
        return F.Cat.apply(dim, *tensors)
    return _C.cat(tensors, dim)


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of tensors")
    shape = tuple(tensors[0].shape)
    for i, t in enumerate(tensors):
        if tuple(t.shape) != shape:
            raise ValueError(f"stack: all tensors must have the same shape; tensor 0 has {shape} but tensor {i} "
                             f"has {tuple(t.shape)}")
    n = len(shape) + 1
    if not -n <= dim < n:
        raise IndexError(f"stack: dim {dim} is out of range for stacking tensors of {len(shape)} dimensions")
    return cat([t.unsqueeze(dim % n) for t in tensors], dim % n)


def where(condition, input, other):
    if _needs_grad(input, other):
        return F.Where.apply(condition, input, other)
    return _C.where(condition, input, other)


def matmul(a, b):
    from .tensor import matmul as mm
    return mm(a, b)


def _unary(name):
    def fn(t, *args, **kwargs):
        return getattr(Tensor, name)(t, *args, **kwargs)
    fn.__name__ = name
    return fn


exp, log, sqrt, abs, clamp, sum, mean, max, min, amax, amin, argmax, argmin, var, std, maximum, minimum, \
    pow, reshape, flatten, transpose, permute, squeeze, unsqueeze = (
        _unary(n) for n in ("exp", "log", "sqrt", "abs", "clamp", "sum", "mean", "max", "min", "amax", "amin",
                            "argmax", "argmin", "var", "std", "maximum", "minimum", "pow", "reshape", "flatten",
                            "transpose", "permute", "squeeze", "unsqueeze"))
clip = clamp
