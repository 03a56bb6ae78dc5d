"""Gradients of gradients through the layers' ops (_core/graph_backward.py explains the mechanism): linear, conv2d,
conv_transpose2d, the normalizations (batch, group, layer, instance), the pools, padding, interpolation, dropout,
embedding, and the losses (mse, l1, smooth_l1, huber, binary cross-entropy with and without logits, kl_div,
cross-entropy, nll): the ops of a WGAN-GP critic, an R1 penalty or a MAML step on a conv-4 network.

conv2d's input and weight gradients are themselves convolutions (the transposed one, and the correlation of the
input with the gradient), recorded here as two nodes whose own backward is again those raw kernels;
conv_transpose2d's are a conv2d and the same weight correlation with the roles of input and gradient swapped.
The ops that are linear in their input (pools, padding, interpolation, dropout's mask, embedding, nll_loss) have a
backward B that is linear in the gradient and depends on nothing else that is differentiated: B is recorded as one
node whose backward is B's adjoint, the op's forward itself. Both give one more order (a penalty on a gradient),
not third derivatives. The normalizations' input gradients are written out with recorded ops, their statistics
recomputed from the linked input so that their own dependence on it is differentiated too."""
import struct

from .. import _C
from .._core import functions as fn
from .._core.activation import _Softmax
from .._core.autograd import Function, no_grad, register_graph_backward as register
from .._core.creation import arange
from .._core.graph_backward import linear_op, not_recorded, record, saved_input, sum_to, where, zero_link
from ._functional_conv import _Conv2d, _ConvTranspose2d, _Linear, conv2d
from ._functional_layers import _Embedding, _Pad
from ._functional_nn import (BCE, HUBER, L1, MSE, SMOOTH_L1, _BatchNorm, _BceWithLogits, _CrossEntropy, _Dropout,
                             _NllLoss, _PointwiseLoss)
from ._functional_norm import _GroupNorm
from ._functional_pool import (_AdaptiveAvgPool2d, _AvgPool2d, _GlobalAvgPool2d, _GlobalMaxPool2d, _Interpolate,
                               _MaxPool2d)
from ._functional_pool1d import _AdaptiveMaxPool2d

_INPUT, _WEIGHT = (True, False, False), (False, True, False)
_BCE_EPS = struct.unpack("f", struct.pack("f", 1e-12))[0]  # kernels/loss_ops.h's LOSS_BCE_EPS, (double)1e-12f


def _conv_input_grad(g, w, args, shapes):
    return _C.conv2d_backward(g, None, w, *args, _INPUT, *shapes)[0]


def _conv_weight_grad(g, x, args, shapes):
    return _C.conv2d_backward(g, x, None, *args, _WEIGHT, *shapes)[1]


class ConvInputGrad(Function):
    """conv2d's input gradient from the output gradient g and the weight w, as a node."""

    @staticmethod
    def forward(ctx, g, w, args, shapes):
        if ctx.needs_input_grad:
            ctx.save_for_backward(g, w)
            ctx.args, ctx.shapes = args, shapes
        return _conv_input_grad(g, w, args, shapes)

    @staticmethod
    def backward(ctx, h):
        g, w = ctx._unpacked
        dg = _C.conv2d(h, w, None, *ctx.args) if ctx.needs_input_grad[0] else None
        dw = _conv_weight_grad(g, h, ctx.args, ctx.shapes) if ctx.needs_input_grad[1] else None
        return dg, dw, None, None


class ConvWeightGrad(Function):
    """conv2d's weight gradient from the input x and the output gradient g, as a node."""

    @staticmethod
    def forward(ctx, x, g, args, shapes):
        if ctx.needs_input_grad:
            ctx.save_for_backward(x, g)
            ctx.args, ctx.shapes = args, shapes
        return _conv_weight_grad(g, x, args, shapes)

    @staticmethod
    def backward(ctx, h):
        x, g = ctx._unpacked
        dx = _conv_input_grad(g, h, ctx.args, ctx.shapes) if ctx.needs_input_grad[0] else None
        dg = _C.conv2d(x, h, None, *ctx.args) if ctx.needs_input_grad[1] else None
        return dx, dg, None, None


