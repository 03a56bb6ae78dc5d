"""Tensor creation: from data, filled, ranges, random (Philox), *_like, and cat/stack/where."""
import builtins
import numbers
import warnings

import numpy as np

from .. import _C
from . import functions as F
from . import hooks
from .autograd import needs_grad as _needs_grad
from .random import drawing_from
from .state import warn_once
from .dtype import (COMPLEX_OF, DTYPES, as_dtype, complex64, complex128, device_str, factory_device, fitting,
                    get_default_dtype, int64)
from .arg_forms import _NO, dim_args
from .tensor import Tensor, _shape_arg


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad = True
    return t


def _complex(dtype):
    """Whether a factory's dtype is complex: its tensor is _core/complex.py's (hooks.py's slot "complex")."""
    return getattr(dtype, "code", 0) is None and dtype.is_complex


def _code(dtype, default=None):
    return (default or get_default_dtype() if dtype is None else as_dtype(dtype)).code


def tensor(data, dtype=None, device=None, requires_grad=False):
    """Copy data (a number, nested lists, an ndarray or a Tensor) into a new tensor. Python floats become
    the default dtype (float32, gpumemnet.set_default_dtype) and ints int64 (PyTorch's defaults); an ndarray or a
    NumPy scalar keeps its dtype."""
    if isinstance(data, _C.TensorBase):  # stays on its device unless a device is given or set, as in PyTorch
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than torch.tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
        out = data.detach().to(dtype=dtype, device=factory_device(device, unset=data._device), copy=True)
        return _finish(out, requires_grad)
    # a NumPy scalar keeps its dtype too, as in PyTorch, and so does an object that gives an array (a pandas Series
    # of float64: PyTorch reads it through __array__, not as a list of Python floats)
    numpy_typed = isinstance(data, (np.ndarray, np.generic)) or \
        (not isinstance(data, (list, tuple, numbers.Number)) and hasattr(data, "__array__"))
    if numpy_typed:
        arr = np.asarray(data)
        if arr.dtype == object:  # a pandas Series of objects holding numbers: read as the Python numbers it holds
            return tensor(arr.tolist(), dtype=dtype, device=device, requires_grad=requires_grad)
        _fits_int64(arr)
    else:
        try:
            arr = np.asarray(data)
        except ValueError as e:
            raise ValueError(f"tensor: data must be a rectangular nested sequence of numbers ({e})") from None
        if arr.dtype.kind == "f" and dtype is None:
            dtype = _float_dtype_of(data)
        if arr.size and ((arr.dtype == np.uint64 and int(arr.max()) > 2 ** 63 - 1) or
                         (arr.dtype == object and type(arr.flat[0]) is int)):
            # Python ints past int64 (NumPy made uint64 or objects of them): PyTorch's error, not a wrapped value
            raise ValueError("Overflow when unpacking long long")
    if arr.dtype.kind == "c" or (dtype is not None and _complex(dtype)):
        return _complex_tensor(arr, dtype, device, requires_grad, numpy_typed)
    if not numpy_typed and dtype is not None and arr.dtype.kind in "if" and arr.size:  # Python numbers only
        code = as_dtype(dtype).code
        fitting(arr.min().item(), code, ctype=False, floats=False)
        fitting(arr.max().item(), code, ctype=False, floats=False)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"tensor: data of NumPy dtype {arr.dtype} is not numeric; expected numbers, bools, or "
                        f"nested lists of them")
    with np.errstate(over="ignore"):  # a value past the dtype's range is inf, silently, as PyTorch's
        out = _C.from_numpy(arr, None if dtype is None else as_dtype(dtype).code, factory_device(device))
    return _finish(out, requires_grad)


def _complex_tensor(arr, dtype, device, requires_grad, numpy_dtype=False):
    """tensor() of complex data (or with a complex dtype): _core/complex.py's tensor of its (real, imag) pairs.
    Python complex numbers give complex64 (complex128 under a float64 default); a NumPy array keeps its own."""
    cx = hooks.get("complex")
    if dtype is None:
        dtype = COMPLEX_OF[get_default_dtype()] if not numpy_dtype else \
            (complex128 if arr.dtype == np.complex128 else complex64)
    elif not _complex(dtype):
        raise TypeError(f"tensor: complex data cannot be made a tensor of dtype {dtype}; take .real or .imag first")
    part = cx.real_dtype(dtype)
    pairs = np.stack([arr.real, arr.imag], -1).astype(np.dtype(part.name))
    return cx.ComplexTensor(_finish(_C.from_numpy(pairs, part.code, factory_device(device)), requires_grad))


