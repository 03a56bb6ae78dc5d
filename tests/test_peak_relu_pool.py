"""What relu and max pooling keep for backward when the relu's output is kept by nothing else (README "Choices"):
the relu keeps one bit per element (`_C.relu_mask`) and the pool the argmax's tap in its window as int8
(`_C.max_pool2d(..., with_indices=2)`), so the relu's output is freed as soon as the caller drops it (a UNet's
skip, at its concatenation). The gradients are the same, bit for bit, as from the saved output and the int64
indices; against PyTorch and finite differences too; and the estimator's meta run allocates the same bytes."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import functional as F
from gpumemnet.nn import _functional_pool as P
from gradcheck import check_against_torch, gradcheck, to_numpy

_rng = np.random.default_rng(11)

MAX_CASES = [  # shape, kernel_size, stride, padding, dilation, ceil_mode (as tests/test_pool.py)
    ((2, 3, 7, 6), 3, None, 0, 1, False),
    ((2, 3, 7, 6), 2, None, 0, 1, True),
    ((2, 2, 8, 9), 3, 2, 1, 1, True),
    ((1, 2, 9, 7), (3, 2), (2, 1), (1, 0), (2, 1), False),
    ((1, 2, 9, 8), 3, 1, 1, 2, True),
    ((3, 5, 5), 3, 2, 1, 1, False),
    ((1, 1, 1, 4), 2, 1, 1, 2, False),  # every window empty: -inf, tap -1
]


def block(nbytes):
    return max(512, -(-nbytes // 512) * 512)


def window(k, s, p, d):
    return (k, s if s is not None else k, p, d)


# ---- the kernels -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", MAX_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_taps_give_the_indices_gradient(case, dtype):
    """int8 taps name the same argmax as the int64 indices (ties and a NaN included); the backward from them is
    the indices' bit for bit, also for a strided view and a gradient read through its strides."""
    shape, k, s, p, d, ceil = case
    x = np.round(_rng.standard_normal(shape) * 2) / 2  # ties
    x.flat[len(x.flat) // 2] = np.nan
    t = gm.tensor(x, dtype=getattr(gm, dtype))
    w = window(k, s, p, d)
    out, idx = _C.max_pool2d(t, *w, ceil, True)
    out2, taps = _C.max_pool2d(t, *w, ceil, 2)
    assert taps.dtype == gm.int8 and tuple(taps.shape) == tuple(idx.shape)
    np.testing.assert_array_equal(to_numpy(out2), to_numpy(out))
    g = gm.tensor(_rng.standard_normal(tuple(out.shape)), dtype=t.dtype)
    ref = to_numpy(_C.max_pool2d_backward(g, idx, t.shape, *w))
    np.testing.assert_array_equal(to_numpy(_C.max_pool2d_backward(g, taps, t.shape, *w)), ref)
    if len(shape) == 4:
        v = gm.tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2)), dtype=t.dtype)._transpose(2, 3)
        np.testing.assert_array_equal(to_numpy(_C.max_pool2d(v, *w, ceil, 2)[1]), to_numpy(taps))
        gt = gm.tensor(np.ascontiguousarray(to_numpy(g).transpose(0, 1, 3, 2)), dtype=t.dtype)._transpose(2, 3)
        np.testing.assert_array_equal(to_numpy(_C.max_pool2d_backward(gt, taps, t.shape, *w)), ref)


def test_taps_errors():
    x = gm.randn(1, 2, 12, 12)
    with pytest.raises(ValueError, match="int8 taps need a window of at most 127 elements, got 12x12"):
        _C.max_pool2d(x, 12, 12, 0, 1, False, 2)
    out, taps = _C.max_pool2d(x, 2, 2, 0, 1, False, 2)
    with pytest.raises(TypeError, match="int64 \\(or int8 window taps, with kernel_size\\)"):
        _C.max_pool2d_backward(out, taps, x.shape)  # taps without the window
    bad = gm.tensor(np.full(tuple(taps.shape), 7, np.int8))  # tap 7 lies outside a 2x2 window
    with pytest.raises(IndexError, match="outside the 12x12 plane"):
        _C.max_pool2d_backward(out, bad, x.shape, 2, 2, 0, 1)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1000, 70001])
