"""Argument normalisation shared by the functional op families (layer 2, nn): PyTorch's int-or-pair forms, and
the reduction argument of the losses with its deprecated size_average / reduce form."""
import numbers

from .. import _C
from .._core.arg_forms import as_int
from .._core.functions import cast as _cast

_INTS, _F64 = (4, 6, 7, 8, 9), 1  # dtype codes: int64, uint8, int8, int16, int32; float64


def integer_input(*tensors):
    """Tensors (None allowed) all of one integer dtype (not bool): PyTorch's CPU convolution and pooling kernels
    take them, and gpumemnet computes them in float64 (exact while values and sums stay below 2**53)."""
    codes = {t._dtype for t in tensors if isinstance(t, _C.TensorBase)}
    return len(codes) == 1 and next(iter(codes)) in _INTS


def in_float64(f, x, *tensors):
    """f(x, *tensors) computed in float64, the result (the values of a (values, indices) pair) cast back to x's
    integer dtype; the cast rounds toward zero, as PyTorch's integer division (avg_pool2d of integers)."""
    out = f(*(t if t is None else _cast(t, _F64) for t in (x,) + tensors))
    if isinstance(out, tuple):
        return (_cast(out[0], x._dtype),) + tuple(out[1:])
    return _cast(out, x._dtype)


def _is_int(v):
    """An int, a NumPy integer or a one-element integer tensor (int(v) then gives it: PyTorch's __index__)."""
    t = type(v)
    if t is int:  # the usual case first: an ABC check (numbers.Integral) costs a few hundred ns per call
        return True
    return t is not bool and (isinstance(v, numbers.Integral) or type(as_int(v)) is int)


def _pair(value, name, op):
    """An int or a sequence of one or two ints -> (a, b), as PyTorch's _pair."""
    if type(value) is tuple and len(value) == 2 and type(value[0]) is int and type(value[1]) is int:
        return value  # what modules store: taken as it is, on every call
    if _is_int(value):
        return (int(value), int(value))
    if isinstance(value, (tuple, list)) and len(value) in (1, 2) and all(_is_int(v) for v in value):
        return (int(value[0]), int(value[-1]))
    raise TypeError(f"{op}: {name} must be an int or a tuple of 2 ints, got {value!r}")


_REDUCTIONS = ("none", "mean", "sum")


def check_reduction(reduction, size_average=None, reduce=None):
    """PyTorch's reduction argument, including its deprecated size_average/reduce form."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction; expected one of 'none', 'mean', 'sum'")
    return reduction


def fresh(out, input):
    """out, or a copy where it is a view of input (a shuffle that moved nothing: 1 or C groups, factor 1): PyTorch's
    shuffles always return new memory, and an in-place op after one (ReLU(inplace=True)) must not write into the
    input."""
    return out.clone() if out._alloc_serial == input._alloc_serial else out
