"""The activations of modern CNNs (silu, hardswish, hardsigmoid, mish, hardtanh/relu6, elu, softplus; csrc/
ops_activation.c, kernels/cpu/activation.c, _core/activation.py), their modules and in-place forms, softmax's
modules and the torch-level names (gm.relu, gm.sigmoid_, x.tanh_() ...).

Each op is checked against a NumPy formula written here (every float dtype), against PyTorch (values and
gradients, float64 and float32, including the points where PyTorch picks a subgradient), by float64 finite
differences, and on meta (the same allocator bytes as the CPU, forward and backward). Memory claims in exact
bytes: which ops keep their output (free when the next layer keeps it too) and which their input, and what the
in-place forms cost."""
import math

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C
from gradcheck import assert_close, check_against_torch, gradcheck, to_numpy
from nnops_util import FLOAT_TYPES, TOL, R, T, allocated, cuda_autocast, stored


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x, beta=1.0, threshold=20.0):
    with np.errstate(over="ignore"):
        return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


# name: (gpumemnet fn, torch fn name and kwargs, NumPy reference, saves its output for backward)
ACTS = {
    "silu": (F.silu, ("silu", {}), lambda x: x * _sig(x), False),
    "hardswish": (F.hardswish, ("hardswish", {}), lambda x: x * np.clip(x + 3, 0, 6) / 6, False),
    "hardsigmoid": (F.hardsigmoid, ("hardsigmoid", {}), lambda x: np.clip(x + 3, 0, 6) / 6, True),
    "mish": (F.mish, ("mish", {}), lambda x: x * np.tanh(_softplus(x)), False),
    "hardtanh": (F.hardtanh, ("hardtanh", {}), lambda x: np.clip(x, -1, 1), True),
    "hardtanh_05_2": (lambda x: F.hardtanh(x, min_val=0.5, max_val=2.0), ("hardtanh", dict(min_val=0.5, max_val=2.0)),
                      lambda x: np.clip(x, 0.5, 2.0), True),
    "relu6": (F.relu6, ("relu6", {}), lambda x: np.clip(x, 0, 6), True),
    "elu": (F.elu, ("elu", {}), lambda x: np.where(x > 0, x, np.expm1(x)), True),
    "elu_0.5": (lambda x: F.elu(x, 0.5), ("elu", dict(alpha=0.5)), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)),
                True),
    "elu_neg": (lambda x: F.elu(x, -0.7), ("elu", dict(alpha=-0.7)), lambda x: np.where(x > 0, x, -0.7 * np.expm1(x)),
                False),
    "softplus": (F.softplus, ("softplus", {}), _softplus, False),
    "softplus_2_3": (lambda x: F.softplus(x, beta=2, threshold=3), ("softplus", dict(beta=2, threshold=3)),
                     lambda x: _softplus(x, 2.0, 3.0), False),
}
# The kinks of each op, and values straddling them: PyTorch's choice of subgradient must be matched exactly.
KINKS = np.array([-7.0, -3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 6.0, 8.0, -25.0, 30.0])


def _torch_fn(name):
    torch = pytest.importorskip("torch")
    op, kw = ACTS[name][1]
    return lambda t: getattr(torch.nn.functional, op)(t, **kw)


def _away_from_kinks(n, seed):
    """Data for finite differences: no point within 0.05 of a kink of any op (0, +-1, +-3, 0.5, 2, 6)."""
    x = np.random.default_rng(seed).uniform(-8, 8, n)
    for k in (-6, -3, -1, 0, 0.5, 1, 2, 3, 6):
        x = np.where(np.abs(x - k) < 0.05, k + 0.1, x)
    return x


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("name", ACTS)
def test_forward_against_numpy(name, dtype):
    fn, _, ref, _ = ACTS[name]
    x = np.concatenate([R(60) * 4, KINKS])
    got = fn(T(x, dtype))
    assert got.dtype == dtype and tuple(got.shape) == x.shape
    atol, rtol = TOL[dtype]
    assert_close(to_numpy(got).astype(np.float64), ref(stored(x, dtype)), atol, rtol, what=name)


