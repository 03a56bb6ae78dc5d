"""Convolutions in float16 and bfloat16: stored in half precision and computed in float32, the forward and the
backward reading half inputs directly (against float32 references, 1 and 2 threads, within the workspace bound),
their limits, and the depthwise backward's small float32 scratch."""

import numpy as np
import pytest

import gpumemnet as gm
from conv_util import R, _case_ids, _workspace_peak, ref_conv2d, threads, workspace_limit
from gpumemnet import _C
from gpumemnet.nn._functional_conv import conv2d, conv_transpose2d, linear


@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16])
def test_half_precision_is_stored_half_and_computed_in_float32(dtype):
    rng = np.random.default_rng(0)
    x32 = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w32 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    x = gm.tensor(x32).to(dtype).requires_grad_()
    w = gm.tensor(w32).to(dtype).requires_grad_()
    out = conv2d(x, w, padding=1)
    assert out.dtype == dtype
    ref = conv2d(x.detach().float(), w.detach().float(), padding=1).to(dtype).float().numpy()
    np.testing.assert_array_equal(out.detach().float().numpy(), ref)  # float32 arithmetic, rounded once
    out.float().sum().backward()
    assert x.grad.dtype == dtype and w.grad.dtype == dtype
    y = linear(gm.tensor(x32.reshape(12, 32)).to(dtype),
               gm.tensor(rng.standard_normal((5, 32)).astype(np.float32)).to(dtype))
    assert y.dtype == dtype and tuple(y.shape) == (12, 5)


