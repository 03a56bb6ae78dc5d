"""The rest of PyTorch's Tensor surface: in-place random fills (random_, exponential_, cauchy_, log_normal_,
geometric_), metadata queries (get_device, is_signed, is_same_size, is_set_to, retains_grad), shape helpers
(ravel, broadcast_to, split_with_sizes, hsplit/vsplit/dsplit, column_stack, dstack, atleast_3d, narrow_copy,
swapaxes_, new_empty_strided), in-place aliases PyTorch has (divide_, multiply_, subtract_, logit_, xlogy_ ...),
put / index_put, rsub, the dtype queries (result_type, promote_types, can_cast, typename) and the *_copy forms of
the view ops. Tensor methods in MiscMethods (copied into Tensor); the gm.* functions in __all__
(gpumemnet/__init__.py imports them). The value ops (masked_scatter, scatter_reduce, index_reduce, mode,
nanmedian, renorm, isin, the *_scatter ops) are in tensor_misc_values; as_strided, the windows, histogram,
gradient and the legacy methods (new, resize_ ...) in tensor_misc_extra.

The random fills draw float64 uniforms (or normals) from the global Philox generator, or from generator=, and
transform them (inverse CDFs), so gm.manual_seed replays them on every device; meta tensors are priced."""
import math
import numbers
import warnings

import numpy as np

from .. import _C
from . import functions as F
from .storage import TypedStorage, UntypedStorage
from .indexing import record_in_place
from .autograd import check_inplace as _check_inplace, needs_grad as _needs_grad, refuse_inplace as _refuse_inplace
from .state import grad_mode
from .dtype import DTYPES as _DTYPES, as_dtype, dtype as _dtype_class
from .random import drawing_from
from .tensor_bitwise import check_castable
from .tensor_methods import _dim
from .shared_memory import restored
from .tensor_misc_extra import ExtraMethods, __all__ as _EXTRA_ALL
from .tensor_misc_extra import *  # noqa: F401,F403
from .tensor_misc_values import ValueMethods, __all__ as _VALUE_ALL
from .tensor_misc_values import *  # noqa: F401,F403

__all__ = ["ravel", "split_with_sizes", "hsplit", "vsplit", "dsplit", "column_stack", "dstack", "row_stack",
           "atleast_3d", "narrow_copy", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes", "is_signed",
           "is_same_size", "get_device", "rsub", "put", "index_put", "index_put_", "result_type",
           "promote_types", "can_cast", "typename", "alias_copy", "detach_copy", "diagonal_copy", "expand_copy",
           "permute_copy", "select_copy", "slice_copy", "split_copy", "split_with_sizes_copy", "squeeze_copy", "t_copy",
           "transpose_copy", "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy",
           "as_strided_copy"] + _VALUE_ALL + _EXTRA_ALL

_F64 = 1
_FLOAT_DIGITS = {0: 24, 1: 53, 2: 11, 3: 8}  # mantissa bits: the widest range of integers each holds exactly
_INT_RANGE = {4: (-2 ** 63, 2 ** 63 - 1), 5: (0, 1), 6: (0, 255), 7: (-128, 127), 8: (-2 ** 15, 2 ** 15 - 1),
              9: (-2 ** 31, 2 ** 31 - 1)}
_C_NAMES = {4: "long int", 5: "bool", 6: "unsigned char", 7: "signed char", 8: "short", 9: "int"}  # PyTorch's words


def _need_tensor(op, t, arg="input"):
    if not isinstance(t, _C.TensorBase):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(t).__name__}")


# ---- random fills --------------------------------------------------------------------------------------------
def _draw(self, op, generator, normal=False):
    """float64 uniforms in [0, 1) (standard normals with normal=True) of self's shape on self's device (refused
    on a leaf that requires grad, as every in-place write)."""
    _check_inplace(self, op)
    with drawing_from(generator):
        return (_C.randn if normal else _C.rand)(tuple(self.shape), _F64, self._device)


def _fill(self, value):
    """value (converted to self's dtype) into self; on a tensor in a graph recorded as an assignment, so the old
    values get no gradient, as PyTorch's in-place random fills (torchrl's SAC: p.expand(2, n).clone().uniform_())."""
    if grad_mode.get() and self.requires_grad:
        self[...] = value.to(self.dtype)
    else:
        _C.copy_(self, value)  # converts to self's dtype
    return self


