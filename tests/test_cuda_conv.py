"""conv2d, conv_transpose2d and linear on CUDA against the CPU, from the same inputs: forward and backward
(through autograd: input, weight and bias gradients), over stride, padding (ints, 'same', 'valid'), dilation,
groups (depthwise too), bias or none, non-contiguous inputs, empty batches, every float dtype (float16/bfloat16
as autocast uses them); errors for operands on different devices; the allocator's bytes per category (equal
but for convolution workspace); and the cuDNN algorithm choice under a memory limit (through _C's test hook,
which replaces cuDNN's candidates by fake workspace sizes so that the selection runs in the emulator too).

Sums run in another order on the GPU (cuDNN's algorithms, cuBLAS), so values are compared with tolerances that
fit the dtype and the number of terms."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import functional as F
from cuda_util import requires_cuda, to_np

pytestmark = requires_cuda

_rng = np.random.default_rng(4)

# (rtol, atol) for sums of tens to hundreds of products of O(1) values, on any algorithm cuDNN may pick
# (Winograd and FFT included for float32).
TOLS = {"float32": (2e-4, 2e-4), "float64": (1e-10, 1e-10), "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}


def R(*shape):
    return _rng.standard_normal(shape).astype(np.float32)


def close(cuda_t, cpu_t, dtype):
    assert cuda_t.device.type == "cuda" and cpu_t.device.type == "cpu"
    assert tuple(cuda_t.shape) == tuple(cpu_t.shape)
    assert cuda_t.dtype == cpu_t.dtype
    rtol, atol = TOLS[dtype]
    a, b = to_np(cuda_t), to_np(cpu_t)
    scale = max(1.0, float(np.abs(b).max()) if b.size else 1.0)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale)


def run(fn, arrays, dtype, device, grad_seed=0, transform=None):
    """fn(*tensors) on device from float32 NumPy arrays cast to dtype (None entries pass through), then backward
    with a fixed upstream gradient. Returns the output and each tensor argument's .grad."""
    ts = []
    for a in arrays:
        if a is None:
            ts.append(None)
            continue
        t = gm.tensor(a).to(device=device, dtype=dtype)
        if transform is not None and not ts:
            t = transform(t)
        ts.append(t.detach().requires_grad_())
    out = fn(*ts)
    g = np.random.default_rng(grad_seed).standard_normal(tuple(out.shape)).astype(np.float32)
    out.backward(gm.tensor(g).to(device=device, dtype=dtype))
    return out, [None if t is None else t.grad for t in ts]


def compare(fn, arrays, dtype="float32", transform=None):
    out_c, grads_c = run(fn, arrays, dtype, "cuda", transform=transform)
    out_p, grads_p = run(fn, arrays, dtype, "cpu", transform=transform)
    close(out_c, out_p, dtype)
    for gc, gp in zip(grads_c, grads_p):
        assert (gc is None) == (gp is None)
        if gc is not None:
            close(gc, gp, dtype)


