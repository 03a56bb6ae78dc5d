"""F.pad (csrc/ops_pad.c, kernels/cpu/pad.c, kernels/pad_geom.h), its modules, and F.pixel_shuffle /
pixel_unshuffle (composed in nn/_functional_layers.py): values against NumPy's np.pad and PyTorch, float64
gradients against finite differences and PyTorch, every error path, meta shapes and exact allocator bytes against
the CPU."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet.nn import functional as F
from gradcheck import assert_close, check_against_torch, gradcheck
from nnops_util import R, T, rng, rounded

NP_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def np_pad(x, pads, mode, value=0.0):
    """NumPy reference: crop the negative pads, then np.pad the positive ones (reflect's crop is taken after the
    mirror, as PyTorch's kernel indexes from the original edges)."""
    k = len(pads) // 2
    width = [(0, 0)] * (x.ndim - k) + [(pads[2 * j], pads[2 * j + 1]) for j in reversed(range(k))]
    if mode == "reflect":
        pos = [(max(a, 0), max(b, 0)) for a, b in width]
        y = np.pad(x, pos, mode="reflect")
        idx = tuple(slice(max(-a, 0), y.shape[d] - max(-b, 0)) for d, (a, b) in enumerate(width))
        return y[idx]
    idx = tuple(slice(max(-a, 0), x.shape[d] - max(-b, 0)) for d, (a, b) in enumerate(width))
    x = x[idx]
    pos = [(max(a, 0), max(b, 0)) for a, b in width]
    if mode == "constant":
        return np.pad(x, pos, mode="constant", constant_values=value)
    return np.pad(x, pos, mode=NP_MODES[mode])


CASES = [  # shape, pads, mode
    ((2, 3, 5, 6), (2, 1, 1, 3), "reflect"),
    ((3, 5, 6), (4, 4, 3, 3), "reflect"),
    ((2, 4, 7), (3, 2), "reflect"),
    ((4, 7), (-2, 3), "reflect"),
    ((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 1), "reflect"),
    ((2, 3, 5, 6), (3, 0, 2, 4), "replicate"),
    ((2, 3, 5, 6), (-1, 2, 2, -2), "replicate"),
    ((2, 4, 7), (5, 1), "replicate"),
    ((2, 3, 5, 6), (6, 2, 5, 1), "circular"),
    ((2, 3, 5, 6), (-2, 3, 1, -1), "circular"),
    ((2, 3, 5, 6), (1, 2, 0, 3), "constant"),
    ((2, 3, 5, 6), (-1, 2, 2, -3), "constant"),
    ((2, 3, 5, 6), (1, 1, 1, 1, 1, 1), "constant"),
    ((5,), (2, 0), "constant"),
]


@pytest.mark.parametrize("shape,pads,mode", CASES)
def test_pad_values_and_gradients(shape, pads, mode):
    x = R(*shape)
    value = 0.5 if mode == "constant" else None
    ref = np_pad(x, pads, mode, value or 0.0)
    assert_close(F.pad(T(x), pads, mode, value), ref, 0, 0, what=f"pad {mode} float64")
    assert_close(F.pad(T(x, gm.float32), pads, mode, value), ref.astype(np.float32), 0, 0, what="float32")
    gradcheck(lambda a: F.pad(a, pads, mode, value), [T(x, requires_grad=True)], what=f"pad {mode}")


@pytest.mark.parametrize("shape,pads,mode", CASES)
def test_pad_against_torch(shape, pads, mode):
    torch = pytest.importorskip("torch")
    value = 0.5 if mode == "constant" else None
    check_against_torch(lambda a: F.pad(a, pads, mode, value),
                        lambda a: torch.nn.functional.pad(a, pads, mode, value), [R(*shape)], atol=1e-12, rtol=1e-12,
                        what=f"pad {shape} {pads} {mode}")


@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16, gm.int64, gm.bool_])
def test_pad_constant_other_dtypes(dtype):
    x = rng.integers(0, 2, (2, 3, 4))
    got = F.pad(gm.tensor(x).to(dtype), (1, 2, 2, 1), value=1)
    assert got.dtype == dtype
    vals = got.float().numpy() if dtype in (gm.float16, gm.bfloat16) else got.numpy()
    np.testing.assert_array_equal(vals, np_pad(x, (1, 2, 2, 1), "constant", 1.0).astype(vals.dtype))


def test_modules_against_torch():
    torch = pytest.importorskip("torch")
    x = R(2, 3, 6, 5)
    for name, arg in (("ReflectionPad2d", 2), ("ReflectionPad2d", (1, 2, 3, 0)), ("ReplicationPad2d", 3),
                      ("ZeroPad2d", (1, 0, 2, 1)), ("CircularPad2d", 1)):
        # values exact; gradients up to the order of the additions (a gather here, a scatter in PyTorch)
        check_against_torch(getattr(nn, name)(arg), getattr(torch.nn, name)(arg), [x], atol=1e-14, rtol=1e-14,
                            what=f"{name}({arg})")
        assert repr(getattr(nn, name)(arg)) == repr(getattr(torch.nn, name)(arg))
    x3 = R(2, 3, 7)
    for name in ("ReflectionPad1d", "ReplicationPad1d", "ZeroPad1d", "CircularPad1d"):
        check_against_torch(getattr(nn, name)((2, 1)), getattr(torch.nn, name)((2, 1)), [x3], atol=1e-14,
                            rtol=1e-14, what=name)
    check_against_torch(nn.ConstantPad2d(1, -2.0), torch.nn.ConstantPad2d(1, -2.0), [x], atol=0, rtol=0)
    check_against_torch(nn.ConstantPad3d((1, 0, 0, 1, 1, 1), 3.0), torch.nn.ConstantPad3d((1, 0, 0, 1, 1, 1), 3.0),
                        [x], atol=0, rtol=0)


