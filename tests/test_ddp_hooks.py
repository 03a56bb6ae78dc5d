"""DistributedDataParallel's bucket rebuild, communication hooks and static_graph on in-process ranks
(tests/_ddp_threads.py), gpumemnet.futures.Future, the estimate with a hook, and the hooks' import path under the
torch alias. Over MPI, against PyTorch's DDP: test_ddp_hooks_mpi.py."""
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.distributed import GradBucket, _comm
from gpumemnet.distributed.algorithms.ddp_comm_hooks import default_hooks
from gpumemnet.futures import Future, collect_all, wait_all
from gpumemnet.nn.parallel import DistributedDataParallel as DDP

from _ddp_threads import ThreadWorld, seeded


def _net():
    return seeded(0, lambda: gm.nn.Sequential(gm.nn.Linear(3, 4), gm.nn.ReLU(), gm.nn.Linear(4, 5), gm.nn.ReLU(),
                                              gm.nn.Linear(5, 2)))


def _step(ddp, rank=0):
    ddp.zero_grad()
    ddp(gm.full((2, 3), float(rank + 1))).sum().backward()


def test_one_bucket_then_rebuilt_in_ready_order():
    def rank(comm):
        ddp = DDP(_net(), process_group=comm, bucket_cap_mb=0.00004)
        sizes = [ddp.bucket_sizes()]
        for _ in range(2):
            _step(ddp, comm.rank)
            sizes.append(ddp.bucket_sizes())
        ddp(gm.ones(2, 3))  # the forward after the recorded iteration rebuilds
        sizes.append(ddp.bucket_sizes())
        return sizes
    for sizes in ThreadWorld(2).run(rank):
        total = sum(p.numel() * 4 for p in _net().parameters())
        assert sizes[0] == sizes[1] == [total]  # PyTorch: one bucket until the order is known
        assert len(sizes[2]) > 1 and sum(sizes[2]) == total and sizes[3] == sizes[2]


def test_static_graph_records_the_second_iteration_and_find_unused_never_rebuilds():
    def rank(comm):
        static = DDP(_net(), process_group=comm, bucket_cap_mb=0.00004, static_graph=True)
        unused = DDP(_net(), process_group=comm, bucket_cap_mb=0.00004, find_unused_parameters=True)
        counts = []
        for _ in range(3):
            _step(static, comm.rank)
            _step(unused, comm.rank)
            counts.append((len(static.bucket_sizes()), len(unused.bucket_sizes())))
        return counts
    for counts in ThreadWorld(2).run(rank):
        assert counts[0][0] == counts[1][0] == 1 and counts[2][0] > 1
        assert counts[0][1] > 1 and counts[0][1] == counts[1][1] == counts[2][1]


def test_rebuild_frees_the_old_buckets_first():
    def rank(comm):
        ddp = DDP(_net(), process_group=comm, bucket_cap_mb=0.00004)
        _step(ddp, comm.rank)
        ddp.zero_grad(set_to_none=True)
        gm.memory.reset_peak_memory_stats("cpu")
        before = gm.memory.memory_stats("cpu")["by_category"]["communication"]
        ddp(gm.ones(2, 3))
        after = gm.memory.memory_stats("cpu")["by_category"]["communication"]
        return before, after, len(ddp.bucket_sizes())
    before, after, n = ThreadWorld(1).run(rank)[0]
    assert n > 1 and after["current"] > before["current"]  # more blocks, more allocator rounding
    assert after["peak"] == after["current"]  # the old buckets were gone before the new ones came


def _ranks_with_hook(hook, state=None, n=2):
    def rank(comm):
        ddp = DDP(_net(), process_group=comm, bucket_cap_mb=0.00004)
        ddp.register_comm_hook(comm if state == "comm" else state, hook)
        grads = []
        for _ in range(2):  # the second runs on rebuilt buckets
            _step(ddp, comm.rank)
            grads.append([p.grad.numpy().copy() for p in ddp.parameters()])
        return grads
    return ThreadWorld(n).run(rank)


def test_a_hook_replaces_the_averaging():
    seen = []

    def summing(comm, bucket):  # a sum, not an average: the bucket arrives undivided
        assert isinstance(bucket, GradBucket)
        seen.append((bucket.index(), bucket.is_last(), len(bucket.parameters()), len(bucket.gradients())))
        comm.all_reduce_sum(bucket.buffer())
        fut = Future()
        fut.set_result(bucket.buffer())
        return fut
    summed = _ranks_with_hook(summing, "comm")

    def plain(comm):
        ddp = DDP(_net(), process_group=comm, bucket_cap_mb=0.00004)
        out = []
        for _ in range(2):
            _step(ddp, comm.rank)
            out.append([p.grad.numpy().copy() for p in ddp.parameters()])
        return out
    averaged = ThreadWorld(2).run(plain)
    for it in range(2):
        for s, a in zip(summed[0][it], averaged[0][it]):
            np.testing.assert_allclose(s, 2 * a, rtol=1e-6)
    first = [e for e in seen[:1]]
    assert first == [(0, True, 6, 6)]  # one bucket in the first iteration, on each rank
    assert any(e[0] > 0 for e in seen) and sum(e[1] for e in seen) == 4  # one last bucket per rank and iteration


