"""ZeroRedundancyOptimizer's logic on in-process ranks (tests/_ddp_threads.py; the MPI runs are test_zero_mpi.py):
stage 1 (under DDP) and stage 2 (alone) match plain Adam over the whole batch, each rank holds 1/N of the state
(measured by the allocator's "optimizer" category), uneven shards (3 ranks) work, and the consolidated state_dict
is a plain Adam's."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.distributed import _comm
from gpumemnet.distributed.optim import ZeroRedundancyOptimizer as ZeRO
from gpumemnet.nn.parallel import DistributedDataParallel as DDP

from _ddp_threads import ThreadWorld, seeded

B = 12


def _net(seed=0):
    return seeded(seed, lambda: gm.nn.Sequential(gm.nn.Conv2d(1, 3, 3, padding=1), gm.nn.ReLU(), gm.nn.Flatten(),
                                                 gm.nn.Linear(3 * 6 * 6, 7), gm.nn.ReLU(), gm.nn.Linear(7, 5)))


def _data():
    rng = np.random.default_rng(1)
    return rng.standard_normal((B, 1, 6, 6)).astype(np.float32), rng.integers(0, 5, B)


def _loss(net, x, y):
    return gm.nn.functional.cross_entropy(net(gm.tensor(x)), gm.tensor(y))


def _plain(steps):
    x, y = _data()
    net = _net()
    opt = gm.optim.Adam(net.parameters(), lr=1e-2, weight_decay=0.01)
    for _ in range(steps):
        opt.zero_grad()
        _loss(net, x, y).backward()
        opt.step()
    return net, opt


def _opt_bytes():
    return gm.memory.memory_stats("cpu")["by_category"]["optimizer"]["current"]


def _zero_ranks(n, stage, steps, bucket_cap_mb=25, extra=None):
    x, y = _data()

    def rank(comm):
        net = _net(seed=0 if stage == 1 else comm.rank)  # stage 2 broadcasts rank 0's parameters itself
        model = DDP(net, process_group=comm) if stage == 1 else net
        before = _opt_bytes()
        opt = ZeRO(model.parameters(), optimizer_class=gm.optim.Adam, process_group=comm, stage=stage,
                   bucket_cap_mb=bucket_cap_mb, lr=1e-2, weight_decay=0.01)
        per = B // n
        s = slice(comm.rank * per, (comm.rank + 1) * per)
        for _ in range(steps):
            opt.zero_grad()
            _loss(model, x[s], y[s]).backward()
            opt.step()
        held = _opt_bytes() - before
        res = {"params": [p.detach().numpy().copy() for p in net.parameters()], "opt_bytes": held,
               "state_elems": sum(v.numel() for st in opt.optim.state.values() for v in st.values()
                                  if isinstance(v, gm.Tensor))}
        if extra is not None:
            res.update(extra(comm, opt, net))
        return res
    return ThreadWorld(n).run(rank)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("stage", [1, 2])
@pytest.mark.parametrize("cap", [25, 0.001])
def test_matches_plain_adam_and_shards_the_state(n, stage, cap):
    ref, ref_opt = _plain(3)
    total = sum(p.numel() for p in ref.parameters())
    out = _zero_ranks(n, stage, 3, bucket_cap_mb=cap)
    for r in out:
        for a, b in zip(r["params"], ref.parameters()):
            np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-4, atol=1e-5)
    elems = [r["state_elems"] for r in out]
    assert sum(elems) == 2 * total  # exp_avg and exp_avg_sq of every element, once across the ranks
    nbuckets = 1 if cap == 25 else len(list(ref.parameters()))
    assert max(elems) - min(elems) <= 2 * nbuckets  # 1/N each, up to one padding element per bucket
    # (the allocator's per-rank figures are checked in separate processes, test_zero_mpi.py: threads share it)
    assert sum(r["opt_bytes"] for r in out) >= 2 * total * 4


def test_stage2_keeps_only_the_shard_of_the_gradients():
    def extra(comm, opt, net):
        opt.zero_grad()
        x, y = _data()
        _loss(net, x[:4], y[:4]).backward()
        return {"grads": [p.grad for p in net.parameters()], "shard": sum(b.grad.numel() for b in opt._buckets),
                "buffers": [b.buffer for b in opt._buckets]}
    total = sum(p.numel() for p in _net().parameters())
    for r in _zero_ranks(2, 2, 1, extra=extra):
        assert r["grads"] == [None] * 6
        assert r["shard"] == -(-total // 2)
        assert r["buffers"] == [None]  # the bucket was freed once reduced


def test_consolidated_state_dict_is_plain_adams(tmp_path):
    ref, ref_opt = _plain(2)
    want = ref_opt.state_dict()

    def extra(comm, opt, net):
        opt.consolidate_state_dict(to=0)
        if comm.rank != 0:
            with pytest.raises(RuntimeError, match="consolidate_state_dict"):
                opt.state_dict()
            return {"sd": None}
        gm.save(opt.state_dict(), str(tmp_path / "opt.pt"))  # one file, as from a plain optimizer
        sd = gm.load(str(tmp_path / "opt.pt"))
        return {"sd": {i: {k: (v.numpy().copy() if isinstance(v, gm.Tensor) else v) for k, v in st.items()}
                       for i, st in sd["state"].items()}, "groups": sd["param_groups"]}
    out = _zero_ranks(3, 1, 2, bucket_cap_mb=0.001, extra=extra)
    sd = out[0]["sd"]
    assert sorted(sd) == sorted(want["state"])
    for i, st in want["state"].items():
        assert sd[i]["step"] == st["step"]
        for k in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(sd[i][k], st[k].numpy(), rtol=1e-4, atol=1e-6)
    assert out[0]["groups"][0]["params"] == want["param_groups"][0]["params"]


def test_load_state_dict_resumes():
    """Plain Adam's state loaded into ZeRO on 2 ranks, then one more step, equals plain Adam's next step."""
    ref, ref_opt = _plain(2)
    sd = ref_opt.state_dict()  # references the state tensors, which the next step updates: copy them
    sd["state"] = {i: {k: (v.clone() if isinstance(v, gm.Tensor) else v) for k, v in st.items()}
                   for i, st in sd["state"].items()}
    start = [p.detach().numpy().copy() for p in ref.parameters()]
    x, y = _data()
    ref_opt.zero_grad()
    _loss(ref, x, y).backward()
    ref_opt.step()

    def rank(comm):
        net = _net()
        with gm.no_grad():
            for p, v in zip(net.parameters(), start):
                p.copy_(gm.tensor(v))
        model = DDP(net, process_group=comm)
        opt = ZeRO(model.parameters(), optimizer_class=gm.optim.Adam, process_group=comm, lr=1e-2,
                   weight_decay=0.01)
        opt.load_state_dict(sd)
        s = slice(comm.rank * 6, (comm.rank + 1) * 6)
        _loss(model, x[s], y[s]).backward()
        opt.step()
        return [p.detach().numpy().copy() for p in net.parameters()]
    for params in ThreadWorld(2).run(rank):
        for a, b in zip(params, ref.parameters()):
            np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore::gpumemnet.optim.optimizer.NoGradientWarning")
def test_lr_scheduler_reaches_the_local_optimizer():
    opt = ZeRO(_net().parameters(), process_group=_comm.Simulated(0, 1), lr=0.5)
    sched = gm.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
    opt.step()
    sched.step()
    opt.step()
    assert opt.optim.param_groups[0]["lr"] == pytest.approx(0.05)


def test_errors():
    with pytest.raises(ValueError, match="stage must be 1 or 2"):
        ZeRO(_net().parameters(), process_group=_comm.Simulated(0, 1), stage=3)
    with pytest.raises(ValueError, match="rank must be an int"):
        _comm.Simulated(2, 2)

    def rank(comm):
        net = _Two()
        opt = ZeRO(net.parameters(), process_group=comm, stage=2)
        net(gm.ones(2, 3), use_b=False).sum().backward()
        with pytest.raises(RuntimeError, match="did not produce a gradient for every parameter"):
            opt.step()
    ThreadWorld(1).run(rank)


class _Two(gm.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = gm.nn.Linear(3, 2)
        self.b = gm.nn.Linear(3, 2)

    def forward(self, x, use_b=True):
        return self.a(x) + (self.b(x) if use_b else 0)
