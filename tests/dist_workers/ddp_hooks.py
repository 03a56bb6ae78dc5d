"""Worker of tests/test_ddp_hooks_mpi.py, run under `mpiexec -n 2`: DistributedDataParallel's communication hooks
and bucket rebuild over MPI, checked on every rank. Modes (argv[1]):
  hooks   allreduce_hook gives DDP's own result bit for bit; fp16_compress_hook / bf16_compress_hook give, bit for
          bit, what their definition computes from every rank's local gradients (each rank computes them all:
          they depend only on the rank's slice); several steps with the fp16 hook stay within fp16 rounding of one
          process with the whole batch; buckets are rebuilt after the first iteration. Then memory:
          estimate(..., world_size=2, comm_hook=fp16_compress_hook) equals this rank's measured first step, and
          holds the compressed copy in category communication at its peak, where the estimate without it does not;
  torch   PyTorch's own DDP (gloo, between the same two processes) with PyTorch's fp16 and bf16 hooks on the same
          weights and data gives the same gradients as gpumemnet's DDP with gpumemnet's hooks.
Prints 'OK rank r' when every check passed; a failure raises, and the excepthook aborts every rank."""
import gc
import os
import sys

import numpy as np

import gpumemnet as gm
import gpumemnet.distributed as dist
import gpumemnet.nn.functional as F
from gpumemnet.distributed.algorithms.ddp_comm_hooks import default_hooks as hooks
from gpumemnet.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
mode = sys.argv[1]
B = 8


def net(seed=0):
    gm.manual_seed(seed)
    return gm.nn.Sequential(gm.nn.Linear(6, 16), gm.nn.Tanh(), gm.nn.Linear(16, 3))


def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((B, 6)).astype(np.float32), rng.integers(0, 3, B)


def piece(a, r):
    per = len(a) // world
    return a[r * per:(r + 1) * per]


def local_grads(model, x, y):
    """[per parameter: gradient of rank r's loss] for every rank r (no communication)."""
    out = []
    for r in range(world):
        model.zero_grad()
        F.cross_entropy(model(gm.tensor(piece(x, r))), gm.tensor(piece(y, r))).backward()
        out.append([p.grad.numpy().copy() for p in model.parameters()])
    model.zero_grad()
    return out


def ddp_grads(hook, steps=1, cap=None):
    x, y = data()
    model = net(seed=rank)  # rank 0's weights win
    ddp = DDP(model, bucket_cap_mb=cap)
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    opt = gm.optim.Adam(ddp.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(ddp(gm.tensor(piece(x, rank))), gm.tensor(piece(y, rank))).backward()
        if steps > 1:
            opt.step()
    return ddp, [p.grad.numpy().copy() for p in model.parameters()], [p.detach().numpy().copy() for p in
                                                                        model.parameters()]


def half_sum(grads, npdtype):
    """The compress hooks' definition: each rank's bucket cast to 16 bits and divided by the world size there,
    summed in float32 and rounded to 16 bits per pair (csrc/dist_mpi.c's reduction), cast back to float32."""
    def cast(a):
        if npdtype == "bfloat16":  # round to nearest even on the top 16 bits of float32
            u = np.asarray(a, np.float32).view(np.uint32)
            u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
            return u.view(np.float32)
        return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)
    parts = [cast(cast(g) / world) for g in grads]
    acc = parts[0]
    for p in parts[1:]:
        acc = cast(acc + p)
    return acc


