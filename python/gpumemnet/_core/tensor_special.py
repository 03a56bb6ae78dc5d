"""PyTorch's special and elementwise math beyond tensor_math.py: comparisons by name (eq, greater, less_equal ...
and their in-place forms), inverse hyperbolics, deg2rad / rad2deg, copysign, signbit, heaviside, fmax / fmin,
logaddexp2, sinc, isposinf / isneginf / isreal, positive, ldexp, lgamma / digamma / polygamma / erfinv / i0 (values
in tensor_gamma.py). tensor_bitwise.py has the integer ops (bitwise_*, gcd, lcm).
Tensor methods in SpecialMethods (copied into Tensor); the gm.* functions in __all__ (gpumemnet/__init__.py
imports them).

Dtypes follow PyTorch: integer and bool inputs of the float functions give float32; float16 and bfloat16 are
computed in float32 and rounded back. lgamma, digamma, polygamma, erfinv and i0 compute float32 (and the half types)
in float64, which makes them exact to float32 rounding. Every op is composed of existing ones, so it runs on every
device and on meta; the unary ones record one node whose backward is PyTorch's derivative (a composite's gradient
would be NaN where a where() hides a branch that overflows)."""
import math
import numbers

from .. import _C
from . import autocast as _amp
from . import functions as F
from . import hooks
from . import tensor_gamma as _G
from .autograd import Function, is_grad_enabled, needs_grad as _needs_grad, refuse_inplace as _refuse_inplace
from .indexing import record_in_place
from .dtype import DTYPES, get_default_dtype
from .tensor_bitwise import _TYPE_NAME, BitwiseMethods, _need_tensor, check_castable as _check_castable, result_code
from .tensor_compose import _finite_shift

__all__ = ["eq", "ne", "gt", "ge", "lt", "le", "greater", "greater_equal", "less", "less_equal", "not_equal",
           "acosh", "asinh", "atanh", "arccosh", "arcsinh", "arctanh", "deg2rad", "rad2deg", "copysign", "signbit",
           "heaviside", "fmax", "fmin", "logaddexp2", "sinc", "isposinf", "isneginf", "isreal", "positive", "ldexp",
           "lgamma", "digamma", "polygamma", "erfinv", "i0",
           "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
           "gcd", "lcm"]

_F32, _F64, _I64, _BOOL = 0, 1, 4, 5
_STORAGE_INTS = (6, 7, 8, 9)  # uint8 ... int32: stored, but few kernels
_FLOATS = (0, 1, 2, 3)
_LN2 = math.log(2.0)


def _float_code(code):
    """The dtype a float function gives for an input of dtype `code`: its own, or the default float for integers."""
    return code if code in _FLOATS else get_default_dtype().code


def _evaluate(x, fn, wide=False):
    """fn(x) computed as PyTorch does and returned in _float_code(x's dtype): float16/bfloat16 and integers in
    float32 (wide: float64, as float32 then too); fn gets a float32 or float64 tensor."""
    out = _float_code(x._dtype)
    work = _F64 if wide or out == _F64 else _F32
    y = fn(x if x._dtype == work else F.cast(x, work))
    return y if y._dtype == out else F.cast(y, out)


class _Unary(Function):
    """y = value(x) with dy/dx = slope(x) (or slope(y) when of_output: then only y is kept for backward); both run
    on tensors outside the graph."""

    @staticmethod
    def forward(ctx, x, value, slope, of_output):
        y = value(x.detach())
        ctx.slope, ctx.of_output = slope, of_output
        ctx.label = "".join(w.capitalize() for w in value.__name__.split("_")) + "Backward0"  # PyTorch's name
        ctx.save_for_backward(y if of_output else x)
        return y

    @staticmethod
    def backward(ctx, g):
        s, = ctx._unpacked
        return g * ctx.slope(s.detach()), None, None, None

    def name(self):
        return self.label

def _pointwise(name, fn, slope, wide=False, of_output=False, fp32_under_autocast=False, graph_slope=None):
    """The Tensor method `name`: fn gives the values (see _evaluate), slope the derivative, of the input (or,
    of_output, of the output in its own dtype). fp32_under_autocast: on PyTorch's autocast float32 list.
    graph_slope: the derivative written with recorded ops, for gradients of gradients (default: slope itself, when
    it is plain tensor arithmetic); computed in float64 where wide, as the values."""
    def value(x):
        return _evaluate(x, fn, wide)
    value.__name__ = name

    def derivative(s):
        return slope(s) if of_output else _evaluate(s, slope, wide)
    derivative.graph = graph_slope or slope
    derivative.wide = wide and not of_output

    def method(self):
        x = _amp.fp32_on_cuda(self)[0] if fp32_under_autocast and _amp._state.enabled else self
        return _Unary.apply(x, value, derivative, of_output) if _needs_grad(x) else value(x)
    method.__name__ = name
    method.__doc__ = f"Elementwise {name} (PyTorch's; integers give float32)."
    return method


