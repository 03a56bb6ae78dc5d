"""The compact saved forms of relu and max pooling on CUDA against the CPU (tests/test_peak_relu_pool.py has the
CPU's own tests): relu_mask / relu_mask_backward and max_pool2d's int8 window taps and their backward, bit for bit
in every float dtype, and autograd through conv -> relu -> max pool -> conv -> relu -> conv with the same gradients."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import functional as F
from cuda_util import requires_cuda, to_np

pytestmark = requires_cuda

DTYPES = ["float32", "float64", "float16", "bfloat16"]
_rng = np.random.default_rng(5)

MAX_CASES = [  # shape, kernel_size, stride, padding, dilation, ceil_mode
    ((2, 3, 7, 6), 3, None, 0, 1, False),
    ((2, 3, 7, 6), 2, None, 0, 1, True),
    ((2, 2, 8, 9), 3, 2, 1, 1, True),
    ((1, 2, 9, 7), (3, 2), (2, 1), (1, 0), (2, 1), False),
    ((1, 2, 9, 8), 3, 1, 1, 2, True),
    ((1, 1, 1, 4), 2, 1, 1, 2, False),
]


def both(a, dtype):
    t = gm.tensor(a, dtype=getattr(gm, dtype))
    return t, t.cuda()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 9, 4099])
def test_relu_mask(dtype, n):
    x = _rng.standard_normal(n)
    x[::3] = 0.0
    x[0] = np.nan
    y, yc = both(np.maximum(x, 0) + np.where(np.isnan(x), np.nan, 0), dtype)
    m, mc = _C.relu_mask(y), _C.relu_mask(yc)
    np.testing.assert_array_equal(to_np(mc), to_np(m))
    g, gc = both(_rng.standard_normal(n), dtype)
    np.testing.assert_array_equal(to_np(_C.relu_mask_backward(gc, mc)), to_np(_C.relu_mask_backward(g, m)))


@pytest.mark.parametrize("case", MAX_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool_taps(case, dtype):
    shape, k, s, p, d, ceil = case
    a = np.round(_rng.standard_normal(shape) * 2) / 2
    a.flat[len(a.flat) // 3] = np.nan
    x, xc = both(a, dtype)
    w = (k, s if s is not None else k, p, d)
    out, taps = _C.max_pool2d(x, *w, ceil, 2)
    outc, tapsc = _C.max_pool2d(xc, *w, ceil, 2)
    np.testing.assert_array_equal(to_np(outc), to_np(out))
    np.testing.assert_array_equal(to_np(tapsc), to_np(taps))
    g, gc = both(_rng.standard_normal(tuple(out.shape)), dtype)
    np.testing.assert_array_equal(to_np(_C.max_pool2d_backward(gc, tapsc, x.shape, *w)),
                                  to_np(_C.max_pool2d_backward(g, taps, x.shape, *w)))


def test_conv_relu_pool_autograd():
    def run(device):
        # float64: in float32 a pre-activation within rounding of 0 (or two window values within rounding of each
        # other) can go either way on two devices whose sums run in another order, and then a whole gradient
        # element differs (seen: 1 of 108 with the CPU's AVX2 kernels against the emulator's direct ones)
        gm.manual_seed(0)
        x = gm.randn(2, 3, 12, 12, dtype=gm.float64).to(device).requires_grad_()
        wt = gm.randn(4, 3, 3, 3, dtype=gm.float64).to(device).requires_grad_()
        w2 = gm.randn(4, 4, 3, 3, dtype=gm.float64).to(device).requires_grad_()
        h = F.relu(F.conv2d(x, wt, padding=1), inplace=True)
        y = F.conv2d(F.relu(F.conv2d(F.max_pool2d(h, 2), w2, padding=1)), w2, padding=1)
        assert h.grad_fn._saved[0].packed.dtype == gm.uint8
        del h
        y.sum().backward()
        return [to_np(t.grad) for t in (x, wt, w2)]
    for a, b in zip(run("cuda"), run("cpu")):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
