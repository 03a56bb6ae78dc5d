"""gm.memory.estimate(device="cuda") counts cuDNN's convolution workspace (issue 15).

With the device in this process (the emulator of a GPUMEMNET_CUDA=emu build, or a GPU), the meta run asks the
device's cuDNN for its candidates and picks as the device does: the first whose workspace the allocator can give
under the cap (csrc/ops_conv_workspace.c). The emulator's cuDNN stand-in proposes one candidate with no workspace,
so these tests make up candidates with _C._conv_algo_fake (both sides then choose among them; the passes run the
direct kernels): the reference is the real steps' measured peak on the device, which must equal the estimate
byte for byte, with the same candidate picked on both sides (_C._conv_algo_last), also under a limit where the
first candidate does not fit, and whatever the other side's table of choices holds; and, in fresh processes
(tests/conv_workspace_step.py), under limits where the first fits in some passes and not in others.

Without the device (a CPU-only build, or a CUDA device index this process does not have) there is no cuDNN to
ask: the convolutions take no workspace and the Estimate, plan() and max_batch_size() say so."""
import gc
import json
import os
import subprocess
import sys

import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C
from gpumemnet.memory.estimator import CUDNN_NOTE
from cuda_util import requires_cuda

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from seed002_unet import UNet  # noqa: E402

MiB = 1 << 20
ROUND = 512  # the allocator's block granularity (csrc/allocator.c)
# a device index this process does not have: estimating for it, there is no cuDNN to ask
ABSENT = f"cuda:{gm.cuda.device_count()}"


def _round(n):
    return -(-n // ROUND) * ROUND


@pytest.fixture
def fake_algos():
    yield _C._conv_algo_fake
    _C._conv_algo_fake(None)
    gm.memory.set_limit("cuda", None)
    gc.collect()
    gm.memory.empty_cache("meta")


def _conv_net():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, device="cuda"), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, stride=2, padding=1, device="cuda"), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8 * 6 * 6, 10, device="cuda"))


def _conv_case():
    gm.manual_seed(0)
    return _conv_net(), gm.randn(8, 3, 12, 12, device="cuda"), gm.zeros(8, dtype=gm.int64, device="cuda")


def _unet_case():
    gm.manual_seed(0)
    return (UNet(3, 3, 4, 2, device="cuda"), gm.randn(4, 3, 16, 16, device="cuda"),
            gm.zeros(4, 16, 16, dtype=gm.int64, device="cuda"))


CASES = {"conv": _conv_case, "unet": _unet_case}


def _real_steps(model, x, y, steps=3, limit=None):
    """Training steps on cuda as estimate() runs them (forward, cross_entropy, backward, Adam.step, zero_grad),
    under `limit` bytes of reserved memory beyond what is reserved now (None: none). The highest peak of the
    steps over the bytes live before them, and the first step's (_real_steps.first)."""
    opt = gm.optim.Adam(model.parameters())
    gc.collect()
    gm.cuda.synchronize()
    gm.memory.empty_cache("cuda")
    if limit is not None:
        gm.memory.set_limit("cuda", gm.memory.memory_reserved("cuda") + limit)
    try:
        gm.memory.reset_peak_memory_stats("cuda")
        base = gm.memory.memory_allocated("cuda")
        for step in range(steps):
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            if step == 0:
                _real_steps.first = gm.memory.max_memory_allocated("cuda") - base
        return gm.memory.max_memory_allocated("cuda") - base
    finally:
        gm.memory.set_limit("cuda", None)


def _estimate(model, x, y, limit=None):
    return gm.memory.estimate(model, tuple(x.shape), loss_fn=F.cross_entropy, target=y, device="cuda", limit=limit)


def _ws_peak(dev):
    return gm.memory.memory_stats(dev)["by_category"]["workspace"]["peak"]


# ---- with the device: the estimate takes the workspace the device takes -------------------------------------------
@requires_cuda
@pytest.mark.parametrize("case", sorted(CASES))
def test_estimate_counts_the_workspace_of_the_first_candidate(case, fake_algos):
    model, x, y = CASES[case]()
    fake_algos([0])
    without = _estimate(model, x, y)
    first, second = 5 * MiB + 1000, 3 * MiB + 7  # not multiples of the allocator's rounding
    fake_algos([first, second, 0])
    est = _estimate(model, x, y)
    assert est.conv_workspace_counted and CUDNN_NOTE not in est.notes and "not included" not in repr(est)
    meta_last = _C._conv_algo_last("meta")
    real = _real_steps(model, x, y)
    assert est.peak == real, f"estimate {est.peak} B, real steps on cuda {real} B"
    assert est.first_step_peak == _real_steps.first
    assert meta_last["workspace"] == _C._conv_algo_last()["workspace"] == first  # the choice (the last pass's)
    assert _ws_peak("cuda") == _round(first)  # one pass's workspace at a time, freed after its launch
    assert est.peak > without.peak  # the workspace is in it


