"""bfloat16 convolutions on the routes chosen since VGG-11's and the UNet's autocast steps were measured:
deep layers on large maps (VGG's 256 channels at 16x16: at least 256 output channels and 256 positions), where
the half-precision backward plans once left one row of columns per product (kernels/cpu/conv_plan.c,
CONV_HALF_MIN_ROWS) and the bfloat16 weight-gradient fills its buffer with bfloat16 rows (kernels/cpu/conv_half.c,
conv2d_backward_weight_bf16); the direct route of layers with few channels on large maps (conv_half.c,
half_direct_route, taken when GPUMEMNET_BF16_CONV=direct: groups of items widened for the float32 direct kernels); and the small route of layers with at
most 16 positions in the batch (conv_half_small.c: the weight read once as bfloat16; conv_half_few.c on CPUs
without bfloat16 products: the weight widened a block at a time, all items in one product). Every pass on each route
(GPUMEMNET_BF16_CONV=gemm, =widen, =direct, read per call) and on the measured rule, at 1 and 2 threads, against
a float64 NumPy reference of the same bfloat16 inputs; and meta's workspace bytes equal to the CPU's. Each result is a float32 sum rounded once to bfloat16: within half an ulp (2^-8 relative)
of the exact value, plus the float32 sum's error, bounded here by 2^-14 of the sum of the terms' magnitudes."""
import functools
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet import _C

# (N, C, H=W, K, kernel, stride, padding)
SHAPES = [(2, 256, 16, 256, 3, 1, 1), (2, 128, 16, 320, 3, 1, 1), (1, 96, 20, 288, 3, 2, 1),
          # few channels on large maps (the direct route); the last two in several groups of items
          (3, 16, 32, 16, 3, 1, 1), (2, 32, 17, 24, 3, 2, 1), (5, 8, 64, 40, 3, 1, 1), (9, 16, 64, 16, 3, 1, 1),
          # at most 16 positions in the batch (the small route, conv_half_small.c): ResNet-18's layer4, its strided
          # 3x3 and 1x1, 16 positions exactly, 9 (padded to 16) with rows not a multiple of 32 and output channels
          # not of 16; then 32 positions (ResNet-18's layer3, VGG's 512 at 4x4), which stay on the other routes
          (2, 512, 2, 512, 3, 1, 1), (2, 256, 4, 512, 3, 2, 1), (2, 256, 4, 512, 1, 2, 0), (4, 256, 2, 256, 3, 1, 1),
          (1, 75, 3, 200, 3, 1, 1), (2, 256, 4, 256, 3, 1, 1), (2, 512, 4, 512, 3, 1, 1)]


def _windows(x, R, s, p):
    """(N, C, P, Q, R, R) windows of x padded by p, stride s."""
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    v = np.lib.stride_tricks.sliding_window_view(xp, (R, R), axis=(2, 3))
    return v[:, :, ::s, ::s]


def _reference(x, w, go, s, p):
    """float64 forward, input-gradient and weight-gradient, and the same of the terms' magnitudes."""
    N, C, H, _ = x.shape
    K, _, R, _ = w.shape
    out = {}
    for name, xx, ww, gg in (("val", x, w, go), ("abs", np.abs(x), np.abs(w), np.abs(go))):
        win = _windows(xx, R, s, p)
        fwd = np.einsum("ncpqrs,kcrs->nkpq", win, ww, optimize=True)
        dw = np.einsum("ncpqrs,nkpq->kcrs", win, gg, optimize=True)
        dxp = np.zeros((N, C, H + 2 * p, H + 2 * p))
        P, Q = gg.shape[2:]
        for r in range(R):
            for t in range(R):
                dxp[:, :, r:r + s * P:s, t:t + s * Q:s] += np.einsum("nkpq,kc->ncpq", gg, ww[:, :, r, t])
        out[name] = (fwd, dxp[:, :, p:p + H, p:p + H], dw)
    return out


@functools.lru_cache(maxsize=None)
def _arrays(shape):
    """The operands of `shape` as float32 arrays of bfloat16 values, and their float64 reference results. NumPy
    only: gpumemnet tensors kept alive between tests would change the allocator's state that other test files
    (test_estimate_order.py) measure against."""
    N, C, H, K, R, s, p = shape
    rng = np.random.default_rng(sum(shape))
    x, w = _bf16(rng.standard_normal((N, C, H, H))), _bf16(rng.standard_normal((K, C, R, R)) / (C * R * R) ** 0.5)
    P = (H + 2 * p - R) // s + 1
    go = _bf16(rng.standard_normal((N, K, P, P)))
    arrays = tuple(np.array(t.float().numpy(), copy=True) for t in (x, w, go))  # not views of gpumemnet's memory
    return arrays, _reference(*(a.astype(np.float64) for a in arrays), s, p)


