"""create_graph formulas (graph_backward.py explains them) for the tensor ops beyond the basic arithmetic: the math
library's functions (sin, cos, erf, log1p ...: SIREN and physics-informed networks differentiate them twice),
var / std (a minibatch standard deviation under an R1 penalty), prod, max / min in their three forms, index
assignment, scatter / scatter_add / index_add / index_copy (a GNN under a gradient penalty), atan2, fmod and
remainder, the roundings, masked_fill_, prelu, and the ops that are linear in their input (cumsum, unfold,
diagonal, diag_embed, advanced indices), whose backward is recorded as one node with the op's adjoint."""
import math

from .. import _C
from . import functions as fn
from .activation import _PReLU
from .autograd import register_graph_backward as register
from .graph_backward import (_operand, _unreduce, binary_grads, linear_op, not_recorded, record, saved_input,
                             saved_output, sum_to, where)
from .indexing import IndexFn, IndexPutFn, _StridedPut, _StridedView, put_plan
from .indexing_multi import _Gather, _merged
from .tensor_compose import _Cumsum, _DiagEmbed, _Diagonal, _diag_embed, _diagonal_geometry, _scan
from .tensor_math import (ACOS, ASIN, ATAN, COS, COSH, ERF, ERFC, EXPM1, LOG1P, LOG2, LOG10, SIN, SINH, TAN,
                          _FROM_OUTPUT, Atan2, DivFloor, Fmod, _Math)
from .tensor_methods import _InplaceMaskedFill, _Prod, _Rounding
from .tensor_select import _IndexPut, _Scatter, _scatter_into
from .tensor_special import _CopySign, _NanIgnoring, _Unary, _pick
from .tensor_more import _Hypot, _MedianAll, _WindowsView, _XLogY, _windows_geometry
from .tensor_misc_values import _EmbedInto


# ---- the math library's functions --------------------------------------------------------------------------------
def _math_derivative(op, s):
    """tensor_math._derivative written with recorded ops: dy/dx at s (the linked output for the ops in
    _FROM_OUTPUT, the linked input for the rest)."""
    if op == SIN:
        return s.cos()
    if op == COS:
        return -s.sin()
    if op == TAN:
        return s * s + 1.0
    if op in (ASIN, ACOS):
        return (1.0 - s * s).rsqrt() * (1.0 if op == ASIN else -1.0)
    if op == ATAN:
        return 1.0 / (s * s + 1.0)
    if op == SINH:
        return s.cosh()
    if op == COSH:
        return s.sinh()
    if op in (ERF, ERFC):
        return (-(s * s)).exp() * (2.0 / math.sqrt(math.pi) * (1.0 if op == ERF else -1.0))
    if op == LOG1P:
        return 1.0 / (s + 1.0)
    if op == EXPM1:
        return s + 1.0
    if op in (LOG2, LOG10):
        return (1.0 / math.log(2.0 if op == LOG2 else 10.0)) / s
    return s * math.log(2.0)  # EXP2


def _math(ctx, g):
    s, = ctx._unpacked
    s = saved_output(ctx, s) if ctx.op in _FROM_OUTPUT else saved_input(ctx, 0, s)
    return g * _math_derivative(ctx.op, s), None


register(_Math, _math)


def _unary(ctx, g):
    """tensor_special's functions (acosh, sinc, lgamma, digamma, polygamma, erfinv ...): g times the derivative's
    recorded form (computed in float64 where the values are)."""
    s, = ctx._unpacked
    s = saved_output(ctx, s) if ctx.of_output else saved_input(ctx, 0, s)
    work = s.double() if ctx.slope.wide and s._dtype != 1 else s
    d = ctx.slope.graph(work)
    if d is None:
        raise not_recorded(ctx)
    return g * (d.to(s.dtype) if d._dtype != s._dtype else d), None, None, None


register(_Unary, _unary)