def _write(self, name, result):
    """self's values replaced by result's (an in-place form outside a graph), which must have self's shape."""
    _refuse_inplace(self, name, " (its gradient needs the value it would overwrite)")
    _check_castable(self, result._dtype, name)
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(f"{name}: output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)} (the other operand must broadcast to self's shape)")
    _C.copy_(self, result)
    return self


def _in_place(name):
    """name_ of the out-of-place method name (same arguments), outside a graph."""
    def method(self, *args):
        if self.requires_grad and is_grad_enabled():  # in a graph: the out-of-place form on a copy, recorded
            _check_castable(self, getattr(self.detach(), name)(*args)._dtype, name + "_")
            record_in_place(self, name + "_", lambda t: getattr(t, name)(*args))
            return self
        return _write(self, name + "_", getattr(self.detach(), name)(*args))
    method.__name__ = name + "_"
    return method


def _as_code(t, code):
    """t in dtype `code` (recorded when t needs a gradient); numbers stay numbers."""
    if not isinstance(t, _C.TensorBase) or t._dtype == code:
        return t
    return t.to(DTYPES[code])


def _need_other(other, name, arg="other", numbers_ok=True):
    if isinstance(other, _C.TensorBase):
        return
    if numbers_ok and isinstance(other, numbers.Number) and not isinstance(other, complex):
        return
    raise TypeError(f"{name}(): argument '{arg}' must be Tensor{' or a number' if numbers_ok else ''}, "
                    f"not {type(other).__name__}")


def _float_operands(self, other):
    """(self, other) cast to the float dtype PyTorch computes name(self, other) in."""
    code = _float_code(result_code(self, other))
    return _as_code(self, code), _as_code(other, code)


# ---- derivatives and values of the unary functions (on float32/float64 tensors) ----------------------------------
def _acosh(x):
    # log1p form keeps the digits near 1; past 1e10 (x-1)(x+1) would overflow float32: log(2x) is exact there
    near = ((x - 1.0) + ((x - 1.0) * (x + 1.0)).sqrt()).log1p()
    return _C.where(x > 1e10, x.log() + _LN2, near)


def _asinh(x):
    a = x.abs()
    near = (a + a * a / ((a * a + 1.0).sqrt() + 1.0)).log1p()
    return _C.where(a > 1e10, a.log() + _LN2, near) * x.sign()


def _atanh(x):
    # each log1p exact to rounding (1 +- x is exact near +-1), and no cancellation between them
    return (x.log1p() - (-x).log1p()) * 0.5


def _sinc(x):
    px = x * math.pi
    return _C.where(x == 0.0, 1.0, px.sin() / px)


def _sinc_slope(x):
    """(px cos px - sin px) / (px x); below |px| = 1e-3 its series -pi^2 x / 3 (1 - (px)^2 / 10) (the quotient
    cancels there, and px x underflows to 0 for tiny x: 1e-300 gave NaN)."""
    px = x * math.pi
    small = px.abs() < 1e-3
    safe = _C.where(small, 1.0, x)
    series = x * (-math.pi ** 2 / 3.0) * (1.0 - px * px / 10.0)
    sp = safe * math.pi
    return _C.where(small, series, (sp * sp.cos() - sp.sin()) / (sp * safe))


def _sinc_graph_slope(x):
    px = x * math.pi
    small = px.detach().abs() < 1e-3
    safe = x.masked_fill(small, 1.0)
    series = x * (-math.pi ** 2 / 3.0) * (1.0 - px * px / 10.0)
    sp = safe * math.pi
    return F.Where.apply(small, series, (sp * sp.cos() - sp.sin()) / (sp * safe))


def _no_graph(x):
    return None  # graph_backward_ops raises its NotImplementedError


