"""PyTorch's integer ops: bitwise_and / or / xor / not, bitwise_left_shift / right_shift, gcd and lcm, on integer
and bool tensors (floats raise NotImplementedError, as in PyTorch), with PyTorch's result dtypes (result_code, also
used by tensor_special.py).

gpumemnet has no integer bit kernels, so these compute on the host (NumPy) and put the result back on the
tensor's device: a copy each way for a CUDA tensor. On meta they give an empty result of the right shape and dtype.
The Tensor methods are in BitwiseMethods, a base of tensor_special.SpecialMethods."""
import numbers

import numpy as np

from .. import _C
from . import functions as F
from .autograd import refuse_inplace as _refuse_inplace
from .dtype import DTYPES, SCALAR_TYPE_NAMES, get_default_dtype
from .tensor_select import _host

_I64, _BOOL = 4, 5
_FLOATS = (0, 1, 2, 3)
_NUMPY = {4: np.int64, 5: np.bool_, 6: np.uint8, 7: np.int8, 8: np.int16, 9: np.int32}
_TYPE_NAME = SCALAR_TYPE_NAMES


def _need_tensor(op, t, arg="input"):
    if not isinstance(t, _C.TensorBase):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(t).__name__}")


# ---- PyTorch's type promotion ------------------------------------------------------------------------------------
def _category(code):
    return 0 if code == _BOOL else 2 if code in _FLOATS else 1


def _promote_codes(a, b):
    """torch.promote_types for two dtype codes (None: undefined)."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        if {a, b} == {2, 3}:
            return 0  # float16 with bfloat16: float32
        return max(a, b, key=lambda c: DTYPES[c].itemsize)
    return {v: k for k, v in _NUMPY.items()}[np.result_type(_NUMPY[a], _NUMPY[b]).type]


def _combine(higher, lower):
    """The dtype of a higher-priority group of operands, raised by a lower group of a higher category."""
    if higher is None:
        return lower
    if higher in _FLOATS:
        return higher
    if higher == _BOOL or (lower is not None and lower in _FLOATS):
        return _promote_codes(higher, lower)
    return higher


def result_code(*operands):
    """The dtype code PyTorch gives an elementwise op of tensors and numbers: tensors with dimensions decide, then
    0-d tensors, then Python numbers, each only raising the category (bool < integer < float)."""
    groups = [None, None, None]  # dimensioned tensors, 0-d tensors, numbers
    for x in operands:
        if isinstance(x, _C.TensorBase):
            g, code = (0 if x.ndim else 1), x._dtype
        elif isinstance(x, bool):
            g, code = 2, _BOOL
        elif isinstance(x, numbers.Integral):
            g, code = 2, _I64
        else:
            g, code = 2, get_default_dtype().code
        groups[g] = _promote_codes(groups[g], code)
    return _combine(groups[0], _combine(groups[1], groups[2]))


# ---- the host computation ----------------------------------------------------------------------------------------
def _check_operand(x, name, arg):
    if isinstance(x, _C.TensorBase) or (isinstance(x, numbers.Number) and not isinstance(x, complex)):
        return
    raise TypeError(f"{name}(): argument '{arg}' must be Tensor or a number, not {type(x).__name__}")


def _device_of(tensors, name):
    """The device of the result: the tensors' (a 0-d CPU tensor may join tensors on another device)."""
    devices = {t._device for t in tensors if not (t.ndim == 0 and t._device == "cpu")}
    if len(devices) > 1:
        raise RuntimeError(f"{name}: Expected all tensors to be on the same device, but found at least two "
                           f"devices, {' and '.join(sorted(devices))}")
    return devices.pop() if devices else "cpu"


def _shape_of(tensors, name):
    try:
        return tuple(np.broadcast_shapes(*[tuple(t.shape) for t in tensors]))
    except ValueError:
        raise _C.ArgumentError(f"{name}: shapes {' and '.join(str(tuple(t.shape)) for t in tensors)} cannot be "
                               f"broadcast together") from None


