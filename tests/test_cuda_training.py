"""Whole training steps on CUDA against the same steps on the CPU: a small CNN with every layer family
(convolution, batch norm, ReLU, max pool, dropout, global pooling, linear, cross-entropy, Adam) from the same
weights, data and seed; the allocator's bytes per category; no growth of device memory over 100 steps."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from cuda_util import requires_cuda, to_np

pytestmark = requires_cuda


def make_model():
    gm.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(2, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding=1, groups=2, bias=False), nn.ReLU(), nn.Dropout2d(0.25),
        nn.GlobalAvgPool2d(), nn.Linear(8, 5))


def data(n=6):
    rng = np.random.default_rng(1)
    return rng.standard_normal((n, 2, 8, 8)).astype(np.float32), rng.integers(0, 5, n).astype(np.int64)


def train(device, steps, x, y):
    model = make_model().to(device)
    opt = gm.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-3)
    xt, yt = gm.from_numpy(x, device=device), gm.from_numpy(y, device=device)
    gm.manual_seed(123)  # the dropout masks: the same Philox stream on both devices
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, opt, losses


def test_three_steps_match_the_cpu():
    x, y = data()
    cpu_model, _, cpu_losses = train("cpu", 3, x, y)
    cuda_model, _, cuda_losses = train("cuda", 3, x, y)
    np.testing.assert_allclose(cuda_losses, cpu_losses, rtol=1e-5)
    for (name, a), (_, b) in zip(cuda_model.state_dict().items(), cpu_model.state_dict().items()):
        assert a.device.type == "cuda", name
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-4, atol=1e-5, err_msg=name)


def test_state_bytes_are_the_same_on_both_devices():
    """Parameters, gradients and Adam's state take the same bytes on cuda as on the cpu; only convolution
    workspace may differ (im2col tiles on the CPU, cuDNN's choice on the GPU)."""
    x, y = data()
    stats = {}
    for dev in ("cpu", "cuda"):
        gc.collect()
        gm.memory.empty_cache(dev)
        before = gm.memory.memory_stats(dev)["by_category"]
        model, opt, _ = train(dev, 2, x, y)
        after = gm.memory.memory_stats(dev)["by_category"]
        stats[dev] = {k: after[k]["current"] - before[k]["current"] for k in ("parameter", "gradient", "optimizer")}
        del model, opt
    assert stats["cuda"] == stats["cpu"]
    assert stats["cuda"]["optimizer"] > 0 and stats["cuda"]["gradient"] > 0


def test_no_device_memory_growth_over_100_steps():
    x, y = data(4)
    model = make_model().to("cuda")
    opt = gm.optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = gm.from_numpy(x, device="cuda"), gm.from_numpy(y, device="cuda")
    marks = {}
    for i in range(100):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()
        if i in (4, 99):
            gc.collect()  # garbage of earlier tests (cycles) must not be freed between the two marks
            marks[i] = (gm.cuda.memory_allocated(), gm.cuda.memory_reserved())
    assert marks[99] == marks[4]
