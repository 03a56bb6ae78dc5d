"""conv2d, conv_transpose2d and linear backward: float64 gradients against finite differences
(tests/gradcheck.py), what each backward keeps, and the threaded passes (OpenMP regions over positions and
channels, 1-3 threads, depthwise wide rows) against the NumPy references."""

import numpy as np
import pytest

import gpumemnet as gm
from conv_util import R, T, _case_ids, _two, ref_conv2d, ref_conv2d_grad_weight, ref_conv_transpose2d, threads
from gpumemnet import _C
from gpumemnet.nn._functional_conv import conv2d, conv_transpose2d, linear
from gradcheck import assert_close, gradcheck, to_numpy


# ---- gradients (float64 finite differences) -----------------------------------------------------------------------
CONV_GRADS = [
    dict(x=(2, 2, 4, 5), w=(3, 2, 3, 3), padding=1),
    dict(x=(1, 2, 5, 5), w=(2, 2, 3, 2), stride=2, dilation=(1, 2), padding=(1, 0)),
    dict(x=(1, 4, 4, 4), w=(4, 2, 2, 2), groups=2, padding="same"),           # grouped, asymmetric 'same'
    dict(x=(2, 3, 4, 4), w=(2, 3, 1, 1)),                                     # pointwise gemm
    dict(x=(1, 3, 5, 4), w=(3, 1, 3, 3), groups=3, padding=1, stride=2),      # depthwise
    dict(x=(1, 2, 4, 4), w=(4, 1, 3, 3), groups=2, dilation=2, padding=2),    # depthwise with multiplier
    dict(x=(2, 4, 4), w=(2, 2, 3, 3), padding=1),                             # unbatched
]


@pytest.mark.parametrize("case", CONV_GRADS, ids=_case_ids)
def test_conv2d_gradcheck(case):
    case = dict(case)
    x, w = T(R(*case.pop("x")), requires_grad=True), T(R(*case.pop("w")), requires_grad=True)
    b = T(R(w.shape[0]), requires_grad=True)
    gradcheck(lambda x, w, b: conv2d(x, w, b, **case), [x, w, b], what=f"conv2d {case}")


@pytest.mark.parametrize("case", [
    dict(x=(1, 2, 3, 3), w=(2, 3, 3, 3), stride=2, padding=1, output_padding=1),
    dict(x=(1, 2, 3, 2), w=(2, 2, 2, 3), stride=(1, 2), dilation=(2, 1)),
    dict(x=(1, 6, 3, 2), w=(6, 2, 3, 3), groups=3, stride=2, padding=1),
    dict(x=(1, 4, 3, 3), w=(4, 1, 3, 3), groups=4, stride=2, output_padding=1),  # depthwise
    dict(x=(1, 2, 3, 3), w=(2, 2, 3, 3), groups=2, padding=1),                    # depthwise, multiplier 2
    dict(x=(2, 3, 3), w=(2, 2, 2, 2), stride=2),                                  # unbatched (C, H, W)
], ids=_case_ids)
def test_conv_transpose2d_gradcheck(case):
    case = dict(case)
    xs, ws = case.pop("x"), case.pop("w")
    x, w = T(R(*xs), requires_grad=True), T(R(*ws), requires_grad=True)
    b = T(R(ws[1] * case.get("groups", 1)), requires_grad=True)
    gradcheck(lambda x, w, b: conv_transpose2d(x, w, b, **case), [x, w, b], what=f"conv_transpose2d {case}")


@pytest.mark.parametrize("xshape", [(3, 4), (2, 2, 4), (4,)])
def test_linear_gradcheck(xshape):
    x, w, b = T(R(*xshape), requires_grad=True), T(R(3, 4), requires_grad=True), T(R(3), requires_grad=True)
    gradcheck(linear, [x, w, b])
    gradcheck(lambda x, w: linear(x, w), [x, w], what="linear without bias")