def test_a_hook_may_return_a_new_tensor_of_another_dtype():
    def halve(state, bucket):  # no communication: each rank keeps its own gradient, halved, through float64
        fut = Future()
        fut.set_result(bucket.buffer().double() / 2)
        return fut
    out = _ranks_with_hook(halve, n=1)[0]

    def alone(comm):
        ddp = DDP(_net(), process_group=comm)
        _step(ddp)
        return [p.grad.numpy().copy() for p in ddp.parameters()]
    for a, b in zip(out[0], ThreadWorld(1).run(alone)[0]):
        np.testing.assert_allclose(a, b / 2, rtol=1e-6)


def test_hook_errors():
    w = ThreadWorld(1)

    def rank(comm):
        ddp = DDP(_net(), process_group=comm)
        with pytest.raises(TypeError, match="Communication hook must be callable"):
            ddp.register_comm_hook(None, 3)
        ddp.register_comm_hook(None, lambda s, b: b.buffer())
        with pytest.raises(RuntimeError, match="can only be called once"):
            ddp.register_comm_hook(None, default_hooks.allreduce_hook)
        with pytest.raises(TypeError, match="must return a Future"):
            _step(ddp)
        ddp2 = DDP(_net(), process_group=comm)

        def short(s, b):
            f = Future()
            f.set_result(b.buffer()[:3])
            return f
        ddp2.register_comm_hook(None, short)
        with pytest.raises(RuntimeError, match="must hold one tensor of the bucket's"):
            _step(ddp2)
        return True
    assert w.run(rank) == [True]


def test_future():
    f = Future()
    assert not f.done()
    with pytest.raises(RuntimeError, match="has not completed"):
        f.value()
    g = f.then(lambda fut: fut.value() + 1)
    h = g.then(lambda fut: fut.value() * 10)
    calls = []
    f.add_done_callback(lambda fut: calls.append(fut.value()))
    f.set_result(1)
    assert calls == [1] and h.wait() == 20 and g.value() == 2 and h.done()
    with pytest.raises(RuntimeError, match="only be marked completed once"):
        f.set_result(2)
    bad = f.then(lambda fut: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        bad.wait()
    e = Future()
    e.set_exception(ValueError("no"))
    with pytest.raises(ValueError, match="no"):
        e.then(lambda fut: fut.value()).wait()
    with pytest.raises(RuntimeError, match="nothing will set it"):
        Future().wait()
    a, b = Future(), Future()
    both = collect_all([a, b])
    a.set_result(1)
    assert not both.done()
    b.set_result(2)
    assert [x.value() for x in both.wait()] == [1, 2] and wait_all([a, b]) == [1, 2]
    assert Future[int] is Future


def test_estimate_with_a_hook_runs_without_a_group():
    """The estimator's DDP hands the hook its simulated group, so fp16_compress_hook's all-reduce moves nothing and
    needs no init_process_group; its float16 copy of the bucket is counted in category communication."""
    gm.manual_seed(0)
    model = gm.nn.Sequential(gm.nn.Linear(128, 256), gm.nn.Linear(256, 128))
    kw = dict(loss_fn=gm.nn.functional.mse_loss, batch_size=2, world_size=2,
              optimizer=lambda ps: gm.optim.SGD(ps, lr=0.1))
    plain = gm.memory.estimate(model, (128,), **kw)
    est = gm.memory.estimate(model, (128,), comm_hook=default_hooks.fp16_compress_hook, **kw)
    copy = sum(p.numel() for p in model.parameters()) * 2
    assert est.at_peak["communication"] - plain.at_peak["communication"] >= copy
    wrapped = DDP(model, process_group=_comm.Simulated(0, 2))
    wrapped.register_comm_hook(None, default_hooks.fp16_compress_hook)
    again = gm.memory.estimate(wrapped, (128,), **{k: v for k, v in kw.items() if k != "world_size"})
    assert (again.peak, again.total) == (est.peak, est.total)  # the wrapper's hook is estimated too
    with pytest.raises(ValueError, match="comm_hook needs world_size"):
        gm.memory.estimate(model, (128,), comm_hook=default_hooks.fp16_compress_hook, batch_size=2)
    with pytest.raises(ValueError, match="simulated group"):
        default_hooks.allreduce_hook(_comm.SimulatedGroup(0, 2), GradBucket(0, gm.zeros(3), [], [], True))


def test_hooks_import_under_the_torch_alias():
    code = ("import gpumemnet as gm\ngm.as_torch()\n"
            "from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook\n"
            "import torch.distributed.algorithms.ddp_comm_hooks.default_hooks as d\n"
            "import torch, torch.distributed as dist\n"
            "assert fp16_compress_hook is d.fp16_compress_hook and callable(d.bf16_compress_hook)\n"
            "assert torch.futures.Future is gm.futures.Future and dist.GradBucket is gm.distributed.GradBucket\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
