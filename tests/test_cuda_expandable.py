"""gm.memory.set_allocator("expandable") on a CUDA device (issue 15, item 4): the driver's virtual memory management
(cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess; kernels/cuda/emu/emu_vmm.cpp stands in for them in the
emulator build). The fragmentation case fails with the caching allocator and runs with expandable segments, with the
figures meta predicts; a training step on expandable segments computes what it computes on cached segments, with the
same allocated bytes."""
import os
import sys

import numpy as np

import gpumemnet as gm
from cuda_util import requires_cuda

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))
import fragmentation  # noqa: E402
from test_fallback import _run_step  # noqa: E402

pytestmark = requires_cuda
MiB = 1 << 20
FIGURES = ("reserved_after_nine", "allocated_after_free", "reserved_after_free", "reserved_unallocated",
           "largest_free_block", "expandable_would_help", "ok", "allocated_after", "reserved_after")


def test_fragmentation_case_on_cuda_as_meta_predicts():
    for mode in ("caching", "expandable"):
        cuda, meta = fragmentation.run_fresh("cuda", mode), fragmentation.run_fresh("meta", mode)
        assert {k: cuda.get(k) for k in FIGURES} == {k: meta.get(k) for k in FIGURES}, mode
        assert cuda["ok"] == (mode == "expandable")
    assert cuda["reserved_after"] == 42 * MiB
    caching = fragmentation.run_fresh("cuda", "caching")
    assert caching["error"].startswith("CUDA out of memory on cuda:0: tried to allocate 24.00 MiB")
    assert any("set_allocator('expandable')" in s for s in caching["suggestions"])


def test_a_training_step_on_expandable_segments(monkeypatch):
    ref = _run_step("cuda", "none")
    monkeypatch.setenv("GPUMEMNET_TEST_ALLOCATOR", "expandable")
    got = _run_step("cuda", "none")
    meta = _run_step("meta", "none", "cuda")
    assert got["allocator"] == "expandable"
    assert got["allocated_peak"] == ref["allocated_peak"]  # blocks hold the same bytes in both modes
    assert meta["by_location"] == got["by_location"]  # reserved = mapped granules, predicted on meta
    for a, b in zip(got["values"], ref["values"]):
        np.testing.assert_array_equal(np.array(a), np.array(b))


def test_pytorchs_setting_turns_expandable_segments_on(monkeypatch):
    from test_expandable import fresh
    code = "gm.empty(1, device='cuda'); print(json.dumps(gm.memory.get_allocator('cuda')))"
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    assert fresh(code) == "expandable"
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128,expandable_segments:False")
    assert fresh(code) == "caching"


def test_estimate_for_cuda_runs_meta_in_the_devices_allocator_mode():
    from test_expandable import fresh
    code = """
import sys
import gpumemnet.nn as nn, gpumemnet.nn.functional as F
out = []
for mode in ("caching", "expandable"):
    gm.memory.set_allocator(mode, device="cuda")
    gm.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    est = gm.memory.estimate(model, (4, 1024), loss_fn=F.mse_loss, target=(4, 10), device="cuda")
    model = model.to("cuda")
    x, y = gm.randn(4, 1024).to("cuda"), gm.randn(4, 10).to("cuda")
    opt = gm.optim.Adam(model.parameters())
    F.mse_loss(model(x), y).backward()
    opt.step()
    out.append([est.peak_reserved, gm.memory.memory_stats("cuda")["reserved"]["peak"], gm.memory.get_allocator("meta")])
    del model, x, y, opt
    gm.memory.empty_cache("cuda")
    gm.memory.reset_peak_memory_stats("cuda")
print(json.dumps(out))
"""
    (c_est, c_real, c_meta), (x_est, x_real, x_meta) = fresh(code)
    MiB = 1 << 20
    # the 4 MiB weight: a 20 MiB segment of the caching allocator, two granules of an expandable segment
    assert (c_est, c_real) == (22 * MiB, 22 * MiB)
    assert (x_est, x_real) == (18 * MiB, 18 * MiB)
    assert c_meta == x_meta == "caching"  # meta's own mode is back after each estimate
