"""Worker of tests/test_ddp_mpi.py and tests/test_zero_mpi.py, run under `mpiexec -n N`: data parallel training
over MPI checked on every rank. Modes (argv[1]):
  ddp      DDP on N ranks with batch B/N each matches one process with batch B (computed here by every rank):
           gradients and parameters after several Adam steps; then the same with no_sync accumulation;
  zero1/2  ZeroRedundancyOptimizer stage 1 (under DDP) / 2 (alone) matches plain Adam, and this rank's optimizer
           state, measured by the allocator, is 1/N of plain Adam's;
  syncbn   the digits CNN with SyncBatchNorm on N ranks of B/N matches it with BatchNorm in one process of batch
           B, and this rank's estimate equals its measured first step;
  memory   (argv[2] = zero 0|1|2) gm.memory.estimate(..., world_size=N, zero=z, rank=r) before the step equals this
           rank's measured step: the wrapper's bytes, the step's peak and the whole process's peak.
Prints 'OK rank r' (and figures as 'FIG ...') when every check passed; a failure raises, and the excepthook of
gpumemnet.distributed aborts every rank."""
import gc
import sys

import numpy as np

import gpumemnet as gm
import gpumemnet.distributed as dist
import gpumemnet.nn.functional as F
from gpumemnet.demo import make_model
from gpumemnet.distributed.optim import ZeroRedundancyOptimizer
from gpumemnet.nn.parallel import DistributedDataParallel as DDP
from rank_step import measured_step

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
mode = sys.argv[1]
B = 12  # divisible by 2 and by 3


def net(seed=0, hidden=16):
    """A CNN without BatchNorm (its batch statistics are per rank, so B/N per rank is not batch B)."""
    gm.manual_seed(seed)
    return gm.nn.Sequential(gm.nn.Conv2d(1, 4, 3, padding=1), gm.nn.ReLU(), gm.nn.MaxPool2d(2), gm.nn.Flatten(),
                            gm.nn.Linear(4 * 4 * 4, hidden), gm.nn.ReLU(), gm.nn.Linear(hidden, 10))


def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((B, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, B)


def close(a, b, what, rtol=1e-4, atol=1e-5):
    if not np.allclose(a, b, rtol=rtol, atol=atol):
        raise AssertionError(f"rank {rank}: {what}: max abs diff {np.abs(a - b).max()}")


def train(model, opt, x, y, steps, accumulate=1, ddp=None):
    for _ in range(steps):
        opt.zero_grad()
        m = len(x) // accumulate
        for k in range(accumulate):
            sync = ddp is None or k == accumulate - 1
            ctx = ddp.no_sync() if not sync else _Null()
            with ctx:
                loss = F.cross_entropy(model(gm.tensor(x[k * m:(k + 1) * m])), gm.tensor(y[k * m:(k + 1) * m]))
                (loss / accumulate).backward()
        opt.step()


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def mine(x, y):
    per = len(x) // world
    return x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]


def check_ddp():
    x, y = data()
    for accumulate in (1, 2):
        ref = net()
        train(ref, gm.optim.Adam(ref.parameters(), lr=1e-2), x, y, 3, accumulate)
        model = net(seed=rank)  # different weights: DDP starts every rank from rank 0's
        ddp = DDP(model, bucket_cap_mb=0.001)  # several buckets, launched during backward
        xr, yr = mine(x, y)
        train(ddp, gm.optim.Adam(ddp.parameters(), lr=1e-2), xr, yr, 3, accumulate, ddp)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            close(p.detach().numpy(), q.detach().numpy(), f"accumulate={accumulate} parameter {name}")
            close(p.grad.numpy(), q.grad.numpy(), f"accumulate={accumulate} gradient of {name}", atol=1e-6)


def opt_bytes():
    return gm.memory.memory_stats("cpu")["by_category"]["optimizer"]["current"]


