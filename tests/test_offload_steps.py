"""Offload over several steps, without a GPU (issue 15): a leaf's first gradient is not held twice at the end of
backward (which is the device peak once Adam's state is on the host), and a fallback under a tight cap keeps
working step after step (optimizer state that would take the room a later backward needs goes to the fallback at
once). Byte counts are exact; meta predicts the CPU's split."""
import gc
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
ADAM_OFF = staticmethod(lambda ps: gm.optim.Adam(ps, offload="cpu"))


@pytest.fixture(autouse=True)
def _clean():
    yield
    gc.collect()
    for d in ("meta", "cpu", gm.memory.META_HOST):
        gm.memory.set_fallback(d, None) if d != gm.memory.META_HOST else None
        gm.memory.set_limit(d, None)
        gm.memory.empty_cache(d)


# ---- one gradient, held once ------------------------------------------------------------------------------------
def test_accumulate_grad_takes_a_free_first_gradient_without_a_copy():
    """PyTorch's AccumulateGrad steals the incoming gradient when nothing else holds it: the end of backward holds
    the weight's gradient once, not twice."""
    lin = nn.Linear(512, 512, bias=False, device="meta")
    x = gm.empty(4, 512, device="meta")
    gm.memory.reset_peak_memory_stats("meta")
    base = gm.memory.memory_allocated("meta")
    lin(x).sum().backward()
    nbytes = 512 * 512 * 4
    assert gm.memory.max_memory_allocated("meta") - base < 2 * nbytes
    assert lin.weight.grad._category == "gradient"
    st = gm.memory.memory_stats("meta")["by_category"]
    assert st["gradient"]["current"] >= nbytes


def test_a_held_gradient_is_copied_and_accumulation_still_adds():
    held = []
    w = gm.randn(3, 3, requires_grad=True)
    w.register_hook(lambda g: held.append(g))
    (w * 2).sum().backward()
    assert held and held[0] is not w.grad  # a hook's capture holds it: .grad is a copy
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 3), 2.0, np.float32))
    held[0].fill_(7.0)
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 3), 2.0, np.float32))
    # a stolen first gradient is .grad itself: the second backward adds into it in place
    v = gm.randn(4, requires_grad=True)
    (v * 3).sum().backward()
    first = v.grad
    (v * 3).sum().backward()
    assert v.grad is first
    np.testing.assert_array_equal(v.grad.numpy(), np.full(4, 6.0, np.float32))


def test_a_gradient_that_views_a_larger_buffer_is_copied():
    """The gradients of torch.cat's inputs are views into one buffer: .grad owns its memory, so it is a copy."""
    a, b = gm.randn(3, requires_grad=True), gm.randn(5, requires_grad=True)
    gm.cat([a, b]).sum().backward()
    assert a.grad._storage_nbytes == 3 * 4 and b.grad._storage_nbytes == 5 * 4
    np.testing.assert_array_equal(a.grad.numpy(), np.ones(3, np.float32))


def test_offloaded_adam_device_peak_holds_the_big_gradient_once():
    """One big Linear at batch 1: with the state on the host the device peak is the parameters, their gradients
    and a little activation memory; the clone made it parameters + two copies of the weight's gradient."""
    m = nn.Sequential(nn.Linear(2048, 2048, device="meta"), nn.ReLU(), nn.Linear(2048, 4, device="meta"))
    big = 2048 * 2048 * 4
    off = gm.memory.estimate(m, (2048,), optimizer=ADAM_OFF, batch_size=1, device="cuda")
    params = sum(-(-p.numel() * 4 // 512) * 512 for p in m.parameters())
    assert off.total < 2 * params + MiB < 2 * params + big
    assert off.total >= 2 * params


# ---- several steps under a tight cap ------------------------------------------------------------------------------
def _run_step(device, location, batch, target=None, steps=3):
    """tests/fallback_step.py in a fresh process (an allocator with no history): its JSON figures."""
    env = dict(os.environ, GPUMEMNET_TEST_BATCH=str(batch), GPUMEMNET_TEST_STEPS=str(steps),
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(gm.__file__))] +
                                          os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    cmd = [sys.executable, "-W", "ignore", os.path.join(HERE, "fallback_step.py"), device, location] + (
        [target] if target else [])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_several_steps_under_a_cap_whose_backward_needs_the_states_room(tmp_path):
    """At batch 1024 a step's forward and backward hold 54 MiB of segments; the cap (70 MiB) leaves room beside
    them for one of Adam's two 12 MiB moments. Placed block by block (before), step 1's state filled the cached room
    backward had just freed and step 2's backward ran out of memory (activation_grad cannot fall back); now state
    goes on the device only into segments of its own beside that room, the second moment to the fallback at once,
    three steps run, and meta predicts the split byte for byte."""
    cpu = _run_step("cpu", str(tmp_path), 1024)
    meta = _run_step("meta", str(tmp_path), 1024)
    ref = _run_step("cpu", "none", 1024)
    assert cpu["steps"] == 3
    assert meta["by_location"] == cpu["by_location"]
    dev, spill = cpu["by_location"]["device"], cpu["by_location"]["file"]
    assert dev["reserved"]["peak"] <= cpu["limit"]
    assert spill["optimizer"]["peak"] >= 12 * MiB  # at least the big Linear's second moment
    assert dev["optimizer"]["peak"] + spill["optimizer"]["peak"] >= 2 * cpu["params"]  # all of Adam's state
    np.testing.assert_array_equal(np.array(cpu["sums"]), np.array(ref["sums"]))
    for got, want in zip(cpu["values"], ref["values"]):
        np.testing.assert_array_equal(np.array(got), np.array(want))