def _float_dtype_of(data):
    """PyTorch's dtype for nested lists holding floats: a NumPy floating scalar or a tensor counts with its own
    dtype (an RL script's returns, a list of np.float64, give float64), a Python float as the default dtype."""
    found, py_float, stack = set(), False, [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, (np.floating, np.ndarray)) and x.dtype.kind == "f":
            found.add(x.dtype)
        elif isinstance(x, _C.TensorBase) and x._dtype in (0, 1, 2):  # a tensor element counts with its dtype
            found.add(np.dtype(DTYPES[x._dtype].name))
        elif isinstance(x, float):
            py_float = True
    if not found:
        return get_default_dtype()
    if py_float:
        found.add(np.dtype(get_default_dtype().name))
    return np.result_type(*found).name


def _fits_int64(arr):
    """uint64 values past int64's range: refused (gpumemnet has no uint64 dtype: the array becomes int64, and they
    would wrap negative)."""
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > 2 ** 63 - 1:
        raise RuntimeError(f"an array of uint64 holds {int(arr.max())}, past int64's range: gpumemnet has no uint64 "
                           f"dtype (such arrays become int64)")


def from_numpy(array, device=None):
    """A CPU tensor over the ndarray's own memory, as PyTorch's from_numpy gives: a write through either shows in
    the other. NumPy keeps owning that memory (gpumemnet's statistics do not count it). Where it cannot be shared
    (a read-only, misaligned or byte-swapped array, negative strides, uint16/32/64, which become int64; complex; a
    device given) the values are copied into gpumemnet's storage."""
    if isinstance(array, np.ndarray) and array.dtype.kind == "c":
        return _complex_tensor(array, None, device, False, True)
    if isinstance(array, np.ndarray):
        _fits_int64(array)
    if device is None or device_str(device) == "cpu":
        shared = _C.from_numpy_shared(array)
        if shared is not None:
            return shared
    return _C.from_numpy(array, None, device_str(device))


