"""gm.special (python/gpumemnet/special/) against torch.special: every function's values in float64 and float32 over
wide argument ranges (negative, zero, large, +-inf, NaN), its gradients in float64 where PyTorch has them (and
PyTorch's refusal where it has none), result dtypes (integers promote to the default float), shapes and
broadcasting, numbers in place of tensors, out=, the argument names, and meta tensors; on the CPU and on CUDA.

PyTorch's own J0, J1, Y0, Y1 and Ai are off by up to ~1e-6 in float64 (and gammainc by ~1e-9 near a = x ~ 30):
there they are compared with PyTorch within that, and with SciPy (when installed) to 1e-12."""
import inspect
import math
import warnings

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")
# float32 copies of 1e300 overflow (to inf, on purpose) and NaN - NaN in the error sums: NumPy warns of both
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INF, NAN = math.inf, math.nan
EDGES = [-INF, -1e300, -800.0, -40.0, -27.0, -8.5, -1.5, -1.0, -0.5, -1e-8, -0.0, 0.0, 1e-300, 1e-8, 0.3, 0.5, 1.0,
         2.0, 8.5, 27.0, 40.0, 700.0, 800.0, 1e300, INF, NAN]
WIDE = np.concatenate([np.linspace(-30, 30, 121), EDGES])
BESSEL_X = np.concatenate([np.linspace(-60, 60, 241), np.linspace(-3, 3, 61),
                           [-1e10, -1e3, -40.01, -39.99, -2.01, -1.99, -0.0, 0.0, 1e-300, 1e-8, 1.99, 2.01, 39.99,
                            40.01, 100.0, 700.0, 710.0, 1e3, 1e10, INF, -INF, NAN]])
PROBS = np.concatenate([np.linspace(-0.1, 1.1, 61), [0.0, 1e-300, 1e-100, 1e-20, 1e-8, 0.5, 1 - 1e-16, 1.0, NAN, INF]])

