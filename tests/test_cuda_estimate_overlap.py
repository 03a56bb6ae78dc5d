"""The estimate of an offloading optimizer's step against the measured step on CUDA (a GPU, or the emulator of a
GPUMEMNET_CUDA=emu build, where the device's bytes and the pinned host's are counted apart): Adam, AdamW and SGD
with momentum, offload="cpu", with and without overlap_grad_copies() (the factory asks for it, the estimate runs
it), with and without gradient accumulation, fp32 and bf16 parameters. Device peak, host peak, bytes moved per
step, per micro-batch and on the copy stream: each equal, byte for byte. The meta-only side (and the formulas
behind the figures): tests/test_estimate_offload_overlap.py."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from cuda_util import requires_cuda
from gpumemnet._core import offload as _off

pytestmark = requires_cuda
DEV, PIN = "cuda", "cpu-pinned"
BATCH = 4

OPTS = {
    "adam": lambda ps: gm.optim.Adam(ps, lr=1e-2, offload="cpu"),
    "adamw": lambda ps: gm.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, offload="cpu"),
    "sgd_momentum": lambda ps: gm.optim.SGD(ps, lr=1e-2, momentum=0.9, offload="cpu"),
}


def _net(dtype=None):
    gm.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 5, 7),
                      nn.ReLU(), nn.Linear(7, 3)).to(DEV)
    return m.to(dtype) if dtype is not None else m


def _data(dtype):
    rng = np.random.default_rng(1)
    x = gm.tensor(rng.standard_normal((BATCH, 2, 6, 5)).astype(np.float32)).to(DEV, dtype or gm.float32)
    y = gm.tensor(rng.standard_normal((BATCH, 3)).astype(np.float32)).to(DEV, dtype or gm.float32)
    with gm.memory.category("input"):  # as the estimate counts them
        return x.clone(), y.clone()


def _clean():
    gc.collect()
    for d in (DEV, PIN, "cpu"):
        gm.memory.empty_cache(d)


def _measure(model, opt, x, y, k):
    """One step of k micro-batches: (device peak above the bytes live before it, pinned host peak above its
    start, bytes moved, bytes moved by the first micro-batch, bytes moved on the copy stream)."""
    gc.collect()
    for d in (DEV, PIN):
        gm.memory.reset_peak_memory_stats(d)
    d0, h0 = gm.memory.memory_allocated(DEV), gm.memory.memory_allocated(PIN)
    _off.reset_bytes_moved()
    opt.zero_grad()
    m = BATCH // k
    for i in range(k):
        loss = F.mse_loss(model(x[i * m:(i + 1) * m]), y[i * m:(i + 1) * m])
        (loss / k if k > 1 else loss).backward()
        loss = None
        if i == 0:
            first = _off.bytes_moved()
    opt.step()
    return (gm.memory.max_memory_allocated(DEV) - d0, gm.memory.max_memory_allocated(PIN) - h0,
            _off.bytes_moved(), first, _off.bytes_overlapped())


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("overlap", [False, True], ids=["sync", "overlap"])
@pytest.mark.parametrize("pdt", [None, gm.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", list(OPTS))
def test_estimate_equals_the_measured_offloaded_step(name, pdt, overlap, k):
    make = OPTS[name]
    factory = (lambda ps: make(ps).overlap_grad_copies()) if overlap else make
    target = gm.empty(BATCH, 3, dtype=pdt or gm.float32, device="meta")
    est = gm.memory.estimate(_net(pdt), (2, 6, 5), loss_fn=F.mse_loss, optimizer=factory, batch_size=BATCH,
                             device=DEV, target=target, param_dtype=pdt, accumulation_steps=k)
    assert est.overlap_grad_copies == overlap
    _clean()
    model = _net(pdt)
    x, y = _data(pdt)
    opt = factory(model.parameters())
    hs = gm.memory.memory_allocated(PIN)
    gc.collect()
    ds = gm.memory.memory_allocated(DEV)
    dev_peak, host_peak, moved, first, overlapped = _measure(model, opt, x, y, k)
    assert dev_peak == est.first_step_peak
    assert host_peak == est.host_peak > 0
    assert moved == {"to_host": est.bytes_to_host, "to_device": est.bytes_to_device}
    assert first == {"to_host": est.micro_batch_to_host, "to_device": est.micro_batch_to_device}
    assert overlapped == {"to_host": est.overlapped_to_host, "to_device": est.overlapped_to_device}
    grad = sum(p.numel() * p.element_size() for p in model.parameters())
    assert est.bytes_to_host == (k if overlap else 1) * grad and est.bytes_overlapped == (k * grad if overlap else 0)
    # the next step holds what the first held: the masters and state are made before the first update, so the
    # host peak above the start of the first step is the same (the staging comes and goes within each step)
    live, live_dev = gm.memory.memory_allocated(PIN), gm.memory.memory_allocated(DEV)
    second_dev, second_peak, second_moved, _, _ = _measure(model, opt, x, y, k)
    assert live + second_peak - hs == est.host_peak and second_moved == moved
    # the device peak over both steps (the state is on the host: the second holds no more than the first)
    assert max(dev_peak, live_dev + second_dev - ds) == est.peak
    del model, opt, x, y
    _clean()
