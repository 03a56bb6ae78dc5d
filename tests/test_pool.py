"""Pooling and resizing: max_pool2d, avg_pool2d, adaptive_avg_pool2d, global_avg_pool2d, global_max_pool2d,
interpolate (nearest, nearest-exact, bilinear, area).

Each forward is compared with a direct-loop NumPy reference written here from PyTorch's documented semantics
(output-size formulas, window rules, source-coordinate formulas), over kernel/stride/padding/dilation/ceil_mode/
count_include_pad combinations, odd sizes, unbatched and non-contiguous inputs and every float dtype. Bilinear
is also checked against closed forms that need no reference implementation (a linear ramp is reproduced
exactly, 2x downsampling averages 2x2 blocks). Backward: float64 central-difference gradchecks. Memory: an
inference max_pool2d allocates exactly its output (allocator bytes, on cpu and meta). Then meta shapes, and the
error paths. Where PyTorch is installed, values and gradients are compared with it."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.nn import _functional_pool as F
from gradcheck import assert_close, check_against_torch, gradcheck, to_numpy

_rng = np.random.default_rng(3)


def R(*shape):
    return _rng.standard_normal(shape)


def distinct(*shape):
    """Values pairwise at least 0.01 apart: max pooling has no ties, even after a gradcheck's eps step."""
    n = int(np.prod(shape))
    return (_rng.permutation(n) * 0.01 + _rng.uniform(-1e-3, 1e-3)).reshape(shape) - n * 0.005


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def block(nbytes):
    """What the allocator charges for a request: rounded up to 512 bytes."""
    return max(512, -(-nbytes // 512) * 512)


# ---- NumPy references --------------------------------------------------------------------------------------------
def pool_out(n, k, s, p, d, ceil_mode):
    """PyTorch's documented output size; with ceil_mode the last window must start inside input or left pad."""
    span = d * (k - 1) + 1
    if ceil_mode:
        o = math.ceil((n + 2 * p - span) / s) + 1
        if (o - 1) * s >= n + p:
            o -= 1
    else:
        o = (n + 2 * p - span) // s + 1
    return o


def as4(x):
    return x[None] if x.ndim == 3 else x


def np_max_pool2d(x, k, s=None, p=0, d=1, ceil_mode=False):
    """(out, indices) by direct loops over each window's (dilated) taps; -inf / -1 for an empty window."""
    (kh, kw), (ph, pw), (dh, dw) = pair(k), pair(p), pair(d)
    sh, sw = pair(s) if s is not None else (kh, kw)
    x4 = as4(x)
    N, C, H, W = x4.shape
    OH, OW = pool_out(H, kh, sh, ph, dh, ceil_mode), pool_out(W, kw, sw, pw, dw, ceil_mode)
    out = np.full((N, C, OH, OW), -np.inf)
    idx = np.full((N, C, OH, OW), -1, np.int64)
    for n in range(N):
        for c in range(C):
            for oh in range(OH):
                for ow in range(OW):
                    for i in range(kh):
                        h = oh * sh - ph + i * dh
                        for j in range(kw):
                            w = ow * sw - pw + j * dw
                            if 0 <= h < H and 0 <= w < W:
                                v = x4[n, c, h, w]
                                if v > out[n, c, oh, ow] or np.isnan(v):
                                    out[n, c, oh, ow] = v
                                    idx[n, c, oh, ow] = h * W + w
    return (out, idx) if x.ndim == 4 else (out[0], idx[0])


def np_avg_pool2d(x, k, s=None, p=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """Windows cut from the zero-padded array (so a ceil_mode window hanging past the padded input is cut
    short there, as in PyTorch); the divisor counts padded or only real elements."""
    (kh, kw), (ph, pw) = pair(k), pair(p)
    sh, sw = pair(s) if s is not None else (kh, kw)
    x4 = as4(x)
    N, C, H, W = x4.shape
    OH, OW = pool_out(H, kh, sh, ph, 1, ceil_mode), pool_out(W, kw, sw, pw, 1, ceil_mode)
    xp = np.pad(x4, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    real = np.pad(np.ones((H, W)), ((ph, ph), (pw, pw)))
    out = np.zeros((N, C, OH, OW))
    for oh in range(OH):
        for ow in range(OW):
            win = (slice(oh * sh, oh * sh + kh), slice(ow * sw, ow * sw + kw))
            count = real[win].sum()
            if count == 0:
                continue  # entirely in the padding: 0
            div = divisor_override or (real[win].size if count_include_pad else count)
            out[:, :, oh, ow] = xp[(slice(None), slice(None)) + win].sum(axis=(2, 3)) / div
    return out if x.ndim == 4 else out[0]


def np_adaptive_avg_pool2d(x, oh_, ow_):
    x4 = as4(x)
    N, C, H, W = x4.shape
    out = np.zeros((N, C, oh_, ow_))
    for i in range(oh_):
        h0, h1 = math.floor(i * H / oh_), math.ceil((i + 1) * H / oh_)
        for j in range(ow_):
            w0, w1 = math.floor(j * W / ow_), math.ceil((j + 1) * W / ow_)
            out[:, :, i, j] = x4[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return out if x.ndim == 4 else out[0]


def nearest_src(o, n_in, n_out, scale_factor, exact, real, two_d):
    """PyTorch's source index, s = 1/scale_factor if given else in/out.
    2-D (nearest_idx / nearest_exact_idx, in float): nearest copies when out == in and halves when out == 2*in,
    whatever the scale factor, else floor(o * s); nearest-exact floor((o + 0.5) * s).
    1-D (the generic kernel, in `real`, floored as float32): floor(o * s) and
    floor(max((o + 0.5) * s - 0.5, 0) + 0.5)."""
    if two_d:
        s = np.float32(1.0 / scale_factor) if scale_factor else np.float32(n_in) / np.float32(n_out)
        if exact:
            v = np.float32((o + 0.5) * np.float64(s))
        elif n_out == n_in:
            return o
        elif n_out == 2 * n_in:
            return o // 2
        else:
            v = np.float32(o) * s
        return min(int(np.floor(v)), n_in - 1)
    s = real(1.0 / scale_factor) if scale_factor else real(n_in) / real(n_out)
    if exact:
        v = max(s * (real(o) + real(0.5)) - real(0.5), real(0)) + real(0.5)
    else:
        v = s * real(o)
    return min(int(np.floor(np.float32(v))), n_in - 1)


def linear_src(o, n_in, n_out, scale_factor, align, real):
    """(i0, i1, l0, l1) per PyTorch's area_pixel_compute_source_index + compute_source_index_and_lambda."""
    if n_out == n_in:
        return o, o, 1.0, 0.0
    if align:
        ratio = real(n_in - 1) / real(n_out - 1) if n_out > 1 else real(0)
        src = ratio * real(o)
    else:
        ratio = real(1.0 / scale_factor) if scale_factor else real(n_in) / real(n_out)
        src = max(ratio * (real(o) + real(0.5)) - real(0.5), real(0))
    i0 = min(int(np.floor(np.float32(src))), n_in - 1)
    l1 = min(max(src - real(i0), real(0)), real(1))
    return i0, i0 + (1 if i0 < n_in - 1 else 0), float(real(1) - l1), float(l1)


def np_interpolate(x, size, mode, align=False, scales=(None, None), real=np.float64):
    """Loops over output pixels; x is (N, C, H, W) or, for nearest, (N, C, L)."""
    x4 = x[:, :, None] if x.ndim == 3 else x
    size = (1,) + tuple(size) if x.ndim == 3 else tuple(size)
    scales = (None,) + tuple(scales) if x.ndim == 3 else tuple(scales)
    N, C, H, W = x4.shape
    out = np.zeros((N, C) + size)
    for oh in range(size[0]):
        for ow in range(size[1]):
            if mode == "bilinear":
                h0, h1, a0, a1 = linear_src(oh, H, size[0], scales[0], align, real)
                w0, w1, b0, b1 = linear_src(ow, W, size[1], scales[1], align, real)
                out[:, :, oh, ow] = (a0 * (b0 * x4[:, :, h0, w0] + b1 * x4[:, :, h0, w1]) +
                                     a1 * (b0 * x4[:, :, h1, w0] + b1 * x4[:, :, h1, w1]))
            else:
                exact = mode == "nearest-exact"
                h = nearest_src(oh, H, size[0], scales[0], exact, real, x.ndim == 4)
                w = nearest_src(ow, W, size[1], scales[1], exact, real, x.ndim == 4)
                out[:, :, oh, ow] = x4[:, :, h, w]
    return out[:, :, 0] if x.ndim == 3 else out


# ---- max_pool2d --------------------------------------------------------------------------------------------------
MAX_CASES = [  # shape, kernel_size, stride, padding, dilation, ceil_mode
    ((2, 3, 7, 6), 3, None, 0, 1, False),
    ((2, 3, 7, 6), 2, None, 0, 1, True),       # odd sizes: ceil_mode adds a partial window
    ((2, 2, 8, 9), 3, 2, 1, 1, False),
    ((2, 2, 8, 9), 3, 2, 1, 1, True),
    ((1, 2, 5, 5), 2, 2, 1, 1, True),          # the extra window would start in the right padding: dropped
    ((1, 2, 9, 7), (3, 2), (2, 1), (1, 0), (2, 1), False),
    ((1, 2, 9, 8), 3, 1, 1, 2, True),          # dilation
    ((2, 1, 6, 6), 1, 1, 0, 1, False),
    ((2, 1, 5, 4), (5, 4), None, 0, 1, False),  # the whole plane
    ((3, 5, 5), 3, 2, 1, 1, False),            # unbatched (C, H, W)
    ((1, 1, 1, 4), 2, 1, 1, 2, False),         # with H = 1, dilation leaves every window empty: -inf, index -1
]


@pytest.mark.parametrize("case", MAX_CASES, ids=lambda c: str(c))
def test_max_pool2d_forward(case):
    shape, k, s, p, d, ceil = case
    x = R(*shape)
    ref, ref_idx = np_max_pool2d(x, k, s, p, d, ceil)
    out, idx = F.max_pool2d(gm.tensor(x), k, s, p, d, ceil, return_indices=True)
    np.testing.assert_array_equal(to_numpy(out), ref)  # exact, -inf included
    np.testing.assert_array_equal(to_numpy(idx), ref_idx)
    assert idx.dtype == gm.int64
    plain = F.max_pool2d(gm.tensor(x), k, s, p, d, ceil)  # the same without indices
    np.testing.assert_array_equal(to_numpy(plain), ref)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_max_pool2d_dtypes(dtype):
    x = R(2, 3, 6, 7)
    t = gm.tensor(x, dtype=getattr(gm, dtype))
    xr = to_numpy(t).astype(np.float64)  # the values as stored
    out = F.max_pool2d(t, 3, 2, 1)
    assert out.dtype == t.dtype
    assert_close(to_numpy(out).astype(np.float64), np_max_pool2d(xr, 3, 2, 1)[0], 0, 0, what=dtype)


def test_max_pool2d_noncontiguous_and_nan():
    x = R(2, 3, 8, 6)
    t = gm.tensor(x)._transpose(2, 3)  # (2, 3, 6, 8), strided
    assert not t.is_contiguous()
    assert_close(F.max_pool2d(t, 3, 2), np_max_pool2d(x.transpose(0, 1, 3, 2), 3, 2)[0], 0, 0)
    x = R(1, 1, 4, 4)
    x[0, 0, 1, 1] = np.nan
    out = to_numpy(F.max_pool2d(gm.tensor(x), 2))
    assert np.isnan(out[0, 0, 0, 0]) and not np.isnan(out[0, 0, 1, 1])


def test_max_pool2d_ties_take_first():
    x = np.zeros((1, 1, 4, 4))
    _, idx = F.max_pool2d(gm.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(to_numpy(idx)[0, 0], [[0, 2], [8, 10]])


@pytest.mark.parametrize("case", [((1, 2, 6, 5), 2, None, 0, 1, False), ((1, 2, 7, 7), 3, 2, 1, 1, True),
                                  ((1, 1, 7, 6), (3, 2), 1, (1, 1), (2, 1), False), ((2, 5, 5), 3, 1, 1, 1, False)],
                         ids=str)
def test_max_pool2d_gradcheck(case):
    shape, k, s, p, d, ceil = case
    gradcheck(lambda t: F.max_pool2d(t, k, s, p, d, ceil), [gm.tensor(distinct(*shape), requires_grad=True)],
              what=f"max_pool2d{case}")


def test_max_pool2d_return_indices_with_grad():
    x = gm.tensor(distinct(1, 2, 4, 4), requires_grad=True)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    assert out.requires_grad and not idx.requires_grad
    out.sum().backward()
    g = to_numpy(x.grad).reshape(1, 2, 16)
    for c in range(2):
        assert sorted(np.flatnonzero(g[0, c])) == sorted(to_numpy(idx)[0, c].ravel())


# ---- memory: an inference forward allocates its output and nothing else ------------------------------------------
def test_max_pool2d_no_grad_allocates_only_output():
    x = gm.randn(2, 3, 16, 12, requires_grad=True)
    out_bytes = block(2 * 3 * 8 * 6 * 4)
    gm.memory.reset_peak_memory_stats("cpu")
    before = gm.memory.memory_allocated("cpu")
    with gm.no_grad():
        y = F.max_pool2d(x, 2)
    assert gm.memory.memory_allocated("cpu") - before == out_bytes
    assert gm.memory.max_memory_allocated("cpu") - before == out_bytes  # no temporary either
    del y
    # With grad, the int64 indices are kept for backward, and the input is not copied.
    y = F.max_pool2d(x, 2)
    assert gm.memory.memory_allocated("cpu") - before == out_bytes + block(2 * 3 * 8 * 6 * 8)
    del y
    assert gm.memory.memory_allocated("cpu") == before


def test_max_pool2d_meta_allocations():
    x = gm.empty(8, 64, 56, 56, device="meta")
    before = gm.memory.memory_allocated("meta")
    with gm.no_grad():
        y = F.max_pool2d(x, 3, 2, 1)
    assert y.shape == (8, 64, 28, 28) and y.device.type == "meta"
    assert gm.memory.memory_allocated("meta") - before == block(8 * 64 * 28 * 28 * 4)
    y2, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    assert idx.shape == y2.shape and idx.dtype == gm.int64
    assert gm.memory.memory_allocated("meta") - before == 2 * block(8 * 64 * 28 * 28 * 4) + \
        block(8 * 64 * 28 * 28 * 8)


def test_max_pool2d_backward_meta_allocates_the_cpus_bytes_for_strided_indices():
    peaks = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((1, 2, 8, 8), device=dev)
        out, idx = F.max_pool2d(x, 2, return_indices=True)
        strided = idx.transpose(2, 3)  # the backward walks indices flat: it copies these first
        gm.memory.reset_peak_memory_stats(dev)
        before = gm.memory.memory_allocated(dev)
        gm._C.max_pool2d_backward(out.transpose(2, 3), strided, x.shape, 2)
        peaks.append(gm.memory.max_memory_allocated(dev) - before)
    assert peaks[0] == peaks[1] == block(1 * 2 * 8 * 8 * 4) + block(1 * 2 * 4 * 4 * 8)


def test_max_pool2d_noncontiguous_input_is_not_copied():
    x = gm.randn(2, 3, 12, 16)._transpose(2, 3)
    before = gm.memory.memory_allocated("cpu")
    gm.memory.reset_peak_memory_stats("cpu")
    with gm.no_grad():
        y = F.max_pool2d(x, 2)
    assert gm.memory.max_memory_allocated("cpu") - before == block(y.numel() * 4)


# ---- backward from the input: what autograd runs when the input is kept anyway ---------------------------------
@pytest.mark.parametrize("case", MAX_CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_max_pool2d_backward_from_input_equals_the_indices_one(case, dtype):
    """Each window's argmax found again in the input is the forward's: the same gradient, bit for bit, with
    ties (rounded values) and a NaN in the input, and through a strided view."""
    shape, k, s, p, d, ceil = case
    x = np.round(R(*shape) * 2) / 2  # many ties
    x.flat[len(x.flat) // 2] = np.nan
    t = gm.tensor(x, dtype=getattr(gm, dtype))
    window = (k, s if s is not None else k, p, d)
    out, idx = F.max_pool2d(t, k, s, p, d, ceil, return_indices=True)
    g = gm.tensor(R(*out.shape), dtype=t.dtype)
    by_idx = gm._C.max_pool2d_backward(g, idx, t.shape, *window)
    by_input = gm._C.max_pool2d_backward_input(g, t, *window, ceil)
    np.testing.assert_array_equal(to_numpy(by_input), to_numpy(by_idx))
    if len(shape) == 4:  # a transposed view read through its strides
        v = gm.tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2)), dtype=t.dtype)._transpose(2, 3)
        np.testing.assert_array_equal(to_numpy(gm._C.max_pool2d_backward_input(g, v, *window, ceil)),
                                      to_numpy(by_idx))


def test_max_pool2d_keeps_no_indices_when_its_input_is_kept_anyway():
    """After a ReLU (which keeps its output for backward) max pooling saves that output instead of int64
    indices: the forward adds only the pooled output. From a tensor nothing keeps, it keeps the indices. The
    gradients are the same either way."""
    from gpumemnet.nn import functional as nnf
    x = gm.tensor(distinct(2, 4, 16, 16), dtype=gm.float32, requires_grad=True)
    h = nnf.relu(x * 1.0)  # kept by relu's backward
    other = h.view(-1)  # a second holder of h's storage: the relu keeps h itself (tests/test_peak_relu_pool.py
    before = gm.memory.memory_allocated("cpu")  # has the relu that nothing else keeps)
    y = F.max_pool2d(h, 2)
    assert gm.memory.memory_allocated("cpu") - before == block(2 * 4 * 8 * 8 * 4)  # the output alone
    y.sum().backward()
    g_input = to_numpy(x.grad)
    x.grad = None
    del y, h, other
    h = x * 1.0  # mul keeps nothing of its output
    before = gm.memory.memory_allocated("cpu")
    y = F.max_pool2d(h, 2)
    assert gm.memory.memory_allocated("cpu") - before == block(2 * 4 * 8 * 8 * 4) + block(2 * 4 * 8 * 8 * 8)
    nnf.relu(y).sum().backward()  # relu of the max = max of the relu: the same gradient where positive
    np.testing.assert_array_equal(to_numpy(x.grad), g_input)


def test_max_pool2d_backward_from_input_errors():
    x, g = gm.randn(1, 2, 6, 6), gm.randn(1, 2, 3, 3)
    with pytest.raises(ValueError, match=r"grad_output has shape \(1, 2, 2, 2\).*has shape \(1, 2, 3, 3\)"):
        gm._C.max_pool2d_backward_input(gm.randn(1, 2, 2, 2), x, 2, 2, 0, 1)
    with pytest.raises(TypeError, match="input is float64 but grad_output is float32"):
        gm._C.max_pool2d_backward_input(g, x.double(), 2, 2, 0, 1)
    with pytest.raises(ValueError, match="kernel_size"):
        gm._C.max_pool2d_backward_input(g, x, 0, 2, 0, 1)


# ---- avg_pool2d --------------------------------------------------------------------------------------------------
AVG_CASES = [  # shape, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((2, 3, 7, 6), 2, None, 0, False, True, None),
    ((2, 3, 7, 6), 2, None, 0, True, True, None),
    ((2, 2, 8, 9), 3, 2, 1, False, True, None),
    ((2, 2, 8, 9), 3, 2, 1, False, False, None),
    ((1, 2, 8, 9), 3, 2, 1, True, True, None),    # ceil windows hang past the padded input: cut short
    ((1, 2, 8, 9), 3, 2, 1, True, False, None),
    ((1, 2, 5, 5), 2, 2, 1, True, True, None),
    ((1, 2, 9, 7), (3, 2), (2, 1), (1, 0), False, False, None),
    ((1, 2, 6, 6), 3, 2, 1, True, True, 5),
    ((3, 5, 5), 3, 1, 1, False, False, None),     # unbatched
]


@pytest.mark.parametrize("case", AVG_CASES, ids=str)
def test_avg_pool2d_forward(case):
    shape, k, s, p, ceil, cip, dov = case
    x = R(*shape)
    out = F.avg_pool2d(gm.tensor(x), k, s, p, ceil, cip, dov)
    assert_close(out, np_avg_pool2d(x, k, s, p, ceil, cip, dov), 1e-12, 1e-12, what="avg_pool2d")


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-6), ("float16", 2e-3), ("bfloat16", 1e-2)])
def test_avg_pool2d_dtypes(dtype, tol):
    t = gm.tensor(R(2, 3, 7, 7), dtype=getattr(gm, dtype))
    xr = to_numpy(t).astype(np.float64)
    out = F.avg_pool2d(gm.tensor(xr, dtype=getattr(gm, dtype)), 3, 2, 1, count_include_pad=False)
    assert out.dtype == t.dtype
    assert_close(to_numpy(out).astype(np.float64), np_avg_pool2d(xr, 3, 2, 1, False, False), tol, tol)


def test_avg_pool2d_noncontiguous():
    x = R(2, 7, 3, 6)
    t = gm.tensor(x)._permute((0, 2, 1, 3))  # (2, 3, 7, 6) strided
    assert_close(F.avg_pool2d(t, 3, 2, 1), np_avg_pool2d(x.transpose(0, 2, 1, 3), 3, 2, 1), 1e-12, 1e-12)


@pytest.mark.parametrize("case", [AVG_CASES[1], AVG_CASES[3], AVG_CASES[5], AVG_CASES[8], AVG_CASES[9]], ids=str)
def test_avg_pool2d_gradcheck(case):
    shape, k, s, p, ceil, cip, dov = case
    gradcheck(lambda t: F.avg_pool2d(t, k, s, p, ceil, cip, dov), [gm.tensor(R(*shape), requires_grad=True)],
              what=f"avg_pool2d{case}")


# ---- adaptive and global pooling ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,size", [((2, 3, 7, 5), 3), ((2, 3, 7, 5), (4, 2)), ((1, 2, 5, 7), (5, 7)),
                                        ((1, 2, 5, 7), (None, 3)), ((1, 2, 4, 6), (8, 9)), ((3, 6, 7), (2, None)),
                                        ((2, 2, 5, 5), 1)], ids=str)
