"""Worker of tests/test_cuda_distributed.py on a GPU machine with NCCL: CUDA tensors through NCCL (backend "nccl",
the unique id broadcast over MPI), checked against NumPy on every rank; int16 (which NCCL lacks) and gather go
through MPI with host staging in the same group."""
import numpy as np

import gpumemnet as gm
import gpumemnet.distributed as dist

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "nccl"
dev = f"cuda:{dist.process_group._state.nccl['device']}"


def data(r, n):
    return ((np.arange(n) * 5 + r * 3) % 13).astype(np.float32)


def check(t, want, what):
    got = (t.float() if t.dtype == gm.bfloat16 else t).cpu().numpy()
    assert np.array_equal(got, np.asarray(want, dtype=got.dtype)), f"rank {rank}: {what}: got {got}, want {want}"


n = 4099
xs = [data(r, n) for r in range(world)]
for dt in (gm.float32, gm.float16, gm.bfloat16, gm.float64, gm.int64, gm.int32, gm.int16):
    t = gm.from_numpy(xs[rank]).to(dt).to(dev)
    dist.all_reduce(t)
    check(t, sum(xs), f"all_reduce {dt}")
    t = gm.from_numpy(xs[rank]).to(dt).to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check(t, np.max(xs, 0), f"all_reduce MAX {dt}")
t = gm.from_numpy(xs[rank]).to(dev)
dist.all_reduce(t, op=dist.ReduceOp.AVG)
check(t, (sum(xs) / world).astype(np.float32), "all_reduce AVG")
b = gm.from_numpy(xs[rank] > 6).to(dev)
dist.all_reduce(b)
check(b, np.any([x > 6 for x in xs], 0), "all_reduce bool")
t = gm.from_numpy(xs[rank]).to(dev)
dist.broadcast(t, world - 1)
check(t, xs[world - 1], "broadcast")
t = gm.from_numpy(xs[rank]).to(dev)
dist.reduce(t, 0)
check(t, sum(xs) if rank == 0 else xs[rank], "reduce")
outs = [gm.zeros(n, device=dev) for _ in range(world)]
dist.all_gather(outs, gm.from_numpy(xs[rank]).to(dev))
for r in range(world):
    check(outs[r], xs[r], f"all_gather [{r}]")
k = 7
ins = [data(r + 20, world * k) for r in range(world)]
out = gm.zeros(k, device=dev)
dist.reduce_scatter_tensor(out, gm.from_numpy(ins[rank]).to(dev))
check(out, sum(ins)[rank * k:(rank + 1) * k], "reduce_scatter_tensor")
lst = [gm.zeros(n, device=dev) for _ in range(world)] if rank == 0 else None
dist.gather(gm.from_numpy(xs[rank]).to(dev), lst, dst=0)  # no NCCL gather: staged through MPI
if rank == 0:
    for r in range(world):
        check(lst[r], xs[r], f"gather [{r}]")
ws = [dist.all_reduce(gm.full((1 << 20,), float(i), device=dev), async_op=True) for i in range(4)]
assert all(w.wait() for w in ws) and all(w.is_completed() for w in ws)
dist.destroy_process_group()
print(f"OK rank {rank}", flush=True)
