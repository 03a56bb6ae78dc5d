"""The pointwise losses issue 12 added (smooth_l1, huber, binary_cross_entropy, kl_div; kernels/cuda/loss.cu)
on CUDA against the CPU: _C forward and backward in every float dtype and reduction, exact per element (both
backends evaluate kernels/loss_ops.h's double math), and the public API through autograd. Runs on a GPU or on the
emulator build (tests/cuda_util.py)."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import functional as F
from cuda_util import assert_close, requires_cuda

pytestmark = requires_cuda

FLOATS = [gm.float32, gm.float64, gm.float16, gm.bfloat16]
NONE, MEAN, SUM = range(3)
SMOOTH_L1, HUBER, BCE, KL_DIV = 2, 3, 4, 5
# op, param, input and target makers
OPS = {"smooth_l1": (SMOOTH_L1, 0.5), "smooth_l1_beta0": (SMOOTH_L1, 0.0), "huber": (HUBER, 0.8), "bce": (BCE, 0.0),
       "kl_div": (KL_DIV, 0.0), "kl_div_log_target": (KL_DIV, 1.0)}


def data(name, r, shape):
    if name == "bce":
        x, t = r.uniform(0, 1, shape), r.uniform(0, 1, shape)
        x.flat[:2] = [0.0, 1.0]  # the clamped logs
    elif name.startswith("kl_div"):
        x = np.log(r.uniform(0.05, 1, shape))
        t = r.uniform(0, 1, shape) if name == "kl_div" else np.log(r.uniform(0.05, 1, shape))
        t.flat[:2] = 0.0
    else:
        x = r.standard_normal(shape)
        t = np.where(r.random(shape) < 0.1, x, r.standard_normal(shape))  # some d = 0
    return x, t


def pair(a, dtype):
    c = gm.tensor(np.asarray(a), dtype=dtype)
    return c, c.cuda()


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", OPS)
def test_pointwise_losses(name, dtype, reduction):
    op, param = OPS[name]
    r = np.random.default_rng(op)
    x, t = data(name, r, (5, 3, 70))
    xc, xd = pair(x, dtype)
    tc, td = pair(t, dtype)
    lc, ld = _C.pointwise_loss(op, xc, tc, reduction, param), _C.pointwise_loss(op, xd, td, reduction, param)
    tol = {} if reduction == NONE or dtype != gm.float32 else dict(rtol=2e-5, atol=1e-5)
    # elementwise results are exact, but float64 log/exp on a real GPU (libdevice) and on the CPU (glibc) may differ
    # by an ulp (the emulator runs glibc's), and a reduction's sum by a few (an H200: at most 1.6e-15 relative)
    ulp = dtype == gm.float64 and not gm.cuda.is_emulated()
    exact = reduction == NONE and not ulp
    if ulp:
        tol = dict(rtol=1e-14, atol=1e-300)
    assert_close(ld, lc, exact=exact, **tol)
    gc, gd = pair(r.standard_normal(tuple(lc.shape)), dtype)
    for need in ((True, True), (True, False), (False, True)):
        rc = _C.pointwise_loss_backward(op, gc, xc, tc, reduction, *need, param)
        rd = _C.pointwise_loss_backward(op, gd, xd, td, reduction, *need, param)
        for d, c in zip(rd, rc):
            assert (d is None) == (c is None)
            if c is not None:
                assert_close(d, c, exact=exact, **(dict(rtol=1e-14, atol=1e-300) if ulp else {}))


def test_public_api_through_autograd():
    r = np.random.default_rng(7)
    for fn, name in ((lambda a, b: F.smooth_l1_loss(a, b, beta=0.3), "smooth_l1"),
                     (lambda a, b: F.huber_loss(a, b, delta=0.4), "huber"),
                     (lambda a, b: F.binary_cross_entropy(a, b), "bce"),
                     (lambda a, b: F.kl_div(a, b, reduction="batchmean"), "kl_div")):
        x, t = data(name, r, (4, 9))
        grads = []
        for dev in ("cpu", "cuda"):
            a = gm.tensor(x, dtype=gm.float32).to(dev).requires_grad_()
            b = gm.tensor(t, dtype=gm.float32).to(dev)
            loss = fn(a, b)
            loss.backward()
            grads.append((loss, a.grad))
        assert_close(grads[1][0], grads[0][0], rtol=2e-5, atol=1e-6)
        assert_close(grads[1][1], grads[0][1], rtol=1e-6, atol=1e-7)

