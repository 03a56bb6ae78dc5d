"""gm.memory.estimate(device="cuda"): the meta run stands for CUDA (_C._set_meta_target, csrc/meta_target.h).

On a CUDA device (the emulator of a GPUMEMNET_CUDA=emu build, or a GPU) the estimate's peak equals, byte for
byte, max_memory_allocated("cuda") over three real training steps (the first step's: first_step_peak): the digits CNN, story 002's UNet and a
batch-norm + loss model, under fp32, checkpointing, accumulation and autocast float16. The emulator's stand-in
for cuDNN takes no workspace (tests/test_cuda_estimate_workspace.py makes up candidates that take some); on a GPU
the estimate asks the GPU's cuDNN and takes the workspace of the algorithm the steps pick (issue 15: these
comparisons used to run in the emulator only). Without a device, the CUDA scratch sizes are checked
against an independent reimplementation of kernels/cuda/scratch_sizes.h, the target is saved and restored,
and the report names the target."""
import contextlib
import gc
import os
import sys

import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C
from gpumemnet.demo import make_model
from cuda_util import requires_cuda

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from seed002_unet import UNet  # noqa: E402

ROUND = 512  # the allocator's block granularity (csrc/allocator.c)
# a CUDA device this process does not have: no cuDNN to ask (with one, tests/test_cuda_estimate_workspace.py)
ABSENT = f"cuda:{gm.cuda.device_count()}"
LOSS_SCRATCH = 4 * 8 + 3 * 8 * 512  # kernels/cuda/loss.h: a result record and three arrays of 512 partials


def _round(n):
    return max(ROUND, -(-n // ROUND) * ROUND)


@pytest.fixture(autouse=True)
def meta_is_left_empty():
    yield
    assert _C._get_meta_target() == ("cpu", 0)
    gc.collect()
    gm.memory.empty_cache("meta")




# ---- the scratch sizes, without a device ------------------------------------------------------------------------
def _bn_scratch(n, c, hw, sms):
    """kernels/cuda/scratch_sizes.h written again: 2 doubles per (channel, chunk); chunks: ~8 blocks per SM in all,
    none shorter than the minimum chunk (64 elements in the emulator build, 4096 for a GPU)."""
    min_chunk = 64 if gm.cuda.is_emulated() else 4096
    cnt = n * hw
    s = min(-(-(sms or 16) * 8 // c), -(-cnt // min_chunk), 1024)
    return 2 * c * max(s, 1) * 8


def _meta_peak(fn, target, sms=0):
    prev = _C._set_meta_target(target, sms)
    try:
        gc.collect()
        gm.memory.reset_peak_memory_stats("meta")
        base = gm.memory.memory_allocated("meta")
        fn()
        return gm.memory.max_memory_allocated("meta") - base
    finally:
        _C._set_meta_target(*prev)


@pytest.mark.parametrize("shape,sms", [((8, 16, 32, 32), 0), ((2, 3, 40, 40), 132), ((64, 256, 7, 7), 8)])
def test_batch_norm_on_meta_takes_the_cuda_scratch(shape, sms):
    n, c = shape[:2]
    hw = shape[2] * shape[3]
    x = gm.empty(shape, device="meta")
    rm, rv = gm.empty(c, device="meta"), gm.empty(c, device="meta")
    fwd = lambda: _C.batch_norm(x, rm, rv, None, None, True, 0.1, 1e-5)  # noqa: E731
    cpu, cuda = _meta_peak(fwd, "cpu"), _meta_peak(fwd, "cuda", sms)
    # the scratch is taken after the outputs and freed before the op returns: it adds to the peak exactly
    assert cuda - cpu == _round(_bn_scratch(n, c, hw, sms))
    assert _meta_peak(lambda: _C.batch_norm(x, rm, rv, None, None, False, 0.1, 1e-5), "cuda", sms) == \
        _meta_peak(lambda: _C.batch_norm(x, rm, rv, None, None, False, 0.1, 1e-5), "cpu")  # eval: no reduction


def test_losses_on_meta_take_the_cuda_scratch():
    x, t = gm.empty((32, 10), device="meta"), gm.empty(32, dtype=gm.int64, device="meta")
    for fn in (lambda: F.cross_entropy(x, t), lambda: F.nll_loss(x, t), lambda: F.mse_loss(x, x),
               lambda: F.l1_loss(x, x, reduction="sum"), lambda: F.binary_cross_entropy_with_logits(x, x)):
        assert _meta_peak(fn, "cuda") - _meta_peak(fn, "cpu") == _round(LOSS_SCRATCH)
    # reduction="none" reduces nothing: no scratch on either
    fn = lambda: F.mse_loss(x, x, reduction="none")  # noqa: E731
    assert _meta_peak(fn, "cuda") == _meta_peak(fn, "cpu")


def test_convolution_on_meta_for_cuda_takes_no_im2col_columns():
    x, w = gm.empty((4, 16, 32, 32), device="meta"), gm.empty((32, 16, 3, 3), device="meta")
    fn = lambda: _C.conv2d(x, w, None, 1, 1)  # noqa: E731
    out_bytes = _round(4 * 32 * 32 * 32 * 4)
    assert _meta_peak(fn, "cuda") == out_bytes  # the output only: cuDNN's workspace is not modelled
    assert _meta_peak(fn, "cpu") > out_bytes  # the CPU's im2col columns


def test_set_meta_target_checks_and_estimate_restores_it():
    with pytest.raises(ValueError, match="target must be 'cpu', 'cuda' or 'cuda:N', got 'tpu'"):
        _C._set_meta_target("tpu")
    with pytest.raises(ValueError, match="sm_count must be >= 0"):
        _C._set_meta_target("cuda", -1)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4))
    est = gm.memory.estimate(model, (16, 1, 8, 8), device=ABSENT)
    assert _C._get_meta_target() == ("cpu", 0)
    assert est.device == ABSENT and any("cuDNN workspace not included" in n for n in est.notes)
    assert f"predicted for {ABSENT} (cuDNN workspace not included)" in repr(est)
    for dev in ("cuda", ABSENT):  # a failing estimate restores it too (with a device to ask cuDNN or not)
        with pytest.raises(ValueError):
            gm.memory.estimate(model, (16, 2, 8, 8), device=dev)
        assert _C._get_meta_target() == ("cpu", 0)
    cpu = gm.memory.estimate(model, (16, 1, 8, 8))
    assert cpu.notes == [] and "predicted for cpu" in repr(cpu)


def test_summary_names_the_cuda_target(capsys):
    text = gm.summary(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)), (1, 8, 8), device=ABSENT,
                      capacity=1 << 30)
    assert f"predicted for {ABSENT} (cuDNN workspace not included)" in text
    assert "predicted for" not in gm.summary(nn.Sequential(nn.Linear(3, 2)), (3,), capacity=1 << 30)