def _case(shape):
    """The bfloat16 operands of `shape` (exactly the cached values) and their float64 reference results."""
    arrays, ref = _arrays(shape)
    return (*(_bf16(a) for a in arrays), ref)


def _bf16(a):
    return gm.tensor(a.astype(np.float32)).to(gm.bfloat16)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("route", [None, "gemm", "widen", "direct"])
def test_deep_bf16_conv_matches_float64(shape, threads, route, monkeypatch):
    s, p = shape[5:]
    x, w, go, ref = _case(shape)
    if route:
        monkeypatch.setenv("GPUMEMNET_BF16_CONV", route)
    else:
        monkeypatch.delenv("GPUMEMNET_BF16_CONV", raising=False)
    old = gm.get_num_threads()
    gm.set_num_threads(threads)
    try:
        fwd = F.conv2d(x, w, None, s, p)
        dx = _C.conv2d_backward(go, x, w, (s, s), (p, p), (1, 1), 1, (True, False, False), tuple(x.shape),
                                tuple(w.shape))[0]
        dw = _C.conv2d_backward(go, x, w, (s, s), (p, p), (1, 1), 1, (False, True, False), tuple(x.shape),
                                tuple(w.shape))[1]
    finally:
        gm.set_num_threads(old)
    for name, got, val, mag in zip(("forward", "input-gradient", "weight-gradient"), (fwd, dx, dw), ref["val"],
                                   ref["abs"]):
        assert got.dtype == gm.bfloat16
        got = got.float().numpy().astype(np.float64)
        err = np.abs(got - val)
        bound = 2.0 ** -8 * np.abs(val) + 2.0 ** -14 * mag
        assert (err <= bound).all(), (name, float((err / bound).max()))


WORKSPACES = """
import sys, numpy as np, gpumemnet as gm, gpumemnet.nn.functional as F
from gpumemnet import _C
N, C, H, K, R, s, p = %r
rng = np.random.default_rng(0)
bf = lambda a: gm.tensor(a.astype(np.float32)).to(gm.bfloat16)
x = bf(rng.standard_normal((N, C, H, H))).transpose(2, 3)  # a transposed layout: the bytes follow the shapes only
P = (H + 2 * p - R) // s + 1
w, go = bf(rng.standard_normal((K, C, R, R))), bf(rng.standard_normal((N, K, P, P)))

def operands(dev):
    if dev == "cpu":
        return go, x, w
    md = lambda t: gm.empty(tuple(t.shape), dtype=gm.bfloat16, device="meta")
    return md(go), gm.empty((N, C, H, H), dtype=gm.bfloat16, device="meta").transpose(2, 3), md(w)

def peak(dev, run):
    gm.memory.reset_peak_memory_stats(dev)
    run(*operands(dev))
    return gm.memory.memory_stats(dev)["by_category"]["workspace"]["peak"]

for mask in ((True, False, False), (False, True, False)):
    run = lambda a, b, c: _C.conv2d_backward(a, b, c, (s, s), (p, p), (1, 1), 1, mask, (N, C, H, H), tuple(w.shape))
    print(*(peak(d, run) for d in ("cpu", "meta")))
print(*(peak(d, lambda a, b, c: F.conv2d(b, c, None, s, p)) for d in ("cpu", "meta")))
"""


@pytest.mark.parametrize("route", [None, "direct"])
@pytest.mark.parametrize("shape", SHAPES[3:])
def test_direct_and_small_routes_workspace_on_meta_equals_cpu(shape, route):
    """The direct and small routes' workspaces (conv_half_direct_nbytes, conv_half_small_nbytes) are functions of the
    shapes alone: per
    pass, the CPU's peak workspace with a transposed view as the input is what meta allocates for the same shapes.
    Without the allocator's cache (GPUMEMNET_NO_CACHING=1), where a block reused from a larger freed one would
    count that one's size on the CPU and not on meta (whose free blocks differ)."""
    env = dict(os.environ, GPUMEMNET_NO_CACHING="1")
    env.pop("GPUMEMNET_BF16_CONV", None)
    if route:
        env["GPUMEMNET_BF16_CONV"] = route
    r = subprocess.run([sys.executable, "-c", WORKSPACES % (shape,)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    for line in r.stdout.split("\n")[:3]:
        cpu, meta = map(int, line.split())
        assert cpu == meta > 0, r.stdout