def test_adaptive_avg_pool2d_forward(shape, size):
    x = R(*shape)
    out = F.adaptive_avg_pool2d(gm.tensor(x), size)
    oh, ow = pair(size)
    oh, ow = shape[-2] if oh is None else oh, shape[-1] if ow is None else ow
    assert_close(out, np_adaptive_avg_pool2d(x, oh, ow), 1e-12, 1e-12, what="adaptive_avg_pool2d")


@pytest.mark.parametrize("shape,size", [((1, 2, 7, 5), (3, 2)), ((1, 1, 4, 5), (6, 7)), ((2, 5, 4), 1)], ids=str)
def test_adaptive_avg_pool2d_gradcheck(shape, size):
    gradcheck(lambda t: F.adaptive_avg_pool2d(t, size), [gm.tensor(R(*shape), requires_grad=True)])


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (3, 6, 7)], ids=str)
def test_global_pools_forward(shape):
    x = R(*shape)
    t = gm.tensor(x)
    avg, mx = F.global_avg_pool2d(t), F.global_max_pool2d(t)
    assert avg.shape == shape[:-2] and mx.shape == shape[:-2]
    assert_close(avg, x.mean(axis=(-2, -1)), 1e-12, 1e-12)
    assert_close(mx, x.max(axis=(-2, -1)), 0, 0)
    if len(shape) == 4:  # the documented equivalences
        assert_close(avg, F.adaptive_avg_pool2d(t, 1).flatten(1), 0, 0)
        assert_close(mx, F.max_pool2d(t, shape[-2:]).flatten(1), 0, 0)