# ---- conv2d --------------------------------------------------------------------------------------------------
# (N, C, H, W), (K, C/groups, kH, kW), kwargs
CONV2D = [
    ((2, 3, 7, 6), (4, 3, 3, 3), {}),
    ((2, 3, 7, 6), (4, 3, 3, 3), {"padding": 1}),
    ((2, 4, 9, 8), (6, 2, 3, 2), {"stride": 2, "padding": (1, 0), "groups": 2}),
    ((1, 2, 9, 9), (3, 2, 3, 3), {"dilation": 2, "padding": 2}),
    ((2, 2, 8, 7), (4, 2, 3, 3), {"stride": (2, 3), "dilation": (1, 2), "padding": (2, 1)}),
    ((2, 3, 6, 6), (5, 3, 1, 1), {}),  # pointwise
    ((2, 4, 7, 7), (4, 1, 3, 3), {"groups": 4, "padding": 1}),  # depthwise
    ((2, 3, 6, 5), (6, 1, 3, 3), {"groups": 3, "stride": 2}),  # depthwise, channel multiplier 2
    ((1, 2, 6, 7), (3, 2, 3, 3), {"padding": "same"}),
    ((1, 2, 6, 7), (3, 2, 2, 4), {"padding": "same"}),  # asymmetric padding: the direct kernels on a GPU
    ((1, 2, 6, 7), (3, 2, 3, 3), {"padding": "same", "dilation": 2}),
    ((2, 2, 5, 5), (3, 2, 3, 3), {"padding": "valid"}),
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("xs, ws, kw", CONV2D, ids=[str(i) for i in range(len(CONV2D))])
def test_conv2d_float32(xs, ws, kw, bias):
    compare(lambda x, w, b: F.conv2d(x, w, b, **kw), [R(*xs), R(*ws), R(ws[0]) if bias else None])


@pytest.mark.parametrize("i", [0, 2, 4, 6, 9])
def test_conv2d_float64(i):
    xs, ws, kw = CONV2D[i]
    compare(lambda x, w, b: F.conv2d(x, w, b, **kw), [R(*xs), R(*ws), R(ws[0])], "float64")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("i", [1, 2, 6, 8])
def test_conv2d_half(i, dtype):
    xs, ws, kw = CONV2D[i]
    compare(lambda x, w, b: F.conv2d(x, w, b, **kw), [R(*xs), R(*ws), R(ws[0])], dtype)


def test_conv2d_non_contiguous_input():
    # (N, H, W, C) data viewed as (N, C, H, W): strided planes, read through the strides on both devices
    compare(lambda x, w, b: F.conv2d(x, w, b, padding=1), [R(2, 6, 5, 3), R(4, 3, 3, 3), R(4)],
            transform=lambda t: t.permute(0, 3, 1, 2))
    # every other row and column of a larger image
    compare(lambda x, w, b: F.conv2d(x, w, b, stride=2), [R(2, 3, 12, 10), R(4, 3, 3, 3), R(4)],
            transform=lambda t: t[:, :, ::2, ::2])


def test_conv2d_unbatched():
    compare(lambda x, w, b: F.conv2d(x, w, b, padding=1), [R(3, 6, 5), R(4, 3, 3, 3), R(4)])


def test_conv2d_empty_batch():
    x = gm.tensor(np.zeros((0, 3, 5, 5), np.float32)).cuda().requires_grad_()
    w = gm.tensor(R(4, 3, 3, 3)).cuda().requires_grad_()
    b = gm.tensor(R(4)).cuda().requires_grad_()
    out = F.conv2d(x, w, b, padding=1)
    assert tuple(out.shape) == (0, 4, 5, 5) and out.device.type == "cuda"
    out.backward(gm.tensor(np.zeros((0, 4, 5, 5), np.float32)).cuda())
    assert tuple(x.grad.shape) == (0, 3, 5, 5)
    np.testing.assert_array_equal(to_np(w.grad), 0)
    np.testing.assert_array_equal(to_np(b.grad), 0)


def test_conv2d_under_autocast():
    x, w, b = R(2, 3, 8, 8), R(4, 3, 3, 3), R(4)
    outs = {}
    for dev in ("cpu", "cuda"):
        xt, wt, bt = (gm.tensor(a).to(device=dev).requires_grad_() for a in (x, w, b))
        with gm.autocast(dev, dtype=gm.float16):
            out = F.conv2d(xt, wt, bt, padding=1)
        assert out.dtype == gm.float16
        out.float().sum().backward()
        outs[dev] = (out, xt.grad, wt.grad, bt.grad)
    for c, p in zip(outs["cuda"], outs["cpu"]):
        close(c, p, "float16")  # the output, and the parameters' float32 gradients through float16 arithmetic


# ---- conv_transpose2d ------------------------------------------------------------------------------------------
# (N, Cin, H, W), (Cin, Cout/groups, kH, kW), kwargs
TCONV = [
    ((2, 3, 4, 5), (3, 2, 3, 3), {}),
    ((2, 3, 4, 5), (3, 2, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ((1, 4, 3, 4), (4, 3, 2, 3), {"stride": (2, 1), "groups": 2}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"dilation": 2, "padding": 1}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"dilation": 3, "output_padding": 2, "stride": 1}),  # opad >= stride: direct
    ((2, 4, 3, 3), (4, 1, 3, 3), {"groups": 4, "stride": 2}),  # depthwise
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("xs, ws, kw", TCONV, ids=[str(i) for i in range(len(TCONV))])
def test_conv_transpose2d_float32(xs, ws, kw, bias):
    cout = ws[1] * kw.get("groups", 1)
    compare(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), [R(*xs), R(*ws), R(cout) if bias else None])


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_conv_transpose2d_dtypes(dtype):
    xs, ws, kw = TCONV[1]
    compare(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), [R(*xs), R(*ws), R(ws[1])], dtype)


def test_conv_transpose2d_non_contiguous_input():
    compare(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2), [R(2, 5, 4, 3), R(3, 2, 3, 3), R(2)],
            transform=lambda t: t.permute(0, 3, 1, 2))


# ---- linear --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("xs", [(5, 7), (2, 3, 7), (1, 7)], ids=["2d", "3d", "row"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_linear_float32(xs, bias):
    compare(lambda x, w, b: F.linear(x, w, b), [R(*xs), R(4, 7), R(4) if bias else None])


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_linear_dtypes(dtype):
    compare(lambda x, w, b: F.linear(x, w, b), [R(6, 9), R(5, 9), R(5)], dtype)


