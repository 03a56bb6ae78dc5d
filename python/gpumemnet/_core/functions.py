"""The differentiable ops of the core: forward calls one C op, backward states the derivative.

Every backward returns gradients in the inputs' shapes and dtypes (broadcast dims summed away, promoted
dtypes cast back). Numbers (Python scalars) never receive gradients."""
import math
import warnings
import weakref

from .. import _C
from .autograd import AccumulateGrad, Function
from .state import state

# op codes: docs/C_API.md
ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM, EQ, NE, LT, LE, GT, GE = range(13)
NEG, EXP, LOG, SQRT, ABS, SIGN, LOGICAL_NOT, ROUND, FLOOR, CEIL = range(10)
SUM, MEAN, AMAX, AMIN, PROD = range(5)


def is_tensor(x):
    return isinstance(x, _C.TensorBase)


def broadcast_dims(g_shape, shape):
    """The dims of a tensor of g_shape that broadcasting from `shape` added or stretched: those to sum over."""
    lead = len(g_shape) - len(shape)
    if lead < 0:  # a value with leading size-1 dims that an assignment dropped: g stands for it padded with 1s
        g_shape, lead = (1,) * -lead + tuple(g_shape), 0
    return tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and g_shape[lead + i] != 1)


def sum_to(g, shape, dtype_code=None):
    """Sum g down to `shape` (undo broadcasting) and cast to dtype_code."""
    shape = tuple(shape)
    if tuple(g.shape) != shape:
        dims = broadcast_dims(tuple(g.shape), shape)
        if dims:
            g = _C.reduce(SUM, g, dims, True)
        if tuple(g.shape) != shape:
            g = reshape_nograd(g, shape)
    if dtype_code is not None and g._dtype != dtype_code:
        g = cast(g, dtype_code)
    return g


def result_code(tensors, ranked=False):
    """The dtype code elementwise arithmetic gives these tensors (PyTorch's promotion), worked out on meta stand-ins.
    ranked: a 0-d tensor counts below the ones with dims, as in a binary op (xlogy); otherwise every tensor counts
    alike, as where the op first reshapes them (einsum, block_diag)."""
    def stand_in(t):
        return _C.empty(() if ranked and t.ndim == 0 else (1,), t._dtype, "meta")
    out = stand_in(tensors[0])
    for t in tensors[1:]:
        out = _C.binary(ADD, out, stand_in(t))
    return out._dtype


def cast(t, dtype_code):
    out = _C.empty(t.shape, dtype_code, t._device)
    _C.copy_(out, t)
    return out


def contiguous(t):
    if t._is_contiguous():
        return t
    out = _C.empty(t.shape, t._dtype, t._device)
    _C.copy_(out, t)
    return out


def _grad_for(ctx, i, g, x):
    """g reduced to input i's shape/dtype, or None when input i needs no gradient."""
    if not ctx.needs_input_grad[i]:
        return None
    return sum_to(g, x.shape, x._dtype)


class Binary(Function):
    """Base for a op b with a, b tensors or numbers; subclasses give `op` and `grads(ctx, g)`."""
    op = None
    saves = False

    @classmethod
    def forward(cls, ctx, a, b):
        out = _C.binary(cls.op, a, b)
        if ctx.needs_input_grad:
            # each input's shape and dtype (or number), kept in the C node: what the operators' C fast path
            # (csrc/autograd_node.c), which records these same nodes without calling forward, keeps too
            ctx._record_inputs(a, b)
            if cls.saves:  # what the backward reads, as the C fast path keeps it (csrc/autograd_node.c)
                need = ctx.needs_input_grad
                keep = (True, True, cls.saves == "out")
                if cls.op == MUL:
                    keep = (need[1], need[0], False)
                elif cls.op == DIV:
                    keep = (False, True, need[1])
                ctx.save_for_backward(a if keep[0] and is_tensor(a) else None, b if keep[1] and is_tensor(b) else None,
                                      out if keep[2] else None)
        return out

    @classmethod
    def backward(cls, ctx, g):
        ga, gb = cls.grads(ctx, g)
        out = []
        for need, meta, gi in ((ctx.needs_input_grad[0], ctx._input_meta(0), ga),
                               (ctx.needs_input_grad[1], ctx._input_meta(1), gb)):
            if need and gi is not None:
                gi = sum_to(gi, meta[0], meta[1])
                if meta[2] and gi._device != "cpu":  # a 0-d CPU tensor used with CUDA ones (PyTorch's rule)
                    gi = gi.to("cpu")
            out.append(gi if need else None)
        return tuple(out)