# name -> (inputs, (rtol, atol) in float64, (rtol, atol) in float32); looser where PyTorch's own value is coarser
# (see the module docstring; float32 values here are rounded from float64, PyTorch's computed in float32)
F32 = (2e-6, 1e-37)
UNARY = {
    "expit": (WIDE, (1e-14, 0), F32), "erf": (WIDE, (1e-15, 0), F32), "erfc": (WIDE, (1e-14, 0), F32),
    "erfcx": (WIDE, (1e-13, 0), F32), "erfinv": (PROBS * 2 - 1, (1e-13, 1e-300), F32),
    "exp2": (WIDE, (1e-14, 0), F32), "expm1": (WIDE, (1e-14, 0), F32), "log1p": (WIDE, (1e-14, 0), F32),
    "gammaln": (WIDE, (1e-12, 1e-14), F32), "digamma": (WIDE, (1e-12, 1e-13), (2e-6, 1e-6)),
    "psi": (WIDE, (1e-12, 1e-13), (2e-6, 1e-6)), "i0": (WIDE, (1e-13, 0), F32), "i0e": (WIDE, (1e-13, 0), F32),
    "i1": (WIDE, (1e-13, 0), F32), "i1e": (WIDE, (1e-13, 0), F32), "modified_bessel_i0": (WIDE, (1e-13, 0), F32),
    "modified_bessel_i1": (WIDE, (1e-13, 0), F32), "ndtr": (WIDE, (1e-14, 1e-300), (2e-6, 1e-7)),
    "ndtri": (PROBS, (1e-12, 1e-15), (2e-6, 1e-7)), "log_ndtr": (WIDE, (1e-12, 0), (1e-5, 1e-43)),
    "sinc": (WIDE, (1e-13, 1e-15), (2e-6, 1e-7)), "entr": (WIDE, (1e-14, 0), F32),
    "round": (WIDE * 3.3, (0, 0), (0, 0)),
    "modified_bessel_k0": (BESSEL_X, (1e-12, 1e-300), F32), "modified_bessel_k1": (BESSEL_X, (1e-12, 1e-300), F32),
    "scaled_modified_bessel_k0": (BESSEL_X, (1e-12, 0), F32),
    "scaled_modified_bessel_k1": (BESSEL_X, (1e-12, 0), F32),
    "spherical_bessel_j0": (BESSEL_X, (1e-13, 1e-16), (2e-6, 1e-7)),
    "bessel_j0": (BESSEL_X, (1e-6, 1e-6), (1e-5, 1e-5)), "bessel_j1": (BESSEL_X, (1e-6, 1e-6), (1e-5, 1e-5)),
    "bessel_y0": (BESSEL_X, (1e-6, 1e-6), (1e-5, 1e-5)), "bessel_y1": (BESSEL_X, (1e-6, 1e-6), (1e-5, 1e-5)),
    "airy_ai": (BESSEL_X, (1e-4, 1e-5), (1e-4, 2e-5)),
}
# PyTorch's float32 J, Y and Ai far out are several units off (J0(1e10): 7.0e-6 for 2.2e-6; Ai(-1e3): 1.5e-3 for
# 5.6e-2, a float32 phase): not compared there
FAR_OFF_IN_TORCH32 = {"bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "airy_ai"}
SCIPY = {"bessel_j0": "j0", "bessel_j1": "j1", "bessel_y0": "y0", "bessel_y1": "y1", "modified_bessel_k0": "k0",
         "modified_bessel_k1": "k1", "airy_ai": None, "erfcx": "erfcx", "log_ndtr": "log_ndtr", "ndtri": "ndtri",
         "i0e": "i0e", "i1e": "i1e", "i1": "i1"}


def _same_dtype(a, b):
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], (a.dtype, b.dtype)


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_unary_values_match_pytorch(name, dtype, device):
    x, tol64, tol32 = UNARY[name]
    if dtype == "float32" and name in FAR_OFF_IN_TORCH32:
        x = x[np.abs(x) < 100]
    rtol, atol = tol64 if dtype == "float64" else tol32
    ref = getattr(torch.special, name)(torch.tensor(x, dtype=getattr(torch, dtype)))
    got = getattr(gm.special, name)(gm.tensor(x, dtype=getattr(gm, dtype), device=device))
    _same_dtype(got, ref)
    assert tuple(got.shape) == tuple(ref.shape)
    np.testing.assert_allclose(to_np(got), ref.numpy().astype(np.float64), rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=f"{name} {dtype}")


@pytest.mark.parametrize("name", list(SCIPY))
def test_float64_values_match_scipy(name, device):
    """Where PyTorch is coarser (or as a second reference), SciPy's float64 values, to 1e-12."""
    sc = pytest.importorskip("scipy.special")
    x = UNARY[name][0]
    x = x[np.isfinite(x) & (np.abs(x) < 1e4)]
    if name == "airy_ai":
        x = x[x < 100]
        ref = sc.airy(x)[0]
    else:
        ref = getattr(sc, SCIPY[name])(x)
    got = to_np(getattr(gm.special, name)(gm.tensor(x, dtype=gm.float64, device=device)))
    scale = np.maximum(np.abs(ref), 1.0) if name.startswith(("bessel", "airy")) else np.abs(ref)  # near zeros
    big = np.abs(x) > 40 if name.startswith(("bessel", "airy")) else np.zeros_like(x, bool)
    err = np.abs(got - ref) / np.where(scale > 0, scale, 1.0)
    # past 40 the phase x - pi/4 alone carries x's rounding (a few 1e-15 of x)
    limit = np.where(big, 1e-15 * np.abs(x) + 1e-13, 2e-13)
    bad = ~((err <= limit) | (np.isnan(got) & np.isnan(ref)) | (got == ref))
    assert not bad.any(), f"{name}: {list(zip(x[bad][:5], ref[bad][:5], got[bad][:5]))}"