def check_zero(stage):
    x, y = data()
    ref = net(hidden=256)  # large enough that the allocator's rounding of each state tensor stays small beside it
    gc.collect()
    o0 = opt_bytes()
    ref_opt = gm.optim.Adam(ref.parameters(), lr=1e-2)
    train(ref, ref_opt, x, y, 3)
    plain = opt_bytes() - o0
    model = net(seed=0 if stage == 1 else rank, hidden=256)  # stage 2 broadcasts rank 0's parameters itself
    wrapped = DDP(model) if stage == 1 else model
    gc.collect()
    o0 = opt_bytes()
    opt = ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=gm.optim.Adam, stage=stage, lr=1e-2)
    xr, yr = mine(x, y)
    train(wrapped, opt, xr, yr, 3)
    held = opt_bytes() - o0
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p.detach().numpy(), q.detach().numpy(), f"ZeRO-{stage} parameter {name}")
    elems = sum(v.numel() for st in opt.optim.state.values() for v in st.values() if isinstance(v, gm.Tensor))
    total = sum(p.numel() for p in model.parameters())
    if abs(elems - 2 * total / world) > 2:  # one bucket: 1/N of the elements, up to padding
        raise AssertionError(f"rank {rank}: {elems} state elements, expected 2 x {total} / {world}")
    # exp_avg and exp_avg_sq of each piece are allocator blocks rounded up to 512 bytes
    if not 8 * elems / 2 <= held <= plain / world + 2 * 512 * len(opt._pieces):
        raise AssertionError(f"rank {rank}: optimizer bytes {held} for {elems} state elements in "
                             f"{len(opt._pieces)} pieces, plain Adam {plain}, world {world}")
    print(f"FIG zero{stage} rank {rank} optimizer_bytes {held} plain_adam {plain}", flush=True)
    opt.consolidate_state_dict(to=0)
    if rank == 0:
        sd = opt.state_dict()
        want = ref_opt.state_dict()["state"]
        for i, st in want.items():
            close(sd["state"][i]["exp_avg"].numpy(), st["exp_avg"].numpy(), f"consolidated exp_avg {i}", atol=1e-6)


def check_memory(zero):
    gm.manual_seed(0)
    model = make_model(16)
    x, y = gm.randn(8, 1, 8, 8), gm.randint(0, 10, (8,))
    est = gm.memory.estimate(model, (1, 8, 8), loss_fn=F.cross_entropy, target=y, batch_size=8,
                             world_size=world, zero=zero, rank=rank)
    gc.collect()
    gm.memory.empty_cache("cpu")
    gm.memory.reset_peak_memory_stats("cpu")
    held, peak, whole = measured_step(model, x, y, zero)
    stats = gm.memory.memory_stats("cpu")
    got = (held, peak, whole)
    want = (est.comm_bytes, est.peak, est.total)
    if got != want:
        raise AssertionError(f"rank {rank} zero={zero}: measured (buckets, step peak, process peak) {got}, "
                             f"estimated {want}")
    print(f"FIG memory zero{zero} rank {rank} peak {whole} comm {held} "
          f"communication_at_peak {stats['at_peak']['by_category']['communication']}", flush=True)


def check_syncbn():
    x, y = data()
    gm.manual_seed(0)
    ref = make_model(16)
    train(ref, gm.optim.Adam(ref.parameters(), lr=1e-2), x, y, 3)
    gm.manual_seed(0)
    model = gm.nn.SyncBatchNorm.convert_sync_batchnorm(make_model(16))
    xr, yr = mine(x, y)
    est = gm.memory.estimate(model, (1, 8, 8), loss_fn=F.cross_entropy, target=gm.tensor(yr), batch_size=len(xr),
                             world_size=world, rank=rank)
    ddp = DDP(model)
    xb, yb = gm.tensor(xr), gm.tensor(yr)
    opt = gm.optim.Adam(ddp.parameters(), lr=1e-2)
    gc.collect()
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    F.cross_entropy(ddp(xb), yb).backward()
    opt.step()
    first = gm.memory.max_memory_allocated("cpu") - base
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(ddp(xb), yb).backward()
        opt.step()
    peak = gm.memory.max_memory_allocated("cpu") - base  # the highest of the three steps
    if (first, peak) != (est.first_step_peak, est.peak):
        raise AssertionError(f"rank {rank}: SyncBatchNorm first step peak {first} and steps' peak {peak}, "
                             f"estimated {est.first_step_peak} and {est.peak}")
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p.detach().numpy(), q.detach().numpy(), f"SyncBatchNorm parameter {name}")
    for (name, b), c in zip(model.named_buffers(), ref.buffers()):
        close(b.numpy().astype(np.float64), c.numpy().astype(np.float64), f"SyncBatchNorm buffer {name}")


if mode == "ddp":
    check_ddp()
elif mode in ("zero1", "zero2"):
    check_zero(int(mode[-1]))
elif mode == "syncbn":
    check_syncbn()
elif mode == "memory":
    check_memory(int(sys.argv[2]))
else:
    raise SystemExit(f"unknown mode {mode}")
dist.barrier()
print(f"OK rank {rank}", flush=True)
dist.destroy_process_group()