def _conv2d(ctx, g):
    if ctx.__dict__.get("wf32") or ctx.__dict__.get("w_dtype") is not None:
        raise not_recorded(ctx, "autocast's mixed dtypes")
    x, w = ctx._unpacked
    need = ctx.needs_input_grad
    if ctx.unbatched:  # the forward saved the input with a batch dim added: linked as the input was, then added
        g = g.unsqueeze(0)
        x = None if x is None else saved_input(ctx, 0, x._squeeze(0)).unsqueeze(0)
    else:
        x = saved_input(ctx, 0, x)
    dx = ConvInputGrad.apply(g, saved_input(ctx, 1, w), ctx.args, ctx.shapes) if need[0] else None
    if dx is not None and ctx.unbatched:
        dx = dx.squeeze(0)
    dw = ConvWeightGrad.apply(x, g, ctx.args, ctx.shapes) if need[1] else None
    db = g.sum((0, 2, 3)) if need[2] else None
    return (dx, dw, db) + (None,) * len(ctx.args)


def _conv_transpose2d(ctx, g):
    """y = conv_transpose2d(x, w) is conv2d's input gradient for the output gradient x: y's gradient h goes back to
    x as conv2d(h, w), and to w as conv2d's weight gradient of the input h and the output gradient x."""
    if ctx.__dict__.get("w_dtype") is not None:
        raise not_recorded(ctx, "autocast's mixed dtypes")
    x, w = ctx._unpacked
    need = ctx.needs_input_grad
    stride, padding, _, groups, dilation = ctx.args
    if ctx.unbatched:
        g = g.unsqueeze(0)
        x = None if x is None else saved_input(ctx, 0, x._squeeze(0)).unsqueeze(0)
    else:
        x = saved_input(ctx, 0, x)
    dx = conv2d(g, saved_input(ctx, 1, w), None, stride, padding, dilation, groups) if need[0] else None
    if dx is not None and ctx.unbatched:
        dx = dx.squeeze(0)
    args = (stride, padding, dilation, groups)
    dw = ConvWeightGrad.apply(g, x, args, (tuple(g.shape), ctx.shapes[1])) if need[1] else None
    db = g.sum((0, 2, 3)) if need[2] else None
    return (dx, dw, db) + (None,) * len(ctx.args)


def _linear(ctx, g):
    x, w = ctx._unpacked
    need = ctx.needs_input_grad
    x_shape, w_shape = ctx.shapes
    g2 = g.reshape(-1, w_shape[0])
    dx = (g @ saved_input(ctx, 1, w)).reshape(tuple(x_shape)) if need[0] else None
    dw = g2.transpose(0, 1) @ saved_input(ctx, 0, x).reshape(-1, w_shape[1]) if need[1] else None
    db = g2.sum(0) if need[2] else None
    return dx, dw, db


def _pointwise_derivatives(op, x, t, xl, tl, param):
    """d loss / dx and d loss / dt (kernels/loss_ops.h's pointwise_loss_grads) written with recorded ops on the
    linked input xl and target tl; the region masks come from the raw x and t, as in PyTorch's formulas."""
    d = _C.binary(fn.SUB, x, t)
    if op == MSE:
        gx = (xl - tl) * 2.0
        return gx, -gx
    if op in (L1, SMOOTH_L1, HUBER):
        sign = _C.unary(fn.SIGN, d)
        if op == L1 or op == SMOOTH_L1 and param == 0:  # (smooth_l1 with beta 0 is l1: no inside region)
            return sign, _C.unary(fn.NEG, sign)
        inside = _C.binary(fn.LT, _C.unary(fn.ABS, d), param)
        gx = where(inside, (xl - tl) * (1.0 / param if op == SMOOTH_L1 else 1.0),
                   _C.binary(fn.MUL, sign, 1.0 if op == SMOOTH_L1 else param))
        return gx, -gx
    if op == BCE:  # the logs clamped at -100 and the denominator at 1e-12, as the forward and PyTorch's
        gx = (xl - tl) / ((1.0 - xl) * xl).clamp(min=_BCE_EPS)
        return gx, (1.0 - xl).log().clamp(min=-100.0) - xl.log().clamp(min=-100.0)
    if param:  # kl_div with log_target
        e = tl.exp()
        return -e, e * (tl - xl + 1.0)
    return -tl, where(_C.binary(fn.GT, t, 0.0), tl.log() + 1.0 - xl, 0.0)  # kl_div


def _pointwise_loss(ctx, g):
    x, t = ctx._unpacked
    gx, gt = _pointwise_derivatives(ctx.op, x, t, saved_input(ctx, 0, x), saved_input(ctx, 1, t), ctx.param)
    g = g * (1.0 / max(x.numel(), 1)) if ctx.reduction == 1 else g  # (no entries: no gradient)
    need = ctx.needs_input_grad
    dx = zero_link(sum_to(gx * g, x.shape), ctx, 0) if need[0] else None  # l1's sign: linked as PyTorch's abs
    dt = zero_link(sum_to(gt * g, t.shape), ctx, 1) if need[1] else None
    return dx, dt, None, None, None


