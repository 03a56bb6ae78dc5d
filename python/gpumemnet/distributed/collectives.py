"""The collectives, with PyTorch's names and signatures (layer 2, distributed).

Every collective starts non-blocking in C (csrc/dist_mpi.c: MPI_Iallreduce, ...) and returns a Work; without
async_op the call waits for it (with the process group's timeout) and returns None. Tensors are used in place.
How a tensor travels depends on its device:
  cpu    straight through MPI (contiguous tensors only: a copy would hide that the caller's tensor is not written);
  cuda   through NCCL when the group has it (process_group: backend "nccl", or None with NCCL found) for
         all_reduce, broadcast, reduce, all_gather(_into_tensor), reduce_scatter(_tensor) on the communicator's
         device; otherwise staged: copied to host memory, sent through MPI, copied back when the Work completes;
  meta   nothing moves and no group is needed, so that gm.memory.estimate can run a distributed step in one
         process; the scratch the CPU path allocates is allocated on meta too.
Everything these functions allocate (host staging, the contiguous scratch of the list variants) is tagged with
the allocator category `communication`. ReduceOp.AVG is a SUM followed by a division by the world size (MPI has
no average), on floating dtypes only.

Groups: every collective takes PyTorch's group= (None: the default group; or one from new_group, with its own MPI
communicator). Ranks given as src/dst are global ranks, as group_src/group_dst the group's own; sizes (all_gather's
list, AVG's divisor) are the group's. On a rank outside the group (new_group returned
GroupMember.NON_GROUP_MEMBER there) a collective warns and does nothing, as PyTorch's do.

Progress: MPI moves a non-blocking collective's data only inside MPI calls (our Work.wait / is_completed polls, and
every collective started after it). For communication that overlaps computation with nothing calling MPI in
between (DDP's buckets during backward), MPICH runs a progress thread with MPIR_CVAR_ASYNC_PROGRESS=1 (we ask for
MPI_THREAD_MULTIPLE, which it needs); it keeps one core polling."""
import enum

from .. import _C
from .._core.autograd import no_grad
from .._core.creation import cat, empty
from .._core.scope import category
from .._core.tensor import Tensor
from . import _nccl, process_group as pg_mod
from .process_group import Work, _group, _Request, _state, _warn_not_in_group

