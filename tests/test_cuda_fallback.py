"""gm.memory.set_fallback("cuda", "host") (issue 15, item 1) on a CUDA device (the emulator of a GPUMEMNET_CUDA=emu
build, or a GPU): blocks that do not fit under the cap come from pinned host memory mapped into the device's address
space (cudaHostAlloc + cudaHostAllocMapped), counted under by_location["host"]; every kernel and copy works on them;
a training step whose Adam state falls back gives the parameters of the run without a cap, and meta (standing for
CUDA) predicts the split byte for byte."""
import os
import sys
import warnings

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import requires_cuda

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fallback import _run_step  # noqa: E402

pytestmark = requires_cuda
MiB = 1 << 20


@pytest.fixture(autouse=True)
def clean():
    gm.memory.empty_cache("cuda")
    yield
    gm.memory.set_fallback("cuda", None)
    gm.memory.set_limit("cuda", None)
    gm.memory.empty_cache("cuda")


def test_blocks_fall_back_to_mapped_host_memory_and_kernels_use_them():
    base, base_alloc = gm.memory.memory_reserved("cuda"), gm.memory.memory_allocated("cuda")
    gm.memory.set_limit("cuda", base + 24 * MiB)
    gm.memory.set_fallback("cuda", "host", ("optimizer",))
    with gm.memory.category("optimizer"):
        a = gm.empty(4 * MiB, device="cuda")  # 16 MiB on the device
        with pytest.warns(UserWarning, match=r"cuda:0 is full \(limit .*\): a 16.00 MiB block of optimizer was placed "
                                             r"in host memory the GPU reads over the bus.*slower"):
            b = gm.empty(4 * MiB, device="cuda")
    s = gm.memory.memory_stats("cuda")
    assert s["by_location"]["host"]["allocated"]["current"] == 16 * MiB
    assert s["allocated"]["current"] - base_alloc == 16 * MiB
    assert b.device == gm.device("cuda:0")
    b.fill_(2.0)                                   # a kernel writes the host block
    assert float((b[:1024] * 3.0).sum()) == 6144.0  # a kernel reads it
    a.copy_(b)                                     # device <- host block, on the device's stream
    np.testing.assert_array_equal(a[-8:].cpu().numpy(), np.full(8, 2.0, np.float32))
    b[:4].copy_(gm.arange(4, dtype=gm.float32))    # host -> host block
    np.testing.assert_array_equal(b[:6].cpu().numpy(), np.array([0, 1, 2, 3, 2, 2], np.float32))
    del b
    assert gm.memory.memory_stats("cuda")["by_location"]["host"]["allocated"]["current"] == 0
    del a


def test_a_training_step_whose_adam_state_falls_back_matches_the_run_without_a_cap():
    capped = _run_step("cuda", "host")
    ref = _run_step("cuda", "none")
    meta = _run_step("meta", "host", "cuda")
    # both of the big Linear's 12 MiB Adam moments: the device keeps room for the step's peak and its largest block
    assert capped["by_location"]["host"]["optimizer"]["peak"] == 24 * MiB
    assert capped["by_location"]["device"]["reserved"]["peak"] <= capped["limit"]
    assert meta["by_location"] == capped["by_location"]  # the estimate's split, byte for byte
    np.testing.assert_array_equal(np.array(capped["sums"]), np.array(ref["sums"]))
    for got, want in zip(capped["values"], ref["values"]):
        np.testing.assert_array_equal(np.array(got), np.array(want))