def test_global_pools_gradcheck():
    gradcheck(F.global_avg_pool2d, [gm.tensor(R(2, 3, 4, 5), requires_grad=True)])
    gradcheck(F.global_max_pool2d, [gm.tensor(distinct(2, 3, 4, 5), requires_grad=True)])
    gradcheck(F.global_max_pool2d, [gm.tensor(distinct(3, 4, 5), requires_grad=True)])


def test_global_max_grad_goes_to_first_maximum():
    x = np.zeros((1, 2, 3, 3))
    x[0, 1, 2, 0] = x[0, 1, 1, 2] = 5.0  # a tie: (1, 2) comes first in row-major order
    t = gm.tensor(x, requires_grad=True)
    (F.global_max_pool2d(t) * gm.tensor([[2.0, 3.0]], dtype=gm.float64)).sum().backward()
    g = np.zeros_like(x)
    g[0, 0, 0, 0] = 2.0
    g[0, 1, 1, 2] = 3.0
    assert_close(t.grad, g, 0, 0)


def test_global_avg_backward_is_a_broadcast_view():
    g = gm.tensor(R(2, 3))
    view = F._mean_grad_view(g, (2, 3, 4, 5))
    assert view.shape == (2, 3, 4, 5) and view._strides[-2:] == (0, 0)  # no input-sized allocation
    assert_close(view, np.broadcast_to(to_numpy(g)[:, :, None, None] / 20, (2, 3, 4, 5)), 1e-15, 0)