def _cross_entropy(ctx, g):
    """The ordinary backward's value, plus c * (softmax(x) - its value) * g: only softmax(x) depends on x, and c,
    its coefficient in each sample's gradient, is the sample's weight over the mean's denominator (with weights and
    label smoothing: (1 - e) w[target] + e/C sum(w), the smoothing term weighting every class)."""
    x, target, weight, lse = ctx._unpacked
    if target.is_floating_point():
        raise not_recorded(ctx, "class probabilities as the target")
    ignore_index, reduction, smoothing, wsum = ctx.args
    dim = 1 if x.ndim >= 2 else 0
    ones = _C.fill_(_C.empty(tuple(g.shape), g._dtype, g._device), 1.0)
    plain = _C.cross_entropy_backward(ones, x, target, weight, lse, *ctx.args)
    with no_grad():
        keep = target != ignore_index
        c = keep.to(x.dtype)
        if weight is not None:  # the target's weight, and smoothing's share of every class's
            c = c * (weight[target.where(keep, 0)] * (1.0 - smoothing) + weight.sum() * (smoothing / x.shape[dim]))
        if reduction == 1:
            c = c / wsum
        if dim == 1:
            c = c.unsqueeze(1)
    p = record(_Softmax, saved_input(ctx, 0, x), dim, False)
    p_value = _C.softmax(x, dim, False)
    d = (p - p_value) * c + plain
    if reduction == 0 and dim == 1:
        g = g.unsqueeze(1)
    return d * g, None, None, None, None, None


def _bce_with_logits(ctx, g):
    """d/dx of w [(1 - y) x + (1 + (p - 1) y) softplus(-x)] is w [(1 + (p - 1) y) sigmoid(x) - p y]."""
    x, y, w, p = ctx._unpacked
    if ctx.needs_input_grad[1]:
        raise not_recorded(ctx, "a target that requires grad")
    coef, py = (1.0, y) if p is None else (y * (p - 1.0) + 1.0, y * p)
    d = saved_input(ctx, 0, x).sigmoid() * coef - py
    if w is not None:
        d = d * w
    if ctx.reduction == 1:
        d = d / x.numel()
    return d * g, None, None, None, None


def _embedding_adjoint(ctx, g):
    indices, = ctx._unpacked
    padding_idx = ctx.meta[3]

    def adjoint(h):  # the rows the indices read, the padding row (whose gradient is dropped) read as zeros
        if padding_idx is not None:
            h = h.clone()
            _C.fill_(h._select(0, padding_idx), 0.0)
        return _C.index(h, 0, indices)
    return adjoint


# ---- normalizations --------------------------------------------------------------------------------------------
def _normalized_grad(g, xhat, r, dims):
    """The input gradient of xhat = (x - mean) * r over `dims` (r = 1/sqrt(var + eps)) for the gradient g of xhat."""
    return r * (g - g.mean(dims, keepdim=True) - xhat * (g * xhat).mean(dims, keepdim=True))


def _standardized(x, dims, eps):
    """(xhat, r) of x over dims, with recorded ops: the statistics' dependence on x is part of the graph."""
    xc = x - x.mean(dims, keepdim=True)
    r = ((xc * xc).mean(dims, keepdim=True) + eps) ** -0.5
    return xc * r, r


def _channel_dims(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2), (0,) + tuple(range(2, x.ndim))


def _group_norm(ctx, g, *unused):
    x, weight, _, _ = ctx._unpacked
    need_x, need_w, need_b = ctx.needs
    cshape, other = _channel_dims(x)
    groups = (x.shape[0], ctx.num_groups, -1)
    xhat, r = _standardized(saved_input(ctx, 0, x).reshape(groups), 2, ctx.eps)
    dx = None
    if need_x:
        gw = g * saved_input(ctx, 2, weight).reshape(cshape) if weight is not None else g
        dx = _normalized_grad(gw.reshape(groups), xhat, r, 2).reshape(tuple(x.shape))
    xhat = xhat.reshape(tuple(x.shape))
    return dx, None, ((g * xhat).sum(other) if need_w else None), (g.sum(other) if need_b else None), None


def _batch_norm(ctx, g):
    x, weight, mean, invstd = ctx._unpacked
    need_x, need_w, need_b = ctx.needs
    cshape, other = _channel_dims(g)
    w = saved_input(ctx, 3, weight).reshape(cshape) if weight is not None else None
    dx = xhat = None
    if ctx.training:
        xhat, r = _standardized(saved_input(ctx, 0, x), other, ctx.eps)
        if need_x:
            dx = _normalized_grad(g * w if w is not None else g, xhat, r, other)
    else:  # the running statistics: constants
        invstd = invstd.reshape(cshape)
        if x is not None:
            xhat = (saved_input(ctx, 0, x) - mean.reshape(cshape)) * invstd
        if need_x:
            dx = (g * w if w is not None else g) * invstd
    dw = (g * xhat).sum(other) if need_w else None
    return dx, None, None, dw, (g.sum(other) if need_b else None), None, None, None