def test_relu_mask_backward_equals_the_output_one(dtype, n):
    """bit i = not (out[i] <= 0): NaN passes the gradient as the saved-output backward does; into_grad writes over
    the gradient."""
    x = _rng.standard_normal(n)
    x[::5] = 0.0
    if n > 3:
        x[3] = np.nan
    y = F.relu(gm.tensor(x, dtype=getattr(gm, dtype)))
    m = _C.relu_mask(y)
    assert m.dtype == gm.uint8 and tuple(m.shape) == ((n + 7) // 8,)
    bits = np.unpackbits(to_numpy(m), bitorder="little")[:n].astype(bool)
    np.testing.assert_array_equal(bits, ~(to_numpy(y).astype(np.float64) <= 0))
    g = gm.tensor(_rng.standard_normal(n), dtype=y.dtype)
    ref = to_numpy(_C.activation_backward(0, g, y))
    np.testing.assert_array_equal(to_numpy(_C.relu_mask_backward(g, m)), ref)
    out = _C.relu_mask_backward(g, m, True)
    np.testing.assert_array_equal(to_numpy(out), ref)
    if n:
        assert out._storage_id == g._storage_id


def test_relu_mask_errors():
    y = gm.randn(3, 5)
    with pytest.raises(TypeError, match="relu_mask: out must be a floating point tensor"):
        _C.relu_mask(gm.zeros(4, dtype=gm.int64))
    with pytest.raises(ValueError, match="mask must be a contiguous 1-D uint8 tensor of 2 bytes"):
        _C.relu_mask_backward(y, gm.zeros(3, dtype=gm.uint8))
    with pytest.raises(ValueError, match="got int64 of shape"):
        _C.relu_mask_backward(y, gm.zeros(2, dtype=gm.int64))
    with pytest.raises(TypeError, match="grad must be a floating point tensor"):
        _C.relu_mask_backward(gm.zeros(4, dtype=gm.int64), gm.zeros(1, dtype=gm.uint8))


# ---- what autograd keeps -----------------------------------------------------------------------------------------
def _net(x, w, inplace, hold=False):
    """conv -> relu -> 2x2 max pool; with hold, a view of the relu's output taken before the pool keeps it alive."""
    h = F.relu(F.conv2d(x, w, padding=1), inplace=inplace)
    held = h.view(-1) if hold else None
    return F.max_pool2d(h, 2), h, held


@pytest.mark.parametrize("inplace", [False, True])
def test_relu_then_pool_keeps_a_mask_and_taps_and_frees_the_output(inplace):
    x = gm.randn(2, 3, 16, 16, requires_grad=True)
    w = gm.randn(4, 3, 3, 3, requires_grad=True)
    y, h, _ = _net(x, w, inplace)
    relu, pool = h.grad_fn, y.grad_fn
    assert relu._saved[0].packed.dtype == gm.uint8 and pool._saved[0].packed.dtype == gm.int8
    before = gm.memory.memory_allocated("cpu")
    del h  # nothing keeps the relu's output now
    assert before - gm.memory.memory_allocated("cpu") == block(2 * 4 * 16 * 16 * 4)
    y.sum().backward()
    g = (to_numpy(x.grad), to_numpy(w.grad))
    # the same step with the relu's output kept alive (a view holds it): the saved output and its input
    x.grad = w.grad = None
    y2, h2, held = _net(x, w, inplace, hold=True)
    assert h2.grad_fn._saved[0].packed.dtype == gm.float32 and y2.grad_fn._saved[0].packed.dtype == gm.float32
    y2.sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), g[0])
    np.testing.assert_array_equal(to_numpy(w.grad), g[1])


def test_against_torch_and_finite_differences():
    torch = pytest.importorskip("torch")
    x = _rng.standard_normal((2, 3, 9, 8))
    w = _rng.standard_normal((4, 3, 3, 3))

    def gm_fn(x, w):
        return F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 3, 2, 1)

    def torch_fn(x, w):
        return torch.nn.functional.max_pool2d(torch.relu(torch.nn.functional.conv2d(x, w, padding=1)), 3, 2, 1)

    check_against_torch(gm_fn, torch_fn, [x, w], atol=1e-10, rtol=1e-10)
    gradcheck(gm_fn, [gm.tensor(x, requires_grad=True), gm.tensor(w, requires_grad=True)])