def test_backward_keeps_only_what_each_gradient_needs():
    """Only the input needs a gradient: the weight is saved, the input is not (and vice versa)."""
    x = T(R(1, 2, 4, 4), requires_grad=True)
    w = T(R(3, 2, 3, 3))
    out = conv2d(x, w)
    saved = out.grad_fn._saved
    assert saved[0] is None and saved[1] is not None
    out.sum().backward()  # an expanded (stride 0) grad_output is copied before gemm reads it
    assert_close(x.grad, ref_conv_transpose2d(np.ones((1, 3, 2, 2)), to_numpy(w)), 1e-12, 1e-12)
    x2 = T(R(1, 2, 4, 4))
    w2 = T(R(3, 2, 3, 3), requires_grad=True)
    out = conv2d(x2, w2)
    saved = out.grad_fn._saved
    assert saved[0] is not None and saved[1] is None
    out.sum().backward()
    assert tuple(w2.grad.shape) == (3, 2, 3, 3)
    y = linear(T(R(2, 4), requires_grad=True), T(R(3, 4)))
    assert y.grad_fn._saved[0] is None


def test_bias_only_gradient():
    x, w = T(R(2, 3, 4, 4)), T(R(5, 3, 3, 3))
    b = T(R(5), requires_grad=True)
    g = R(2, 5, 2, 2)
    (conv2d(x, w, b) * T(g)).sum().backward()
    assert_close(b.grad, g.sum(axis=(0, 2, 3)), 1e-12, 1e-12)


# ---- threaded passes -----------------------------------------------------------------------------------------
# Large enough (over 2**20 multiply-adds) that every pass runs its OpenMP region; batch 1 and few groups make
# the forward split positions and the input-gradient split channels.
THREADED = [
    dict(x=(4, 16, 20, 20), w=(32, 16, 3, 3), padding=1),
    dict(x=(1, 24, 18, 17), w=(36, 8, 3, 3), stride=2, padding=(1, 2), groups=3),
    dict(x=(1, 48, 16, 16), w=(64, 48, 1, 1)),                                  # pointwise
    dict(x=(2, 32, 18, 18), w=(64, 1, 3, 3), padding=1, groups=32),             # depthwise with multiplier
    dict(x=(2, 8, 33, 31), w=(16, 8, 5, 5), dilation=2, padding=4),
]


@pytest.mark.parametrize("nthreads", [1, 2, 3])
@pytest.mark.parametrize("case", THREADED, ids=_case_ids)
def test_threaded_passes_match_references(threads, case, nthreads):
    gm.set_num_threads(nthreads)
    blas_threads = _C._build_info()["blas_threads"]
    case = dict(case)
    x, w = R(*case.pop("x")), R(*case.pop("w"))
    b = R(w.shape[0])
    xt, wt, bt = T(x, requires_grad=True), T(w, requires_grad=True), T(b, requires_grad=True)
    out = conv2d(xt, wt, bt, **case)
    ref = ref_conv2d(x, w, b, **case)
    assert_close(out, ref, 1e-10, 1e-10, what="forward")
    dout = R(*ref.shape)
    out.backward(T(dout))
    st, pd = _two(case.get("stride", 1)), _two(case.get("padding", 0))
    dl = _two(case.get("dilation", 1))
    opad = tuple(x.shape[2 + i] - ((ref.shape[2 + i] - 1) * st[i] - 2 * pd[i] + dl[i] * (w.shape[2 + i] - 1) + 1)
                 for i in range(2))
    dx_ref = ref_conv_transpose2d(dout, w, None, st, pd, opad, case.get("groups", 1), dl)
    assert_close(xt.grad, dx_ref, 1e-10, 1e-10, what="input gradient")
    assert_close(wt.grad, ref_conv2d_grad_weight(x, dout, w.shape, **case), 1e-10, 1e-10, what="weight gradient")
    assert_close(bt.grad, dout.sum(axis=(0, 2, 3)), 1e-10, 1e-10, what="bias gradient")
    # conv_transpose2d runs the same passes the other way round
    y = conv_transpose2d(T(dout), wt.detach(), None, st, pd, opad, case.get("groups", 1), dl)
    assert_close(y, dx_ref, 1e-10, 1e-10, what="conv_transpose2d")
    assert _C._build_info()["blas_threads"] == blas_threads, "OpenBLAS's thread count was not restored"