def test_linear_non_contiguous():
    # a transposed input (column-major for BLAS) and a strided one (copied to a contiguous workspace)
    compare(lambda x, w, b: F.linear(x, w, b), [R(7, 5), R(4, 7), R(4)], transform=lambda t: t.transpose(0, 1))
    compare(lambda x, w, b: F.linear(x, w, b), [R(5, 14), R(4, 7), R(4)], transform=lambda t: t[:, ::2])


def test_linear_weight_transposed_view():
    wt, xs = gm.tensor(R(7, 4)), gm.tensor(R(3, 7))
    outs = []
    for dev in ("cuda", "cpu"):
        x = xs.to(device=dev)
        w = wt.to(device=dev).transpose(0, 1)  # (4, 7) view of a (7, 4) tensor
        outs.append(F.linear(x, w))
    close(outs[0], outs[1], "float32")


def test_linear_empty():
    compare(lambda x, w, b: F.linear(x, w, b), [R(0, 7), R(4, 7), R(4)])
    compare(lambda x, w, b: F.linear(x, w, b), [R(3, 0), R(4, 0), R(4)])


# ---- errors ----------------------------------------------------------------------------------------------------
def test_mixed_devices_are_refused():
    x, w, b = gm.tensor(R(1, 2, 5, 5)), gm.tensor(R(3, 2, 3, 3)), gm.tensor(R(3))
    with pytest.raises(RuntimeError, match="same device"):
        F.conv2d(x.cuda(), w)
    with pytest.raises(RuntimeError, match="same device"):
        F.conv2d(x.cuda(), w.cuda(), b)
    with pytest.raises(RuntimeError, match="same device"):
        F.conv_transpose2d(x, w.transpose(0, 1).contiguous().cuda())
    with pytest.raises(RuntimeError, match="same device"):
        F.linear(gm.tensor(R(2, 3)).cuda(), gm.tensor(R(4, 3)))


def test_shape_errors_are_the_cpu_ones():
    x, w = gm.tensor(R(1, 2, 5, 5)), gm.tensor(R(3, 4, 3, 3))
    msgs = []
    for dev in ("cpu", "cuda"):
        with pytest.raises(ValueError) as e:
            F.conv2d(x.to(device=dev), w.to(device=dev))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


# ---- memory ----------------------------------------------------------------------------------------------------
def _bytes_by_category(dev, fn):
    gc.collect()  # tensors other tests left behind must not be freed in the middle of the measurement
    gm.memory.empty_cache(dev)
    gm.memory.reset_peak_memory_stats(dev)
    before = gm.memory.memory_stats(dev)["by_category"]
    keep = fn(dev)
    after = gm.memory.memory_stats(dev)["by_category"]
    res = {k: (after[k]["current"] - before[k]["current"], after[k]["peak"] - before[k]["current"]) for k in after}
    del keep
    return res


def _conv_step(dev):
    x = gm.tensor(R(2, 3, 10, 10)).to(device=dev).requires_grad_()
    w = gm.tensor(R(8, 3, 3, 3)).to(device=dev).requires_grad_()
    b = gm.tensor(R(8)).to(device=dev).requires_grad_()
    out = F.conv2d(x, w, b, padding=1)
    out2 = F.conv2d(out, gm.tensor(R(4, 8, 3, 3)).to(device=dev), stride=2)
    out2.sum().backward()
    return x, w, b, out, out2


def test_conv_allocates_the_cpu_bytes_but_for_workspace():
    """Outputs, saved activations and gradients take the same bytes on both devices; only the convolution
    workspace differs (im2col tiles on the CPU, the cuDNN algorithm's own on the GPU)."""
    cpu = _bytes_by_category("cpu", _conv_step)
    cuda = _bytes_by_category("cuda", _conv_step)
    for cat in cpu:
        if cat != "workspace":
            assert cuda[cat] == cpu[cat], cat


def _linear_step(dev):
    x = gm.tensor(R(6, 10)).to(device=dev).requires_grad_()
    w = gm.tensor(R(5, 10)).to(device=dev).requires_grad_()
    b = gm.tensor(R(5)).to(device=dev).requires_grad_()
    out = F.linear(x, w, b)
    out.sum().backward()
    return x, w, b, out


def test_linear_allocates_the_cpu_bytes():
    assert _bytes_by_category("cuda", _linear_step) == _bytes_by_category("cpu", _linear_step)


# ---- the algorithm choice ------------------------------------------------------------------------------------
@pytest.fixture
def fake_algos():
    yield _C._conv_algo_fake
    _C._conv_algo_fake(None)
    gm.memory.set_limit("cuda", None)


