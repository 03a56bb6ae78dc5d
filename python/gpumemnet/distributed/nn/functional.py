"""torch.distributed.nn.functional: all_reduce, all_gather and broadcast that return new tensors and carry
gradients back across ranks, as PyTorch's: the gradient of a sum all-reduce is the sum all-reduce of the
gradients; of an all-gather, each rank's slice of the summed gradients; of a broadcast, the gradients summed on the
source (zeros elsewhere). Built on gpumemnet.distributed's collectives (MPI); before init_process_group they act
on one process, as PyTorch's refuse to (it has no default group then) — the one-process answers are the identity."""
from ..._core.autograd import Function
from .. import collectives as _c
from ..collectives import ReduceOp
from ..process_group import get_rank, get_world_size, group, is_initialized

__all__ = ["all_gather", "all_reduce", "broadcast"]


def _world(g):
    return get_world_size(g) if is_initialized() else 1


def _reduced(t, g, op=ReduceOp.SUM):
    """A copy of t reduced by op over group g's ranks (the copy itself on one process)."""
    out = t.clone()
    if _world(g) > 1:
        _c.all_reduce(out, op=op, group=g)
    return out


class _AllReduce(Function):
    @staticmethod
    def forward(ctx, tensor, op, g):
        ctx.op, ctx.group = op, g
        return _reduced(tensor, g, op)

    @staticmethod
    def backward(ctx, grad):
        if ctx.op not in (ReduceOp.SUM, ReduceOp.AVG):
            raise NotImplementedError(f"torch.distributed.nn.all_reduce: the gradient of op {ctx.op} is not "
                                      f"supported (SUM and AVG are)")
        g = _reduced(grad, ctx.group)
        return (g / _world(ctx.group) if ctx.op == ReduceOp.AVG else g), None, None


class _AllGather(Function):
    @staticmethod
    def forward(ctx, tensor, g):
        ctx.group = g
        n = _world(g)
        if n == 1:
            return (tensor.clone(),)
        out = [tensor.new_empty(tuple(tensor.shape)) for _ in range(n)]
        _c.all_gather(out, tensor.contiguous(), group=g)
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        from ..._core.creation import stack  # noqa: PLC0415 (import cycle at load time)
        summed = _reduced(stack(list(grads)), ctx.group)
        return summed[get_rank(ctx.group) if is_initialized() else 0], None


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, tensor, src, g):
        ctx.src, ctx.group = src, g
        out = tensor.clone()
        if _world(g) > 1:
            _c.broadcast(out, src, group=g)
        return out

    @staticmethod
    def backward(ctx, grad):
        g = _reduced(grad, ctx.group)
        rank = get_rank() if is_initialized() else 0
        return (g if rank == ctx.src else g * 0), None, None


def all_reduce(tensor, op=ReduceOp.SUM, group=group.WORLD):
    """A new tensor: tensor reduced over every rank of group."""
    return _AllReduce.apply(tensor, op, group)


def all_gather(tensor, group=group.WORLD):
    """A tuple with every rank's tensor, in rank order."""
    return _AllGather.apply(tensor, group)


def broadcast(tensor, src, group=group.WORLD):
    """A new tensor holding rank src's tensor on every rank."""
    return _Broadcast.apply(tensor, src, group)
