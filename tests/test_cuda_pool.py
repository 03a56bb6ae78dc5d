"""Pooling and interpolation on CUDA against the CPU, from the same inputs: max_pool2d (values, argmax indices,
backward with and without the window), avg_pool2d, adaptive_avg_pool2d, global average/max pooling and
interpolate (nearest, nearest-exact, bilinear with and without align_corners, 3-D inputs, scale factors),
forward and backward through autograd, in every float dtype, on strided and unbatched inputs and empty batches.

The CUDA kernels take the CPU's taps in the CPU's order and their backward passes add in the CPU scatter's order
with the same rounding (kernels/cuda/pool.h), so every comparison here is exact. Also: bytes per allocator
category are the same on both devices, and mixing devices is refused."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import functional as F
from cuda_util import requires_cuda, to_np

pytestmark = requires_cuda

DTYPES = ["float32", "float64", "float16", "bfloat16"]
_rng = np.random.default_rng(7)


def R(*shape):
    return _rng.standard_normal(shape).astype(np.float32)


def exact(cuda_t, cpu_t):
    assert cuda_t.device.type == "cuda" and cpu_t.device.type == "cpu"
    assert tuple(cuda_t.shape) == tuple(cpu_t.shape) and cuda_t.dtype == cpu_t.dtype
    np.testing.assert_array_equal(to_np(cuda_t), to_np(cpu_t))


def run(fn, x, dtype, device, transform=None, seed=0):
    t = gm.tensor(x).to(device=device, dtype=dtype)
    if transform is not None:
        t = transform(t)
    t = t.detach().requires_grad_()
    out = fn(t)
    g = np.random.default_rng(seed).standard_normal(tuple(out.shape)).astype(np.float32)
    out.backward(gm.tensor(g).to(device=device, dtype=dtype))
    return out, t.grad


def compare(fn, x, dtype="float32", transform=None):
    out_c, g_c = run(fn, x, dtype, "cuda", transform)
    out_p, g_p = run(fn, x, dtype, "cpu", transform)
    exact(out_c, out_p)
    exact(g_c, g_p)


# ---- max_pool2d ----------------------------------------------------------------------------------------------
MAXPOOL = [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 9, 9), dict(kernel_size=3, stride=1, padding=1)),  # overlapping windows
    ((1, 2, 10, 9), dict(kernel_size=(3, 2), stride=(2, 1), dilation=2, padding=1)),
    ((2, 2, 7, 8), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((3, 5, 6), dict(kernel_size=2)),  # unbatched
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, kw", MAXPOOL, ids=[str(i) for i in range(len(MAXPOOL))])
def test_max_pool2d(shape, kw, dtype):
    compare(lambda t: F.max_pool2d(t, **kw), R(*shape), dtype)


def test_max_pool2d_indices_and_ties():
    x = np.round(R(2, 3, 7, 7))  # many ties: the first maximum wins on both devices
    for kw in MAXPOOL[:5]:
        kw = kw[1]
        oc, ic = F.max_pool2d(gm.tensor(x).cuda(), return_indices=True, **kw)
        op, ip = F.max_pool2d(gm.tensor(x), return_indices=True, **kw)
        exact(oc, op)
        exact(ic, ip)


def test_max_pool2d_nan():
    x = R(1, 1, 6, 6)
    x[0, 0, 1, 1] = x[0, 0, 4, 5] = np.nan
    compare(lambda t: F.max_pool2d(t, 3, 2, 1), x)
    with gm.no_grad():  # the inference kernel (no indices)
        exact(F.max_pool2d(gm.tensor(x).cuda(), 3, 2, 1), F.max_pool2d(gm.tensor(x), 3, 2, 1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, kw", MAXPOOL[:5], ids=[str(i) for i in range(5)])
def test_max_pool2d_backward_with_the_window(shape, kw, dtype):
    """Given the window, CUDA gathers per input element (kernels/cuda/pool.h): the same gradient."""
    x = R(*shape)
    k = kw["kernel_size"]
    window = (k, kw.get("stride", k), kw.get("padding", 0), kw.get("dilation", 1))
    res, g0 = [], None
    for dev in ("cuda", "cpu"):
        t = gm.tensor(x).to(device=dev, dtype=dtype)
        out, idx = _C.max_pool2d(t, *[(v, v) if isinstance(v, int) else v for v in window],
                                 kw.get("ceil_mode", False), True)
        g0 = R(*out.shape) if g0 is None else g0
        g = gm.tensor(g0).to(device=dev, dtype=dtype)
        res.append(_C.max_pool2d_backward(g, idx, t.shape, *window))
    exact(res[0], res[1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, kw", MAXPOOL, ids=[str(i) for i in range(len(MAXPOOL))])
def test_max_pool2d_backward_from_the_input(shape, kw, dtype):
    """Without indices (autograd saves the input when it is kept anyway) each covering window's argmax is found
    again on the device: the CPU's gradient, and the indices' gradient, with ties and a NaN."""
    x = np.round(R(*shape) * 2) / 2
    x.flat[3] = np.nan
    k = kw["kernel_size"]
    window = (k, kw.get("stride", k), kw.get("padding", 0), kw.get("dilation", 1))
    ceil = kw.get("ceil_mode", False)
    res, g0 = [], None
    for dev in ("cuda", "cpu"):
        t = gm.tensor(x).to(device=dev, dtype=dtype)
        out, idx = F.max_pool2d(t, *window, ceil, return_indices=True)
        g0 = R(*out.shape) if g0 is None else g0
        g = gm.tensor(g0).to(device=dev, dtype=dtype)
        res.append(_C.max_pool2d_backward_input(g, t, *window, ceil))
        np.testing.assert_array_equal(to_np(res[-1]), to_np(_C.max_pool2d_backward(g, idx, t.shape, *window)))
    exact(res[0], res[1])
    # and through autograd: after a ReLU the pool keeps its input, on both devices alike
    compare(lambda t: F.max_pool2d(F.relu(t), **kw), R(*shape), dtype)


def test_max_pool2d_backward_window_must_match():
    x = gm.tensor(R(1, 1, 8, 8)).cuda()
    out, idx = _C.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), False, True)
    with pytest.raises(ValueError, match="do not come from this window"):
        _C.max_pool2d_backward(out, idx, x.shape, 3, 1)


def test_max_pool2d_without_grad_allocates_the_output_only():
    """An inference max pool keeps no indices, on CUDA as on the CPU: the same bytes."""
    delta = {}
    for dev in ("cpu", "cuda"):
        x = gm.tensor(R(2, 3, 8, 8)).to(device=dev)
        with gm.no_grad():
            before = gm.memory.memory_allocated(dev)
            out = F.max_pool2d(x, 2)
            delta[dev] = gm.memory.memory_allocated(dev) - before
        del out
    assert delta["cuda"] == delta["cpu"]


# ---- avg_pool2d ----------------------------------------------------------------------------------------------
AVGPOOL = [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ((1, 2, 9, 9), dict(kernel_size=3, stride=1, padding=1, divisor_override=5)),
    ((2, 2, 7, 8), dict(kernel_size=3, stride=2, ceil_mode=True, count_include_pad=False)),
    ((2, 2, 7, 8), dict(kernel_size=(2, 4), stride=(1, 3), padding=(1, 2), ceil_mode=True)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, kw", AVGPOOL, ids=[str(i) for i in range(len(AVGPOOL))])
def test_avg_pool2d(shape, kw, dtype):
    compare(lambda t: F.avg_pool2d(t, **kw), R(*shape), dtype)


# ---- adaptive and global pooling -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", [(3, 2), (5, 7), (4, 4), (1, 3), (11, 9)])
def test_adaptive_avg_pool2d(size, dtype):
    compare(lambda t: F.adaptive_avg_pool2d(t, size), R(2, 3, 8, 7), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_global_pooling(dtype):
    compare(F.global_avg_pool2d, R(2, 3, 6, 5), dtype)
    compare(F.global_max_pool2d, R(2, 3, 6, 5), dtype)
    compare(lambda t: F.adaptive_avg_pool2d(t, 1), R(2, 3, 6, 5), dtype)


# ---- interpolate -----------------------------------------------------------------------------------------------
RESIZE = [
    ((2, 3, 5, 4), dict(size=(10, 8), mode="nearest")),  # doubling: PyTorch's shortcut
    ((2, 3, 5, 4), dict(size=(7, 3), mode="nearest")),
    ((2, 3, 5, 4), dict(scale_factor=1.7, mode="nearest")),
    ((2, 3, 5, 4), dict(size=(7, 9), mode="nearest-exact")),
    ((2, 3, 5, 4), dict(size=(3, 2), mode="nearest-exact")),
    ((2, 3, 5, 4), dict(size=(9, 7), mode="bilinear")),
    ((2, 3, 5, 4), dict(size=(9, 7), mode="bilinear", align_corners=True)),
    ((2, 3, 6, 8), dict(size=(4, 3), mode="bilinear")),
    ((2, 3, 5, 4), dict(scale_factor=(2.5, 1.5), mode="bilinear")),
    ((2, 3, 5, 4), dict(size=(5, 4), mode="bilinear")),  # unchanged size: a copy
    ((2, 3, 7), dict(size=11, mode="nearest")),  # 3-D (N, C, L)
    ((2, 3, 7), dict(scale_factor=1.6, mode="nearest-exact")),
    ((1, 2, 2, 200), dict(size=(3, 610), mode="bilinear")),  # output columns span several of the CPU's blocks
    ((1, 2, 2, 300), dict(size=(3, 530), mode="nearest")),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, kw", RESIZE, ids=[str(i) for i in range(len(RESIZE))])
def test_interpolate(shape, kw, dtype):
    compare(lambda t: F.interpolate(t, **kw), R(*shape), dtype)


# ---- layouts, empty batches ------------------------------------------------------------------------------------
def test_strided_inputs():
    nhwc = lambda t: t.permute(0, 3, 1, 2)  # noqa: E731  (N, H, W, C) data seen as (N, C, H, W)
    compare(lambda t: F.max_pool2d(t, 3, 2, 1), R(2, 7, 8, 3), transform=nhwc)
    compare(lambda t: F.avg_pool2d(t, 2), R(2, 8, 6, 3), transform=nhwc)
    compare(lambda t: F.adaptive_avg_pool2d(t, (3, 2)), R(2, 7, 5, 3), transform=nhwc)
    compare(lambda t: F.interpolate(t, size=(9, 7), mode="bilinear"), R(2, 5, 4, 3), transform=nhwc)
    compare(lambda t: F.interpolate(t, scale_factor=2, mode="nearest"), R(2, 3, 10, 8),
            transform=lambda t: t[:, :, ::2, ::2])


def test_empty_batch():
    for fn in (lambda t: F.max_pool2d(t, 2), lambda t: F.avg_pool2d(t, 2), lambda t: F.adaptive_avg_pool2d(t, 3),
               lambda t: F.interpolate(t, size=(8, 8), mode="bilinear")):
        t = gm.tensor(np.zeros((0, 3, 4, 4), np.float32)).cuda().requires_grad_()
        out = fn(t)
        assert out.shape[0] == 0 and out.device.type == "cuda"
        out.backward(gm.tensor(np.zeros(tuple(out.shape), np.float32)).cuda())
        assert tuple(t.grad.shape) == (0, 3, 4, 4)


# ---- memory and errors -----------------------------------------------------------------------------------------
def _step(dev):
    x = gm.tensor(R(2, 3, 12, 12)).to(device=dev).requires_grad_()
    y = F.max_pool2d(x, 3, 2, 1)
    y = F.avg_pool2d(y, 2, count_include_pad=False)
    y = F.interpolate(y, scale_factor=2, mode="bilinear")
    y = F.adaptive_avg_pool2d(y, (2, 3))
    y.sum().backward()
    return x, y


def test_same_bytes_per_category_on_both_devices():
    res = {}
    for dev in ("cpu", "cuda"):
        gc.collect()  # tensors other tests left behind must not be freed in the middle of the measurement
        gm.memory.empty_cache(dev)
        gm.memory.reset_peak_memory_stats(dev)
        before = gm.memory.memory_stats(dev)["by_category"]
        keep = _step(dev)
        after = gm.memory.memory_stats(dev)["by_category"]
        res[dev] = {k: (after[k]["current"] - before[k]["current"], after[k]["peak"] - before[k]["current"]) for k in after}
        del keep
    assert res["cuda"] == res["cpu"]


def test_mixed_devices_are_refused():
    x = gm.tensor(R(1, 1, 8, 8))
    out, idx = _C.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), False, True)
    with pytest.raises(RuntimeError, match="same device"):
        _C.max_pool2d_backward(out.cuda(), idx, x.shape)


def test_integer_input_pools_as_on_the_cpu():
    """Integers pool in float64 and come back as integers (PyTorch's CPU kernels take them; its CUDA ones refuse
    them: gpumemnet takes them on both)."""
    x = np.arange(16, dtype=np.int64).reshape(1, 1, 4, 4) * 7 % 11
    out = F.max_pool2d(gm.tensor(x).cuda(), 2)
    assert out.dtype == gm.int64 and out.device.type == "cuda"
    np.testing.assert_array_equal(out.cpu().numpy(), x.reshape(1, 1, 2, 2, 2, 2).max(axis=(3, 5)))
    with pytest.raises(TypeError, match="floating-point"):
        F.max_pool2d(gm.tensor(np.zeros((1, 1, 4, 4), np.bool_)).cuda(), 2)
