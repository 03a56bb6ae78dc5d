"""Worker of tests/test_cuda_distributed.py: CUDA tensors through MPI with host staging (no NCCL: the emulator has
none), checked against NumPy on every rank, and the staging counted under `communication` on the host."""
import numpy as np

import gpumemnet as gm
import gpumemnet.distributed as dist

dist.init_process_group()  # None: NCCL where it is found; the emulator has none, so MPI with staging
rank, world = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "mpi", dist.get_backend()


def data(r, n):
    return ((np.arange(n) * 5 + r * 3) % 13).astype(np.float32)


def check(t, want, what):
    assert t.device.type == "cuda", what
    got = t.cpu().numpy()
    assert np.array_equal(got, want), f"rank {rank}: {what}: got {got}, want {want}"


n = 1000
xs = [data(r, n) for r in range(world)]
gm.memory.reset_peak_memory_stats("cpu")
cuda_before = gm.memory.memory_allocated("cuda")
t = gm.from_numpy(xs[rank]).cuda()
dist.all_reduce(t)
check(t, sum(xs), "all_reduce")
host = gm.memory.memory_stats("cpu")["by_category"]["communication"]
assert host["peak"] == 4096 and host["current"] == 0, host  # the 4000-byte staging copy, one 512-rounded block

t = gm.from_numpy(xs[rank]).cuda()
dist.all_reduce(t, op=dist.ReduceOp.AVG)
check(t, (sum(xs) / world).astype(np.float32), "all_reduce AVG")
t = gm.from_numpy(xs[rank]).to(gm.float16).cuda()
dist.all_reduce(t, op=dist.ReduceOp.MAX)
check(t, np.max(xs, 0).astype(np.float16), "all_reduce float16 MAX")

t = gm.from_numpy(xs[rank]).cuda()
dist.broadcast(t, world - 1)
check(t, xs[world - 1], "broadcast")

outs = [gm.zeros(n, device="cuda") for _ in range(world)]
dist.all_gather(outs, gm.from_numpy(xs[rank]).cuda())
for r in range(world):
    check(outs[r], xs[r], f"all_gather [{r}]")
flat = gm.zeros(world * n, device="cuda")
dist.all_gather_into_tensor(flat, gm.from_numpy(xs[rank]).cuda())
check(flat, np.concatenate(xs), "all_gather_into_tensor")

k = n // 10
out = gm.zeros(k, device="cuda")
big = [np.tile(x[:k], world) + r for r, x in enumerate(xs)]
dist.reduce_scatter_tensor(out, gm.from_numpy(big[rank]).cuda())
check(out, sum(big)[rank * k:(rank + 1) * k], "reduce_scatter_tensor")

t = gm.from_numpy(xs[rank]).cuda()
dist.reduce(t, 0)
check(t, sum(xs) if rank == 0 else xs[rank], "reduce")

t = gm.from_numpy(xs[rank]).cuda()
w = dist.all_reduce(t, async_op=True)
w.wait()
check(t, sum(xs), "async all_reduce")

del t, outs, flat, out, w
assert gm.memory.memory_stats("cpu")["by_category"]["communication"]["current"] == 0
assert gm.memory.memory_allocated("cuda") == cuda_before
dist.destroy_process_group()
print(f"OK rank {rank}", flush=True)