@pytest.mark.parametrize("name", ACTS)
def test_against_torch_float64_including_kinks(name):
    """Values and gradients, at random points and exactly at the kinks (-3, 3, min_val, max_val, 0)."""
    x = np.concatenate([R(40) * 4, KINKS])
    check_against_torch(ACTS[name][0], _torch_fn(name), [x], atol=1e-12, rtol=1e-7, what=name)


@pytest.mark.parametrize("name", ACTS)
def test_against_torch_float32(name):
    torch = pytest.importorskip("torch")
    x = np.concatenate([R(200) * 5, KINKS]).astype(np.float32)
    g = R(x.size).astype(np.float32)
    a = gm.tensor(x, requires_grad=True)
    y = ACTS[name][0](a * 1.0)
    (y * gm.tensor(g)).sum().backward()
    b = torch.tensor(x, requires_grad=True)
    z = _torch_fn(name)(b * 1.0)
    (z * torch.tensor(g)).sum().backward()
    assert_close(to_numpy(y), z.detach().numpy(), 2e-6, 2e-6, what=name)
    # elu from its output: alpha * e^x is out + alpha, exact to float32's rounding of out (~ 6e-8 * alpha)
    assert_close(to_numpy(a.grad), b.grad.numpy(), 3e-6, 2e-6, what=name + " grad")


@pytest.mark.parametrize("name", ACTS)
def test_gradcheck(name):
    gradcheck(ACTS[name][0], [T(_away_from_kinks(30, 1), requires_grad=True)], what=name)


@pytest.mark.parametrize("dtype", [gm.float16, gm.bfloat16], ids=str)
@pytest.mark.parametrize("name", ACTS)
def test_half_forward_and_backward_close_to_float32(name, dtype):
    fn = ACTS[name][0]
    x = stored(_away_from_kinks(64, 2), dtype)  # exactly representable: both runs see the same inputs
    g = stored(R(64), dtype)
    outs = {}
    for dt in (gm.float32, dtype):
        a = T(x, dt, requires_grad=True)
        y = fn(a * 1.0)
        assert y.dtype == dt
        (y * T(g, dt)).sum().backward()
        assert a.grad.dtype == dt
        outs[dt] = (to_numpy(y).astype(np.float64), to_numpy(a.grad).astype(np.float64))
    tol = 4e-3 if dtype == gm.float16 else 3e-2
    scale = 1 + np.abs(outs[gm.float32][0]).max()  # near-cancelling outputs: tolerance relative to the range
    assert_close(outs[dtype][0], outs[gm.float32][0], tol * scale, tol, what=name)
    assert_close(outs[dtype][1], outs[gm.float32][1], tol * (1 + np.abs(outs[gm.float32][1]).max()), tol,
                 what=name + " grad")


