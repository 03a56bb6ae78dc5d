"""The direct float32 convolution (kernels/cpu/conv_direct.c): stride-1 layers whose output keeps the input's size,
on CPUs with AVX-512. Forward, input-gradient and (3x3) weight-gradient against the float64 NumPy references of
tests/conv_util.py, over plane sizes that end inside a vector and inside a block of 48 positions, channel counts
that are not multiples of its blocks (8 output channels; 8, 4, 2, 1 for the weight-gradient), groups, dilation,
other odd kernels, a bias, an input whose channels are a strided slice, 1 and 2 threads; its workspace (the
repacked weight, nothing for the weight-gradient) on the CPU and on meta, and the fall-back to im2col when the
limit cannot hold it. Where the CPU has no AVX-512 the same cases run im2col: the results are still checked, the
bytes are not."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn.functional import conv2d, conv_transpose2d

from conv_util import (R, T, _two, _workspace_peak, ref_conv2d, ref_conv2d_grad_weight, ref_conv_transpose2d, threads,
                       workspace_limit)
from gradcheck import assert_close


def _avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


AVX512 = _avx512()

# x, w, padding, dilation, groups, threads
CASES = [
    dict(x=(2, 16, 9, 7), w=(24, 16, 3, 3), padding=1),                        # 63 positions: a short vector
    dict(x=(3, 8, 8, 8), w=(13, 8, 3, 3), padding=1),                          # K 13: blocks 8 + 5 (8 + 4 + 1)
    dict(x=(2, 16, 5, 40), w=(22, 8, 3, 3), padding=1, groups=2),              # groups; K/G 11: 8 + 2 + 1
    dict(x=(2, 16, 10, 11), w=(8, 16, 3, 3), padding=2, dilation=2),          # dilated
    dict(x=(1, 9, 6, 8), w=(10, 9, 5, 5), padding=2),                          # 5x5 (no direct weight-gradient)
    dict(x=(2, 12, 1, 47), w=(9, 12, 1, 3), padding=(0, 1)),                   # one row, 1x3
    dict(x=(2, 8, 31, 1), w=(8, 8, 3, 1), padding=(1, 0)),                     # one column, 3x1
    dict(x=(4, 32, 16, 16), w=(32, 32, 3, 3), padding=1, threads=2),          # 2 threads
    dict(x=(3, 16, 7, 9), w=(16, 16, 3, 3), padding="same", threads=2),       # "same", 63 positions, 2 threads
    dict(x=(2, 10, 8, 8), w=(16, 10, 3, 3), padding=1),                        # C 10: weight blocks of 4, 4, 2
]


def _ids(c):
    return "-".join(f"{k}{v}" for k, v in c.items()).replace(" ", "")


def _split(case):
    case = dict(case)
    return case.pop("x"), case.pop("w"), case.pop("threads", 1), case


def _pad(kw, ws):
    p = kw.get("padding", 0)
    if p == "same":
        d = kw.get("dilation", 1)
        return (d * (ws[2] - 1) // 2, d * (ws[3] - 1) // 2)
    return p


def direct_bytes(ws, groups, outc_of_weight=True, extra=0):
    """The repacked weight: per group, the output channels rounded up to 8, x input channels x taps, float32; plus
    `extra` bytes; rounded up to the allocator's 512 bytes."""
    K, Cg, Rk, Sk = ws
    Kg = K // groups
    outc, inc = (Kg, Cg) if outc_of_weight else (Cg, Kg)
    n = groups * -(-outc // 8) * 8 * inc * Rk * Sk * 4 + extra
    return -(-n // 512) * 512


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_direct_matches_numpy(case, threads):
    xs, ws, nt, kw = _split(case)
    gm.set_num_threads(nt)
    groups = kw.get("groups", 1)
    # the input's channels are a slice of a wider tensor: its item stride is not C*H*W
    wide = R(xs[0], xs[1] + 5, xs[2], xs[3])
    x, w, b = wide[:, 2:2 + xs[1]], R(*ws), R(ws[0])
    xt = T(wide, gm.float32)[:, 2:2 + xs[1]].detach().requires_grad_(True)
    wt, bt = T(w, gm.float32, True), T(b, gm.float32, True)
    x, w, b = (xt.detach().numpy().astype(np.float64), wt.detach().numpy().astype(np.float64),
               bt.detach().numpy().astype(np.float64))
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(xt, wt, bt, **kw)
    if AVX512:
        assert _workspace_peak() == direct_bytes(ws, groups), "the forward did not take the direct kernel"
    assert tuple(out.shape) == (xs[0], ws[0], xs[2], xs[3])
    assert_close(out, ref_conv2d(x, w, b, **kw), 2e-5, 2e-5, what="forward")
    dout = R(*out.shape)
    out.backward(T(dout, gm.float32))
    dil = kw.get("dilation", 1)
    ref_dx = ref_conv_transpose2d(dout, w, None, 1, _pad(kw, ws), 0, groups, dil)
    assert_close(xt.grad, ref_dx, 2e-5, 2e-5, what="input gradient")
    assert_close(wt.grad, ref_conv2d_grad_weight(x, dout, ws, **kw), 1e-4, 2e-5, what="weight gradient")
    assert_close(bt.grad, dout.sum(axis=(0, 2, 3)), 1e-4, 1e-5, what="bias gradient")


@pytest.mark.parametrize("nthreads", [1, 2])
def test_backward_passes_alone_and_their_workspace(nthreads, threads):
    """The input-gradient's workspace is the weight repacked with input and output channels exchanged; the 3x3
    weight-gradient needs none."""
    gm.set_num_threads(nthreads)
    # K 24: the direct weight-gradient (K a multiple of 16 with C >= 16 takes conv_wgrad.c's kernel)
    xs, ws = (3, 24, 11, 13), (24, 24, 3, 3)
    x, w, dout = R(*xs), R(*ws), R(3, 24, 11, 13)
    ctx = (1, 1, 1, 1)
    gm.memory.reset_peak_memory_stats("cpu")
    dx = _C.conv2d_backward(T(dout, gm.float32), None, T(w, gm.float32), *ctx, (True, False, False), xs)[0]
    if AVX512:
        assert _workspace_peak() == direct_bytes(ws, 1, outc_of_weight=False)
    assert_close(dx, ref_conv_transpose2d(dout, w, None, 1, 1), 2e-5, 2e-5, what="input gradient")
    gm.memory.reset_peak_memory_stats("cpu")
    dw = _C.conv2d_backward(T(dout, gm.float32), T(x, gm.float32), None, *ctx, (False, True, False), None, ws)[1]
    if AVX512:
        assert _workspace_peak() == 0
    assert_close(dw, ref_conv2d_grad_weight(x, dout, ws, padding=1), 1e-4, 2e-5, what="weight gradient")


def test_transposed_conv_with_bias_runs_the_input_gradient():
    """conv_transpose2d at stride 1 is the input-gradient pass with its bias: the direct kernel starts its sums
    from the bias."""
    x, w, b = R(2, 16, 9, 10), R(16, 12, 3, 3), R(12)
    out = conv_transpose2d(T(x, gm.float32), T(w, gm.float32), T(b, gm.float32), padding=1)
    assert_close(out, ref_conv_transpose2d(x, w, b, 1, 1), 2e-5, 2e-5, what="conv_transpose2d")


def test_a_limit_below_the_repacked_weight_falls_back_to_im2col(workspace_limit, threads):
    gm.set_num_threads(1)
    xs, ws = (2, 16, 12, 12), (32, 16, 3, 3)
    x, w = R(*xs), R(*ws)
    ref = ref_conv2d(x, w, padding=1)
    packed = direct_bytes(ws, 1)
    _C.set_conv_workspace_limit(packed - 1024)
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(T(x, gm.float32), T(w, gm.float32), padding=1)
    assert _workspace_peak() <= packed - 1024
    assert_close(out, ref, 2e-5, 2e-5, what="im2col forward")


def test_where_im2col_stays(threads):
    """Only float32 takes the direct kernel: float64 keeps im2col's column buffer (its bytes are not the repacked
    weight's); so does an output plane that fills its vectors of 16 positions to less than 90 % (a 6x6 output at
    stride 2: 36 of 48; a 7x7 map: 49 of 64), and the weight-gradient beyond 64x64 channels."""
    gm.set_num_threads(1)
    xs, ws = (2, 16, 12, 12), (32, 16, 3, 3)
    x, w = R(*xs), R(*ws)
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(T(x, gm.float64), T(w, gm.float64), padding=1)
    assert 0 < _workspace_peak() != direct_bytes(ws, 1)
    assert_close(out, ref_conv2d(x, w, padding=1), 1e-10, 1e-10, what="float64")
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(T(x, gm.float32), T(w, gm.float32), padding=1, stride=2)
    assert 0 < _workspace_peak() != direct_bytes(ws, 1, extra=4 * 16 * 36 * 4)
    assert_close(out, ref_conv2d(x, w, padding=1, stride=2), 2e-5, 2e-5, what="stride 2")
    xs = (2, 16, 7, 7)
    gm.memory.reset_peak_memory_stats("cpu")
    x7 = R(*xs)
    out = conv2d(T(x7, gm.float32), T(w, gm.float32), padding=1)
    assert 0 < _workspace_peak() != direct_bytes(ws, 1)
    assert_close(out, ref_conv2d(x7, w, padding=1), 2e-5, 2e-5, what="7x7 map")
    xs, ws = (2, 72, 8, 8), (64, 72, 3, 3)
    x, w, dout = R(*xs), R(*ws), R(2, 64, 8, 8)
    gm.memory.reset_peak_memory_stats("cpu")
    dw = _C.conv2d_backward(T(dout, gm.float32), T(x, gm.float32), None, 1, 1, 1, 1, (False, True, False), None,
                            ws)[1]
    assert _workspace_peak() > 0
    assert_close(dw, ref_conv2d_grad_weight(x, dout, ws, padding=1), 1e-4, 2e-5, what="72x64 weight gradient")


@pytest.mark.parametrize("nthreads", [1, 2])
def test_meta_allocates_the_cpus_bytes(nthreads, threads):
    """A training step of two direct layers: every allocation, in order, is the same on meta as on the CPU."""
    gm.set_num_threads(nthreads)
    hist = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((4, 16, 8, 10), device=dev, requires_grad=True)
        w1 = gm.zeros((24, 16, 3, 3), device=dev, requires_grad=True)
        w2 = gm.zeros((8, 24, 5, 5), device=dev, requires_grad=True)
        gm.memory.record_history(True, device=dev)
        conv2d(conv2d(x, w1, padding=1), w2, padding=2).sum().backward()
        hist.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert hist[0] == hist[1]
    if AVX512:
        assert (direct_bytes((24, 16, 3, 3), 1), "workspace") in hist[0]


# stride 2: x, w, padding, dilation, groups, threads
STRIDED = [
    dict(x=(2, 16, 28, 28), w=(16, 16, 7, 7), padding=3),                     # 7x7/2, 14x14 output
    dict(x=(2, 16, 28, 28), w=(24, 16, 3, 3), padding=1, threads=2),          # 3x3/2, 2 threads
    dict(x=(3, 16, 15, 17), w=(8, 16, 3, 3), padding=1),                       # odd sizes: phases of 8 and 7 rows
    dict(x=(2, 16, 32, 30), w=(16, 8, 3, 3), padding=1, groups=2),            # groups
    dict(x=(2, 8, 21, 21), w=(13, 8, 5, 5), padding=2),                        # 5x5/2, K 13
    dict(x=(2, 8, 16, 16), w=(8, 8, 3, 3), padding=2, dilation=2),            # dilated
    dict(x=(2, 8, 16, 16), w=(8, 8, 2, 2)),                                    # 2x2/2, no padding
    dict(x=(2, 8, 16, 16), w=(8, 8, 4, 4), padding=1),                         # even kernel
]


def _within_rounding(got, ref, ref_abs, what):
    """|got - ref| within 16 float32 ulps of the sum of the terms' magnitudes (ref_abs: the same op on |inputs|)."""
    got = got.detach().numpy() if hasattr(got, "detach") else got
    bad = np.abs(got - ref) > 2.0 ** -20 * ref_abs
    assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} elements off by more than rounding, first at " \
                          f"{np.argwhere(bad)[0].tolist()}"


@pytest.mark.parametrize("case", STRIDED, ids=_ids)
def test_strided_forward_over_the_input_phases(case, threads):
    """The stride-2 forward splits each item's input into its four phases (the workspace: the repacked weight and
    4 C planes of the output's size) and runs every tap as one shift of them; the input is a transposed view (its
    rows are not contiguous). The input-gradient computes dx's four phases, each from its own taps, and weaves
    them together (the same workspace with the weight repacked the other way); the weight-gradient keeps im2col."""
    xs, ws, nt, kw = _split(case)
    gm.set_num_threads(nt)
    groups = kw.get("groups", 1)
    x, w, b = R(*xs), R(*ws), R(ws[0])
    xt = T(x.transpose(0, 1, 3, 2).copy(), gm.float32).transpose(2, 3).detach().requires_grad_(True)
    wt, bt = T(w, gm.float32, True), T(b, gm.float32, True)
    x, w, b = (xt.detach().numpy().astype(np.float64), wt.detach().numpy().astype(np.float64),
               bt.detach().numpy().astype(np.float64))
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(xt, wt, bt, stride=2, **kw)
    P, Q = out.shape[2:]
    if AVX512:
        phases = 4 * xs[1] * P * Q * 4
        assert _workspace_peak() == direct_bytes(ws, groups, extra=phases), "the forward did not take the direct kernel"
    # 7x7 over 16 channels sums 784 products: float32 rounding alone reaches 1e-4 on normal data, so the bound is
    # in units of the sum of the terms' magnitudes (a term missing or read from the wrong phase exceeds it)
    _within_rounding(out, ref_conv2d(x, w, b, stride=2, **kw), ref_conv2d(abs(x), abs(w), abs(b), stride=2, **kw),
                     "forward")
    dout = R(*out.shape)
    out.backward(T(dout, gm.float32))
    assert_close(wt.grad, ref_conv2d_grad_weight(x, dout, ws, stride=2, **kw), 1e-4, 2e-5, what="weight gradient")
    pad, dil = _two(kw.get("padding", 0)), _two(kw.get("dilation", 1))
    op = tuple(xs[2 + i] - ((out.shape[2 + i] - 1) * 2 - 2 * pad[i] + dil[i] * (ws[2 + i] - 1) + 1) for i in (0, 1))
    ref_dx = ref_conv_transpose2d(dout, w, None, 2, pad, op, groups, dil)
    abs_dx = ref_conv_transpose2d(abs(dout), abs(w), None, 2, pad, op, groups, dil)
    _within_rounding(xt.grad, ref_dx, abs_dx, "input gradient")
    gm.memory.reset_peak_memory_stats("cpu")
    dx = _C.conv2d_backward(T(dout, gm.float32), None, wt.detach(), 2, kw.get("padding", 0), kw.get("dilation", 1),
                            groups, (True, False, False), xs)[0]
    if AVX512:
        phases = 4 * xs[1] * P * Q * 4
        assert _workspace_peak() == direct_bytes(ws, groups, outc_of_weight=False, extra=phases)
    _within_rounding(dx, ref_dx, abs_dx, "input gradient alone")


def test_strided_transposed_conv_with_bias():
    """conv_transpose2d 2x2 at stride 2 (a UNet's upsampling) is the strided input-gradient with its bias."""
    x, w, b = R(3, 16, 8, 8), R(16, 8, 2, 2), R(8)
    out = conv_transpose2d(T(x, gm.float32), T(w, gm.float32), T(b, gm.float32), stride=2)
    assert tuple(out.shape) == (3, 8, 16, 16)
    assert_close(out, ref_conv_transpose2d(x, w, b, 2), 2e-5, 2e-5, what="conv_transpose2d")


def test_strided_meta_allocates_the_cpus_bytes(threads):
    hist = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((2, 16, 28, 28), device=dev, requires_grad=True)
        w = gm.zeros((16, 16, 7, 7), device=dev, requires_grad=True)
        gm.memory.record_history(True, device=dev)
        conv2d(x, w, stride=2, padding=3).sum().backward()
        hist.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert hist[0] == hist[1]
