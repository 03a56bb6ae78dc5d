"""Gradients of gradients: the backward formulas that backward(create_graph=True) and grad(create_graph=True) run.

A node's ordinary backward computes on raw C ops, which record nothing: it is the fast path that every training
step takes. Under create_graph the engine calls, for each node, the formula registered here instead
(Function.apply_grads): the same derivative written with recorded ops, so the gradients it returns are in a graph
of their own and can be differentiated again (gradient penalties, Hessian-vector products, MAML, physics-informed
losses). A node whose class has no formula raises NotImplementedError naming it.

The saved tensors of the forward are plain aliases with no history; `linked` puts one back in the graph: a saved
input at the edge the node recorded for it (the leaf itself, or the producer's output), a saved output at the node
itself. Masks and other values that do not depend on the inputs smoothly (comparisons, signs) stay raw constants,
as in PyTorch's formulas."""
import math

from .. import _C
from . import functions as fn
from .activation import (ELU, GELU, GELU_TANH, HARDSIGMOID, HARDSWISH, HARDTANH, LEAKY_RELU, MISH, RELU, SIGMOID,
                         SILU, SOFTPLUS, TANH, _UINT8, _Activation, _ActivationInplace, _Softmax, softplus)
from .autograd import AccumulateGrad, Function, register_graph_backward as register
from .indexing import IndexFn, IndexPutFn, SplitFn, apply_plan
from .inplace_binary import _InplaceBinary


def linked(t, edge):
    """A saved tensor t as a tensor of the graph at edge (node, output_nr): a fresh alias of the same memory whose
    gradient flows to that node (a leaf: the leaf itself). t as it is when there is no edge (a constant)."""
    if t is None or edge is None:
        return t
    node, nr = edge
    if type(node) is AccumulateGrad:
        return node.variable
    a = t._view(tuple(t.shape))
    a.requires_grad = True
    a.grad_fn = node
    a._output_nr = nr
    return a


def saved_input(ctx, i, t):
    """Saved tensor t, which is the node's input i, linked to the graph."""
    return linked(t, ctx._edges[i])


def saved_output(ctx, t, nr=0):
    """Saved tensor t, which is the node's own output nr, linked to the graph (at this node)."""
    return linked(t, (ctx, nr))


def sum_to(g, shape, dtype_code=None):
    """fn.sum_to with recorded ops: g summed down to shape (broadcasting undone), cast to dtype_code."""
    shape = tuple(shape)
    if tuple(g.shape) != shape:
        dims = fn.broadcast_dims(tuple(g.shape), shape)
        if dims:
            g = g.sum(dims, keepdim=True)
        g = g.reshape(shape)
    if dtype_code is not None and g._dtype != dtype_code:
        g = record(fn.ToDtype, g, dtype_code)
    return g


class _Scratch:
    """A ctx for a Function's forward when nothing it gets is in a graph (its forward may still note things)."""
    needs_input_grad = ()

    def save_for_backward(self, *tensors):
        pass


def record(cls, *args):
    """cls.apply(*args), or just its forward when no argument requires grad (a constant result)."""
    if any(fn.is_tensor(a) and a.requires_grad for a in args):
        return cls.apply(*args)
    return cls.forward(_Scratch(), *args)


def where(cond, a, b):
    """where with a raw (constant) condition, recorded for a and b."""
    return record(fn.Where, cond, a, b)


class ZeroLink(Function):
    """d as it is, with an edge to `anchor` that passes it a zero gradient. PyTorch's backward formulas of relu,
    leaky_relu, hardtanh, abs, the max / average / reflection-pad ops take the input (or result) they read a mask
    from as an argument whose own derivative is zero: a parameter reached only through such a mask (the bias ahead
    of a LeakyReLU, under an R1 penalty backpropagated alone) gets zeros there, not None, and Adam still moves it."""

    @staticmethod
    def forward(ctx, d, anchor):
        ctx.meta = (tuple(anchor.shape), anchor._dtype, anchor._device)
        return d._view(tuple(d.shape))

    @staticmethod
    def backward(ctx, h):
        shape, dtype, device = ctx.meta
        return h, _C.fill_(_C.empty(shape, dtype, device), 0.0)