@pytest.mark.parametrize("dtype", [gm.float64, gm.float32], ids=str)
@pytest.mark.parametrize("name", ACTS)
def test_special_values_as_torch(name, dtype):
    """NaN, +-inf and far-out values give PyTorch's results, forward and backward (NaN where it has NaN)."""
    torch = pytest.importorskip("torch")
    x = np.array([np.nan, np.inf, -np.inf, -800.0, 800.0, -90.0, 90.0])
    t = T(x, dtype, requires_grad=True)
    y = ACTS[name][0](t * 1.0)
    y.backward(gm.ones_like(y))
    b = torch.tensor(x, dtype=torch.float64 if dtype == gm.float64 else torch.float32, requires_grad=True)
    z = _torch_fn(name)(b * 1.0)
    z.backward(torch.ones_like(z))
    np.testing.assert_allclose(to_numpy(y), z.detach().numpy(), rtol=1e-6, atol=0, equal_nan=True, err_msg=name)
    np.testing.assert_allclose(to_numpy(t.grad), b.grad.numpy(), rtol=1e-6, atol=1e-30, equal_nan=True,
                               err_msg=name)


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
def test_hardsigmoid_gradient_from_output_next_to_the_kinks(dtype):
    """hardsigmoid's backward reads its output: the inputs one step inside (-3, 3) in each dtype must still give
    outputs strictly inside (0, 1) after rounding, so the gradient is 1/6 there (and 0 at -3 and 3 themselves):
    PyTorch's 1/6, float's for every dtype."""
    step = {gm.float64: 2.0 ** -51, gm.float32: 2.0 ** -22, gm.float16: 2.0 ** -9, gm.bfloat16: 2.0 ** -6}[dtype]
    x = np.array([-3.0, -3.0 + step, 3.0 - step, 3.0])
    assert np.all(stored(x, dtype) == x)  # the neighbours of +-3 in this dtype
    for inplace in (False, True):
        a = T(x, dtype, requires_grad=True)
        y = F.hardsigmoid(a * 1.0, inplace=inplace)
        y.backward(gm.ones_like(y))
        sixth = float(np.float32(1 / 6))
        assert_close(to_numpy(a.grad).astype(np.float64), [0.0, sixth, sixth, 0.0], *TOL[dtype], what=str(inplace))


# ---- in-place forms ---------------------------------------------------------------------------------------------
INPLACE = {
    "silu": (lambda t: F.silu(t, inplace=True), "silu"),
    "hardswish": (lambda t: F.hardswish(t, inplace=True), "hardswish"),
    "hardsigmoid": (lambda t: F.hardsigmoid(t, inplace=True), "hardsigmoid"),
    "mish": (lambda t: F.mish(t, inplace=True), "mish"),
    "hardtanh": (lambda t: F.hardtanh(t, inplace=True), "hardtanh"),
    "hardtanh_": (lambda t: F.hardtanh_(t, 0.5, 2.0), "hardtanh_05_2"),
    "relu6": (lambda t: F.relu6(t, inplace=True), "relu6"),
    "elu": (lambda t: F.elu(t, inplace=True), "elu"),
    "elu_": (lambda t: F.elu_(t, 0.5), "elu_0.5"),
}


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_plain(name):
    fn, ref_name = INPLACE[name]
    x = np.concatenate([R(20) * 4, KINKS])
    t = T(x)
    v = t._version
    assert fn(t) is t and t._version > v
    assert_close(t, ACTS[ref_name][2](x), 1e-12, 1e-10, what=name)
    base = T(R(3, 4) * 4)  # non-contiguous: written back through the strided view
    ref = ACTS[ref_name][2](to_numpy(base).T)
    view = base.transpose(0, 1)
    fn(view)
    assert_close(view, ref, 1e-12, 1e-10, what=name)


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_in_graph_against_torch(name):
    """x * 1 then act_(.): the graph's gradient is PyTorch's (also at the kinks), and gradcheck agrees."""
    torch = pytest.importorskip("torch")
    fn, ref_name = INPLACE[name]
    _, (op, kw), _, _ = ACTS[ref_name]
    x = np.concatenate([R(30) * 4, KINKS])
    tfn = {"hardtanh_": lambda t: torch.nn.functional.hardtanh_(t, 0.5, 2.0),
           "elu_": lambda t: torch.nn.functional.elu_(t, 0.5)}.get(
        name, lambda t: getattr(torch.nn.functional, op)(t, inplace=True, **kw))
    check_against_torch(lambda a: fn(a * 1.0), lambda b: tfn(b * 1.0), [x], atol=1e-12, rtol=1e-7, what=name)
    gradcheck(lambda a: fn(a * 1.0), [T(_away_from_kinks(12, 3), requires_grad=True)], what=name)