def random_fill_target(t, op, floats_only=True):
    """Where an in-place random fill of t (uniform_, normal_, bernoulli_) draws: t itself, or for a tensor in a
    graph a new tensor that random_filled then assigns (recorded) into t. A leaf that requires grad is refused."""
    if floats_only and not t.is_floating_point():
        raise RuntimeError(f"{op}: expected a floating-point tensor, got {t.dtype}")
    return _C.empty(tuple(t.shape), t._dtype, t._device) if _check_inplace(t, op) else t


def random_filled(t, drawn):
    return t if drawn is t else _fill(t, drawn)


def bernoulli(input, p=None, *, generator=None):
    """gm.bernoulli: 0/1 draws with probabilities input (or the number p), in input's dtype."""
    return input.bernoulli(p, generator=generator)


def _need_float(self, what):
    if not self.is_floating_point():
        raise RuntimeError(f"{what} is a continuous probability distribution. dtype must be a floating point but "
                           f"you specified {self.dtype}")


def _check_positive(op, name, value):
    if not value > 0:  # NaN too
        raise RuntimeError(f"{op} expects {name} > 0.0, but found {name}={value}")


def _random_bounds(self, args, kwargs):
    """(from, to_inclusive) of random_'s overloads: random_(), random_(to), random_(from, to), to=None meaning the
    dtype's largest value (2**mantissa for floating types, so every draw is exact)."""
    unknown = set(kwargs) - {"from", "from_", "to"}
    if unknown or len(args) > 2 or ("to" in kwargs and len(args) == 2) or \
            (("from" in kwargs or "from_" in kwargs) and args):
        raise TypeError(f"random_() received an invalid combination of arguments: {args} {kwargs}; expected "
                        f"random_(), random_(to) or random_(from, to)")
    if len(args) == 1 and not kwargs:
        lo, hi = 0, args[0]
    else:
        lo = args[0] if args else kwargs.get("from", kwargs.get("from_", 0))
        hi = args[1] if len(args) == 2 else kwargs.get("to")
    for name, v in (("from", lo), ("to", hi)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
            raise TypeError(f"random_(): argument '{name}' must be int, not {type(v).__name__}")
    lo = int(lo)
    code = self._dtype
    top = 2 ** _FLOAT_DIGITS[code] if code in _FLOAT_DIGITS else _INT_RANGE[code][1]
    if hi is None:
        if lo > top:
            raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted "
                               f"to dtype, but got from={lo} > to_inc={top}")
        hi_inc = top
    else:
        hi = int(hi)
        if lo >= hi:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}")
        hi_inc = hi - 1
    if code in _INT_RANGE:
        bottom, top = _INT_RANGE[code]
        if not bottom <= lo <= top:
            raise RuntimeError(f"from is out of bounds for {_C_NAMES[code]} (random_ on {self.dtype}: from={lo}, "
                               f"expected in [{bottom}, {top}])")
        if not bottom <= hi_inc <= top:
            raise RuntimeError(f"to - 1 is out of bounds for {_C_NAMES[code]} (random_ on {self.dtype}: to - 1="
                               f"{hi_inc}, expected in [{bottom}, {top}])")
    elif not (-top <= lo <= top and -top <= hi_inc <= top):
        warnings.warn(f"random_: [{lo}, {hi_inc}] is out of bounds [-(2^{_FLOAT_DIGITS[code]}), "
                      f"2^{_FLOAT_DIGITS[code]}]: {self.dtype} holds only the integers in that range exactly",
                      UserWarning, stacklevel=3)
    return lo, hi_inc


def _int64_scalar(v, like):
    return _C.from_numpy(np.array(v, np.int64), 4, like._device)