def _xlogy(ctx, g):
    """xlogy's gradients (tensor_more._XLogY) with recorded ops: log(y), 0 where x and y are both 0; x / y."""
    x, y = ctx._unpacked
    xl = saved_input(ctx, 0, x)
    yl = saved_input(ctx, 1, y) if y is not None else ctx.number
    gx = gy = None
    if ctx.needs_input_grad[0]:
        logy = yl.log() if y is not None else math.log(yl) if yl > 0 else -math.inf if yl == 0 else math.nan
        zero = _C.binary(fn.MUL, _C.binary(fn.EQ, x, 0.0), _C.binary(fn.EQ, y, 0.0) if y is not None else
                         float(yl == 0))
        gx = sum_to(where(zero, 0.0, g * logy), x.shape, x._dtype)
    if y is not None and ctx.needs_input_grad[1]:
        gy = sum_to(g * xl / yl, y.shape, y._dtype)
    return gx, gy


register(_XLogY, _xlogy)


# ---- reductions ----------------------------------------------------------------------------------------------------
def _var(ctx, g):
    a, = ctx._unpacked
    n = 1
    for d in ctx.dims:
        n *= a.shape[d] if a.ndim else 1
    scale = 2.0 / (n - ctx.correction) if n - ctx.correction > 0 else math.nan
    a = saved_input(ctx, 0, a)
    centred = a - a.mean(ctx.dims, keepdim=True)
    return _unreduce(g, a.shape, ctx.dims, ctx.keepdim) * scale * centred, None, None, None


def _amax_min(ctx, g):
    """The gradient shared among the elements equal to the result: a constant share of g (the ties do not move
    for a small change of the input)."""
    a, out = ctx._unpacked
    mask = fn.cast(_C.binary(fn.EQ, a, fn._unreduce(out, a.shape, ctx.dims, ctx.keepdim)), a._dtype)
    share = _C.binary(fn.DIV, mask, _C.reduce(fn.SUM, mask, ctx.dims, True))
    return _unreduce(g, a.shape, ctx.dims, ctx.keepdim) * share, None, None, None


def _max_min_dim(ctx, g, g_indices=None):
    indices, = ctx._unpacked
    shape = ctx.shape
    if not shape:
        return g, None, None, None
    idx = fn._unreduce(indices, shape, (ctx.dim,), ctx.keepdim)
    pos_shape = [1] * len(shape)
    pos_shape[ctx.dim] = shape[ctx.dim]
    pos = _C.arange(0, shape[ctx.dim], 1, 4, g._device)._view(tuple(pos_shape))
    return where(_C.binary(fn.EQ, pos, idx), _unreduce(g, shape, (ctx.dim,), ctx.keepdim), 0.0), None, None, None


def _prod(ctx, g):
    """d prod / d x_i = prod / x_i where no entry is 0. With zeros the derivative is a product of the others, whose
    own derivative this form does not give: refused there."""
    x, out = ctx._unpacked
    if bool(_C.binary(fn.EQ, x, 0.0).any()):
        raise not_recorded(ctx, "an input holding zeros")
    dims = fn._norm_dims(ctx.dims, x.ndim)
    out = _unreduce(saved_output(ctx, out), x.shape, dims, ctx.keepdim)
    d = _unreduce(g, x.shape, dims, ctx.keepdim) * out / saved_input(ctx, 0, x)
    return (record(fn.ToDtype, d, x._dtype) if d._dtype != x._dtype else d), None, None


def _index_put(ctx, g):
    """a[plan] = value: a's gradient is g with the assigned entries zeroed (a constant mask), value's is g at
    them, summed to value's shape."""
    if not g.requires_grad:
        return IndexPutFn.backward(ctx, g)
    ga = gv = None
    if ctx.needs_input_grad[0]:
        keep = _C.fill_(_C.empty(tuple(g.shape), g._dtype, g._device), 1.0)
        put_plan(keep, ctx.plan, 0.0)
        ga = g * keep
    if ctx.value_meta is not None and ctx.needs_input_grad[1]:
        gv = sum_to(IndexFn.apply(g, ctx.plan), *ctx.value_meta)
    return ga, gv, None


def _kept(g, put):
    """A constant mask: ones, zero where an overwriting write (scatter_, index_copy_) put its values."""
    keep = _C.fill_(_C.empty(tuple(g.shape), g._dtype, g._device), 1.0)
    put(keep)
    return keep


