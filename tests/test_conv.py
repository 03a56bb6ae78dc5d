"""conv2d, conv_transpose2d and linear: forward against NumPy references written here, float64 gradients against
finite differences (tests/gradcheck.py), the workspace bound in exact allocator bytes, meta-device shapes and
allocations, every error path, and PyTorch where it is installed.

The conv2d reference is a direct sum over kernel taps on a zero-padded copy of the input (no im2col, no gemm), so
it shares nothing with the kernels under test. conv_transpose2d has its own scatter reference and is also checked
as conv2d's adjoint: <conv2d(x, w), y> == <x, conv_transpose2d(y, w)>."""
import gc
import itertools

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn._functional_conv import conv2d, conv_transpose2d, linear
from gradcheck import assert_close, gradcheck, to_numpy

_rng = np.random.default_rng(20240612)


def R(*shape):
    return _rng.standard_normal(shape)


def T(a, dtype=None, requires_grad=False):
    return gm.tensor(a, dtype=dtype, requires_grad=requires_grad)


# ---- NumPy references -------------------------------------------------------------------------------------------
def _pads(padding, k, d):
    """(top, bottom, left, right) for an int/pair/'same'/'valid' padding, as PyTorch resolves it."""
    if padding == "valid":
        return (0, 0, 0, 0)
    if padding == "same":
        th, tw = d[0] * (k[0] - 1), d[1] * (k[1] - 1)
        return (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    p = (padding, padding) if isinstance(padding, int) else padding
    return (p[0], p[0], p[1], p[1])


def _two(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def ref_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """out[n, k, p, q] = b[k] + sum_{c, r, s} w[k, c, r, s] * xpad[n, g*Cg + c, p*sh + r*dh, q*sw + s*dw]."""
    st, dl = _two(stride), _two(dilation)
    N, C, H, W = x.shape
    K, Cg, Rk, Sk = w.shape
    pt, pb, pl, pr = _pads(padding, (Rk, Sk), dl)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    P = (H + pt + pb - dl[0] * (Rk - 1) - 1) // st[0] + 1
    Q = (W + pl + pr - dl[1] * (Sk - 1) - 1) // st[1] + 1
    out = np.zeros((N, K, P, Q), np.float64)
    Kg = K // groups
    for g in range(groups):
        xs = xp[:, g * Cg:(g + 1) * Cg]
        for r in range(Rk):
            for s in range(Sk):
                h0, w0 = r * dl[0], s * dl[1]
                patch = xs[:, :, h0:h0 + st[0] * (P - 1) + 1:st[0], w0:w0 + st[1] * (Q - 1) + 1:st[1]]
                out[:, g * Kg:(g + 1) * Kg] += np.einsum("nchw,kc->nkhw", patch, w[g * Kg:(g + 1) * Kg, :, r, s])
    if b is not None:
        out += b[None, :, None, None]
    return out


def ref_conv_transpose2d(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Scatter: every input element adds x[n, ci, h, w] * w[ci, co, r, s] at (h*sh - ph + r*dh, w*sw - pw + s*dw)
    of output channel group*Cog + co; the result is cropped by the padding."""
    st, pd, op, dl = _two(stride), _two(padding), _two(output_padding), _two(dilation)
    N, Ci, H, W = x.shape
    _, Cog, Rk, Sk = w.shape
    Hf = (H - 1) * st[0] + dl[0] * (Rk - 1) + 1 + op[0]
    Wf = (W - 1) * st[1] + dl[1] * (Sk - 1) + 1 + op[1]
    full = np.zeros((N, Cog * groups, Hf, Wf), np.float64)
    Cig = Ci // groups
    for g in range(groups):
        xs = x[:, g * Cig:(g + 1) * Cig]
        for r in range(Rk):
            for s in range(Sk):
                h0, w0 = r * dl[0], s * dl[1]
                rows = slice(h0, h0 + st[0] * (H - 1) + 1, st[0])
                cols = slice(w0, w0 + st[1] * (W - 1) + 1, st[1])
                wg = w[g * Cig:(g + 1) * Cig, :, r, s]
                full[:, g * Cog:(g + 1) * Cog, rows, cols] += np.einsum("nchw,co->nohw", xs, wg)
    out = full[:, :, pd[0]:Hf - pd[0], pd[1]:Wf - pd[1]]
    if b is not None:
        out = out + b[None, :, None, None]
    return out


# ---- conv2d forward -------------------------------------------------------------------------------------------
# (C, K, groups): plain, grouped, depthwise, depthwise with a channel multiplier
CHANNELS = [(3, 4, 1), (4, 6, 2), (3, 3, 3), (3, 6, 3)]
KERNELS = [(3, 3), (1, 1), (2, 3)]
STRIDES = [1, 2, (2, 1)]
PADDINGS = [0, 1, (2, 0), "same", "valid"]
DILATIONS = [1, 2, (1, 2)]


@pytest.mark.parametrize("channels", CHANNELS, ids=lambda c: f"C{c[0]}K{c[1]}g{c[2]}")
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: f"k{k[0]}x{k[1]}")
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_conv2d_forward_matches_direct_reference(channels, kernel, bias):
    C, K, groups = channels
    x = R(2, C, 7, 6)
    w = R(K, C // groups, *kernel)
    b = R(K) if bias else None
    for stride, padding, dilation in itertools.product(STRIDES, PADDINGS, DILATIONS):
        if padding == "same" and stride != 1:
            continue  # rejected, tested with the errors
        what = f"stride={stride} padding={padding} dilation={dilation}"
        ref = ref_conv2d(x, w, b, stride, padding, dilation, groups)
        got = conv2d(T(x), T(w), None if b is None else T(b), stride, padding, dilation, groups)
        assert_close(got, ref, 1e-12, 1e-12, what=f"float64 {what}")
        got32 = conv2d(T(x, gm.float32), T(w, gm.float32), None if b is None else T(b, gm.float32), stride, padding,
                       dilation, groups)
        assert got32.dtype == gm.float32
        assert_close(got32, ref, 1e-4, 1e-4, what=f"float32 {what}")


@pytest.mark.parametrize("case", [
    dict(x=(1, 8, 9, 9), w=(16, 8, 3, 3), stride=1, padding=1),               # a ResNet-like 3x3
    dict(x=(2, 3, 15, 13), w=(5, 3, 7, 7), stride=2, padding=3),              # a stem
    dict(x=(1, 6, 5, 5), w=(6, 6, 5, 5), padding="same", dilation=2),         # dilated, padding larger than the image
    dict(x=(2, 4, 4, 4), w=(3, 4, 4, 4), padding="same"),                     # even kernel: asymmetric 'same'
    dict(x=(3, 2, 1, 9), w=(2, 2, 1, 3), stride=(1, 3)),                      # a single row
    dict(x=(2, 8, 6, 6), w=(8, 1, 3, 3), stride=2, padding=1, groups=8),      # strided depthwise
    dict(x=(1, 4, 6, 5), w=(8, 1, 2, 3), padding=(0, 2), dilation=(2, 1), groups=4),
    dict(x=(2, 6, 6, 6), w=(4, 6, 1, 1), stride=2),                           # strided 1x1: im2col, not a gemm
    dict(x=(2, 6, 6, 6), w=(4, 6, 1, 1), padding=1),                          # padded 1x1
    dict(x=(2, 6, 5, 5), w=(9, 2, 3, 3), groups=3, bias=False),
], ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items() if k in ("x", "w")))
def test_conv2d_forward_shapes(case):
    case = dict(case)
    xs, ws, with_bias = case.pop("x"), case.pop("w"), case.pop("bias", True)
    x, w = R(*xs), R(*ws)
    b = R(ws[0]) if with_bias else None
    ref = ref_conv2d(x, w, b, **case)
    got = conv2d(T(x), T(w), None if b is None else T(b), **case)
    assert tuple(got.shape) == ref.shape
    assert_close(got, ref, 1e-12, 1e-12)


def test_conv2d_unbatched_and_empty_batch():
    x, w, b = R(3, 6, 5), R(4, 3, 3, 3), R(4)
    got = conv2d(T(x), T(w), T(b), padding=1)
    assert tuple(got.shape) == (4, 6, 5)
    assert_close(got, ref_conv2d(x[None], w, b, padding=1)[0], 1e-12, 1e-12)
    empty = conv2d(gm.zeros((0, 3, 6, 5), dtype=gm.float64), T(w), T(b), padding=1)
    assert tuple(empty.shape) == (0, 4, 6, 5)


def test_conv2d_reads_non_contiguous_input_in_place():
    """A channels-last (permuted) input and a strided slice give the same result as their contiguous copies;
    the input is never copied (workspace stays at the column buffer, not an input-sized copy)."""
    w, b = R(5, 4, 3, 3), R(5)
    nhwc = T(R(2, 9, 8, 4))
    x = nhwc.permute(0, 3, 1, 2)
    assert not x.is_contiguous()
    xc = np.ascontiguousarray(to_numpy(x))
    for wshape, kw in (((5, 4, 3, 3), dict(padding=1)), ((5, 4, 1, 1), {}), ((4, 1, 3, 3), dict(groups=4))):
        wt = R(*wshape)
        got = conv2d(x, T(wt), T(b[:wshape[0]]), **kw)
        assert_close(got, ref_conv2d(xc, wt, b[:wshape[0]], **kw), 1e-12, 1e-12, what=str(wshape))
    big = R(2, 8, 12, 10)
    sl = T(big)[:, 1::2, ::2, 1:9]
    assert_close(conv2d(sl, T(w), T(b), stride=2), ref_conv2d(big[:, 1::2, ::2, 1:9], w, b, stride=2), 1e-12, 1e-12)


def test_conv2d_non_contiguous_weight_and_bias():
    x = R(2, 3, 6, 6)
    w_t = R(3, 4, 3, 3)  # stored (C, K, ...): its transpose is a non-contiguous (K, C, ...) weight
    w = T(w_t).transpose(0, 1)
    b = T(R(8))[::2]
    got = conv2d(T(x), w, b, padding=1)
    assert_close(got, ref_conv2d(x, w_t.transpose(1, 0, 2, 3), to_numpy(b), padding=1), 1e-12, 1e-12)


# ---- conv_transpose2d ---------------------------------------------------------------------------------------------
TRANSPOSED = [
    dict(x=(2, 4, 5, 4), w=(4, 3, 3, 3)),
    dict(x=(2, 4, 5, 4), w=(4, 3, 3, 3), stride=2, padding=1, output_padding=1),
    dict(x=(1, 4, 3, 5), w=(4, 2, 2, 3), stride=(2, 3), padding=(0, 1), output_padding=(1, 2)),
    dict(x=(2, 4, 4, 4), w=(4, 3, 3, 3), dilation=2, padding=2, output_padding=1, stride=1),
    dict(x=(2, 6, 4, 3), w=(6, 2, 3, 3), groups=3, stride=2, padding=1),
    dict(x=(2, 4, 5, 5), w=(4, 1, 3, 3), groups=4, stride=2, padding=1, output_padding=1),  # depthwise
    dict(x=(2, 4, 5, 5), w=(4, 2, 3, 3), groups=4, padding=1),                              # depthwise, multiplier
    dict(x=(2, 6, 4, 4), w=(6, 5, 1, 1)),                                                   # pointwise: a gemm
    dict(x=(2, 3, 4, 4), w=(3, 2, 4, 4), stride=2, padding=1, bias=False),                  # DCGAN upsampling
]


def _case_ids(c):
    return "-".join(f"{k}{v}" for k, v in c.items())


@pytest.mark.parametrize("case", TRANSPOSED, ids=_case_ids)
def test_conv_transpose2d_forward_matches_reference(case):
    case = dict(case)
    xs, ws, with_bias = case.pop("x"), case.pop("w"), case.pop("bias", True)
    x, w = R(*xs), R(*ws)
    b = R(ws[1] * case.get("groups", 1)) if with_bias else None
    ref = ref_conv_transpose2d(x, w, b, **case)
    got = conv_transpose2d(T(x), T(w), None if b is None else T(b), **case)
    assert tuple(got.shape) == ref.shape
    assert_close(got, ref, 1e-12, 1e-12)
    got32 = conv_transpose2d(T(x, gm.float32), T(w, gm.float32), None if b is None else T(b, gm.float32), **case)
    assert_close(got32, ref, 1e-4, 1e-4, what="float32")


@pytest.mark.parametrize("channels", CHANNELS, ids=lambda c: f"C{c[0]}K{c[1]}g{c[2]}")
def test_conv_transpose2d_is_the_adjoint_of_conv2d(channels):
    C, K, groups = channels
    for stride, padding, dilation, kernel in itertools.product((1, 2, (1, 2)), (0, 1, (1, 0)), (1, 2), KERNELS):
        x, w = R(2, C, 7, 6), R(K, C // groups, *kernel)
        y_shape = ref_conv2d(x, w, None, stride, padding, dilation, groups).shape
        # the output_padding that makes conv_transpose2d's output x's shape again
        st, pd, dl = _two(stride), _two(padding), _two(dilation)
        opad = tuple(x.shape[2 + i] - ((y_shape[2 + i] - 1) * st[i] - 2 * pd[i] + dl[i] * (kernel[i] - 1) + 1)
                     for i in range(2))
        if not all(0 <= o < max(s, d) for o, s, d in zip(opad, st, dl)):
            continue  # that x shape is not reachable with this geometry
        y = R(*y_shape)
        lhs = np.sum(to_numpy(conv2d(T(x), T(w), None, stride, padding, dilation, groups)) * y)
        xt = conv_transpose2d(T(y), T(w), None, stride, padding, opad, groups, dilation)
        assert tuple(xt.shape) == x.shape
        rhs = np.sum(x * to_numpy(xt))
        assert abs(lhs - rhs) <= 1e-10 * (1 + abs(lhs)), f"{stride} {padding} {dilation} {kernel}: {lhs} != {rhs}"


def test_conv_transpose2d_unbatched():
    x, w = R(4, 3, 3), R(4, 2, 3, 3)
    got = conv_transpose2d(T(x), T(w), None, stride=2)
    assert tuple(got.shape) == (2, 7, 7)
    assert_close(got, ref_conv_transpose2d(x[None], w, stride=2)[0], 1e-12, 1e-12)


# ---- linear -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("xshape", [(5, 4), (2, 3, 4), (4,), (0, 4), (2, 0, 4)])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_linear_matches_numpy(xshape, bias):
    x, w = R(*xshape), R(3, 4)
    b = R(3) if bias else None
    ref = x @ w.T + (b if bias else 0)
    got = linear(T(x), T(w), None if b is None else T(b))
    assert tuple(got.shape) == ref.shape
    assert_close(got, ref, 1e-12, 1e-12)
    got32 = linear(T(x, gm.float32), T(w, gm.float32), None if b is None else T(b, gm.float32))
    assert_close(got32, ref, 1e-5, 1e-5, what="float32")


def test_linear_strided_operands_and_zero_features():
    x = T(R(4, 6))
    w = T(R(4, 3))
    got = linear(x.t(), w.t())  # column-major input and weight: BLAS transpose flags, no copies
    assert_close(got, to_numpy(x).T @ to_numpy(w), 1e-12, 1e-12)
    x3 = T(R(3, 4, 5)).permute(1, 0, 2)  # (4, 3, 5): leading dims do not collapse -> a copy
    w2 = R(2, 5)
    assert_close(linear(x3, T(w2)), to_numpy(x3) @ w2.T, 1e-12, 1e-12)
    b = R(2)
    assert_close(linear(gm.zeros((3, 0), dtype=gm.float64), gm.zeros((2, 0), dtype=gm.float64), T(b)),
                 np.broadcast_to(b, (3, 2)), 0, 0)


def test_linear_allocates_only_its_output():
    """The bias is written into the output and the gemm adds onto it: no output-sized temporary."""
    x, w, b = T(R(64, 32), gm.float32), T(R(48, 32), gm.float32), T(R(48), gm.float32)
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    out = linear(x, w, b)
    assert gm.memory.max_memory_allocated("cpu") - base == 64 * 48 * 4
    del out


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
def ref_conv2d_grad_weight(x, dout, wshape, stride=1, padding=0, dilation=1, groups=1):
    """dw[k, c, r, s] = sum_{n, p, q} dout[n, k, p, q] * xpad[n, g*Cg + c, p*sh + r*dh, q*sw + s*dw]."""
    st, dl = _two(stride), _two(dilation)
    K, Cg, Rk, Sk = wshape
    pt, pb, pl, pr = _pads(padding, (Rk, Sk), dl)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    P, Q = dout.shape[2:]
    dw = np.zeros(wshape)
    Kg = K // groups
    for g in range(groups):
        for r in range(Rk):
            for s in range(Sk):
                h0, w0 = r * dl[0], s * dl[1]
                patch = xp[:, g * Cg:(g + 1) * Cg, h0:h0 + st[0] * (P - 1) + 1:st[0], w0:w0 + st[1] * (Q - 1) + 1:st[1]]
                dw[g * Kg:(g + 1) * Kg, :, r, s] = np.einsum("nkhw,nchw->kc", dout[:, g * Kg:(g + 1) * Kg], patch)
    return dw


@pytest.fixture
def threads():
    prev = gm.get_num_threads()
    yield
    gm.set_num_threads(prev)


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


# ---- the workspace bound --------------------------------------------------------------------------------------
@pytest.fixture
def workspace_limit():
    prev = _C.get_conv_workspace_limit()
    yield
    _C.set_conv_workspace_limit(prev)


def _workspace_peak():
    return gm.memory.memory_stats("cpu")["by_category"]["workspace"]["peak"]


def test_default_workspace_limit_is_64_mib():
    assert _C.get_conv_workspace_limit() == 64 << 20


@pytest.mark.parametrize("dtype", [gm.float32, gm.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", [
    dict(x=(3, 6, 11, 9), w=(6, 3, 3, 3), groups=2, padding=1),
    dict(x=(2, 4, 10, 10), w=(6, 4, 3, 2), stride=2, dilation=(2, 1), padding=(2, 1)),
    dict(x=(2, 16, 24, 24), w=(32, 16, 3, 3), padding=1, threads=2),  # threaded: one buffer per thread
], ids=["grouped3x3", "strided", "threaded"])
def test_workspace_bound_gives_the_same_results(workspace_limit, threads, case, dtype):
    case = dict(case)
    gm.set_num_threads(case.pop("threads", 1))
    x, w = R(*case.pop("x")), R(*case.pop("w"))
    column = w.shape[1] * w.shape[2] * w.shape[3] * (4 if dtype == gm.float32 else 8)

    def run():
        xt, wt = T(x, dtype, requires_grad=True), T(w, dtype, requires_grad=True)
        out = conv2d(xt, wt, **case)
        gm.memory.reset_peak_memory_stats("cpu")
        out.backward(T(np.ones(out.shape) * 0.5, dtype))
        return to_numpy(out), to_numpy(xt.grad), to_numpy(wt.grad)

    full = run()
    # Every output element is the same dot product whatever the tiling, but OpenBLAS picks its kernel by matrix
    # size (small-matrix kernels for narrow tiles), and the weight gradient sums over tiles: results agree to
    # rounding, not bit for bit.
    tol = 1e-5 if dtype == gm.float32 else 1e-12
    for limit in (column, 3 * column + 17, 40 * column):
        _C.set_conv_workspace_limit(limit)
        gm.memory.reset_peak_memory_stats("cpu")
        xt, wt = T(x, dtype), T(w, dtype)
        out = to_numpy(conv2d(xt, wt, **case))
        assert _workspace_peak() <= limit + 512, f"forward: workspace peak {_workspace_peak()} > limit {limit}"
        tiled = run()
        assert _workspace_peak() <= limit + 512, f"backward: workspace peak {_workspace_peak()} > limit {limit}"
        for k, (a, b) in enumerate(zip((out,) + tiled[1:], full)):
            # one-column tiles make the float32 weight gradient a sum of ~1000 rank-1 updates, rounded each time
            t = tol * (20 if k == 2 else 1)
            assert_close(a, b, t, t, what=f"{('output', 'input gradient', 'weight gradient')[k]}, limit {limit}")


def test_transposed_conv_respects_the_workspace_bound(workspace_limit):
    x, w = R(2, 6, 5, 5), R(6, 4, 3, 3)
    ref = ref_conv_transpose2d(x, w, None, stride=2, padding=1)
    limit = 4 * 3 * 3 * 8 * 7  # seven columns
    _C.set_conv_workspace_limit(limit)
    gm.memory.reset_peak_memory_stats("cpu")
    xt, wt = T(x, requires_grad=True), T(w, requires_grad=True)
    out = conv_transpose2d(xt, wt, None, stride=2, padding=1)
    out.sum().backward()
    assert _workspace_peak() <= limit + 512
    assert_close(out, ref, 1e-12, 1e-12)


def test_pointwise_and_depthwise_need_no_workspace():
    for w in (R(8, 6, 1, 1), R(6, 1, 3, 3), R(12, 1, 3, 3)):
        x = T(R(2, 6, 8, 8), requires_grad=True)
        groups = 1 if w.shape[2] == 1 else 6
        gm.memory.reset_peak_memory_stats("cpu")
        out = conv2d(x, T(w, requires_grad=True), groups=groups, padding=w.shape[2] // 2)
        out.backward(gm.ones(out.shape, dtype=out.dtype))  # contiguous: nothing to copy for gemm
        assert _workspace_peak() == 0, f"weight {w.shape}: workspace peak {_workspace_peak()}"


def test_workspace_smaller_than_one_column_is_an_error(workspace_limit):
    _C.set_conv_workspace_limit(100)
    with pytest.raises(RuntimeError, match="cannot hold one im2col column of 108 bytes"):
        conv2d(gm.zeros((1, 3, 5, 5)), gm.zeros((2, 3, 3, 3)))
    conv2d(gm.zeros((1, 3, 5, 5)), gm.zeros((2, 3, 1, 1)))  # the pointwise gemm needs none
    with pytest.raises(ValueError, match="non-negative number of bytes"):
        _C.set_conv_workspace_limit(-1)


def test_no_allocation_outlives_its_op(workspace_limit):
    """Outputs, copies and workspaces are all released: after every path (non-contiguous operands, expanded
    gradients, an error raised after copies were made) the allocator holds exactly what the test holds."""
    gc.collect()
    base = gm.memory.memory_allocated("cpu")
    x = T(R(2, 6, 7, 5), requires_grad=True)
    w = T(R(6, 4, 3, 3)).transpose(0, 1)  # non-contiguous: copied
    w.requires_grad = True
    conv2d(x, w, padding=1, groups=1).sum().backward()
    conv_transpose2d(x.transpose(2, 3), T(R(6, 2, 3, 3), requires_grad=True), stride=2, groups=2).sum().backward()
    linear(x.permute(0, 2, 3, 1), T(R(4, 6), requires_grad=True), T(R(4), requires_grad=True)).sum().backward()
    _C.set_conv_workspace_limit(64)
    with pytest.raises(RuntimeError, match="cannot hold one im2col column"):
        conv2d(x.detach(), w.detach())
    del x, w
    gc.collect()
    assert gm.memory.memory_allocated("cpu") == base


# ---- meta device ------------------------------------------------------------------------------------------------
def test_meta_shapes_and_allocations(workspace_limit, threads):
    gm.set_num_threads(1)
    x = gm.empty((8, 64, 56, 56), device="meta", requires_grad=True)
    w = gm.empty((128, 64, 3, 3), device="meta", requires_grad=True)
    b = gm.empty((128,), device="meta", requires_grad=True)
    gm.memory.reset_peak_memory_stats("meta")
    before = gm.memory.memory_allocated("meta")
    out = conv2d(x, w, b, stride=2, padding=1)
    assert tuple(out.shape) == (8, 128, 28, 28) and out.device.type == "meta"
    assert gm.memory.memory_allocated("meta") - before == 8 * 128 * 28 * 28 * 4
    stats = gm.memory.memory_stats("meta")["by_category"]["workspace"]
    assert stats["current"] == 0
    # a tile of whole output rows of about 256 KiB of columns, not the item's whole column matrix (64*9 rows x 784
    # positions), although that fits in 64 MiB: 256 KiB / (64*9*4 bytes) = 113 columns, below the floor of 256
    # columns, rounded up to 10 rows of 28
    assert stats["peak"] == 64 * 9 * 10 * 28 * 4
    out.sum().backward()
    assert tuple(x.grad.shape) == tuple(x.shape) and tuple(w.grad.shape) == tuple(w.shape)
    assert tuple(b.grad.shape) == (128,)

    assert tuple(conv2d(gm.empty((2, 3, 9, 9), device="meta"), gm.empty((6, 1, 3, 3), device="meta"),
                        groups=3, padding="same").shape) == (2, 6, 9, 9)
    t = conv_transpose2d(gm.empty((2, 16, 7, 7), device="meta"), gm.empty((16, 8, 4, 4), device="meta"),
                         stride=2, padding=1)
    assert tuple(t.shape) == (2, 8, 14, 14)
    y = linear(gm.empty((4, 10, 32), device="meta"), gm.empty((16, 32), device="meta"))
    assert tuple(y.shape) == (4, 10, 16)
    # half precision: stored in half, computed in float32 (the autocast path), on meta as on the CPU
    h = conv2d(gm.empty((1, 3, 8, 8), device="meta", dtype=gm.float16),
               gm.empty((4, 3, 3, 3), device="meta", dtype=gm.float16))
    assert tuple(h.shape) == (1, 4, 6, 6) and h.dtype == gm.float16


@pytest.mark.parametrize("nthreads", [1, 2])
def test_meta_and_cpu_allocate_the_same_workspace(workspace_limit, threads, nthreads):
    """meta plans exactly like the CPU (a CPU thread takes one column buffer, within the limit)."""
    gm.set_num_threads(nthreads)
    _C.set_conv_workspace_limit(10_000)
    peaks = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((2, 4, 12, 12), device=dev)
        w = gm.zeros((4, 4, 3, 3), device=dev)
        gm.memory.reset_peak_memory_stats(dev)
        conv2d(x, w, padding=1)
        peaks.append(gm.memory.memory_stats(dev)["by_category"]["workspace"]["peak"])
    assert peaks[0] == peaks[1]
    if nthreads == 1:
        assert peaks[0] == 69 * 4 * 9 * 4 + 512 - (69 * 4 * 9 * 4) % 512


# ---- errors -------------------------------------------------------------------------------------------------------
def Z(*shape, dtype=gm.float32, device="cpu"):
    return gm.zeros(shape, dtype=dtype, device=device)


CONV_ERRORS = [
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 5, 5)), ValueError, r"kernel 5x5 .* larger than the padded input 4x4"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), dilation=2), ValueError, r"spans 5x5, larger than the padded"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), stride=0), ValueError, r"stride must be positive, got \(0, 0\)"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), stride=(1, -1)), ValueError, r"stride must be positive"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), dilation=(0, 1)), ValueError, r"dilation must be positive"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), padding=-1), ValueError, r"padding must be non-negative"),
    (lambda: conv2d(Z(1, 6, 4, 4), Z(4, 2, 3, 3), groups=4), ValueError,
     r"input channels 6 \(input \(1, 6, 4, 4\)\) are not divisible by groups=4"),
    (lambda: conv2d(Z(1, 6, 4, 4), Z(6, 3, 3, 3), groups=3), ValueError,
     r"weight \(6, 3, 3, 3\) with groups=3 expects input with 9 channels, but got input \(1, 6, 4, 4\) with 6"),
    (lambda: conv2d(Z(1, 6, 4, 4), Z(5, 3, 3, 3), groups=2), ValueError,
     r"out_channels 5 .* not divisible by groups=2"),
    (lambda: conv2d(Z(1, 4, 4, 4), Z(2, 3, 3, 3)), ValueError, r"expects input with 3 channels, but got input "
                                                               r"\(1, 4, 4, 4\) with 4 channels"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), groups=0), ValueError, r"groups must be positive"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), groups=1.0), TypeError, r"groups must be an int"),
    (lambda: conv2d(Z(4, 4), Z(2, 3, 3, 3)), ValueError, r"expected a 3-D \(C, H, W\) or 4-D .* got shape \(4, 4\)"),
    (lambda: conv2d(Z(1, 1, 3, 4, 4), Z(2, 3, 3, 3)), ValueError, r"got shape \(1, 1, 3, 4, 4\)"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3)), ValueError, r"expected a 4-D weight .* got shape \(2, 3, 3\)"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3, dtype=gm.float64)), TypeError,
     r"input has dtype float32 but weight has dtype float64"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), Z(2, dtype=gm.float64)), TypeError, r"bias has dtype float64"),
    (lambda: conv2d(gm.zeros((1, 3, 4, 4), dtype=gm.int64), Z(2, 3, 3, 3)), TypeError,
     r"input must be floating point, got int64"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3, device="meta")), RuntimeError,
     r"expected all tensors on the same device, got cpu and meta"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), Z(3)), ValueError,
     r"bias must be 1-D with out_channels=2 elements, got shape \(3,\)"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), stride=2, padding="same"), ValueError,
     r"padding='same' is not supported for strided convolutions"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), padding="full"), ValueError, r"invalid padding string 'full'"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), stride=(1, 2, 3)), TypeError, r"stride must be an int or a tuple"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), padding=1.5), TypeError, r"padding must be an int or a tuple"),
    (lambda: conv2d(np.zeros((1, 3, 4, 4)), Z(2, 3, 3, 3)), TypeError, r"input must be a Tensor, got ndarray"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 3, 3), bias=[0, 0]), TypeError, r"bias must be a Tensor or None"),
    (lambda: conv2d(Z(1, 3, 4, 4), Z(2, 3, 0, 3)), ValueError, r"kernel must be at least 1x1"),
    # conv_transpose2d
    (lambda: conv_transpose2d(Z(1, 3, 4, 4), Z(4, 2, 3, 3)), ValueError,
     r"weight \(4, 2, 3, 3\) \(in_channels, out_channels/groups, kH, kW\) expects input with 4 channels"),
    (lambda: conv_transpose2d(Z(1, 3, 4, 4), Z(3, 2, 3, 3), groups=2), ValueError, r"not divisible by groups=2"),
    (lambda: conv_transpose2d(Z(1, 3, 4, 4), Z(3, 2, 3, 3), output_padding=1), ValueError,
     r"output_padding must be non-negative and smaller than either stride or dilation"),
    (lambda: conv_transpose2d(Z(1, 3, 4, 4), Z(3, 2, 3, 3), stride=2, output_padding=2), ValueError,
     r"output_padding=\(2, 2\), stride=\(2, 2\)"),
    (lambda: conv_transpose2d(Z(1, 3, 1, 1), Z(3, 2, 1, 1), padding=1), ValueError, r"gives an empty output -1x-1"),
    (lambda: conv_transpose2d(Z(1, 3, 4, 4), Z(3, 2, 3, 3), padding="same"), TypeError,
     r"padding must be an int or a tuple of 2 ints, got 'same'"),
    (lambda: conv_transpose2d(Z(1, 3, 4, 4), Z(3, 2, 3, 3), Z(3)), ValueError, r"out_channels=2 elements"),
    (lambda: conv_transpose2d(Z(3, 4), Z(3, 2, 3, 3)), ValueError, r"expected a 3-D"),
    (lambda: conv_transpose2d(Z(1, 3, 4, 4), Z(3, 2, 3, 3), stride=0), ValueError, r"stride must be positive"),
    # linear
    (lambda: linear(Z(2, 5), Z(3, 4)), ValueError,
     r"input \(2, 5\) has 5 features in its last dimension, but weight \(3, 4\) .* expects 4"),
    (lambda: linear(Z(2, 4), Z(4)), ValueError,
     r"expected a 2-D weight \(out_features, in_features\), got shape \(4,\)"),
    (lambda: linear(Z(2, 4), Z(3, 4), Z(4)), ValueError, r"bias must be 1-D with out_features=3 elements"),
    (lambda: linear(Z(2, 4), Z(3, 4, dtype=gm.float64)), TypeError, r"input has dtype float32 but weight has"),
    (lambda: linear(gm.zeros(()), Z(3, 1)), ValueError, r"at least 1 dimension"),
    (lambda: linear(Z(2, 4), Z(3, 4, device="meta")), RuntimeError, r"same device"),
    (lambda: linear(Z(2, 4), "w"), TypeError, r"weight must be a Tensor"),
]


@pytest.mark.parametrize("fn,exc,pattern", CONV_ERRORS, ids=[f"error{i}" for i in range(len(CONV_ERRORS))])
def test_errors(fn, exc, pattern):
    with pytest.raises(exc, match=pattern):
        fn()


def test_backward_op_errors():
    g, x, w = Z(1, 2, 2, 2), Z(1, 3, 4, 4), Z(2, 3, 3, 3)
    with pytest.raises(ValueError, match=r"grad_output has shape \(1, 2, 3, 3\), expected the output's shape "
                                         r"\(1, 2, 2, 2\)"):
        _C.conv2d_backward(Z(1, 2, 3, 3), x, w, 1, 0, 1, 1, (True, True, True))
    with pytest.raises(ValueError, match="weight is needed to compute the input gradient"):
        _C.conv2d_backward(g, x, None, 1, 0, 1, 1, (True, False, False), None, (2, 3, 3, 3))
    with pytest.raises(ValueError, match="pass either input or input_shape"):
        _C.conv2d_backward(g, None, w, 1, 0, 1, 1, (True, False, False))
    with pytest.raises(ValueError, match="grad_output has shape"):
        _C.linear_backward(Z(2, 2), Z(2, 4), Z(3, 4), (True, True, True))
    with pytest.raises(TypeError, match="output_mask must be a tuple of 3 bools"):
        _C.linear_backward(Z(2, 3), Z(2, 4), Z(3, 4), (True,))
    dx, dw, db = _C.conv2d_backward(g, None, w, 1, 0, 1, 1, (True, False, True), (1, 3, 4, 4))
    assert tuple(dx.shape) == (1, 3, 4, 4) and dw is None and tuple(db.shape) == (2,)


# ---- PyTorch, where installed ----------------------------------------------------------------------------------------
def test_against_torch():
    torch = pytest.importorskip("torch")
    from gradcheck import check_against_torch
    tf = torch.nn.functional
    check_against_torch(lambda x, w, b: conv2d(x, w, b, stride=2, padding=1, groups=2),
                        lambda x, w, b: tf.conv2d(x, w, b, stride=2, padding=1, groups=2),
                        [R(2, 4, 7, 6), R(6, 2, 3, 3), R(6)], atol=1e-10, rtol=1e-10)
    check_against_torch(lambda x, w: conv2d(x, w, padding="same", dilation=2),
                        lambda x, w: tf.conv2d(x, w, padding="same", dilation=2),
                        [R(1, 3, 6, 5), R(2, 3, 2, 4)], atol=1e-10, rtol=1e-10)
    check_against_torch(lambda x, w: conv2d(x, w, groups=4, padding=1),
                        lambda x, w: tf.conv2d(x, w, groups=4, padding=1),
                        [R(2, 4, 5, 5), R(8, 1, 3, 3)], atol=1e-10, rtol=1e-10)
    check_against_torch(lambda x, w, b: conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
                        lambda x, w, b: tf.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
                        [R(2, 4, 3, 4), R(4, 3, 3, 3), R(6)], atol=1e-10, rtol=1e-10)
    check_against_torch(linear, tf.linear, [R(2, 3, 5), R(4, 5), R(4)], atol=1e-10, rtol=1e-10)


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


# ---- tiles within an image, and the half-precision forward ------------------------------------------------------
def test_tiles_split_an_image_by_output_rows(threads):
    """The column buffer is whole output rows of about 256 KiB per thread, not the image's column matrix: in
    float64 8*9*8 = 576 bytes per column, 2**18 // 576 = 455 columns, rounded up to 8 rows of 64 (of 64 rows);
    in float32 15 rows. Every pass still matches the references across the tile boundary, and meta plans the same
    bytes."""
    gm.set_num_threads(1)
    x, w, b = R(2, 8, 64, 64), R(4, 8, 3, 3), R(4)
    xt, wt = T(x, requires_grad=True), T(w, requires_grad=True)
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(xt, wt, T(b), padding=1)
    assert _workspace_peak() == 8 * 64 * 8 * 9 * 8  # float64
    assert_close(out, ref_conv2d(x, w, b, padding=1), 1e-10, 1e-10, what="forward")
    dout = R(*out.shape)
    out.backward(T(dout))
    assert_close(wt.grad, ref_conv2d_grad_weight(x, dout, w.shape, padding=1), 1e-9, 1e-10, what="weight grad")
    # the input-gradient is the transposed conv of dout: flip the kernel and swap its channels
    dx_ref = ref_conv2d(dout, w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3), padding=1)
    assert_close(xt.grad, dx_ref, 1e-9, 1e-10, what="input grad")
    peaks = []
    for dev in ("cpu", "meta"):
        gm.memory.reset_peak_memory_stats(dev)
        conv2d(gm.zeros((1, 8, 64, 64), device=dev), gm.zeros((4, 8, 3, 3), device=dev), padding=1)
        peaks.append(gm.memory.memory_stats(dev)["by_category"]["workspace"]["peak"])
    assert peaks[0] == peaks[1] == 15 * 64 * 8 * 9 * 4


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
    # gemm's width, which may land a value on the other side of a rounding boundary)
    ulp = 2.0 ** -10 if dtype == gm.float16 else 2.0 ** -7
    np.testing.assert_allclose(out.float().numpy(), wide.to(dtype).float().numpy(), rtol=ulp, atol=2.0 ** -24)
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
    # depthwise has no half kernel: the C op says so, the functional API widens instead
    with pytest.raises(TypeError, match=r"conv2d: float16 depthwise convolutions .* not supported on the CPU"):
        _C.conv2d(x, gm.zeros((4, 1, 3, 3), dtype=gm.float16), groups=4)
    out = conv2d(x, gm.ones((4, 1, 3, 3), dtype=gm.float16), padding=1, groups=4)
    assert out.dtype == gm.float16 and float(out.float().sum()) == 0
    # nor have the backward passes (the functional API runs them per item in float32)
    with pytest.raises(TypeError, match=r"conv2d_backward: float16 depthwise convolutions .* not supported on the "
                                        r"CPU"):
        _C.conv2d_backward(gm.zeros((1, 4, 4, 4), dtype=gm.float16), x, gm.zeros((4, 1, 3, 3), dtype=gm.float16),
                           (1, 1), (0, 0), (1, 1), 4, (True, True, False))
    with pytest.raises(TypeError, match=r"conv_transpose2d: float16 depthwise convolutions"):
        _C.conv_transpose2d(x, gm.zeros((4, 1, 3, 3), dtype=gm.float16), groups=4)
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
def test_half_depthwise_backward_runs_per_item_in_float32(dtype, transposed):
    """Depthwise convolutions have no half kernel on the CPU: their gradients are computed one batch item at a time
    in float32, equal to float32 ones to half precision, and the float32 scratch is one item's, not the batch's."""
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


def test_meta_allocates_the_cpus_bytes_for_a_strided_grad_output():
    """A transposed view's gradient reaches the convolution strided: the bias gradient then reads a contiguous
    copy of it, and meta (what gm.memory.estimate runs) allocates that copy too."""
    peaks = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((2, 3, 8, 8), device=dev, requires_grad=True)
        w, b = gm.zeros((4, 3, 3, 3), device=dev, requires_grad=True), gm.zeros(4, device=dev, requires_grad=True)
        y = conv2d(x, w, b, padding=1).transpose(2, 3)
        g = gm.zeros((2, 4, 8, 8), device=dev)
        gc.collect()
        gm.memory.record_history(True, device=dev)
        y.backward(g)
        peaks.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert peaks[0] == peaks[1]  # every allocation, in order
    assert (2 * 4 * 8 * 8 * 4, "workspace") in peaks[0]  # the copy
