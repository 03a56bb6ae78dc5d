"""Estimates of an offloading optimizer that overlaps its gradient copies with backward (optim/_offload.py
overlap_grad_copies; issue 15 items 2 and 5), on meta, without a GPU: the user's factory asks for it
(optimizer=lambda ps: Adam(ps, offload="cpu").overlap_grad_copies()) and the estimate runs it. Its host peak
holds every gradient's staging at once (the synchronous step holds the largest one), its device peak is the
synchronous one's, each micro-batch sends the gradients down again, and those bytes are the overlapped ones; plan()
takes it as a candidate and prices it. The same figures against the emulator's measured step:
tests/test_cuda_estimate_overlap.py."""
import gc

import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet.memory import planner as _plan

HOST = gm.memory.META_HOST
BLOCK = 512  # the host allocator's rounding for these small blocks (every staging buffer here is under 1 MiB)

OPTS = {
    "adam": lambda ps: gm.optim.Adam(ps, lr=1e-2, offload="cpu"),
    "adamw": lambda ps: gm.optim.AdamW(ps, lr=1e-2, offload="cpu"),
    "sgd_momentum": lambda ps: gm.optim.SGD(ps, lr=1e-2, momentum=0.9, offload="cpu"),
}


@pytest.fixture(autouse=True)
def _clean():
    yield
    gc.collect()
    for d in ("meta", HOST):
        gm.memory.empty_cache(d)


def _mlp():
    gm.manual_seed(0)
    # parameter sizes that do not share one rounding: 64x96, 96, 96x40, 40 elements
    return nn.Sequential(nn.Linear(64, 96, device="meta"), nn.ReLU(), nn.Linear(96, 40, device="meta"))


