"""conv2d under CPU bfloat16 autocast on a CPU whose bfloat16 passes widen the weight (no bfloat16 products,
_C._conv_reads_f32_weight()): the float32 weight and bias go to C as they are and are rounded to bfloat16 as they
are widened (csrc conv_f32_weight, kernels/cpu/conv_half.c load_weight, conv_half_few.c), instead of a bfloat16
copy made in the forward and again in the backward. What users rely on: the same results bit for bit as the
cast path (the explicit bfloat16 copy, outside autocast), float32 gradients in .grad and in hooks, no bfloat16
copy of the weight in memory (meta counting the same bytes), and any other mix of dtypes still refused."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet import _C, nn

pytestmark = pytest.mark.skipif(not _C._conv_reads_f32_weight(),
                                reason="this CPU multiplies bfloat16: autocast casts the weight (its own path)")

# (N, C, H, K, kernel, stride, padding, bias): ResNet-18's layer4 (the few-positions route, conv_half_few.c), its
# strided 3x3, a layer on the float16 route, a 1x1 with a bias
SHAPES = [(2, 512, 2, 512, 3, 1, 1, False), (2, 256, 4, 512, 3, 2, 1, False), (2, 64, 16, 64, 3, 1, 1, True),
          (3, 32, 9, 48, 1, 1, 0, True)]


def _operands(shape, seed=0):
    N, C, H, K, R, s, p, bias = shape
    rng = np.random.default_rng(seed)
    x = gm.from_numpy(rng.standard_normal((N, C, H, H)).astype(np.float32))
    w = gm.from_numpy((rng.standard_normal((K, C, R, R)) / (C * R * R) ** 0.5).astype(np.float32))
    b = gm.from_numpy(rng.standard_normal(K).astype(np.float32)) if bias else None
    return x, w, b


def _bits(t):
    return t.detach().float().numpy().view(np.uint32)


@pytest.mark.parametrize("shape", SHAPES)
def test_autocast_conv2d_equals_the_cast_path_bit_for_bit(shape):
    """Forward and every gradient as the explicit bfloat16 copies give them (their gradients widened to float32),
    with float32 values between bfloat16 ones (so the rounding is what is tested)."""
    s, p = shape[5:7]
    x, w, b = _operands(shape)
    params = [w.requires_grad_()] + ([b.requires_grad_()] if b is not None else [])
    xin = x.clone().requires_grad_()
    with gm.autocast("cpu", dtype=gm.bfloat16):
        out = F.conv2d(xin, w, b, s, p)
    assert out.dtype == gm.bfloat16
    g = gm.from_numpy(np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(np.float32)).to(gm.bfloat16)
    out.backward(g)
    got = [out, xin.grad] + [q.grad for q in params]

    xr = x.clone().requires_grad_()
    copies = [q.detach().to(gm.bfloat16).requires_grad_() for q in params]
    ref = F.conv2d(xr.to(gm.bfloat16), copies[0], copies[1] if b is not None else None, s, p)
    ref.backward(g)
    want = [ref, xr.grad] + [c.grad.float() for c in copies]
    for name, a, e in zip(("output", "input grad", "weight grad", "bias grad"), got, want):
        assert a.dtype == (gm.bfloat16 if name == "output" else gm.float32), name
        np.testing.assert_array_equal(_bits(a), _bits(e), err_msg=name)


def test_hooks_see_float32_and_accumulation_widens():
    """A hook on the weight sees a float32 gradient; two micro-batches accumulate into .grad as the sum of the
    widened bfloat16 gradients."""
    x, w, _ = _operands(SHAPES[0])
    w.requires_grad_()
    seen = []
    h = w.register_hook(lambda g: seen.append(g.dtype))
    with gm.autocast("cpu", dtype=gm.bfloat16):
        y = F.conv2d(x[:1], w, None, 1, 1)
    y.float().sum().backward()
    h.remove()
    assert seen == [gm.float32]
    first = w.grad.clone()
    with gm.autocast("cpu", dtype=gm.bfloat16):
        y = F.conv2d(x[1:], w, None, 1, 1)
    y.float().sum().backward()
    wb = w.detach().to(gm.bfloat16).requires_grad_()
    F.conv2d(x[1:].to(gm.bfloat16), wb, None, 1, 1).float().sum().backward()
    np.testing.assert_array_equal(_bits(w.grad), (first.numpy() + wb.grad.float().numpy()).view(np.uint32))


def _forward_peak(dev, shape):
    """Peak bytes above the start of an autocast forward of conv2d on dev (the operands made first)."""
    N, C, H, K, R, s, p, _ = shape
    x = gm.empty((N, C, H, H), device=dev)
    w = gm.empty((K, C, R, R), device=dev)
    if dev == "cpu":
        x.normal_()
        w.normal_()
    w.requires_grad_()
    gm.memory.reset_peak_memory_stats(dev)
    base = gm.memory.memory_allocated(dev)
    with gm.autocast("cpu", dtype=gm.bfloat16):
        out = F.conv2d(x, w, None, s, p)
    return gm.memory.max_memory_allocated(dev) - base, gm.memory.memory_allocated(dev) - base, out


@pytest.mark.parametrize("shape", SHAPES[:2])
def test_no_bfloat16_weight_copy_and_meta_counts_the_same(shape):
    """The forward keeps the output and the lowered input, and no bfloat16 copy of the weight (K C R S x 2 bytes);
    meta allocates the same bytes as the CPU."""
    N, C, H, K, R, s, p, _ = shape
    peaks = {}
    for dev in ("cpu", "meta"):
        peak, held, out = _forward_peak(dev, shape)
        P = out.shape[2]
        assert held == 2 * (N * C * H * H + N * K * P * P), (dev, held)  # the input's copy and the output
        peaks[dev] = peak
    assert peaks["cpu"] == peaks["meta"]


def test_other_mixes_are_refused():
    """A float32 weight beside a bfloat16 input outside autocast is refused in Python as before; C refuses the mix
    for groups > 1 and for conv_transpose2d, which read the weight as stored."""
    x = gm.randn(1, 4, 5, 5).to(gm.bfloat16)
    with pytest.raises(TypeError, match="input has dtype bfloat16 but weight has dtype float32"):
        F.conv2d(x, gm.randn(4, 4, 3, 3))
    with pytest.raises(TypeError, match="dtype"):
        _C.conv2d(x, gm.randn(4, 2, 3, 3), None, (1, 1), (1, 1), (1, 1), 2)
    with pytest.raises(TypeError, match="dtype"):
        _C.conv_transpose2d(x, gm.randn(4, 4, 3, 3), None, (1, 1), (1, 1), (0, 0), 1, (1, 1))
    with pytest.raises(TypeError, match="dtype"):
        _C.conv2d(x, gm.randn(4, 4, 3, 3), gm.randn(4).to(gm.bfloat16), (1, 1), (1, 1), (1, 1), 1)


def test_forced_product_route_casts_as_before(monkeypatch):
    """Under GPUMEMNET_BF16_CONV=gemm (bfloat16 products) C refuses the float32 weight and autocast casts it."""
    monkeypatch.setenv("GPUMEMNET_BF16_CONV", "gemm")
    x = gm.randn(2, 8, 6, 6).to(gm.bfloat16)
    with pytest.raises(TypeError, match="dtype"):
        _C.conv2d(x, gm.randn(8, 8, 3, 3), None, (1, 1), (1, 1), (1, 1), 1)
    m = nn.Conv2d(8, 8, 3, padding=1)
    with gm.autocast("cpu", dtype=gm.bfloat16):
        y = m(x.float())
    y.float().sum().backward()
    assert y.dtype == gm.bfloat16 and m.weight.grad.dtype == gm.float32