# ---- interpolate -------------------------------------------------------------------------------------------------
INTERP_CASES = [  # shape, size, scale_factor, mode, align_corners
    ((2, 2, 3, 4), (5, 7), None, "nearest", None),
    ((2, 2, 5, 4), (3, 2), None, "nearest", None),
    ((1, 2, 3, 4), None, 2, "nearest", None),
    ((1, 2, 3, 4), None, (1.7, 2.5), "nearest", None),   # the given factor, not out/in, picks the source
    ((1, 2, 5, 5), None, 1.1, "nearest", None),          # 2-D: out == in copies, whatever the factor
    ((1, 2, 3, 4), None, (2.2, 1.9), "nearest", None),   # 2-D: out == 2*in halves, whatever the factor
    ((1, 1, 7), 11, None, "nearest", None),              # 3-D is (N, C, L)
    ((1, 1, 7), None, 0.6, "nearest", None),
    ((1, 2, 6), None, 1.1, "nearest", None),             # 1-D: out == in, but floor(o / 1.1) applies
    ((1, 2, 3), None, 2.2, "nearest", None),             # 1-D: out == 2*in, floor(o / 2.2)
    ((1, 2, 7), None, 0.6, "nearest-exact", None),
    ((1, 2, 3, 4), (5, 7), None, "nearest-exact", None),
    ((1, 2, 6, 5), (4, 3), None, "nearest-exact", None),
    ((2, 2, 3, 4), (5, 7), None, "bilinear", False),
    ((2, 2, 3, 4), (5, 7), None, "bilinear", True),
    ((1, 2, 6, 7), (4, 3), None, "bilinear", False),     # downsampling
    ((1, 2, 6, 7), (4, 3), None, "bilinear", True),
    ((1, 2, 3, 4), None, (1.7, 2.5), "bilinear", False),
    ((1, 2, 3, 4), None, 2, "bilinear", True),
    ((1, 2, 3, 4), (1, 1), None, "bilinear", True),      # a single output pixel: ratio 0
    ((1, 2, 4, 4), (4, 6), None, "bilinear", False),     # one axis unchanged
]


