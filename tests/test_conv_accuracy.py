"""float32 rounding of the gemm-based passes (conv2d's forward and input-gradient) over a long reduction:
how far from a float64 NumPy reference they land, in units of 2^-24 of sum |x| |w| (the rms over the outputs).

conv_gemm_f32 (kernels/cpu/conv_internal.h) sums K in chunks of 128, each chunk's sgemm adding onto the output.
A whole-K OpenBLAS sgemm rounds its running total at every term: it landed 1.5x (3x3 conv, K = 576) to 3x (1x1
conv, K = 2048) further from float64 than the chunked sum, and 1.4-1.7x further than PyTorch's (oneDNN's)
convolutions; that failed issue 12's drop-in rule on the fast_neural_style script (tests/dropin/). Bounds sit between the two, measured with OpenBLAS's
SkylakeX, Haswell and Sandybridge kernels (OPENBLAS_CORETYPE): whole-K / chunked in the comments."""
import numpy as np
import pytest

import gpumemnet as gm
from conv_util import ref_conv2d
from gpumemnet.nn._functional_conv import conv2d, linear


def units(got, ref, scale):
    """rms of (got - ref) / scale in units of 2^-24 (float32's half-ulp at 1)."""
    return float(np.sqrt(np.mean(((np.asarray(got, np.float64) - ref) / scale) ** 2)) / 2.0 ** -24)


def data(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


# (name, N, C, H, K, R, padding, bound): whole-K 0.33-0.34 / chunked 0.22-0.23 (3x3); 0.19-0.22 / 0.06-0.13 (1x1)
CONVS = [("3x3 C64 8x8", 4, 64, 8, 64, 3, 1, 0.28), ("1x1 C2048 1x1", 4, 2048, 1, 512, 1, 0, 0.16)]


@pytest.mark.parametrize("case", CONVS, ids=lambda c: c[0])
def test_conv2d_forward_float32_error(case):
    _, N, C, H, K, R, pad, bound = case
    x, w = data(1, (N, C, H, H), (K, C, R, R))
    w /= np.sqrt(C * R * R)
    ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), None, 1, pad, 1, 1)
    scale = ref_conv2d(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), None, 1, pad, 1, 1)
    got = conv2d(gm.tensor(x), gm.tensor(w), None, 1, pad).numpy()
    assert units(got, ref, scale) <= bound


def test_conv2d_input_gradient_float32_error():
    # a 1x1 conv 512 -> 2048: the input-gradient sums over the 2048 output channels (whole-K 0.18-0.22 / 0.13)
    x, w, gy = data(2, (4, 512, 2, 2), (2048, 512, 1, 1), (4, 2048, 2, 2))
    w /= np.sqrt(512)
    xt = gm.tensor(x, requires_grad=True)
    (conv2d(xt, gm.tensor(w), None) * gm.tensor(gy)).sum().backward()
    w2 = w[:, :, 0, 0].astype(np.float64)
    ref = np.einsum("nkhw,kc->nchw", gy.astype(np.float64), w2)
    scale = np.einsum("nkhw,kc->nchw", np.abs(gy).astype(np.float64), np.abs(w2))
    assert units(xt.grad.numpy(), ref, scale) <= 0.16


def test_chunked_sums_are_exact_where_float32_is():
    # small integers sum exactly in any order: the chunks' partial sums must add up to the whole sum, across a
    # chunk boundary that is not a multiple of 128 (K = 300), for each transposition the passes use (linear's
    # forward: B transposed; its input-gradient: neither; its weight-gradient: A transposed), the bias included
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, (300, 260)).astype(np.float32)
    w = rng.integers(-3, 4, (290, 260)).astype(np.float32)
    b = rng.integers(-3, 4, 290).astype(np.float32)
    g = rng.integers(-3, 4, (300, 290)).astype(np.float32)
    xt, wt = gm.tensor(x, requires_grad=True), gm.tensor(w, requires_grad=True)
    y = linear(xt, wt, gm.tensor(b))
    (y * gm.tensor(g)).sum().backward()
    i64 = lambda a: a.astype(np.int64)  # noqa: E731
    np.testing.assert_array_equal(y.detach().numpy(), i64(x) @ i64(w).T + i64(b))
    np.testing.assert_array_equal(xt.grad.numpy(), i64(g) @ i64(w))
    np.testing.assert_array_equal(wt.grad.numpy(), i64(g).T @ i64(x))


@pytest.mark.parametrize("case", CONVS, ids=lambda c: c[0])
def test_conv2d_forward_no_further_from_float64_than_pytorch(case):
    torch = pytest.importorskip("torch")
    _, N, C, H, K, R, pad, _ = case
    x, w = data(1, (N, C, H, H), (K, C, R, R))
    w /= np.sqrt(C * R * R)
    ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), None, 1, pad, 1, 1)
    scale = ref_conv2d(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), None, 1, pad, 1, 1)
    ours = units(conv2d(gm.tensor(x), gm.tensor(w), None, 1, pad).numpy(), ref, scale)
    theirs = units(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), None, 1, pad).numpy(),
                   ref, scale)
    # whole-K: 1.37x (3x3), 1.6x (1x1) PyTorch's; chunked: 0.92x, 0.5x
    assert ours <= 1.15 * theirs, (ours, theirs)
