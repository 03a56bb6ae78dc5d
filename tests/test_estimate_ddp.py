"""estimate(..., world_size=N, zero=0|1|2) gives one rank's peak byte for byte: here against the same rank's step
really run on the CPU with a simulated group (the wrappers' allocations without the data movement; the runs over
MPI, where the ranks really communicate, are in test_ddp_mpi.py), and the ZeRO figures shrink as they should."""
import gc

import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet.demo import make_model
from dist_workers.rank_step import measured_step
from gpumemnet.distributed import _comm
from gpumemnet.nn.parallel import DistributedDataParallel as DDP


@pytest.fixture(autouse=True)
def meta_is_left_empty():
    yield
    gc.collect()
    gm.memory.empty_cache("meta")


def _real(model, x, y, world_size, zero, rank, segments=None):
    """One rank's steps on the CPU, set up as estimate() describes them; (bytes the wrapper holds, the steps'
    peak: the highest of three)."""
    inner = None
    if segments:
        from gpumemnet.memory._distributed import _Checkpointed
        inner = _Checkpointed(model, segments)
    held, peak, _ = measured_step(model, x, y, zero, _comm.Simulated(rank, world_size), inner)
    return held, peak


CASES = [(2, 0, 0), (2, 1, 0), (2, 1, 1), (2, 2, 0), (3, 1, 2), (3, 2, 1), (3, 2, 2), (1, 0, 0)]


@pytest.mark.parametrize("world_size,zero,rank", CASES)
def test_rank_estimate_equals_the_cpu_step(world_size, zero, rank):
    gm.manual_seed(0)
    model = make_model(16)
    x, y = gm.randn(8, 1, 8, 8), gm.randint(0, 10, (8,))
    est = gm.memory.estimate(model, (1, 8, 8), loss_fn=F.cross_entropy, target=y, batch_size=8,
                             world_size=world_size, zero=zero, rank=rank)
    gm.memory.empty_cache("cpu")
    held, peak = _real(model, x, y, world_size, zero, rank)
    assert (est.comm_bytes, est.peak) == (held, peak)
    assert (est.comm_bytes > 0) == (zero != 2)
    assert sum(est.at_peak.values()) == est.total == est.param_bytes + est.input_bytes + est.comm_bytes + est.peak
    assert (est.world_size, est.zero, est.rank) == (world_size, zero, rank)


def test_checkpointed_rank_estimate_equals_the_cpu_step():
    gm.manual_seed(0)
    model = make_model(16)
    x, y = gm.randn(8, 1, 8, 8), gm.randint(0, 10, (8,))
    est = gm.memory.estimate(model, (1, 8, 8), loss_fn=F.cross_entropy, target=y, batch_size=8, world_size=2,
                             checkpoint_segments=2)
    held, peak = _real(model, x, y, 2, 0, 0, segments=2)
    assert (est.comm_bytes, est.peak) == (held, peak)


def test_zero_shrinks_the_state_and_the_gradients():
    gm.manual_seed(0)
    model = gm.nn.Sequential(gm.nn.Linear(256, 512), gm.nn.ReLU(), gm.nn.Linear(512, 256))
    n = sum(p.numel() for p in model.parameters())
    kw = dict(batch_size=4, world_size=4)
    plain = gm.memory.estimate(model, (256,), **kw)
    z1 = gm.memory.estimate(model, (256,), zero=1, **kw)
    z2 = gm.memory.estimate(model, (256,), zero=2, **kw)
    assert plain.optimizer_bytes >= 2 * 4 * n
    assert z1.optimizer_bytes <= plain.optimizer_bytes / 4 + 4096 and z2.optimizer_bytes == z1.optimizer_bytes
    assert z2.comm_bytes == 0 and plain.comm_bytes >= 4 * n
    assert len(z1.per_rank) == 4 and z1.total == max(z1.per_rank)
    assert z2.total < z1.total < plain.total


def test_bad_arguments():
    m = make_model(8)
    with pytest.raises(ValueError, match="zero=1 needs world_size"):
        gm.memory.estimate(m, (1, 8, 8), batch_size=2, zero=1)
    with pytest.raises(ValueError, match="world_size must be a positive int"):
        gm.memory.estimate(m, (1, 8, 8), batch_size=2, world_size=0)
    with pytest.raises(ValueError, match="zero must be 0"):
        gm.memory.estimate(m, (1, 8, 8), batch_size=2, world_size=2, zero=3)
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, 1\]"):
        gm.memory.estimate(m, (1, 8, 8), batch_size=2, world_size=2, rank=2)


def _mlp():
    gm.manual_seed(0)
    return gm.nn.Sequential(gm.nn.Linear(256, 512), gm.nn.ReLU(), gm.nn.Linear(512, 256))


def test_plan_picks_zero_when_plain_ddp_does_not_fit():
    model = _mlp()
    kw = dict(batch_size=4, world_size=4)
    plain = gm.memory.estimate(model, (256,), **kw)
    z2 = gm.memory.estimate(model, (256,), zero=2, **kw)
    budget = (plain.total + z2.total) // 2 + (1 << 19)  # room for the segments of the ZeRO-2 step
    assert budget < plain.total
    p = gm.memory.plan(model, (256,), batch_size=4, budget=budget, world_size=4,
                       candidates=[dict(zero=z, accumulation_steps=k) for z in (0, 1, 2) for k in (1, 2)])
    assert (p.world_size, p.zero, p.accumulation_steps) == (4, 2, 1)
    assert p.predicted_peak == z2.total and "zero=2" in repr(p)
    big = gm.memory.plan(model, (256,), batch_size=4, budget=1 << 30, world_size=4)
    assert (big.zero, big.accumulation_steps, big.autocast) == (0, 1, None)  # plain DDP when it fits
    assert {c.get("zero") for c, _, _ in gm.memory.plan(model, (256,), batch_size=4, budget=budget,
                                                         world_size=4).considered} <= {0, 1, 2}


def test_plan_without_world_size_is_unchanged():
    p = gm.memory.plan(_mlp(), (256,), batch_size=4, budget=1 << 30)
    assert p.world_size is None and "zero" not in repr(p)
    with pytest.raises(TypeError, match="a candidate must be a dict of"):
        gm.memory.plan(_mlp(), (256,), batch_size=4, budget=1 << 30, candidates=[dict(zero=1)])
    with pytest.raises(ValueError, match="zero must be 0, 1 or 2"):
        gm.memory.plan(_mlp(), (256,), batch_size=4, budget=1 << 30, world_size=2, candidates=[dict(zero=5)])


def test_a_wrapped_model_is_estimated_as_its_ranks_step():
    model = make_model(16)
    ddp = DDP(model, process_group=_comm.Simulated(1, 2))
    kw = dict(loss_fn=F.cross_entropy, batch_size=8)
    a = gm.memory.estimate(ddp, (1, 8, 8), **kw)
    b = gm.memory.estimate(model, (1, 8, 8), world_size=2, **kw)
    assert (a.total, a.peak, a.comm_bytes, a.world_size) == (b.total, b.peak, b.comm_bytes, 2)
    assert "Training step peak" in gm.summary(ddp, (1, 8, 8), batch_size=8)
