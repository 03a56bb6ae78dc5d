"""The special and elementwise functions of _core/tensor_special.py, tensor_gamma.py and tensor_bitwise.py against
PyTorch itself: values over wide ranges (poles, infinities, NaN, negative non-integers), result dtypes for every
input dtype PyTorch accepts, gradients, the in-place forms, the comparisons by name and the integer ops; on the CPU
and on CUDA."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
INF, NAN = math.inf, math.nan


def _pair(values, dtype, device, requires_grad=False):
    """The same values as a gpumemnet tensor on device and a torch tensor on the CPU, both of dtype `dtype`."""
    a = np.asarray(values)
    t = torch.tensor(a).to(getattr(torch, dtype))
    g = gm.tensor(t.detach().double().numpy() if t.is_floating_point() else t.numpy(), device=device)
    g = g.to(getattr(gm, dtype))
    if requires_grad:
        g.requires_grad_(True)
        t.requires_grad_(True)
    return g, t


def _same(ours, theirs, rtol=0.0, atol=0.0, name=""):
    """Same shape and dtype, values equal within rtol/atol (NaN where theirs is NaN, infinities exactly)."""
    assert tuple(ours.shape) == tuple(theirs.shape), name
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], (name, ours.dtype, theirs.dtype)
    b = theirs.detach()
    b = b.double().numpy() if b.is_floating_point() else b.numpy()
    np.testing.assert_allclose(to_np(ours), b, rtol=rtol, atol=atol, err_msg=name)


# ---- unary float functions ------------------------------------------------------------------------------------
WIDE = np.concatenate([R.uniform(-30, 30, 200), np.logspace(-8, 30, 40), -np.logspace(-8, 30, 40),
                       [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, INF, -INF, NAN]])
GAMMA_X = np.concatenate([R.uniform(-40, 40, 300), R.uniform(0, 3, 100), np.logspace(-6, 200, 60),
                          -np.arange(0, 20) - R.uniform(0.01, 0.99, 20), [1.0, 2.0, 3.0, 1e-300, 171.5, INF, NAN]])
POLY_X = np.concatenate([R.uniform(-10, 10, 200), R.uniform(0.05, 3, 60), np.logspace(-2, 8, 30),
                         -np.arange(0, 8) - R.uniform(0.05, 0.95, 8), [INF, NAN]])
ERFINV_X = np.concatenate([R.uniform(-1, 1, 300), 1 - np.logspace(-15, -1, 40), -1 + np.logspace(-15, -1, 40),
                           [0.0, -0.0, 1.0, -1.0, 1.5, -3.0, 1e-300, INF, NAN]])
UNARY = {  # name -> (inputs, float64 rtol against PyTorch)
    "acosh": (np.concatenate([1 + np.logspace(-12, 1, 40), np.logspace(0, 300, 60), [0.5, 1.0, INF, NAN]]), 1e-14),
    "asinh": (np.concatenate([WIDE, np.logspace(30, 300, 20), -np.logspace(-300, -30, 10)]), 1e-14),
    "atanh": (np.concatenate([R.uniform(-1, 1, 200), 1 - np.logspace(-15, -1, 20), np.logspace(-300, -8, 10),
                              [1.0, -1.0, 2.0, -0.0, NAN]]), 1e-14),
    "sinc": (np.concatenate([WIDE, R.uniform(-1e-3, 1e-3, 20)]), 1e-14),
    "lgamma": (GAMMA_X, 1e-13),
    "digamma": (GAMMA_X, 1e-12),
    "erfinv": (ERFINV_X, 1e-14),
    "i0": (np.concatenate([R.uniform(-40, 40, 200), np.logspace(-8, 2.8, 40), -np.logspace(-8, 2.8, 40),
                           [0.0, 30.0, -30.0, INF, -INF, NAN]]), 1e-14),
    "deg2rad": (WIDE, 1e-15),
    "rad2deg": (WIDE, 1e-15),
}
# float32 results must be float32 roundings of the exact value: compared with PyTorch's float64 within 2 ulps
ULP32 = 2 ** -23


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_float64_matches_pytorch(name, device):
    x, rtol = UNARY[name]
    a, b = _pair(x, "float64", device)
    _same(getattr(gm, name)(a), getattr(torch, name)(b), rtol=rtol, atol=1e-14, name=name)
    _same(getattr(a, name)(), getattr(b, name)(), rtol=rtol, atol=1e-14, name=name)


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_float32_is_rounded_exact_value(name, device):
    x, _ = UNARY[name]
    a, b = _pair(x, "float32", device)
    ours = getattr(gm, name)(a)
    assert ours.dtype == gm.float32
    if name == "sinc":  # PyTorch computes sin(pi x) / (pi x) in float32, as gpumemnet does: the same roundings
        _same(ours, torch.sinc(b), rtol=4 * ULP32, atol=1e-7, name=name)
        return
    expected = getattr(torch, name)(b.double()).float()  # PyTorch's float64 value at the float32 inputs, rounded
    rtol = 2 * ULP32 if name in ("lgamma", "digamma", "erfinv", "i0", "deg2rad", "rad2deg") else 4 * ULP32
    _same(ours, expected, rtol=rtol, atol=1e-38, name=name)


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64", "bool", "int32"])
def test_unary_dtypes(name, dtype, device):
    x, _ = UNARY[name]
    x = np.nan_to_num(x[np.abs(x) < 60], nan=0.5)
    if dtype in ("int64", "int32"):
        x = np.round(x)
    if dtype == "bool":
        x = x > 0.3
    a, b = _pair(x, dtype, device)
    ours, theirs = getattr(gm, name)(a), getattr(torch, name)(b)
    tol = {"float16": 2e-3, "bfloat16": 1.6e-2}.get(dtype, 1e-6)
    _same(ours, theirs, rtol=tol, atol=tol, name=f"{name} {dtype}")


POLYGAMMA_N = [0, 1, 2, 3, 5]


@pytest.mark.parametrize("n", POLYGAMMA_N)
def test_polygamma_matches_pytorch(n, device):
    a, b = _pair(POLY_X, "float64", device)
    # PyTorch's trigamma is accurate to about 1e-10 (its asymptotic series is short); the others to rounding
    rtol = 1e-9 if n == 1 else 1e-12
    _same(gm.polygamma(n, a), torch.polygamma(n, b), rtol=rtol, atol=1e-12, name=f"polygamma {n}")
    _same(a.polygamma(n), b.polygamma(n), rtol=rtol, atol=1e-12, name=f"polygamma {n}")
    a32, b32 = _pair(POLY_X, "float32", device)
    ours = gm.polygamma(n, a32)
    _same(ours, torch.polygamma(n, b32.double()).float(), rtol=2 * ULP32, atol=1e-38)


def test_poles_and_special_points(device):
    a, b = _pair([0.0, -0.0, -1.0, -2.0, -50.0, 1.0, 2.0, INF, -INF, NAN], "float64", device)
    for name in ("lgamma", "digamma"):
        _same(getattr(gm, name)(a), getattr(torch, name)(b), rtol=2e-15, name=name)
    for n in (2, 3, 4):  # PyTorch's trigamma gives huge finite values at negative integers: not compared there
        _same(gm.polygamma(n, a), torch.polygamma(n, b), rtol=2e-15, name=f"polygamma {n}")
    a, b = _pair([1.0, -1.0, 1.0000001, -2.0, 0.0, NAN], "float32", device)
    _same(gm.erfinv(a), torch.erfinv(b), name="erfinv")


GRAD_INPUTS = {
    "acosh": np.concatenate([1 + R.uniform(0.01, 5, 20), [1e5, 3e10]]),
    "asinh": np.concatenate([R.uniform(-5, 5, 20), [1e12, -3e10, 0.0]]),
    "atanh": R.uniform(-0.99, 0.99, 20),
    "sinc": np.concatenate([R.uniform(-4, 4, 20), [0.0, 1.0, -2.0]]),
    "lgamma": np.concatenate([R.uniform(-10, 10, 30), [0.5, 1.0, 2.0, 100.0]]),
    "digamma": np.concatenate([R.uniform(-10, 10, 30), [0.5, 1.0, 2.0, 100.0]]),
    "erfinv": np.concatenate([R.uniform(-0.999, 0.999, 30), [0.0]]),
    "i0": np.concatenate([R.uniform(-40, 40, 20), [0.0, 29.9, 30.1]]),
    "deg2rad": R.uniform(-400, 400, 10),
    "rad2deg": R.uniform(-7, 7, 10),
}


@pytest.mark.parametrize("name", list(GRAD_INPUTS))
def test_unary_gradients(name, device):
    x = GRAD_INPUTS[name]
    a, b = _pair(x, "float64", device, requires_grad=True)
    w = R.uniform(0.5, 1.5, x.shape)
    (getattr(gm, name)(a) * gm.tensor(w, device=device)).sum().backward()
    (getattr(torch, name)(b) * torch.tensor(w)).sum().backward()
    _same(a.grad, b.grad, rtol=1e-9, atol=1e-12, name=name)


@pytest.mark.parametrize("n", [0, 1, 2, 4])
def test_polygamma_gradient(n, device):
    x = R.uniform(-4.5, 6, 30)
    a, b = _pair(x, "float64", device, requires_grad=True)
    gm.polygamma(n, a).sum().backward()
    torch.polygamma(n, b).sum().backward()
    _same(a.grad, b.grad, rtol=1e-9, atol=1e-9, name=f"polygamma {n}")


def test_unary_gradient_half_stays_half(device):
    a, b = _pair([0.3, -0.2, 0.7], "bfloat16", device, requires_grad=True)
    gm.erfinv(a).sum().backward()
    torch.erfinv(b).sum().backward()
    _same(a.grad, b.grad, rtol=2e-2, atol=1e-2)


# ---- in-place forms --------------------------------------------------------------------------------------------
INPLACE = [("acosh_", (), 1.5), ("arccosh_", (), 2.0), ("asinh_", (), 0.3), ("arcsinh_", (), -3.0),
           ("atanh_", (), 0.2), ("arctanh_", (), -0.4), ("sinc_", (), 0.3), ("lgamma_", (), 2.5),
           ("digamma_", (), -1.5), ("polygamma_", (2,), 0.7), ("erfinv_", (), 0.5), ("deg2rad_", (), 90.0),
           ("rad2deg_", (), 1.0), ("i0_", (), 3.0)]


@pytest.mark.parametrize("name,args,scale", INPLACE, ids=[c[0] for c in INPLACE])
def test_in_place_unary(name, args, scale, device):
    x = np.linspace(0.2, 1.0, 6) * scale
    for dtype in ("float32", "float64"):
        a, b = _pair(x, dtype, device)
        ptr = a.data_ptr() if hasattr(a, "data_ptr") else None
        out = getattr(a, name)(*args)
        getattr(b, name)(*args)
        assert out is a and (ptr is None or a.data_ptr() == ptr)
        _same(a, b, rtol=1e-6, atol=1e-7, name=name)
    ints, _ = _pair([1, 2], "int64", device)
    with pytest.raises(RuntimeError, match="can't be cast"):
        getattr(ints, name)(*args)
    leaf = gm.tensor(x, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        getattr(leaf, name)(*args)


def test_in_place_binary(device):
    a, b = _pair([1.0, -2.0, 3.0], "float32", device)
    o, p = _pair([-1.0, 1.0, -0.0], "float64", device)
    _same(a.clone().copysign_(o), b.clone().copysign_(p))
    _same(a.clone().ldexp_(gm.tensor([1, 2, 3], device=device)), b.clone().ldexp_(torch.tensor([1, 2, 3])))
    _same(a.clone().heaviside_(gm.tensor(0.5, device=device)), b.clone().heaviside_(torch.tensor(0.5)))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        a.clone().copysign_(gm.ones(2, 3, device=device))


# ---- comparisons by name -------------------------------------------------------------------------------------------
COMPARISONS = ["eq", "ne", "gt", "ge", "lt", "le", "greater", "greater_equal", "less", "less_equal", "not_equal"]


@pytest.mark.parametrize("name", COMPARISONS)
def test_comparisons(name, device):
    x = np.array([[1.0, 2.0, NAN, -INF], [0.0, -0.0, 3.0, 2.0]])
    a, b = _pair(x, "float32", device)
    o, p = _pair([2.0, 2.0, 1.0, -INF], "float64", device)
    _same(getattr(gm, name)(a, o), getattr(torch, name)(b, p), name=name)
    _same(getattr(a, name)(2), getattr(b, name)(2), name=name)
    _same(getattr(gm, name)(a, 2.5), getattr(torch, name)(b, 2.5), name=name)
    i, j = _pair([[1, 2, 3]], "int64", device)
    _same(getattr(i, name)(gm.tensor([[2], [3]], device=device)), getattr(j, name)(torch.tensor([[2], [3]])))
    # in place: 1 / 0 in self's dtype, self's shape
    for dtype in ("float32", "int64", "int32"):
        s, t = _pair([[1, 2, 3], [3, 2, 1]], dtype, device)
        out = getattr(s, name + "_")(gm.tensor([2, 2, 2], device=device))
        getattr(t, name + "_")(torch.tensor([2, 2, 2]))
        assert out is s
        _same(s, t, name=name + "_")
    with pytest.raises(RuntimeError, match="broadcast shape"):
        getattr(a[0], name + "_")(gm.zeros(2, 4, device=device))


def test_comparison_of_requires_grad_tensor(device):
    a = gm.tensor([1.0, 2.0], device=device, requires_grad=True)
    out = gm.greater(a * 2, 3)
    assert out.dtype == gm.bool and not out.requires_grad
    assert to_np(out).tolist() == [False, True]


# ---- binary float functions -------------------------------------------------------------------------------------
BIN_X = np.array([[1.5, -2.0, 0.0, -0.0, INF, NAN], [3.0, -INF, 2.0, -1e-30, 1e30, 0.25]])
BIN_Y = np.array([-1.0, 2.0, -0.0, 0.0, NAN, -3.5])


@pytest.mark.parametrize("name", ["copysign", "fmax", "fmin", "logaddexp2", "ldexp"])
@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float64"), ("float16", "float32"),
                                    ("int64", "float32"), ("bfloat16", "bfloat16"), ("int64", "int64"),
                                    ("int32", "bool")])
def test_binary_functions(name, dtypes, device):
    x, y = BIN_X, BIN_Y
    if "int" in dtypes[0] or "bool" in dtypes[0]:
        x = np.nan_to_num(x, nan=1.0, posinf=7.0, neginf=-7.0).round()
    if "int" in dtypes[1] or "bool" in dtypes[1]:
        y = np.nan_to_num(y, nan=3.0, posinf=7.0, neginf=-7.0).round()
    if name == "ldexp":
        y = np.nan_to_num(y, nan=3.0, posinf=7.0, neginf=-7.0)
    a, b = _pair(x, dtypes[0], device)
    o, p = _pair(y[None, :] if name != "fmin" else y, dtypes[1], device)  # broadcast both ways
    try:
        theirs = getattr(torch, name)(b, p)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            getattr(gm, name)(a, o)
        return
    tol = {"float16": 1e-3, "bfloat16": 8e-3}.get(str(theirs.dtype).split(".")[-1], 1e-6)
    _same(getattr(gm, name)(a, o), theirs, rtol=tol, atol=tol, name=name)
    _same(getattr(a, name)(o), getattr(b, name)(p), rtol=tol, atol=tol, name=name)
    if name == "copysign":  # -0.0 too (a NaN's sign is not compared: gpumemnet's NaNs have none)
        ours, ref = to_np(gm.copysign(a, o)), theirs.double().numpy()
        assert np.array_equal(np.signbit(ours) | np.isnan(ref), np.signbit(ref) | np.isnan(ref))


def test_ldexp_half_does_not_overflow_early(device):
    a, b = _pair([1e-3, 2.0], "float16", device)
    e, f = _pair([20, -20], "int64", device)
    _same(gm.ldexp(a, e), torch.ldexp(b, f), rtol=1e-3)


def test_copysign_number_and_zero_dim(device):
    a, b = _pair([1.0, -2.0, 0.0], "float16", device)
    for other in (-1, 2.5, -0.0, 0.0):
        _same(gm.copysign(a, other), torch.copysign(b, other))
    i, j = _pair([1, -2], "int64", device)
    _same(i.copysign(gm.tensor(-1.0, dtype=gm.float64, device=device)),
          j.copysign(torch.tensor(-1.0, dtype=torch.float64)))


@pytest.mark.parametrize("name", ["copysign", "fmax", "fmin", "logaddexp2", "ldexp"])
def test_binary_gradients(name, device):
    x = R.uniform(-3, 3, (3, 4))
    y = R.uniform(-3, 3, (4,))
    x[0, :2] = y[:2]  # ties of fmax / fmin go to the first operand
    x[1, 0] = NAN if name in ("fmax", "fmin") else x[1, 0]
    x[2, 1] = 0.0
    a, b = _pair(x, "float64", device, requires_grad=True)
    o, p = _pair(y, "float64", device, requires_grad=True)
    w = R.uniform(0.5, 1.5, (3, 4))
    (getattr(gm, name)(a, o) * gm.tensor(w, device=device)).nansum().backward()
    (getattr(torch, name)(b, p) * torch.tensor(w)).nansum().backward()
    _same(a.grad, b.grad, rtol=1e-12, atol=1e-12, name=name)
    _same(o.grad, p.grad, rtol=1e-12, atol=1e-12, name=name)


def test_heaviside(device):
    x = np.array([[-1.5, 0.0, -0.0, 2.0, NAN, INF]])
    for dtype in ("float32", "float64", "int64", "bool"):
        xs = x if dtype.startswith("float") else np.nan_to_num(x, nan=0.0, posinf=3.0)
        a, b = _pair(xs, dtype, device)
        v, w = _pair([[0.5], [1.0]] if dtype != "bool" else [[True], [False]], dtype, device)
        _same(gm.heaviside(a, v), torch.heaviside(b, w), name=dtype)
        _same(a.heaviside(v[0, 0]), b.heaviside(w[0, 0]), name=dtype)
    a = gm.tensor([1.0, 0.0], device=device, requires_grad=True)
    out = gm.heaviside(a, gm.tensor(0.5, device=device))
    with pytest.raises(RuntimeError, match="derivative for 'heaviside' is not implemented"):
        out.sum().backward()


def test_signbit_isposinf_isneginf_isreal(device):
    x = [-1.0, -0.0, 0.0, 2.0, INF, -INF, NAN, -1e-40]
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        a, b = _pair(x, dtype, device)
        for name in ("signbit", "isposinf", "isneginf", "isreal"):
            _same(getattr(gm, name)(a), getattr(torch, name)(b), name=f"{name} {dtype}")
            _same(getattr(a, name)(), getattr(b, name)(), name=f"{name} {dtype}")
    for dtype in ("int64", "bool", "uint8", "int32"):
        a, b = _pair([0, 1, 3], dtype, device)
        for name in ("signbit", "isposinf", "isneginf", "isreal"):
            _same(getattr(gm, name)(a), getattr(torch, name)(b), name=f"{name} {dtype}")
    a, b = _pair([-3, 0, 5], "int64", device)
    _same(gm.signbit(a), torch.signbit(b))


def test_positive(device):
    a = gm.tensor([1.0, -2.0], device=device, requires_grad=True)
    assert gm.positive(a) is a and a.positive() is a
    with pytest.raises(NotImplementedError):
        gm.positive(gm.tensor([True], device=device))


def test_empty_and_scalar_inputs(device):
    for shape in [(0,), (2, 0), ()]:
        x = np.full(shape, 0.5)
        a, b = _pair(x, "float32", device)
        for name in ("acosh", "lgamma", "erfinv", "sinc", "signbit", "deg2rad"):
            _same(getattr(gm, name)(a), getattr(torch, name)(b), rtol=1e-6, name=name)
        _same(gm.polygamma(1, a), torch.polygamma(1, b), rtol=1e-6)
        _same(gm.fmax(a, a), torch.fmax(b, b))
        i, j = _pair(np.full(shape, 3), "int64", device)
        _same(gm.bitwise_xor(i, i), torch.bitwise_xor(j, j))
        _same(gm.gcd(i, i), torch.gcd(j, j))


def test_meta_shapes_and_dtypes():
    m = gm.zeros(2, 3, device="meta")
    mi = gm.zeros(1, 3, dtype=gm.int64, device="meta")
    for out, dtype in [(gm.lgamma(m), gm.float32), (gm.polygamma(3, m), gm.float32), (gm.erfinv(m), gm.float32),
                       (gm.acosh(mi), gm.float32), (gm.copysign(mi, m), gm.float32), (gm.fmax(m, mi), gm.float32),
                       (gm.bitwise_and(mi, mi.expand(2, 3)), gm.int64), (gm.lcm(mi, mi), gm.int64),
                       (gm.signbit(m), gm.bool), (gm.ldexp(m, mi), gm.float32)]:
        assert out.device.type == "meta" and out.dtype == dtype
        assert tuple(out.shape) in ((2, 3), (1, 3))


# ---- integer ops -----------------------------------------------------------------------------------------------
INT_X = np.array([[0, 1, -1, 7, -8, 12345], [2 ** 62, -(2 ** 62), 5, -5, 255, 128]], dtype=np.int64)
INT_Y = np.array([3, -1, 0, 64, 2, 63], dtype=np.int64)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                                  "bitwise_right_shift", "gcd", "lcm"])
@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("int32", "int64"), ("uint8", "int8"), ("int16", "bool"),
                                    ("bool", "bool"), ("int8", "int8"), ("float32", "int64")])
def test_integer_binary(name, dtypes, device):
    x, y = INT_X, INT_Y
    if name in ("bitwise_left_shift", "bitwise_right_shift"):
        y = np.array([3, -1, 0, 64, 70, 7], dtype=np.int64)  # counts out of range: PyTorch's rule
    if name == "lcm":
        x = x % 1000
    a, b = _pair(torch.tensor(x).to(getattr(torch, dtypes[0])).numpy(), dtypes[0], device)
    o, p = _pair(torch.tensor(y).to(getattr(torch, dtypes[1])).numpy(), dtypes[1], device)
    try:
        theirs = getattr(torch, name)(b, p)
    except (NotImplementedError, RuntimeError) as e:
        with pytest.raises(type(e)):
            getattr(gm, name)(a, o)
        return
    _same(getattr(gm, name)(a, o), theirs, name=name)
    _same(getattr(a, name)(o), getattr(b, name)(p), name=name)
    # in place, where PyTorch can cast the result into self
    try:
        t = getattr(b.clone(), name + "_")(p)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            getattr(a.clone(), name + "_")(o)
        return
    s = a.clone()
    assert getattr(s, name + "_")(o) is s
    _same(s, t, name=name + "_")


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                                  "bitwise_right_shift"])
def test_integer_with_numbers(name, device):
    a, b = _pair(INT_X[:, :4], "int32", device)
    for other in (3, True, 40):
        _same(getattr(gm, name)(a, other), getattr(torch, name)(b, other), name=name)
    m, n = _pair([True, False], "bool", device)
    if name.startswith("bitwise_") and "shift" not in name:
        _same(getattr(m, name)(3), getattr(n, name)(3), name=name)
        _same(getattr(gm, name)(5, a), getattr(torch, name)(5, b), name=name)
    _same(getattr(a, name)(gm.tensor(2, device=device)), getattr(b, name)(torch.tensor(2)), name=name)
    with pytest.raises(NotImplementedError):
        getattr(gm, name)(a, 2.5)


def test_bitwise_not(device):
    for dtype in ("int64", "int32", "uint8", "int8", "bool"):
        x = [0, 1, 1, 0] if dtype == "bool" else [0, 1, -1, 100]
        a, b = _pair(torch.tensor(x).to(getattr(torch, dtype)).numpy(), dtype, device)
        _same(gm.bitwise_not(a), torch.bitwise_not(b), name=dtype)
        s = a.clone()
        assert s.bitwise_not_() is s
        _same(s, torch.bitwise_not(b))
    with pytest.raises(NotImplementedError):
        gm.bitwise_not(gm.ones(2, device=device))


def test_integer_ops_refuse_floats(device):
    f = gm.ones(3, device=device)
    i = gm.ones(3, dtype=gm.int64, device=device)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "gcd",
                 "lcm"):
        with pytest.raises(NotImplementedError, match="Float"):
            getattr(gm, name)(f, i)
    with pytest.raises(TypeError):
        gm.gcd(i, 2)


def test_erfinv_is_float32_under_autocast(device):
    """erfinv is on PyTorch's CUDA autocast float32 list, not on its CPU one (where it follows its input)."""
    a = gm.tensor([0.25, -0.5], device=device).to(gm.bfloat16 if device == "cpu" else gm.float16)
    with gm.autocast(device, dtype=a.dtype):
        out = gm.erfinv(a)
    assert out.dtype == (gm.float32 if device.startswith("cuda") else a.dtype)
    ref = torch.erfinv(torch.tensor(to_np(a))).numpy()
    np.testing.assert_allclose(to_np(out), ref, rtol=1e-6 if device.startswith("cuda") else 1e-2)
