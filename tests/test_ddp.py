"""DistributedDataParallel's logic on in-process ranks (tests/_ddp_threads.py; the MPI runs are test_ddp_mpi.py):
N ranks with batch B/N each match one process with batch B, no_sync accumulation matches, buckets are PyTorch's,
unused parameters are handled, and the bucket buffers are allocator blocks of category communication."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.distributed import _comm
from gpumemnet.nn.parallel import DistributedDataParallel as DDP
from gpumemnet.nn.parallel.distributed import _assign_buckets, _bucket_assignment

from _ddp_threads import ThreadWorld, seeded

B = 12


def _net(seed=0, bn=False):
    """No BatchNorm by default: its batch statistics are per rank, so B/N per rank is not batch B (see
    test_batchnorm_statistics_per_rank)."""
    return seeded(seed, lambda: gm.nn.Sequential(
        gm.nn.Conv2d(1, 4, 3, padding=1), gm.nn.BatchNorm2d(4) if bn else gm.nn.Identity(), gm.nn.ReLU(),
        gm.nn.Flatten(), gm.nn.Linear(4 * 6 * 6, 5)))


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((B, 1, 6, 6)).astype(np.float32), rng.integers(0, 5, B)


def _single(steps, accumulate=1):
    x, y = _data()
    net = _net()
    opt = gm.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        for k in range(accumulate):
            s = slice(k * B // accumulate, (k + 1) * B // accumulate)
            loss = gm.nn.functional.cross_entropy(net(gm.tensor(x[s])), gm.tensor(y[s])) / accumulate
            loss.backward()
        opt.step()
    return [p.detach().numpy().copy() for p in net.parameters()], [p.grad.numpy().copy() for p in net.parameters()]


def _ranks(n, steps, accumulate=1, **kw):
    x, y = _data()

    def rank(comm):
        net = _net(seed=comm.rank)  # different initial weights: DDP broadcasts rank 0's
        ddp = DDP(net, process_group=comm, **kw)
        opt = gm.optim.Adam(ddp.parameters(), lr=1e-2)
        per = B // n
        xs, ys = x[comm.rank * per:(comm.rank + 1) * per], y[comm.rank * per:(comm.rank + 1) * per]
        for _ in range(steps):
            opt.zero_grad()
            for k in range(accumulate):
                s = slice(k * per // accumulate, (k + 1) * per // accumulate)
                ctx = ddp.no_sync() if k < accumulate - 1 else _null()
                with ctx:
                    out = ddp(gm.tensor(xs[s]))
                    loss = gm.nn.functional.cross_entropy(out, gm.tensor(ys[s])) / accumulate
                    loss.backward()
            opt.step()
        return [p.detach().numpy().copy() for p in net.parameters()], [p.grad.numpy().copy() for p in
                                                                        net.parameters()]
    return ThreadWorld(n).run(rank)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("kw", [{}, {"gradient_as_bucket_view": True}, {"bucket_cap_mb": 0.0005}])
def test_matches_one_process(n, kw):
    ref_p, ref_g = _single(3)
    for params, grads in _ranks(n, 3, **kw):
        for a, b in zip(params, ref_p):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        for a, b in zip(grads, ref_g):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_no_sync_accumulation_matches():
    ref_p, ref_g = _single(2, accumulate=2)
    for params, grads in _ranks(2, 2, accumulate=2):
        for a, b in zip(params, ref_p):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        for a, b in zip(grads, ref_g):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_no_sync_does_not_communicate():
    w = ThreadWorld(2)

    def rank(comm):
        ddp = DDP(_net(), process_group=comm)
        with ddp.no_sync():
            ddp(gm.zeros(2, 1, 6, 6)).sum().backward()
        return ddp
    w.run(rank)
    assert not [e for e in w.log if e[1] == "all_reduce"]


def test_buckets_like_pytorch():
    """PyTorch's compute_bucket_assignment_by_size: parameters in their order (buckets sorted by smallest index)
    or in a ready order (kept), the first bucket closed at 1 MiB, the rest at the cap, or one bucket of all;
    compared with PyTorch's own when it is importable. (_assign_buckets, ZeRO's, is the reverse-order one.)"""
    sizes = [300_000, 10, 200_000, 50_000, 400_000, 7]
    params = [gm.nn.Parameter(gm.zeros(s)) for s in sizes]
    limits = [1024 * 1024, 2 * 1024 * 1024]
    ready = [5, 4, 3, 2, 1, 0]
    assert _bucket_assignment(params, limits) == [[0], [1, 2, 3, 4], [5]]
    assert _bucket_assignment(params, limits, ready) == [[5, 4], [3, 2, 1, 0]]
    assert _bucket_assignment(params, [1 << 62]) == [[0, 1, 2, 3, 4, 5]]
    assert _assign_buckets(params, 2 * 1024 * 1024, 1024 * 1024) == [[5, 4], [3, 2, 1, 0]]
    torch = pytest.importorskip("torch")
    ts = [torch.zeros(s) for s in sizes]
    cbs = torch.distributed._compute_bucket_assignment_by_size
    assert cbs(ts, limits)[0] == _bucket_assignment(params, limits)
    assert cbs([ts[i] for i in ready], limits, [], ready)[0] == _bucket_assignment(params, limits, ready)
    assert cbs(ts, [1 << 62])[0] == _bucket_assignment(params, [1 << 62])


def test_communication_bytes_and_buckets_in_category():
    w = ThreadWorld(2)
    nbytes = sum(p.numel() * 4 for p in _net().parameters())

    def rank(comm):
        before = gm.memory.memory_stats("cpu")["by_category"]["communication"]["current"]
        ddp = DDP(_net(), process_group=comm)
        held = gm.memory.memory_stats("cpu")["by_category"]["communication"]["current"] - before
        ddp(gm.zeros(2, 1, 6, 6)).sum().backward()
        return held, ddp.bucket_sizes()
    out = w.run(rank)
    assert sum(out[0][1]) == nbytes
    assert out[0][0] >= nbytes  # allocator rounding aside, one copy of the gradients
    assert sum(b for r, c, b in w.log if r == 0 and c == "all_reduce") == nbytes


class _Two(gm.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = gm.nn.Linear(3, 2)
        self.b = gm.nn.Linear(3, 2)

    def forward(self, x, use_b=True):
        return self.a(x) + (self.b(x) if use_b else 0)


def test_unused_parameters():
    def rank(comm):
        ddp = DDP(seeded(0, _Two), process_group=comm, find_unused_parameters=True)
        ddp(gm.ones(2, 3), use_b=comm.rank == 0).sum().backward()
        return ddp.module.b.weight.grad.tolist(), ddp.module.a.weight.grad.tolist()
    out = ThreadWorld(2).run(rank)
    assert out[0] == out[1]
    assert out[0][0] == [[1.0] * 3] * 2  # rank 0's gradient of b (2 samples) averaged with rank 1's zeros

    def strict(comm):
        ddp = DDP(_Two(), process_group=comm)
        ddp(gm.ones(2, 3), use_b=False).sum().backward()
        with pytest.raises(RuntimeError, match="Expected to have finished reduction in the prior iteration.*b.weight"):
            ddp(gm.ones(2, 3))
    ThreadWorld(2).run(strict)


def test_eval_forward_needs_no_backward():
    def rank(comm):
        ddp = DDP(_net(), process_group=comm)
        with gm.no_grad():
            ddp(gm.zeros(2, 1, 6, 6))
        ddp(gm.zeros(2, 1, 6, 6)).sum().backward()
        return True
    assert ThreadWorld(2).run(rank) == [True, True]


def test_errors():
    with pytest.raises(TypeError, match="module must be an nn.Module"):
        DDP(3, process_group=_comm.Simulated(0, 1))
    with pytest.raises(ValueError, match="bucket_cap_mb must be a positive number"):
        DDP(_net(), process_group=_comm.Simulated(0, 1), bucket_cap_mb=0)
    with pytest.raises(RuntimeError, match="doesn't have any parameter"):
        DDP(gm.nn.ReLU(), process_group=_comm.Simulated(0, 1))


def test_state_dict_keys_and_module():
    net = _net()
    ddp = DDP(net, process_group=_comm.Simulated(0, 1))
    assert ddp.module is net
    assert all(k.startswith("module.") for k in ddp.state_dict())


def test_batchnorm_statistics_per_rank():
    """Each rank normalises by its own batch and updates its own running statistics; the next forward starts from
    rank 0's buffers again (broadcast_buffers=True), as in PyTorch."""
    def rank(comm):
        ddp = DDP(_net(bn=True), process_group=comm)
        bn = ddp.module[1]
        x = gm.full((2, 1, 6, 6), float(comm.rank + 1))
        ddp(x).sum().backward()
        after_step = bn.running_mean.tolist()
        with gm.no_grad():
            ddp.eval()
            ddp(x)
        return after_step, bn.running_mean.tolist()
    out = ThreadWorld(2).run(rank)
    assert out[0][0] != out[1][0]
    assert out[0][1] == out[1][1] == out[0][0]