def test_inplace_refusals():
    leaf = T(R(3), requires_grad=True)
    for name in INPLACE:
        with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
            INPLACE[name][0](leaf)
    h = leaf * 2.0  # alive: the write into its slice is recorded on it (test_view_writes.py)
    before = h.detach().numpy()[1:].copy()
    F.silu(h[1:], inplace=True)
    np.testing.assert_allclose(h.detach().numpy()[1:], before / (1 + np.exp(-before)), rtol=1e-6)
    with pytest.raises(RuntimeError, match="elu_: the in-place form cannot be differentiated with alpha=-0.5"):
        F.elu(leaf * 1.0, -0.5, inplace=True)
    with gm.no_grad():  # allowed without grad mode, as PyTorch
        F.elu_(leaf, -0.5)
        F.silu(leaf, inplace=True)
    # the saved input of silu is protected by the version counter
    z = leaf * 1.0
    s = F.silu(z)
    F.relu_(z)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        s.sum().backward()


# ---- memory ----------------------------------------------------------------------------------------------------
N = 128 * 128
NBYTES = N * 4


@pytest.mark.parametrize("name", ACTS)
def test_backward_keeps_output_or_input(name):
    """An op that keeps its output lets the temporary input (x * 2) go; one that needs the input keeps it."""
    fn, _, _, saves_output = ACTS[name]
    x = gm.randn(128, 128, requires_grad=True)
    before = allocated()
    y = fn(x * 2.0)
    assert allocated() - before == NBYTES + (0 if saves_output else NBYTES)
    del y


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_memory(name):
    """In place: nothing without a graph; in a graph nothing for the ops that read their output, one copy of the
    input for silu/hardswish/mish (PyTorch keeps that copy too)."""
    fn, ref_name = INPLACE[name]
    saves_output = ACTS[ref_name][3]
    x = gm.randn(128, 128)
    before = allocated()
    fn(x)
    assert allocated() == before
    a = gm.randn(128, 128, requires_grad=True)
    h = a * 2.0
    before = allocated()
    y = fn(h)
    assert y is h and allocated() - before == (0 if saves_output else NBYTES)
    del h
    y.sum().backward()


def _fwd_bwd_bytes(device, fn):
    x = gm.zeros(64, 33, device=device).requires_grad_()
    base = allocated_on(device)
    gm.memory.reset_peak_memory_stats(device)
    y = fn(x * 2.0)
    after_forward = allocated_on(device) - base
    y.backward(gm.ones(64, 33, device=device))
    return after_forward, gm.memory.max_memory_allocated(device) - base, allocated_on(device) - base


def allocated_on(device):
    return _C.memory_allocated(device)


@pytest.mark.parametrize("name", list(ACTS) + [n + "_inplace" for n in INPLACE])
def test_meta_bytes_equal_cpu_bytes(name):
    fn = INPLACE[name[:-8]][0] if name.endswith("_inplace") else ACTS[name][0]
    assert _fwd_bwd_bytes("meta", fn) == _fwd_bwd_bytes("cpu", fn)
    y = fn(gm.empty(4, 5, device="meta"))
    assert y._device == "meta" and tuple(y.shape) == (4, 5)


@pytest.mark.parametrize("name", ["silu", "hardswish", "hardsigmoid", "mish", "relu6", "elu", "softplus"])
def test_backward_writes_over_a_free_gradient(name):
    """The engine hands over the gradient from the multiplication; the activation writes its result there."""
    fn = ACTS[name][0]
    costs = []
    for hold in (False, True):
        x = gm.randn(128, 128, requires_grad=True)
        y = fn(x * 3.0)
        held = []
        if hold:
            y.register_hook(held.append)
        loss = (y * 2.0).sum()
        gm.memory.record_history(True, device="cpu")
        loss.backward()
        costs.append(sum(e["delta"] for e in gm.memory.history("cpu") if e["kind"] == "alloc"))
        gm.memory.record_history(False, device="cpu")
    assert costs[1] - costs[0] == NBYTES