HALF_CASES = [
    dict(x=(2, 3, 9, 8), w=(4, 3, 3, 3), padding=1),
    dict(x=(1, 6, 11, 10), w=(9, 2, 3, 2), stride=(2, 1), padding=(1, 0), groups=3),
    dict(x=(2, 8, 7, 7), w=(5, 8, 1, 1)),                                     # pointwise: im2col widens the input
    dict(x=(1, 4, 12, 12), w=(6, 4, 3, 3), dilation=2, padding="same"),
    dict(x=(2, 16, 34, 33), w=(16, 16, 3, 3), padding=1),                      # threaded
]


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16])
@pytest.mark.parametrize("case", HALF_CASES, ids=_case_ids)
def test_half_forward_reads_half_directly(threads, workspace_limit, case, dtype, nthreads):
    """_C.conv2d on float16/bfloat16 operands (a transposed view as the input, a bias): float32 arithmetic over
    the widened values, rounded once; the workspace is the widened weight and bias plus per-thread float32 tiles,
    far less than a float32 copy of the input, and meta allocates the same."""
    gm.set_num_threads(nthreads)
    case = dict(case)
    xs, ws = case.pop("x"), case.pop("w")
    x = gm.tensor(R(xs[0], xs[1], xs[3], xs[2]).astype(np.float32)).to(dtype).transpose(2, 3)
    w = gm.tensor(R(*ws).astype(np.float32)).to(dtype)
    b = gm.tensor(R(ws[0]).astype(np.float32)).to(dtype)
    gm.memory.reset_peak_memory_stats("cpu")
    out = _C.conv2d(x, w, b, **case)
    peak = _workspace_peak()
    assert out.dtype == dtype
    wide = _C.conv2d(x.float(), w.float(), b.float(), **case)
    # float32 arithmetic rounded once: the float32 conv's result rounded to dt, to within one unit in the last
    # place (the half passes tile more finely, and OpenBLAS's float32 sums can differ in the last bit with the
    # gemm's width, which may land a value on the other side of a rounding boundary). The float32 conv of a 3x3
    # "same" layer runs the direct kernel (another order of the sums), so a value that cancels to near zero may
    # differ by float32's rounding of the sum's terms: atol 1e-5, far below half precision's step at these values.
    ulp = 2.0 ** -10 if dtype == gm.float16 else 2.0 ** -7
    np.testing.assert_allclose(out.float().numpy(), wide.to(dtype).float().numpy(), rtol=ulp, atol=1e-5)
    ref = ref_conv2d(x.float().numpy().astype(np.float64), w.float().numpy().astype(np.float64),
                     b.float().numpy().astype(np.float64), **case)
    tol = 2.0 ** -8 if dtype == gm.float16 else 2.0 ** -6
    np.testing.assert_allclose(out.float().numpy(), ref, atol=1e-3, rtol=tol)
    K, CRS = ws[0], ws[1] * ws[2] * ws[3]
    fixed = -(-(K * CRS + K) * 4 // 64) * 64
    assert fixed < peak < fixed + nthreads * (CRS + K) * 4 * out.shape[2] * out.shape[3] + 512
    md = lambda t: gm.empty(tuple(t.shape), dtype=dtype, device="meta")  # noqa: E731
    gm.memory.reset_peak_memory_stats("meta")
    _C.conv2d(md(x), md(w), md(b), **case)
    assert gm.memory.memory_stats("meta")["by_category"]["workspace"]["peak"] == peak
    # a limit that leaves room for a few columns only: many tiles. Not necessarily the same bits: OpenBLAS's
    # float32 sums depend on the gemm's width (its small-matrix kernels), as they do for float32 operands.
    _C.set_conv_workspace_limit(fixed + 40 * (CRS + K) * 4)
    np.testing.assert_allclose(_C.conv2d(x, w, b, **case).float().numpy(), ref, atol=1e-3, rtol=tol)


def test_half_forward_limits_and_unsupported_paths(workspace_limit):
    x = gm.zeros((1, 4, 6, 6), dtype=gm.float16)
    _C.set_conv_workspace_limit(100)  # less than the widened weight
    with pytest.raises(RuntimeError, match=r"workspace limit \(100 bytes"):
        _C.conv2d(x, gm.zeros((4, 4, 3, 3), dtype=gm.float16))
    _C.set_conv_workspace_limit(64 << 20)
    # depthwise runs in half precision too (kernels/cpu/conv_depthwise.c; tests/test_bf16_depthwise.py): the C op
    # takes the half operands as they are
    out = _C.conv2d(x, gm.ones((4, 1, 3, 3), dtype=gm.float16), padding=1, groups=4)
    assert out.dtype == gm.float16 and float(out.float().sum()) == 0
    # the half backward needs its float32 weight (gradient) and one set of tile buffers
    _C.set_conv_workspace_limit(4 * 4 * 9 * 4)
    with pytest.raises(RuntimeError, match=r"conv2d_backward: the convolution workspace limit \(576 bytes"):
        _C.conv2d_backward(gm.zeros((1, 4, 4, 4), dtype=gm.float16), x, gm.zeros((4, 4, 3, 3), dtype=gm.float16),
                           (1, 1), (0, 0), (1, 1), 1, (True, True, False))
    _C.set_conv_workspace_limit(64 << 20)
    # no input channels: the output is the bias
    e = _C.conv2d(gm.zeros((2, 0, 3, 3), dtype=gm.bfloat16), gm.zeros((3, 0, 1, 1), dtype=gm.bfloat16),
                  gm.tensor(np.array([1, 2, 3], np.float32)).to(gm.bfloat16))
    np.testing.assert_array_equal(e.float().numpy(), np.broadcast_to(np.array([1, 2, 3.])[None, :, None, None],
                                                                       (2, 3, 3, 3)))


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16])
@pytest.mark.parametrize("case", HALF_CASES, ids=_case_ids)
def test_half_backward_reads_half_directly(threads, workspace_limit, case, dtype, nthreads):
    """_C.conv2d_backward and conv_transpose2d(_backward) on float16/bfloat16 operands: all three gradients within
    half precision of the float64 ones over the same (rounded) values; the workspace is the widened weight (or the
    float32 weight-gradient) plus per-thread tiles and at most 256 KiB of float32 planes per thread — less than a
    float32 copy of the input once the input is larger than that — and meta allocates the same."""
    gm.set_num_threads(nthreads)
    case = dict(case)
    xs, ws = case.pop("x"), case.pop("w")
    half = lambda a: gm.tensor(a.astype(np.float32)).to(dtype)  # noqa: E731
    wide = lambda t: t.float().numpy().astype(np.float64)  # noqa: E731
    x = half(R(xs[0], xs[1], xs[3], xs[2])).transpose(2, 3)  # read through its strides
    w = half(R(*ws))
    out_shape = tuple(_C.conv2d(x, w, **case).shape)
    g = half(R(*out_shape))
    args = (case.get("stride", 1), case.get("padding", 0), case.get("dilation", 1), case.get("groups", 1))
    if isinstance(args[1], str):
        return  # the C backward takes explicit padding; 'same' is resolved in Python
    args = tuple((a, a) if isinstance(a, int) and i < 3 else a for i, a in enumerate(args))
    gm.memory.reset_peak_memory_stats("cpu")
    dx, dw, db = _C.conv2d_backward(g, x, w, *args, (True, True, True))
    peak = _workspace_peak()
    assert dx.dtype == dw.dtype == db.dtype == dtype
    x64, w64, g64 = (gm.tensor(wide(t)) for t in (x, w, g))
    refs = _C.conv2d_backward(g64, x64, w64, *args, (True, True, True))
    tol = 2.0 ** -8 if dtype == gm.float16 else 2.0 ** -6
    for got, ref, what in zip((dx, dw, db), refs, ("input", "weight", "bias")):
        ref = ref.numpy()
        np.testing.assert_allclose(got.float().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max(), err_msg=what)
    K, CRS = ws[0], ws[1] * ws[2] * ws[3]
    assert peak >= K * CRS * 4
    assert peak <= -(-(K * CRS + xs[1]) * 4 // 64) * 64 + nthreads * (
        (256 << 10) + 4 * (CRS + K) * out_shape[2] * out_shape[3]) + 512
    if x.numel() * 4 > nthreads * (256 << 10) + 4 * (K * CRS + xs[1]) + 4 * nthreads * (CRS + K) * 256:
        assert peak < x.numel() * 4  # less than a float32 copy of the input
    md = lambda t: gm.empty(tuple(t.shape), dtype=dtype, device="meta")  # noqa: E731
    gm.memory.reset_peak_memory_stats("meta")
    _C.conv2d_backward(md(g), md(x), md(w), *args, (True, True, True))
    assert gm.memory.memory_stats("meta")["by_category"]["workspace"]["peak"] == peak
    # conv_transpose2d of g with w is conv2d's input-gradient; its backward gives the gradients of g and w
    groups = args[3]
    up = _C.conv_transpose2d(g, w, None, args[0], args[1], (0, 0), groups, args[2])
    up_ref = _C.conv_transpose2d(g64, w64, None, args[0], args[1], (0, 0), groups, args[2]).numpy()
    np.testing.assert_allclose(up.float().numpy(), up_ref, rtol=tol, atol=tol * np.abs(up_ref).max())
    dup = half(R(*up.shape))
    got = _C.conv_transpose2d_backward(dup, g, w, args[0], args[1], (0, 0), groups, args[2], (True, True, False))
    ref = _C.conv_transpose2d_backward(gm.tensor(wide(dup)), g64, w64, args[0], args[1], (0, 0), groups, args[2],
                                       (True, True, False))
    for a, b in zip(got[:2], ref[:2]):
        b = b.numpy()
        np.testing.assert_allclose(a.float().numpy(), b, rtol=tol, atol=tol * np.abs(b).max())
    # lower limits, down to the least that still runs: fewer threads, smaller tiles, the same gradients within
    # tolerance; below it a clear error
    limit = peak
    while True:
        limit = limit * 3 // 4
        _C.set_conv_workspace_limit(limit)
        try:
            dx2, dw2, _ = _C.conv2d_backward(g, x, w, *args, (True, True, False))
        except RuntimeError as e:
            assert "workspace limit" in str(e)
            break
        for a, b in ((dx2, refs[0]), (dw2, refs[1])):
            b = b.numpy()
            np.testing.assert_allclose(a.float().numpy(), b, rtol=tol, atol=tol * np.abs(b).max())
    assert limit < peak * 3 // 4 or peak < 4 * K * CRS * 2


