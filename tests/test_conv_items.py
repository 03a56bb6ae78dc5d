"""Tiles of whole items (kernels/cpu/conv_plan.c, plan_items): the im2col forward and input-gradient of a layer
whose image has few output positions (K/G >= 32, C/G*R*S >= 512, at most half a tile's columns per item) run
one gemm over several items' columns, with the gemm's output (forward) or the gathered grad_output
(input-gradient) in the workspace beside the columns. Each case checks that it took that path (the workspace is the items plan's, to the byte, and
meta allocates the same), then the values and both gradients against NumPy and PyTorch, float64 gradients against
finite differences, and the fall-back to per-item tiles when the workspace limit cannot hold two items per
thread."""
import numpy as np
import pytest

import gpumemnet as gm
from conv_util import (R, T, _pads, _two, _workspace_peak, ref_conv2d, ref_conv2d_grad_weight, ref_conv_transpose2d,
                       threads, workspace_limit)
from gpumemnet import _C
from gpumemnet.nn._functional_conv import conv2d, conv_transpose2d
from gradcheck import assert_close, gradcheck, to_numpy

TILE_TARGET, MIN_COLS, GEMM_GRAIN = 256 << 10, 256, 1 << 20


def _geometry(xs, ws, stride=1, padding=0, dilation=1, groups=1):
    st, dl = _two(stride), _two(dilation)
    pt, pb, pl, pr = _pads(padding, ws[2:], dl)
    P = (xs[2] + pt + pb - dl[0] * (ws[2] - 1) - 1) // st[0] + 1
    Q = (xs[3] + pl + pr - dl[1] * (ws[3] - 1) - 1) // st[1] + 1
    return P * Q, ws[1] * ws[2] * ws[3], ws[0] // groups


