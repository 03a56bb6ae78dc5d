"""silu, hardswish, hardsigmoid, mish, hardtanh/relu6, elu and softplus on CUDA against the CPU
(kernels/cuda/activation.cu, csrc/ops_activation.c): the _C kernels forward and backward in every float dtype
and parameter case, NaN/inf and the kinks, the in-place form, empty tensors, allocator bytes, and the public API
through autograd (including the in-place forms in a graph). Exact equality where the kernel does the CPU's
arithmetic with no transcendental (hardswish, hardsigmoid, hardtanh); the dtype's tolerance elsewhere. Runs on a
GPU or on the emulator build (tests/cuda_util.py)."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import functional as F
from cuda_util import HAVE_CUDA, assert_close, requires_cuda

pytestmark = requires_cuda

FLOATS = [gm.float32, gm.float64, gm.float16, gm.bfloat16]
NAMES = {gm.float32: "float32", gm.float64: "float64", gm.float16: "float16", gm.bfloat16: "bfloat16"}
SILU, HARDSWISH, HARDSIGMOID, MISH, HARDTANH, ELU, SOFTPLUS = range(6, 13)  # kernels/activation_ops.h
# (op, alpha, beta, backward reads the output)
CASES = [(SILU, 0.0, 0.0, False), (HARDSWISH, 0.0, 0.0, False), (HARDSIGMOID, 0.0, 0.0, True),
         (MISH, 0.0, 0.0, False), (HARDTANH, -1.0, 1.0, True), (HARDTANH, 0.0, 6.0, True), (ELU, 1.0, 0.0, True),
         (ELU, 0.4, 0.0, True), (ELU, -0.7, 0.0, False), (SOFTPLUS, 1.0, 20.0, False), (SOFTPLUS, 2.0, 3.0, False)]
EXACT = (HARDSWISH, HARDSIGMOID, HARDTANH)
KINKS = [-3.0, 3.0, -1.0, 1.0, 0.0, 6.0, 1.5]


def _id(case):
    return f"op{case[0]}_{case[1]}_{case[2]}"


def pair(a, dtype=gm.float32):
    c = gm.tensor(np.asarray(a), dtype=dtype)
    return c, c.cuda()


@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_forward_backward(case, dtype):
    op, alpha, beta, reads_output = case
    r = np.random.default_rng(op)
    x = np.concatenate([r.standard_normal(3 * 7 * 45 - len(KINKS)) * 4, KINKS]).reshape(3, 7, 45)
    xc, xd = pair(x, dtype)
    gc, gd = pair(r.standard_normal((3, 7, 45)), dtype)
    oc, od = _C.activation(op, xc, alpha, None, beta), _C.activation(op, xd, alpha, None, beta)
    assert_close(od, oc, exact=op in EXACT)
    sc, sd = (oc, od) if reads_output else (xc, xd)
    assert_close(_C.activation_backward(op, gd, sd, alpha, False, beta),
                 _C.activation_backward(op, gc, sc, alpha, False, beta), exact=op in EXACT)
    # into_grad: the result is written over the incoming gradient, with the same values
    dx = _C.activation_backward(op, gd, sd, alpha, True, beta)
    assert dx is gd
    assert_close(gd, _C.activation_backward(op, gc, sc, alpha, False, beta), exact=op in EXACT)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_inplace_and_special_values(case):
    op, alpha, beta, _ = case
    a = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 80.0, -800.0, 1e-30, -2.5, 3.0, -3.0])
    xc, xd = pair(a)
    assert _C.activation(op, xd, alpha, xd, beta) is xd
    _C.activation(op, xc, alpha, xc, beta)
    assert_close(xd, xc, exact=op in EXACT)
    gc, gd = pair(np.ones_like(a))
    assert_close(_C.activation_backward(op, gd, xd, alpha, False, beta),
                 _C.activation_backward(op, gc, xc, alpha, False, beta), exact=op in EXACT)


def test_empty_and_memory():
    r = np.random.default_rng(3)
    for op, alpha, beta, _ in CASES:
        xc, xd = pair(np.zeros((0, 4)))
        assert tuple(_C.activation(op, xd, alpha, None, beta).shape) == (0, 4)
        assert tuple(_C.activation_backward(op, xd, xd, alpha, False, beta).shape) == (0, 4)
        xc, xd = pair(r.standard_normal((64, 33)))
        for dev, x in (("cuda", xd), ("cpu", xc)):
            before = gm.memory.memory_allocated(dev)
            keep = _C.activation(op, x, alpha, None, beta)
            grows = gm.memory.memory_allocated(dev) - before
            _C.activation(op, x, alpha, x, beta)
            assert gm.memory.memory_allocated(dev) - before == grows  # in place: nothing
            del keep
            if dev == "cuda":
                cuda_bytes = grows
        assert cuda_bytes == grows


FNS = {
    "silu": lambda t: F.silu(t), "silu_": lambda t: F.silu(t * 1.0, inplace=True),
    "hardswish": F.hardswish, "hardswish_": lambda t: F.hardswish(t * 1.0, inplace=True),
    "hardsigmoid_": lambda t: F.hardsigmoid(t * 1.0, inplace=True), "mish": F.mish,
    "relu6_": lambda t: F.relu6(t * 1.0, inplace=True), "hardtanh": lambda t: F.hardtanh(t, -0.5, 2.0),
    "elu_": lambda t: F.elu_(t * 1.0, 0.5), "elu_neg": lambda t: F.elu(t, -0.5),
    "softplus": lambda t: F.softplus(t, 2.0, 3.0),
}


def _device_autograd_works():
    """Autograd on CUDA needs the elementwise family's device copies (gradient accumulation, x * 1.0)."""
    if not HAVE_CUDA:
        return False
    try:
        t = gm.ones(2, 3).cuda().requires_grad_()
        (t * 1.0).sum().backward()
        return True
    except RuntimeError:
        return False