@requires_cuda
@pytest.mark.parametrize("case", sorted(CASES))
def test_under_a_limit_the_estimate_picks_the_candidate_that_fits(case, fake_algos):
    """Under 48 MiB beyond what the model holds, a 64 MiB workspace never fits (it would need a segment of its own
    larger than the limit) and 3 MiB always does: both sides pass over the first candidate and take the second."""
    model, x, y = CASES[case]()
    big, mid, limit = 64 * MiB, 3 * MiB + 7, 48 * MiB
    fake_algos([big, mid, 0])
    est = _estimate(model, x, y, limit=limit)
    meta_last = _C._conv_algo_last("meta")
    ooms = gm.memory.memory_stats("cuda")["num_ooms"]
    real = _real_steps(model, x, y, limit=limit)
    assert gm.memory.memory_stats("cuda")["num_ooms"] == ooms  # passing over a candidate is not an OOM
    assert est.peak == real, f"estimate {est.peak} B, real steps on cuda {real} B"
    assert est.first_step_peak == _real_steps.first
    assert meta_last["workspace"] == _C._conv_algo_last()["workspace"] == mid
    assert _ws_peak("cuda") == _round(mid)
    # without the limit the first fits, on meta as on a fresh process's device (this one's keeps the choices it
    # made under the limit while they fit: test_the_estimate_and_the_device_keep_their_own_choices)
    _C._conv_algo_cache_clear()
    est = _estimate(model, x, y)
    assert _C._conv_algo_last("meta")["workspace"] == big and est.peak == _real_steps(model, x, y)
    assert _C._conv_algo_last()["workspace"] == big


@requires_cuda
def test_the_estimate_and_the_device_keep_their_own_choices(fake_algos):
    """A choice is kept while its workspace fits (ops_conv_workspace.c), so a table shared by the device and meta
    would carry one side's choice under a limit into the other's run without it. Each decides as a fresh process
    does: an estimate under a limit leaves the device's choices alone, and the device's under a limit leave the
    next estimate's alone."""
    model, x, y = _conv_case()
    big, mid, limit = 16 * MiB, 3 * MiB, 10 * MiB  # under the limit the 16 MiB candidate cannot fit
    fake_algos([big, mid, 0])
    free = _real_steps(model, x, y)
    assert _C._conv_algo_last()["workspace"] == big
    _estimate(model, x, y, limit=limit)
    assert _C._conv_algo_last("meta")["workspace"] == mid
    assert _real_steps(model, x, y) == free
    last = _C._conv_algo_last()
    assert last["cached"] and last["workspace"] == big  # the device's own earlier choice, still fitting
    _real_steps(model, x, y, limit=limit)  # the device's choices under the limit: its table now holds those
    assert _C._conv_algo_last()["workspace"] == mid
    est = _estimate(model, x, y)
    assert _C._conv_algo_last("meta")["workspace"] == big and est.peak == free
    # ... while the device, its table holding the 3 MiB choices (which still fit), keeps them: the estimate stands
    # for a fresh process, and this one is not (_conv_algo_cache_clear() makes it one again)
    assert _real_steps(model, x, y) < free
    last = _C._conv_algo_last()
    assert last["cached"] and last["workspace"] == mid
    _C._conv_algo_cache_clear()
    assert _real_steps(model, x, y) == free


@requires_cuda
def test_cudnn_target_names_a_device_of_this_process():
    n = gm.cuda.device_count()
    with pytest.raises(ValueError, match=f"target 'cuda:{n}' names no CUDA device of this process"):
        _C._set_meta_target(f"cuda:{n}")
    with pytest.raises(ValueError, match="names no CUDA device"):
        _C._set_meta_target("cuda:x")
    prev = _C._set_meta_target("cuda:0", 3)
    try:
        assert _C._get_meta_target() == ("cuda:0", 3)
    finally:
        _C._set_meta_target(*prev)
    assert _C._get_meta_target() == ("cpu", 0)
    with pytest.raises(ValueError, match="expected 'cuda'"):
        _C._conv_algo_last("cpu")


# ---- without the device: not counted, and said so -------------------------------------------------------------
def _cpu_conv_net():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 10))