def _integer_op(name, kernel, operands, bool_ok=True):
    """kernel(*arrays) on the host for integer/bool operands (tensors or numbers), in PyTorch's result dtype."""
    code = result_code(*operands)
    if code in _FLOATS or (code == _BOOL and not bool_ok):
        raise NotImplementedError(
            f"\"{name}\" not implemented for '{_TYPE_NAME[code]}': it takes integer"
            f"{' and bool' if bool_ok else ''} tensors, got operands of dtype "
            f"{', '.join(str(x.dtype) if isinstance(x, _C.TensorBase) else type(x).__name__ for x in operands)}")
    tensors = [x for x in operands if isinstance(x, _C.TensorBase)]
    device, shape = _device_of(tensors, name), _shape_of(tensors, name)
    if device == "meta" or any(t._device == "meta" for t in tensors):
        return _C.empty(shape, code, "meta")
    dt = _NUMPY[code]
    arrays = []
    for x in operands:
        if isinstance(x, _C.TensorBase):
            arrays.append(_host(x, name).astype(dt))
        else:  # a number wraps around into the result dtype, as PyTorch's does
            arrays.append(np.array(int(x)).astype(np.int64).astype(dt))
    with np.errstate(over="ignore"):
        out = kernel(*arrays)
    out = np.array(np.broadcast_to(np.asarray(out).astype(dt), shape), order="C")  # 0-d stays 0-d
    return _C.from_numpy(out, code, device)


def _left_shift(a, s):
    bits = a.dtype.itemsize * 8
    s = s.astype(np.int64)
    out_of_range = (s < 0) | (s >= bits)  # PyTorch's rule: shifted out entirely
    return np.where(out_of_range, 0, np.left_shift(a, np.where(out_of_range, 0, s).astype(a.dtype)))


def _right_shift(a, s):
    bits = a.dtype.itemsize * 8
    s = s.astype(np.int64)
    # PyTorch's rule: a count out of range shifts everything out, the sign filling a signed value (so by the width
    # - 1 there) and zeros an unsigned one
    out_of_range = (s < 0) | (s >= bits)
    r = np.right_shift(a, np.where(out_of_range, bits - 1, s).astype(a.dtype))
    return np.where(out_of_range, 0, r) if a.dtype.kind == "u" else r


