"""Tensor's pointwise math beyond + - * /: the math library's functions (sin ... exp2, one C op each, differentiable),
fmod, remainder (%), floor division (//) and atan2 (C binary ops; tensor.py defines their methods), reciprocal,
lerp, addcmul, addcdiv, and the in-place forms of the unary ops (exp_, sqrt_, sin_ ...).

The in-place unary forms write into the tensor where no graph is recorded (under no_grad, or on tensors that need
no gradient: optimizers, EMA and running statistics); on a tensor in a graph they raise and name the out-of-place
form, since their gradient would need the value they overwrite. lerp_, addcmul_ and addcdiv_ are one recorded
add_, so they work in a graph too. Integer inputs of the math functions are computed in float32, as in PyTorch;
under autocast the functions on PyTorch's float32 list (asin, acos, tan, sinh, cosh, log1p, expm1, log2, log10,
reciprocal) widen bfloat16/float16 inputs to float32 first, as exp and log already do."""
import functools
import math
import numbers
import warnings

import numpy as np

from .. import _C
from . import autocast as _amp
from . import functions as F
from .autograd import Function, is_grad_enabled, needs_grad as _needs_grad
from .dtype import DTYPES, SCALAR_TYPE_NAMES, fitting
from .indexing import record_in_place
from .state import warn_once

# op codes of _C.unary after CEIL (docs/C_API.md)
SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, ERF, ERFC, LOG1P, EXPM1, LOG2, LOG10, EXP2 = range(10, 25)
_NAMES = {SIN: "sin", COS: "cos", TAN: "tan", ASIN: "asin", ACOS: "acos", ATAN: "atan", SINH: "sinh",
          COSH: "cosh", ERF: "erf", ERFC: "erfc", LOG1P: "log1p", EXPM1: "expm1", LOG2: "log2", LOG10: "log10",
          EXP2: "exp2"}
_FP32_UNDER_AUTOCAST = {ASIN, ACOS, TAN, SINH, COSH, LOG1P, EXPM1, LOG2, LOG10}
_FROM_OUTPUT = {TAN, EXPM1, EXP2}  # derivatives written in the output: only it is saved

FMOD, REMAINDER, ATAN2, FLOORDIV = 13, 14, 15, 16  # _C.binary's codes after GE

_U, _B = _C.unary, _C.binary


def _derivative(op, s):
    """dy/dx at the saved tensor s (the output for the ops in _FROM_OUTPUT, the input for the rest)."""
    if op == SIN:
        return _U(COS, s)
    if op == COS:
        return _U(F.NEG, _U(SIN, s))
    if op == TAN:  # 1 + tan^2
        return _B(F.ADD, _B(F.MUL, s, s), 1.0)
    if op in (ASIN, ACOS):  # +-1 / sqrt(1 - x^2)
        return _B(F.DIV, 1.0 if op == ASIN else -1.0, _U(F.SQRT, _B(F.SUB, 1.0, _B(F.MUL, s, s))))
    if op == ATAN:
        return _B(F.DIV, 1.0, _B(F.ADD, _B(F.MUL, s, s), 1.0))
    if op == SINH:
        return _U(COSH, s)
    if op == COSH:
        return _U(SINH, s)
    if op in (ERF, ERFC):  # +-2/sqrt(pi) exp(-x^2)
        scale = 2.0 / math.sqrt(math.pi) * (1.0 if op == ERF else -1.0)
        return _B(F.MUL, _U(F.EXP, _U(F.NEG, _B(F.MUL, s, s))), scale)
    if op == LOG1P:
        return _B(F.DIV, 1.0, _B(F.ADD, s, 1.0))
    if op == EXPM1:
        return _B(F.ADD, s, 1.0)
    if op in (LOG2, LOG10):
        return _B(F.DIV, 1.0 / math.log(2.0 if op == LOG2 else 10.0), s)
    return _B(F.MUL, s, math.log(2.0))  # EXP2


class _Math(Function):
    @staticmethod
    def forward(ctx, x, op):
        out = _U(op, x)
        ctx.op = op
        ctx.save_for_backward(out if op in _FROM_OUTPUT else x)
        return out

    @staticmethod
    def backward(ctx, g):
        s, = ctx._unpacked
        return _B(F.MUL, g, _derivative(ctx.op, s)), None