def test_without_a_device_the_workspace_is_not_counted_and_the_estimate_says_so():
    est = gm.memory.estimate(_cpu_conv_net(), (1, 8, 8), batch_size=16, device=ABSENT)
    assert est.device == ABSENT and not est.conv_workspace_counted and CUDNN_NOTE in est.notes
    assert f"predicted for {ABSENT} (cuDNN workspace not included)" in repr(est)
    text = gm.summary(_cpu_conv_net(), (1, 8, 8), device=ABSENT, capacity=1 << 30)
    assert f"predicted for {ABSENT} (cuDNN workspace not included)" in text
    # no convolution, nothing left out
    mlp = gm.memory.estimate(nn.Sequential(nn.Linear(8, 4)), (8,), batch_size=4, device=ABSENT)
    assert mlp.conv_workspace_counted and mlp.notes == [] and "not included" not in repr(mlp)
    # the CPU's workspace (im2col columns) is always counted
    cpu = gm.memory.estimate(_cpu_conv_net(), (1, 8, 8), batch_size=16)
    assert cpu.conv_workspace_counted and cpu.notes == []
    assert _C._get_meta_target() == ("cpu", 0)


def test_without_a_device_plan_and_max_batch_size_say_the_workspace_is_not_counted():
    model = _cpu_conv_net()
    p = gm.memory.plan(model, (1, 8, 8), batch_size=8, budget=1 << 30, device=ABSENT)
    assert not p.conv_workspace_counted and CUDNN_NOTE in p.notes
    assert "(cuDNN workspace not included)" in repr(p)
    with pytest.warns(UserWarning, match="max_batch_size: for .*cuDNN workspace not included") as caught:
        gm.memory.max_batch_size(model, (1, 8, 8), budget=64 << 20, hi=64, device=ABSENT)
    assert sum("cuDNN workspace" in str(w.message) for w in caught) == 1  # once, not once per batch tried
    assert gm.memory.plan(model, (1, 8, 8), batch_size=8, budget=1 << 30).conv_workspace_counted


def test_conv_workspace_uncounted_counts_the_passes_left_out():
    x, w = gm.empty((2, 3, 8, 8), device="meta"), gm.empty((4, 3, 3, 3), device="meta")
    before = _C._conv_workspace_uncounted()
    prev = _C._set_meta_target("cuda")
    try:
        _C.conv2d(x, w, None, 1, 1)
        _C.conv2d_backward(gm.empty((2, 4, 8, 8), device="meta"), x, w, 1, 1, 1, 1, (True, True, False))
    finally:
        _C._set_meta_target(*prev)
    assert _C._conv_workspace_uncounted() - before == 3  # forward, then the input- and weight-gradient passes
    _C.conv2d(x, w, None, 1, 1)  # meta standing for the CPU: its im2col columns are counted
    assert _C._conv_workspace_uncounted() - before == 3


# ---- in fresh processes: where the limit decides pass by pass ------------------------------------------------------
def _fresh(mode, limit, sizes):
    """tests/conv_workspace_step.py in a fresh process (an allocator and a table of choices with no history)."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(gm.__file__))] +
                                                      os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    r = subprocess.run([sys.executable, "-W", "ignore", os.path.join(here, "conv_workspace_step.py"), mode,
                        str(limit), *map(str, sizes)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@requires_cuda
@pytest.mark.parametrize("limit", [8 * MiB, 9 * MiB])
def test_where_the_limit_decides_pass_by_pass_the_estimate_decides_the_same(limit):
    """Under these limits a 6 MiB workspace fits in some passes and not in others, depending on what the step
    holds at that moment and on how its segments are laid out: under 8 MiB only the first pass takes it (its
    choice is then dropped: it no longer fits), under 9 MiB the choices alternate. The estimate's simulated
    allocator sees the same free room at every pass, so it takes the same workspaces and peaks at the same byte.
    The inference forward after the steps has room for 6 MiB again, but the table holds the steps' 1.5 MiB
    choices, which still fit and are kept (under 8 MiB its peak is 2.9 MB where a fresh pick would take 7.3 MB):
    meta's table went through the same choices as the device's."""
    sizes = [6 * MiB, 3 * MiB // 2, 0]
    real, est = _fresh("cuda", limit, sizes), _fresh("estimate", limit, sizes)
    assert est["counted"]
    assert all(real["taken"].values()) and all(est["taken"].values()), (real, est)  # both candidates were taken
    keys = ("peak", "first_step_peak", "inference_peak")
    assert [est[k] for k in keys] == [real[k] for k in keys], (real, est)