def zero_link(d, ctx, i=None):
    """d linked by ZeroLink to the node's input i (None: to the node's own output 0), whose shape d has; d as it is
    when that input is not in a graph. A constant d is linked too: PyTorch's result then requires grad as well."""
    if not fn.is_tensor(d):
        return d
    edge = (ctx, 0) if i is None else ctx._edges[i]
    return ZeroLink.apply(d, linked(d, edge)) if edge is not None else d


class Adjoint(Function):
    """The backward B of a linear op, applied to g, as a node: its own backward is B's adjoint, the op's forward."""

    @staticmethod
    def forward(ctx, g, node, adjoint):
        ctx.adjoint = adjoint
        out = type(node).backward(node, g)
        return out[0] if isinstance(out, tuple) else out

    @staticmethod
    def backward(ctx, h):
        return ctx.adjoint(h), None, None


def linear_op(adjoint_of, masked=False):
    """A formula for an op whose input gradient is linear in g: adjoint_of(ctx, g) gives B's adjoint. masked: B
    reads a mask (the positions of maxima) or a shape from the input, which PyTorch's formula takes as an argument
    with a zero derivative (ZeroLink)."""
    def formula(ctx, g, *unused):
        d = record(Adjoint, g, ctx, adjoint_of(ctx, g))
        return (zero_link(d, ctx, 0) if masked else d,) + (None,) * (len(ctx._edges) - 1)
    return formula


# ---- elementwise binary ops ------------------------------------------------------------------------------------
def _operand(ctx, saved, i):
    t = saved[i] if saved else None
    return saved_input(ctx, i, t) if t is not None else ctx._input_number(i)


def _binary(ctx, g):
    op = type(ctx).op
    need = ctx.needs_input_grad
    saved = ctx._unpacked if type(ctx).saves else ()
    a = _operand(ctx, saved, 0) if op not in (fn.ADD, fn.SUB) else None
    b = _operand(ctx, saved, 1) if op not in (fn.ADD, fn.SUB) else None
    ga = gb = None
    if op == fn.ADD:
        ga, gb = g, g
    elif op == fn.SUB:
        ga, gb = g, -g
    elif op == fn.MUL:  # each operand is kept only for the other's gradient
        ga = g * b if need[0] else None
        gb = g * a if need[1] else None
    elif op == fn.DIV:
        ga = g / b
        if need[1]:
            gb = -(g * saved_output(ctx, saved[2])) / b
    elif op == fn.POW:
        if need[0]:  # 0 where b == 0, as in the first-order formula (functions.Pow)
            if fn.is_tensor(b):
                ga = where(_C.binary(fn.EQ, b, 0.0), 0.0, g * b * a ** (b - 1))
            else:
                ga = g * 0.0 if b == 0 else g * b * a ** (b - 1)
        if need[1]:
            out = saved_output(ctx, saved[2])
            zero = _C.binary(fn.EQ, saved[0], 0.0) if fn.is_tensor(saved[0]) else None
            log_a = a.log() if fn.is_tensor(a) else _log_number(a)
            term = out * log_a
            gb = g * (where(zero, 0.0, term) if zero is not None else term)
    else:  # maximum / minimum: the larger (smaller) operand takes the gradient; ties split it
        raw_a, raw_b = (saved[i] if saved[i] is not None else ctx._input_number(i) for i in (0, 1))
        win = _C.binary(fn.GT if op == fn.MAXIMUM else fn.LT, raw_a, raw_b)
        tie = _C.binary(fn.EQ, raw_a, raw_b)
        half = g * 0.5
        ga = where(win, g, where(tie, half, 0.0))
        gb = where(win, 0.0, where(tie, half, g))
    return binary_grads(ctx, ga, gb)