def items_bytes(xs, ws, es, nthreads, stride=1, padding=0, dilation=1, groups=1):
    """The items plan's workspace (plan_items, written out again): nt threads x items x P*Q columns of
    (C/G*R*S + K/G) elements, rounded up to the allocator's 512 bytes; None when the plan is not items."""
    N = xs[0]
    PQ, CRS, Kg = _geometry(xs, ws, stride, padding, dilation, groups)
    nt = nthreads if nthreads > 1 and N * ws[0] * PQ * CRS >= GEMM_GRAIN else 1
    col = (CRS + Kg) * es
    want = max(MIN_COLS, TILE_TARGET // col)
    if Kg < 32 or CRS < 512 or N < 2 or 2 * PQ > want:
        return None
    batches = -(-N // min(N, -(-want // PQ)))
    batches = -(-(-(-batches * groups // nt) * nt) // groups)
    nb = -(-N // min(batches, N))
    if nb < 2:
        return None
    n = nt * nb * PQ * col
    return -(-n // 512) * 512


def ref_conv2d_grad_input(dout, xs, w, stride=1, padding=0, dilation=1, groups=1):
    """dx: every output position scatters dout[n, k, p, q] * w[k, c, r, s] back to the input element it read (a
    padded copy, cropped): the adjoint of ref_conv2d, written independently of it."""
    st, dl = _two(stride), _two(dilation)
    K, Cg, Rk, Sk = w.shape
    pt, pb, pl, pr = _pads(padding, (Rk, Sk), dl)
    N, C, H, W = xs
    P, Q = dout.shape[2:]
    dxp = np.zeros((N, C, H + pt + pb, W + pl + pr))
    Kg = K // groups
    for g in range(groups):
        for r in range(Rk):
            for s in range(Sk):
                h0, w0 = r * dl[0], s * dl[1]
                dxp[:, g * Cg:(g + 1) * Cg, h0:h0 + st[0] * (P - 1) + 1:st[0], w0:w0 + st[1] * (Q - 1) + 1:st[1]] += \
                    np.einsum("nkhw,kc->nchw", dout[:, g * Kg:(g + 1) * Kg], w[g * Kg:(g + 1) * Kg, :, r, s])
    return dxp[:, :, pt:pt + H, pl:pl + W]


# x, w, conv arguments, threads; every case routes to the items plan (checked by items_bytes != None). No case
# keeps the input's size at stride 1 ("same"): float32 runs those on the direct kernel where the CPU has AVX-512
# (tests/test_conv_direct.py), so such a case would not test this plan.
CASES = [
    dict(x=(4, 64, 5, 5), w=(32, 64, 3, 3), padding=0),                                  # 3x3, one batch of 4
    dict(x=(3, 96, 6, 7), w=(33, 96, 3, 2), stride=(2, 1), dilation=(1, 2), padding=(1, 2)),  # strided, dilated
    dict(x=(3, 128, 4, 4), w=(64, 64, 3, 3), groups=2, padding=(1, 0)),                  # grouped, K/G = 32
    dict(x=(2, 16, 9, 9), w=(32, 16, 7, 7), stride=2, padding=3),                        # 7x7/2
    dict(x=(3, 512, 6, 6), w=(32, 512, 1, 1), stride=2),                                 # 1x1/2 (im2col)
    dict(x=(5, 64, 10, 10), w=(32, 64, 3, 3), padding=(1, 0)),                           # batches 3 + 2
    dict(x=(8, 64, 6, 6), w=(64, 64, 3, 3), padding=(0, 1), threads=2),                  # 2 threads: 4 + 4
    dict(x=(7, 64, 6, 6), w=(64, 64, 3, 3), padding=(0, 1), threads=2),                  # 2 threads: 4 + 3
    dict(x=(6, 128, 5, 5), w=(64, 64, 3, 3), padding=(1, 0), groups=2, threads=2),       # 2 threads, 2 groups
]


def _ids(c):
    return "-".join(f"{k}{v}" for k, v in c.items()).replace(" ", "")


def _split(case):
    case = dict(case)
    return case.pop("x"), case.pop("w"), case.pop("threads", 1), case


@pytest.mark.parametrize("dtype", [gm.float32, gm.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_items_plan_matches_numpy(case, dtype, threads):
    xs, ws, nt, kw = _split(case)
    gm.set_num_threads(nt)
    es = 4 if dtype == gm.float32 else 8
    expect = items_bytes(xs, ws, es, nt, **kw)
    assert expect is not None, "the case does not route to the items plan"
    x, w, b = R(*xs), R(*ws), R(ws[0])
    xt, wt, bt = T(x, dtype, True), T(w, dtype, True), T(b, dtype, True)
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(xt, wt, bt, **kw)
    assert _workspace_peak() == expect, f"forward workspace {_workspace_peak()}, the items plan's is {expect}"
    dout = R(*out.shape)
    gm.memory.reset_peak_memory_stats("cpu")
    out.backward(T(dout, dtype))
    # the weight-gradient keeps per-item tiles (smaller): the peak is the input-gradient's items buffer
    assert _workspace_peak() >= expect
    tol = 2e-4 if dtype == gm.float32 else 1e-10
    assert_close(out, ref_conv2d(x, w, b, **kw), tol, tol, what="forward")
    assert_close(xt.grad, ref_conv2d_grad_input(dout, xs, w, **kw), tol, tol, what="input gradient")
    assert_close(wt.grad, ref_conv2d_grad_weight(x, dout, ws, **kw), tol * 10, tol, what="weight gradient")
    assert_close(bt.grad, dout.sum(axis=(0, 2, 3)), tol, tol, what="bias gradient")


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_items_plan_matches_torch(case, threads):
    torch = pytest.importorskip("torch")
    xs, ws, nt, kw = _split(case)
    gm.set_num_threads(nt)
    x, w, b, dout = R(*xs), R(*ws), R(ws[0]), None
    xt, wt, bt = T(x, requires_grad=True), T(w, requires_grad=True), T(b, requires_grad=True)
    out = conv2d(xt, wt, bt, **kw)
    dout = R(*out.shape)
    out.backward(T(dout))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    tout = torch.nn.functional.conv2d(tx, tw, tb, **kw)
    tout.backward(torch.tensor(dout))
    for got, ref, what in ((out, tout, "forward"), (xt.grad, tx.grad, "input gradient"),
                           (wt.grad, tw.grad, "weight gradient"), (bt.grad, tb.grad, "bias gradient")):
        assert_close(to_numpy(got), ref.detach().numpy(), 1e-10, 1e-10, what=what)


@pytest.mark.parametrize("case", [
    dict(x=(2, 64, 3, 3), w=(32, 64, 3, 3), padding=1),
    dict(x=(2, 128, 3, 4), w=(64, 64, 3, 3), groups=2, stride=(1, 2), dilation=(2, 1), padding=(2, 1)),
], ids=_ids)
def test_items_plan_gradcheck(case):
    """The input and bias gradients by finite differences (the items plan runs the forward and the
    input-gradient; the weight's 18k entries would take as many evaluations: its gradient is checked against
    NumPy and PyTorch above)."""
    xs, ws, _, kw = _split(case)
    assert items_bytes(xs, ws, 8, 1, **kw) is not None
    x, w, b = T(R(*xs), requires_grad=True), T(R(*ws)), T(R(ws[0]), requires_grad=True)
    gradcheck(lambda x, w, b: conv2d(x, w, b, **kw), [x, w, b], what=f"conv2d {case}")


def test_conv_transpose2d_through_the_items_plan():
    """conv_transpose2d's forward is the input-gradient pass with its bias: here through the items plan (the
    convolution it transposes has K = 32 input channels of the transpose, C*R*S = 64*3*3 and 3x3 positions per
    item)."""
    x, w, b = R(3, 32, 3, 3), R(32, 64, 3, 3), R(64)
    kw = dict(stride=2, padding=1, output_padding=1)
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv_transpose2d(T(x), T(w), T(b), **kw)
    # the convolution: x (3, 64, 6, 6) -> (3, 32, 3, 3); CRS = 576, K = 32, float64, one batch of 3 items
    assert _workspace_peak() == -(-(3 * 9 * (576 + 32) * 8) // 512) * 512
    assert_close(out, ref_conv_transpose2d(x, w, b, **kw), 1e-10, 1e-10)
    xg, wg, bg = T(R(2, 32, 2, 2), requires_grad=True), T(R(32, 128, 2, 2)), T(R(128), requires_grad=True)
    gradcheck(lambda x, w, b: conv_transpose2d(x, w, b, stride=2), [xg, wg, bg], what="conv_transpose2d")


@pytest.mark.parametrize("nthreads", [1, 2])
def test_meta_allocates_the_cpus_bytes(nthreads, threads):
    """A training step through the items plan: every allocation, in order, is the same on meta as on the CPU."""
    gm.set_num_threads(nthreads)
    hist = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((8, 64, 6, 6), device=dev, requires_grad=True)
        w = gm.zeros((64, 64, 3, 3), device=dev, requires_grad=True)
        b = gm.zeros(64, device=dev, requires_grad=True)
        gm.memory.record_history(True, device=dev)
        conv2d(x, w, b, padding=(0, 1)).sum().backward()
        hist.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert hist[0] == hist[1]
    assert (items_bytes((8, 64, 6, 6), (64, 64, 3, 3), 4, nthreads, padding=(0, 1)), "workspace") in hist[0]


def test_a_small_limit_falls_back_to_tiles_within_an_item(workspace_limit, threads):
    """Below two items per thread the per-item tiles run (within the limit), with the same results; one item, or
    an image that fills half a tile, never takes the items plan."""
    gm.set_num_threads(1)
    xs, ws = (4, 64, 5, 5), (32, 64, 3, 3)
    x, w = R(*xs), R(*ws)
    ref = ref_conv2d(x, w, padding=1)
    full = items_bytes(xs, ws, 8, 1, padding=1)
    col = 576 * 8
    for limit in (full, 2 * 25 * (576 + 32) * 8, 2 * 25 * (576 + 32) * 8 - 1, 25 * col, 7 * col):
        _C.set_conv_workspace_limit(limit)
        xt, wt = T(x, requires_grad=True), T(w, requires_grad=True)
        gm.memory.reset_peak_memory_stats("cpu")
        out = conv2d(xt, wt, padding=1)
        peak = _workspace_peak()
        assert peak <= -(-limit // 512) * 512
        items = limit >= 2 * 25 * (576 + 32) * 8
        if items:  # the most items the limit holds: 4, then 2
            nb = min(4, limit // (25 * (576 + 32) * 8))
            assert peak == -(-(nb * 25 * (576 + 32) * 8) // 512) * 512
        else:  # per-item tiles: as many columns as the limit holds, at most the item's 25 positions
            assert peak == -(-(min(25, limit // col) * col) // 512) * 512
        assert_close(out, ref, 1e-10, 1e-10, what=f"forward, limit {limit}")
        dout = R(*out.shape)
        out.backward(T(dout))
        assert_close(xt.grad, ref_conv2d_grad_input(dout, xs, w, padding=1), 1e-10, 1e-10, what=f"dx, limit {limit}")
    _C.set_conv_workspace_limit(64 << 20)
    # one item; 12x12 = 144 positions, more than half the 256 columns a tile wants: per-item tiles of the image
    for shape in ((1,) + xs[1:], (4, 64, 12, 12)):
        assert items_bytes(shape, ws, 8, 1, padding=1) is None
        gm.memory.reset_peak_memory_stats("cpu")
        conv2d(T(R(*shape)), T(w), padding=1)
        assert _workspace_peak() == -(-(shape[2] * shape[3] * col) // 512) * 512, shape
