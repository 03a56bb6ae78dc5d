"""The CUDA direct convolution's float32 rounding (kernels/cuda/conv_direct.cu): its sums run in chunks of
CONV_KCHUNK terms, as the CPU's gemm does (tests/test_conv_accuracy.py has the CPU side and the figures), so on a
long reduction it lands as near float64 as the CPU does. The direct kernels are the convolution of the emulator
build; on a GPU cuDNN runs these geometries, with its own summation order, so this runs on the emulator only.
Measured on the emulator, rms in units of 2^-24 of sum |x| |w|: one running float32 total 0.48 (forward, 3x3,
K = 576) and 0.47 (input-gradient, K = 2048); chunked 0.25 and 0.13."""
import numpy as np
import pytest

import gpumemnet as gm
from conv_util import ref_conv2d
from cuda_util import requires_cuda
from gpumemnet.nn._functional_conv import conv2d
from test_conv_accuracy import data, units

pytestmark = [requires_cuda,
              pytest.mark.skipif(gm.cuda.is_available() and not gm.cuda.is_emulated(),
                                 reason="on a GPU cuDNN runs these convolutions, not the direct kernels")]


def test_direct_forward_float32_error():
    x, w = data(1, (4, 64, 8, 8), (64, 64, 3, 3))
    w /= np.sqrt(64 * 9)
    ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), None, 1, 1, 1, 1)
    scale = ref_conv2d(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), None, 1, 1, 1, 1)
    got = conv2d(gm.tensor(x, device="cuda"), gm.tensor(w, device="cuda"), None, 1, 1).cpu().numpy()
    assert units(got, ref, scale) <= 0.28


def test_direct_input_gradient_float32_error():
    x, w, gy = data(2, (4, 512, 2, 2), (2048, 512, 1, 1), (4, 2048, 2, 2))
    w /= np.sqrt(512)
    xt = gm.tensor(x, device="cuda", requires_grad=True)
    (conv2d(xt, gm.tensor(w, device="cuda"), None) * gm.tensor(gy, device="cuda")).sum().backward()
    w2 = w[:, :, 0, 0].astype(np.float64)
    ref = np.einsum("nkhw,kc->nchw", gy.astype(np.float64), w2)
    scale = np.einsum("nkhw,kc->nchw", np.abs(gy).astype(np.float64), np.abs(w2))
    assert units(xt.grad.cpu().numpy(), ref, scale) <= 0.16