# ---- errors ----------------------------------------------------------------------------------------------------
def test_errors():
    with pytest.raises(TypeError, match="silu: input must be a floating point tensor"):
        F.silu(gm.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="hardswish: input must be a Tensor"):
        F.hardswish([1.0, 2.0])
    with pytest.raises(TypeError, match="hardtanh: min_val must be a number, got str"):
        F.hardtanh(T(R(3)), "a")
    with pytest.raises(TypeError, match="softplus: threshold must be a number"):
        F.softplus(T(R(3)), 1.0, None)
    with pytest.raises(ValueError, match="unknown op 13"):
        _C.activation(13, T(R(3)))
    with pytest.raises(ValueError, match=r"grad shape \(3,\) does not match saved tensor shape \(4,\)"):
        _C.activation_backward(11, T(R(3)), T(R(4)), 1.0)
    with pytest.raises(AssertionError, match="max_val"):
        nn.Hardtanh(1.0, 1.0)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D instead"):
        nn.Softmax2d()(T(R(3, 4)))


def test_hardtanh_bounds():
    """F.hardtanh refuses min_val > max_val (as PyTorch; nn.Hardtanh asserts min_val < max_val) and accepts equal
    bounds: a constant, gradient 0."""
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=r"min_val cannot be greater than max_val \(got min_val=1.0, max_val=-1.0"):
        F.hardtanh(T(R(3)), 1.0, -1.0)
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh_(T(R(3)), 1.0, -1.0)
    x = np.concatenate([R(10), KINKS])
    check_against_torch(lambda a: F.hardtanh(a, 0.5, 0.5), lambda b: torch.nn.functional.hardtanh(b, 0.5, 0.5),
                        [x], atol=0, rtol=0)


# ---- modules and torch-level names -------------------------------------------------------------------------------
MODULES = [("SiLU", {}), ("SiLU", dict(inplace=True)), ("Hardswish", {}), ("Hardswish", dict(inplace=True)),
           ("Hardsigmoid", dict(inplace=True)), ("Mish", {}), ("Hardtanh", dict(min_val=-2.0, max_val=0.5)),
           ("ReLU6", dict(inplace=True)), ("ELU", dict(alpha=0.3, inplace=True)), ("Softplus", dict(beta=2.0)),
           ("Softmax", dict(dim=1)), ("LogSoftmax", dict(dim=-1)), ("Softmax2d", {}), ("LeakyReLU", dict(inplace=True)),
           ("GELU", dict(approximate="tanh")), ("Identity", {})]


@pytest.mark.parametrize("cls,kw", MODULES, ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v)))
def test_modules_against_torch(cls, kw):
    torch = pytest.importorskip("torch")
    x = np.concatenate([R(2, 3, 2, 2) * 4, KINKS[:12].reshape(1, 3, 2, 2)])
    m, tm = getattr(nn, cls)(**kw), getattr(torch.nn, cls)(**kw)
    assert repr(m) == repr(tm)
    check_against_torch(lambda a: m(a * 1.0), lambda b: tm(b * 1.0), [x], atol=1e-12, rtol=1e-7, what=cls)


def test_torch_level_names_and_methods():
    torch = pytest.importorskip("torch")
    x = R(3, 4) * 3
    for name in ("relu", "sigmoid", "tanh"):
        t = T(x)
        assert_close(getattr(gm, name)(t), getattr(torch, name)(torch.tensor(x)).numpy(), 1e-12, 1e-10, what=name)
        assert_close(getattr(t, name)(), getattr(torch, name)(torch.tensor(x)).numpy(), 1e-12, 1e-10, what=name)
        ref = getattr(torch, name)(torch.tensor(x)).numpy()
        for inplace in (getattr(gm, name + "_"), getattr(gm.Tensor, name + "_")):
            u = T(x)
            assert inplace(u) is u
            assert_close(u, ref, 1e-12, 1e-10, what=name + "_")
    for name in ("softmax", "log_softmax"):
        ref = getattr(torch, name)(torch.tensor(x), 1).numpy()
        assert_close(getattr(gm, name)(T(x), 1), ref, 1e-12, 1e-10, what=name)
        assert_close(getattr(T(x), name)(dim=1), ref, 1e-12, 1e-10, what=name)
    # sigmoid_/tanh_ keep their output for backward: fine in a graph
    check_against_torch(lambda a: (a * 1.0).sigmoid_() * (a * 1.0).tanh_(),
                        lambda b: (b * 1.0).sigmoid_() * (b * 1.0).tanh_(), [x], atol=1e-12, rtol=1e-7)


