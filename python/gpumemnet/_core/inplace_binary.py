"""a op= b on a tensor in a graph, recorded as a node whose output is `a` itself (tensor.py's _inplace)."""
from .. import _C
from . import autograd
from . import functions as F


class _InplaceBinary(autograd.Function):
    """a op= b recorded as a node whose output is `a` itself: edges are taken before the write."""

    @staticmethod
    def forward(ctx, a, b, op, fn):
        ctx.fn = fn
        ctx.scale = None
        if fn.saves:
            # a *= b and a /= b need only b for a's gradient (g * b, g / b): a number, or a tensor that needs no
            # gradient, is kept; the old value of a is not needed. Anything else would need it: refused.
            if op not in (F.MUL, F.DIV) or ctx.needs_input_grad[1]:
                raise RuntimeError(f"in-place {fn.__name__.lower()} on a tensor that is part of a graph needs the "
                                   f"old value for its gradient; use the out-of-place form")
            ctx.scale = op
            if isinstance(b, _C.TensorBase):
                ctx.save_for_backward(b)
            else:
                ctx.b_number = b
        ctx.a_meta = (a.shape, a._dtype)
        ctx.b_meta = (b.shape, b._dtype) if isinstance(b, _C.TensorBase) else None
        _C.binary(op, a, b, a)  # bumps a's version: a node that saved the old a raises at backward
        return a

    @staticmethod
    def backward(ctx, g):
        if ctx.scale is not None:
            b = ctx._unpacked[0] if ctx.b_meta is not None else ctx.b_number
            return F.sum_to(_C.binary(ctx.scale, g, b), *ctx.a_meta), None, None, None
        ga, gb = ctx.fn.grads(ctx, g)
        return (F.sum_to(ga, *ctx.a_meta) if ctx.needs_input_grad[0] else None,
                F.sum_to(gb, *ctx.b_meta) if ctx.needs_input_grad[1] and gb is not None else None, None, None)
