"""The float32 forward and input-gradient routes of each shape class that benchmarks/conv_gflops.py times (issue 14
item 3), at small batch: the direct kernel at stride 1 (3x3 at 56x56-like and at 14x14 planes) and at stride 2
(7x7/2, over the input's phases), the pointwise gemm on the NCHW layout (1x1), and im2col tiles of whole items
(3x3 on a 7x7 plane). Each against a float64 reference:
  - which route ran, from the pass's workspace (the direct kernel's repacked weight, none for the pointwise gemm,
    columns for im2col) on the CPU and on meta;
  - rounding, in units of 2^-24 of sum |x| |w| (rms over the outputs, as tests/test_conv_accuracy.py): every route
    sums in chunks of CONV_KCHUNK = 128 terms (kernels/conv_geom.h), which the bounds below need (one running
    float32 total over 200..3136 terms landed 1.3-4x further here) — and no further than PyTorch's convolution;
  - exactness on small integers, where float32 is exact in any order: the chunks' partial sums and the bias add
    up to the whole sum across chunk boundaries that are not multiples of 128, and the repacked weight (blocks of
    8 channels, transposed 8 x 8, taps reordered by phase at stride 2) holds every weight once."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn._functional_conv import conv2d

from conv_util import _workspace_peak, ref_conv2d, ref_conv_transpose2d, threads  # noqa: F401 (fixture)
from test_conv_direct import AVX512, direct_bytes

# name, x (N, C, H, W), w (K, C, R, S), stride, padding, route, bounds of the forward and input-gradient in units
# (measured: 0.23 0.23 | 0.16 0.20 | 0.35 0.45 | 0.11 0.20 | 0.19 0.19; PyTorch 0.16-0.47; one running total
# per output, _running_total: 0.46-0.48)
CASES = [
    ("3x3 56x56-like", (2, 64, 24, 24), (64, 64, 3, 3), 1, 1, "direct", (0.29, 0.29)),
    ("3x3 14x14 K-chunks", (2, 160, 14, 14), (96, 160, 3, 3), 1, 1, "direct", (0.21, 0.25)),   # 1440 terms
    ("1x1 28x28", (2, 200, 28, 28), (136, 200, 1, 1), 1, 0, "pointwise", (0.41, 0.52)),        # 200 terms
    ("7x7/2 56x56-like", (2, 64, 24, 24), (68, 64, 7, 7), 2, 3, "direct", (0.16, 0.26)),       # 3136; K 8*8+4
    ("3x3 7x7 items", (4, 96, 7, 7), (64, 96, 3, 3), 1, 1, "items", (0.25, 0.25)),             # 49 positions
]


@pytest.fixture(autouse=True)
def no_winograd(monkeypatch):
    """These are the routes Winograd stands in front of for 3x3 stride 1 (it has its own tests,
    test_conv_winograd.py): off here, so each case runs the route it names."""
    monkeypatch.setenv("GPUMEMNET_CONV_WINOGRAD", "0")


def _units(got, ref, scale):
    return float(np.sqrt(np.mean(((np.asarray(got, np.float64) - ref) / scale) ** 2)) / 2.0 ** -24)


def _data(case, seed):
    _, xs, ws, *_ = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    return x, w


def _dx_ref(dy, w, stride, padding, xs):
    """The input-gradient: conv_transpose2d of grad_output, with the output padding that restores xs."""
    op = xs[2] - ((dy.shape[2] - 1) * stride - 2 * padding + w.shape[2])
    return ref_conv_transpose2d(dy, w, None, stride, padding, op, 1, 1)


def _running_total(x, w, stride, padding):
    """The forward as one running float32 total per output, term after term (what an unchunked sum does)."""
    N, C, H, W = x.shape
    K, _, Rk, Sk = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    P, Q = (H + 2 * padding - Rk) // stride + 1, (W + 2 * padding - Sk) // stride + 1
    acc = np.zeros((N, K, P, Q), np.float32)
    for c in range(C):
        for r in range(Rk):
            for s in range(Sk):
                patch = xp[:, c, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride]
                acc += patch[:, None] * w[None, :, c, r, s, None, None]
    return acc


def _route_bytes(case, pass_):
    _, xs, ws, stride, padding, route, _ = case
    if route == "pointwise":
        return 0
    if route == "direct" and AVX512:
        P = (xs[2] + 2 * padding - ws[2]) // stride + 1
        phases = 4 * xs[1] * P * P * 4 if stride == 2 else 0
        return direct_bytes(ws, 1, outc_of_weight=pass_ == "fwd", extra=phases)
    return None  # im2col: some columns, neither of the above


def _check_route(case, pass_, got):
    want = _route_bytes(case, pass_)
    if want is not None:
        assert got == want, f"{case[0]} {pass_}: workspace {got}, the route {case[5]} asks for {want}"
    else:
        assert got > 0 and got != direct_bytes(case[2], 1, outc_of_weight=pass_ == "fwd")


def _run(case, x, w, b=None, dy=None, nthreads=1):
    _, xs, ws, stride, padding, _, _ = case
    gm.set_num_threads(nthreads)
    with gm.no_grad():
        gm.memory.reset_peak_memory_stats("cpu")
        out = conv2d(gm.tensor(x), gm.tensor(w), None if b is None else gm.tensor(b), stride, padding).numpy()
        ws_f = _workspace_peak()
        if dy is None:
            return out, None, ws_f, None
        gm.memory.reset_peak_memory_stats("cpu")
        bias = None if b is None else gm.tensor(np.zeros(xs[1], np.float32))
        dx = _C.conv2d_backward(gm.tensor(dy), None, gm.tensor(w), stride, padding, 1, 1, (True, False, False),
                                tuple(xs))[0].numpy()
        del bias
        return out, dx, ws_f, _workspace_peak()


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_route_and_rounding(case, nthreads, threads):  # noqa: F811
    _, xs, ws, stride, padding, _, _ = case
    x, w = _data(case, 1)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = ref_conv2d(x64, w64, None, stride, padding)
    scale = ref_conv2d(np.abs(x64), np.abs(w64), None, stride, padding)
    dy = np.random.default_rng(2).standard_normal(ref.shape).astype(np.float32)
    out, dx, ws_f, ws_d = _run(case, x, w, dy=dy, nthreads=nthreads)
    _check_route(case, "fwd", ws_f)
    _check_route(case, "data", ws_d)
    bf, bd = case[6]
    assert _units(out, ref, scale) <= bf, "forward"
    dref = _dx_ref(dy.astype(np.float64), w64, stride, padding, xs)
    dscale = _dx_ref(np.abs(dy).astype(np.float64), np.abs(w64), stride, padding, xs)
    assert _units(dx, dref, dscale) <= bd, "input-gradient"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_forward_bound_needs_the_chunks(case):
    """The forward bounds above fail a sum of one running float32 total (so they test the chunking)."""
    _, xs, ws, stride, padding, _, _ = case
    x, w = _data(case, 1)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = ref_conv2d(x64, w64, None, stride, padding)
    scale = ref_conv2d(np.abs(x64), np.abs(w64), None, stride, padding)
    assert _units(_running_total(x, w, stride, padding), ref, scale) > case[6][0] * 1.1


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_no_further_from_float64_than_pytorch(case):
    torch = pytest.importorskip("torch")
    _, xs, ws, stride, padding, _, _ = case
    x, w = _data(case, 3)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = ref_conv2d(x64, w64, None, stride, padding)
    scale = ref_conv2d(np.abs(x64), np.abs(w64), None, stride, padding)
    dy = np.random.default_rng(4).standard_normal(ref.shape).astype(np.float32)
    out, dx, _, _ = _run(case, x, w, dy=dy)
    theirs = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), None, stride, padding).numpy()
    tdx = torch.ops.aten.convolution_backward(torch.from_numpy(dy), torch.from_numpy(x), torch.from_numpy(w), None,
                                              [stride] * 2, [padding] * 2, [1, 1], False, [0, 0], 1,
                                              [True, False, False])[0].numpy()
    assert _units(out, ref, scale) <= 1.15 * _units(theirs, ref, scale), "forward"
    dref = _dx_ref(dy.astype(np.float64), w64, stride, padding, xs)
    dscale = _dx_ref(np.abs(dy).astype(np.float64), np.abs(w64), stride, padding, xs)
    assert _units(dx, dref, dscale) <= 1.15 * _units(tdx, dref, dscale), "input-gradient"


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_exact_on_small_integers(case, nthreads, threads):  # noqa: F811
    _, xs, ws, stride, padding, _, _ = case
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, xs).astype(np.float32)
    w = rng.integers(-2, 3, ws).astype(np.float32)
    b = rng.integers(-2, 3, ws[0]).astype(np.float32)
    ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), stride, padding)
    dy = rng.integers(-2, 3, ref.shape).astype(np.float32)
    out, dx, _, _ = _run(case, x, w, b, dy=dy, nthreads=nthreads)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(dx, _dx_ref(dy.astype(np.float64), w.astype(np.float64), stride, padding, xs))


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_meta_allocates_the_cpus_bytes(case, nthreads, threads):  # noqa: F811
    """A forward and backward of each route: every allocation, in order, is the same on meta as on the CPU."""
    _, xs, ws, stride, padding, _, _ = case
    gm.set_num_threads(nthreads)
    hist = []
    for dev in ("cpu", "meta"):
        x = gm.zeros(xs, device=dev, requires_grad=True)
        w = gm.zeros(ws, device=dev, requires_grad=True)
        gm.memory.record_history(True, device=dev)
        conv2d(x, w, None, stride, padding).sum().backward()
        hist.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert hist[0] == hist[1]
