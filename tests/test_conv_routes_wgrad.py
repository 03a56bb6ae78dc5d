"""The float32 weight-gradient's outer-product kernel (kernels/cpu/conv_wgrad.c: AVX-512, one group, output
channels a multiple of 16 (blocks of 64, 32 or 16), at least 16 input channels, at least 256 positions per group of items): against the
float64 NumPy reference on small-integer data (every product and partial sum is exact in float32, so any order of
summation gives the reference exactly: a wrong index or a lost tap cannot hide in a tolerance), over 3x3, 1x1,
7x7/2, 3x3/2, dilation, asymmetric padding, an input whose positions are strided (a slice), input channels that
leave a tail block (C not a multiple of 6), items grouped and an item sliced into runs of positions, 1 and 2
threads; its float32 rounding on a long reduction against the gemm route's; its workspace (the transposed
grad_output of a group of items) on the CPU and on meta, and where it does not run. Where the CPU has no
AVX-512 the gemm routes run: results are still checked, the bytes are not."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn.functional import conv2d

from conv_util import T, _workspace_peak, ref_conv2d_grad_weight, threads, workspace_limit  # noqa: F401


def _avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


AVX512 = _avx512()
DT_TARGET = 1 << 20  # WG_DT_TARGET
MIN_POS = 256        # WG_MIN_POS


def wgrad_bytes(xs, ws, out_hw, limit=64 << 20):
    """conv_wgrad's workspace (wg_plan): nb items of grad_output transposed when one fits the target, else a slice
    of one item, a multiple of 16 positions; None (not this route) when a group holds fewer than MIN_POS."""
    N, K = xs[0], ws[0]
    PQ = out_hw[0] * out_hw[1]
    if ws[2] * ws[3] == 1 and PQ < MIN_POS:  # a 1x1 layer on a small map: the pointwise gemm
        return None
    target = min(limit, DT_TARGET)
    item = PQ * K * 4
    if item <= target:
        nb = min(N, target // item)
        return nb * item if nb * PQ >= MIN_POS else None
    plen = target // (K * 4) // 16 * 16
    return plen * K * 4 if plen >= MIN_POS else None


def ints(rng, shape):
    return rng.integers(-2, 3, shape).astype(np.float64)


def run_wgrad(x, dout, ws, stride, padding, dilation):
    gm.memory.reset_peak_memory_stats("cpu")
    dw = _C.conv2d_backward(T(dout, gm.float32), x, None, stride, padding, dilation, 1, (False, True, False), None,
                            ws)[1]
    return dw.numpy(), _workspace_peak()


# x, w, stride, padding, dilation, threads
CASES = [
    dict(x=(2, 64, 20, 20), w=(64, 64, 3, 3), padding=1),                          # 3x3 "same"
    dict(x=(2, 64, 28, 28), w=(64, 64, 7, 7), stride=2, padding=3, threads=2),     # 7x7/2
    dict(x=(2, 128, 16, 16), w=(128, 128, 1, 1), threads=2),                       # 1x1, two blocks of K
    dict(x=(3, 40, 25, 23), w=(64, 40, 3, 3), stride=2, padding=1),                # 3x3/2, C 40: a tail of 4
    dict(x=(2, 17, 24, 22), w=(64, 17, 5, 3), padding=(2, 1), dilation=2),         # dilated, C 17, 5x3
    dict(x=(1, 16, 70, 70), w=(64, 16, 3, 3), padding=1, threads=2),               # 4900 positions: slices
    dict(x=(5, 20, 12, 12), w=(192, 20, 3, 3)),                                    # no padding; items grouped
    dict(x=(2, 24, 18, 18), w=(32, 24, 3, 3), padding=1, threads=2),               # K 32: blocks of 32, C 24
    dict(x=(2, 45, 20, 20), w=(48, 45, 3, 3), padding=1),                          # K 48: blocks of 16, C 45
    dict(x=(4, 16, 16, 16), w=(16, 16, 1, 1)),                                     # K 16, 1x1
]


def _ids(c):
    return "-".join(f"{k}{v}" for k, v in c.items()).replace(" ", "")


@pytest.mark.parametrize("case", CASES, ids=_ids)
@pytest.mark.parametrize("strided_input", [False, True])
def test_exact_on_integers(case, strided_input, threads):
    case = dict(case)
    xs, ws = case.pop("x"), case.pop("w")
    gm.set_num_threads(case.pop("threads", 1))
    stride, padding, dilation = case.get("stride", 1), case.get("padding", 0), case.get("dilation", 1)
    rng = np.random.default_rng(7)
    x = ints(rng, xs)
    if strided_input:  # every other column of a twice-as-wide input: positions 2 floats apart
        wide = ints(rng, xs[:3] + (2 * xs[3],))
        wide[..., ::2] = x
        xt = T(wide, gm.float32)[..., ::2]
    else:
        xt = T(x, gm.float32)
    with gm.no_grad():
        out_hw = conv2d(xt, T(np.zeros(ws), gm.float32), None, stride, padding, dilation).shape[2:]
    dout = ints(rng, (xs[0], ws[0]) + tuple(out_hw))
    got, peak = run_wgrad(xt, dout, ws, stride, padding, dilation)
    ref = ref_conv2d_grad_weight(x, dout, ws, stride, padding, dilation)
    np.testing.assert_array_equal(got, ref)
    if AVX512:
        want = wgrad_bytes(xs, ws, out_hw)
        assert want is not None
        assert peak == -(-want // 512) * 512


def units(got, ref, scale):
    """rms of (got - ref) / scale in units of 2^-24 (as tests/test_conv_accuracy.py)."""
    return float(np.sqrt(np.mean(((np.asarray(got, np.float64) - ref) / scale) ** 2)) / 2.0 ** -24)


@pytest.mark.parametrize("ws, pad", [((64, 64, 3, 3), 1), ((64, 64, 1, 1), 0)], ids=["3x3", "1x1"])
def test_rounding_no_worse_than_the_route_it_replaces(ws, pad, workspace_limit, threads):
    """A long reduction (4 items of 48x48: 9216 terms per weight): the chunked sums of conv_wgrad land as close to
    float64 as the route a limit below 256 positions of grad_output sends the pass to (3x3: the direct kernel's
    lane sums, 1x1: the pointwise gemm's chunked sgemm). Measured: 0.052 against 0.119 (3x3) and 0.053 against
    0.071 (1x1); PyTorch 2.15's 0.47 and 0.099."""
    gm.set_num_threads(1)
    rng = np.random.default_rng(3)
    xs = (4, 64, 48, 48)
    x = rng.standard_normal(xs).astype(np.float32)
    dout = rng.standard_normal((4, 64, 48, 48)).astype(np.float32)
    ref = ref_conv2d_grad_weight(x.astype(np.float64), dout.astype(np.float64), ws, 1, pad)
    scale = ref_conv2d_grad_weight(np.abs(x).astype(np.float64), np.abs(dout).astype(np.float64), ws, 1, pad)
    new, peak_new = run_wgrad(T(x, gm.float32), dout, ws, 1, pad, 1)
    _C.set_conv_workspace_limit(MIN_POS * 64 * 4 - 4)
    old, peak_old = run_wgrad(T(x, gm.float32), dout, ws, 1, pad, 1)
    if AVX512:
        assert peak_new == wgrad_bytes(xs, ws, (48, 48)) and peak_old != peak_new
    e_new, e_old = units(new, ref, scale), units(old, ref, scale)
    assert e_new <= 1.1 * e_old, (e_new, e_old)
    assert e_new < 1.0  # chunks of 64 terms: far below one running total's ~sqrt(9216)/4 units


@pytest.mark.parametrize("xs, ws, padding", [
    ((2, 512, 7, 7), (512, 512, 3, 3), 1),       # 98 positions per group: the gemm route
    ((8, 256, 7, 7), (256, 256, 1, 1), 0),       # 1x1 on 49 positions: the pointwise gemm
    ((2, 64, 8, 8), (40, 64, 3, 3), 1),          # K 40: not a multiple of 16
    ((2, 8, 20, 20), (64, 8, 3, 3), 1),          # C 8
])
def test_where_the_gemm_routes_stay(xs, ws, padding, threads):
    gm.set_num_threads(1)
    rng = np.random.default_rng(5)
    x, dout = ints(rng, xs), ints(rng, (xs[0], ws[0]) + xs[2:])
    got, peak = run_wgrad(T(x, gm.float32), dout, ws, 1, padding, 1)
    np.testing.assert_array_equal(got, ref_conv2d_grad_weight(x, dout, ws, 1, padding))
    assert wgrad_bytes(xs, ws, xs[2:]) is None or ws[0] % 16 or xs[1] < 16
    if AVX512 and ws[0] % 16 == 0 and xs[1] >= 16:
        assert peak != -(-(xs[0] * ws[0] * xs[2] * xs[3] * 4) // 512) * 512


@pytest.mark.parametrize("nthreads", [1, 2])
def test_meta_allocates_the_cpus_bytes(nthreads, threads):
    """A training step through layers of this route and the others: every allocation, in order, is the same on
    meta as on the CPU."""
    gm.set_num_threads(nthreads)
    hist = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((2, 32, 24, 24), device=dev, requires_grad=True)
        w1 = gm.zeros((64, 32, 3, 3), device=dev, requires_grad=True)
        w2 = gm.zeros((128, 64, 7, 7), device=dev, requires_grad=True)
        w3 = gm.zeros((64, 128, 1, 1), device=dev, requires_grad=True)
        gm.memory.record_history(True, device=dev)
        conv2d(conv2d(conv2d(x, w1, padding=1), w2, stride=2, padding=3), w3).sum().backward()
        hist.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert hist[0] == hist[1]
    if AVX512:
        assert (-(-wgrad_bytes((2, 32, 24, 24), (64, 32, 3, 3), (24, 24)) // 512) * 512, "workspace") in hist[0]


# ---- the gemm route's tiles of whole items (conv.c backward_weight_items): deep layers on small maps, beyond the
# direct kernel (C/G x K/G above 64 x 64) and conv_wgrad (fewer than 256 positions, or groups) -----------------
ITEMS = [
    dict(x=(4, 512, 2, 2), w=(512, 512, 3, 3), padding=1),                        # ResNet-18's last stage
    dict(x=(5, 96, 4, 4), w=(64, 96, 3, 3), padding=1, threads=2),               # 80 positions: not conv_wgrad
    dict(x=(3, 192, 4, 4), w=(128, 96, 3, 3), padding=1, groups=2, threads=2),   # groups
    dict(x=(5, 96, 4, 4), w=(64, 96, 3, 3), padding=1, limit=2 * 16 * 928 * 4),  # 2 items a batch: 3 batches
    dict(x=(4, 256, 4, 4), w=(512, 256, 3, 3), stride=2, padding=1),             # 3x3/2 onto 2x2
]


@pytest.mark.parametrize("case", ITEMS, ids=_ids)
def test_items_of_the_gemm_route_exact_on_integers(case, workspace_limit, threads):
    case = dict(case)
    xs, ws = case.pop("x"), case.pop("w")
    gm.set_num_threads(case.pop("threads", 1))
    limit = case.pop("limit", None)
    if limit:
        _C.set_conv_workspace_limit(limit)
    stride, padding, groups = case.get("stride", 1), case.get("padding", 0), case.get("groups", 1)
    rng = np.random.default_rng(11)
    x = ints(rng, xs)
    P = (xs[2] + 2 * padding - 3) // stride + 1
    dout = ints(rng, (xs[0], ws[0], P, P))
    gm.memory.reset_peak_memory_stats("cpu")
    dw = _C.conv2d_backward(T(dout, gm.float32), T(x, gm.float32), None, stride, padding, 1, groups,
                            (False, True, False), None, ws)[1]
    np.testing.assert_array_equal(dw.numpy(), ref_conv2d_grad_weight(x, dout, ws, stride, padding, 1, groups))
    crs, kg = ws[1] * ws[2] * ws[3], ws[0] // groups
    nb = min(xs[0], 256 // (P * P), (limit or 1 << 40) // (P * P * (crs + kg) * 4))
    assert _workspace_peak() == -(-(nb * P * P * (crs + kg) * 4) // 512) * 512


@pytest.mark.parametrize("nthreads", [1, 2])
def test_items_meta_allocates_the_cpus_bytes(nthreads, threads):
    gm.set_num_threads(nthreads)
    hist = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((4, 256, 4, 4), device=dev, requires_grad=True)
        w1 = gm.zeros((512, 256, 3, 3), device=dev, requires_grad=True)
        w2 = gm.zeros((512, 512, 3, 3), device=dev, requires_grad=True)
        gm.memory.record_history(True, device=dev)
        conv2d(conv2d(x, w1, stride=2, padding=1), w2, padding=1).sum().backward()
        hist.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert hist[0] == hist[1]


@pytest.mark.parametrize("nthreads", [1, 2])
def test_items_float64(nthreads, threads):
    """The items tiles are the typed gemm route's: float64 takes them too (the weight-gradient of 512 -> 512 at 2x2)."""
    gm.set_num_threads(nthreads)
    rng = np.random.default_rng(12)
    x, dout, ws = rng.standard_normal((4, 512, 2, 2)), rng.standard_normal((4, 512, 2, 2)), (512, 512, 3, 3)
    gm.memory.reset_peak_memory_stats("cpu")
    dw = _C.conv2d_backward(T(dout, gm.float64), T(x, gm.float64), None, 1, 1, 1, 1, (False, True, False), None, ws)[1]
    np.testing.assert_allclose(dw.numpy(), ref_conv2d_grad_weight(x, dout, ws, 1, 1), rtol=1e-12, atol=1e-12)
    assert _workspace_peak() == -(-(4 * 4 * (4608 + 512) * 8) // 512) * 512