def _compare_into(self, other, name, op):
    """self = (self op other), as 1 / 0 in self's dtype."""
    _refuse_inplace(self, name)
    _need_other(other, name)
    result = getattr(self.detach(), op)(other)
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(f"{name}: output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)} (other must broadcast to self's shape)")
    _C.copy_(self, result)
    return self


class SpecialMethods(BitwiseMethods):
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    # ---- comparisons by name: eq, ne, lt, le, gt, ge are tensor.py's ----------------------------------------------
    def greater(self, other): return self.gt(other)
    def greater_equal(self, other): return self.ge(other)
    def less(self, other): return self.lt(other)
    def less_equal(self, other): return self.le(other)
    def not_equal(self, other): return self.ne(other)

    def eq_(self, other): return _compare_into(self, other, "eq_", "eq")
    def ne_(self, other): return _compare_into(self, other, "ne_", "ne")
    def gt_(self, other): return _compare_into(self, other, "gt_", "gt")
    def ge_(self, other): return _compare_into(self, other, "ge_", "ge")
    def lt_(self, other): return _compare_into(self, other, "lt_", "lt")
    def le_(self, other): return _compare_into(self, other, "le_", "le")
    greater_, greater_equal_, less_, less_equal_, not_equal_ = gt_, ge_, lt_, le_, ne_

    # ---- unary float functions --------------------------------------------------------------------------------
    acosh = _pointwise("acosh", _acosh, lambda x: 1.0 / ((x - 1.0) * (x + 1.0)).sqrt())
    asinh = _pointwise("asinh", _asinh, lambda x: 1.0 / (x * x + 1.0).sqrt())
    atanh = _pointwise("atanh", _atanh, lambda x: 1.0 / (1.0 - x * x))
    sinc = _pointwise("sinc", _sinc, _sinc_slope, graph_slope=_sinc_graph_slope)
    lgamma = _pointwise("lgamma", _G.lgamma, _G.digamma, wide=True, graph_slope=lambda x: x.digamma())
    digamma = _pointwise("digamma", _G.digamma, lambda x: _G.polygamma(1, x), wide=True,
                         graph_slope=lambda x: x.polygamma(1))
    erfinv = _pointwise("erfinv", _G.erfinv, lambda y: (y * y).exp() * (0.5 * math.sqrt(math.pi)), wide=True,
                        of_output=True, fp32_under_autocast=True)
    i0 = _pointwise("i0", lambda x: _G.bessel_i(0, x), lambda x: _G.bessel_i(1, x), wide=True,
                    graph_slope=lambda x: (hooks.get("bessel_i1") or _no_graph)(x))
    arccosh, arcsinh, arctanh = acosh, asinh, atanh
    acosh_, asinh_, atanh_, sinc_, lgamma_, digamma_, erfinv_, i0_ = (
        _in_place(n) for n in ("acosh", "asinh", "atanh", "sinc", "lgamma", "digamma", "erfinv", "i0"))
    arccosh_, arcsinh_, arctanh_ = acosh_, asinh_, atanh_

    def polygamma(self, n):
        """The n-th derivative of digamma (n >= 0; polygamma(0) is digamma)."""
        n = _order(n)
        if n == 0:
            return self.digamma()
        fn = _polygamma_of(n)
        return _pointwise("polygamma", fn, _polygamma_of(n + 1), wide=True,
                          graph_slope=lambda x: x.polygamma(n + 1))(self)

    polygamma_ = _in_place("polygamma")

    def deg2rad(self):
        """self * pi / 180."""
        return _as_code(self, _float_code(self._dtype)) * (math.pi / 180.0)

    def rad2deg(self):
        """self * 180 / pi."""
        return _as_code(self, _float_code(self._dtype)) * (180.0 / math.pi)

    deg2rad_, rad2deg_ = _in_place("deg2rad"), _in_place("rad2deg")

    # ---- predicates -------------------------------------------------------------------------------------------
    def signbit(self):
        """Whether the sign bit is set: True for negative values and -0.0. (A NaN reads as positive: gpumemnet has
        no bit-level view of a float to see a NaN's sign.)"""
        x = self.detach()
        if x._dtype == _BOOL:
            return _C.binary(F.NE, x, x)
        neg = _C.binary(F.LT, x, 0)
        if x._dtype in _FLOATS:  # -0.0 == 0, but 1 / -0.0 is -inf
            neg = _C.binary(F.MAXIMUM, neg, _C.binary(F.MINIMUM, _C.binary(F.EQ, x, 0),
                                                      _C.binary(F.LT, _C.binary(F.DIV, 1.0, x), 0)))
        return neg

    def isposinf(self):
        return _C.binary(F.EQ, self.detach(), math.inf)

    def isneginf(self):
        return _C.binary(F.EQ, self.detach(), -math.inf)

    def isreal(self):
        """True everywhere: gpumemnet has no complex dtypes."""
        out = _C.empty(tuple(self.shape), _BOOL, self._device)
        _C.fill_(out, True)
        return out

    def positive(self):
        """self itself (unary +); refused for bool tensors, as in PyTorch."""
        if self._dtype == _BOOL:
            raise NotImplementedError("positive: the `+` operator, on a bool tensor is not supported (got a "
                                      "tensor of dtype bool)")
        return self

    # ---- binary functions -------------------------------------------------------------------------------------
    def copysign(self, other):
        """|self| with the sign of other (a tensor or a number; -0.0 counts as negative), as a float."""
        _need_other(other, "copysign")
        a, b = _float_operands(self, other)
        return _CopySign.apply(a, b) if _needs_grad(a, b) else _copysign(a, b)

    def ldexp(self, other):
        """self * 2 ** other (other a tensor), as a float."""
        _need_other(other, "ldexp", numbers_ok=False)
        code = _float_code(result_code(self, other))
        if code in (2, 3):  # in float32, as PyTorch: 2 ** other alone may overflow float16 where the result won't
            return (_as_code(self, _F32) * (2.0 ** _as_code(other, _F32))).to(DTYPES[code])
        a, b = _as_code(self, code), _as_code(other, code)
        return a * (2.0 ** b)

    def logaddexp2(self, other):
        """log2(2 ** self + 2 ** other) without overflow (floating-point tensors only)."""
        _need_other(other, "logaddexp2", numbers_ok=False)
        code = result_code(self, other)
        if code not in _FLOATS:
            raise NotImplementedError(f"logaddexp2: not implemented for '{_TYPE_NAME[code]}' (got tensors of dtype "
                                      f"{self.dtype} and {other.dtype}; it takes floating-point tensors)")
        a, b = _as_code(self, code), _as_code(other, code)
        m = _finite_shift(_C.binary(F.MAXIMUM, a.detach(), b.detach()))
        return ((a - m).exp2() + (b - m).exp2()).log2() + m

    def fmax(self, other):
        """The larger of self and other, elementwise; a NaN loses to a number (maximum propagates it)."""
        return _nan_ignoring(self, other, "fmax", F.GE)

    def fmin(self, other):
        """The smaller of self and other, elementwise; a NaN loses to a number (minimum propagates it)."""
        return _nan_ignoring(self, other, "fmin", F.LE)

    def heaviside(self, values):
        """0 where self < 0, values where self == 0, 1 where self > 0 (NaN gives 0); no derivative, as in
        PyTorch."""
        _need_other(values, "heaviside", "values", numbers_ok=False)
        if values._dtype != self._dtype:
            raise RuntimeError(f"heaviside is not yet implemented for tensors with different dtypes (input is "
                               f"{self.dtype}, values is {values.dtype})")
        if _needs_grad(self, values):
            return _Heaviside.apply(self, values)
        return _heaviside(self, values)

    copysign_, ldexp_, heaviside_ = _in_place("copysign"), _in_place("ldexp"), _in_place("heaviside")