def _trunc(t):
    return _C.where(_B(F.LT, t, 0.0), _U(F.CEIL, t), _U(F.FLOOR, t))


class Fmod(F.Binary):
    """a - trunc(a / b) * b: d/da = 1, d/db = -trunc(a / b) (PyTorch's)."""
    op = FMOD
    saves = True
    quotient = staticmethod(lambda a, b: _trunc(_B(F.DIV, a, b)))

    @classmethod
    def grads(cls, ctx, g):
        gb = None
        if ctx.needs_input_grad[1]:
            s = ctx._unpacked
            q = cls.quotient(F._operand(ctx, s, 0), F._operand(ctx, s, 1))
            gb = _U(F.NEG, _B(F.MUL, g, q))
        return g, gb


class Remainder(Fmod):
    """a - floor(a / b) * b (Python's %): d/db = -(a // b), the floor division as Python's (floor(a / b) is one
    more where a / b rounds up to an integer: 1.0 / 0.1)."""
    op = REMAINDER
    quotient = staticmethod(lambda a, b: _B(FLOORDIV, a, b))


class Atan2(F.Binary):
    """atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)."""
    op = ATAN2
    saves = True

    @staticmethod
    def grads(ctx, g):
        s = ctx._unpacked
        a, b = F._operand(ctx, s, 0), F._operand(ctx, s, 1)
        scale = _B(F.DIV, g, _B(F.ADD, _B(F.MUL, a, a), _B(F.MUL, b, b)))
        return (_B(F.MUL, scale, b) if ctx.needs_input_grad[0] else None,
                _U(F.NEG, _B(F.MUL, scale, a)) if ctx.needs_input_grad[1] else None)


class FloorDiv(F.Binary):
    """a // b: recorded so that backward fails as PyTorch's does (it has no derivative there)."""
    op = FLOORDIV

    @staticmethod
    def grads(ctx, g):
        raise RuntimeError("derivative for floor_divide is not implemented (PyTorch has none either): detach the "
                           "operands, or use div(..., rounding_mode='floor') whose gradient is zero")


class DivFloor(FloorDiv):
    """div(a, b, rounding_mode='floor'): a // b as floor_divide computes it, with PyTorch's zero gradient (a step
    function of both operands)."""

    @staticmethod
    def grads(ctx, g):
        zero = g.new_zeros(g.shape)
        return zero, zero


def _floating_lerp(x, weight):
    """lerp of an integer tensor: PyTorch has no kernel for it (its result would be truncated)."""
    if x._dtype not in (0, 1, 2, 3):
        kind = "tensor" if isinstance(weight, _C.TensorBase) else "scalar"
        raise NotImplementedError(f"\"lerp_kernel_{kind}\" not implemented for '{SCALAR_TYPE_NAMES[x._dtype]}'")
    fitting(weight, 1 if x._dtype == 1 else 0)  # a weight past float32's (the half types' math): PyTorch's error


def _math(op):
    def method(self):
        x = _amp.fp32_on_cuda(self)[0] if op in _FP32_UNDER_AUTOCAST and _amp._state.enabled else self
        return _Math.apply(x, op) if _needs_grad(x) else _U(op, x)
    method.__name__ = _NAMES[op]
    method.__doc__ = f"Elementwise {_NAMES[op]} (the math library's, computed in float32 for float16/bfloat16)."
    return method


def _in_place(name, compute, ints_unchanged=False):
    """The in-place form `name` of an out-of-place method: compute(self) writes its result into self.
    ints_unchanged: an integer tensor is its own result (floor_, ceil_)."""
    def method(self):
        if ints_unchanged and not self.is_floating_point():
            return self
        if not self.is_floating_point():
            raise RuntimeError(f"{name}: result type Float can't be cast to the desired output type {self.dtype} "
                               f"(in-place {name[:-1]} needs a floating-point tensor)")
        if not record_in_place(self, name, lambda t: getattr(t, name[:-1])()):  # (a VAE's logvar.mul(0.5).exp_())
            compute(self)
        return self
    method.__name__ = name
    return method


def _unary_into(op):
    return lambda t: _U(op, t, t)