def _uniform_ints(self, lo, hi_inc, generator):
    """Integers uniform in [lo, hi_inc] of self's shape: floor(lo + u * n) from one float64 draw while the range n
    fits its 53 bits; wider ranges (int64 only) join two draws, hi * 2**32 + lo, in int64."""
    n = hi_inc - lo + 1
    u = _draw(self, "random_", generator)
    if n <= 2 ** 53:
        v = (u * float(n)).floor().clamp_(max=float(n - 1))  # u * n may round up to n
        return v + float(lo) if abs(lo) <= 2 ** 53 else v.long() + _int64_scalar(lo, self)
    with drawing_from(generator):
        u2 = _C.rand(tuple(self.shape), _F64, self._device)
    # hi < floor(n / 2**32), so hi * 2**32 + low < n: exact for n a multiple of 2**32 (random_() on int64); else the
    # top n mod 2**32 values (a 2**-21 share at most) are not drawn. Shifted by 2**31 so no step overflows int64.
    hi = (u * float(n // 2 ** 32)).floor() - float(2 ** 31)
    v = hi.long() * _int64_scalar(2 ** 32, self) + (u2 * float(2 ** 32)).floor().long()
    return v + _int64_scalar(2 ** 62, self) + _int64_scalar(2 ** 62 + lo, self)


class MiscMethods(ValueMethods, ExtraMethods):
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    # ---- random fills in place --------------------------------------------------------------------------------
    def random_(self, *args, generator=None, **kwargs):
        """Integers uniform in [from, to - 1]: random_() (0 to the dtype's largest, 2**mantissa for floating
        types), random_(to), random_(from, to), random_(from, None)."""
        lo, hi_inc = _random_bounds(self, args, kwargs)
        return _fill(self, _uniform_ints(self, lo, hi_inc, generator))

    def exponential_(self, lambd=1, *, generator=None):
        """Exponential draws of rate lambd: -log(1 - u) / lambd."""
        _need_float(self, "Exponential distribution")
        _check_positive("exponential_", "lambda", lambd)
        u = _draw(self, "exponential_", generator)
        return _fill(self, (-u).log1p() * (-1.0 / float(lambd)))

    def cauchy_(self, median=0, sigma=1, *, generator=None):
        """Cauchy draws: median + sigma * tan(pi * (u - 1/2))."""
        _need_float(self, "Cauchy distribution")
        _check_positive("cauchy_", "sigma", sigma)
        u = _draw(self, "cauchy_", generator)
        return _fill(self, ((u - 0.5) * math.pi).tan() * float(sigma) + float(median))

    def log_normal_(self, mean=1, std=2, *, generator=None):
        """exp of normal draws of the given mean and std."""
        if not self.is_floating_point():  # PyTorch's type for it
            raise NotImplementedError(f"log_normal_: not implemented for {self.dtype} (a floating-point tensor is "
                                      f"needed)")
        _check_positive("log_normal_", "std", std)
        z = _draw(self, "log_normal_", generator, normal=True)
        return _fill(self, (z * float(std) + float(mean)).exp())

    def geometric_(self, p, *, generator=None):
        """The number of Bernoulli(p) trials up to the first success (1, 2, ...): floor(log(1 - u) / log(1 - p))
        + 1; integer dtypes too."""
        if isinstance(p, bool) or not isinstance(p, numbers.Real):
            raise TypeError(f"geometric_(): argument 'p' must be float, not {type(p).__name__}")
        if not 0 < p < 1:
            raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
        u = _draw(self, "geometric_", generator)
        return _fill(self, ((-u).log1p() * (1.0 / math.log1p(-p))).floor() + 1.0)

    # ---- metadata -------------------------------------------------------------------------------------------
    @property
    def retains_grad(self):
        """True for a non-leaf tensor after retain_grad() (its .grad is kept), as in PyTorch."""
        return bool(self._retains_grad) and self.grad_fn is not None

    @property
    def output_nr(self):
        """Which output of the op that made it this tensor is (0 for leaves)."""
        return self._output_nr

    def get_device(self):
        """The CUDA device index, or -1 for a CPU (or meta) tensor."""
        index = self.device.index
        return -1 if not self._device.startswith("cuda") else (index or 0)

    def is_signed(self):
        return self._dtype not in (5, 6)  # bool and uint8

    def is_same_size(self, other):
        _need_tensor("is_same_size", other, "other")
        return tuple(self.shape) == tuple(other.shape)

    def is_set_to(self, tensor):
        """True when both are the same storage, offset, sizes and strides."""
        _need_tensor("is_set_to", tensor, "tensor")
        if self._device != tensor._device or self._dtype != tensor._dtype:
            return False
        return self._storage_id == tensor._storage_id and self._offset == tensor._offset and \
            tuple(self.shape) == tuple(tensor.shape) and \
            tuple(self._strides) == tuple(tensor._strides)

    # ---- shapes --------------------------------------------------------------------------------------------
    def ravel(self):
        """A flat tensor: a view when self is contiguous, else a copy."""
        return self.reshape(-1)

    def broadcast_to(self, *size):
        return self.expand(*size)

    def moveaxis(self, source, destination):
        """movedim: dims source (an int or a sequence) moved to destination, the others keeping their order."""
        if isinstance(source, numbers.Integral) and isinstance(destination, numbers.Integral):
            return self.movedim(source, destination)
        src = [source] if isinstance(source, numbers.Integral) else list(source)
        dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
        if len(src) != len(dst):
            raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain "
                               f"the same number of dims as destination ({dst} dims)")
        n = self.ndim
        src, dst = [_dim(d, n, "moveaxis") for d in src], [_dim(d, n, "moveaxis") for d in dst]
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise RuntimeError(f"movedim: repeated dim in source ({src}) or destination ({dst})")
        order = [None] * n
        for s_, d_ in zip(src, dst):
            order[d_] = s_
        rest = iter(i for i in range(n) if i not in src)
        return self.permute(*[o if o is not None else next(rest) for o in order])

    def split_with_sizes(self, split_sizes, dim=0):
        if isinstance(split_sizes, numbers.Integral) or not isinstance(split_sizes, (list, tuple)):
            raise TypeError(f"split_with_sizes(): argument 'split_sizes' must be a sequence of ints, not "
                            f"{type(split_sizes).__name__}")
        return self.split(list(split_sizes), dim)

    def unsafe_split(self, split_size, dim=0):
        return self.split(split_size, dim)

    def unsafe_split_with_sizes(self, split_sizes, dim=0):
        return self.split_with_sizes(split_sizes, dim)

    def unsafe_chunk(self, chunks, dim=0):
        return self.chunk(chunks, dim)

    def hsplit(self, *indices_or_sections):
        """tensor_split along dim 1 (dim 0 of a 1-D tensor); an int must divide that size."""
        return _directional_split(self, indices_or_sections, "hsplit", 1)

    def vsplit(self, *indices_or_sections):
        return _directional_split(self, indices_or_sections, "vsplit", 2)

    def dsplit(self, *indices_or_sections):
        return _directional_split(self, indices_or_sections, "dsplit", 3)

    def narrow_copy(self, dim, start, length):
        return self.narrow(dim, start, length).clone()

    def swapaxes_(self, axis0, axis1):
        return self.transpose_(axis0, axis1)

    def swapdims_(self, dim0, dim1):
        return self.transpose_(dim0, dim1)

    def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, pin_memory=False,
                          requires_grad=False):
        """An uninitialised tensor of the given sizes and strides (over a storage just large enough)."""
        size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
        if len(size) != len(stride):
            raise RuntimeError(f"mismatch in length of strides and shape: size {size} has {len(size)} dims, stride "
                               f"{stride} has {len(stride)}")
        if any(s < 0 for s in size) or any(s < 0 for s in stride):
            raise RuntimeError(f"new_empty_strided: sizes and strides must be non-negative, got size {size}, stride "
                               f"{stride}")
        n = 0 if 0 in size else 1 + sum((a - 1) * b for a, b in zip(size, stride))
        out = self.new_empty((n,), dtype=dtype, device=device)._as_strided(size, stride, 0)
        return out.requires_grad_() if requires_grad else out

    # ---- in-place aliases ------------------------------------------------------------------------------------
    def divide_(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return self.div_(other)
        return _write_back(self, "divide_", lambda t: t.div(other, rounding_mode=rounding_mode))

    def multiply(self, other): return self * other
    def multiply_(self, other): return self.mul_(other)
    def subtract_(self, other, *, alpha=1): return self.sub_(other if alpha == 1 else other * alpha)

    def subtract(self, other, *, alpha=1):
        if self._dtype == 5 and isinstance(other, _C.TensorBase) and other._dtype == 5:
            raise NotImplementedError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
                                      "`^` or `logical_xor()` operator instead.")
        return self.sub(other, alpha=alpha)

    def negative(self):
        if self._dtype == 5:
            raise NotImplementedError("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                                      "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
        return -self

    def fix_(self): return self.trunc_()
    def sgn_(self): return self.sign_()

    def arccos_(self): return self.acos_()
    def arcsin_(self): return self.asin_()
    def arctan_(self): return self.atan_()
    def arctan2_(self, other): return self.atan2_(other)

    def logical_and_(self, other):
        return _write_back(self, "logical_and_", lambda t: t.logical_and(other))

    def logical_or_(self, other):
        return _write_back(self, "logical_or_", lambda t: t.logical_or(other))

    def logical_xor_(self, other):
        return _write_back(self, "logical_xor_", lambda t: t.logical_xor(other))

    # ---- gm functions PyTorch also has as methods -------------------------------------------------------------
    def is_complex(self):
        return False  # gpumemnet has no complex dtypes

    def _view_as_dtype(self, dtype):
        """view(dtype): the same bytes read as another dtype (not differentiable, as in PyTorch across sizes)."""
        dt = as_dtype(dtype)
        if dt.code == self._dtype:
            return self.view(tuple(self.shape))
        if _needs_grad(self):
            raise RuntimeError(f"view(dtype): a tensor that requires grad cannot be viewed as {dt} (its bytes "
                               f"read as another dtype have no gradient); detach() it first")
        return self._view_dtype(dt.code)

    def __reduce_ex__(self, protocol):
        """pickle (multiprocessing queues, pickle.dump of results): the values, dtype, device, requires_grad and
        the parameter flag, rebuilt by _rebuild_tensor (bfloat16 travels as its bits: NumPy has no bfloat16). A
        tensor in a graph comes back as a leaf that requires grad, as PyTorch's does."""
        t = self.detach()
        if t._device == "meta":
            data = tuple(t.shape)
        else:
            host = t.cpu() if t._device != "cpu" else t
            data = (host.view(_DTYPES[_I16]) if host._dtype == _BF16 else host).numpy().copy()  # bf16 as its bits
        state = getattr(self, "__dict__", None) or None
        return _rebuild_tensor, (type(self), data, t._dtype, t._device, self.requires_grad, self._is_param, state)

    def __copy__(self):
        """copy.copy: a new tensor object over the same memory (PyTorch's), keeping requires_grad and the
        parameter flag; a tensor in a graph gives a leaf, as PyTorch's does."""
        out = self.detach()
        out = out if type(self) is type(out) else out.as_subclass(type(self))
        out._is_param, out.requires_grad = self._is_param, self.requires_grad
        if getattr(self, "__dict__", None):
            out.__dict__.update(self.__dict__)
        return out

    def untyped_storage(self):
        """The memory under this tensor (its block's start, size and device): _core/storage.py."""
        return UntypedStorage(self)

    def storage(self):
        return TypedStorage(self)

    def is_nonzero(self):
        """The truth of a one-element tensor (PyTorch refuses any other count)."""
        n = self.numel()
        if n != 1:
            raise RuntimeError(f"Boolean value of Tensor with {'no values' if n == 0 else 'more than one value'} is "
                               f"ambiguous (is_nonzero of a tensor of shape {tuple(self.shape)})")
        return bool(self.item() != 0)

    def put_(self, index, source, accumulate=False):
        """self flattened, written at index (negative indices count from the end); accumulate adds. In a graph (a
        view of one too) recorded as PyTorch records it, source's gradient included."""
        if record_in_place(self, "put_", lambda t: _put(t, index, source, accumulate, "put")):
            return self
        _refuse_inplace(self, "put_")
        source = source.detach() if isinstance(source, _C.TensorBase) else source
        _C.copy_(self, _put(self.detach(), index, source, accumulate, "put_"))
        return self

    def put(self, index, source, accumulate=False):
        return _put(self, index, source, accumulate, "put")

    def cumprod_(self, dim, *, dtype=None):
        return _write_back(self, "cumprod_", lambda t: t.cumprod(dim, dtype=dtype))

    def logit_(self, eps=None):
        return _write_back(self, "logit_", lambda t: t.logit(eps))

    def xlogy_(self, other):
        return _write_back(self, "xlogy_", lambda t: t.xlogy(other))

    def hypot_(self, other):
        return _write_back(self, "hypot_", lambda t: t.hypot(other))

    def float_power_(self, exponent):
        if self._dtype != _F64:
            raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype} but the operation's result "
                               f"requires dtype float64")
        return _write_back(self, "float_power_", lambda t: t.float_power(exponent))


