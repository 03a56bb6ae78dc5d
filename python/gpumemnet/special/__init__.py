"""gm.special (layer 2): torch.special's functions, with its signatures (`out=` included) and its gradients.

Most are the Tensor methods under their special names (expit is sigmoid, gammaln lgamma, psi digamma ...); the rest
are composed here of elementwise ops, so they run on every device and on meta, and record one autograd node whose
backward is PyTorch's derivative. Integer and bool inputs give the default float dtype; float32 (and the half types)
are computed in float64 and rounded once. Where PyTorch has no derivative, the result needs no gradient
(scaled_modified_bessel_k0 / k1, airy_ai, spherical_bessel_j0, the polynomials), or backward raises
NotImplementedError as PyTorch's does (zeta in its first argument, gammainc / gammaincc in their first). Values may
differ from PyTorch's by PyTorch's own error: its float64 J0, J1, Y0, Y1 and Ai are off by up to ~1e-6, ours agree
with SciPy and mpmath to ~1e-15 (tests/test_special_ns.py checks both).

The values are _values.py's. Iterative ones: gammainc / gammaincc (series and continued fraction) iterate until every
element has converged, reading a flag on the host every few steps; the polynomials run their recurrence to the
largest n, read on the host; zeta reads the most negative q. On meta no value is read (the result's shape and dtype
are what matter there)."""
import math
import numbers

from .. import _C
from .._core import functions as _F
from .._core import hooks as _hooks
from .._core import tensor_gamma as _G
from .._core import tensor_special as _S
from .._core.activation import log_softmax as _log_softmax, sigmoid as _sigmoid, softmax as _softmax
from .._core.autograd import Function, needs_grad
from .._core.creation import full as _full, where as _where
from .._core.creation_more import broadcast_shapes as _broadcast_shapes
from .._core.dtype import DTYPES, get_default_dtype
from .._core.out_arg import write_out
from .._core.tensor import Tensor
from .._core.tensor_bitwise import _TYPE_NAME, result_code
from ._values import (_INF, _NAN, _SQRT2, _SQRT_2PI, _INV_SQRT_PI, _airy_ai, _bessel_i_scaled, _bessel_jy,
                      _bessel_k, _bessel_k_scaled, _entr, _erfcx, _i1_slope, _i1e_slope, _igamma_density, _igamma_pair,
                      _j1_slope, _log_ndtr, _log_ndtr_slope, _ndtri, _over_x, _recurrence, _trig_chebyshev,
                      _CHEBYSHEV_FIRST, _wide, _y1_slope, _zeta)

__all__ = ["expit", "logit", "erf", "erfc", "erfcx", "erfinv", "exp2", "expm1", "log1p", "gammaln", "digamma", "psi",
           "polygamma", "multigammaln", "gammainc", "gammaincc", "i0", "i0e", "i1", "i1e", "ndtr", "ndtri",
           "log_ndtr", "sinc", "round", "softmax", "log_softmax", "logsumexp", "entr", "xlogy", "xlog1py", "zeta",
           "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "spherical_bessel_j0", "airy_ai", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
           "chebyshev_polynomial_v", "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
           "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]

_FLOATS = (0, 1, 2, 3)


# ---- arguments and out= ------------------------------------------------------------------------------------------
def _need_tensor(name, x, arg="input", pos=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"special.{name}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")


def _need_number_or_tensor(name, input, other, args=("input", "other")):
    """Two operands of which at least one is a tensor and the other a tensor or a real number (PyTorch's
    (Tensor, Tensor), (Number, Tensor), (Tensor, Number) overloads)."""
    for x, arg in zip((input, other), args):
        if not isinstance(x, (Tensor, numbers.Real)):
            raise TypeError(f"special.{name}(): argument '{arg}' must be Tensor or a number, not {type(x).__name__}")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"special.{name}(): expected at least one Tensor, got {args[0]}={input!r} and "
                        f"{args[1]}={other!r} (two numbers)")


def _float_code(code):
    return code if code in _FLOATS else get_default_dtype().code