def test_pad_errors():
    x = T(R(1, 1, 4, 4))
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(RuntimeError, match="less than or equal to two times the input dimension but got padding "
                                           "length 10 and input of dimension 4"):
        F.pad(x, (1,) * 10)
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 4D input tensor"):
        F.pad(x, (1, 1), "reflect")
    with pytest.raises(RuntimeError, match=r"Padding size should be less than the corresponding input dimension, "
                                           r"but got: padding \(4, 4\) at dimension 3 of input \(1, 1, 4, 4\)"):
        F.pad(x, (4, 4, 0, 0), "reflect")
    with pytest.raises(RuntimeError, match="Padding value causes wrapping around more than once"):
        F.pad(x, (5, 0, 0, 0), "circular")
    with pytest.raises(RuntimeError, match="negative output size"):
        F.pad(x, (-3, -3))
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode bogus"):
        F.pad(x, (1, 1), "bogus")
    with pytest.raises(RuntimeError, match="doesn't take in value argument"):
        F.pad(x, (1, 1, 1, 1), "reflect", 2.0)
    with pytest.raises(TypeError, match="pad must be a tuple of ints"):
        F.pad(x, (1.5, 1))
    with pytest.raises(TypeError, match="floating-point input"):
        F.pad(gm.zeros(1, 2, 3, dtype=gm.int64), (1, 1), "reflect")
    with pytest.raises(ValueError, match="tuple of 4 ints"):
        nn.ReflectionPad2d((1, 2))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_meta_bytes_equal_cpu(mode):
    """Forward allocates the output only (plus a contiguous copy of a strided input, a workspace freed at once);
    backward the input's gradient; nothing is saved."""
    x = R(3, 4, 9, 10)

    def run(device):
        a = T(x, gm.float32).to(device).transpose(2, 3).requires_grad_()  # strided: the copy is counted too
        gm.memory.reset_peak_memory_stats(device)
        base = gm.memory.memory_allocated(device)
        out = F.pad(a, (2, 1, 3, 2), mode)
        held = gm.memory.memory_allocated(device) - base
        assert tuple(out.shape) == (3, 4, 10 + 5, 9 + 3)
        out.sum().backward()
        return held, gm.memory.max_memory_allocated(device) - base, a.grad.shape
    cpu, meta = run("cpu"), run("meta")
    assert cpu == meta
    assert cpu[0] == rounded(3 * 4 * 15 * 12 * 4)  # exactly the output


@pytest.mark.parametrize("shape,r", [((2, 8, 3, 5), 2), ((18, 2, 3), 3), ((2, 1, 4, 4, 3), 1)])
def test_pixel_shuffle(shape, r):
    x = R(*shape)
    *lead, c, h, w = shape
    ref = x.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    ref = ref.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2).reshape(*lead, c // (r * r), h * r, w * r)
    out = F.pixel_shuffle(T(x), r)
    assert_close(out, ref, 0, 0, what="pixel_shuffle")
    assert_close(F.pixel_unshuffle(out, r), x, 0, 0, what="pixel_unshuffle inverts")
    gradcheck(lambda a: F.pixel_shuffle(a, r), [T(x, requires_grad=True)], what="pixel_shuffle")
    gradcheck(lambda a: F.pixel_unshuffle(a, r), [T(ref, requires_grad=True)], what="pixel_unshuffle")
    torch = pytest.importorskip("torch")
    check_against_torch(nn.PixelShuffle(r), torch.nn.PixelShuffle(r), [x], atol=0, rtol=0)
    check_against_torch(nn.PixelUnshuffle(r), torch.nn.PixelUnshuffle(r), [ref], atol=0, rtol=0)


def test_pixel_shuffle_errors_and_one_copy():
    with pytest.raises(RuntimeError, match=r"divisible by the square of upscale_factor, but input.size\(-3\)=6 is "
                                           r"not divisible by 4"):
        F.pixel_shuffle(gm.zeros(1, 6, 2, 2), 2)
    with pytest.raises(RuntimeError, match=r"expects width to be divisible by downscale_factor, but "
                                           r"input.size\(-1\)=5 is not divisible by 2"):
        F.pixel_unshuffle(gm.zeros(1, 1, 4, 5), 2)
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        F.pixel_shuffle(gm.zeros(4, 4), 2)
    with pytest.raises(RuntimeError, match="positive upscale_factor"):
        F.pixel_shuffle(gm.zeros(1, 4, 2, 2), 0)
    x = gm.zeros(2, 16, 8, 8, device="meta")
    base = gm.memory.memory_allocated("meta")
    gm.memory.reset_peak_memory_stats("meta")
    out = F.pixel_shuffle(x, 4)
    assert tuple(out.shape) == (2, 1, 32, 32)
    assert gm.memory.max_memory_allocated("meta") - base == 2 * 16 * 8 * 8 * 4  # the one copy, nothing else


def test_upsampling_modules_against_torch():
    torch = pytest.importorskip("torch")
    x = R(1, 2, 3, 4)
    check_against_torch(nn.UpsamplingBilinear2d(scale_factor=2), torch.nn.UpsamplingBilinear2d(scale_factor=2), [x])
    check_against_torch(nn.UpsamplingNearest2d(size=(5, 7)), torch.nn.UpsamplingNearest2d(size=(5, 7)), [x])
    for align in (False, True):
        check_against_torch(lambda a: F.interpolate(a, scale_factor=2, mode="bilinear", align_corners=align),
                            lambda a: torch.nn.functional.interpolate(a, scale_factor=2, mode="bilinear",
                                                                      align_corners=align), [x])
