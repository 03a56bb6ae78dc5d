"""conv2d, conv_transpose2d and linear forward: against the NumPy references of conv_util.py over channels and
groups, kernels, strides, paddings ('same', 'valid') and dilations, unbatched and empty batches, strided
operands; conv_transpose2d also as conv2d's adjoint: <conv2d(x, w), y> == <x, conv_transpose2d(y, w)>. Then every
error path, and PyTorch where it is installed."""
import itertools

import numpy as np
import pytest

import gpumemnet as gm
from conv_util import R, T, _case_ids, _two, ref_conv2d, ref_conv_transpose2d
from gpumemnet import _C
from gpumemnet.nn._functional_conv import conv2d, conv_transpose2d, linear
from gradcheck import assert_close, to_numpy


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
    (lambda: linear(Z(2, 4), Z(2, 2, 4)), ValueError,  # (a 1-D weight is PyTorch's vector product: accepted)
     r"expected a 2-D weight \(out_features, in_features\), got shape \(2, 2, 4\)"),
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
