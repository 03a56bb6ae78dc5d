"""Offload without a GPU (issue 15): the "meta-host" allocator of a meta run's host memory, estimates of steps
that offload (device peak, host peak, bytes moved), plan(..., device="cuda") choosing offload, story 000 on a
smaller card at reduced size on meta, and the CPU-side behaviour (a CPU model offloads nothing, save_on_cpu
leaves CPU tensors alone, offload_sequential's arguments). The CUDA side: tests/test_cuda_offload.py."""
import gc
import os
import sys
import warnings

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C
from gpumemnet._core import offload as _offload
from gpumemnet.memory import planner as _plan

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import seed000_regression  # noqa: E402

HOST = gm.memory.META_HOST
ADAM_OFF = staticmethod(lambda ps: gm.optim.Adam(ps, offload="cpu"))


@pytest.fixture(autouse=True)
def _clean():
    yield
    gc.collect()
    for d in ("meta", HOST):
        gm.memory.empty_cache(d)


def _mlp(device="meta"):
    gm.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256, device=device), nn.ReLU(), nn.Linear(256, 256, device=device),
                         nn.ReLU(), nn.Linear(256, 8, device=device))


def _nparams(m):
    return sum(p.numel() for p in m.parameters())


def _block(nbytes):
    return -(-nbytes // 512) * 512


# ---- meta-host ------------------------------------------------------------------------------------------------
def test_meta_host_counts_apart_from_meta():
    a0, h0 = gm.memory.memory_allocated("meta"), gm.memory.memory_allocated(HOST)
    t = _C.empty((1000,), gm.float32.code, "meta", True)
    assert t.device.type == "meta" and not t._is_pinned
    assert gm.memory.memory_allocated(HOST) - h0 == 4096 and gm.memory.memory_allocated("meta") == a0
    u = t + 1  # an op on it allocates on meta, as on its device
    assert gm.memory.memory_allocated("meta") - a0 == 4096
    del t, u
    assert gm.memory.memory_allocated(HOST) == h0
    gm.memory.set_limit(HOST, 1 << 20)
    try:
        with pytest.raises(gm.OutOfMemoryError, match="meta-host"):
            _C.empty((1 << 20,), gm.float32.code, "meta", True)
    finally:
        gm.memory.set_limit(HOST, None)


def test_pin_memory_on_a_cpu_only_build_still_refused():
    if gm.cuda.is_available():
        pytest.skip("CUDA is here: pinned memory exists")
    with pytest.raises(RuntimeError, match="pin_memory"):
        _C.empty((4,), gm.float32.code, "cpu", True)


# ---- estimates ------------------------------------------------------------------------------------------------
def test_estimate_with_offloaded_adam_moves_the_state_to_the_host():
    m = _mlp()
    n = _nparams(m)
    sizes = [p.numel() * 4 for p in m.parameters()]
    plain = gm.memory.estimate(m, (64,), optimizer=gm.optim.Adam, batch_size=4, device="cuda")
    off = gm.memory.estimate(m, (64,), optimizer=ADAM_OFF, batch_size=4, device="cuda")
    assert plain.host_peak == 0 and plain.bytes_moved == 0
    assert off.optimizer_bytes == 0 and plain.optimizer_bytes == 2 * sum(_block(s) for s in sizes)
    # host: master + two moments of every parameter, and one parameter's gradient at a time (the largest)
    assert off.host_peak == 3 * sum(_block(s) for s in sizes) + max(_block(s) for s in sizes)
    assert off.bytes_to_host == off.bytes_to_device == 4 * n
    assert off.total < plain.total


def test_estimate_bf16_params_with_fp32_masters():
    m = _mlp()
    sizes = [p.numel() for p in m.parameters()]
    off = gm.memory.estimate(m, (64,), optimizer=ADAM_OFF, batch_size=4, device="cuda", param_dtype=gm.bfloat16)
    assert off.param_bytes == sum(_block(2 * s) for s in sizes)
    assert off.bytes_to_host == off.bytes_to_device == 2 * sum(sizes)
    # masters and moments in fp32; the staging of the largest parameter: one bf16 buffer, its gradient coming down
    # and its updated value going up (the mixed-dtype Adam reads the one and writes the other over it)
    big = max(sizes)
    assert off.host_peak == 3 * sum(_block(4 * s) for s in sizes) + _block(2 * big)


def test_estimate_under_save_on_cpu_moves_activations():
    m = nn.Sequential(*[mod for _ in range(6) for mod in (nn.Linear(256, 256, device="meta"), nn.ReLU())])
    kw = dict(optimizer=False, batch_size=512, device="cuda")
    plain = gm.memory.estimate(m, (256,), **kw)
    off = gm.memory.estimate(m, (256,), save_on_cpu=True, **kw)
    # on the device: no activation is kept at the peak, which drops by more than two layers' activations
    assert off.at_peak["activation"] == 0 < plain.at_peak["activation"]
    assert off.peak < plain.peak - 2 * 512 * 256 * 4
    # on the host: the input and the six Linear inputs (each ReLU's output is saved by the ReLU and the next
    # Linear: one host copy), 512 x 256 float32 each
    assert off.host_peak == 7 * 512 * 256 * 4 and off.bytes_to_host == off.host_peak
    assert plain.host_peak == 0
    # entering the context around estimate() is the same
    with gm.autograd.graph.save_on_cpu():
        ctx = gm.memory.estimate(m, (256,), **kw)
    assert (ctx.peak, ctx.host_peak, ctx.bytes_moved) == (off.peak, off.host_peak, off.bytes_moved)


# ---- plan -----------------------------------------------------------------------------------------------------
def test_offload_cost_is_separate_and_can_take_measured_figures():
    assert _plan.offload_cost() == 1.0
    assert _plan.step_cost(offload_optimizer=True) == pytest.approx(_plan.OFFLOAD_OPTIMIZER_COST)
    assert _plan.step_cost(save_on_cpu=True) < _plan.step_cost(offload_optimizer=True)

    class E:
        bytes_moved, trainable = 8e9, 1e9
    t = dict(bandwidth=16e9, cpu_adam=2e9, step_seconds=1.0)
    assert _plan.offload_cost(True, False, E, t) == pytest.approx(1 + 0.5 + 0.5)


def test_plan_for_cuda_picks_offload_only_when_nothing_else_fits():
    m = _mlp()
    plain = gm.memory.estimate(m, (64,), batch_size=1, device="cuda")
    off = gm.memory.estimate(m, (64,), optimizer=ADAM_OFF, batch_size=1, device="cuda")
    p = gm.memory.plan(m, (64,), batch_size=1, budget=plain.total + (4 << 20), device="cuda")
    assert not p.offload_optimizer and p.predicted_host_peak == 0
    p = gm.memory.plan(m, (64,), batch_size=1, budget=(off.total + plain.total) // 2, device="cuda")
    assert p.offload_optimizer and p.param_dtype is None
    assert p.predicted_host_peak == off.host_peak and p.predicted_time == pytest.approx(_plan.OFFLOAD_OPTIMIZER_COST)
    assert "optimizer offloaded" in _plan._describe(_plan._config(p))
    # on the CPU there is no host to offload to: the same budget has no plan
    with pytest.raises(ValueError, match="no configuration fits"):
        gm.memory.plan(m, (64,), batch_size=1, budget=(off.total + plain.total) // 2)
    # an optimizer factory cannot be made to offload: not offered either
    with pytest.raises(ValueError, match="no configuration fits"):
        gm.memory.plan(m, (64,), optimizer=lambda ps: gm.optim.Adam(ps), batch_size=1,
                       budget=(off.total + plain.total) // 2, device="cuda")


def test_seed000_on_a_smaller_card_at_reduced_size_on_meta():
    """The story's net at channels/16, 64 x 32, 512 outputs: a 4 MiB card takes it with Adam's state on the host,
    a 2 MiB card only with bf16 parameters too (the 8 GiB and 6 GiB cards at full size); the run under the
    limit reaches exactly the planned device and host peaks."""
    if gm.cuda.is_available():
        pytest.skip("with CUDA the example runs on the device: tests/test_cuda_offload.py")
    small = ["--height", "64", "--width", "32", "--channel-div", "16", "--outputs", "512", "--batch-size", "1",
             "--steps", "2"]
    lines = []
    r8 = seed000_regression.main(small + ["--card", "4MiB"], log=lines.append)
    r6 = seed000_regression.main(small + ["--card", "2MiB"], log=lines.append)
    assert r8["device"] == "meta"
    assert r8["plan"].offload_optimizer and r8["plan"].param_dtype is None
    assert r6["plan"].offload_optimizer and r6["plan"].param_dtype == gm.bfloat16
    for r in (r8, r6):
        assert r["device_peak"] == r["plan"].predicted_peak
        assert r["host_peak"] == r["plan"].predicted_host_peak > 0
    assert "host peak" in "\n".join(lines)
    assert seed000_regression.parse_size("8GiB") == 8 << 30 and seed000_regression.parse_size("1.5MiB") == 3 << 19


# ---- the CPU side -----------------------------------------------------------------------------------------------
def test_offload_on_a_cpu_model_is_the_plain_optimizer_after_one_note():
    x = gm.randn(4, 64)
    plain, off = _mlp("cpu"), _mlp("cpu")
    o1, o2 = gm.optim.AdamW(plain.parameters()), gm.optim.AdamW(off.parameters(), offload="cpu")
    with pytest.warns(UserWarning, match="already host memory"):
        for model, opt in ((plain, o1), (off, o2)):
            model(x).sum().backward()
            opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off(x).sum().backward()
        o2.step()
    plain(x).sum().backward()
    o1.step()
    for a, b in zip(plain.parameters(), off.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert o1.state_dict().keys() == o2.state_dict().keys()


def test_offload_argument_checked():
    with pytest.raises(ValueError, match="offload must be None or 'cpu'"):
        gm.optim.Adam(_mlp("cpu").parameters(), offload="nvme")
    with pytest.raises(ValueError, match="offload must be None or 'cpu'"):
        gm.optim.SGD(_mlp("cpu").parameters(), momentum=0.9, offload=True)


def test_save_on_cpu_leaves_cpu_tensors_and_counts_nothing():
    m = _mlp("cpu")
    x = gm.randn(4, 64)
    m(x).sum().backward()
    want = [p.grad.numpy().copy() for p in m.parameters()]
    m.zero_grad()
    _offload.reset_bytes_moved()
    with gm.autograd.graph.save_on_cpu(pin_memory=False):
        y = m(x).sum()
    y.backward()
    assert _offload.bytes_moved() == {"to_host": 0, "to_device": 0}
    for w, p in zip(want, m.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), w)


def test_offload_sequential_grads_and_arguments():
    m = _mlp("cpu")
    x = gm.randn(4, 64)
    m(x).sum().backward()
    want = [p.grad.numpy().copy() for p in m.parameters()]
    for chosen in ([0, "2"], lambda mod: isinstance(mod, nn.Linear), [-1]):
        m.zero_grad()
        gm.utils.checkpoint.offload_sequential(m, x, offload=chosen).sum().backward()
        for w, p in zip(want, m.parameters()):
            np.testing.assert_array_equal(p.grad.numpy(), w)
    with pytest.raises(TypeError, match="collection of child indices"):
        gm.utils.checkpoint.offload_sequential(m, x, offload=0)
    with pytest.raises(IndexError, match="index 9 out of range for 5 children"):
        gm.utils.checkpoint.offload_sequential(m, x, offload=[9])
    with pytest.raises(ValueError, match="no child named 'fc'"):
        gm.utils.checkpoint.offload_sequential(m, x, offload=["fc"])
    with pytest.raises(TypeError, match="expected child indices"):
        gm.utils.checkpoint.offload_sequential(m, x, offload=[1.5])


def test_offload_sequential_on_meta_moves_only_the_chosen_layer():
    m = _mlp()
    x = gm.empty(32, 64, device="meta")
    _offload.reset_bytes_moved()
    gm.utils.checkpoint.offload_sequential(m, x, offload=[2])  # the second Linear: it saves its input (32, 256)
    assert _offload.bytes_moved()["to_host"] == 32 * 256 * 4