def _conv_once():
    x = gm.tensor(R(1, 2, 6, 6)).cuda()
    w = gm.tensor(R(3, 2, 3, 3)).cuda()
    gm.memory.reset_peak_memory_stats("cuda")
    out = F.conv2d(x, w, padding=1)
    return out, gm.memory.memory_stats("cuda")["by_category"]["workspace"]["peak"]


def test_algorithm_is_the_best_whose_workspace_fits(fake_algos):
    gm.memory.empty_cache("cuda")
    base = gm.memory.memory_stats("cuda")["reserved"]["current"]
    # best first: 1 GiB, then 2 MiB, then none; under a limit of what is reserved + 64 MiB the second fits
    fake_algos([1 << 30, 2 << 20, 0])
    gm.memory.set_limit("cuda", base + (64 << 20))
    out, ws_peak = _conv_once()
    last = _C._conv_algo_last()
    assert last["index"] == 1 and not last["cached"] and last["workspace"] == 2 << 20
    assert ws_peak >= 2 << 20
    assert tuple(out.shape) == (1, 3, 6, 6)
    # the same geometry again: the cached choice
    _conv_once()
    assert _C._conv_algo_last()["cached"] and _C._conv_algo_last()["workspace"] == 2 << 20
    # a tighter limit: the cached choice no longer fits, the next candidate (no workspace) is taken
    gm.memory.empty_cache("cuda")
    gm.memory.set_limit("cuda", gm.memory.memory_stats("cuda")["reserved"]["current"] + (1 << 20))
    _, ws_peak = _conv_once()
    last = _C._conv_algo_last()
    assert last["index"] == 2 and last["workspace"] == 0 and ws_peak == 0


def test_no_algorithm_fits_raises_out_of_memory(fake_algos):
    gm.memory.empty_cache("cuda")
    fake_algos([1 << 30, 512 << 20])
    gm.memory.set_limit("cuda", gm.memory.memory_stats("cuda")["reserved"]["current"] + (64 << 20))
    with pytest.raises(gm.OutOfMemoryError, match="CUDA out of memory"):
        _conv_once()


def test_candidates_that_do_not_fit_are_not_out_of_memory_errors(fake_algos):
    """A candidate whose workspace does not fit is tried through gm_try_alloc: the cache is released and the
    allocation retried, but no OOM is counted (nor its report built); only the one that fits is allocated."""
    gm.memory.empty_cache("cuda")
    fake_algos([1 << 30, 2 << 20, 0])
    gm.memory.set_limit("cuda", gm.memory.memory_stats("cuda")["reserved"]["current"] + (64 << 20))
    x = gm.tensor(R(1, 2, 6, 6)).cuda()
    w = gm.tensor(R(3, 2, 3, 3)).cuda()
    st0 = gm.memory.memory_stats("cuda")
    gm.memory.reset_peak_memory_stats("cuda")
    F.conv2d(x, w, padding=1)
    st = gm.memory.memory_stats("cuda")
    assert st["num_ooms"] == st0["num_ooms"]
    assert st["num_retries"] == st0["num_retries"] + 1           # the 1 GiB candidate: released, retried, refused
    assert st["by_category"]["workspace"]["peak"] == 2 << 20      # exactly the candidate that fit
    assert st["by_category"]["workspace"]["current"] == 0
    assert st["num_allocs"] == st0["num_allocs"] + 2              # the output and that workspace


def test_last_candidate_that_does_not_fit_counts_one_oom(fake_algos):
    gm.memory.empty_cache("cuda")
    fake_algos([1 << 30, 512 << 20])
    gm.memory.set_limit("cuda", gm.memory.memory_stats("cuda")["reserved"]["current"] + (64 << 20))
    x = gm.tensor(R(1, 2, 6, 6)).cuda()
    w = gm.tensor(R(3, 2, 3, 3)).cuda()
    st0 = gm.memory.memory_stats("cuda")
    with pytest.raises(gm.OutOfMemoryError) as info:
        F.conv2d(x, w, padding=1)
    assert info.value.requested_bytes == 512 << 20 and info.value.category == "workspace"
    st = gm.memory.memory_stats("cuda")
    assert st["num_ooms"] == st0["num_ooms"] + 1
    assert st["num_retries"] == st0["num_retries"] + 2


def test_choice_runs_the_right_convolution(fake_algos):
    """Whatever candidate is picked, the result is the convolution (fake candidates run the direct kernels)."""
    fake_algos([0])
    compare(lambda x, w, b: F.conv2d(x, w, b, padding=1, stride=2), [R(2, 3, 7, 7), R(4, 3, 3, 3), R(4)])