@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16])
@pytest.mark.parametrize("transposed", [False, True])
def test_half_depthwise_backward_needs_no_float32_copy(dtype, transposed):
    """Depthwise gradients in half precision (kernels/cpu/conv_depthwise.c: planes widened per thread, float32 sums)
    equal float32 ones to half precision, and their float32 scratch is far from one item's, let alone the batch's
    (it was one item's when they ran item by item in float32)."""
    rng = np.random.default_rng(1)
    n, c, h = 8, 4, 12
    x32 = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w32 = rng.standard_normal((c, 1, 3, 3) if transposed else (2 * c, 1, 3, 3)).astype(np.float32)
    fn = conv_transpose2d if transposed else conv2d
    x = gm.tensor(x32).to(dtype).requires_grad_()
    w = gm.tensor(w32).to(dtype).requires_grad_()
    out = fn(x, w, padding=1, groups=c)
    g = gm.tensor(rng.standard_normal(tuple(out.shape)).astype(np.float32)).to(dtype)
    gm.memory.reset_peak_memory_stats("cpu")
    ws0 = gm.memory.memory_stats("cpu")["by_category"]["workspace"]["current"]
    out.backward(g)
    ws_peak = gm.memory.memory_stats("cpu")["by_category"]["workspace"]["peak"] - ws0
    assert x.grad.dtype == dtype and w.grad.dtype == dtype
    xr = gm.tensor(x.detach().float().numpy(), requires_grad=True)
    wr = gm.tensor(w.detach().float().numpy(), requires_grad=True)
    out_r, g_r = fn(xr, wr, padding=1, groups=c), g.float()
    gm.memory.reset_peak_memory_stats("cpu")
    out_r.backward(g_r)
    ws_peak_f32 = gm.memory.memory_stats("cpu")["by_category"]["workspace"]["peak"] - ws0
    tol = 1e-2 if dtype == gm.bfloat16 else 2e-3
    for got, ref in ((x.grad, xr.grad), (w.grad, wr.grad)):
        ref = ref.numpy()
        np.testing.assert_allclose(got.float().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max())
    # beyond what the float32 backward itself needs: float32 copies of one item of x, of its gradient and of the
    # output gradient, the widened weight and the float32 weight gradients (each block rounded up to 512 B) —
    # nothing the size of the whole batch
    x_item, g_item = x32.nbytes // n, 4 * g.numel() // n
    assert ws_peak <= ws_peak_f32 + 2 * x_item + g_item + 4 * max(512, w32.nbytes) + 3 * 512
    assert ws_peak < ws_peak_f32 + x32.nbytes  # less than one float32 copy of the input