def binary_grads(ctx, ga, gb):
    """A binary op's operand gradients ga, gb (None or a number where it has none) summed to the operands' shapes
    and cast to their dtypes and devices, as its ordinary backward returns them."""
    need = ctx.needs_input_grad
    out = []
    for i, gi in enumerate((ga, gb)):
        if not need[i] or gi is None or not fn.is_tensor(gi):
            out.append(None)
            continue
        shape, dtype, host = ctx._input_meta(i)
        gi = sum_to(gi, shape, dtype)
        out.append(record(fn.ToDevice, gi, "cpu") if host and gi._device != "cpu" else gi)
    return tuple(out)


def _log_number(a):
    return math.log(a) if a > 0 else (0.0 if a == 0 else math.nan)


for _cls in (fn.Add, fn.Sub, fn.Mul, fn.Div, fn.Pow, fn.Maximum, fn.Minimum):
    register(_cls, _binary)
register(fn.RSub, lambda ctx, g: (-g, None))


# ---- elementwise unary ops -------------------------------------------------------------------------------------
def _first(ctx):
    return ctx._unpacked[0]


register(fn.Neg, lambda ctx, g: -g)
register(fn.Exp, lambda ctx, g: g * saved_output(ctx, _first(ctx)))
register(fn.Log, lambda ctx, g: g / saved_input(ctx, 0, _first(ctx)))
register(fn.Sqrt, lambda ctx, g: g / (saved_output(ctx, _first(ctx)) * 2.0))
register(fn.Abs, lambda ctx, g: zero_link(g * _C.unary(fn.SIGN, _first(ctx)), ctx, 0))
register(fn.Clone, lambda ctx, g: g)


def _clamp(ctx, g):
    a = _first(ctx)
    keep = None
    if ctx.lo is not None:
        keep = _C.binary(fn.GT, a, ctx.lo)
    if ctx.hi is not None:
        lt = _C.binary(fn.LT, a, ctx.hi)
        keep = lt if keep is None else _C.binary(fn.MUL, keep, lt)
    return (g if keep is None else where(keep, g, 0.0)), None, None


def _where(ctx, g):
    cond = _first(ctx)
    ga = sum_to(where(cond, g, 0.0), *ctx.a_meta) if ctx.needs_input_grad[1] else None
    gb = sum_to(where(cond, 0.0, g), *ctx.b_meta) if ctx.needs_input_grad[2] else None
    return None, ga, gb


register(fn.Clamp, _clamp)
register(fn.Where, _where)
register(ZeroLink, ZeroLink.backward)  # its backward records nothing to differentiate: zeros and h itself
register(fn.ToDtype, lambda ctx, g: (record(fn.ToDtype, g, ctx.src) if g._dtype != ctx.src else g, None))
register(fn.ToDevice, lambda ctx, g: (record(fn.ToDevice, g, ctx.src) if g._device != ctx.src else g, None, None))