# ---- estimate == the real first step on the (emulated) device -----------------------------------------------------
def _real_step(model, x, y=None, loss_fn=None, k=1, amp=None, segments=None, steps=3):
    """Training steps on cuda as estimate() runs them (zero_grad() after each); the highest peak of `steps` over
    the bytes live before them (the first step's: _real_step.first). The device's table of cuDNN choices is
    emptied first: the estimate stands for a fresh process, and earlier tests' choices made under a limit would
    be kept while they fit (csrc/ops_conv_workspace.c)."""
    _C._conv_algo_cache_clear()
    opt = gm.optim.Adam(model.parameters())
    gc.collect()
    gm.cuda.synchronize()
    gm.memory.reset_peak_memory_stats("cuda")
    base = gm.memory.memory_allocated("cuda")
    m = x.shape[0] // k
    for step in range(steps):
        for i in range(k):
            xi = x[i * m:(i + 1) * m] if k > 1 else x
            with gm.autocast("cuda", dtype=amp) if amp is not None else contextlib.nullcontext():
                out = gm.utils.checkpoint_sequential(model, segments, xi, use_reentrant=False) if segments \
                    else model(xi)
                loss = out.sum() if loss_fn is None else loss_fn(out, y[i * m:(i + 1) * m])
            del out
            if k > 1:
                loss = loss / k
            loss.backward()
            del loss
        opt.step()
        opt.zero_grad()
        if step == 0:
            _real_step.first = gm.memory.max_memory_allocated("cuda") - base
    peak = gm.memory.max_memory_allocated("cuda") - base
    del opt
    return peak


CASES = [dict(), dict(segments=2), dict(k=4), dict(amp=gm.float16)]


def _ids(c):
    return ",".join(f"{k}={v}" for k, v in c.items()) or "fp32"


def _check(model, x, y=None, loss_fn=None, segments=None, k=1, amp=None):
    est = gm.memory.estimate(model, tuple(x.shape), loss_fn=loss_fn, target=y, device="cuda",
                             checkpoint_segments=segments, accumulation_steps=k, autocast=amp)
    cpu = gm.memory.estimate(model, tuple(x.shape), loss_fn=loss_fn, target=y, device="cpu",
                             checkpoint_segments=segments, accumulation_steps=k, autocast=amp)
    real = _real_step(model, x, y, loss_fn, k=k, amp=amp, segments=segments)
    assert est.peak == real, f"estimate for cuda {est.peak} B, real steps on cuda {real} B (cpu estimate {cpu.peak})"
    assert est.first_step_peak == _real_step.first < real  # Adam's state makes the steps after the first higher
    return est, cpu, real


@requires_cuda
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_digits_estimate_equals_the_cuda_step(case):
    gm.manual_seed(0)
    model = make_model(16, device="cuda")
    x = gm.randn(32, 1, 8, 8, device="cuda")
    _check(model, x, **case)


@requires_cuda
@pytest.mark.parametrize("case", [dict(), dict(checkpointing=True), dict(k=2), dict(amp=gm.float16)], ids=_ids)
def test_unet_estimate_equals_the_cuda_step(case):
    gm.manual_seed(0)
    model = UNet(3, 3, 4, 2, checkpointing=case.get("checkpointing", False), device="cuda")
    x = gm.randn(4, 3, 16, 16, device="cuda")
    y = gm.zeros(4, 16, 16, dtype=gm.int64, device="cuda")
    _check(model, x, y, F.cross_entropy, k=case.get("k", 1), amp=case.get("amp"))


def _bn_model():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, device="cuda"), nn.BatchNorm2d(8, device="cuda"), nn.ReLU(),
                         nn.Flatten(), nn.Linear(8 * 12 * 12, 10, device="cuda"))


@requires_cuda
@pytest.mark.parametrize("case", CASES, ids=_ids)
@pytest.mark.parametrize("loss", ["cross_entropy", "mse"])
def test_batch_norm_and_loss_estimate_equals_the_cuda_step(case, loss):
    gm.manual_seed(0)
    model = _bn_model()
    x = gm.randn(16, 3, 12, 12, device="cuda")
    if loss == "cross_entropy":
        y, fn = gm.zeros(16, dtype=gm.int64, device="cuda"), F.cross_entropy
    else:
        y, fn = gm.randn(16, 10, device="cuda"), F.mse_loss
    _check(model, x, y, fn, **case)
