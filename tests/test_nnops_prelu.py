"""prelu and nn.PReLU (csrc/ops_activation.c, kernels/cpu/activation.c, _core/activation.py): values and both
gradients against NumPy and PyTorch (one shared slope or one per channel, inputs of 0 to 4 dims, at 0 too),
float64 finite differences for the input and the weight, the error paths, meta bytes equal to the CPU's, the
gradient written over a free incoming one, and autocast (a lower-precision op, as in PyTorch)."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C
from gradcheck import assert_close, check_against_torch, gradcheck, to_numpy
from nnops_util import FLOAT_TYPES, NZ, TOL, R, T, stored


def prelu_ref(x, w):
    shape = [1] * x.ndim
    if x.ndim >= 2:
        shape[1] = -1
    return np.where(x > 0, x, np.asarray(w).reshape(shape if np.size(w) > 1 else [1] * x.ndim) * x)


# (input shape, weight shape)
CASES = [((2, 3, 4, 5), (3,)), ((2, 3, 4, 5), (1,)), ((4, 3), (3,)), ((6,), (1,)), ((2, 5, 7), (5,)), ((3, 2), ()),
         ((), (1,))]


def _data(shape, seed=0):
    x = np.asarray(np.random.default_rng(seed).standard_normal(shape) * 2)
    if x.size:
        x.flat[:: 5] = 0.0  # PyTorch's choice at 0: the input gradient is weight * g
    return x


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("xs,ws", CASES)
def test_forward_against_numpy(xs, ws, dtype):
    x, w = _data(xs), np.linspace(-0.5, 0.7, int(np.prod(ws))).reshape(ws)
    got = F.prelu(T(x, dtype), T(w, dtype))
    assert got.dtype == dtype and tuple(got.shape) == xs
    atol, rtol = TOL[dtype]
    assert_close(to_numpy(got).astype(np.float64), prelu_ref(stored(x, dtype), stored(w, dtype)), atol, rtol)


@pytest.mark.parametrize("xs,ws", CASES)
def test_against_torch(xs, ws):
    torch = pytest.importorskip("torch")
    x, w = _data(xs, 1), np.linspace(-0.5, 0.7, int(np.prod(ws))).reshape(ws)
    check_against_torch(F.prelu, torch.nn.functional.prelu, [x, w], atol=1e-12, rtol=1e-9)
    check_against_torch(lambda a, b: a.prelu(b), lambda a, b: a.prelu(b), [x, w], atol=1e-12, rtol=1e-9)
    check_against_torch(gm.prelu, torch.prelu, [x, w], atol=1e-12, rtol=1e-9)


def test_against_torch_float32():
    torch = pytest.importorskip("torch")
    x, w = _data((8, 16, 9, 9), 2).astype(np.float32), np.linspace(-1, 1, 16).astype(np.float32)
    a, b = gm.tensor(x, requires_grad=True), gm.tensor(w, requires_grad=True)
    (F.prelu(a, b) ** 2).sum().backward()
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (torch.prelu(ta, tb) ** 2).sum().backward()
    assert_close(a.grad, ta.grad.numpy(), 1e-6, 1e-5)
    assert_close(b.grad, tb.grad.numpy(), 1e-3, 1e-5)  # sums of 648 terms in another order


@pytest.mark.parametrize("ws", [(3,), (1,)])
def test_gradcheck(ws):
    gradcheck(F.prelu, [T(NZ(2, 3, 2, 2), requires_grad=True), T(R(*ws), requires_grad=True)])


def test_only_one_gradient():
    x, w = T(NZ(2, 3, 4), requires_grad=True), T(R(3))
    F.prelu(x, w).sum().backward()
    assert x.grad is not None and w.grad is None
    dx, dw = _C.prelu_backward(T(R(2, 3)), T(R(2, 3)), T(R(3)), need_input=False)
    assert dx is None and tuple(dw.shape) == (3,)


def test_errors():
    with pytest.raises(ValueError, match="mismatch of parameter numbers and input channel size: found parameter "
                                         "numbers = 2 and channel size = 3"):
        F.prelu(T(R(2, 3, 4)), T(R(2)))
    with pytest.raises(ValueError, match="channel size = 1"):
        F.prelu(T(R(5)), T(R(5)))
    with pytest.raises(ValueError, match="expected weight to be a scalar or 1D tensor, but got 2 dims"):
        F.prelu(T(R(2, 3)), T(R(3, 1)))
    with pytest.raises(TypeError, match="prelu: input dtype float64 does not match weight dtype float32"):
        F.prelu(T(R(2, 3)), gm.ones(3))
    with pytest.raises(TypeError, match="prelu: weight must be a Tensor"):
        F.prelu(T(R(2, 3)), 0.25)
    with pytest.raises(TypeError, match="prelu: input must be a floating point tensor"):
        F.prelu(gm.tensor([1, 2]), gm.tensor([1]))
    with pytest.raises(ValueError, match=r"prelu_backward: grad shape \(2, 3\) does not match input shape \(3, 3\)"):
        _C.prelu_backward(T(R(2, 3)), T(R(3, 3)), T(R(3)))
    with pytest.raises(ValueError, match="num_parameters must be a positive int"):
        nn.PReLU(0)


def _bytes(device, ws):
    x = gm.zeros(4, 3, 5, 5, device=device).requires_grad_()
    w = gm.full(ws, 0.25, device=device).requires_grad_()
    base = _C.memory_allocated(device)
    gm.memory.reset_peak_memory_stats(device)
    y = F.prelu(x * 2.0, w)
    fwd = _C.memory_allocated(device) - base
    y.backward(gm.ones(4, 3, 5, 5, device=device))
    return fwd, gm.memory.max_memory_allocated(device) - base, _C.memory_allocated(device) - base


@pytest.mark.parametrize("ws", [(3,), (1,)])
def test_meta_bytes_equal_cpu_bytes(ws):
    assert _bytes("meta", ws) == _bytes("cpu", ws)
    y = F.prelu(gm.empty(2, 3, 4, device="meta"), gm.empty(3, device="meta"))
    assert y._device == "meta" and tuple(y.shape) == (2, 3, 4)


def test_backward_writes_over_a_free_gradient():
    nbytes = 128 * 128 * 4
    costs = []
    for hold in (False, True):
        x = gm.randn(128, 128, requires_grad=True)
        w = gm.full((128,), 0.2).requires_grad_()
        y = F.prelu(x * 3.0, w)
        held = []
        if hold:
            y.register_hook(held.append)
        loss = (y * 2.0).sum()
        gm.memory.record_history(True, device="cpu")
        loss.backward()
        costs.append(sum(e["delta"] for e in gm.memory.history("cpu") if e["kind"] == "alloc"))
        gm.memory.record_history(False, device="cpu")
    assert costs[1] - costs[0] == nbytes


def test_module_against_torch():
    torch = pytest.importorskip("torch")
    for n in (1, 3):
        m, tm = nn.PReLU(n), torch.nn.PReLU(n)
        assert repr(m) == repr(tm) and tuple(m.weight.shape) == (n,)
        assert_close(m.weight, tm.weight.detach().numpy(), 0, 0)
        x = _data((2, 3, 4, 4), 3).astype(np.float32)
        y, ty = m(gm.tensor(x)), tm(torch.tensor(x))
        (y * y).sum().backward()
        (ty * ty).sum().backward()
        assert_close(y, ty.detach().numpy(), 1e-6, 1e-6)
        assert_close(m.weight.grad, tm.weight.grad.numpy(), 1e-4, 1e-5)
    m = nn.PReLU(4, init=-0.1, dtype=gm.float64)
    assert m.weight.dtype == gm.float64 and np.all(to_numpy(m.weight) == -0.1)
    assert [name for name, _ in m.named_parameters()] == ["weight"]


def test_autocast_lowers_input_and_weight():
    m = nn.PReLU(3)
    x = gm.randn(2, 3, 4, requires_grad=True)
    with gm.autocast("cpu", dtype=gm.bfloat16):
        y = m(x)
    assert y.dtype == gm.bfloat16
    y.float().sum().backward()
    assert m.weight.grad.dtype == gm.float32 and x.grad.dtype == gm.float32


@pytest.mark.parametrize("xs,wn", [((700, 3, 2), 3), ((700, 3, 2), 1), ((3, 1500, 2), 1500), ((5, 400, 3), 1),
                                   ((1030, 1), 1), ((5000, 3, 4), 1)])
def test_weight_gradient_partial_sums(xs, wn):
    """The weight's gradient is summed per (outer chunk, channel) segment (kernels/activation_ops.h): shapes whose
    chunks do not divide the outer dim, more channels than segments, a single shared weight (over 32768 elements:
    the threaded path). Against NumPy, and bit-identical for any thread count (the order of the sums depends on
    the shape only)."""
    x, g = _data(xs, 4), np.random.default_rng(5).standard_normal(xs)
    w = np.linspace(-0.3, 0.4, wn)
    axes = tuple(d for d in range(len(xs)) if d != 1) if wn > 1 else tuple(range(len(xs)))
    ref = np.where(x > 0, 0.0, x * g).sum(axis=axes).reshape(wn)
    got = []
    threads = gm.get_num_threads()
    try:
        for n in (1, 2):
            gm.set_num_threads(n)
            _, dw = _C.prelu_backward(T(g), T(x), T(w), need_input=False)
            got.append(to_numpy(dw))
    finally:
        gm.set_num_threads(threads)
    assert_close(got[0], ref, 1e-10, 1e-12)
    np.testing.assert_array_equal(got[0], got[1])