def _blocks(model, dtype):
    size = gm.empty(1, dtype=dtype or gm.float32, device="meta").element_size()
    return [-(-p.numel() * size // BLOCK) * BLOCK for p in model.parameters()]


def _estimate(name, overlap, pdt, k):
    make = OPTS[name]
    factory = (lambda ps: make(ps).overlap_grad_copies()) if overlap else make
    return gm.memory.estimate(_mlp(), (64,), loss_fn=F.mse_loss, optimizer=factory, batch_size=4, device="cuda",
                              param_dtype=pdt, accumulation_steps=k)


def test_overlap_grad_copies_returns_the_optimizer():
    m = _mlp()
    opt = OPTS["adam"](m.parameters())
    assert opt.overlap_grad_copies() is opt and len(opt._overlap_handles) == 2 * 4  # two hooks per parameter
    assert opt.overlap_grad_copies(False) is opt and not opt._overlap_handles
    plain = gm.optim.Adam(m.parameters())  # no offload: nothing to overlap, still chainable
    assert plain.overlap_grad_copies() is plain and not plain._overlap_handles


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("pdt", [None, gm.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", list(OPTS))
def test_overlap_estimate_host_peak_and_bytes(name, pdt, k):
    sync, over = _estimate(name, False, pdt, k), _estimate(name, True, pdt, k)
    assert (sync.overlap_grad_copies, over.overlap_grad_copies) == (False, True)
    blocks = _blocks(_mlp(), pdt)
    size = 2 if pdt is not None else 4
    grad = sum(p.numel() for p in _mlp().parameters()) * size  # what crosses: the gradients in the device's dtype
    # the device holds the same: the staging is host memory
    assert over.peak == sync.peak and over.total == sync.total
    if name != "sgd_momentum" or pdt is None:
        # every gradient staged at once instead of the largest one (SGD's half path stages more: one fp32 widening
        # and one rounding buffer per parameter, tested against the emulator's measured peak)
        assert over.host_peak - sync.host_peak == sum(blocks) - max(blocks)
    else:
        assert over.host_peak > sync.host_peak
    # sync: each gradient down once, in step(); overlapped: once per micro-batch, from its hook in backward
    assert (sync.bytes_to_host, sync.micro_batch_to_host, sync.bytes_overlapped) == (grad, 0, 0)
    assert (over.bytes_to_host, over.micro_batch_to_host) == (k * grad, grad)
    assert (over.overlapped_to_host, over.overlapped_to_device) == (k * grad, 0)
    # the parameters go up once per step either way, synchronously
    assert sync.bytes_to_device == over.bytes_to_device == grad
    assert sync.micro_batch_to_device == over.micro_batch_to_device == 0


def test_plan_takes_overlap_as_a_candidate_and_prices_it():
    m = _mlp()
    kw = dict(loss_fn=F.mse_loss, batch_size=4, device="cuda")
    over = _estimate("adam", True, None, 1)
    both = [dict(offload_optimizer=True), dict(offload_optimizer=True, overlap_grad_copies=True)]
    p = gm.memory.plan(m, (64,), budget=over.total + (8 << 20), candidates=both, **kw)
    # under the fixed factors overlap is the faster of the two
    assert p.overlap_grad_copies and p.predicted_time == pytest.approx(_plan.OFFLOAD_OVERLAP_COST)
    assert p.predicted_host_peak == over.host_peak and p.predicted_bytes_overlapped == over.bytes_overlapped > 0
    assert "overlap_grad_copies=True" in repr(p) and "during backward" in _plan._describe(_plan._config(p))
    opt = p.optimizer(m.parameters(), lr=1e-2)
    assert opt.offload == "cpu" and opt._overlap_handles
    p = gm.memory.plan(m, (64,), budget=over.total + (8 << 20), candidates=both[:1], **kw)
    assert not p.overlap_grad_copies and not p.optimizer(m.parameters())._overlap_handles
    with pytest.raises(ValueError, match="overlap_grad_copies needs offload_optimizer"):
        gm.memory.plan(m, (64,), budget=1 << 30, candidates=[dict(overlap_grad_copies=True)], **kw)


def test_default_plan_grid_leaves_overlap_out():
    cands = _plan._grid(_mlp(), 4, offload=True)
    assert cands and not any(c.get("overlap_grad_copies") for c in cands)


def test_offload_cost_hides_overlapped_bytes_behind_backward():
    class E:
        bytes_moved, bytes_overlapped, trainable = 8e9, 4e9, 1e9
    t = dict(bandwidth=16e9, cpu_adam=2e9, step_seconds=1.0)
    # 4e9 synchronous bytes: 0.25 s; the 4e9 overlapped bytes take 0.25 s, behind a backward of 2/3 s: hidden
    assert _plan.offload_cost(True, False, E, t) == pytest.approx(1 + 0.25 + 0.5)
    # a backward of 0.2 s covers 0.2 of their 0.25 s
    assert _plan.offload_cost(True, False, E, dict(t, backward_seconds=0.2)) == pytest.approx(1 + 0.25 + 0.05 + 0.5)
    E.bytes_overlapped = 0  # nothing overlapped: all of it adds to the step
    assert _plan.offload_cost(True, False, E, t) == pytest.approx(1 + 0.5 + 0.5)
    overlapped = _plan.step_cost(offload_optimizer=True, overlap_grad_copies=True)
    assert overlapped == pytest.approx(_plan.OFFLOAD_OVERLAP_COST) and overlapped < _plan.step_cost(offload_optimizer=True)


def test_a_target_given_as_a_shape_follows_param_dtype():
    """As the inputs do (a script converts both: x.to(dtype), y.to(dtype)); a Tensor target keeps its dtype."""
    kw = dict(loss_fn=F.mse_loss, optimizer=OPTS["adam"], batch_size=4, device="cuda", param_dtype=gm.bfloat16)
    by_shape = gm.memory.estimate(_mlp(), (64,), target=(4, 40), **kw)
    by_tensor = gm.memory.estimate(_mlp(), (64,), target=gm.empty(4, 40, dtype=gm.bfloat16, device="meta"), **kw)
    assert (by_shape.total, by_shape.host_peak, by_shape.input_bytes) == \
        (by_tensor.total, by_tensor.host_peak, by_tensor.input_bytes)
    # a float32 target: mse_loss promotes the bfloat16 output to it (PyTorch's rule), and the estimate counts the
    # target's float32 bytes and the promoted copy
    mixed = gm.memory.estimate(_mlp(), (64,), target=gm.empty(4, 40, device="meta"), **kw)
    assert mixed.input_bytes > by_shape.input_bytes and mixed.total > by_shape.total


@pytest.mark.parametrize("overlap", [False, True], ids=["sync", "overlap"])
def test_run_modes_optimizer_copy_offloads_and_overlaps_as_the_scripts(overlap):
    """python -m gpumemnet run estimates a script's first step with a copy of its optimizer (first_step.py): the
    copy offloads, and overlaps, as the script's does (offload is not one of the optimizer's defaults)."""
    from gpumemnet.memory import first_step
    m = _mlp()
    opt = OPTS["adam"](m.parameters()).overlap_grad_copies(overlap)
    make = first_step._optimizer_factory(m, opt)
    copy = make(list(_mlp().parameters()))
    assert copy.offload == "cpu" and bool(copy._overlap_handles) == overlap
    est = gm.memory.estimate(m, (64,), loss_fn=F.mse_loss, optimizer=make, batch_size=4, device="cuda")
    assert est.overlap_grad_copies == overlap and est.host_peak == _estimate("adam", overlap, None, 1).host_peak > 0
