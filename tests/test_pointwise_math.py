"""Pointwise math against PyTorch: sin ... exp2 and reciprocal (values and gradients, every float dtype, integer
inputs promoted to float32), fmod / remainder (%) / floor division (//) / atan2 (exact for integers, PyTorch's
float rules and gradients), lerp / addcmul / addcdiv, and the in-place forms (their results, their refusals in a
graph). Each runs on the CPU and on CUDA (the emulator where there is no GPU)."""
import functools

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)
from nnops_util import cuda_autocast

torch = pytest.importorskip("torch")

UNARY = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "erf", "erfc", "log1p", "expm1", "log2",
         "log10", "exp2", "reciprocal"]
# inputs inside every function's domain (asin/acos need |x| < 1, log2/log10/reciprocal x > 0 for finite gradients)
POSITIVE = {"log2", "log10", "reciprocal"}


def _inputs(name, shape=(3, 5), seed=0):
    r = np.random.RandomState(seed)
    x = r.uniform(0.05, 0.95, shape) if name in POSITIVE else r.uniform(-0.95, 0.95, shape)
    return x.astype(np.float64)


def _both(x, dtype, device, requires_grad=False):
    a = gm.tensor(x, dtype=getattr(gm, dtype), device=device, requires_grad=requires_grad)
    b = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=requires_grad)
    return a, b