def _order(n):
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n (got n={n})")
    return int(n)


def _polygamma_of(n):
    return _G.digamma if n == 0 else (lambda x: _G.polygamma(n, x))


def _nan_ignoring(self, other, name, op):
    _need_other(other, name, numbers_ok=False)
    code = result_code(self, other)
    a, b = _as_code(self, code), _as_code(other, code)
    if _needs_grad(a, b):
        return _NanIgnoring.apply(a, b, op)
    if code in _STORAGE_INTS:  # where() has no kernel for these: choose in int64
        return F.cast(_pick(F.cast(a, _I64), F.cast(b, _I64), op)[0], code)
    return _pick(a, b, op)[0]


def _pick(a, b, op):
    """(fmax / fmin of a and b, where a was taken): a where a op b or b is NaN, else b."""
    take_a = _C.binary(F.MAXIMUM, _C.binary(op, a, b), _C.binary(F.NE, b, b))
    return _C.where(take_a, a, b), take_a


class _NanIgnoring(Function):
    """fmax / fmin: the gradient goes to the operand taken, half to each on ties (PyTorch's)."""

    @staticmethod
    def forward(ctx, a, b, op):
        a, b = a.detach(), b.detach()
        out, _ = _pick(a, b, op)
        ctx.op = op
        ctx.save_for_backward(a, b)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b = ctx._unpacked
        _, take_a = _pick(a, b, ctx.op)
        share = _C.where(_C.binary(F.EQ, a, b), 0.5, F.cast(take_a, g._dtype))  # a's part of g
        ga = F.sum_to(g * share, a.shape) if ctx.needs_input_grad[0] else None
        gb = F.sum_to(g * (1.0 - share), b.shape) if ctx.needs_input_grad[1] else None
        return ga, gb, None