def _activation(ctx, g):
    op, alpha, beta = ctx.op, ctx.alpha, ctx.beta
    saved = _first(ctx)
    if saved._dtype == _UINT8:  # relu's bit mask (keep_relu_mask): the gradient is linear in g
        d = linear_op(lambda ctx, g: lambda h: _C.relu_mask_backward(h, saved))(ctx, g)[0]
        return zero_link(d, ctx), None, None, None
    if op in (RELU, HARDTANH) or (op == LEAKY_RELU and alpha >= 0) or (op == ELU and alpha >= 0):
        out = saved  # these save their output
        if op == RELU:
            d = where(_C.binary(fn.GT, out, 0.0), g, 0.0)
        elif op == HARDTANH:
            inside = _C.binary(fn.MUL, _C.binary(fn.GT, out, alpha), _C.binary(fn.LT, out, beta))
            d = where(inside, g, 0.0)
        elif op == LEAKY_RELU:
            d = where(_C.binary(fn.GT, out, 0.0), g, g * alpha)
        else:  # elu: alpha * (exp(x) - 1) below 0, whose derivative is out + alpha
            d = where(_C.binary(fn.GT, out, 0.0), g, g * (saved_output(ctx, out) + alpha))
        if op != ELU:
            d = zero_link(d, ctx)
    elif op in (SIGMOID, TANH):
        out = saved_output(ctx, saved)
        d = g * out * (1.0 - out) if op == SIGMOID else g * (1.0 - out * out)
    elif op == SILU:
        x = saved_input(ctx, 0, saved)
        s = x.sigmoid()
        d = g * (s * (1.0 + x * (1.0 - s)))
    elif op == SOFTPLUS:  # beta = alpha here, threshold = beta (kernels/activation_ops.h)
        x = saved_input(ctx, 0, saved)
        linear = _C.binary(fn.GT, _C.binary(fn.MUL, saved, alpha), beta)
        d = where(linear, g, g * (x * alpha).sigmoid())
    elif op == GELU:
        x = saved_input(ctx, 0, saved)
        cdf = (x * 0.7071067811865476).erf() * 0.5 + 0.5
        pdf = (x * x * -0.5).exp() * 0.3989422804014327
        d = g * (cdf + x * pdf)
    elif op == GELU_TANH:  # 0.5 x (1 + tanh(u)), u = k (x + c x^3)
        x = saved_input(ctx, 0, saved)
        k, c = math.sqrt(2.0 / math.pi), 0.044715
        t = ((x + x * x * x * c) * k).tanh()
        d = g * ((t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * ((x * x * (3.0 * c) + 1.0) * k))
    elif op == MISH:  # x tanh(softplus(x))
        x = saved_input(ctx, 0, saved)
        t = softplus(x).tanh()
        d = g * (t + x * x.sigmoid() * (1.0 - t * t))
    elif op == HARDSWISH:  # x relu6(x + 3) / 6, in the kernel's regions (kernels/cpu/activation.c)
        x = saved_input(ctx, 0, saved)
        below, inside = _C.binary(fn.LE, saved, -3.0), _C.binary(fn.LT, saved, 3.0)
        d = where(below, 0.0, where(inside, g * (x * (1.0 / 3.0) + 0.5), g))
    elif op == HARDSIGMOID:
        inside = _C.binary(fn.MUL, _C.binary(fn.GT, saved, 0.0), _C.binary(fn.LT, saved, 1.0))
        d = where(inside, g * (1.0 / 6.0), 0.0)
    else:
        raise not_recorded(ctx)
    return d, None, None, None


def _softmax(ctx, g):
    out = saved_output(ctx, _first(ctx))
    if ctx.log:
        return g - out.exp() * g.sum(ctx.dim, keepdim=True), None, None
    return out * (g - (g * out).sum(ctx.dim, keepdim=True)), None, None


register(_Activation, _activation)
register(_ActivationInplace, _activation)  # saves the output, or a copy of the input: as _Activation
register(_Softmax, _softmax)


def _inplace_binary(ctx, g):
    """a op= b: a scaling by a constant b (*=, /=), or += / -= (the others are refused in the forward)."""
    if ctx.scale is not None:
        b = ctx._unpacked[0] if ctx.b_meta is not None else ctx.b_number
        return sum_to(g * b if ctx.scale == fn.MUL else g / b, *ctx.a_meta), None, None, None
    gb = g if ctx.fn.op == fn.ADD else -g
    return (sum_to(g, *ctx.a_meta) if ctx.needs_input_grad[0] else None,
            sum_to(gb, *ctx.b_meta) if ctx.needs_input_grad[1] else None, None, None)


register(_InplaceBinary, _inplace_binary)


# ---- reductions, products, shapes --------------------------------------------------------------------------------
def _unreduce(g, shape, dims, keepdim):
    if not shape:  # a 0-d input reduced over "dim 0": nothing to put back
        return g.reshape(())
    if not keepdim:
        for d in sorted(dims):
            g = g.unsqueeze(d)
    return g.expand(tuple(shape))


def _sum(ctx, g):
    g = _unreduce(g, ctx.shape, ctx.dims, ctx.keepdim)
    return (record(fn.ToDtype, g, ctx.src) if g._dtype != ctx.src else g), None, None, None


register(fn.Sum, _sum)
register(fn.Mean, lambda ctx, g: (_unreduce(g, ctx.shape, ctx.dims, ctx.keepdim) / ctx.count, None, None))


def _matmul(ctx, g):
    s = ctx._unpacked
    a, b = saved_input(ctx, 0, s[0]), saved_input(ctx, 1, s[1])
    a_shape, b_shape = ctx.a_shape, ctx.b_shape
    if len(a_shape) == 1 and len(b_shape) == 1:
        return (g * b if b is not None else None), (g * a if a is not None else None)
    if len(a_shape) == 1:
        g = g.unsqueeze(-2)
        a = a.unsqueeze(0) if a is not None else None
    if len(b_shape) == 1:
        g = g.unsqueeze(-1)
        b = b.unsqueeze(-1) if b is not None else None
    ga = gb = None
    if ctx.needs_input_grad[0]:
        ga = g @ b.transpose(-1, -2)
        ga = sum_to(ga, (1,) * (ga.ndim - 2) + tuple(ga.shape[-2:]) if len(a_shape) == 1 else a_shape)
        ga = ga.reshape(tuple(a_shape))
    if ctx.needs_input_grad[1]:
        gb = a.transpose(-1, -2) @ g
        gb = sum_to(gb, (1,) * (gb.ndim - 2) + tuple(gb.shape[-2:]) if len(b_shape) == 1 else b_shape)
        gb = gb.reshape(tuple(b_shape))
    return ga, gb


def _cat(ctx, g):
    out, start = [None], 0
    for size, dt in zip(ctx.sizes, ctx.metas):
        piece = g.narrow(ctx.dim, start, size)
        out.append(record(fn.ToDtype, piece, dt) if piece._dtype != dt else piece)
        start += size
    return tuple(out)


def _index(ctx, g):
    if any(s[0] == "index" for s in ctx.plan):  # an advanced index may repeat entries, which add up: the
        return linear_op(lambda ctx, g: lambda h: apply_plan(h, ctx.plan))(ctx, g)  # adjoint is the index itself
    if not g.requires_grad:  # the gradient is a constant: so is the result
        return IndexFn.backward(ctx, g)
    shape, dt, dev = ctx.meta
    base = _C.fill_(_C.empty(shape, dt, dev), 0.0)
    return IndexPutFn.apply(base, g, ctx.plan), None


register(fn.Matmul, _matmul)
register(fn._Reshaping, lambda ctx, g: (g.reshape(tuple(ctx.shape)), None))
register(fn.Transpose, lambda ctx, g: (g.transpose(*ctx.dims), None, None))
register(fn.Permute, lambda ctx, g: (g.permute(ctx.inverse), None))
register(fn.Expand, lambda ctx, g: (sum_to(g, *ctx.meta), None))
def _split(ctx, *grads):
    """The pieces' gradients side by side (a recorded cat), zeros where a piece got none."""
    return record(fn.Cat, ctx.dim, *SplitFn.parts(ctx, grads)), None, None


register(fn.Cat, _cat)
register(IndexFn, _index)
register(SplitFn, _split)


def not_recorded(ctx, what=None):
    return NotImplementedError(
        f"create_graph=True: the gradient of {ctx.name()}{' with ' + what if what else ''} is not available as a "
        f"graph in gpumemnet, so gradients of gradients cannot pass through it; run this part with "
        f"create_graph=False, or write it with other ops")