GRAD_X = np.array([-20.0, -5.5, -1.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.5, 7.0, 9.0, 29.0, 31.0, 45.0])
POSITIVE_X = np.array([0.05, 0.3, 1.0, 1.9, 2.1, 3.7, 9.0, 30.0, 45.0])
GRADS = {  # name -> (points, rtol): PyTorch's derivatives are formed of its values, so as coarse where those are
    "expit": (GRAD_X, 1e-12), "erf": (GRAD_X, 1e-12), "erfc": (GRAD_X, 1e-12), "erfcx": (GRAD_X, 1e-10),
    "erfinv": (np.array([-0.99, -0.5, 0.0, 0.3, 0.9999]), 1e-10), "exp2": (GRAD_X, 1e-12),
    "expm1": (GRAD_X, 1e-12), "log1p": (POSITIVE_X, 1e-12), "gammaln": (GRAD_X[GRAD_X % 1 != 0], 1e-10),
    "digamma": (GRAD_X[GRAD_X % 1 != 0], 1e-9), "psi": (POSITIVE_X, 1e-9), "i0": (GRAD_X, 1e-12),
    "i0e": (GRAD_X, 1e-10), "i1": (GRAD_X, 1e-10), "i1e": (GRAD_X, 1e-10), "modified_bessel_i0": (GRAD_X, 1e-12),
    "modified_bessel_i1": (GRAD_X, 1e-10), "ndtr": (GRAD_X, 1e-12), "log_ndtr": (GRAD_X, 1e-10),
    "ndtri": (np.array([1e-200, 1e-10, 0.1, 0.3, 0.5, 0.7, 0.99, 1 - 1e-12]), 1e-10), "sinc": (GRAD_X, 1e-10),
    "entr": (POSITIVE_X, 1e-12), "round": (GRAD_X + 0.25, 0), "modified_bessel_k0": (POSITIVE_X, 1e-10),
    "modified_bessel_k1": (POSITIVE_X, 1e-10), "bessel_j0": (GRAD_X, 1e-5), "bessel_j1": (GRAD_X, 1e-5),
    "bessel_y0": (POSITIVE_X, 1e-5), "bessel_y1": (POSITIVE_X, 1e-5),
}
NO_GRAD = ["scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai"]