def _write_back(self, name, compute):
    """The in-place form of an out-of-place op: compute(self) (same shape) written into self; in a graph recorded
    as PyTorch records it (indexing.record_in_place)."""
    value = compute(self.detach())
    check_castable(self, value._dtype, name)  # a float result into an integer tensor: refused, not truncated
    if tuple(value.shape) != tuple(self.shape):
        raise RuntimeError(f"{name}: output with shape {tuple(self.shape)} doesn't match the broadcast shape "
                           f"{tuple(value.shape)}")
    if not record_in_place(self, name, compute):
        _C.copy_(self, value)
    return self


def _directional_split(t, args, op, need):
    """hsplit / vsplit / dsplit (of a tensor with at least `need` dims): tensor_split along dim 1, 0 or 2 (hsplit
    of a 1-D tensor: dim 0). args: one int or sequence, or the indices as separate ints."""
    _need_tensor(op, t)
    if len(args) == 1:
        args = args[0]
    if t.ndim < need:
        raise RuntimeError(f"torch.{op} requires a tensor with at least {need} dimension, but got a tensor with "
                           f"{t.ndim} dimensions!")
    d = {"hsplit": 1 if t.ndim > 1 else 0, "vsplit": 0, "dsplit": 2}[op]
    if isinstance(args, numbers.Integral) and not isinstance(args, bool):
        n = int(args)
        if n == 0 or t.shape[d] % n:
            raise RuntimeError(f"torch.{op} attempted to split along dimension {d}, but the size of the dimension "
                               f"{t.shape[d]} is not divisible by the split_size {n}!")
        return t.tensor_split(n, d)
    if not isinstance(args, (list, tuple)) or not all(isinstance(i, numbers.Integral) for i in args):
        raise TypeError(f"{op}(): argument 'indices_or_sections' must be an int or a sequence of ints, not "
                        f"{type(args).__name__}")
    return t.tensor_split(list(args), d)