def _operand(ctx, saved, i):
    """Saved tensor i, or the number that was passed in its place."""
    t = saved[i]
    return t if t is not None else ctx._input_number(i)


class Add(Binary):
    op = ADD

    @staticmethod
    def grads(ctx, g):
        return g, g


class Sub(Binary):
    op = SUB

    @staticmethod
    def grads(ctx, g):
        return g, (_C.unary(NEG, g) if ctx.needs_input_grad[1] else None)


class Mul(Binary):
    op = MUL
    saves = True

    @staticmethod
    def grads(ctx, g):
        s = ctx._unpacked
        a, b = _operand(ctx, s, 0), _operand(ctx, s, 1)
        return (_C.binary(MUL, g, b) if ctx.needs_input_grad[0] else None,
                _C.binary(MUL, g, a) if ctx.needs_input_grad[1] else None)


class Div(Binary):
    op = DIV
    saves = "out"
    output_writable = True  # PyTorch's div saves its inputs: a write into the result is fine (autograd.py)

    @staticmethod
    def grads(ctx, g):
        s = ctx._unpacked
        b, out = _operand(ctx, s, 1), s[2]
        ga = _C.binary(DIV, g, b) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:  # d(a/b)/db = -(a/b)/b
            gb = _C.unary(NEG, _C.binary(DIV, _C.binary(MUL, g, out), b))
        return ga, gb


class Pow(Binary):
    op = POW
    saves = "out"
    output_writable = True  # PyTorch's pow saves its input (x ** 2, then x -= 1)

    @staticmethod
    def grads(ctx, g):
        s = ctx._unpacked
        a, b, out = _operand(ctx, s, 0), _operand(ctx, s, 1), s[2]
        ga = gb = None
        if ctx.needs_input_grad[0]:  # b * a^(b-1), and 0 where b == 0 (0 * 0^-1 would be NaN; PyTorch's rule)
            if not is_tensor(b) and b == 0:
                ga = _C.binary(MUL, g, 0.0)
            else:
                bm1 = _C.binary(SUB, b, 1.0) if is_tensor(b) else b - 1.0
                ga = _C.binary(MUL, g, _C.binary(MUL, b, _C.binary(POW, a, bm1)))
                if is_tensor(b):
                    ga = _C.where(_C.binary(EQ, b, 0.0), 0.0, ga)
        if ctx.needs_input_grad[1]:  # a^b * log(a), taken as 0 where a == 0 (PyTorch's convention)
            if is_tensor(a):  # log(a) in the result's dtype (a float16 base of a float64 power: 2e-4 off)
                term = _C.binary(MUL, out, _C.unary(LOG, a if a._dtype == out._dtype else cast(a, out._dtype)))
            else:
                term = _C.binary(MUL, out, math.log(a) if a > 0 else (0.0 if a == 0 else math.nan))
            if is_tensor(a):
                term = _C.where(_C.binary(EQ, a, 0.0), 0.0, term)
            gb = _C.binary(MUL, g, term)
        return ga, gb


class _MaxMin(Binary):
    saves = True

    @classmethod
    def grads(cls, ctx, g):
        s = ctx._unpacked
        a, b = _operand(ctx, s, 0), _operand(ctx, s, 1)
        # The larger (smaller) operand takes the gradient; ties split it evenly, as in PyTorch.
        win = _C.binary(GT if cls.op == MAXIMUM else LT, a, b)
        tie = _C.binary(EQ, a, b)
        half = _C.binary(MUL, g, 0.5)
        ga = _C.where(win, g, _C.where(tie, half, 0.0)) if ctx.needs_input_grad[0] else None
        gb = _C.where(win, 0.0, _C.where(tie, half, g)) if ctx.needs_input_grad[1] else None
        return ga, gb