class MathMethods:
    """Tensor's pointwise math methods (see the module docstring)."""
    __slots__ = ()

    sin, cos, tan, asin, acos, atan, sinh, cosh, erf, erfc, log1p, expm1, log2, log10, exp2 = (
        _math(op) for op in range(SIN, EXP2 + 1))
    arcsin, arccos, arctan = asin, acos, atan
    (sin_, cos_, tan_, asin_, acos_, atan_, sinh_, cosh_, erf_, erfc_, log1p_, expm1_, log2_, log10_, exp2_) = (
        _in_place(_NAMES[op] + "_", _unary_into(op)) for op in range(SIN, EXP2 + 1))
    exp_ = _in_place("exp_", _unary_into(F.EXP))
    log_ = _in_place("log_", _unary_into(F.LOG))
    sqrt_ = _in_place("sqrt_", _unary_into(F.SQRT))
    floor_ = _in_place("floor_", _unary_into(F.FLOOR), ints_unchanged=True)
    ceil_ = _in_place("ceil_", _unary_into(F.CEIL), ints_unchanged=True)
    rsqrt_ = _in_place("rsqrt_", lambda t: _B(F.DIV, 1.0, _U(F.SQRT, t, t), t))
    reciprocal_ = _in_place("reciprocal_", lambda t: _B(F.DIV, 1.0, t, t))

    def reciprocal(self):
        x = _amp.fp32_on_cuda(self)[0] if _amp._state.enabled else self
        return 1.0 / x

    def abs_(self):
        if not record_in_place(self, "abs_", lambda t: t.abs()):
            _U(F.ABS, self, self)
        return self

    def neg_(self):
        return self.mul_(-1)  # recorded as *= -1, so it works in a graph too
    negative_ = neg_

    def lerp(self, end, weight):
        """self + weight * (end - self) where |weight| < 0.5, else end - (end - self) * (1 - weight): PyTorch's two
        forms, so that weight 1 gives end exactly; weight a number or a tensor (broadcast)."""
        _floating_lerp(self, weight)
        if rounds_once(self, end, weight):  # in float64: what PyTorch's fused multiply-add in float32 rounds to
            w = weight.double() if isinstance(weight, _C.TensorBase) else float(np.float32(weight))
            return self.double().lerp(end.double(), w).to(self.dtype)
        if isinstance(weight, _C.TensorBase):
            d = end - self
            return (self + weight * d).where(weight.abs() < 0.5, end - d * (1 - weight))
        if self._dtype == 0:  # float32: the weight and 1 - weight in float32, as PyTorch's kernel has them
            weight = np.float32(weight)  # (fastai's loss smoothing, lerp(loss, val, 0.98): 1e-6 apart before)
            return self + float(weight) * (end - self) if abs(weight) < 0.5 else \
                end - (end - self) * float(np.float32(1) - weight)
        return self + weight * (end - self) if abs(weight) < 0.5 else end - (end - self) * (1 - weight)

    def lerp_(self, end, weight):
        _floating_lerp(self, weight)
        if isinstance(weight, _C.TensorBase) or abs(weight) >= 0.5 or rounds_once(self, end):
            return self.copy_(self.lerp(end, weight))
        if self._dtype == 0:
            weight = float(np.float32(weight))  # (as lerp's)
        return self.add_(weight * (end - self))  # the EMA's and BatchNorm's small weights: one temporary

    def addcmul(self, tensor1, tensor2, *args, value=1):
        """self + value * tensor1 * tensor2, in the dtype the three promote to."""
        tensor1, tensor2, value = _value_first(tensor1, tensor2, args, value, "addcmul")
        if rounds_once(self, tensor1, tensor2):  # value * tensor1 in float32, then PyTorch's fused multiply-add
            return (self.double() + (tensor1.float() * value).double() * tensor2.double()).to(self.dtype)
        tensor1, tensor2 = _widened(self, tensor1, tensor2)
        return self + _scaled(tensor1 * tensor2, value)

    def addcmul_(self, tensor1, tensor2, *args, value=1):
        tensor1, tensor2, value = _value_first(tensor1, tensor2, args, value, "addcmul_")
        if rounds_once(self, tensor1, tensor2):
            return self.copy_(self.addcmul(tensor1, tensor2, value=value))
        tensor1, tensor2 = _widened(self, tensor1, tensor2)
        return self.add_(_scaled(tensor1 * tensor2, value))

    def addcdiv(self, tensor1, tensor2, *args, value=1):
        """self + value * tensor1 / tensor2, in the dtype the three promote to; (value * tensor1) / tensor2, the
        order PyTorch's kernel rounds in."""
        tensor1, tensor2, value = _value_first(tensor1, tensor2, args, value, "addcdiv")
        if rounds_once(self, tensor1, tensor2):
            return (self.float() + tensor1.float() * value / tensor2.float()).to(self.dtype)
        tensor1, tensor2 = _widened(self, tensor1, tensor2)
        return self + _scaled(tensor1, value) / tensor2

    def addcdiv_(self, tensor1, tensor2, *args, value=1):
        tensor1, tensor2, value = _value_first(tensor1, tensor2, args, value, "addcdiv_")
        if rounds_once(self, tensor1, tensor2):
            return self.copy_(self.addcdiv(tensor1, tensor2, value=value))
        tensor1, tensor2 = _widened(self, tensor1, tensor2)
        return self.add_(_scaled(tensor1, value) / tensor2)