@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (1, 0, 2), (2, 1, 1), ((1, 3), 2, (2, 1)),
                                                       (1, 5, 1), (1, (0, 3), (1, 3))])
def test_depthwise_wide_rows(stride, padding, dilation):
    """Rows wide enough for the register-blocked interior; padding larger than the kernel span makes the
    input-gradient's flipped padding negative."""
    x, w, b = R(2, 3, 6, 45), R(6, 1, 3, 4), R(6)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=3)
    xt, wt = T(x, requires_grad=True), T(w, requires_grad=True)
    out = conv2d(xt, wt, T(b), **kw)
    ref = ref_conv2d(x, w, b, **kw)
    assert_close(out, ref, 1e-12, 1e-12, what="forward")
    dout = R(*ref.shape)
    out.backward(T(dout))
    st, pd, dl = _two(stride), _two(padding), _two(dilation)
    opad = tuple(x.shape[2 + i] - ((ref.shape[2 + i] - 1) * st[i] - 2 * pd[i] + dl[i] * (w.shape[2 + i] - 1) + 1)
                 for i in range(2))
    assert_close(xt.grad, ref_conv_transpose2d(dout, w, None, st, pd, opad, 3, dl), 1e-12, 1e-12, what="input grad")
    assert_close(wt.grad, ref_conv2d_grad_weight(x, dout, w.shape, **kw), 1e-12, 1e-12, what="weight grad")
    # a strided view of the input: the blocked interior reads with a column step
    big = R(2, 3, 6, 90)
    assert_close(conv2d(T(big)[:, :, :, ::2], T(w), None, **kw), ref_conv2d(big[:, :, :, ::2], w, None, **kw),
                 1e-12, 1e-12, what="strided input")


# (M, Fi, Fo): products large enough for OpenBLAS to thread them; outputs wider than tall and taller than wide
LINEAR_THREADED = [(600, 70, 260), (64, 140, 1000), (513, 129, 131)]


@pytest.mark.parametrize("dtype", [gm.float64, gm.float32], ids=str)
@pytest.mark.parametrize("shape", LINEAR_THREADED, ids=str)
@pytest.mark.parametrize("nthreads", [2, 3])
def test_linear_threaded_matches_numpy_and_repeats(threads, shape, nthreads, dtype):
    """A linear layer at sizes BLAS threads: forward, dx, dw and db against NumPy, with the weight read column-major
    too (a transposed view, passed to BLAS as a transpose flag); the same bits when run again at the same thread
    count; and OpenBLAS's thread count still the one set_num_threads gave."""
    M, Fi, Fo = shape
    x, w, b, g = R(M, Fi), R(Fo, Fi), R(Fo), R(M, Fo)
    tol = 1e-12 if dtype == gm.float64 else 2e-5

    def run(n, w_t):
        gm.set_num_threads(n)
        xt, bt = T(x, dtype, requires_grad=True), T(b, dtype, requires_grad=True)
        wt = T(w.T.copy(), dtype, requires_grad=True) if w_t else T(w, dtype, requires_grad=True)
        out = linear(xt, wt.t() if w_t else wt, bt)
        out.backward(T(g, dtype))
        dw = to_numpy(wt.grad).T if w_t else to_numpy(wt.grad)
        return [to_numpy(out), to_numpy(xt.grad), dw, to_numpy(bt.grad)]
    for w_t in (False, True):
        got = run(nthreads, w_t)
        for a, ref in zip(got, [x @ w.T + b, g @ w, g.T @ x, g.sum(0)]):
            assert_close(a, ref, tol, tol * Fi)
        assert _C._build_info()["blas_threads"] == nthreads, "OpenBLAS's thread count was not restored"
        for a, c in zip(got, run(nthreads, w_t)):
            np.testing.assert_array_equal(a, c)