def test_buckets_launch_as_soon_as_they_are_ready():
    """After the first iteration (one bucket) the buckets are rebuilt in the order the gradients became ready;
    then each bucket's all-reduce starts from the hook of the gradient that completes it (and of the buckets before
    it: launches are in bucket order on every rank), during backward, whatever order the autograd engine
    accumulates the leaves in."""
    events, buckets, first = [], [], []

    def rank(comm):
        net = seeded(0, lambda: gm.nn.Sequential(gm.nn.Linear(3, 4), gm.nn.ReLU(), gm.nn.Linear(4, 5),
                                                 gm.nn.ReLU(), gm.nn.Linear(5, 2)))
        ddp = DDP(net, process_group=comm, bucket_cap_mb=0.00004)  # 41 bytes: one layer per bucket
        names = {id(p): n for n, p in net.named_parameters()}
        order = []
        if comm.rank == 0:
            first[:] = [[names[id(p)] for p in b.params] for b in ddp._buckets]
            for p in net.parameters():
                p.register_post_accumulate_grad_hook(lambda p: order.append(names[id(p)]))
        ddp(gm.ones(2, 3)).sum().backward()  # the iteration that records the ready order
        ddp.zero_grad()
        launch = comm.all_reduce_sum

        def logged(t, async_op=False):
            if comm.rank == 0:
                events.append(("all_reduce", t.numel()))
            return launch(t, async_op)
        comm.all_reduce_sum = logged
        if comm.rank == 0:
            for p in net.parameters():
                p.register_hook(lambda g, n=names[id(p)]: events.append(("gradient", n)))
        out = ddp(gm.ones(2, 3))  # the forward rebuilds the buckets
        if comm.rank == 0:
            buckets[:] = [[names[id(p)] for p in b.params] for b in ddp._buckets]
            ps = list(net.parameters())
            index = {n: i for i, (n, _) in enumerate(net.named_parameters())}
            want = _bucket_assignment(ps, [41, 41], [index[n] for n in order[:len(ps)]])
            assert buckets == [[names[id(ps[i])] for i in b] for b in want], (buckets, order)
        out.sum().backward()
    ThreadWorld(2).run(rank)
    assert len(first) == 1 and len(buckets) > 3  # one bucket, then several in ready order
    sizes = {n: p.numel() for n, p in gm.nn.Sequential(gm.nn.Linear(3, 4), gm.nn.ReLU(), gm.nn.Linear(4, 5),
                                                         gm.nn.ReLU(), gm.nn.Linear(5, 2)).named_parameters()}
    expected, ready, nxt = [], set(), 0
    for kind, name in events:
        if kind != "gradient":
            continue
        expected.append((kind, name))
        ready.add(name)
        while nxt < len(buckets) and all(n in ready for n in buckets[nxt]):
            expected.append(("all_reduce", sum(sizes[n] for n in buckets[nxt])))
            nxt += 1
    assert events == expected and nxt == len(buckets)


def test_memory_summary_shows_the_buckets():
    ddp = DDP(_net(), process_group=_comm.Simulated(0, 2))
    text = str(gm.memory.memory_summary("cpu"))
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("communication"))
    assert "0 B" not in line.split()[1:3] and ddp.bucket_sizes()