def _value_first(tensor1, tensor2, args, value, op):
    """PyTorch's deprecated op(value, tensor1, tensor2) overload (torch-optimizer's Ranger:
    exp_avg_sq.addcmul_(1 - beta2, grad, grad)), with its warning; else the arguments as they are."""
    if not args:
        return tensor1, tensor2, value
    if len(args) != 1 or isinstance(tensor1, _C.TensorBase) or not isinstance(args[0], _C.TensorBase):
        raise TypeError(f"{op}() takes 2 positional arguments (tensor1, tensor2) and value= as a keyword, got "
                        f"{2 + len(args)} positional arguments")
    warnings.warn(f"This overload of {op} is deprecated:\n\t{op}(Number value, Tensor tensor1, Tensor tensor2)\n"
                  f"Consider using one of the following signatures instead:\n\t{op}(Tensor tensor1, Tensor tensor2, "
                  f"*, Number value = 1)", UserWarning, stacklevel=3)
    return tensor2, args[0], tensor1


def _widened(t, *operands):
    """The tensor operands of a fused op on t (add with alpha, addcmul, addcdiv) in the floating dtype they all
    promote to, where an operand is narrower: PyTorch computes value * tensor1 in that dtype, so a bfloat16
    update added to a float32 or float64 weight (Muon-style optimizers) is not rounded to bfloat16 first."""
    tensors = [o for o in (t,) + operands if isinstance(o, _C.TensorBase)]
    if all(o._dtype == t._dtype for o in tensors) or any(o._dtype > 3 for o in tensors):
        return operands  # (the common case, one dtype, asks no promotion)
    wide = F.result_code(tensors)
    return tuple(o.to(DTYPES[wide]) if isinstance(o, _C.TensorBase) and o._dtype != wide else o for o in operands)


# What Tensor's arithmetic takes as an operand; anything else is a type of its own, whose reflected operator decides
# (tensor.py's _binary_slot) and which add / sub refuse
OPERANDS = (_C.TensorBase, numbers.Number, np.ndarray, np.generic)


def _alpha_scaled(t, o, args, alpha, op):
    """alpha * o for add/sub(o, *, alpha) (hand-written optimizers: p.add_(d_p, alpha=-lr)); also PyTorch's
    deprecated add_(alpha, other) overload, with its warning."""
    if not isinstance(o, OPERANDS) and not getattr(type(o), "_tensor_like", False):
        # (the operator would defer to o's reflected one)
        raise TypeError(f"{op}(): argument 'other' must be Tensor or Number, not {type(o).__name__}")
    if args:
        if len(args) != 1 or not isinstance(args[0], _C.TensorBase) or isinstance(o, _C.TensorBase):
            raise TypeError(f"{op}() takes 1 positional argument (other) and alpha= as a keyword, got "
                            f"{1 + len(args)} positional arguments")
        warnings.warn(f"This overload of {op} is deprecated:\n\t{op}(Number alpha, Tensor other)\nConsider using "
                      f"{op}(Tensor other, *, Number alpha = 1)", UserWarning, stacklevel=3)
        o, alpha = args[0], o
    if alpha == 1:
        return o
    if isinstance(alpha, float) and not t.is_floating_point():
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(o, _C.TensorBase) and o._dtype != t._dtype:
        # alpha * o in the dtype of the result, as PyTorch's kernel computes it: a uint8 o times 2 added to a float
        # did not wrap there (torch.add(2.5, u8, alpha=2))
        code = F.result_code((t, o), ranked=True)
        if code != o._dtype:
            o = o.to(DTYPES[code])
    return o * alpha