def empty(*size, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialised tensor. pin_memory=True (CPU only, needs CUDA): in pinned host memory, counted under
    "cpu-pinned", as Tensor.pin_memory() makes, without a pageable copy first."""
    if dtype is not None and _complex(dtype):
        return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)
    return _finish(_C.empty(_shape_arg(size), _code(dtype), factory_device(device), bool(pin_memory)), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False, pin_memory=False):
    if dtype is not None and _complex(dtype) or isinstance(fill_value, complex):
        out = zeros(*((size,) if isinstance(size, int) else tuple(size)),
                    dtype=dtype or COMPLEX_OF[get_default_dtype()], device=device)
        _C.fill_(out._r[..., 0], complex(fill_value).real)
        _C.fill_(out._r[..., 1], complex(fill_value).imag)
        return out.requires_grad_(requires_grad)
    if dtype is None:
        dtype = "bool" if isinstance(fill_value, bool) else \
            "int64" if isinstance(fill_value, numbers.Integral) else get_default_dtype()
    t = _C.empty(_shape_arg((size,)) if isinstance(size, int) else tuple(size), _code(dtype), factory_device(device),
                 bool(pin_memory))
    _C.fill_(t, fitting(fill_value, t._dtype))
    return _finish(t, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False, pin_memory=False):
    if dtype is not None and _complex(dtype):
        cx = hooks.get("complex")
        return cx.zeros(_shape_arg(size), dtype, device, requires_grad)
    return full(_shape_arg(size), 0, dtype=dtype or get_default_dtype(), device=device, requires_grad=requires_grad,
                pin_memory=pin_memory)


def ones(*size, dtype=None, device=None, requires_grad=False, pin_memory=False):
    return full(_shape_arg(size), 1, dtype=dtype or get_default_dtype(), device=device, requires_grad=requires_grad,
                pin_memory=pin_memory)


def _integral(v):
    """An int, a NumPy integer or an integer tensor (`arange(lengths.max())`): arange's int64 case, as PyTorch's."""
    if isinstance(v, _C.TensorBase):
        return not v.is_floating_point() and not v.is_complex()
    return isinstance(v, numbers.Integral)


def arange(start=None, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        if start is None:
            raise TypeError("arange() missing required argument 'end' (pos 1)")
        start, end = 0, start
    elif start is None:  # arange(end=n)
        start = 0
    if dtype is None:
        dtype = "int64" if builtins.all(_integral(v) for v in (start, end, step)) else get_default_dtype()
    return _finish(_C.arange(float(start), float(end), float(step), _code(dtype), factory_device(device)),
                   requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform [0, 1) from the Philox generator (gpumemnet.manual_seed), or from generator."""
    if dtype is not None and _complex(dtype):
        cx = hooks.get("complex")
        return cx.random(rand, _shape_arg(size), dtype, device, generator, requires_grad)
    with drawing_from(generator):
        return _finish(_C.rand(_shape_arg(size), _code(dtype), factory_device(device)), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal from the Philox generator (gpumemnet.manual_seed), or from generator."""
    if dtype is not None and _complex(dtype):
        cx = hooks.get("complex")
        return cx.random(randn, _shape_arg(size), dtype, device, generator, requires_grad)
    with drawing_from(generator):
        return _finish(_C.randn(_shape_arg(size), _code(dtype), factory_device(device)), requires_grad)


def _need_tensor(op, t, arg="input"):
    """PyTorch's argument parser refuses a non-tensor with a TypeError naming the argument; so do we (instead of
    the AttributeError reaching for t.shape would give)."""
    if not isinstance(t, _C.TensorBase):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(t).__name__}")


def _like(fn):
    # `input`: PyTorch's name for the tensor, which scripts pass by keyword too (zeros_like(input=x)); kwargs:
    # full_like's fill_value
    def like(input, *args, dtype=None, device=None, requires_grad=False, **kwargs):
        if not (tensor_like_has(input, "is_complex") and input.is_complex()):  # complex: _core/complex.py
            _need_tensor(fn.__name__ + "_like", input)
        dev = device or (input._device if isinstance(input, _C.TensorBase) else input.device)
        return fn(tuple(input.shape), *args, dtype=dtype or input.dtype, device=dev,
                  requires_grad=requires_grad, **kwargs)
    like.__name__ = fn.__name__ + "_like"
    like.__doc__ = f"{fn.__name__} with the shape (and by default dtype and device) of a tensor."
    return like


zeros_like, ones_like, empty_like, rand_like, randn_like, full_like = (
    _like(zeros), _like(ones), _like(empty), _like(rand), _like(randn), _like(full))


def cat(tensors, dim=0, *, axis=_NO):
    """Concatenate along dim (or NumPy's axis=). As in PyTorch, 1-D empty tensors (shape (0,)) are skipped whatever
    the others' shape (legacy code builds results by cat-ing onto torch.zeros(0) / torch.tensor([]))."""
    if axis is not _NO or dim.__class__ is not int:
        dim = dim_args("cat", dim, False, axis, default_dim=0)[0]
    tensors = list(tensors)
    if len(tensors) > 1 and builtins.any(isinstance(t, _C.TensorBase) and tuple(t.shape) == (0,) for t in tensors):
        kept = [t for t in tensors if not (isinstance(t, _C.TensorBase) and tuple(t.shape) == (0,))]
        if kept:
            code = tensors[0]._dtype
            for t in tensors[1:]:
                code = _C.cat([_C.empty((0,), code, "meta"), _C.empty((0,), t._dtype, "meta")], 0)._dtype
            out = cat(kept, dim)  # the skipped tensors still take part in the result dtype, as in PyTorch
            return out if out._dtype == code else out.to(DTYPES[code])
    try:
        if _needs_grad(*tensors):
            return F.Cat.apply(dim, *tensors)
        return _C.cat(tensors, dim)
    except TypeError:
        cx = hooks.get("complex")
        if builtins.any(isinstance(t, cx.ComplexTensor) for t in tensors):
            return cx.cat(tensors, dim)
        raise


def stack(tensors, dim=0, *, axis=_NO):
    if axis is not _NO or dim.__class__ is not int:
        dim = dim_args("stack", dim, False, axis, default_dim=0)[0]
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tuple(tensors[0].shape)
    for i, t in enumerate(tensors):
        if tuple(t.shape) != shape:
            raise _C.ArgumentError(f"stack: all tensors must have the same shape; tensor 0 has {shape} but tensor {i} "
                             f"has {tuple(t.shape)}")
    n = len(shape) + 1
    if not -n <= dim < n:
        raise IndexError(f"stack: dim {dim} is out of range for stacking tensors of {len(shape)} dimensions")
    return cat([t.unsqueeze(dim % n) for t in tensors], dim % n)


concat = concatenate = cat


def hstack(tensors):
    """cat along dim 1, or dim 0 for 1-D tensors (PyTorch's rule)."""
    tensors = [t if t.ndim else t.reshape(1) for t in tensors]
    return cat(tensors, 0 if tensors and tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """cat along dim 0 after making 0-d and 1-D tensors rows."""
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0)


_NONE = object()


def where(condition, input=_NONE, other=_NONE):
    """condition ? input : other; where(condition) alone is condition.nonzero(as_tuple=True), as in PyTorch."""
    if input is _NONE and other is _NONE:
        return condition.nonzero(as_tuple=True)
    if input is _NONE or other is _NONE:
        raise TypeError("where() takes a condition alone, or a condition, input and other")
    condition = F.bool_condition(condition)
    for t in (input, other):
        if tensor_like_has(t, "_select_where"):  # a complex operand (_core/complex_math.py)
            return type(t)._select_where(condition, input, other)
    if _needs_grad(input, other):
        return F.Where.apply(condition, input, other)
    return _C.where(condition, input, other)


def matmul(input, other):
    from .tensor import matmul as mm
    return mm(input, other)


def tensor_like_has(x, name):
    """Whether x is one of the tensor kinds that are not gm.Tensor (_core/complex.py's ComplexTensor, gm.sparse's
    SparseTensor: their classes set _tensor_like) and has method `name`: torch.<name>(x) calls it."""
    return getattr(type(x), "_tensor_like", False) and hasattr(type(x), name)


def _unary(name):
    def fn(input, *args, **kwargs):  # `input`: PyTorch's name, passed by keyword too (torch.max(input=x, dim=1))
        if name != "pow" and not isinstance(input, _C.TensorBase):  # torch.pow(2, t): the base may be a number
            if tensor_like_has(input, name):  # torch.exp(1j * t)
                return getattr(input, name)(*args, **kwargs)
            _need_tensor(name, input)  # Tensor.<name>(t) of a non-tensor fails inside, with a stranger error
        return getattr(Tensor, name)(input, *args, **kwargs)
    fn.__name__ = name
    return fn


exp, log, sqrt, abs, clamp, sum, mean, max, min, amax, amin, argmax, argmin, var, std, maximum, minimum, \
    pow, reshape, flatten, transpose, permute, squeeze, unsqueeze = (
        _unary(n) for n in ("exp", "log", "sqrt", "abs", "clamp", "sum", "mean", "max", "min", "amax", "amin",
                            "argmax", "argmin", "var", "std", "maximum", "minimum", "pow", "reshape", "flatten",
                            "transpose", "permute", "squeeze", "unsqueeze"))
clip = clamp


# ---- PyTorch's other factories and functions, composed of the ops above ------------------------------------
def as_tensor(data, dtype=None, device=None):
    """data itself when it is a tensor of that dtype and device already, an ndarray's own memory when its dtype
    and the CPU fit (from_numpy, as PyTorch's as_tensor shares it), else tensor(data, ...)."""
    if isinstance(data, _C.TensorBase):
        return data.to(dtype=dtype, device=device)
    if isinstance(data, np.ndarray) and data.dtype.kind != "c" and (device is None or device_str(device) == "cpu"):
        shared = _C.from_numpy_shared(data)
        if shared is not None and (dtype is None or as_dtype(dtype).code == shared._dtype):
            return shared
    return tensor(data, dtype=dtype, device=device)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False):
    return full((), s, dtype=dtype or get_default_dtype(), device=device, requires_grad=requires_grad)


def is_tensor(obj):
    return isinstance(obj, _C.TensorBase)


def is_floating_point(input):
    _need_tensor("is_floating_point", input)
    return input.is_floating_point()


def numel(input):
    _need_tensor("numel", input)
    return input.numel()


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """The n x m identity (m defaults to n)."""
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"eye: n and m must be non-negative, got n={n}, m={m}")
    rows, cols = arange(n, device=device), arange(m, device=device)
    out = F.cast(_C.binary(F.EQ, rows.unsqueeze(1), cols), _code(dtype))
    return _finish(out, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """steps points from start to end inclusive, computed the way PyTorch does (from start for the first half,
    back from end for the second, so both ends are exact). For float32 the step is rounded to float32 as
    PyTorch's is, and each point is computed in float64 then rounded once: what PyTorch's fused multiply-add
    gives."""
    if isinstance(steps, _C.TensorBase) and steps.ndim == 0 and steps._dtype in (4, 6, 7, 8, 9):
        steps = int(steps.item())  # a 0-d integer tensor, as PyTorch's int argument takes (vector-quantize's levels)
    if not isinstance(steps, numbers.Integral) or isinstance(steps, bool):
        raise TypeError(f"linspace(): argument 'steps' must be int, not {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    for name, v in (("start", start), ("end", end)):
        if isinstance(v, _C.TensorBase) and v.ndim:
            raise RuntimeError(f"linspace only supports 0-dimensional start and end tensors, but got {name} with "
                               f"{v.ndim} dimension(s).")
    dev = factory_device(device)
    code = _code(dtype)
    if steps == 1:
        return _finish(full((1,), float(start), dtype=DTYPES[code], device=dev), requires_grad)
    i = _C.arange(0.0, float(steps), 1.0, 1, dev)
    ft = np.float32 if code == 0 else np.float64
    start, end = float(ft(start)), float(ft(end))  # the ends in the output's precision first, as PyTorch's
    step = float((ft(end) - ft(start)) / ft(builtins.max(steps - 1, 1)))
    lo = _C.binary(F.ADD, _C.binary(F.MUL, i, step), start)
    hi = _C.binary(F.SUB, end, _C.binary(F.MUL, _C.binary(F.SUB, float(steps - 1), i), step))
    out = _C.where(_C.binary(F.LT, i, float(steps // 2)), lo, hi)
    return _finish(F.cast(out, code), requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    pts = linspace(start, end, steps, dtype="float64", device=device)
    return _finish(F.cast(_C.binary(F.POW, float(base), pts), _code(dtype)), requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform integers in [low, high) from the Philox generator: randint(high, size) or randint(low, high,
    size). Drawn as floor(low + u * (high - low)) with u uniform float64 in [0, 1)."""
    if size is None:  # randint(high, size)
        if high is None:
            raise TypeError("randint() missing required argument 'size'")
        low, high, size = 0, low, high
    if high is None:  # randint(high, size=...): the one bound given is the upper one
        low, high = 0, low
    low, high = int(low), int(high)
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    with drawing_from(generator):
        u = _C.rand(tuple(size), 1, factory_device(device))
    v = _C.unary(F.FLOOR, _C.binary(F.ADD, _C.binary(F.MUL, u, float(high - low)), float(low)))
    # float64 u * (high - low) can round up to high for huge ranges: clamp into [low, high - 1]
    v = _C.clamp(v, float(low), float(high - 1))
    return _finish(F.cast(v, (int64 if dtype is None else as_dtype(dtype)).code), requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1 from the Philox generator (gpumemnet.manual_seed): the ranks of n uniform
    float64 draws. The ranking runs on the host (NumPy's stable argsort) and the result is copied to device."""
    if not isinstance(n, numbers.Integral) or n < 0:
        raise RuntimeError(f"randperm: n must be a non-negative int, got {n!r}")
    dev = factory_device(device)
    code = (int64 if dtype is None else as_dtype(dtype)).code
    if dev == "meta":
        return _finish(_C.empty((int(n),), code, "meta"), requires_grad)
    with drawing_from(generator):
        keys = _C.TensorBase.numpy(_C.rand((int(n),), 1, "cpu"))
    return _finish(_C.from_numpy(np.argsort(keys, kind="stable"), code, dev), requires_grad)


# the tensor argument under PyTorch's names (`tensor` for split, `input` otherwise): scripts pass it by keyword too
def split(tensor, split_size_or_sections, dim=0):
    return tensor.split(split_size_or_sections, dim)


def chunk(input, chunks, dim=0, *, axis=_NO):
    return input.chunk(chunks, dim if axis is _NO else dim_args("chunk", dim, False, axis, default_dim=0)[0])


def narrow(input, dim, start, length):
    return input.narrow(dim, start, length)


def div(input, other, *, rounding_mode=None):
    if not isinstance(input, _C.TensorBase):
        input = _number_as_tensor(input, other) if isinstance(input, numbers.Number) and \
            isinstance(other, _C.TensorBase) else tensor(input)
    return input.div(other, rounding_mode=rounding_mode)


divide = true_divide = div


def round(input, *, decimals=0):  # noqa: A001  (torch.round)
    _need_tensor("round", input)
    return input.round(decimals=decimals)


# the functions PyTorch gives a Scalar-first overload (torch.add(2, t), torch.remainder(2, t) ...)
_NUMBER_FIRST = {"add", "sub", "mul", "subtract", "multiply", "remainder", "floor_divide", "xlogy"}


_OWN = {}  # name -> Tensor's method as the package defined it (snapshot_methods); None until then
_PLAIN = [None]  # [gm.Tensor]


def _number_as_tensor(number, other):
    """A Python number (or NumPy scalar) first in torch.add / mul / sub ...: the 0-d tensor of the dtype number and
    other give (torch.mul(-2, uint8 tensor) stays uint8, wrapping; torch.add(2.5, half) stays half)."""
    number = number.item() if isinstance(number, np.generic) else number
    code = _C.binary(F.ADD, _C.empty((), other._dtype, "meta"), number)._dtype
    t = tensor(number, device=other._device)
    return t if t._dtype == code else F.cast(t, code)


def snapshot_methods(tensor_cls):
    """Remember Tensor's methods as the package defines them, once it is imported: torch.<name>(t) of a plain
    tensor calls these, not what replaced them on the class since, as PyTorch's functions never call the Tensor
    methods (a FLOP counter that patches both torch.bmm and Tensor.bmm counts one torch.bmm once: ptflops)."""
    _PLAIN[0] = tensor_cls
    _OWN.update((name, getattr(tensor_cls, name)) for name in _OWN if callable(getattr(tensor_cls, name, None)))


def _method(name):
    _OWN.setdefault(name, None)

    def fn(input, *args, **kwargs):  # `input`: PyTorch's name, passed by keyword too (torch.gather(input=x, ...))
        if type(input) is _PLAIN[0]:
            own = _OWN[name]
            if own is not None:
                return own(input, *args, **kwargs)
        if not isinstance(input, _C.TensorBase) and not tensor_like_has(input, name):
            other = args[0] if args else kwargs.get("other")
            if name in _NUMBER_FIRST and isinstance(input, numbers.Number) and isinstance(other, _C.TensorBase):
                # torch.add(0, t) (pytorch-tabnet's `res = 0; res = torch.add(res, d)`): the number as a 0-d tensor
                # of the dtype it gives with other (a NumPy scalar as its Python number), so it promotes as a number
                input = _number_as_tensor(input, other)
            else:
                raise TypeError(f"{name}: expected a Tensor as the first argument, got {type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"gpumemnet.{name}(t, ...) is t.{name}(...)."
    return fn


(gather, flip, roll, argsort, sort, topk, msort, take_along_dim, diff, floor, ceil, trunc, square, rsqrt, mm, bmm, unbind, tensor_split, isnan, isinf, isfinite, isclose, allclose,
 equal, all, any, prod, norm, masked_fill, index_select, sign, logical_and, logical_or, logical_xor, logical_not,
 sigmoid, tanh, swapaxes, movedim, select, neg, mul, add, sub, clamp_min, clamp_max) = (
    _method(n) for n in ("gather", "flip", "roll", "argsort", "sort", "topk", "msort", "take_along_dim", "diff", "floor", "ceil", "trunc", "square", "rsqrt", "mm", "bmm", "unbind", "tensor_split",
                         "isnan", "isinf", "isfinite", "isclose", "allclose", "equal", "all", "any", "prod",
                         "norm", "masked_fill", "index_select", "sign", "logical_and", "logical_or", "logical_xor",
                         "logical_not", "sigmoid", "tanh", "swapaxes", "movedim", "select", "neg", "mul", "add",
                         "sub", "clamp_min", "clamp_max"))
swapdims = swapaxes
fix = trunc
# pointwise math (_core/tensor_math.py, and tensor.py's fmod / remainder / floor_divide / atan2)
(sin, cos, tan, asin, acos, atan, sinh, cosh, erf, erfc, log1p, expm1, log2, log10, exp2, reciprocal, lerp, addcmul,
 addcdiv, fmod, remainder, floor_divide, atan2) = (
    _method(n) for n in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "erf", "erfc", "log1p",
                         "expm1", "log2", "log10", "exp2", "reciprocal", "lerp", "addcmul", "addcdiv", "fmod",
                         "remainder", "floor_divide", "atan2"))
arcsin, arccos, arctan, arctan2 = asin, acos, atan, atan2
# scans, triangles, selections (_core/tensor_compose.py, _core/tensor_select.py)
(cumsum, cumprod, logsumexp, tril, triu, diagonal, diag, outer, dot, tile, nan_to_num, scatter, scatter_add, index_add,
 index_copy, index_fill, masked_select, nonzero, argwhere, count_nonzero, unique, unique_consecutive, bincount) = (
    _method(n) for n in ("cumsum", "cumprod", "logsumexp", "tril", "triu", "diagonal", "diag", "outer", "dot",
                         "tile", "nan_to_num", "scatter", "scatter_add", "index_add", "index_copy", "index_fill",
                         "masked_select", "nonzero", "argwhere", "count_nonzero", "unique", "unique_consecutive",
                         "bincount"))
ger = outer
(median, quantile, nanmean, nansum, aminmax, kthvalue, cummax, cummin, logcumsumexp, trace, dist, rot90, fliplr, flipud,
 logaddexp, hypot, xlogy, logit, frac, float_power, absolute, sgn, clone, t, take, unflatten) = (
    _method(n) for n in ("median", "quantile", "nanmean", "nansum", "aminmax", "kthvalue", "cummax", "cummin",
                         "logcumsumexp", "trace", "dist", "rot90", "fliplr", "flipud", "logaddexp", "hypot", "xlogy",
                         "logit", "frac", "float_power", "absolute", "sgn", "clone", "t", "take", "unflatten"))
moveaxis = movedim
clamp_ = _method("clamp_")


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """input.repeat_interleave(repeats, dim); with only a 1-D count tensor, its indices repeated by their counts."""
    _need_tensor("repeat_interleave", input)
    if repeats is None:
        return arange(input.numel(), device=input.device).repeat_interleave(input)
    return input.repeat_interleave(repeats, dim, output_size=output_size)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 1-D tensors (0-d count as 1-D): views that expand each along the others' dims.
    indexing 'ij' (PyTorch's default, with its warning once per process when left out) or 'xy' (the first two
    dims swapped, as NumPy's default)."""
    if indexing is None:
        warn_once("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.")
        indexing = "ij"
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for i, t in enumerate(tensors):
        _need_tensor("meshgrid", t, f"tensors[{i}]")
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.ndim}D "
                               f"tensor (tensors[{i}] of shape {tuple(t.shape)})")
    if not tensors:
        raise RuntimeError("torch.meshgrid: expects a non-empty TensorList")
    vecs = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(vecs) >= 2
    if swap:
        vecs[0], vecs[1] = vecs[1], vecs[0]
    shape = tuple(v.shape[0] for v in vecs)
    grids = [v.reshape(tuple(-1 if j == i else 1 for j in range(len(vecs)))).expand(shape)
             for i, v in enumerate(vecs)]
    if swap:  # 'xy' is 'ij' of the first two swapped, its first two results swapped back
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)
negative, multiply, subtract = neg, mul, sub