def test_autocast_softplus_is_float32_on_cuda_others_follow_input():
    """softplus is on PyTorch's CUDA autocast float32 list and not on its CPU one (PyTorch 2.15's CPU autocast gives
    bfloat16 for a bfloat16 input); a meta tensor follows the region's device."""
    x = T(R(4, 5), gm.bfloat16)
    with gm.autocast("cpu"):
        assert F.softplus(x).dtype == gm.bfloat16
        for name in ("silu", "hardswish", "hardsigmoid", "mish", "relu6", "elu"):
            assert ACTS[name][0](x).dtype == gm.bfloat16
    with cuda_autocast(dtype=gm.bfloat16):
        assert F.softplus(x.to("meta")).dtype == gm.float32
        assert F.silu(x.to("meta")).dtype == gm.bfloat16
    assert F.softplus(x).dtype == gm.bfloat16
    a = math.log1p(math.exp(1.0))
    assert abs(F.softplus(T([1.0])).item() - a) < 1e-6


def _mobilenet_v3_block(nn_):
    """torchvision's MobileNetV3 inverted residual with squeeze-excitation, written against either library's nn;
    Conv2dNormActivation's activations are in place (its default), as in torchvision."""
    class SE(nn_.Module):
        def __init__(self, c, s):
            super().__init__()
            self.avgpool = nn_.AdaptiveAvgPool2d(1)
            self.fc1, self.fc2 = nn_.Conv2d(c, s, 1), nn_.Conv2d(s, c, 1)
            self.activation, self.scale_activation = nn_.ReLU(), nn_.Hardsigmoid()

        def forward(self, x):
            scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
            return scale * x

    return nn_.Sequential(
        nn_.Conv2d(4, 8, 1, bias=False), nn_.BatchNorm2d(8), nn_.Hardswish(inplace=True),
        nn_.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn_.BatchNorm2d(8), nn_.SiLU(inplace=True), SE(8, 4),
        nn_.Conv2d(8, 6, 1, bias=False), nn_.BatchNorm2d(6), nn_.ReLU6(inplace=True), nn_.Mish(),
        nn_.Conv2d(6, 6, 1), nn_.ELU(inplace=True), nn_.Conv2d(6, 3, 1), nn_.PReLU(3), nn_.Softplus(), nn_.Flatten(),
        nn_.LogSoftmax(dim=1))


def test_mobilenet_v3_style_block_trains_as_torch():
    """The activations together in a torchvision-style block (in-place forms after batch norm, squeeze-excitation
    with hardsigmoid): the same loss and parameter gradients as PyTorch from the same weights."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = _mobilenet_v3_block(torch.nn).double()
    m = _mobilenet_v3_block(nn).double()
    m.load_state_dict({k: gm.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = R(2, 4, 5, 5)
    y, ty = m(T(x)), tm(torch.tensor(x))
    assert_close(y, ty.detach().numpy(), 1e-10, 1e-8, what="output")
    (y * T(np.arange(y.numel()).reshape(y.shape))).sum().backward()
    (ty * torch.arange(ty.numel(), dtype=torch.float64).reshape(ty.shape)).sum().backward()
    grads = dict(tm.named_parameters())
    for name, p in m.named_parameters():
        assert_close(p.grad, grads[name].grad.numpy(), 1e-9, 1e-7, what=name)