def _lcm(a, b):
    # |a / gcd * b| in 64 bits, then wrapped into the dtype (C++'s integer promotion in PyTorch's kernel)
    a, b = a.astype(np.int64), b.astype(np.int64)
    g = np.gcd(a, b)
    return np.where(g == 0, 0, np.abs(a // np.where(g == 0, 1, g) * b))


_KERNELS = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
            "bitwise_left_shift": _left_shift, "bitwise_right_shift": _right_shift, "gcd": np.gcd, "lcm": _lcm}
_NO_BOOL = ("bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm")
_TENSOR_ONLY = ("gcd", "lcm")  # PyTorch's take no number for other


def _binary(name):
    def method(self, other):
        if name in _TENSOR_ONLY:
            _need_tensor(name, other, "other")
        _check_operand(other, name, "other")
        return _integer_op(name, _KERNELS[name], (self, other), bool_ok=name not in _NO_BOOL)
    method.__name__ = name
    method.__doc__ = f"{name} of integer/bool tensors, computed on the host (see tensor_bitwise.py)."
    return method


def check_castable(self, code, name):
    """An in-place op may not turn a float result into an integer tensor, nor anything into bool (PyTorch)."""
    if (code in _FLOATS and self._dtype not in _FLOATS) or (code != _BOOL and self._dtype == _BOOL):
        raise RuntimeError(f"{name}: result type {_TYPE_NAME[code]} can't be cast to the desired output type "
                           f"{_TYPE_NAME[self._dtype]} (the result of {name[:-1]} of a {DTYPES[self._dtype]} "
                           f"tensor has dtype {DTYPES[code]})")


def _binary_(name):
    def method(self, other):
        _refuse_inplace(self, name + "_")
        result = getattr(self.detach(), name)(other)
        if result._dtype != self._dtype and (_category(result._dtype) > _category(self._dtype)):
            raise RuntimeError(f"{name}_: result type {_TYPE_NAME[result._dtype]} can't be cast to the desired "
                               f"output type {_TYPE_NAME[self._dtype]}")
        if tuple(result.shape) != tuple(self.shape):
            raise RuntimeError(f"{name}_: output with shape {list(self.shape)} doesn't match the broadcast shape "
                               f"{list(result.shape)}")
        _C.copy_(self, result)
        return self
    method.__name__ = name + "_"
    return method


class BitwiseMethods:
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    bitwise_and, bitwise_or, bitwise_xor, bitwise_left_shift, bitwise_right_shift, gcd, lcm = (
        _binary(n) for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                             "bitwise_right_shift", "gcd", "lcm"))
    bitwise_and_, bitwise_or_, bitwise_xor_, bitwise_left_shift_, bitwise_right_shift_, gcd_, lcm_ = (
        _binary_(n) for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                              "bitwise_right_shift", "gcd", "lcm"))

    def bitwise_not(self):
        """~self for integer tensors (two's complement), logical not for bool; computed on the host."""
        return _integer_op("bitwise_not", np.invert, (self,))

    def bitwise_not_(self):
        _refuse_inplace(self, "bitwise_not_")
        _C.copy_(self, self.detach().bitwise_not())
        return self

    # ---- operators: bool with bool stays on the device (the logical kernels); integers go to the methods above --
    def __and__(self, other): return _operator(self, other, "bitwise_and", F.MINIMUM)
    def __or__(self, other): return _operator(self, other, "bitwise_or", F.MAXIMUM)
    def __xor__(self, other): return _operator(self, other, "bitwise_xor", F.NE)
    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __iand__(self, other): return self.bitwise_and_(other)
    def __ior__(self, other): return self.bitwise_or_(other)
    def __ixor__(self, other): return self.bitwise_xor_(other)

    def __lshift__(self, other): return self.bitwise_left_shift(other)
    def __rshift__(self, other): return self.bitwise_right_shift(other)
    def __rlshift__(self, other): return bitwise_left_shift(other, self)
    def __rrshift__(self, other): return bitwise_right_shift(other, self)
    def __ilshift__(self, other): return self.bitwise_left_shift_(other)
    def __irshift__(self, other): return self.bitwise_right_shift_(other)

    def __invert__(self):
        if self._dtype == _BOOL:
            return _C.unary(F.LOGICAL_NOT, self)
        if self._dtype in _FLOATS:
            raise TypeError(f"~ (operator.invert) is only implemented on integer and Boolean-type tensors, got "
                            f"{DTYPES[self._dtype]}")
        return self.bitwise_not()


def _operator(a, b, name, bool_op):
    """a & b etc.: the device's logical kernel when both are bool (masks), else the integer method."""
    if a._dtype == _BOOL and (isinstance(b, bool) or isinstance(b, _C.TensorBase) and b._dtype == _BOOL):
        return _C.binary(bool_op, a, b)
    return getattr(a, name)(b)


def _function(name):
    def fn(input, other):
        if isinstance(input, _C.TensorBase):
            return getattr(input, name)(other)
        # a number first (bitwise ops only: PyTorch's gcd / lcm refuse it)
        if name in _TENSOR_ONLY or not isinstance(other, _C.TensorBase):
            _need_tensor(name, input)
        _check_operand(input, name, "input")
        return _integer_op(name, _KERNELS[name], (input, other), bool_ok=name not in _NO_BOOL)
    fn.__name__ = name
    fn.__doc__ = f"gpumemnet.{name}(input, other): input.{name}(other) (see tensor_bitwise.py)."
    return fn


bitwise_and, bitwise_or, bitwise_xor, bitwise_left_shift, bitwise_right_shift, gcd, lcm = (
    _function(n) for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
                           "gcd", "lcm"))


def bitwise_not(input):
    _need_tensor("bitwise_not", input)
    return input.bitwise_not()
