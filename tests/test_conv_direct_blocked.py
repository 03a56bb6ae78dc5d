"""The direct float32 convolution's blocked weight (kernels/cpu/conv_direct.c, direct_blocked): where the whole
repacked weight passes 1 MiB, a stride-1 forward or input-gradient packs one block of 8 output channels at a time
into a buffer per thread, so its workspace is threads x 8 x input channels x taps floats, not the whole weight
(VGG-11's 512->512 layer at 8x8 held 9 MiB of it at the peak of an eval step). Results against the float64
references of tests/conv_util.py (the last block short of 8 channels, groups, 1 and 2 threads), the workspace
bytes, and meta allocating what the CPU does. Winograd is off here (it takes 3x3 layers of 64+ channels first).
Where the CPU has no AVX-512 im2col runs: the results are still checked, the bytes are not."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn.functional import conv2d

from conv_util import R, T, _workspace_peak, ref_conv2d, ref_conv_transpose2d, threads
from gradcheck import assert_close
from test_conv_direct import AVX512

CAP = 1 << 20  # DIRECT_WS_CAP
GRAIN = 1 << 20  # CONV_GEMM_GRAIN: below it a pass runs on one thread


@pytest.fixture(autouse=True)
def no_winograd(monkeypatch):
    monkeypatch.setenv("GPUMEMNET_CONV_WINOGRAD", "0")


def _round(n):
    return -(-n // 512) * 512


def expected_bytes(xs, ws, groups, nthreads, forward=True):
    """The workspace of a stride-1 direct pass: a block per thread when the whole packed weight passes CAP."""
    N, _, H, W = xs
    K, Cg, Rk, Sk = ws
    Kg = K // groups
    outc, inc = (Kg, Cg) if forward else (Cg, Kg)
    whole = groups * -(-outc // 8) * 8 * inc * Rk * Sk * 4
    nt = nthreads if nthreads > 1 and N * K * H * W * Cg * Rk * Sk >= GRAIN else 1
    units = groups * -(-outc // 8)
    if units > nt and whole > CAP:
        return _round(nt * 8 * inc * Rk * Sk * 4)
    return _round(whole)


# x, w, groups; every one's packed weight passes 1 MiB in both passes
CASES = [
    dict(x=(2, 96, 8, 8), w=(124, 96, 5, 5)),             # 5x5; K 124: the last block holds 4
    dict(x=(3, 200, 6, 10), w=(180, 200, 3, 3)),          # 60 positions; K 180: 22 blocks + 4
    dict(x=(2, 256, 8, 8), w=(240, 128, 3, 3), groups=2),  # groups: blocks of each group
    dict(x=(1, 192, 8, 8), w=(192, 192, 3, 3)),           # one item
]


def _ids(c):
    return "-".join(f"{k}{v}" for k, v in c.items()).replace(" ", "")


@pytest.mark.parametrize("nthreads", [1, 2])
# sums of up to 2400 terms of R(): 1e-4 (a wrong or stale weight block is off by 1e-1)
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_blocked_forward_and_input_gradient(case, nthreads, threads):
    gm.set_num_threads(nthreads)
    xs, ws, groups = case["x"], case["w"], case.get("groups", 1)
    pad = ws[2] // 2
    assert expected_bytes(xs, ws, groups, nthreads) < _round(groups * -(-ws[0] // groups // 8) * 8 * ws[1] * ws[2]
                                                             * ws[3] * 4), "not a blocked case"
    x, w, b = R(*xs), R(*ws), R(ws[0])
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(T(x, gm.float32), T(w, gm.float32), T(b, gm.float32), padding=pad, groups=groups)
    if AVX512:
        assert _workspace_peak() == expected_bytes(xs, ws, groups, nthreads)
    assert_close(out, ref_conv2d(x, w, b, padding=pad, groups=groups), 1e-4, 1e-4, what="forward")
    dout = R(*out.shape)
    gm.memory.reset_peak_memory_stats("cpu")
    dx = _C.conv2d_backward(T(dout, gm.float32), None, T(w, gm.float32), 1, pad, 1, groups,
                            (True, False, False), xs)[0]
    if AVX512:
        assert _workspace_peak() == expected_bytes(xs, ws, groups, nthreads, forward=False)
    assert_close(dx, ref_conv_transpose2d(dout, w, None, 1, pad, 0, groups, 1), 1e-4, 1e-4, what="input gradient")


def test_vgg_deep_layer_workspace_is_a_block_per_thread(threads):
    """512->512 3x3 at 8x8, batch 4 (VGG-11's features.13 at 64x64 input): 2 threads x 144 KiB, not 9 MiB."""
    gm.set_num_threads(2)
    x = gm.zeros((4, 512, 8, 8))
    w = gm.zeros((512, 512, 3, 3))
    gm.memory.reset_peak_memory_stats("cpu")
    conv2d(x, w, padding=1)
    if AVX512:
        assert _workspace_peak() == 2 * 8 * 512 * 9 * 4


@pytest.mark.parametrize("nthreads", [1, 2])
def test_meta_allocates_the_cpus_bytes(nthreads, threads):
    """A training step through a blocked layer: every allocation, in order, is the same on meta as on the CPU."""
    gm.set_num_threads(nthreads)
    hist = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((2, 200, 6, 10), device=dev, requires_grad=True)
        w = gm.zeros((180, 200, 3, 3), device=dev, requires_grad=True)
        gm.memory.record_history(True, device=dev)
        conv2d(x, w, padding=1).sum().backward()
        hist.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert hist[0] == hist[1]
    if AVX512:
        assert (expected_bytes((2, 200, 6, 10), (180, 200, 3, 3), 1, nthreads), "workspace") in hist[0]