def _scatter(ctx, g):
    """scatter / scatter_add: x's gradient is g (zero where scatter_ overwrote), src's is g gathered at index."""
    index, = ctx._unpacked
    gx = gs = None
    if ctx.needs_input_grad[0]:
        gx = g if ctx.accumulate else g * _kept(g, lambda k: _scatter_into(k, ctx.d, index, 0.0, False))
    if ctx.src_meta is not None and ctx.needs_input_grad[3]:
        if tuple(index.shape) != ctx.src_meta[0]:
            raise not_recorded(ctx, "a source larger than its index")
        gs = g.gather(ctx.d, index)
    return gx, None, None, gs, None


def _index_put_along(ctx, g):
    """index_add / index_copy along a dim: x's gradient is g (zero at the copied slices), source's is g's
    slices at index (times alpha)."""
    index, = ctx._unpacked
    gx = gs = None
    if ctx.needs_input_grad[0]:
        gx = g if ctx.accumulate else g * _kept(g, lambda k: _C.index_put_(k, ctx.d, index, 0.0, False))
    if ctx.needs_input_grad[3]:
        gs = g.index_select(ctx.d, index)
        if ctx.alpha != 1:
            gs = gs * ctx.alpha
    return gx, None, None, gs, None, None


def _strided_put(ctx, g):
    """An in-place write through any view of a tensor in a graph (y.view(-1).fill_(v), y.t().mul_(s)): the base's
    gradient is g with the written elements zeroed, the value's is g at them (as_strided of a fresh copy of g, whose
    layout is the base's), summed to its shape."""
    shape, strides, offset = ctx.geometry
    need = ctx.needs_input_grad
    gb = g * _kept(g, lambda k: _C.fill_(k._as_strided(shape, strides, offset), 0.0)) if need[0] else None
    gv = None
    if ctx.value_meta is not None and need[1]:
        gv = sum_to(g.contiguous().clone().as_strided(shape, strides, offset), *ctx.value_meta)
    return gb, gv, None


def _strided_view(ctx, g):
    """A view re-derived after an in-place write (a gradient penalty through `x.view(...)` then ReLU(inplace)):
    its gradient placed into zeros of the base, recorded as a _StridedPut into a constant; a broadcast dim's
    gradient summed first, as in _StridedView.backward."""
    if not g.requires_grad:
        return _StridedView.backward(ctx, g)
    shape, dt, dev, (vshape, strides, offset) = ctx.meta
    wide = tuple(d for d, st in enumerate(strides) if st == 0 and vshape[d] > 1)
    if wide:
        g = g.sum(wide, keepdim=True)
        vshape = tuple(1 if d in wide else n for d, n in enumerate(vshape))
    zeros = _C.fill_(_C.empty(shape, dt, dev), 0.0)
    return _StridedPut.apply(zeros, g, (vshape, strides, offset)), None


register(_Scatter, _scatter)
register(_StridedPut, _strided_put)
register(_StridedView, _strided_view)
register(_IndexPut, _index_put_along)
register(_Prod, _prod)
register(IndexPutFn, _index_put)
register(fn.Var, _var)
register(fn.AMaxMin, _amax_min)
register(fn.MaxMinDim, _max_min_dim)


# ---- binary ops beyond the arithmetic ------------------------------------------------------------------------------
def _atan2(ctx, g):
    s = ctx._unpacked
    a, b = _operand(ctx, s, 0), _operand(ctx, s, 1)
    scale = g / (a * a + b * b)
    need = ctx.needs_input_grad
    return binary_grads(ctx, scale * b if need[0] else None, -(scale * a) if need[1] else None)


def _fmod(ctx, g):
    """d/da = 1, d/db = -quotient(a, b) (trunc or floor division): a step function of the operands, a constant
    here."""
    gb = None
    if ctx.needs_input_grad[1]:
        s = ctx._unpacked
        raw = [s[i] if s[i] is not None else ctx._input_number(i) for i in (0, 1)]
        gb = -(g * type(ctx).quotient(*raw))
    return binary_grads(ctx, g, gb)


def _div_floor(ctx, g):
    """div(rounding_mode='floor'): zero for both operands, as its first derivative."""
    zero = g.new_zeros(g.shape)
    return binary_grads(ctx, zero, zero)


def _hypot(ctx, g):
    a, b, r = ctx._unpacked
    r, need = saved_output(ctx, r), ctx.needs_input_grad
    return (sum_to(g * saved_input(ctx, 0, a) / r, a.shape) if need[0] else None,
            sum_to(g * saved_input(ctx, 1, b) / r, b.shape) if need[1] else None)