# ---- the gm.* functions --------------------------------------------------------------------------------------
def _function(name):
    def fn(input, *args, **kwargs):
        _need_tensor(name, input)
        return getattr(MiscMethods, name)(input, *args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"gm.{name}(input, ...): Tensor.{name}."
    return fn


ravel, is_signed, is_same_size, get_device = (
    _function(n) for n in ("ravel", "is_signed", "is_same_size", "get_device"))


def split_with_sizes(input, split_sizes, dim=0):
    _need_tensor("split_with_sizes", input)
    return input.split_with_sizes(split_sizes, dim)


def unsafe_split(input, split_size, dim=0):
    _need_tensor("unsafe_split", input)
    return input.unsafe_split(split_size, dim)


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    _need_tensor("unsafe_split_with_sizes", input)
    return input.unsafe_split_with_sizes(split_sizes, dim)


def unsafe_chunk(input, chunks, dim=0):
    _need_tensor("unsafe_chunk", input)
    return input.unsafe_chunk(chunks, dim)


def narrow_copy(input, dim, start, length):
    _need_tensor("narrow_copy", input)
    return input.narrow_copy(dim, start, length)


def hsplit(input, indices_or_sections):
    return _directional_split(input, (indices_or_sections,), "hsplit", 1)


def vsplit(input, indices_or_sections):
    return _directional_split(input, (indices_or_sections,), "vsplit", 2)


def dsplit(input, indices_or_sections):
    return _directional_split(input, (indices_or_sections,), "dsplit", 3)


def _tensor_list(op, tensors):
    if isinstance(tensors, _C.TensorBase) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    if not tensors:
        raise RuntimeError(f"{op} expects a non-empty TensorList")
    return list(tensors)


def atleast_3d(*tensors):
    """Each tensor viewed with at least 3 dims: () -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        _need_tensor("atleast_3d", t, "tensors")
    out = tuple(t.reshape(1, 1, 1) if t.ndim == 0 else t.reshape(1, -1, 1) if t.ndim == 1 else
                t.unsqueeze(-1) if t.ndim == 2 else t for t in tensors)
    return out[0] if len(out) == 1 else out


def column_stack(tensors):
    """0-d and 1-D tensors as columns (n, 1), then concatenated along dim 1."""
    ts = _tensor_list("column_stack", tensors)
    return _cat([t.reshape(-1, 1) if t.ndim < 2 else t for t in ts], 1)


def dstack(tensors):
    """atleast_3d of each, concatenated along dim 2."""
    ts = _tensor_list("dstack", tensors)
    ts = atleast_3d(*ts)
    return _cat(list(ts) if isinstance(ts, tuple) else [ts], 2)


def row_stack(tensors):
    """vstack: 0-d and 1-D tensors as rows (1, n), then concatenated along dim 0."""
    ts = _tensor_list("row_stack", tensors)
    return _cat([t.reshape(1, -1) if t.ndim < 2 else t for t in ts], 0)


def _cat(tensors, dim):
    return F.Cat.apply(dim, *tensors) if _needs_grad(*tensors) else _C.cat(list(tensors), dim)


# ---- put, index_put, rsub ------------------------------------------------------------------------------------------
def _put(self, index, source, accumulate, op):
    _need_tensor(op, index, "index")
    _need_tensor(op, source, "source")
    if index._dtype != 4:
        raise RuntimeError(f"{op}(): Expected a long tensor for index, but got {index.dtype}")
    if source._dtype != self._dtype:
        raise RuntimeError(f"{op}(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{self.dtype} and source.dtype = {source.dtype}")
    if index.numel() != source.numel():
        raise IndexError(f"{op}(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    n = self.numel()
    idx = index.reshape(-1)
    if idx._device != "meta" and idx.numel():
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            bad = hi if hi >= n else lo
            raise IndexError(f"{op}(): out of range: tried to access index {bad} on a tensor of {n} elements.")
    idx = idx + (idx < 0).long() * n
    flat = self.reshape(-1)
    out = flat.index_add(0, idx, source.reshape(-1)) if accumulate else flat.index_copy(0, idx, source.reshape(-1))
    return out.reshape(tuple(self.shape))


def put(input, index, source, accumulate=False):
    _need_tensor("put", input)
    return input.put(index, source, accumulate)


def index_put(input, indices, values, accumulate=False):
    _need_tensor("index_put", input)
    return input.index_put(indices, values, accumulate)


def index_put_(input, indices, values, accumulate=False):
    _need_tensor("index_put_", input)
    return input.index_put_(indices, values, accumulate)


def rsub(input, other, *, alpha=1):
    """other - alpha * input."""
    _need_tensor("rsub", input)
    if input._dtype == 5 or (isinstance(other, _C.TensorBase) and other._dtype == 5):
        raise NotImplementedError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                                  "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return other - (input if alpha == 1 else input * alpha)


# ---- dtype queries -----------------------------------------------------------------------------------------------
_SIGNED_ORDER = (7, 8, 9, 4)  # int8, int16, int32, int64


def _promote(a, b):
    """PyTorch's promotion of two dtype codes (tensors of the same priority)."""
    if a == b:
        return a
    if a == 5 or b == 5:
        return b if a == 5 else a
    fa, fb = a in _FLOAT_DIGITS, b in _FLOAT_DIGITS
    if fa and fb:
        return 1 if 1 in (a, b) else 0  # float16 with bfloat16 (or float32) widens to float32
    if fa or fb:
        return a if fa else b
    if 6 in (a, b):  # uint8 with a signed type: int16 at least
        other = b if a == 6 else a
        return 8 if other == 7 else other
    return max(a, b, key=_SIGNED_ORDER.index)


def _category(code):
    return 0 if code == 5 else 2 if code in _FLOAT_DIGITS else 1


def _combine(higher, lower):
    """A lower-priority operand only counts when its category (bool < int < float) is above the higher's."""
    if higher is None:
        return lower
    if lower is None or higher in _FLOAT_DIGITS:
        return higher
    if higher == 5 or lower in _FLOAT_DIGITS:
        return _promote(higher, lower)
    return higher


def _operand_code(x, op, name):
    from .dtype import get_default_dtype
    if isinstance(x, _C.TensorBase):
        return x._dtype
    if isinstance(x, bool):
        return 5
    if isinstance(x, numbers.Integral):
        return 4
    if isinstance(x, numbers.Real):
        return get_default_dtype().code
    raise TypeError(f"{op}(): argument '{name}' must be Tensor or Number, not {type(x).__name__}")


def result_type(tensor1, tensor2):
    """The dtype an arithmetic op of the two (tensors or numbers) gives, by PyTorch's rules: tensors with dims
    first, then 0-d tensors, then numbers, each counting only when of a higher category (bool < int < float)."""
    groups = {"dim": None, "zero": None, "number": None}
    for name, x in (("tensor1", tensor1), ("tensor2", tensor2)):
        code = _operand_code(x, "result_type", name)
        key = "number" if not isinstance(x, _C.TensorBase) else "zero" if x.ndim == 0 else "dim"
        groups[key] = code if groups[key] is None else _promote(groups[key], code)
    return _DTYPES[_combine(groups["dim"], _combine(groups["zero"], groups["number"]))]


def _dtype_arg(t, op, name):
    if not isinstance(t, _dtype_class):
        raise TypeError(f"{op}(): argument '{name}' must be torch.dtype, not {type(t).__name__}")
    return t.code


def promote_types(type1, type2):
    return _DTYPES[_promote(_dtype_arg(type1, "promote_types", "type1"), _dtype_arg(type2, "promote_types", "type2"))]


def can_cast(from_, to):
    """False for a cast that loses the kind: floating to integral, or anything but bool to bool."""
    a, b = _dtype_arg(from_, "can_cast", "from_"), _dtype_arg(to, "can_cast", "to")
    if a in _FLOAT_DIGITS and b not in _FLOAT_DIGITS:
        return False
    return not (a != 5 and b == 5)


def typename(obj):
    """A tensor's legacy type name ('torch.FloatTensor'), else module.qualname of the object's type."""
    if isinstance(obj, _C.TensorBase):
        return obj.type()
    module = getattr(obj, "__module__", None) or ""
    module = "" if module in ("", "builtins", "__builtin__") else module + "."
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
    return module + name


# ---- the *_copy forms: the view ops' results as new contiguous tensors ---------------------------------------------
def _copy_of(name, view):
    def fn(input, *args, **kwargs):
        _need_tensor(name, input)
        out = view(input, *args, **kwargs)
        if isinstance(out, tuple):
            return tuple(_fresh(o, input) for o in out)
        return _fresh(out, input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}: a copy (contiguous, its own storage) of what the view op gives."
    return fn


def _fresh(t, input):
    out = t.contiguous()
    return out.clone() if out._storage_id == input._storage_id else out


alias_copy = _copy_of("alias_copy", lambda t: t)
detach_copy = _copy_of("detach_copy", lambda t: t.detach())
diagonal_copy = _copy_of("diagonal_copy", lambda t, offset=0, dim1=0, dim2=1: t.diagonal(offset, dim1, dim2))
expand_copy = _copy_of("expand_copy", lambda t, size, *, implicit=False: t.expand(*size))
permute_copy = _copy_of("permute_copy", lambda t, dims: t.permute(*dims))
select_copy = _copy_of("select_copy", lambda t, dim, index: t.select(dim, index))
slice_copy = _copy_of("slice_copy", lambda t, dim=0, start=None, end=None, step=1:
                      t[(slice(None),) * _dim(dim, t.ndim, "slice_copy") + (slice(start, end, step),)])
split_copy = _copy_of("split_copy", lambda t, split_size, dim=0: t.split(split_size, dim))
split_with_sizes_copy = _copy_of("split_with_sizes_copy", lambda t, split_sizes, dim=0:
                                 t.split_with_sizes(split_sizes, dim))
squeeze_copy = _copy_of("squeeze_copy", lambda t, dim=None: t.squeeze() if dim is None else t.squeeze(dim))
t_copy = _copy_of("t_copy", lambda t: t.t())
transpose_copy = _copy_of("transpose_copy", lambda t, dim0, dim1: t.transpose(dim0, dim1))
unbind_copy = _copy_of("unbind_copy", lambda t, dim=0: t.unbind(dim))
unfold_copy = _copy_of("unfold_copy", lambda t, dimension, size, step: t.unfold(dimension, size, step))
unsqueeze_copy = _copy_of("unsqueeze_copy", lambda t, dim: t.unsqueeze(dim))
as_strided_copy = _copy_of("as_strided_copy", lambda t, size, stride, storage_offset=None:
                           t.as_strided(size, stride, storage_offset))
# (of a tensor no view can give too: its values in that shape, as PyTorch's, which copies the contiguous values)
view_copy = _copy_of("view_copy", lambda t, size: t.reshape(*size) if not isinstance(size, numbers.Integral)
                     else t.reshape(size))


_BF16, _I16 = 3, 8


def _rebuild_tensor(cls, data, code, device, requires_grad, is_param, state):
    """Tensor.__reduce_ex__'s inverse: importable by name, as pickle needs."""
    if device == "meta":
        t = _C.empty(tuple(data), code, "meta")
    else:
        t = _C.from_numpy(data, None, "cpu")
        if code == _BF16:
            t = t.view(_DTYPES[_BF16])
        if device != "cpu":
            t = t.to(device)
    return restored(t, cls, is_param, requires_grad, state)