# ---- ops linear in their input ---------------------------------------------------------------------------------
def _gather_planes(h, idx):
    """h (N, C, H, W) read at flat plane positions idx (N, C, *) (-1: no element, read as 0)."""
    n, c = h.shape[0], h.shape[1]
    flat = h.reshape(n, c, -1)
    valid = idx >= 0
    got = flat.gather(2, idx.clamp(min=0).reshape(n, c, -1)).reshape(tuple(idx.shape))
    return got * valid.to(h.dtype)


def _max_pool_indices(ctx, g):
    """The flat input position each output of max_pool2d took, from what its forward saved."""
    saved, = ctx._unpacked
    kernel, stride, padding, dilation = ctx.window
    if saved.is_floating_point():  # the input itself
        return _C.max_pool2d(saved, kernel, stride, padding, dilation, ctx.ceil_mode, True)[1]
    if saved.dtype.itemsize == 8:
        return saved
    # int8: the tap of the window (kh * kernel_w + kw); its input position follows from the window's geometry
    taps = saved.long()
    oh = arange(taps.shape[-2], device=taps.device).reshape(-1, 1)
    ow = arange(taps.shape[-1], device=taps.device).reshape(1, -1)
    ih = oh * stride[0] - padding[0] + (taps // kernel[1]) * dilation[0]
    iw = ow * stride[1] - padding[1] + (taps % kernel[1]) * dilation[1]
    return ih * ctx.in_shape[-1] + iw


def _max_pool_adjoint(ctx, g):
    with no_grad():
        idx = _max_pool_indices(ctx, g)
    unbatched = len(ctx.in_shape) == 3

    def adjoint(h):
        if unbatched:
            return _gather_planes(h.unsqueeze(0), idx.unsqueeze(0)).squeeze(0)
        return _gather_planes(h, idx)
    return adjoint


def _global_max_adjoint(ctx, g):
    idx, = ctx._unpacked
    return lambda h: _gather_planes(h, idx.reshape(tuple(h.shape[:2]) + (1,))).reshape(tuple(h.shape[:2]))


register(_MaxPool2d, linear_op(_max_pool_adjoint, masked=True))
register(_GlobalMaxPool2d, linear_op(_global_max_adjoint, masked=True))
register(_AdaptiveMaxPool2d, linear_op(lambda ctx, g: (lambda idx: lambda h: _gather_planes(h, idx))(
    ctx._unpacked[0]), masked=True))
register(_AvgPool2d, linear_op(lambda ctx, g: lambda h: _C.avg_pool2d(h, *ctx.args), masked=True))
register(_AdaptiveAvgPool2d, linear_op(
    lambda ctx, g: (lambda size: lambda h: _C.adaptive_avg_pool2d(h, size))(tuple(g.shape[-2:])), masked=True))
register(_GlobalAvgPool2d, linear_op(lambda ctx, g: lambda h: _C.reduce(fn.MEAN, h, (-2, -1), False)))
_PAD_ADJOINT = lambda ctx, g: lambda h: _C.pad(h, ctx.pads, ctx.mode, 0.0)  # noqa: E731
_PADS = (linear_op(_PAD_ADJOINT), linear_op(_PAD_ADJOINT, masked=True))
register(_Pad, lambda ctx, g: _PADS[ctx.mode in (1, 2)](ctx, g))  # reflect, replicate: as PyTorch's formulas
register(_Interpolate, linear_op(
    lambda ctx, g: (lambda size: lambda h: _C.interpolate(h, size, *ctx.args))(tuple(g.shape[2:]))))
register(_Dropout, linear_op(lambda ctx, g: (lambda mask, p: lambda h: _C.dropout_backward(h, mask, p, False))(
    ctx._unpacked[0], ctx.p)))
register(_GroupNorm, _group_norm)
register(_BatchNorm, _batch_norm)
register(_Conv2d, _conv2d)
register(_Linear, _linear)
register(_PointwiseLoss, _pointwise_loss)
register(_CrossEntropy, _cross_entropy)
register(_ConvTranspose2d, _conv_transpose2d)
register(_BceWithLogits, _bce_with_logits)
register(_NllLoss, linear_op(lambda ctx, g: (lambda target, weight: lambda h: _C.nll_loss(
    h, target, weight, *ctx.args[:2])[0])(*ctx._unpacked), masked=True))
register(_Embedding, linear_op(_embedding_adjoint))