def test_not_under_hooks_nor_after_an_inplace_write_nor_with_indices():
    x = gm.randn(1, 2, 8, 8, requires_grad=True)
    with gm.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        h = F.relu(x * 1.0)
        y = F.max_pool2d(h, 2)
    assert h.grad_fn._saved[0].packed.dtype == gm.float32  # what the hook made of the output
    h = F.relu(x * 1.0)
    y, idx = F.max_pool2d(h, 2, return_indices=True)
    assert h.grad_fn._saved[0].packed.dtype == gm.float32 and idx.dtype == gm.int64
    h = F.relu(x * 1.0)
    h.add_(1.0)
    y = F.max_pool2d(h, 2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()
    x = gm.randn(1, 2, 16, 16, requires_grad=True)
    h = F.relu(x * 1.0)
    y = F.max_pool2d(h, 12)  # 144 taps do not fit int8: the output is kept (and pooled from)
    assert h.grad_fn._saved[0].packed.dtype == gm.float32


def test_retain_graph_and_checkpoint():
    x = gm.randn(2, 3, 8, 8, requires_grad=True)
    w = gm.randn(4, 3, 3, 3, requires_grad=True)
    y, h, _ = _net(x, w, True)
    del h
    y.sum().backward(retain_graph=True)
    g1 = to_numpy(x.grad)
    y.sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), 2 * g1)
    x.grad = None
    c = gm.utils.checkpoint(lambda x: _net(x, w, True)[0], x)
    assert c.grad_fn._saved[0].unpack is not None  # the checkpoint's placeholder, not taps
    c.sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), g1)


def test_meta_allocates_the_cpu_bytes():
    def step(device):
        x = gm.randn(2, 3, 16, 16, device=device, requires_grad=True)
        w = gm.randn(4, 3, 3, 3, device=device, requires_grad=True)
        gm.memory.reset_peak_memory_stats(device)
        base = gm.memory.memory_allocated(device)
        y, h, _ = _net(x, w, True)
        del h
        y.sum().backward()
        return gm.memory.max_memory_allocated(device) - base, gm.memory.memory_allocated(device) - base
    assert step("meta") == step("cpu")
# The estimator's byte-exactness with this saving (UNet and digits steps, meta == CPU): tests/test_estimate.py.


# ---- a convolution's backward drops its input once the weight's gradient is computed ----------------------------
def _conv_relu_conv_backward(x, w1, w2, retain):
    for t in (x, w1, w2):
        t.grad = None
    h = F.relu(F.conv2d(x, w1, padding=1), inplace=True)
    loss = F.conv2d(h, w2, padding=1).sum()
    relu = h.grad_fn
    del h
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    loss.backward(retain_graph=retain)
    return [to_numpy(t.grad) for t in (x, w1, w2)], gm.memory.max_memory_allocated("cpu") - base, relu


def test_conv_backward_frees_a_relu_output_before_the_input_gradient():
    """conv -> relu -> conv: in the second conv's backward the relu's output (kept by the relu and the conv alone)
    is freed after the weight's gradient, before the input's gradient is allocated; the relu goes on from a bit
    mask. Kept (retain_graph), the graph keeps everything. The gradients are the same bit for bit."""
    x = gm.randn(2, 3, 16, 16, requires_grad=True)
    w1 = gm.randn(8, 3, 3, 3, requires_grad=True)
    w2 = gm.randn(8, 8, 3, 3, requires_grad=True)
    g_keep, p_keep, relu = _conv_relu_conv_backward(x, w1, w2, True)
    assert relu._saved[0].packed.dtype == gm.float32  # retained: the relu still has its output
    g_free, p_free, _ = _conv_relu_conv_backward(x, w1, w2, False)
    for a, b in zip(g_free, g_keep):
        np.testing.assert_array_equal(a, b)
    h_bytes = 2 * 8 * 16 * 16 * 4
    assert p_keep - p_free >= block(h_bytes) - block(h_bytes // 32)  # (the peaks fall at different points)
    # with the input kept by someone else (the caller), nothing is converted and the peak is the retained one's
    h = F.relu(F.conv2d(x, w1, padding=1))
    F.conv2d(h, w2, padding=1).sum().backward()
    assert h.grad_fn._saved is None  # released as usual


def test_release_saved_only_when_the_graph_is_freed():
    from gpumemnet._core.autograd import Function

    class Twice(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2.0

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            ctx.dropped = ctx.release_saved(0)
            return g * 2.0

    a = gm.randn(3, requires_grad=True)
    y = Twice.apply(a)
    y.sum().backward(retain_graph=True)
    assert y.grad_fn.dropped is False and y.grad_fn._saved[0] is not None
    y.sum().backward()
    assert y.grad_fn.dropped is True
    np.testing.assert_array_equal(to_numpy(a.grad), np.full(3, 4.0))