def _operands(name, input, other, args=("input", "other")):
    """(input, other) as tensors of the float dtype PyTorch computes a binary special function in (a number becomes
    a 0-d tensor on the other operand's device), recorded when they need a gradient; their shapes must broadcast."""
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        try:
            _broadcast_shapes(tuple(input.shape), tuple(other.shape))
        except RuntimeError:
            raise _C.ArgumentError(f"special.{name}(): the shapes of {args[0]} {tuple(input.shape)} and {args[1]} "
                                   f"{tuple(other.shape)} cannot be broadcast (each dim must be equal, or 1 in one "
                                   f"of them)") from None
    code = _float_code(result_code(input, other))
    device = (input if isinstance(input, Tensor) else other).device

    def conv(x):
        if not isinstance(x, Tensor):
            return _full((), float(x), dtype=DTYPES[code], device=device)
        return x if x._dtype == code else x.to(DTYPES[code])
    return conv(input), conv(other)


def _finish(name, result, out):
    """result, or (out= given) result written into out as PyTorch does (_core/out_arg.py)."""
    return result if out is None else write_out(f"special.{name}", result, out, stacklevel=4)


def _unary(name, method, doc):
    """special.name(input, *, out=None) -> method(input)."""
    def fn(input, *, out=None):
        _need_tensor(name, input)
        return _finish(name, method(input), out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _as_float(x):
    """x itself when floating point, else in the default float dtype (PyTorch's promotion of the float functions)."""
    return x if x._dtype in _FLOATS else x.to(get_default_dtype())


# ---- the autograd forms of the composed ones ----------------------------------------------------------------------
_erfcx_m = _S._pointwise("erfcx", _erfcx, lambda x: 2.0 * x * _erfcx(x) - 2.0 * _INV_SQRT_PI, wide=True)
_log_ndtr_m = _S._pointwise("log_ndtr", _log_ndtr, _log_ndtr_slope, wide=True)
_ndtri_m = _S._pointwise("ndtri", _ndtri, lambda y: (y * y * 0.5).exp() * _SQRT_2PI, wide=True, of_output=True)
# The Bessel functions' derivatives for gradients of gradients are written with the differentiable functions
# themselves (graph_slope): their value routines record nothing, so the slopes reused there lost terms (i1''(0.5)
# came out 1.032 against 0.194, k0''(0.3) 11.559 against 10.578).
def _where0(x, at0, f):
    """f(x, safe x) where x != 0 (safe: 1 at 0, so that no 1/0 reaches the gradient), at0 where x == 0."""
    zero = x == 0.0
    return _where(zero, at0, f(x, _where(zero, 1.0, x)))


_i0e_m = _S._pointwise("i0e", lambda x: _bessel_i_scaled(0, x),
                       lambda x: _bessel_i_scaled(1, x) - x.sign() * _bessel_i_scaled(0, x), wide=True,
                       graph_slope=lambda x: _i1e_m(x) - x.sign() * _i0e_m(x))
_i1_m = _S._pointwise("i1", lambda x: _G.bessel_i(1, x), _i1_slope, wide=True,
                      graph_slope=lambda x: _where0(x, 0.5, lambda x, s: x.i0() - _i1_m(x) / s))
_i1e_m = _S._pointwise("i1e", lambda x: _bessel_i_scaled(1, x), _i1e_slope, wide=True,
                       graph_slope=lambda x: _where0(x, 0.5, lambda x, s: _i0e_m(x) - _i1e_m(x) * (x.sign() + 1.0 / s)))
_entr_m = _S._pointwise("entr", _entr, lambda x: -(x.log() + 1.0))
_hooks.register("bessel_i1", _i1_m)  # Tensor.i0's derivative, differentiable


# ---- the functions -----------------------------------------------------------------------------------------------
expit = _unary("expit", lambda x: _sigmoid(_as_float(x)), "1 / (1 + exp(-input)): the logistic sigmoid.")
erf = _unary("erf", lambda x: _as_float(x).erf(), "The error function.")
erfc = _unary("erfc", lambda x: _as_float(x).erfc(), "1 - erf(input), computed without cancellation.")
erfcx = _unary("erfcx", _erfcx_m, "The scaled complementary error function exp(input^2) erfc(input).")
erfinv = _unary("erfinv", lambda x: _as_float(x).erfinv(), "The inverse of erf on [-1, 1].")
exp2 = _unary("exp2", lambda x: _as_float(x).exp2(), "2 ** input.")
expm1 = _unary("expm1", lambda x: _as_float(x).expm1(), "exp(input) - 1, exact near 0.")
log1p = _unary("log1p", lambda x: _as_float(x).log1p(), "log(1 + input), exact near 0.")
gammaln = _unary("gammaln", lambda x: _as_float(x).lgamma(), "log |Gamma(input)|.")
digamma = _unary("digamma", lambda x: _as_float(x).digamma(), "The logarithmic derivative of Gamma.")
psi = _unary("psi", lambda x: _as_float(x).digamma(), "digamma's other name.")
i0 = _unary("i0", lambda x: _as_float(x).i0(), "The modified Bessel function of the first kind, order 0.")
i0e = _unary("i0e", _i0e_m, "exp(-|input|) i0(input), finite for every input.")
i1 = _unary("i1", _i1_m, "The modified Bessel function of the first kind, order 1.")
i1e = _unary("i1e", _i1e_m, "exp(-|input|) i1(input), finite for every input.")
modified_bessel_i0 = _unary("modified_bessel_i0", lambda x: _as_float(x).i0(), "I_0(input) (i0's other name).")
modified_bessel_i1 = _unary("modified_bessel_i1", _i1_m, "I_1(input) (i1's other name).")
ndtr = _unary("ndtr", lambda x: ((_as_float(x) * (1.0 / _SQRT2)).erf() + 1.0) * 0.5,
              "The standard normal CDF, (1 + erf(input / sqrt 2)) / 2 as PyTorch computes it (0 below about -8.3 "
              "in float64; log_ndtr keeps the tail).")
ndtri = _unary("ndtri", _ndtri_m, "The standard normal quantile (the inverse of ndtr): +-inf at 1 and 0, NaN "
                                  "outside [0, 1].")
log_ndtr = _unary("log_ndtr", _log_ndtr_m, "log(ndtr(input)), finite far into the left tail.")
sinc = _unary("sinc", lambda x: _as_float(x).sinc(), "sin(pi x) / (pi x), 1 at 0.")
entr = _unary("entr", _entr_m, "-input * log(input): 0 at 0, -inf for negative input.")


def logit(input, eps=None, *, out=None):
    """log(p / (1 - p)), p = input clamped to [eps, 1 - eps] when eps is given."""
    _need_tensor("logit", input)
    if eps is not None and (isinstance(eps, bool) or not isinstance(eps, numbers.Real)):
        raise TypeError(f"special.logit(): argument 'eps' must be float or None, not {type(eps).__name__}")
    return _finish("logit", _as_float(input).logit(eps), out)


def round(input, *, decimals=0, out=None):  # noqa: A001  (torch.special.round)
    """Round half to even, to `decimals` decimal places (floating-point input only, as PyTorch's)."""
    _need_tensor("round", input)
    if input._dtype not in _FLOATS:
        raise NotImplementedError(f"special.round(): \"round\" not implemented for '{_TYPE_NAME[input._dtype]}' "
                                  f"(input has dtype {input.dtype}; torch.round rounds integers, special.round takes "
                                  f"floating-point tensors)")
    return _finish("round", input.round(decimals=decimals), out)


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma at input (n >= 0)."""
    _need_tensor("polygamma", input, pos=2)
    return _finish("polygamma", _as_float(input).polygamma(n), out)


def multigammaln(input, p, *, out=None):
    """The multivariate log-gamma of dimension p: sum_j lgamma(input - j/2) + p (p - 1) / 4 log(pi)."""
    _need_tensor("multigammaln", input)
    if isinstance(p, bool) or not isinstance(p, numbers.Integral):
        raise TypeError(f"special.multigammaln(): argument 'p' (position 2) must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError(f"special.multigammaln(): p has to be greater than or equal to 1 (got p={p})")
    x = _as_float(input)
    total = x.lgamma()
    for j in range(1, int(p)):
        total = total + (x - 0.5 * j).lgamma()
    return _finish("multigammaln", total + p * (p - 1) / 4.0 * math.log(math.pi), out)


def _need_float_or_dtype(name, input, dtype):
    """softmax / log_softmax take floating-point input, or any input with a dtype to compute in (PyTorch's)."""
    if dtype is None and input._dtype not in _FLOATS:
        raise NotImplementedError(f"special.{name}(): \"{name}\" not implemented for '{_TYPE_NAME[input._dtype]}' "
                                  f"(input has dtype {input.dtype}; give a floating-point input, or dtype=)")


def softmax(input, dim, *, dtype=None):
    """exp(input) / sum(exp(input)) along dim (computed in dtype when given)."""
    _need_tensor("softmax", input)
    _need_float_or_dtype("softmax", input, dtype)
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """log(softmax(input, dim)), computed stably (in dtype when given)."""
    _need_tensor("log_softmax", input)
    _need_float_or_dtype("log_softmax", input, dtype)
    return _log_softmax(input, dim, dtype=dtype)


def logsumexp(input, dim, keepdim=False, *, out=None):
    """log(sum(exp(input))) over dim (an int or a tuple of ints), computed stably."""
    _need_tensor("logsumexp", input)
    return _finish("logsumexp", _as_float(input).logsumexp(dim, keepdim), out)


def xlogy(input, other, *, out=None):
    """input * log(other), 0 where input is 0 (unless other is NaN); either may be a number."""
    _need_number_or_tensor("xlogy", input, other)
    x, y = _operands("xlogy", input, other)
    return _finish("xlogy", x.xlogy(y), out)


def xlog1py(input, other, *, out=None):
    """input * log1p(other), 0 where input is 0 (unless other is NaN); either may be a number."""
    _need_number_or_tensor("xlog1py", input, other)
    x, y = _operands("xlog1py", input, other)
    # x * log1p(y), with log1p(y) read as 0 where x is 0 and y <= -1 or y = inf (no infinity or NaN times 0): the
    # gradient in x is log1p(y) wherever that is finite, x = 0 included, and 0 where y <= -1, as PyTorch's
    zero = (x == 0) & ((y <= -1) | (y == math.inf))
    return _finish("xlog1py", x * _where(zero, 0.0, _where(zero, 0.0, y).log1p()), out)


# ---- regularized incomplete gamma, Hurwitz zeta ------------------------------------------------------------------
class _IncompleteGamma(Function):
    """gammainc / gammaincc: derivative in x only; PyTorch has none in a (backward raises as PyTorch's)."""

    @staticmethod
    def forward(ctx, a, x, upper):
        ctx.upper = upper
        ctx.save_for_backward(a, x)
        return _wide(lambda a, x: _igamma_pair(a, x)[1 if upper else 0], a, x)

    @staticmethod
    def backward(ctx, g):
        a, x = ctx._unpacked
        if ctx.needs_input_grad[0]:
            raise NotImplementedError(f"the derivative for '{'igammac' if ctx.upper else 'igamma'}: input' is not "
                                      f"implemented (PyTorch has none in the first argument, a)")
        gx = None
        if ctx.needs_input_grad[1]:
            dens = _wide(_igamma_density, a, x)
            gx = _F.sum_to(g * (-dens if ctx.upper else dens), x.shape)
        return None, gx, None


def _incomplete_gamma(name, input, other, out, upper):
    _need_tensor(name, input)
    _need_tensor(name, other, "other", 2)
    if result_code(input, other) not in _FLOATS:
        raise NotImplementedError(f"special.{name}(): not implemented for '{_TYPE_NAME[result_code(input, other)]}' "
                                  f"(input has dtype {input.dtype} and other {other.dtype}; give a floating-point "
                                  f"tensor)")
    a, x = _operands(name, input, other)
    if needs_grad(a, x):
        result = _IncompleteGamma.apply(a, x, upper)
    else:
        result = _wide(lambda a, x: _igamma_pair(a, x)[1 if upper else 0], a, x)
    return _finish(name, result, out)


def gammainc(input, other, *, out=None):
    """The regularized lower incomplete gamma function P(input, other) (input = a > 0, other = x >= 0)."""
    return _incomplete_gamma("gammainc", input, other, out, False)


def gammaincc(input, other, *, out=None):
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P(input, other)."""
    return _incomplete_gamma("gammaincc", input, other, out, True)


class _Zeta(Function):
    """zeta: d/dq = -x zeta(x + 1, q); PyTorch has no derivative in x (backward raises as PyTorch's)."""

    @staticmethod
    def forward(ctx, x, q):
        ctx.save_for_backward(x, q)
        return _wide(_zeta, x, q)

    @staticmethod
    def backward(ctx, g):
        x, q = ctx._unpacked
        if ctx.needs_input_grad[0]:
            raise NotImplementedError("the derivative for 'zeta' is not implemented (PyTorch has none in x, the "
                                      "first argument)")
        gq = None
        if ctx.needs_input_grad[1]:
            gq = _F.sum_to(g * (-x.detach() * _wide(_zeta, x + 1.0, q)), q.shape)
        return None, gq


def zeta(input, other, *, out=None):
    """The Hurwitz zeta function sum_k (other + k)^-input; either may be a number."""
    _need_number_or_tensor("zeta", input, other)
    x, q = _operands("zeta", input, other)
    result = _Zeta.apply(x, q) if needs_grad(x, q) else _wide(_zeta, x, q)
    return _finish("zeta", result, out)


# ---- orthogonal polynomials --------------------------------------------------------------------------------------
def _poly_operands(name, x, n):
    """(x, n) as tensors of the float result dtype (PyTorch's: n's dtype takes part), n truncated to an integer."""
    _need_number_or_tensor(name, x, n, ("x", "n"))
    x, m = _operands(name, x, n, ("x", "n"))
    return x.detach(), m.detach().trunc()


def _chebyshev(kind, shifted):
    label = ("shifted_" if shifted else "") + "chebyshev_polynomial_" + kind

    def fn(x, n, *, out=None):
        x, m = _poly_operands(label, x, n)
        if shifted:
            x = 2.0 * x - 1.0
        value = _recurrence(x, m, _CHEBYSHEV_FIRST[kind], lambda k, x, p, q: 2.0 * x * p - q)
        inside = (x.abs() < 1.0) & (m > 6.0)
        value = _where(inside, _trig_chebyshev(kind, x, m), value)
        return _finish(label, value, out)
    fn.__name__ = fn.__qualname__ = label
    fn.__doc__ = (f"The {'shifted ' if shifted else ''}Chebyshev polynomial of the {kind.upper()} kind of degree n "
                  f"at x{' (at 2x - 1)' if shifted else ''}; 0 for negative n. No gradient (PyTorch has "
                  f"none).")
    return fn


chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v, chebyshev_polynomial_w = (
    _chebyshev(k, False) for k in "tuvw")
(shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u, shifted_chebyshev_polynomial_v,
 shifted_chebyshev_polynomial_w) = (_chebyshev(k, True) for k in "tuvw")


def _polynomial(label, first, step, doc):
    def fn(x, n, *, out=None):
        x, m = _poly_operands(label, x, n)
        return _finish(label, _recurrence(x, m, first, step), out)
    fn.__name__ = fn.__qualname__ = label
    fn.__doc__ = doc + " of degree n at x; 0 for negative n. No gradient (PyTorch has none)."
    return fn


hermite_polynomial_h = _polynomial("hermite_polynomial_h", lambda x: 2.0 * x,
                                   lambda k, x, p, q: 2.0 * x * p - (2.0 * k) * q, "The physicists' Hermite polynomial")
hermite_polynomial_he = _polynomial("hermite_polynomial_he", lambda x: x, lambda k, x, p, q: x * p - float(k) * q,
                                    "The probabilists' Hermite polynomial")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", lambda x: 1.0 - x,
                                    lambda k, x, p, q: ((2.0 * k + 1.0 - x) * p - float(k) * q) / (k + 1.0),
                                    "The Laguerre polynomial")
legendre_polynomial_p = _polynomial("legendre_polynomial_p", lambda x: x,
                                    lambda k, x, p, q: ((2.0 * k + 1.0) * x * p - float(k) * q) / (k + 1.0),
                                    "The Legendre polynomial")


# ---- Bessel functions and airy_ai ------------------------------------------------------------------------------
_j0_m = _S._pointwise("bessel_j0", lambda x: _bessel_jy(x)[0], lambda x: -_bessel_jy(x)[1], wide=True,
                      graph_slope=lambda x: -_j1_m(x))
_j1_m = _S._pointwise("bessel_j1", lambda x: _bessel_jy(x)[1], _j1_slope, wide=True,
                      graph_slope=lambda x: _where0(x, 0.5, lambda x, s: _j0_m(x) - _j1_m(x) / s))
_y0_m = _S._pointwise("bessel_y0", lambda x: _bessel_jy(x)[2], lambda x: -_bessel_jy(x)[3], wide=True,
                      graph_slope=lambda x: -_y1_m(x))
_y1_m = _S._pointwise("bessel_y1", lambda x: _bessel_jy(x)[3], _y1_slope, wide=True,
                      graph_slope=lambda x: _y0_m(x) - _y1_m(x) / x)
_k0_m = _S._pointwise("modified_bessel_k0", lambda x: _bessel_k(0, x), lambda x: -_bessel_k(1, x), wide=True,
                      graph_slope=lambda x: -_k1_m(x))
_k1_m = _S._pointwise("modified_bessel_k1", lambda x: _bessel_k(1, x),
                      lambda x: -_bessel_k(0, x) - _bessel_k(1, x) / x, wide=True,
                      graph_slope=lambda x: -_k0_m(x) - _k1_m(x) / x)


def _no_grad_unary(name, value, doc):
    """special.name(x, *, out=None) (PyTorch names the argument x for these), which PyTorch does not differentiate:
    its result needs no gradient."""
    def fn(x, *, out=None):
        _need_tensor(name, x, "x")
        return _finish(name, _S._evaluate(x.detach(), value, wide=True), out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + " No gradient (PyTorch has none)."
    return fn


bessel_j0 = _unary("bessel_j0", _j0_m, "The Bessel function of the first kind of order 0.")
bessel_j1 = _unary("bessel_j1", _j1_m, "The Bessel function of the first kind of order 1.")
bessel_y0 = _unary("bessel_y0", _y0_m, "The Bessel function of the second kind of order 0 (NaN for input < 0).")
bessel_y1 = _unary("bessel_y1", _y1_m, "The Bessel function of the second kind of order 1 (NaN for input < 0).")
modified_bessel_k0 = _unary("modified_bessel_k0", _k0_m, "The modified Bessel function of the second kind, order 0.")
modified_bessel_k1 = _unary("modified_bessel_k1", _k1_m, "The modified Bessel function of the second kind, order 1.")
scaled_modified_bessel_k0 = _no_grad_unary("scaled_modified_bessel_k0", lambda x: _bessel_k_scaled(0, x),
                                           "exp(x) K_0(x).")
scaled_modified_bessel_k1 = _no_grad_unary("scaled_modified_bessel_k1", lambda x: _bessel_k_scaled(1, x),
                                           "exp(x) K_1(x).")
spherical_bessel_j0 = _no_grad_unary(
    "spherical_bessel_j0", lambda x: _where(x.abs() == _INF, 0.0, _over_x(x.sin(), x, 1.0)), "sin(x) / x.")
airy_ai = _no_grad_unary("airy_ai", _airy_ai, "The Airy function Ai.")