def _close(ours, theirs, rtol, atol):
    np.testing.assert_allclose(to_np(ours), theirs.detach().double().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_value_and_gradient_match_pytorch(name, dtype, device):
    x = _inputs(name)
    a, b = _both(x, dtype, device, requires_grad=True)
    ya, yb = getattr(a, name)(), getattr(b, name)()
    tol = (2e-6, 1e-7) if dtype == "float32" else (1e-13, 1e-15)
    _close(ya, yb, *tol)
    g = np.random.RandomState(1).randn(*x.shape)
    ya.backward(gm.tensor(g, dtype=ya.dtype, device=device))
    yb.backward(torch.tensor(g, dtype=yb.dtype))
    _close(a.grad, b.grad, tol[0] * 4, tol[1])
    assert a.grad.dtype == a.dtype and a.grad.device == a.device


@pytest.mark.parametrize("name", UNARY)
def test_unary_gradient_matches_float64_finite_differences(name):
    x = _inputs(name, shape=(6,), seed=2)
    a = gm.tensor(x, dtype=gm.float64, requires_grad=True)
    getattr(a, name)().sum().backward()
    f = lambda v: getattr(gm.tensor(v, dtype=gm.float64), name)().numpy()  # noqa: E731
    h = 1e-6
    numeric = (f(x + h) - f(x - h)) / (2 * h)
    np.testing.assert_allclose(a.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_unary_half_types_compute_in_float32_and_keep_the_dtype(name, dtype, device):
    x = _inputs(name)
    a, b = _both(x, dtype, device)
    ya, yb = getattr(a, name)(), getattr(b, name)()
    assert ya.dtype == a.dtype
    np.testing.assert_array_equal(to_np(ya), yb.double().numpy())  # one rounding of the float32 result


@pytest.mark.parametrize("name", UNARY)
def test_unary_of_integers_gives_float32(name, device):
    a = gm.tensor([1, 2, 3], device=device)
    ya, yb = getattr(a, name)(), getattr(torch.tensor([1, 2, 3]), name)()
    assert ya.dtype == gm.float32 and yb.dtype == torch.float32
    _close(ya, yb, 2e-6, 1e-7)


def test_unary_edges_match_pytorch(device):
    x = [0.0, -0.0, 1.0, -1.0, 2.0, float("inf"), float("-inf"), float("nan"), 1e-30, 89.0]
    for name in UNARY:
        a, b = _both(x, "float32", device)
        np.testing.assert_allclose(to_np(getattr(a, name)()), getattr(b, name)().double().numpy(), rtol=2e-6,
                                   atol=0, err_msg=name)


@pytest.mark.parametrize("name", UNARY)
def test_module_level_functions_and_aliases(name, device):
    a = gm.tensor(_inputs(name), device=device)
    np.testing.assert_array_equal(to_np(getattr(gm, name)(a)), to_np(getattr(a, name)()))
    for alias, of in (("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan")):
        np.testing.assert_array_equal(to_np(getattr(gm, alias)(a)), to_np(getattr(a, of)()))


# ---- fmod, remainder, floor division, atan2 ---------------------------------------------------------------------
BINARY = ["fmod", "remainder", "floor_divide", "atan2"]


def _pair(seed=3, n=400):
    r = np.random.RandomState(seed)
    a = r.randn(n) * 40
    b = r.randn(n) * 3
    a[:8] = [0.3, -0.3, 0.7, -7.0, 7.0, 0.0, -0.0, 5.0]  # 0.3 / 0.1 and friends: quotients just off an integer
    b[:8] = [0.1, 0.1, -0.1, 2.0, -2.0, 3.0, 3.0, 0.0]
    return a, b


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_float_values_match_pytorch(name, dtype, device):
    """fmod, remainder and // are exact (as PyTorch's); atan2 within the 1-ulp error of PyTorch's vectorised one."""
    x, y = _pair()
    (a, ta), (b, tb) = _both(x, dtype, device), _both(y, dtype, device)
    rtol = 0 if name != "atan2" else (3e-7 if dtype == "float32" else 1e-15)
    np.testing.assert_allclose(to_np(getattr(a, name)(b)), getattr(ta, name)(tb).double().numpy(), rtol=rtol,
                               atol=0, err_msg=name)


@pytest.mark.parametrize("name", ["fmod", "remainder", "floor_divide"])
def test_binary_integers_are_exact_beyond_float32(name, device):
    r = np.random.RandomState(4)
    x = r.randint(-2 ** 50, 2 ** 50, 500)
    y = r.randint(-60, 60, 500)
    y[y == 0] = 7
    ours = getattr(gm.tensor(x, device=device), name)(gm.tensor(y, device=device))
    theirs = getattr(torch.tensor(x), name)(torch.tensor(y))
    assert ours.dtype == gm.int64
    np.testing.assert_array_equal(to_np(ours), theirs.numpy())


def test_operators_percent_and_floor_division(device):
    x = gm.tensor([7, -7, 7, -7, 0], device=device)
    tx = torch.tensor([7, -7, 7, -7, 0])
    np.testing.assert_array_equal(to_np(x % 3), (tx % 3).numpy())
    np.testing.assert_array_equal(to_np(x // -2), (tx // -2).numpy())
    np.testing.assert_array_equal(to_np(10 % (x + 8)), (10 % (tx + 8)).numpy())
    np.testing.assert_array_equal(to_np(10 // (x + 8)), (10 // (tx + 8)).numpy())
    f = gm.tensor([5.5, -5.5], device=device)
    np.testing.assert_array_equal(to_np(f % 2), (torch.tensor([5.5, -5.5]) % 2).numpy())
    np.testing.assert_array_equal(to_np(f // 2), (torch.tensor([5.5, -5.5]) // 2).numpy())
    y = x.clone()
    y %= 4
    np.testing.assert_array_equal(to_np(y), (tx % 4).numpy())
    y //= 2
    np.testing.assert_array_equal(to_np(y), (tx % 4 // 2).numpy())


def test_div_rounding_modes_of_integers_are_exact(device):
    big = [2 ** 40 + 3, -(2 ** 40) - 3, 7, -7, 6]
    for mode in ("floor", "trunc"):
        for d in (7, -2, 3):
            ours = gm.tensor(big, device=device).div(d, rounding_mode=mode)
            theirs = torch.tensor(big).div(d, rounding_mode=mode)
            assert ours.dtype == gm.int64
            np.testing.assert_array_equal(to_np(ours), theirs.numpy(), err_msg=f"{mode} {d}")


def test_integer_zero_divisor_raises_on_the_cpu_as_pytorch(device):
    # PyTorch's CPU kernels raise RuntimeError("ZeroDivisionError"); its CUDA kernels return garbage, ours 0 there
    x = gm.tensor([5, -5], device=device)
    for name in ("fmod", "remainder", "floor_divide"):
        if device == "cpu":
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                getattr(x, name)(0)
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                getattr(torch.tensor([5, -5]), name)(0)
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # a zero anywhere in a broadcast divisor
                getattr(x.reshape(2, 1), name)(gm.tensor([[3, 2, 0]]).expand(2, 3))
            assert to_np(getattr(x, name)(gm.tensor([3, -2]))).tolist() == \
                getattr(torch.tensor([5, -5]), name)(torch.tensor([3, -2])).tolist()
        else:
            assert to_np(getattr(x, name)(0)).tolist() == [0, 0]
    if device == "cpu":
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            x.div(0, rounding_mode="trunc")
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            gm.tensor([3], dtype=gm.uint8) // 0
    assert to_np(x / 0).tolist() == [np.inf, -np.inf]  # true division: floats


def test_bool_operands_are_refused_as_in_pytorch():
    for lib in (gm, torch):
        with pytest.raises(NotImplementedError):
            lib.tensor([True]) % lib.tensor([True])


@pytest.mark.parametrize("name", ["fmod", "remainder", "atan2"])
def test_binary_gradients_match_pytorch(name, device):
    x, y = _pair(seed=5, n=50)
    x, y = x[10:], y[10:]  # away from the hand-picked edge values
    (a, ta), (b, tb) = _both(x, "float64", device, True), _both(y, "float64", device, True)
    out, tout = getattr(a, name)(b), getattr(ta, name)(tb)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    _close(a.grad, ta.grad, 1e-12, 1e-12)
    _close(b.grad, tb.grad, 1e-12, 1e-12)


def test_binary_gradient_broadcasts_and_takes_numbers(device):
    a = gm.tensor([[5.5, -3.0]], device=device, requires_grad=True)
    b = gm.tensor([[2.0], [-4.0]], device=device, requires_grad=True)
    ta = torch.tensor([[5.5, -3.0]], requires_grad=True)
    tb = torch.tensor([[2.0], [-4.0]], requires_grad=True)
    # number % tensor: PyTorch has no derivative for a Scalar self, so its reference is the tensor form
    (a.remainder(b).sum() + (7.0 % a).sum()).backward()
    (ta.remainder(tb).sum() + torch.full_like(ta, 7.0).remainder(ta).sum()).backward()
    _close(a.grad, ta.grad, 0, 0)
    _close(b.grad, tb.grad, 0, 0)


def test_floor_divide_has_no_derivative_as_in_pytorch():
    for lib in (gm, torch):
        a = lib.tensor([5.0, 7.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="derivative for (aten::)?floor_divide is not implemented"):
            (a // 2).sum().backward()


# ---- lerp, addcmul, addcdiv ---------------------------------------------------------------------------------------
def test_lerp_addcmul_addcdiv_values_and_gradients(device):
    r = np.random.RandomState(6)
    x, y, z, w = (r.uniform(0.5, 2.0, (4, 3)) for _ in range(4))
    ours = [gm.tensor(v, dtype=gm.float64, device=device, requires_grad=True) for v in (x, y, z, w)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (x, y, z, w)]
    for lib, (p, q, s, t) in ((gm, ours), (torch, theirs)):
        total = (p.lerp(q, 0.3) * 1.0 + p.lerp(q, t) * 2.0 + p.addcmul(q, s, value=0.5) * 3.0
                 + p.addcdiv(q, s, value=-2.0) * 4.0 + lib.lerp(p, q, 0.7) + lib.addcmul(p, q, s))
        total.sum().backward()
    for o, t in zip(ours, theirs):
        _close(o.grad, t.grad, 1e-12, 1e-12)


def test_ema_update_in_place_under_no_grad(device):
    """The EMA pattern of training scripts: ema.lerp_(p, 1 - decay), and Adam-like updates by hand."""
    r = np.random.RandomState(7)
    e, p, m, v = (r.uniform(0.1, 1.0, 5) for _ in range(4))
    ge, gp, gm_, gv = (gm.tensor(t, dtype=gm.float64, device=device) for t in (e, p, m, v))
    te, tp, tm, tv = (torch.tensor(t) for t in (e, p, m, v))
    with gm.no_grad():
        ge.lerp_(gp, 0.01).mul_(1.0)
        gp.addcdiv_(gm_, gv.sqrt_().add_(1e-8), value=-0.1).addcmul_(gm_, gm_, value=0.5)
    with torch.no_grad():
        te.lerp_(tp, 0.01)
        tp.addcdiv_(tm, tv.sqrt_().add_(1e-8), value=-0.1).addcmul_(tm, tm, value=0.5)
    for ours, theirs in ((ge, te), (gp, tp), (gv, tv)):
        _close(ours, theirs, 1e-14, 1e-15)


def test_lerp_and_addcmul_in_place_are_recorded_in_a_graph():
    a = gm.tensor([1.0, 2.0], requires_grad=True)
    ta = torch.tensor([1.0, 2.0], requires_grad=True)
    for lib, x in ((gm, a), (torch, ta)):
        y = x * 3.0
        y.lerp_(x * x, 0.25).addcmul_(x, x, value=2.0)
        y.sum().backward()
    _close(a.grad, ta.grad, 0, 0)


# ---- in-place unary forms -----------------------------------------------------------------------------------------
INPLACE = [n + "_" for n in UNARY] + ["exp_", "log_", "sqrt_", "rsqrt_", "abs_", "neg_", "floor_", "ceil_"]


@pytest.mark.parametrize("name", INPLACE)
def test_in_place_forms_write_into_the_tensor(name, device):
    x = _inputs("log2")  # positive: inside every domain
    a, b = _both(x, "float32", device)
    before = a._version
    out = getattr(a, name)()
    getattr(b, name)()
    assert out is a and a._version > before
    _close(a, b, 2e-6, 1e-7)


@pytest.mark.parametrize("name", ["sin_", "exp_", "sqrt_", "reciprocal_"])
def test_in_place_math_of_an_integer_tensor_is_refused_as_in_pytorch(name):
    for lib in (gm, torch):
        with pytest.raises(RuntimeError, match="result type Float can't be cast"):
            getattr(lib.tensor([1, 2]), name)()


def test_in_place_floor_of_an_integer_tensor_leaves_it():
    a = gm.tensor([3, -4])
    assert a.floor_() is a and a.tolist() == [3, -4]


@pytest.mark.parametrize("name", ["sin_", "exp_", "sqrt_", "abs_"])
def test_in_place_unary_in_a_graph_is_recorded(name):
    """As PyTorch records them (a VAE's logvar.mul(0.5).exp_()): the values and the gradient of the out-of-place
    form."""
    w = gm.tensor([0.5, 1.5], dtype=gm.float64, requires_grad=True)
    x = w * 2.0
    r = getattr(x, name)()
    assert r is x
    (x * gm.tensor([1.0, 3.0], dtype=gm.float64)).sum().backward()
    w2 = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    x2 = getattr(w2 * 2.0, name)()
    (x2 * torch.tensor([1.0, 3.0], dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(to_np(x), x2.detach().numpy(), rtol=1e-15)
    np.testing.assert_allclose(to_np(w.grad), w2.grad.numpy(), rtol=1e-15)


def test_in_place_unary_on_a_leaf_that_requires_grad_is_refused():
    w = gm.tensor([0.5], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w.exp_()
    with gm.no_grad():
        w.exp_()
    np.testing.assert_allclose(w.detach().numpy(), np.exp([0.5]).astype(np.float32))


def test_neg_in_place_is_recorded_in_a_graph():
    a = gm.tensor([1.0, -2.0], requires_grad=True)
    y = a * 3.0
    y.neg_()
    y.sum().backward()
    assert a.grad.tolist() == [-3.0, -3.0]


# ---- autocast: PyTorch's float32 list -----------------------------------------------------------------------------
def test_autocast_widens_the_float32_list_and_keeps_the_rest():
    """These are on PyTorch's CUDA autocast float32 list and not on its CPU one: float32 under a CUDA region (a
    meta tensor follows the region's device), the input's dtype under a CPU region."""
    x = gm.ones(3, dtype=gm.bfloat16)
    for device, wide in (("cuda", gm.float32), ("cpu", gm.bfloat16)):
        with (cuda_autocast if device == "cuda" else functools.partial(gm.autocast, "cpu"))(dtype=gm.bfloat16):
            for name in ("asin", "acos", "tan", "sinh", "cosh", "log1p", "expm1", "log2", "log10", "reciprocal"):
                assert getattr((x * 0.5).to("meta" if device == "cuda" else "cpu"), name)().dtype == wide, name
            for name in ("sin", "cos", "atan", "erf", "erfc", "exp2"):
                assert getattr(x * 0.5, name)().dtype == gm.bfloat16, name


def test_meta_gives_shapes_and_dtypes_without_values():
    a = gm.empty(4, 5, device="meta")
    assert a.sin().shape == (4, 5) and a.sin().device.type == "meta"
    assert (a % 2).dtype == gm.float32 and gm.empty(3, dtype=gm.int64, device="meta").erf().dtype == gm.float32


@pytest.mark.parametrize("op", ["add", "sub", "add_", "sub_"])
def test_add_and_sub_take_alpha(op, device):
    """p.add_(d_p, alpha=-lr): hand-written optimizers' update; the deprecated add_(alpha, other) overload warns
    and computes the same; a float alpha on an integer tensor is refused as PyTorch refuses it."""
    x, y = _inputs("add", seed=1), _inputs("add", seed=2)
    got = getattr(gm.tensor(x, device=device), op)(gm.tensor(y, device=device), alpha=-0.25)
    want = getattr(torch.tensor(x), op)(torch.tensor(y), alpha=-0.25)
    np.testing.assert_allclose(to_np(got), want.numpy(), rtol=1e-15)
    with pytest.warns(UserWarning, match=f"This overload of {op} is deprecated"):
        old = getattr(gm.tensor(x, device=device), op)(3.0, gm.tensor(y, device=device))
    np.testing.assert_allclose(to_np(old), getattr(torch.tensor(x), op)(torch.tensor(y), alpha=3.0).numpy())
    ints = [gm.ones(3, dtype=gm.int64, device=device), torch.ones(3, dtype=torch.int64)]
    for t, lib in zip(ints, ("gm", "torch")):
        with pytest.raises(RuntimeError, match="For integral input tensors, argument alpha must not be a floating"):
            getattr(t, op)(t, alpha=0.5)
    a = gm.tensor(x, device=device, requires_grad=True)
    ta = torch.tensor(x, requires_grad=True)
    getattr(gm, op.rstrip("_"))(a, a * a, alpha=2.0).sum().backward()
    getattr(torch, op.rstrip("_"))(ta, ta * ta, alpha=2.0).sum().backward()
    np.testing.assert_allclose(to_np(a.grad), ta.grad.numpy(), rtol=1e-15)