def _nan_ignoring(ctx, g):
    """fmax / fmin: g to the operand taken (half to each on ties), a constant choice."""
    a, b = ctx._unpacked
    share = _C.where(_C.binary(fn.EQ, a, b), 0.5, fn.cast(_pick(a, b, ctx.op)[1], g._dtype))
    need = ctx.needs_input_grad
    return (sum_to(g * share, a.shape) if need[0] else None,
            sum_to(g * (1.0 - share), b.shape) if need[1] else None, None)


def _copysign(ctx, g):
    """copysign: d/da = result / a (0 where a is 0), read from the linked result as PyTorch's formula reads it (so
    b is in the gradient's graph, with a zero derivative); b's gradient is zero."""
    a, out = ctx._unpacked
    ratio = where(_C.binary(fn.EQ, a, 0), 0.0, saved_output(ctx, out) / saved_input(ctx, 0, a))
    gb = g.new_zeros(ctx.b_meta[0]) if ctx.needs_input_grad[1] else None
    return (sum_to(g * ratio, a.shape, a._dtype) if ctx.needs_input_grad[0] else None), gb


register(Atan2, _atan2)
register(_Hypot, _hypot)
register(_NanIgnoring, _nan_ignoring)
register(_CopySign, _copysign)
register(Fmod, _fmod)  # and Remainder, its subclass
register(DivFloor, _div_floor)


# ---- pointwise ops with a piecewise derivative ---------------------------------------------------------------------
def _prelu(ctx, g):
    x, w = ctx._unpacked
    need = ctx.needs_input_grad
    positive = _C.binary(fn.GT, x, 0.0)
    if w.numel() == 1:
        wshape = (1,) * x.ndim  # (a 0-d x: a 0-d weight, so the gradient keeps x's shape)
    else:  # one weight per channel: dim 1 (dim 0 of a vector)
        wshape = (1, w.numel()) + (1,) * (x.ndim - 2) if x.ndim >= 2 else (w.numel(),)
    dx = where(positive, g, g * saved_input(ctx, 1, w).reshape(wshape)) if need[0] else None
    dw = None
    if need[1]:
        gx = where(positive, 0.0, g * saved_input(ctx, 0, x))
        dims = tuple(d for d in range(x.ndim) if wshape[d] == 1)
        dw = (gx.sum(dims) if dims else gx).reshape(tuple(w.shape))
    return dx, dw


register(_PReLU, _prelu)
register(_Rounding, lambda ctx, g: (g * 0.0, None))
register(_MedianAll, lambda ctx, g: (g * _C.binary(fn.DIV, ctx._unpacked[0], _C.reduce(fn.SUM, ctx._unpacked[0],
                                                                                       None, False)), None))
register(_InplaceMaskedFill, lambda ctx, g: (where(ctx._unpacked[0], 0.0, g), None, None))


# ---- ops linear in their input: the backward as one node whose own backward is the op ------------------------------
def _diagonal_of(h, offset, d1, d2):
    return h._as_strided(*_diagonal_geometry(h.shape, h._strides, h._offset, offset, d1, d2))


register(_Gather, linear_op(lambda ctx, g: lambda h: _C.index(h, 0, _merged(ctx.pos, ctx.sizes).reshape(-1))))
register(_Cumsum, linear_op(lambda ctx, g: lambda h: _scan(h, ctx.d, fn.ADD)))
register(_WindowsView, linear_op(lambda ctx, g: lambda h: h._as_strided(
    *_windows_geometry(h.shape, h._strides, h._offset, *ctx.args[3:]))))
register(_Diagonal, linear_op(lambda ctx, g: lambda h: _diagonal_of(h, *ctx.args[3:])))
register(_EmbedInto, lambda ctx, g: (
    g * _kept(g, lambda k: _C.fill_(ctx.region(k), 0)) if ctx.needs_input_grad[0] else None,
    ctx.region(g).contiguous() if ctx.needs_input_grad[1] else None, None))
register(_DiagEmbed, linear_op(lambda ctx, g: lambda h: _diag_embed(h, ctx.offset)))