def half_alpha_add(self, other, args, alpha):
    """self + alpha * other for float16 / bfloat16 tensors as PyTorch's kernel computes it: alpha rounded to their
    dtype, the rest in float32, rounded once. None where that does not apply (alpha 1, other dtypes, a number, the
    deprecated positional-alpha form): the caller's ordinary path."""
    fitting(alpha, self._dtype)  # an alpha past the dtype's range: PyTorch's overflow error, for every dtype
    if alpha == 1 or args or not isinstance(other, _C.TensorBase) or not rounds_once(self, other):
        return None
    alpha = _C.TensorBase.item(_C.from_numpy(np.asarray(float(alpha)), self._dtype, "cpu"))
    return (self.float() + other.float() * alpha).to(self.dtype)


def rounds_once(self, *others):
    """Whether a fused op (lerp, addcmul, addcdiv, add with alpha) on float16 / bfloat16 self and operands of its
    dtype is computed in float32 and rounded once, as PyTorch's CPU kernels compute it: composed of half-precision
    ops it would round each intermediate (a bf16 EMA's lerp_ differed from PyTorch's in 1 element of 9)."""
    return self._dtype in (2, 3) and all(not isinstance(o, _C.TensorBase) or o._dtype == self._dtype for o in others)


def _scaled(t, value):
    return t if value == 1 else t * value


_DEFERRING = ("__lt__", "__le__", "__gt__", "__ge__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__mod__",
              "__rmod__", "__floordiv__", "__rfloordiv__", "__and__", "__rand__", "__or__", "__ror__", "__xor__",
              "__rxor__", "__lshift__", "__rlshift__", "__rshift__", "__rrshift__")


def defer_to_foreign_operands(cls):
    """cls's comparison, power, matmul, %, // and bitwise operators return NotImplemented for an operand of a type
    of its own (a sympy symbol, a list, None), as PyTorch's do: Python then asks the other operand's reflected
    operator (pykan's symbolic formulas) or raises its own TypeError ("'<' not supported between instances of
    'Tensor' and 'list'"). The methods (lt, pow, matmul...) keep refusing such operands with their messages."""
    def deferring(fn):
        @functools.wraps(fn)
        def operator(self, o):
            if isinstance(o, OPERANDS) or getattr(type(o), "_tensor_like", False):
                return fn(self, o)
            return NotImplemented
        return operator
    for name in _DEFERRING:
        setattr(cls, name, deferring(getattr(cls, name)))


def warn_scalar_of_grad_tensor():
    """float(t) of a tensor that requires grad, with grad enabled (LBFGS converts its loss under no_grad): PyTorch's
    warning, once per process as PyTorch's (TORCH_WARN_ONCE)."""
    if is_grad_enabled():
        warn_once("Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
                  "Consider using tensor.detach() first.", stacklevel=3)


def matmul_tensors(a, b):
    """a @ b of two gm tensors, after autocast's lowering: Tensor.matmul's work, which mm, bmm and attention call
    directly (a FLOP counter that patches Tensor.matmul sees none of them, as under PyTorch)."""
    if _amp._state.enabled:
        a, b = _amp.lower(a, b)
    if a._dtype == b._dtype and a._dtype in _STORED_INTS:  # no kernel of their own: the int64 one, wrapped back
        return F.cast(_C.matmul(F.cast(a, _I64), F.cast(b, _I64)), a._dtype)  # (sums mod 2^k: PyTorch's values)
    return F.Matmul.apply(a, b) if _needs_grad(a, b) else _C.matmul(a, b)


_I64, _STORED_INTS = 4, (6, 7, 8, 9)  # int64; uint8, int8, int16, int32