@pytest.mark.parametrize("name", list(GRADS))
def test_unary_gradients_match_pytorch(name, device):
    x, rtol = GRADS[name]
    a = gm.tensor(x, dtype=gm.float64, device=device, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    w = np.random.RandomState(3).uniform(0.5, 1.5, x.shape)
    (getattr(gm.special, name)(a) * gm.tensor(w, device=device)).sum().backward()
    (getattr(torch.special, name)(b) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=rtol, atol=1e-300 if rtol < 1e-8 else 1e-6,
                               err_msg=name)


@pytest.mark.parametrize("name", NO_GRAD + ["chebyshev_polynomial_t", "hermite_polynomial_h"])
def test_functions_pytorch_does_not_differentiate_give_no_graph(name, device):
    args = (2,) if "polynomial" in name else ()
    a = gm.tensor([0.5, 1.5], dtype=gm.float64, device=device, requires_grad=True)
    b = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    got, ref = getattr(gm.special, name)(a, *args), getattr(torch.special, name)(b, *args)
    assert got.requires_grad == ref.requires_grad is False


def test_derivatives_pytorch_lacks_raise_its_error(device):
    a = gm.tensor([1.5, 2.0], dtype=gm.float64, device=device, requires_grad=True)
    x = gm.tensor([0.5, 3.0], dtype=gm.float64, device=device)
    for fn in (gm.special.gammainc, gm.special.gammaincc, gm.special.zeta):
        y = fn(a, x)
        assert y.requires_grad
        with pytest.raises(NotImplementedError, match="derivative for '(igamma|igammac|zeta)"):
            y.sum().backward()
    ta = torch.tensor([1.5, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(NotImplementedError):
        torch.special.zeta(ta, torch.tensor([0.5, 3.0], dtype=torch.float64)).sum().backward()


# ---- binary functions ------------------------------------------------------------------------------------------
A_GRID = np.array([1e-3, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 100.0, 1000.0, 0.0, -1.0, INF, NAN])
X_GRID = np.array([0.0, 1e-3, 0.1, 0.5, 1.0, 2.0, 3.0, 10.0, 25.0, 30.0, 100.0, 150.0, 1000.0, -1.0, INF, NAN])
S_GRID = np.array([0.5, 1.0, 1.5, 2.0, 3.0, 4.5, 10.0, 50.0, INF, -INF, NAN, -2.0])
Q_GRID = np.array([-3.5, -2.0, -1.5, -1.0, 0.0, 0.25, 1.0, 2.0, 7.5, 100.0, 1e9, INF, NAN])


@pytest.mark.parametrize("name,first,second,tol64,tol32", [
    ("gammainc", A_GRID, X_GRID, (1e-8, 1e-290), (2e-4, 1e-37)),
    ("gammaincc", A_GRID, X_GRID, (1e-8, 1e-290), (2e-4, 1e-37)),
    ("zeta", S_GRID, Q_GRID, (1e-11, 1e-300), (2e-6, 1e-37)),
    ("xlogy", WIDE[::7], np.concatenate([WIDE[::9], [0.0, -1.0]]), (1e-14, 1e-300), F32),
    ("xlog1py", WIDE[::7], np.concatenate([WIDE[::9], [0.0, -1.0]]), (1e-14, 1e-300), F32),
])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_binary_values_match_pytorch(name, first, second, tol64, tol32, dtype, device):
    """Every pair of the two grids, broadcast as (m, 1) against (n,)."""
    rtol, atol = tol64 if dtype == "float64" else tol32
    a, b = first[:, None], second
    ref = getattr(torch.special, name)(torch.tensor(a, dtype=getattr(torch, dtype)),
                                       torch.tensor(b, dtype=getattr(torch, dtype)))
    got = getattr(gm.special, name)(gm.tensor(a, dtype=getattr(gm, dtype), device=device),
                                    gm.tensor(b, dtype=getattr(gm, dtype), device=device))
    _same_dtype(got, ref)
    assert tuple(got.shape) == tuple(ref.shape)
    np.testing.assert_allclose(to_np(got), ref.numpy().astype(np.float64), rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=name)


def test_gammainc_and_zeta_match_scipy():
    sc = pytest.importorskip("scipy.special")
    a = np.array([1e-3, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 100.0])[:, None]
    x = np.array([1e-3, 0.1, 0.5, 1.0, 2.0, 3.0, 10.0, 25.0, 30.0, 100.0, 150.0])
    for name in ("gammainc", "gammaincc"):
        got = to_np(getattr(gm.special, name)(gm.tensor(a, dtype=gm.float64), gm.tensor(x, dtype=gm.float64)))
        ref = getattr(sc, name)(a, x)
        # Q = 1 - P below x = max(1, a) (Cephes' split) keeps ~1e-11 where P is near 1 (a = 0.001)
        np.testing.assert_allclose(got, ref, rtol=2e-11, atol=1e-300, err_msg=name)
    s = np.array([1.5, 2.0, 3.0, 4.5, 10.0, 50.0])[:, None]
    q = np.array([0.25, 1.0, 2.0, 7.5, 100.0, 1e9])
    np.testing.assert_allclose(to_np(gm.special.zeta(gm.tensor(s, dtype=gm.float64), gm.tensor(q, dtype=gm.float64))),
                               sc.zeta(s, q), rtol=1e-13, atol=1e-300)


def test_binary_gradients_match_pytorch(device):
    a1, x1 = np.array([0.5, 1.0, 2.0, 5.0, 12.0]), np.array([0.3, 1.0, 2.5, 7.0, 9.0])
    for name, first in (("gammainc", a1), ("gammaincc", a1), ("zeta", a1 + 1.5)):
        ga, gx = gm.tensor(first, dtype=gm.float64, device=device), gm.tensor(x1, device=device, requires_grad=True,
                                                                            dtype=gm.float64)
        ta, tx = torch.tensor(first), torch.tensor(x1, requires_grad=True)
        getattr(gm.special, name)(ga, gx).sum().backward()
        getattr(torch.special, name)(ta, tx).sum().backward()
        np.testing.assert_allclose(to_np(gx.grad), tx.grad.numpy(), rtol=1e-10, err_msg=name)
    u, v = np.array([0.5, 1.5, 1.5, -2.0, 3.0, 2.0]), np.array([0.2, 0.1, 2.0, 0.5, 2.0, 3.0])
    for name in ("xlogy", "xlog1py"):
        gu, gv = (gm.tensor(t, dtype=gm.float64, device=device, requires_grad=True) for t in (u, v))
        tu, tv = (torch.tensor(t, requires_grad=True) for t in (u, v))
        getattr(gm.special, name)(gu, gv[:, None]).sum().backward()  # broadcast: gradients summed back
        getattr(torch.special, name)(tu, tv[:, None]).sum().backward()
        np.testing.assert_allclose(to_np(gu.grad), tu.grad.numpy(), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(to_np(gv.grad), tv.grad.numpy(), rtol=1e-12, err_msg=name)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py", "zeta"])
def test_a_number_in_either_place(name, device):
    for first, second in ((2, [3.0, 0.5]), ([3.0, 0.5], 2), (0.0, [float("nan"), 1.0]), ([2, 3], 2.5), (2.5, [2, 3])):
        def call(lib, dev):
            conv = (lambda v: lib.tensor(v, device=dev) if isinstance(v, list) else v)
            return getattr(lib.special, name)(conv(first), conv(second))
        ref, got = call(torch, "cpu"), call(gm, device)
        _same_dtype(got, ref)
        np.testing.assert_allclose(to_np(got), ref.numpy(), rtol=1e-6, equal_nan=True, err_msg=f"{name}")


# ---- orthogonal polynomials ------------------------------------------------------------------------------------
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
POLY_X = np.array([-3.0, -2.0, -1.0, -0.999, -0.5, 0.0, 0.3, 0.5, 1.0, 1.5, 2.0, 7.5, INF, -INF, NAN])
POLY_N = np.array([-2, -1, 0, 1, 2, 3, 5, 6, 7, 8, 12, 25])


@pytest.mark.parametrize("name", POLYNOMIALS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_polynomials_match_pytorch(name, dtype, device):
    tol = (1e-10, 1e-12) if dtype == "float64" else (1e-5, 1e-5)
    x, n = POLY_X[None, :], POLY_N[:, None]
    ref = getattr(torch.special, name)(torch.tensor(x, dtype=getattr(torch, dtype)), torch.tensor(n))
    got = getattr(gm.special, name)(gm.tensor(x, dtype=getattr(gm, dtype), device=device), gm.tensor(n, device=device))
    _same_dtype(got, ref)
    assert tuple(got.shape) == tuple(ref.shape)
    np.testing.assert_allclose(to_np(got), ref.numpy(), rtol=tol[0], atol=tol[1], equal_nan=True, err_msg=name)
    # n a number (a float one is truncated), x a number, integer x, float n tensor
    for xv, nv in ((x[0], 3), (x[0], 2.7), (0.25, POLY_N), ([1, 2, 3], 4), (x[0, :6], np.array([2.9]))):
        def call(lib, dev, xv=xv, nv=nv):
            conv = (lambda v: lib.tensor(v, device=dev) if isinstance(v, (list, np.ndarray)) else v)
            return getattr(lib.special, name)(conv(xv), conv(nv))
        ref, got = call(torch, "cpu"), call(gm, device)
        _same_dtype(got, ref)
        np.testing.assert_allclose(to_np(got), ref.numpy(), rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=name)


# ---- the rest: reductions, arguments ---------------------------------------------------------------------------
X = np.random.RandomState(0).randn(3, 4)


@pytest.mark.parametrize("case", [
    lambda l, t: l.special.softmax(t, 1), lambda l, t: l.special.softmax(t, -2, dtype=l.float32),
    lambda l, t: l.special.log_softmax(t, 0), lambda l, t: l.special.log_softmax(t, dim=1, dtype=l.float32),
    lambda l, t: l.special.logsumexp(t, 1), lambda l, t: l.special.logsumexp(t * 300, (0, 1), keepdim=True),
    lambda l, t: l.special.logsumexp(t, dim=-1, keepdim=True), lambda l, t: l.special.logit(t.sigmoid()),
    lambda l, t: l.special.logit(t.sigmoid() * 1.2 - 0.1, eps=0.05), lambda l, t: l.special.logit(t, 0.2),
    lambda l, t: l.special.multigammaln(t.abs() + 1.2, 3), lambda l, t: l.special.multigammaln(t * 3, 1),
    lambda l, t: l.special.polygamma(0, t.abs() + 0.1), lambda l, t: l.special.polygamma(3, t.abs() + 0.1),
    lambda l, t: l.special.round(t * 7.3, decimals=1), lambda l, t: l.special.round(t * 730, decimals=-1),
], ids=["softmax", "softmax dtype", "log_softmax", "log_softmax dtype", "logsumexp", "logsumexp dims keepdim",
        "logsumexp keyword", "logit", "logit eps", "logit eps outside", "multigammaln 3", "multigammaln 1",
        "polygamma 0", "polygamma 3", "round decimals", "round negative decimals"])
def test_other_functions_match_pytorch(case, device):
    a = gm.tensor(X, dtype=gm.float64, device=device, requires_grad=True)
    b = torch.tensor(X, requires_grad=True)
    ya, yb = case(gm, a), case(torch, b)
    _same_dtype(ya, yb)
    assert tuple(ya.shape) == tuple(yb.shape)
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-6 if ya.dtype == gm.float32 else 1e-12,
                               atol=1e-12, equal_nan=True)
    w = np.random.RandomState(2).randn(*yb.shape)
    (ya * gm.tensor(w, device=device, dtype=ya.dtype)).sum().backward()
    (yb * torch.tensor(w, dtype=yb.dtype)).sum().backward()
    # 1e-8: PyTorch's trigamma (digamma's derivative) is good to ~1e-9 (mpmath agrees with ours to 1e-16)
    np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-5 if ya.dtype == gm.float32 else 1e-8,
                               atol=1e-10)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_of_integers_with_a_dtype(name, device):
    ref = getattr(torch.special, name)(torch.tensor([[1, 2], [3, 7]]), 1, dtype=torch.float64)
    got = getattr(gm.special, name)(gm.tensor([[1, 2], [3, 7]], device=device), 1, dtype=gm.float64)
    _same_dtype(got, ref)
    np.testing.assert_allclose(to_np(got), ref.numpy(), rtol=1e-13)


NAMES = [n for n in dir(torch.special) if not n.startswith("_") and callable(getattr(torch.special, n))
         and n not in ("Tensor",)]


def _sample_args(name, lib, dev, dtype):
    t = lib.tensor([[0.25, 0.5, 0.75], [1.5, 2.5, 3.5]], dtype=dtype, device=dev)
    if name in ("gammainc", "gammaincc", "zeta", "xlogy", "xlog1py"):
        return (t + 1, t), {}
    if "polynomial" in name:
        return (t, 3), {}
    if name == "polygamma":
        return (2, t), {}
    if name == "multigammaln":
        return (t + 2, 2), {}
    if name in ("softmax", "log_softmax", "logsumexp"):
        return (t, 1), {}
    return (t,), {}


def test_every_torch_special_function_is_there():
    assert set(NAMES) <= set(dir(gm.special)), set(NAMES) - set(dir(gm.special))
    assert set(gm.special.__all__) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_argument_names_are_pytorchs(name):
    """Each argument passed by our parameter's name is accepted by PyTorch too, and the keyword-only ones are."""
    params = inspect.signature(getattr(gm.special, name)).parameters
    args, _ = _sample_args(name, torch, "cpu", torch.float64)
    positional = [p for p in params.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    kwargs = {p.name: a for p, a in zip(positional, args)}
    ref = getattr(torch.special, name)(**kwargs)
    got = getattr(gm.special, name)(**{k: gm.tensor(v.numpy()) if isinstance(v, torch.Tensor) else v
                                       for k, v in kwargs.items()})
    np.testing.assert_allclose(to_np(got), ref.numpy(), rtol=1e-6, atol=1e-12)
    keyword_only = {p.name for p in params.values() if p.kind is p.KEYWORD_ONLY}
    expected = {"dtype"} if name in ("softmax", "log_softmax") else {"out", "decimals"} if name == "round" else {"out"}
    assert keyword_only == expected


@pytest.mark.parametrize("name", NAMES)
def test_meta_integer_and_empty_inputs(name, device):
    args, kw = _sample_args(name, gm, "meta", gm.float32)
    y = getattr(gm.special, name)(*args, **kw)
    ref = getattr(torch.special, name)(*_sample_args(name, torch, "cpu", torch.float32)[0])
    assert y.device.type == "meta" and tuple(y.shape) == tuple(ref.shape)
    _same_dtype(y, ref)
    if name not in ("gammainc", "gammaincc", "round", "softmax", "log_softmax"):  # refused (error_inputs_specialns)
        targs = _sample_args(name, torch, "cpu", torch.int64)[0]
        gargs = _sample_args(name, gm, device, gm.int64)[0]
        ref, got = getattr(torch.special, name)(*targs), getattr(gm.special, name)(*gargs)
        _same_dtype(got, ref)
        np.testing.assert_allclose(to_np(got), ref.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    empty_t = [a[:0] if isinstance(a, torch.Tensor) else a for a in _sample_args(name, torch, "cpu", torch.float64)[0]]
    empty_g = [a[:0] if isinstance(a, gm.Tensor) else a for a in _sample_args(name, gm, device, gm.float64)[0]]
    ref, got = getattr(torch.special, name)(*empty_t), getattr(gm.special, name)(*empty_g)
    assert tuple(got.shape) == tuple(ref.shape)
    _same_dtype(got, ref)


def test_integers_promote_to_the_default_dtype(device):
    names = [n for n in NAMES if n not in ("gammainc", "gammaincc", "round", "softmax", "log_softmax")]
    torch.set_default_dtype(torch.float64)
    gm.set_default_dtype(gm.float64)
    try:
        for name in names:
            ref = getattr(torch.special, name)(*_sample_args(name, torch, "cpu", torch.int64)[0])
            got = getattr(gm.special, name)(*_sample_args(name, gm, device, gm.int64)[0])
            _same_dtype(got, ref)
    finally:
        torch.set_default_dtype(torch.float32)
        gm.set_default_dtype(gm.float32)


def test_out_argument(device):
    x = gm.tensor([0.5, 2.0], device=device)
    out = gm.empty(0, device=device)
    assert gm.special.erfcx(x, out=out) is out and tuple(out.shape) == (2,)
    np.testing.assert_allclose(to_np(out), torch.special.erfcx(torch.tensor([0.5, 2.0])).numpy(), rtol=1e-6)
    wide = gm.empty(2, dtype=gm.float64, device=device)
    gm.special.gammainc(x, x, out=wide)  # cast into out's dtype
    assert wide.dtype == gm.float64
    np.testing.assert_allclose(to_np(wide), torch.special.gammainc(torch.tensor([0.5, 2.0]),
                                                                   torch.tensor([0.5, 2.0])).numpy(), rtol=1e-6)
    longer = gm.zeros(3, device=device)
    with pytest.warns(UserWarning, match=r"resized since it had shape \[3\]"):
        gm.special.chebyshev_polynomial_t(x, 2, out=longer)
    assert tuple(longer.shape) == (2,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gm.special.logsumexp(gm.ones(2, 3, device=device), 1, out=gm.empty(2, device=device))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        gm.special.ndtr(x, out=gm.empty(2, dtype=gm.int64, device=device))
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        gm.special.i0e(gm.ones(2, device=device, requires_grad=True), out=gm.empty(2, device=device))
    with gm.no_grad():
        gm.special.i0e(gm.ones(2, device=device, requires_grad=True), out=out)


def test_reached_through_the_drop_in_name():
    assert gm.special is __import__("gpumemnet").special
    assert callable(gm.special.expit) and gm.special.psi(gm.tensor([1.0])).item() == pytest.approx(-0.5772156649)