def _copysign(a, b):
    """|a| with b's sign (b a tensor of a's dtype, or a number)."""
    a = a.detach()
    if isinstance(b, _C.TensorBase):
        sign = _C.where(b.detach().signbit(), -1.0, 1.0)
        sign = sign if sign._dtype == a._dtype else F.cast(sign, a._dtype)
    else:
        sign = -1.0 if math.copysign(1.0, b) < 0 else 1.0
    return _C.binary(F.MUL, _C.unary(F.ABS, a), sign)


class _CopySign(Function):
    """copysign: d/da = result / a (0 where a is 0), and a zero gradient for b (PyTorch's)."""

    @staticmethod
    def forward(ctx, a, b):
        out = _copysign(a, b)
        ctx.b_meta = (tuple(b.shape), b._dtype, b._device) if isinstance(b, _C.TensorBase) else None
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx._unpacked
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ratio = _C.where(_C.binary(F.EQ, a, 0), 0.0, _C.binary(F.DIV, out, a))
            ga = F.sum_to(g * ratio, a.shape, a._dtype)
        if ctx.needs_input_grad[1]:
            gb = _C.empty(*ctx.b_meta)
            _C.fill_(gb, 0)
        return ga, gb


def _heaviside(x, values):
    x = x.detach()
    step = _C.binary(F.GT, x, 0)
    return _C.where(_C.binary(F.EQ, x, 0), values.detach(), step if x._dtype == _BOOL else F.cast(step, x._dtype))


class _Heaviside(Function):
    """heaviside of tensors that require grad: the value, and PyTorch's error at backward."""

    @staticmethod
    def forward(ctx, x, values):
        return _heaviside(x, values)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("the derivative for 'heaviside' is not implemented.")


# ---- gm.* functions ----------------------------------------------------------------------------------------------
def _unary_function(name):
    def fn(input):
        _need_tensor(name, input)
        return getattr(input, name)()
    fn.__name__ = name
    fn.__doc__ = f"gpumemnet.{name}(input) is input.{name}()."
    return fn


def _binary_function(name):
    def fn(input, other):
        _need_tensor(name, input)
        return getattr(input, name)(other)
    fn.__name__ = name
    fn.__doc__ = f"gpumemnet.{name}(input, other) is input.{name}(other)."
    return fn


(eq, ne, gt, ge, lt, le, greater, greater_equal, less, less_equal, not_equal, copysign, fmax, fmin, logaddexp2,
 ldexp) = (_binary_function(n) for n in ("eq", "ne", "gt", "ge", "lt", "le", "greater", "greater_equal", "less",
                                          "less_equal", "not_equal", "copysign", "fmax", "fmin", "logaddexp2",
                                          "ldexp"))
(acosh, asinh, atanh, deg2rad, rad2deg, signbit, sinc, isposinf, isneginf, isreal, positive, lgamma, digamma, erfinv,
 i0) = (_unary_function(n) for n in ("acosh", "asinh", "atanh", "deg2rad", "rad2deg", "signbit", "sinc", "isposinf",
                                     "isneginf", "isreal", "positive", "lgamma", "digamma", "erfinv", "i0"))
arccosh, arcsinh, arctanh = acosh, asinh, atanh


def heaviside(input, values):
    """0 where input < 0, values where input == 0, 1 where input > 0."""
    _need_tensor("heaviside", input)
    return input.heaviside(values)


def polygamma(n, input):
    """The n-th derivative of digamma at input (n >= 0)."""
    _need_tensor("polygamma", input)
    return input.polygamma(n)


from .tensor_bitwise import (bitwise_and, bitwise_or, bitwise_xor, bitwise_not, bitwise_left_shift,  # noqa: E402
                             bitwise_right_shift, gcd, lcm)
