"""Know before you run, part two (gpumemnet.memory.planner): max_batch_size is the largest batch whose meta estimate fits
(checked directly at the answer and one step past it) and spends no real byte; plan() picks the fastest
configuration of the cost model that fits, and under a real CPU limit where the plain full-batch step raises
OutOfMemoryError, plan.step completes and moves the parameters as the full-batch step does; bad inputs raise
clear errors."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet.memory import estimator as _estimate, planner as _plan

SAMPLE = (1, 16, 16)


@pytest.fixture(autouse=True)
def clean_memory():
    yield
    gm.memory.set_limit("cpu", None)
    gc.collect()
    gm.memory.empty_cache("meta")
    gm.memory.empty_cache("cpu")


def _model(seed=0):
    # activations (8 x 16 x 16 per sample, twice) dominate the tiny weights: the batch decides the memory
    gm.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))


def _sgd(params):
    return gm.optim.SGD(params, lr=0.5)


def _total(model, batch, **kw):
    return _estimate.estimate(model, SAMPLE, loss_fn=F.cross_entropy, optimizer=_sgd, batch_size=batch,
                              target=gm.zeros(1, dtype=gm.int64), **kw).total


def _fits(model, batch, budget, total=None, **kw):
    """The live tensors fit the budget, and so do the segments holding them: the meta step completes under the
    budget as a limit (the allocator frees its cache and retries exactly where a real device would)."""
    if (_total(model, batch, **kw) if total is None else total) > budget:
        return False
    try:
        _estimate.estimate(model, SAMPLE, loss_fn=F.cross_entropy, optimizer=_sgd, batch_size=batch,
                           target=gm.zeros(1, dtype=gm.int64), limit=budget, **kw)
    except gm.OutOfMemoryError:
        return False
    return True


# ---- max_batch_size ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(), dict(accumulation_steps=2), dict(autocast=gm.bfloat16)],
                         ids=["fp32", "accumulation=2", "bf16"])
def test_max_batch_size_is_the_largest_that_fits(kw):
    model = _model()
    budget, y = 400_000, gm.zeros(3, dtype=gm.int64)
    gc.collect()  # garbage of earlier tests must not be freed between the two readings
    gm.memory.reset_peak_memory_stats("cpu")
    before = gm.memory.memory_allocated("cpu")
    b = _plan.max_batch_size(model, SAMPLE, loss_fn=F.cross_entropy, optimizer=_sgd, target=y, budget=budget, **kw)
    # meta estimates only: not one byte more on the CPU, not even transiently
    assert gm.memory.memory_allocated("cpu") == before == gm.memory.max_memory_allocated("cpu")
    step = kw.get("accumulation_steps", 1)
    assert b > step and b % step == 0
    assert _fits(model, b, budget, **kw) and not _fits(model, b + step, budget, **kw)
    assert _total(model, b, **kw) <= budget
    assert all(p.grad is None for p in model.parameters())


def test_max_batch_size_hi_and_lo():
    model = _model()
    assert _plan.max_batch_size(model, SAMPLE, budget=1 << 30, hi=5) == 5  # everything fits: the cap is the answer
    assert _plan.max_batch_size(model, SAMPLE, budget=1 << 30, lo=3, hi=3) == 3
    b = _plan.max_batch_size(model, SAMPLE, budget=300_000, lo=2)
    assert _plan.max_batch_size(model, SAMPLE, budget=300_000, lo=2, hi=b + 10) == b


def test_max_batch_size_errors():
    model = _model()
    for budget in (0, -5):
        with pytest.raises(ValueError, match="budget must be a positive, finite number of bytes"):
            _plan.max_batch_size(model, SAMPLE, budget=budget)
    with pytest.raises(TypeError, match="budget must be a number of bytes"):
        _plan.max_batch_size(model, SAMPLE, budget="1 GiB")
    need = _estimate.estimate(model, SAMPLE, batch_size=1).total
    with pytest.raises(ValueError, match=rf"even a batch of 1 does not fit: .*\({need} bytes\), "
                                         rf"{need - 10_000} bytes over the budget"):
        _plan.max_batch_size(model, SAMPLE, budget=10_000)
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch_size'"):  # it is what is searched for
        _plan.max_batch_size(model, SAMPLE, budget=1 << 20, batch_size=4)
    with pytest.raises(ValueError, match=r"hi \(2\) must be at least lo \(4\)"):
        _plan.max_batch_size(model, SAMPLE, budget=1 << 20, lo=4, hi=2)
    with pytest.raises(ValueError, match=r"loss must be a scalar tensor, got \(1, 10\)"):
        _plan.max_batch_size(model, SAMPLE, budget=1 << 20, loss_fn=lambda out, y: out)


# ---- plan: the choice ------------------------------------------------------------------------------------------------
def test_step_cost_model():
    assert _plan.step_cost() == 1.0
    assert _plan.step_cost(autocast=gm.bfloat16) == 1.0
    assert _plan.step_cost(checkpoint_segments=2) == pytest.approx(1.35)
    assert _plan.step_cost(accumulation_steps=4, checkpoint_segments=4) == pytest.approx(1.1 ** 2 * 1.35)


@pytest.fixture(scope="module")
def grid_totals():
    """Every default configuration of _model() at a batch of 16, estimated once for the module."""
    model = _model()
    return [(c, _total(model, 16, **c)) for c in _plan._grid(model, 16)]


# plain fp32; fp32 over 4 micro-batches; bf16 over 4; fp32 over 8; fp32 over 16. (A budget must hold the
# segments, not only the tensors: at 200,000 bytes nothing fits, though the tensors of fp32 over 16 would.)
@pytest.mark.parametrize("budget", [700_000, 310_000, 280_000, 250_000, 220_000])
def test_plan_is_the_fastest_configuration_that_fits(budget, grid_totals):
    model, batch = _model(), 16
    p = _plan.plan(model, SAMPLE, F.cross_entropy, batch_size=batch, budget=budget,
                   target=gm.zeros(batch, dtype=gm.int64), optimizer=_sgd)
    assert p.micro_batch * p.accumulation_steps == batch
    chosen = dict(accumulation_steps=p.accumulation_steps, checkpoint_segments=p.checkpoint_segments,
                  autocast=p.autocast)
    assert p.predicted_peak == dict((_plan._describe(c), t) for c, t in grid_totals)[_plan._describe(chosen)]
    assert p.predicted_peak <= budget
    # direct check over the whole grid: nothing that fits is predicted faster
    assert p.predicted_time == _plan.step_cost(**chosen) and _fits(model, batch, budget, **chosen)
    faster = [(c, t) for c, t in grid_totals if _plan.step_cost(**c) < p.predicted_time - 1e-9]
    assert not any(_fits(model, batch, budget, t, **c) for c, t in faster)
    if _fits(model, batch, budget, grid_totals[0][1], **grid_totals[0][0]):  # the plain step fits: it is chosen
        assert chosen == grid_totals[0][0]
    assert "Plan(micro_batch=" in repr(p)


def test_plan_only_offers_checkpointing_for_sequential():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = _model()

        def forward(self, x):
            return self.body(x)

    grid = _plan._grid(Net(), 4)
    assert {c["checkpoint_segments"] for c in grid} == {None}
    assert {c["accumulation_steps"] for c in grid} == {1, 2, 4}
    assert {c["checkpoint_segments"] for c in _plan._grid(_model(), 6)} == {None, 2, 4}
    assert {c["accumulation_steps"] for c in _plan._grid(_model(), 6)} == {1, 2}
    with pytest.raises(TypeError, match="checkpoint_segments needs an nn.Sequential"):
        _plan.plan(Net(), SAMPLE, F.cross_entropy, batch_size=4, budget=1 << 30,
                   candidates=[dict(checkpoint_segments=2)])


# ---- plan: the step under a real limit -----------------------------------------------------------------------------
def _params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def _plain_step(model, x, y):
    opt = _sgd(model.parameters())
    F.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()


def test_plan_step_fits_a_limit_the_plain_step_does_not():
    batch = 128
    gm.manual_seed(1)
    x = gm.randn(batch, *SAMPLE)
    y = gm.tensor(np.random.default_rng(1).integers(0, 10, batch), dtype=gm.int64)
    # the reference: one plain full-batch SGD step, no limit
    ref = _model()
    _plain_step(ref, x, y)
    want = _params(ref)
    del ref

    model, naive = _model(), _model()
    plain_total = _total(model, batch)
    # fp32 only: bfloat16 may fit as well, but its gradients are not the fp32 ones this test compares
    fp32 = [c for c in _plan._grid(model, batch) if c["autocast"] is None]
    budget = (plain_total + _total(model, batch, accumulation_steps=2)) // 2
    p = _plan.plan(model, SAMPLE, F.cross_entropy, batch_size=batch, budget=budget, target=y, optimizer=_sgd,
                   candidates=fp32)
    assert p.predicted_peak <= budget < plain_total and p.accumulation_steps == 2 and p.micro_batch == 64
    gc.collect()
    gm.memory.empty_cache("cpu")
    # The budget stands for a device holding only the model and the batch. The process holds more (the other
    # copy, the reference's leftovers): it is allocated already and is added to the limit as it is. Allocated,
    # not reserved: the free space inside the segments those tensors occupy is usable without reserving more.
    here = p.estimate.param_bytes + p.estimate.input_bytes
    gm.memory.set_limit("cpu", gm.memory.memory_allocated("cpu") + budget - here)
    try:
        with pytest.raises(gm.OutOfMemoryError):
            _plain_step(naive, x, y)
        del naive
        gc.collect()
        loss = p.step(x, y, _sgd(model.parameters()))
    finally:
        gm.memory.set_limit("cpu", None)
    assert np.isfinite(loss) and all(q.grad is None for q in model.parameters())
    for a, b in zip(_params(model), want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ---- plan: errors --------------------------------------------------------------------------------------------------
def test_plan_errors():
    model = _model()
    for budget in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="budget must be a positive, finite number of bytes"):
            _plan.plan(model, SAMPLE, F.cross_entropy, batch_size=8, budget=budget)
    cands = [dict(accumulation_steps=1), dict(accumulation_steps=8)]
    smallest = min(_estimate.estimate(model, SAMPLE, batch_size=8, **c).total for c in cands)
    with pytest.raises(ValueError, match=rf"no configuration fits the budget of .* \(20000 bytes\): the smallest "
                                         rf"predicted total is .* \({smallest} bytes\), with accumulation_steps=8"):
        _plan.plan(model, SAMPLE, lambda out, y: out.sum(), batch_size=8, budget=20_000, candidates=cands)
    with pytest.raises(ValueError, match=r"loss must be a scalar tensor, got \(8, 10\)"):
        _plan.plan(model, SAMPLE, lambda out, y: out, batch_size=8, budget=1 << 30)
    with pytest.raises(ValueError, match="accumulation_steps=3 does not divide batch_size=8"):
        _plan.plan(model, SAMPLE, F.cross_entropy, batch_size=8, budget=1 << 30,
                   candidates=[dict(accumulation_steps=3)])
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        _plan.plan(model, SAMPLE, F.cross_entropy, batch_size=0, budget=1 << 30)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        _plan.plan(model, SAMPLE, 42, batch_size=8, budget=1 << 30)
    p = _plan.plan(model, SAMPLE, lambda out, y: out.sum(), batch_size=8, budget=1 << 30)
    with pytest.raises(ValueError, match=r"planned batch of 8 samples .* got shape \(4, 1, 16, 16\)"):
        p.step(gm.randn(4, *SAMPLE), None, _sgd(model.parameters()))
    p.loss_fn = lambda out, y: out
    with pytest.raises(ValueError, match=r"Plan.step: the loss must be a scalar tensor, got \(8, 10\)"):
        p.step(gm.randn(8, *SAMPLE), None, _sgd(model.parameters()))


def test_a_tight_budget_counts_the_segments_not_only_the_tensors():
    """The budget caps reserved bytes (set_limit caps segments, like a card's size): a plain step whose live
    tensors total exactly the budget does not fit, since the allocator's segments hold more than their blocks.
    plan() must see that (its meta run under the budget as a limit fails) and choose a configuration that
    completes a real step under set_limit(budget)."""
    batch = 128
    gm.manual_seed(1)
    xs = np.asarray(gm.randn(batch, *SAMPLE).numpy())
    ys = np.random.default_rng(1).integers(0, 10, batch)
    ref = _model()
    _plain_step(ref, gm.tensor(xs), gm.tensor(ys, dtype=gm.int64))
    want = _params(ref)
    del ref
    target = gm.zeros(batch, dtype=gm.int64)
    budget = _total(_model(), batch)  # the plain step's allocated total, to the byte
    fp32 = [c for c in _plan._grid(_model(), batch) if c["autocast"] is None]
    p = _plan.plan(_model(), SAMPLE, F.cross_entropy, batch_size=batch, budget=budget, target=target,
                   optimizer=_sgd, candidates=fp32)
    assert p.accumulation_steps > 1 and p.predicted_peak < budget and p.predicted_reserved <= budget
    plain = p.considered[0]
    assert plain[0]["accumulation_steps"] == 1 and plain[0]["checkpoint_segments"] is None and plain[1] == budget
    # what a planner comparing allocated bytes would have chosen raises on a device of that size
    with pytest.raises(gm.OutOfMemoryError):
        _estimate.estimate(_model(), SAMPLE, loss_fn=F.cross_entropy, optimizer=_sgd, batch_size=batch,
                           target=target, limit=budget)
    with pytest.raises(ValueError, match="does not fit"):
        _plan.max_batch_size(_model(), SAMPLE, F.cross_entropy, _sgd, budget=budget, lo=batch, hi=batch,
                             target=target)

    def real_step(step):
        # A device holding only this model and batch: the limit is the budget over what the process reserves now.
        # (The process's own segments may have room to spare, so the real device can only be more lenient than a
        # fresh one: that the plain step fails is shown on meta above, where the device is fresh.)
        gc.collect()
        gm.memory.empty_cache("cpu")
        gm.memory.set_limit("cpu", gm.memory.memory_reserved("cpu") + budget)
        try:
            model = _model()
            x, y = gm.tensor(xs), gm.tensor(ys, dtype=gm.int64)
            step(model, x, y)
            return _params(model)
        finally:
            gm.memory.set_limit("cpu", None)

    got = real_step(lambda model, x, y: _plan.Plan(
        model, F.cross_entropy, batch, budget, p.accumulation_steps, p.checkpoint_segments, p.autocast, p.estimate,
        p.predicted_time, p.considered).step(x, y, _sgd(model.parameters())))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