def _interp_args(case):
    shape, size, sf, _, _ = case
    x = R(*shape)
    dim = len(shape) - 2
    if size is not None:
        out = (size,) * dim if isinstance(size, int) else size
        scales = (None,) * dim
    else:
        f = (float(sf),) * dim if not isinstance(sf, tuple) else sf
        out = tuple(math.floor(n * s) for n, s in zip(shape[2:], f))
        scales = f
    return x, out, scales


@pytest.mark.parametrize("case", INTERP_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_interpolate_forward(case, dtype):
    _, size, sf, mode, align = case
    x, out, scales = _interp_args(case)
    real = np.float64 if dtype == "float64" else np.float32
    t = gm.tensor(x, dtype=getattr(gm, dtype))
    xr = to_numpy(t).astype(np.float64)
    got = F.interpolate(t, size=size, scale_factor=sf, mode=mode, align_corners=align)
    tol = 1e-12 if dtype == "float64" else 1e-6
    assert_close(got, np_interpolate(xr, out, mode, bool(align), scales, real), tol, tol, what=f"{case}")


def test_interpolate_half_dtypes():
    for dt, tol in ((gm.float16, 2e-3), (gm.bfloat16, 1e-2)):
        t = gm.tensor(R(1, 2, 3, 4), dtype=dt)
        xr = to_numpy(t).astype(np.float64)
        got = F.interpolate(t, size=(5, 6), mode="bilinear")
        assert got.dtype == dt
        assert_close(to_numpy(got).astype(np.float64), np_interpolate(xr, (5, 6), "bilinear", real=np.float32),
                     tol, tol)


def test_interpolate_noncontiguous():
    x = R(1, 4, 2, 3)
    t = gm.tensor(x)._permute((0, 2, 3, 1))  # (1, 2, 3, 4) strided
    xt = x.transpose(0, 2, 3, 1)
    assert_close(F.interpolate(t, size=(5, 7), mode="bilinear"), np_interpolate(xt, (5, 7), "bilinear"), 1e-12, 0)
    assert_close(F.interpolate(t, scale_factor=3), np_interpolate(xt, (9, 12), "nearest", scales=(3.0, 3.0)), 0, 0)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate_wide_and_tall(mode):
    """More than 256 output columns and 32 output rows: the kernels' column-tap and row blocks."""
    x = R(2, 3, 4, 130)
    got = F.interpolate(gm.tensor(x), size=(7, 300), mode=mode)
    assert_close(got, np_interpolate(x, (7, 300), mode), 1e-12, 1e-12)
    gradcheck(lambda t: F.interpolate(t, size=(3, 300), mode=mode), [gm.tensor(R(1, 1, 2, 40), requires_grad=True)])


def test_bilinear_closed_forms():
    """Properties that need no reference implementation."""
    # align_corners=True reproduces a linear function of the pixel position exactly.
    H, W, OH, OW = 4, 5, 7, 9
    ramp = (2.0 * np.arange(H)[:, None] - 3.0 * np.arange(W)[None, :])[None, None]
    got = to_numpy(F.interpolate(gm.tensor(ramp), size=(OH, OW), mode="bilinear", align_corners=True))
    yy = np.arange(OH)[:, None] * (H - 1) / (OH - 1)
    xx = np.arange(OW)[None, :] * (W - 1) / (OW - 1)
    assert_close(got[0, 0], 2.0 * yy - 3.0 * xx, 1e-12, 1e-12)
    # align_corners=False halving: source (2o + 0.5) sits between pixels 2o and 2o+1: the 2x2 block mean.
    x = R(2, 3, 6, 8)
    got = F.interpolate(gm.tensor(x), scale_factor=0.5, mode="bilinear")
    assert_close(got, x.reshape(2, 3, 3, 2, 4, 2).mean(axis=(3, 5)), 1e-12, 1e-12)
    # Doubling along W: output o samples source coordinate (o + 0.5) / 2 - 0.5 (clamped at 0): plain 1-D
    # linear interpolation there, np.interp's job.
    x = R(1, 1, 1, 4)
    got = to_numpy(F.interpolate(gm.tensor(x), size=(1, 8), mode="bilinear"))[0, 0, 0]
    src = np.clip((np.arange(8) + 0.5) / 2 - 0.5, 0, None)
    assert_close(got, np.interp(src, np.arange(4), x[0, 0, 0]), 1e-12, 1e-12)
    # nearest 2x repeats each pixel; nearest-exact halving takes the pixel at each 2x2 block's centre, rounded
    # up: (2o + 1, 2o + 1).
    x = R(1, 2, 3, 4)
    assert_close(F.interpolate(gm.tensor(x), scale_factor=2), x.repeat(2, axis=2).repeat(2, axis=3), 0, 0)
    x = R(1, 1, 4, 6)
    assert_close(F.interpolate(gm.tensor(x), size=(2, 3), mode="nearest-exact"), x[:, :, 1::2, 1::2], 0, 0)


def test_interpolate_area_is_adaptive_average():
    x = R(1, 2, 7, 5)
    assert_close(F.interpolate(gm.tensor(x), size=(3, 2), mode="area"), np_adaptive_avg_pool2d(x, 3, 2), 1e-12, 0)


@pytest.mark.parametrize("case", [INTERP_CASES[i] for i in (0, 3, 5, 8, 12, 13, 14, 15, 17)], ids=str)
def test_interpolate_gradcheck(case):
    shape, size, sf, mode, align = case
    gradcheck(lambda t: F.interpolate(t, size=size, scale_factor=sf, mode=mode, align_corners=align),
              [gm.tensor(R(*shape), requires_grad=True)], what=str(case))


# ---- meta: shapes and allocations without data -------------------------------------------------------------------
def test_meta_shapes():
    x = gm.empty(4, 3, 17, 12, device="meta")
    assert F.max_pool2d(x, 3, 2, 1, ceil_mode=True).shape == (4, 3, 9, 7)
    assert F.avg_pool2d(x, 2).shape == (4, 3, 8, 6)
    assert F.avg_pool2d(x, 2, ceil_mode=True).shape == (4, 3, 9, 6)
    assert F.adaptive_avg_pool2d(x, (5, None)).shape == (4, 3, 5, 12)
    assert F.global_avg_pool2d(x).shape == (4, 3)
    assert F.global_max_pool2d(x).shape == (4, 3)
    assert F.interpolate(x, scale_factor=1.5, mode="bilinear").shape == (4, 3, 25, 18)
    assert F.interpolate(gm.empty(2, 3, 5, device="meta"), size=8).shape == (2, 3, 8)
    assert F.max_pool2d(gm.empty(3, 9, 9, device="meta"), 3).shape == (3, 3, 3)


def test_meta_backward_allocates_input_gradient():
    x = gm.empty(2, 3, 8, 8, device="meta", requires_grad=True)
    for y in (F.max_pool2d(x, 2), F.avg_pool2d(x, 3, 1, 1), F.adaptive_avg_pool2d(x, 3),
              F.interpolate(x, scale_factor=2, mode="bilinear")):
        x.grad = None
        y.sum().backward()
        assert x.grad.shape == (2, 3, 8, 8) and x.grad.device.type == "meta"


def test_batch_of_zero():
    x = gm.tensor(np.zeros((0, 2, 4, 4)))
    assert F.max_pool2d(x, 2).shape == (0, 2, 2, 2)
    assert F.avg_pool2d(x, 2).shape == (0, 2, 2, 2)
    assert F.interpolate(x, size=3).shape == (0, 2, 3, 3)


# ---- errors ------------------------------------------------------------------------------------------------------
X4 = gm.zeros(1, 2, 4, 4)

ERRORS = [
    (lambda: F.max_pool2d(gm.zeros(4, 4), 2), ValueError, r"3 dimensions \(C, H, W\) or 4 .*got shape \(4, 4\)"),
    (lambda: F.max_pool2d(gm.zeros(1, 1, 1, 4, 4), 2), ValueError, r"got shape \(1, 1, 1, 4, 4\)"),
    (lambda: F.max_pool2d(gm.zeros(1, 0, 4, 4), 2), ValueError, r"non-zero C, H and W"),
    (lambda: F.max_pool2d(X4, 5), ValueError, r"kernel is larger than the padded input.*\(1, 2, 4, 4\)"),
    (lambda: F.max_pool2d(X4, 3, dilation=2), ValueError, r"dilation \(2, 2\) spans 5x5"),
    (lambda: F.max_pool2d(X4, 2, stride=0), ValueError, r"stride must be positive, got \(0, 0\)"),
    (lambda: F.max_pool2d(X4, (2, 0)), ValueError, r"kernel_size must be positive, got \(2, 0\)"),
    (lambda: F.max_pool2d(X4, 2, padding=-1), ValueError, r"padding must be non-negative"),
    (lambda: F.max_pool2d(X4, 3, padding=2), ValueError, r"padding \(2, 2\) must be at most half of kernel_size"),
    (lambda: F.max_pool2d(X4, 2.0), TypeError, r"kernel_size must be an int or a tuple of 2 ints"),
    (lambda: F.max_pool2d(X4, (2, 2, 2)), TypeError, r"kernel_size"),
    (lambda: F.max_pool2d(X4, 2, dilation=0), ValueError, r"dilation must be positive"),
    (lambda: F.max_pool2d(gm.zeros(1, 1, 4, 4, dtype=gm.bool), 2), TypeError, r"floating-point input.*bool"),
    (lambda: F.max_pool2d(np.zeros((1, 1, 4, 4)), 2), TypeError, r"input must be a Tensor"),
    (lambda: F.avg_pool2d(X4, 2, divisor_override=0), RuntimeError, r"divisor must be not zero"),
    (lambda: F.avg_pool2d(X4, 2, divisor_override=1.5), TypeError, r"divisor_override"),
    (lambda: F.avg_pool2d(X4, 3, padding=2), ValueError, r"at most half of kernel_size"),
    (lambda: F.avg_pool2d(X4, 7, padding=1), ValueError, r"padded by \(1, 1\) is 6x6, but kernel_size \(7, 7\)"),
    (lambda: F.avg_pool2d(gm.zeros(4, 4), 2), ValueError, r"got shape \(4, 4\)"),
    (lambda: F.adaptive_avg_pool2d(X4, (-1, 2)), ValueError, r"output_size must be non-negative"),
    (lambda: F.adaptive_avg_pool2d(X4, (2, 2, 2)), RuntimeError, r"output_size must be an int or a pair"),
    (lambda: F.adaptive_avg_pool2d(X4, "2"), TypeError, r"output_size"),
    (lambda: F.adaptive_avg_pool2d(gm.zeros(4, 4), 2), ValueError, r"got shape \(4, 4\)"),
    (lambda: F.global_avg_pool2d(gm.zeros(2, 3)), ValueError, r"global_avg_pool2d: .*got shape \(2, 3\)"),
    (lambda: F.global_max_pool2d(gm.zeros(2, 3, 4, 5, 6)), ValueError, r"global_max_pool2d"),
    (lambda: F.interpolate(X4, size=2, scale_factor=2), ValueError, r"only one of size or scale_factor"),
    (lambda: F.interpolate(X4), ValueError, r"either size or scale_factor should be defined"),
    (lambda: F.interpolate(gm.zeros(1, 2, 4), size=3, mode="bilinear"), NotImplementedError,
     r"\(1, 2, 4\), but bilinear mode needs a 4-D input"),
    (lambda: F.interpolate(X4, size=3, align_corners=True), ValueError, r"align_corners option can only be set"),
    (lambda: F.interpolate(X4, size=3, mode="lanczos"), ValueError, r"'lanczos' is not supported \(a PyTorch mode"),
    (lambda: F.interpolate(X4, size=(3, 4, 5)), ValueError, r"one entry per spatial dimension"),
    (lambda: F.interpolate(X4, size=(0, 4)), ValueError, r"output size \(0, 4\) must be positive"),
    (lambda: F.interpolate(X4, scale_factor=0.1), ValueError, r"output size \(0, 0\) must be positive"),
    (lambda: F.interpolate(X4, scale_factor=-2), ValueError, r"scale_factor must be positive"),
    (lambda: F.interpolate(X4, size=2.5), TypeError, r"size must be an int"),
    (lambda: F.interpolate(gm.zeros(2, 3), size=2), ValueError, r"4-D input .* got shape \(2, 3\)"),
    (lambda: F.interpolate(gm.zeros(1, 1, 2, 2, dtype=gm.int64), size=3, mode="bilinear"), TypeError,
     r"floating-point"),
    (lambda: F.interpolate(gm.zeros(2, 3), size=3, mode="area"), ValueError, r"or a 3-D one \(N, C, L\)"),
    (lambda: gm._C.max_pool2d_backward(gm.zeros(1, 1, 2, 2), gm.full((1, 1, 2, 2), 99, dtype=gm.int64),
                                       (1, 1, 4, 4)), IndexError, r"outside the 4x4 plane"),
    (lambda: gm._C.max_pool2d_backward(gm.zeros(1, 1, 2, 3), gm.zeros(1, 1, 2, 2, dtype=gm.int64), (1, 1, 4, 4)),
     ValueError, r"grad_output has shape \(1, 1, 2, 3\)"),
    (lambda: gm._C.avg_pool2d_backward(gm.zeros(1, 1, 3, 3), (1, 1, 4, 4), 2, 2, 0), ValueError,
     r"grad_output has shape \(1, 1, 3, 3\).*has shape \(1, 1, 2, 2\)"),
    (lambda: gm._C.interpolate(X4, (3, 3), "bogus"), ValueError, r"mode must be"),
]


@pytest.mark.parametrize("fn,exc,pattern", ERRORS, ids=[p for _, _, p in ERRORS])
def test_errors(fn, exc, pattern):
    with pytest.raises(exc, match=pattern):
        fn()


# ---- PyTorch, where installed ------------------------------------------------------------------------------------
TORCH_CASES = [
    ("max_pool2d", lambda m, t: m.max_pool2d(t, 3, 2, 1, ceil_mode=True), distinct(2, 3, 8, 7)),
    ("max_pool2d_dilated", lambda m, t: m.max_pool2d(t, 3, 1, 1, 2), distinct(1, 2, 9, 8)),
    ("avg_pool2d", lambda m, t: m.avg_pool2d(t, 3, 2, 1, True, False), R(2, 3, 8, 7)),
    ("avg_pool2d_div", lambda m, t: m.avg_pool2d(t, 3, 2, 1, False, True, 4), R(2, 3, 8, 7)),
    ("adaptive", lambda m, t: m.adaptive_avg_pool2d(t, (3, 4)), R(2, 3, 7, 9)),
    ("nearest", lambda m, t: m.interpolate(t, size=(5, 11)), R(1, 2, 3, 4)),
    ("nearest_scale", lambda m, t: m.interpolate(t, scale_factor=(1.7, 2.5)), R(1, 2, 3, 4)),
    ("nearest_exact", lambda m, t: m.interpolate(t, size=(5, 3), mode="nearest-exact"), R(1, 2, 4, 6)),
    ("bilinear", lambda m, t: m.interpolate(t, size=(5, 7), mode="bilinear", align_corners=False), R(1, 2, 3, 4)),
    ("bilinear_ac", lambda m, t: m.interpolate(t, size=(5, 7), mode="bilinear", align_corners=True), R(1, 2, 3, 4)),
    ("bilinear_down", lambda m, t: m.interpolate(t, scale_factor=0.45, mode="bilinear"), R(1, 2, 9, 8)),
]


@pytest.mark.parametrize("name,fn,x", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_against_torch(name, fn, x):
    torch = pytest.importorskip("torch")
    check_against_torch(lambda t: fn(F, t), lambda t: fn(torch.nn.functional, t), [x], what=name)
