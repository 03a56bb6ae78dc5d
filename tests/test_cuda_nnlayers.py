"""The compositions of issue 12's nn layers on CUDA against the CPU: embedding (gather + accumulating scatter),
one_hot, pixel_shuffle / pixel_unshuffle, 1-D and adaptive max pooling, channel dropout of 1-D/3-D inputs (the
same Philox mask on both devices), through the public API with autograd. Runs on a GPU or on the emulator build
(tests/cuda_util.py)."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet.nn import functional as F
from cuda_util import assert_close, requires_cuda

pytestmark = requires_cuda


def both(fn, x, grad=True):
    """fn on x's CPU and CUDA copies: (cpu_out, cuda_out, cpu_grad, cuda_grad)."""
    res = []
    for dev in ("cpu", "cuda"):
        a = x.to(dev).detach()  # a fresh leaf on each device (x itself stays out of the graph)
        if grad:
            a.requires_grad_()
        out = fn(a)
        if grad:
            (out * out).sum().backward()
        res.append((out, a.grad if grad else None))
    return res[0][0], res[1][0], res[0][1], res[1][1]


@pytest.mark.parametrize("fn", [lambda a: F.pixel_shuffle(a, 2), lambda a: F.pixel_unshuffle(a, 2),
                                lambda a: F.max_pool1d(a.reshape(2, 8, 12), 3, 2),
                                lambda a: F.avg_pool1d(a.reshape(2, 8, 12), 3, 2, padding=1),
                                lambda a: F.adaptive_avg_pool1d(a.reshape(2, 8, 12), 5),
                                lambda a: F.adaptive_max_pool2d(a, (2, 3)),
                                lambda a: F.adaptive_max_pool2d(a, (3, 4)),
                                lambda a: F.pad(a, (1, 2, 2, 1), "reflect")])
def test_compositions(fn):
    x = gm.tensor(np.random.default_rng(0).standard_normal((2, 4, 4, 6)), dtype=gm.float32)
    oc, od, gc, gd = both(fn, x)
    assert_close(od, oc, exact=True)
    assert_close(gd, gc, rtol=1e-6, atol=1e-7)


def test_embedding_and_one_hot():
    w = gm.tensor(np.random.default_rng(1).standard_normal((9, 5)), dtype=gm.float32)
    idx = gm.tensor(np.array([[0, 3, 3], [8, 1, 3]]))
    res = []
    for dev in ("cpu", "cuda"):
        e = nn.Embedding(9, 5, padding_idx=1, _weight=w.to(dev))
        out = e(idx.to(dev))
        out.sum().backward()
        res.append((out, e.weight.grad))
    assert_close(res[1][0], res[0][0], exact=True)
    assert_close(res[1][1], res[0][1], exact=True)
    assert_close(F.one_hot(idx.cuda(), 9), F.one_hot(idx, 9), exact=True)


@pytest.mark.parametrize("shape,fn", [((4, 6, 9), F.dropout1d), ((3, 5, 2, 3, 4), F.dropout3d)])
def test_channel_dropout_same_mask(shape, fn):
    x = gm.ones(*shape)
    outs = []
    for dev in ("cpu", "cuda"):
        gm.manual_seed(11)
        outs.append(fn(x.to(dev), 0.4))
    assert_close(outs[1], outs[0], exact=True)


def test_bernoulli_same_draws_on_both_devices():
    res = []
    for dev in ("cpu", "cuda"):
        gm.manual_seed(9)
        res.append(gm.empty(5000, device=dev).bernoulli_(0.3))
        res.append(gm.empty(300, dtype=gm.float64, device=dev).normal_(0.5, 2.0))
    assert_close(res[2], res[0], exact=True)
    # the same uniforms; the normal's float64 log/cos on a real GPU (libdevice) may differ from glibc's by an ulp
    emu = gm.cuda.is_emulated()
    # (an H200: 1.1e-16 apart at most, 6.9e-15 relative near zero)
    assert_close(res[3], res[1], exact=emu, **({} if emu else dict(rtol=1e-14, atol=1e-15)))


@pytest.mark.parametrize("dtype", [gm.float32, gm.float64, gm.float16, gm.bfloat16], ids=str)
@pytest.mark.parametrize("size", [(1, 1), (3, 4), (7, 5), (2, 9)])
def test_adaptive_max_pool2d_kernel(size, dtype):
    """The C op's forward on both devices: values and indices bit-identical (uneven windows, a NaN, ties)."""
    from gpumemnet import _C
    x = np.random.default_rng(4).standard_normal((2, 3, 7, 9))
    x[0, 1, 2, 3] = np.nan
    x[1, 2, :2, :2] = 1.0  # a tie: the first position wins
    xc = gm.tensor(x, dtype=dtype)
    (oc, ic), (od, idd) = _C.adaptive_max_pool2d(xc, size), _C.adaptive_max_pool2d(xc.cuda(), size)
    assert_close(od, oc, exact=True)
    assert_close(idd, ic, exact=True)