__all__ = ["ReduceOp", "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "reduce", "gather", "scatter", "barrier"]


class ReduceOp(enum.IntEnum):
    """PyTorch's reduce ops (and its numbering). BAND/BOR/BXOR and PREMUL_SUM exist (libraries read them at import:
    ignite) but a collective refuses them: csrc/dist_mpi.c has no codes for them."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8

    # printed as PyTorch prints its members (their class there is ReduceOp.RedOpType)
    def __str__(self):
        return f"RedOpType.{self.name}"

    def __repr__(self):
        return f"<RedOpType.{self.name}: {self.value}>"


ReduceOp.RedOpType = ReduceOp
# csrc/dist_mpi.c's codes (GM_MPI_SUM, PRODUCT, MIN, MAX); AVG runs as SUM.
_C_OP = {ReduceOp.SUM: 0, ReduceOp.AVG: 0, ReduceOp.PRODUCT: 1, ReduceOp.MIN: 2, ReduceOp.MAX: 3}


def _op(op, name, dtype):
    try:
        op = ReduceOp(op)
    except ValueError:
        raise ValueError(f"{name}: op must be a ReduceOp (SUM, AVG, PRODUCT, MIN, MAX), got {op!r}") from None
    if op not in _C_OP:
        raise NotImplementedError(f"{name}: ReduceOp.{op.name} is not supported by gpumemnet yet (SUM, AVG, PRODUCT, "
                                  f"MIN and MAX are)")
    if op == ReduceOp.AVG and not dtype.is_floating_point:
        raise ValueError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got {dtype}")
    return op


def _tensor(t, name, arg):
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: {arg} must be a Tensor, got {type(t).__name__}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: {arg} must be contiguous; call .contiguous() on it and "
                         f"communicate that tensor")
    return t


def _same(a, aname, b, bname, name, numel=True):
    if a.dtype != b.dtype:
        raise TypeError(f"{name}: {aname} is {a.dtype} but {bname} is {b.dtype}; they must have the same dtype")
    if a.device != b.device:
        raise ValueError(f"{name}: {aname} is on {a.device} but {bname} is on {b.device}")
    if numel and a.shape != b.shape:
        raise ValueError(f"{name}: {aname} has shape {tuple(a.shape)} but {bname} has {tuple(b.shape)}; they must "
                         f"match")


def _list(tensors, tensor, name, arg, world):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}: {arg} must be a list of Tensors, got {type(tensors).__name__}")
    if len(tensors) != world:
        raise ValueError(f"{name}: {arg} has {len(tensors)} tensors; expected one per rank (world_size {world})")
    for i, t in enumerate(tensors):
        _tensor(t, name, f"{arg}[{i}]")
        _same(t, f"{arg}[{i}]", tensor, "tensor" if arg != "input_list" else "output", name)
    return tensors


OFF = object()  # _resolve's answer on a rank outside the group: the collective does nothing


def _resolve(group, name, tensor=None):
    """The ProcessGroup the collective runs on; None on meta without any group (no rank exists there: nothing
    moves), OFF where this rank is not in group (after PyTorch's warning)."""
    if group is None and _state.pg is None and tensor is not None and tensor.device.type == "meta":
        return None
    if getattr(group, "simulated", False):  # the estimator's (distributed._comm.SimulatedGroup)
        if tensor is not None and tensor.device.type != "meta":
            raise ValueError(f"{name}: a simulated group (the estimator's) takes meta tensors only, got "
                             f"{tensor.device}")
        return None
    pg = _group(group, name)
    if pg is None:
        _warn_not_in_group(name)
        return OFF
    return pg


def _world(pg):
    """The group's size, or None on meta without a group."""
    return None if pg is None else pg.size()


def _rank(pg):
    return 0 if pg is None else pg.rank()


def _root(pg, global_rank, group_rank, name, arg):
    """The root's rank in pg: group_rank (group_src / group_dst) when given, else global_rank (src / dst) looked up
    in the group's ranks."""
    if group_rank is not None:
        return group_rank
    if pg is None or pg is _state.pg:
        return global_rank
    if global_rank not in pg._ranks:
        raise ValueError(f"{name}: {arg}={global_rank} is not in the group (its global ranks are {pg._ranks})")
    return pg._ranks.index(global_rank)


def _launch(name, kind, pg, out=None, inp=None, op=ReduceOp.SUM, root=0, async_op=False, inplace=False, then=None):
    """Start one C collective on out/inp (out is written; with inplace it is also read) in group pg (None: meta
    without a group), on any device, and return its Work (async_op) or wait for it. `then` runs when it
    completed."""
    t = out if out is not None else inp
    dev = t.device.type if t is not None else "cpu"
    after = [] if then is None else [then]
    avg = op == ReduceOp.AVG
    if dev == "meta" or pg is None:
        requests = []
    else:
        pg_mod.prune_pending()
        nccl = _state.nccl if pg is _state.pg else None  # NCCL's communicator is the default group's
        if dev == "cuda" and nccl is not None and _nccl.handles(nccl, kind, out, inp):
            code = 4 if avg else _C_OP[op]  # NCCL averages itself (ncclAvg)
            requests = [_nccl.start(nccl, kind, out, inp, code, root, pg.size())]
            avg = False
        else:
            bufs = []
            for x, read in ((out, inplace), (inp, True)):
                if x is None or dev == "cpu":
                    bufs.append(x)
                    continue
                with category("communication"):  # host staging of a CUDA tensor
                    bufs.append(x.to("cpu") if read else empty(x.shape, dtype=x.dtype, device="cpu"))
            if dev != "cpu" and out is not None:
                host = bufs[0]
                after.insert(0, lambda: out.copy_(host))
            requests = [_Request(_C.dist_mpi_start(kind, bufs[0], bufs[1], _C_OP[op], root, pg._comm))]
        if avg and out is not None and (kind != "reduce" or pg.rank() == root):
            world = pg.size()
            after.insert(0 if dev == "cpu" else 1, lambda: _divide(out, world))

    def finish():
        with no_grad():  # copies into the caller's tensors are not part of any graph (they may be leaves)
            for f in after:
                f()

    work = Work(name, requests, finish if after else None, result=[out] if out is not None else [], pg=pg)
    if async_op:
        return work
    work.wait()
    return None


def _divide(t, n):
    t.div_(n)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce tensor across every rank, in place: every rank ends with the result."""
    _tensor(tensor, "all_reduce", "tensor")
    op = _op(op, "all_reduce", tensor.dtype)
    pg = _resolve(group, "all_reduce", tensor)
    if pg is OFF:
        return None
    return _launch("all_reduce", "all_reduce", pg, out=tensor, op=op, async_op=async_op, inplace=True)


def broadcast(tensor, src, group=None, async_op=False, group_src=None):
    """Copy rank src's tensor into tensor on every other rank."""
    _tensor(tensor, "broadcast", "tensor")
    pg = _resolve(group, "broadcast", tensor)
    if pg is OFF:
        return None
    src = _root(pg, src, group_src, "broadcast", "src")
    return _launch("broadcast", "broadcast", pg, out=tensor, root=src, async_op=async_op, inplace=True)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce tensor across every rank into rank dst's tensor (the others' are left as they were)."""
    _tensor(tensor, "reduce", "tensor")
    op = _op(op, "reduce", tensor.dtype)
    pg = _resolve(group, "reduce", tensor)
    if pg is OFF:
        return None
    dst = _root(pg, dst, group_dst, "reduce", "dst")
    return _launch("reduce", "reduce", pg, out=tensor, op=op, root=dst, async_op=async_op, inplace=True)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's input_tensor, in rank order, into output_tensor (world_size times as many elements)."""
    name = "all_gather_into_tensor"
    _tensor(output_tensor, name, "output_tensor")
    _tensor(input_tensor, name, "input_tensor")
    _same(output_tensor, "output_tensor", input_tensor, "input_tensor", name, numel=False)
    pg = _resolve(group, name, input_tensor)
    if pg is OFF:
        return None
    world = _world(pg)
    if world is not None and output_tensor.numel() != world * input_tensor.numel():
        raise ValueError(f"{name}: output_tensor has {output_tensor.numel()} elements; expected world_size "
                         f"({world}) x the {input_tensor.numel()} of input_tensor")
    return _launch(name, "all_gather", pg, out=output_tensor, inp=input_tensor, async_op=async_op)


def _scratch(n, like):
    with category("communication"):
        return empty((n,), dtype=like.dtype, device=like.device)


def _unpack(flat, tensors):
    n = tensors[0].numel()
    for i, t in enumerate(tensors):
        t.copy_(flat[i * n:(i + 1) * n].view(t.shape))


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's tensor, in rank order, into tensor_list (one tensor per rank, each like tensor)."""
    _tensor(tensor, "all_gather", "tensor")
    pg = _resolve(group, "all_gather", tensor)
    if pg is OFF:
        return None
    world = _world(pg)
    _list(tensor_list, tensor, "all_gather", "tensor_list", world if world is not None else len(tensor_list))
    flat = _scratch(len(tensor_list) * tensor.numel(), tensor)
    return _launch("all_gather", "all_gather", pg, out=flat, inp=tensor, async_op=async_op,
                   then=lambda: _unpack(flat, tensor_list))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):  # noqa: A002 (PyTorch's)
    """Reduce input across ranks and give rank r the r-th of world_size equal slices, into output."""
    name = "reduce_scatter_tensor"
    _tensor(output, name, "output")
    _tensor(input, name, "input")
    _same(input, "input", output, "output", name, numel=False)
    op = _op(op, name, output.dtype)
    pg = _resolve(group, name, output)
    if pg is OFF:
        return None
    world = _world(pg)
    if world is not None and input.numel() != world * output.numel():
        raise ValueError(f"{name}: input has {input.numel()} elements; expected world_size ({world}) x the "
                         f"{output.numel()} of output")
    return _launch(name, "reduce_scatter", pg, out=output, inp=input, op=op, async_op=async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce input_list[r] across ranks into rank r's output."""
    _tensor(output, "reduce_scatter", "output")
    op = _op(op, "reduce_scatter", output.dtype)
    pg = _resolve(group, "reduce_scatter", output)
    if pg is OFF:
        return None
    world = _world(pg)
    _list(input_list, output, "reduce_scatter", "input_list", world if world is not None else len(input_list))
    with category("communication"):
        flat = cat([t.reshape(-1) for t in input_list]) if input_list else _scratch(0, output)
    return _launch("reduce_scatter", "reduce_scatter", pg, out=output, inp=flat, op=op, async_op=async_op)


def _root_list(pg, lst, tensor, op, name, root, root_name):
    """gather's and scatter's list: checked on the root rank (True there), refused unless empty elsewhere."""
    world = _world(pg)
    if _rank(pg) != root:
        if lst:
            raise ValueError(f"{op}: {name} must be None or empty on ranks other than {root_name} ({root})")
        return False
    if lst is None:
        raise ValueError(f"{op}: rank {root} ({root_name}) needs a {name}")
    _list(lst, tensor, op, name, world if world is not None else len(lst))
    return True


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False, group_dst=None):
    """Every rank's tensor, in rank order, into gather_list on rank dst (None elsewhere)."""
    _tensor(tensor, "gather", "tensor")
    pg = _resolve(group, "gather", tensor)
    if pg is OFF:
        return None
    dst = _root(pg, dst, group_dst, "gather", "dst")
    flat = None
    if _root_list(pg, gather_list, tensor, "gather", "gather_list", dst, "dst"):
        flat = _scratch(len(gather_list) * tensor.numel(), tensor)
    return _launch("gather", "gather", pg, out=flat, inp=tensor, root=dst, async_op=async_op,
                   then=None if flat is None else (lambda: _unpack(flat, gather_list)))


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False, group_src=None):
    """Rank src's scatter_list[r] into rank r's tensor."""
    _tensor(tensor, "scatter", "tensor")
    pg = _resolve(group, "scatter", tensor)
    if pg is OFF:
        return None
    src = _root(pg, src, group_src, "scatter", "src")
    flat = None
    if _root_list(pg, scatter_list, tensor, "scatter", "scatter_list", src, "src"):
        with category("communication"):
            flat = cat([t.reshape(-1) for t in scatter_list])
    return _launch("scatter", "scatter", pg, out=tensor, inp=flat, root=src, async_op=async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank reached the barrier (with the process group's timeout)."""
    pg = _resolve(group, "barrier")
    if pg is OFF:
        return None
    return _launch("barrier", "barrier", pg, async_op=async_op)
