"""Worker of tests/test_distributed_collectives.py, run under `mpiexec -n N`: every collective, dtype and reduce
op, checked on every rank against NumPy (each rank can compute every other rank's input: it depends only on the
rank). Prints 'OK rank r' when every check passed; any failure raises, and the excepthook aborts every rank."""
import sys

import numpy as np

import gpumemnet as gm
import gpumemnet.distributed as dist

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi"

DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
          "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}


def data(r, n, dt, small=False):
    """Rank r's input: small integers (exact in every dtype and under every op)."""
    v = (np.arange(n) * 7 + r * 3) % (3 if small else 11) + (1 if small else 0)
    if dt == "bool":
        return (v + r) % 2 == 1
    return v.astype(DTYPES.get(dt, np.float32))


def gm_of(a, dt):
    t = gm.from_numpy(np.ascontiguousarray(a))
    return t.to(gm.bfloat16) if dt == "bfloat16" else t


def np_of(t):
    return (t.float() if t.dtype == gm.bfloat16 else t).numpy()


def check(got, want, what):
    got = np_of(got) if isinstance(got, gm.Tensor) else got
    if not np.array_equal(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)):
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, want {want!r}")


REF = {"SUM": lambda xs: np.sum(xs, axis=0), "PRODUCT": lambda xs: np.prod(xs, axis=0),
       "MIN": lambda xs: np.min(xs, axis=0), "MAX": lambda xs: np.max(xs, axis=0)}

# all_reduce: every dtype x op
n = 37
for dt in list(DTYPES) + ["bfloat16"]:
    for op in ("SUM", "PRODUCT", "MIN", "MAX"):
        small = op == "PRODUCT"
        t = gm_of(data(rank, n, dt, small), dt)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        xs = np.stack([data(r, n, dt, small).astype(np.float64) for r in range(world)])
        if dt == "bool":
            want = (xs.max(0) if op in ("SUM", "MAX") else xs.min(0)) > 0  # SUM = or, PRODUCT = and (PyTorch's)
        else:
            want = REF[op](xs)
        check(t, want, f"all_reduce {dt} {op}")
    if dt in ("float32", "float64", "float16", "bfloat16"):
        t = gm_of(data(rank, n, dt), dt)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        want = np.mean(np.stack([data(r, n, dt).astype(np.float64) for r in range(world)]), 0)
        want = gm_of(want.astype(DTYPES.get(dt, np.float32)), dt)  # rounded to the dtype as the result is
        check(t, np_of(want), f"all_reduce {dt} AVG")

# a large one (MPI's rendezvous protocol; the GIL is released while waiting)
big = gm.full((1 << 20,), float(rank + 1))
dist.all_reduce(big)
check(big[:5], [world * (world + 1) / 2] * 5, "all_reduce 1M")

# broadcast from every rank
for src in range(world):
    t = gm_of(data(rank, 10, "float32"), "float32")
    dist.broadcast(t, src)
    check(t, data(src, 10, "float32"), f"broadcast src={src}")

# reduce to every rank
for dst in range(world):
    t = gm_of(data(rank, 9, "int64"), "int64")
    dist.reduce(t, dst, op=dist.ReduceOp.SUM)
    want = sum(data(r, 9, "int64") for r in range(world)) if rank == dst else data(rank, 9, "int64")
    check(t, want, f"reduce dst={dst}")

# all_gather (list and flat), shapes (2, 3)
for dt in ("float32", "int32", "bfloat16"):
    mine = gm_of(data(rank, 6, dt).reshape(2, 3), dt)
    outs = [gm.zeros((2, 3), dtype=mine.dtype) for _ in range(world)]
    dist.all_gather(outs, mine)
    for r in range(world):
        check(outs[r], data(r, 6, dt).reshape(2, 3), f"all_gather {dt} [{r}]")
    flat = gm.zeros((world * 2, 3), dtype=mine.dtype)
    dist.all_gather_into_tensor(flat, mine)
    check(flat, np.concatenate([data(r, 6, dt).reshape(2, 3) for r in range(world)]), f"all_gather_into_tensor {dt}")

# reduce_scatter (list and flat)
k = 5
full_in = [data(r, world * k, "float64") for r in range(world)]
out = gm.zeros(k, dtype=gm.float64)
dist.reduce_scatter_tensor(out, gm_of(full_in[rank], "float64"))
check(out, sum(full_in)[rank * k:(rank + 1) * k], "reduce_scatter_tensor")
out = gm.zeros(k, dtype=gm.float64)
dist.reduce_scatter(out, [gm_of(full_in[rank][i * k:(i + 1) * k], "float64") for i in range(world)],
                    op=dist.ReduceOp.MAX)
check(out, np.max(np.stack(full_in), 0)[rank * k:(rank + 1) * k], "reduce_scatter MAX")
out = gm.zeros(k, dtype=gm.float32)
dist.reduce_scatter_tensor(out, gm_of(full_in[rank].astype(np.float32), "float32"), op=dist.ReduceOp.AVG)
check(out, (sum(full_in) / world)[rank * k:(rank + 1) * k].astype(np.float32), "reduce_scatter_tensor AVG")