class Maximum(_MaxMin):
    op = MAXIMUM


class Minimum(_MaxMin):
    op = MINIMUM


class RSub(Function):
    """number - tensor."""

    @staticmethod
    def forward(ctx, a, number):
        return _C.binary(SUB, number, a)

    @staticmethod
    def backward(ctx, g):
        return _C.unary(NEG, g), None


# ---- unary ---------------------------------------------------------------------------------------------
class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return _C.unary(NEG, a)

    @staticmethod
    def backward(ctx, g):
        return _C.unary(NEG, g)


class Exp(Function):
    @staticmethod
    def forward(ctx, a):
        out = _C.unary(EXP, a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx._unpacked
        return _C.binary(MUL, g, out)


class Log(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return _C.unary(LOG, a)

    @staticmethod
    def backward(ctx, g):
        a, = ctx._unpacked
        return _C.binary(DIV, g, a)


class Sqrt(Function):
    @staticmethod
    def forward(ctx, a):
        out = _C.unary(SQRT, a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx._unpacked
        return _C.binary(DIV, g, _C.binary(MUL, out, 2.0))


class Abs(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return _C.unary(ABS, a)

    @staticmethod
    def backward(ctx, g):
        a, = ctx._unpacked
        return _C.binary(MUL, g, _C.unary(SIGN, a))


class Clamp(Function):
    @staticmethod
    def forward(ctx, a, lo, hi):
        ctx.save_for_backward(a)
        ctx.lo, ctx.hi = lo, hi
        return _C.clamp(a, lo, hi)

    @staticmethod
    def backward(ctx, g):
        a, = ctx._unpacked
        # The gradient passes where min < x < max: PyTorch 2.15 gives 0 at a bound that is a number (tensor bounds
        # go through maximum/minimum instead, which split a tie: Tensor.clamp).
        keep = None
        if ctx.lo is not None:
            keep = _C.binary(GT, a, ctx.lo)
        if ctx.hi is not None:
            lt = _C.binary(LT, a, ctx.hi)
            keep = lt if keep is None else _C.binary(MUL, keep, lt)
        return (g if keep is None else _C.where(keep, g, 0.0)), None, None


class Where(Function):
    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save_for_backward(cond)
        ctx.a_meta = (a.shape, a._dtype) if is_tensor(a) else None
        ctx.b_meta = (b.shape, b._dtype) if is_tensor(b) else None
        return _C.where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        cond, = ctx._unpacked
        ga = sum_to(_C.where(cond, g, 0.0), *ctx.a_meta) if ctx.needs_input_grad[1] else None
        gb = sum_to(_C.where(cond, 0.0, g), *ctx.b_meta) if ctx.needs_input_grad[2] else None
        return None, ga, gb


class ToDtype(Function):
    @staticmethod
    def forward(ctx, a, dtype_code):
        ctx.src = a._dtype
        return cast(a, dtype_code)

    @staticmethod
    def backward(ctx, g):
        if ctx.src == 0 and g._dtype == 3 and _widened_by_leaf(ctx):
            return g, None
        return cast(g, ctx.src), None


def _widened_by_leaf(ctx, i=0):
    """Whether a bfloat16 gradient may go as it is to the float32 leaf that ctx's input i is (or that ctx's cast
    read: autocast's cast of a parameter): AccumulateGrad widens it as it adds it into .grad (_C.binary's float32 +
    bfloat16, one pass) or as it makes .grad, bit for bit what the float32 copy would give, without that copy. Not
    when anything could see the gradient on its way: the leaf's or the accumulator's hooks, or autograd.grad
    returning it."""
    edge = ctx._edges[i]
    if edge is None or state.capturing:
        return False
    node = edge[0]
    if type(node) is not AccumulateGrad or node._pre_hooks:
        return False
    var = node.variable
    return var._dtype == 0 and not var._hooks


class ToDevice(Function):
    """A copy to another device; the gradient is copied back to where the input lives."""

    @staticmethod
    def forward(ctx, a, device, non_blocking=False):
        ctx.src = a._device
        return _C._to_device(a, device, non_blocking)

    @staticmethod
    def backward(ctx, g):
        return _C._to_device(g, ctx.src), None, None


class Clone(Function):
    @staticmethod
    def forward(ctx, a):
        out = _C.empty(a.shape, a._dtype, a._device)
        _C.copy_(out, a)
        return out

    @staticmethod
    def backward(ctx, g):
        return g


# ---- reductions -----------------------------------------------------------------------------------------
def _norm_dims(dims, ndim):
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    n = max(ndim, 1)
    out = []
    for d in dims:
        if not -n <= d < n:
            raise IndexError(f"dim {d} is out of range for a tensor with {ndim} dimensions")
        out.append(d % n)
    return tuple(out)


def _unreduce(g, in_shape, dims, keepdim):
    """Give g (a reduction's output gradient) back the reduced dims as size 1, ready to broadcast."""
    if not keepdim and in_shape:
        shape = list(in_shape)
        for d in dims:
            shape[d] = 1
        g = g._view(tuple(shape)) if g._can_view(tuple(shape)) else contiguous(g)._view(tuple(shape))
    return g


class Sum(Function):
    @staticmethod
    def forward(ctx, a, dims, keepdim, dtype_code=None):
        ctx.shape = a.shape
        ctx.dims = _norm_dims(dims, a.ndim)
        ctx.keepdim = keepdim
        ctx.src = a._dtype
        return _C.reduce(SUM, a, dims, keepdim, dtype_code)

    @staticmethod
    def backward(ctx, g):
        g = _unreduce(g, ctx.shape, ctx.dims, ctx.keepdim)
        g = g._expand(ctx.shape)
        return (cast(g, ctx.src) if g._dtype != ctx.src else g), None, None, None


class Mean(Function):
    @staticmethod
    def forward(ctx, a, dims, keepdim):
        ctx.shape = a.shape
        ctx.dims = _norm_dims(dims, a.ndim)
        ctx.keepdim = keepdim
        count = 1
        for d in ctx.dims:
            count *= a.shape[d] if a.ndim else 1
        ctx.count = count
        return _C.reduce(MEAN, a, dims, keepdim)

    @staticmethod
    def backward(ctx, g):
        g = _unreduce(_C.binary(DIV, g, float(ctx.count)), ctx.shape, ctx.dims, ctx.keepdim)
        return g._expand(ctx.shape), None, None


class AMaxMin(Function):
    """amax/amin and the full max()/min(): the gradient is shared evenly among the elements equal to the
    result (PyTorch's convention)."""

    @staticmethod
    def forward(ctx, a, dims, keepdim, is_max, to_nan=False):
        out = _C.reduce(AMAX if is_max else AMIN, a, dims, keepdim)
        ctx.save_for_backward(a, out)
        ctx.dims = _norm_dims(dims, a.ndim)
        ctx.keepdim = keepdim
        ctx.to_nan = to_nan
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx._unpacked
        out = _unreduce(out, a.shape, ctx.dims, ctx.keepdim)
        g = _unreduce(g, a.shape, ctx.dims, ctx.keepdim)
        mask = cast(_C.binary(EQ, a, out), g._dtype)
        if ctx.to_nan:  # max() / min() of a tensor with NaN: PyTorch's gradient goes to the NaN entries (amax's is
            nan = cast(_C.binary(NE, a, a), g._dtype)  # NaN: NaN == NaN is false, which leaves it none)
            mask = _C.binary(MAXIMUM, mask, _C.binary(MUL, nan, cast(_C.binary(NE, out, out), g._dtype)))
        count = _C.reduce(SUM, mask, ctx.dims, True)
        return _C.binary(MUL, mask, _C.binary(DIV, g, count)), None, None, None, None


class MaxMinDim(Function):
    """max(dim)/min(dim) -> (values, indices): the gradient goes to the index chosen."""

    @staticmethod
    def forward(ctx, a, dim, keepdim, is_max):
        values, indices = (_C.max_dim if is_max else _C.min_dim)(a, dim, keepdim)
        ctx.mark_non_differentiable(1)
        ctx.shape = a.shape
        ctx.dim = _norm_dims(dim, a.ndim)[0]
        ctx.keepdim = keepdim
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, g, g_indices=None):
        indices, = ctx._unpacked
        shape = ctx.shape
        if not shape:
            return g, None, None, None
        g = _unreduce(g, shape, (ctx.dim,), ctx.keepdim)
        idx = _unreduce(indices, shape, (ctx.dim,), ctx.keepdim)
        pos_shape = [1] * len(shape)
        pos_shape[ctx.dim] = shape[ctx.dim]
        pos = _C.arange(0, shape[ctx.dim], 1, 4, g._device)._view(tuple(pos_shape))
        return _C.where(_C.binary(EQ, pos, idx), g, 0.0), None, None, None


class Var(Function):
    @staticmethod
    def forward(ctx, a, dims, correction, keepdim):
        ctx.save_for_backward(a)
        ctx.dims = _norm_dims(dims, a.ndim)
        ctx.correction = correction
        ctx.keepdim = keepdim
        return _C.var(a, dims, correction, keepdim)

    @staticmethod
    def backward(ctx, g):
        a, = ctx._unpacked
        n = 1
        for d in ctx.dims:
            n *= a.shape[d] if a.ndim else 1
        mean = _C.reduce(MEAN, a, ctx.dims, True)
        g = _unreduce(g, a.shape, ctx.dims, ctx.keepdim)
        scale = 2.0 / max(n - ctx.correction, 0) if n - ctx.correction > 0 else float("nan")
        return _C.binary(MUL, _C.binary(MUL, g, scale), _C.binary(SUB, a, mean)), None, None, None


# ---- matmul ---------------------------------------------------------------------------------------------
def _mT(t):
    return t._transpose(-1, -2)


class Matmul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b if ctx.needs_input_grad[0] else None)
        ctx.a_shape, ctx.b_shape = a.shape, b.shape
        return _C.matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx._unpacked
        a_shape, b_shape = ctx.a_shape, ctx.b_shape
        if len(a_shape) == 1 and len(b_shape) == 1:  # dot product
            return (_C.binary(MUL, g, b) if b is not None else None,
                    _C.binary(MUL, g, a) if a is not None else None)
        # Promote vectors to matrices as the forward did, then undo it.
        if len(a_shape) == 1:
            g = g._unsqueeze(-2)
            a = a._unsqueeze(0) if a is not None else None
        if len(b_shape) == 1:
            g = g._unsqueeze(-1)
            b = b._unsqueeze(-1) if b is not None else None
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = _C.matmul(g, _mT(b))
            ga = sum_to(ga, (1,) * (ga.ndim - 2) + ga.shape[-2:] if len(a_shape) == 1 else a_shape)
            ga = ga._view(a_shape) if ga._can_view(a_shape) else contiguous(ga)._view(a_shape)
        if ctx.needs_input_grad[1]:
            gb = _C.matmul(_mT(a), g)
            gb = sum_to(gb, (1,) * (gb.ndim - 2) + gb.shape[-2:] if len(b_shape) == 1 else b_shape)
            gb = gb._view(b_shape) if gb._can_view(b_shape) else contiguous(gb)._view(b_shape)
        return ga, gb


# ---- views and shape ops ---------------------------------------------------------------------------------
def reshape_nograd(t, shape):
    return t._view(shape) if t._can_view(shape) else contiguous(t)._view(shape)


def root_ref(a):
    """A weak reference to the tensor a view op's result is ultimately a view of (ctx.view_base): a itself, or,
    for a view made by a recorded view op, that op's root (the intermediate views may be gone by the time the
    result is written in place: x.view(-1)[:4].add_(1))."""
    if a._graph_view:
        ref = getattr(a.grad_fn, "view_base", None)
        if ref is not None:
            return ref
    return weakref.ref(a)


class _Reshaping(Function):
    """A change of shape only (same elements, same order): its forward keeps the input's shape in ctx.shape and
    the gradient is the incoming one reshaped back to it. These view ops (and transpose, permute, diagonal) keep
    their input weakly as ctx.view_base: an in-place write into the view is then recorded on that base
    (indexing.write_graph_view), as PyTorch's CopySlices."""

    @staticmethod
    def backward(ctx, g):
        return reshape_nograd(g, ctx.shape), None


class Reshape(_Reshaping):
    # graph walkers read the input's shape under PyTorch's name (torch-pruning's channel mapping)
    _saved_self_sym_sizes = property(lambda self: tuple(self.shape))

    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape, ctx.view_base = a.shape, root_ref(a)
        return reshape_nograd(a, shape)


class View(_Reshaping):
    _saved_self_sym_sizes = property(lambda self: tuple(self.shape))

    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape, ctx.view_base = a.shape, root_ref(a)
        return a._view(shape)


class Transpose(Function):
    @staticmethod
    def forward(ctx, a, d0, d1):
        ctx.dims, ctx.view_base = (d0, d1), root_ref(a)
        return a._transpose(d0, d1)

    @staticmethod
    def backward(ctx, g):
        return g._transpose(*ctx.dims), None, None


class Permute(Function):
    @staticmethod
    def forward(ctx, a, dims):
        out = a._permute(dims)
        ctx.view_base = root_ref(a)
        n = max(a.ndim, 1)
        ctx.inverse = tuple(sorted(range(a.ndim), key=lambda i: dims[i] % n))
        return out

    @staticmethod
    def backward(ctx, g):
        return g._permute(ctx.inverse), None


class Expand(Function):
    _saved_self_sym_sizes = property(lambda self: tuple(self.meta[0]))

    @staticmethod
    def forward(ctx, a, shape):
        ctx.meta = (a.shape, a._dtype)
        return a._expand(shape)

    @staticmethod
    def backward(ctx, g):
        return sum_to(g, *ctx.meta), None


class Unsqueeze(_Reshaping):
    @staticmethod
    def forward(ctx, a, dim):
        ctx.shape, ctx.view_base = a.shape, root_ref(a)
        return a._unsqueeze(dim)


class Squeeze(_Reshaping):
    @staticmethod
    def forward(ctx, a, dim):
        ctx.shape, ctx.view_base = a.shape, root_ref(a)
        return a._squeeze(dim)


class Cat(Function):
    """cat of tensors along dim. Graph walkers know it by PyTorch's name and saved dim (torch-pruning maps the
    channels of a concatenation by them: DenseNet's, GoogLeNet's)."""
    _saved_dim = property(lambda self: self.dim)

    def name(self):
        return "CatBackward0"

    @staticmethod
    def forward(ctx, dim, *tensors):
        ctx.sizes = [t.shape[dim] if t.ndim else 1 for t in tensors]
        ctx.metas = [t._dtype for t in tensors]
        ctx.dim = dim
        return _C.cat(tensors, dim)

    @staticmethod
    def backward(ctx, g):
        out = [None]
        start = 0
        for size, dt in zip(ctx.sizes, ctx.metas):
            piece = g._slice(ctx.dim, start, start + size, 1)
            out.append(cast(piece, dt) if piece._dtype != dt else piece)
            start += size
        return tuple(out)


def bool_condition(condition):
    """A uint8 condition (PyTorch's deprecated masks: ByteTensor, .byte()) as a bool one, with PyTorch's warning."""
    if isinstance(condition, _C.TensorBase) and condition._dtype == 6:
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and will be removed in a "
                      "future version of PyTorch. Use a boolean condition instead.", UserWarning, stacklevel=3)
        return condition != 0
    return condition
