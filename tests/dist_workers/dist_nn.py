"""Worker of tests/test_distributed_collectives.py::test_differentiable_collectives, run under `mpiexec -n N`:
torch.distributed.nn.functional's all_reduce, all_gather and broadcast give the collective's values and carry
gradients back across ranks as PyTorch's (checked on every rank against the sums NumPy computes from every
rank's known inputs). Prints 'OK rank r'."""
import numpy as np

import gpumemnet as gm
import gpumemnet.distributed as dist
from gpumemnet.distributed.nn import functional as dnf

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()


def inp(r):
    return np.arange(4.0) + 10 * r


x = gm.tensor(inp(rank), dtype=gm.float64, requires_grad=True)
w = gm.tensor(np.arange(4.0) + 1 + rank, dtype=gm.float64)  # each rank weighs the result differently
y = dnf.all_reduce(x * 2)
assert np.allclose(y.detach().numpy(), 2 * sum(inp(r) for r in range(world)))
(y * w).sum().backward()
# d/dx_rank of sum_r (w_r . sum_s 2 x_s) = 2 sum_r w_r
assert np.allclose(x.grad.numpy(), 2 * sum(np.arange(4.0) + 1 + r for r in range(world))), x.grad

x.grad = None
parts = dnf.all_gather(x)
assert len(parts) == world and all(np.allclose(p.detach().numpy(), inp(r)) for r, p in enumerate(parts))
sum((p * (r + 1) * (rank + 1)).sum() for r, p in enumerate(parts)).backward()
# rank s's piece gets (s + 1) * sum_r (r + 1) from every rank's loss
assert np.allclose(x.grad.numpy(), (rank + 1) * sum(r + 1 for r in range(world))), x.grad

x.grad = None
b = dnf.broadcast(x, src=1)
assert np.allclose(b.detach().numpy(), inp(1))
(b * (rank + 1)).sum().backward()
expect = sum(r + 1 for r in range(world)) if rank == 1 else 0.0
assert np.allclose(x.grad.numpy(), expect), x.grad
print(f"OK rank {rank}", flush=True)
