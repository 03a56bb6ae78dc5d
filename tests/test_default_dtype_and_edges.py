"""PyTorch behaviour that float64 scientific code relies on, against PyTorch itself: under
set_default_dtype(float64) integer tensors promote to float64 (a time grid `torch.arange(n) * dt`); narrow integer
types promote as c10's promoteTypes; sigmoid / tanh take integer tensors; pow's gradient is 0 where the exponent is
0 (Vandermonde features at x = 0); SELU / CELU have the negative branch's slope at 0; regression losses promote a
float32 output against a float64 target; eigh / svd failures are linalg.LinAlgError; vmap takes nested in_dims;
set_default_tensor_type sets the default dtype."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


@pytest.fixture
def float64_default():
    yield
    gm.set_default_dtype(gm.float32)
    torch.set_default_dtype(torch.float32)


PROMOTING = {
    "int * float": lambda L: L.arange(5) * 0.5,
    "int / int": lambda L: L.arange(5) / 2,
    "sin of int": lambda L: L.sin(L.arange(3)),
    "int ** 0.5": lambda L: L.arange(4) ** 0.5,
    "where with floats": lambda L: L.where(L.arange(3) > 0, 1.5, 0),
    "clamp of int by a float": lambda L: L.clamp(L.arange(3), min=0.5),
    "atan2 of ints": lambda L: L.atan2(L.arange(3), L.arange(3) + 1),
    "bool * float": lambda L: (L.arange(3) > 0) * 2.5,
    "sigmoid of int": lambda L: L.sigmoid(L.arange(3)),
    "tanh of bool": lambda L: L.tanh(L.arange(3) > 0),
    "exp of int": lambda L: L.exp(L.arange(3)),
}


@pytest.mark.parametrize("default", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(PROMOTING))
def test_integer_tensors_promote_to_the_default_dtype(case, default, float64_default):
    got = []
    for lib in (gm, torch):
        lib.set_default_dtype(getattr(lib, default))
        out = PROMOTING[case](lib)
        got.append((str(out.dtype).split(".")[-1], out.numpy()))
    assert got[0][0] == got[1][0] == default
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-15 if default == "float64" else 1e-6)


NARROW = ["uint8", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("a", NARROW)
@pytest.mark.parametrize("b", NARROW)
def test_narrow_integer_promotion_matches_pytorch(a, b):
    out = []
    for lib in (gm, torch):
        x = lib.tensor([100, 7], dtype=getattr(lib, a))
        y = lib.tensor([120, 3], dtype=getattr(lib, b))
        r = x + y
        out.append((str(r.dtype).split(".")[-1], r.numpy().tolist()))
    assert out[0] == out[1]


def _grads(lib, fn, x, order):
    t = lib.tensor(x, dtype=lib.float64, requires_grad=True)
    out, res = fn(lib, t), []
    for _ in range(order):
        (out,) = lib.autograd.grad(out.sum(), t, create_graph=True)
        res.append(out.detach().numpy())
    return res


@pytest.mark.parametrize("name,fn,order", [
    ("vandermonde", lambda L, x: (x.unsqueeze(-1) ** L.arange(4)) @ L.tensor([1.0, -2.0, 0.5, 0.1],
                                                                            dtype=L.float64), 3),
    ("x ** 0", lambda L, x: x ** 0, 1),
    ("x ** 2 to third order", lambda L, x: x ** 2, 3),
    ("x ** 3 to fourth order", lambda L, x: x ** 3, 4),
    ("pow with a tensor exponent holding 0", lambda L, x: L.pow(x, L.tensor([0.0, 1.0, 2.0], dtype=L.float64)), 1),
])
def test_pow_gradient_is_zero_where_the_exponent_is_zero(name, fn, order):
    x = np.array([0.0, 0.5, -1.5])
    got, want = _grads(gm, fn, x, order), _grads(torch, fn, x, order)
    assert not np.isnan(got[0]).any()
    for g, t in zip(got, want):  # higher orders: NaN where PyTorch's are (0 * 0^-2 of the exponent-0 column)
        np.testing.assert_allclose(g, t, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("act", ["selu", "celu", "elu"])
def test_elu_family_slope_at_zero(act):
    x = np.array([0.0, -1.0, 1.0, 100.0])
    fn = lambda L, t: getattr(L.nn.functional, act)(t)  # noqa: E731
    np.testing.assert_allclose(_grads(gm, fn, x, 1)[0], _grads(torch, fn, x, 1)[0], rtol=1e-14)


@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy_with_logits"])
def test_regression_losses_promote_a_float64_target(loss):
    x, y = np.array([0.3, -1.2, 2.0]), np.array([0.0, 1.0, 1.0])
    res = []
    for lib in (gm, torch):
        inp = lib.tensor(x, dtype=lib.float32, requires_grad=True)
        out = getattr(lib.nn.functional, loss)(inp, lib.tensor(y, dtype=lib.float64))
        out.backward()
        res.append((str(out.dtype).split(".")[-1], out.item(), str(inp.grad.dtype).split(".")[-1], inp.grad.numpy()))
    assert res[0][0] == res[1][0] == "float64" and res[0][2] == res[1][2] == "float32"
    # PyTorch's BCE with logits computes its log-sigmoid in the input's float32; ours in float64
    assert res[0][1] == pytest.approx(res[1][1], rel=1e-12 if "logits" not in loss else 1e-6)
    np.testing.assert_allclose(res[0][3], res[1][3], rtol=1e-6)


@pytest.mark.parametrize("fn", ["eigvalsh", "eigh", "svd", "svdvals", "pinv"])
def test_lapack_failures_are_linalg_errors(fn):
    nan = gm.full((3, 3), float("nan"), dtype=gm.float64)
    with pytest.raises(gm.linalg.LinAlgError, match="failed to converge"):
        getattr(gm.linalg, fn)(nan)


def test_vmap_nested_in_dims():
    w, x = np.random.RandomState(0).randn(3, 2), np.random.RandomState(1).randn(5, 2)
    out = [lib.func.vmap(lambda d, a: d["w"] @ a + d["b"], in_dims=({"w": None, "b": 0}, 0))(
        {"w": lib.tensor(w), "b": lib.arange(5.0, dtype=lib.float64)}, lib.tensor(x)).numpy() for lib in (gm, torch)]
    np.testing.assert_allclose(out[0], out[1], rtol=1e-14)


def test_set_default_tensor_type(float64_default):
    gm.set_default_tensor_type(gm.DoubleTensor)
    assert gm.randn(2).dtype == gm.float64 and (gm.arange(3) / 2).dtype == gm.float64
    gm.set_default_tensor_type("torch.FloatTensor")
    assert gm.tensor([1.5]).dtype == gm.float32
    with pytest.raises(TypeError, match="only floating-point types"):
        gm.set_default_tensor_type(gm.LongTensor)