# gather and scatter
for root in range(world):
    lst = [gm.zeros(4) for _ in range(world)] if rank == root else None
    dist.gather(gm_of(data(rank, 4, "float32"), "float32"), lst, dst=root)
    if rank == root:
        for r in range(world):
            check(lst[r], data(r, 4, "float32"), f"gather [{r}]")
    t = gm.zeros(4)
    src_list = [gm_of(data(r + 10, 4, "float32"), "float32") for r in range(world)] if rank == root else None
    dist.scatter(t, src_list, src=root)
    check(t, data(rank + 10, 4, "float32"), "scatter")

# async: several in flight at once, waited in the other order
a = gm.full((1000,), float(rank))
b = gm.full((3,), 2.0 ** rank)
wa = dist.all_reduce(a, async_op=True)
wb = dist.all_reduce(b, op=dist.ReduceOp.PRODUCT, async_op=True)
assert isinstance(wa, dist.Work)
assert wb.wait() is True and wa.wait() is True and wa.is_completed() and wb.is_completed()
check(a[:3], [sum(range(world))] * 3, "async all_reduce")
check(b, [2.0 ** sum(range(world))] * 3, "async all_reduce PRODUCT")
w = dist.barrier(async_op=True)
while not w.is_completed():
    pass
dist.barrier()

# objects
objs = [{"rank": rank, "x": [1, 2]}, "s" * (rank + 1), None]
dist.broadcast_object_list(objs, src=world - 1)
assert objs == [{"rank": world - 1, "x": [1, 2]}, "s" * world, None], objs
got = [None] * world
dist.all_gather_object(got, ("r", rank, "y" * rank))
assert got == [("r", r, "y" * r) for r in range(world)], got
got = [None] * world if rank == 0 else None
dist.gather_object({"r": rank}, got, dst=0)
assert rank != 0 or got == [{"r": r} for r in range(world)], got
out = [None]
dist.scatter_object_list(out, [f"to {r}" for r in range(world)] if rank == 1 else None, src=1)
assert out == [f"to {rank}"], out

# scratch and staging are tagged `communication`, and freed when the collective returns
gm.memory.reset_peak_memory_stats("cpu")
mine = gm.ones(4096)
outs = [gm.zeros(4096) for _ in range(world)]
dist.all_gather(outs, mine)
stats = gm.memory.memory_stats("cpu")["by_category"]["communication"]
assert stats["peak"] == world * 4096 * 4 and stats["current"] == 0, stats

# errors: named arguments, raised on every rank before anything is sent
def raises(exc, match, f, *a, **k):
    try:
        f(*a, **k)
    except exc as e:
        assert match in str(e), (match, str(e))
        return
    raise AssertionError(f"{f.__name__} did not raise {exc.__name__} ({match})")


m = gm.zeros(4, 6)
raises(ValueError, "tensor must be contiguous", dist.all_reduce, m[:, ::2])
raises(ValueError, "ReduceOp.AVG needs a floating-point", dist.all_reduce, gm.zeros(3, dtype=gm.int64),
       op=dist.ReduceOp.AVG)
raises(ValueError, "tensor_list has 1 tensors; expected one per rank", dist.all_gather, [gm.zeros(2)], gm.zeros(2))
raises(ValueError, "tensor_list[1] has shape (3,)", dist.all_gather,
       [gm.zeros(2)] + [gm.zeros(3)] * (world - 1), gm.zeros(2))
raises(ValueError, "output_tensor has 5 elements; expected world_size", dist.all_gather_into_tensor,
       gm.zeros(5), gm.zeros(2))
raises(TypeError, "must have the same dtype", dist.all_gather_into_tensor, gm.zeros(2 * world, dtype=gm.float64),
       gm.zeros(2))
raises(TypeError, "tensor must be a Tensor", dist.all_reduce, np.zeros(3))
raises(ValueError, "group must be None (the default group) or a group from new_group", dist.all_reduce,
       gm.zeros(2), group=object())
raises(ValueError, "twice", dist.init_process_group, "mpi")
dist.barrier()

# meta: nothing moves, the scratch is allocated as on the CPU
mt = gm.empty(8, device="meta")
assert dist.all_reduce(mt) is None
assert dist.all_reduce(mt, async_op=True).is_completed()

# a leaf that requires grad is written in place as PyTorch's collectives do (no autograd error)
leaf = gm.ones(3, requires_grad=True)
dist.all_reduce(leaf, op=dist.ReduceOp.AVG)
check(leaf.detach(), [1.0] * 3, "all_reduce of a leaf")

dist.destroy_process_group()
assert not dist.is_initialized()
# MPI stays up: the group can be made again (MPI_Finalize waits for the interpreter's exit)
dist.init_process_group("mpi")
t = gm.ones(2)
dist.all_reduce(t)
check(t, [world] * 2, "all_reduce after a second init_process_group")
dist.destroy_process_group()
print(f"OK rank {rank}", flush=True)