@pytest.mark.skipif(not _device_autograd_works(), reason="CUDA autograd needs the elementwise family's kernels")
@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("name", FNS)
def test_autograd(name, dtype):
    r = np.random.default_rng(5)
    x = np.concatenate([r.standard_normal(36 - len(KINKS)) * 4, KINKS]).reshape(4, 9)
    g = r.standard_normal((4, 9))
    res = []
    for dev in ("cpu", "cuda"):
        t = gm.tensor(x, dtype=dtype).to(dev).requires_grad_()
        out = FNS[name](t)
        out.backward(gm.tensor(g, dtype=dtype).to(dev))
        res.append((out.detach(), t.grad))
    assert_close(res[1][0], res[0][0])
    assert_close(res[1][1], res[0][1])


# ---- prelu -------------------------------------------------------------------------------------------------------
PRELU = [((2, 3, 4, 5), 3), ((2, 3, 4, 5), 1), ((4, 3), 3), ((6,), 1), ((0, 3, 2), 3), ((2, 300, 7), 300),
         ((2, 0, 3), 1), ((700, 3, 2), 3), ((700, 3, 2), 1), ((3, 1500, 2), 1500), ((4, 2, 0), 2)]


@pytest.mark.parametrize("dtype", FLOATS, ids=NAMES.get)
@pytest.mark.parametrize("xs,wn", PRELU)
def test_prelu(xs, wn, dtype):
    r = np.random.default_rng(7)
    x = r.standard_normal(xs)
    if x.size:
        x.flat[::4] = 0.0
    xc, xd = pair(x, dtype)
    wc, wd = pair(np.linspace(-0.6, 0.9, wn), dtype)
    gc, gd = pair(r.standard_normal(xs), dtype)
    assert_close(_C.prelu(xd, wd), _C.prelu(xc, wc), exact=True)  # one multiply: the CPU's rounding
    dxc, dwc = _C.prelu_backward(gc, xc, wc)
    dxd, dwd = _C.prelu_backward(gd, xd, wd)
    assert_close(dxd, dxc, exact=True)
    assert_close(dwd, dwc)  # sums in double, in another order
    dx, dw = _C.prelu_backward(gd, xd, wd, True, True, True)  # into_grad: dweight read grad before dx overwrote it
    assert dx is gd
    assert_close(gd, dxc, exact=True)
    assert_close(dw, dwc)
    only_w = _C.prelu_backward(gd, xd, wd, need_input=False)
    assert only_w[0] is None


def test_prelu_memory_matches_cpu():
    r = np.random.default_rng(8)
    xc, xd = pair(r.standard_normal((8, 16, 5, 5)))
    wc, wd = pair(r.standard_normal(16))
    sizes = {}
    for dev, x, w in (("cuda", xd, wd), ("cpu", xc, wc)):
        before = gm.memory.memory_allocated(dev)
        keep = _C.prelu(x, w), _C.prelu_backward(x, x, w)
        sizes[dev] = gm.memory.memory_allocated(dev) - before
        del keep
    assert sizes["cuda"] == sizes["cpu"]


@pytest.mark.skipif(not _device_autograd_works(), reason="CUDA autograd needs the elementwise family's kernels")
def test_prelu_module_autograd():
    r = np.random.default_rng(9)
    x = r.standard_normal((3, 4, 5, 5))
    res = []
    for dev in ("cpu", "cuda"):
        m = gm.nn.PReLU(4).to(dev)
        t = gm.tensor(x, dtype=gm.float32).to(dev).requires_grad_()
        y = m(t * 1.0)
        (y * y).sum().backward()
        res.append((y.detach(), t.grad, m.weight.grad))
    for d, c in zip(res[1], res[0]):
        assert_close(d, c)