def check_hooks():
    _, plain, _ = ddp_grads(None)
    _, via_hook, _ = ddp_grads(hooks.allreduce_hook)
    for a, b in zip(via_hook, plain):
        assert np.array_equal(a, b), f"rank {rank}: allreduce_hook differs from DDP without a hook"
    x, y = data()
    local = local_grads(net(0), x, y)
    for name, hook in (("float16", hooks.fp16_compress_hook), ("bfloat16", hooks.bf16_compress_hook)):
        _, got, _ = ddp_grads(hook)
        for i, g in enumerate(got):
            want = half_sum([local[r][i] for r in range(world)], name)
            assert np.array_equal(g, want), \
                f"rank {rank}: {name} hook, parameter {i}: max diff {np.abs(g - want).max()}"
        assert any(not np.array_equal(g, p) for g, p in zip(got, plain)), f"{name}: nothing was compressed"
    # several Adam steps with the fp16 hook, small buckets: within fp16 rounding of one process with batch B
    ddp, _, params = ddp_grads(hooks.fp16_compress_hook, steps=3, cap=0.0002)
    assert len(ddp.bucket_sizes()) > 1, ddp.bucket_sizes()  # rebuilt after the first iteration
    ref = net(0)
    opt = gm.optim.Adam(ref.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(ref(gm.tensor(x)), gm.tensor(y)).backward()
        opt.step()
    for p, q in zip(params, ref.parameters()):
        np.testing.assert_allclose(p, q.detach().numpy(), rtol=1e-3, atol=1e-3)
    raises = False
    try:
        ddp.register_comm_hook(None, hooks.allreduce_hook)
    except RuntimeError as e:
        raises = "can only be called once" in str(e)
    assert raises


def check_torch():
    import torch
    import torch.distributed as tdist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as thooks
    port = [None]
    if rank == 0:
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port[0] = s.getsockname()[1]
    dist.broadcast_object_list(port, 0)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port[0]))
    tdist.init_process_group("gloo", rank=rank, world_size=world)
    for hook_name in ("fp16_compress_hook", "bf16_compress_hook"):
        compare_with_torch(torch, thooks, hook_name)
    tdist.destroy_process_group()


def compare_with_torch(torch, thooks, hook_name):
    x, y = data()
    model = net(0)
    tmodel = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for tp, p in zip(tmodel.parameters(), model.parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy()))
    tddp = torch.nn.parallel.DistributedDataParallel(tmodel)
    tddp.register_comm_hook(None, getattr(thooks, hook_name))
    torch.nn.functional.cross_entropy(tddp(torch.from_numpy(piece(x, rank))),
                                      torch.from_numpy(piece(y, rank))).backward()
    _, got, _ = ddp_grads(getattr(hooks, hook_name))
    # Both compress to 16 bits: local gradients that differ in float32's last bits may round to neighbouring
    # 16-bit values, hence one 16-bit step of tolerance (2^-11 relative for float16, 2^-8 for bfloat16).
    rtol = 2 ** -10 if hook_name.startswith("fp16") else 2 ** -7
    for i, (tp, g) in enumerate(zip(tmodel.parameters(), got)):
        np.testing.assert_allclose(g, tp.grad.numpy(), rtol=rtol, atol=1e-6, err_msg=f"{hook_name} parameter {i}")


def check_memory():
    gm.manual_seed(0)
    model = gm.nn.Sequential(gm.nn.Linear(128, 256), gm.nn.Linear(256, 128))  # large weights, small activations
    x, y = gm.randn(2, 128), gm.randn(2, 128)
    kw = dict(loss_fn=F.mse_loss, target=y, batch_size=2, optimizer=lambda ps: gm.optim.SGD(ps, lr=0.1),
              world_size=world, rank=rank)
    plain = gm.memory.estimate(model, (128,), **kw)
    est = gm.memory.estimate(model, (128,), comm_hook=hooks.fp16_compress_hook, **kw)
    gc.collect()
    gm.memory.empty_cache("cpu")
    a0 = gm.memory.memory_allocated("cpu")
    ddp = DDP(model)
    ddp.register_comm_hook(None, hooks.fp16_compress_hook)
    held = gm.memory.memory_allocated("cpu") - a0
    opt = gm.optim.SGD(model.parameters(), lr=0.1)
    gc.collect()
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    for _ in range(3):  # the estimate's peak is the highest step's (the buckets are rebuilt after the first)
        loss = F.mse_loss(ddp(x), y)
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad()
    stats = gm.memory.memory_stats("cpu")
    got = (held, stats["allocated"]["peak"] - base, stats["allocated"]["peak"])
    want = (est.comm_bytes, est.peak, est.total)
    assert got == want, f"rank {rank}: measured (buckets, step peak, process peak) {got}, estimated {want}"
    copy = sum(p.numel() for p in model.parameters()) * 2  # one bucket in the first step: its float16 copy
    assert est.peak > plain.peak, (est.peak, plain.peak)  # the peak moved to the end of backward
    assert est.at_peak["communication"] - plain.at_peak["communication"] >= copy, (est.at_peak, plain.at_peak)


if mode == "hooks":
    check_hooks()
    check_memory()
elif mode == "torch":
    check_torch()
else:
    raise SystemExit(f"unknown mode {mode}")
dist.barrier()
print(f"OK rank {rank}", flush=True)
dist.destroy_process_group()
