"""The matrix decompositions (_core/tensor_decomp.py, tensor_decomp_lu.py; gm.linalg's svd, svdvals, qr, eigh,
eigvalsh, pinv, matrix_rank, matrix_norm / norm 'nuc' / 2 / -2, cond, lstsq, lu_factor(_ex), lu, lu_solve,
householder_product; torch.svd, pinverse, nuclear_norm, lu, lu_unpack, lu_solve and the Tensor methods) against
PyTorch: values, shapes, dtypes, result types, and float64 gradients of gauge-invariant functions (a singular
vector's sign is LAPACK's choice, so only products such as U diag(S) Vh, U U^T or |U| are compared); on the CPU
and on CUDA (computed through the host there), and shapes on meta."""
import math

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
SHAPES = [(4, 3), (3, 4), (3, 3), (2, 5, 3), (2, 1, 3, 4)]


def _dt(t):
    return str(t.dtype).rsplit(".", 1)[-1]


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out]


def check(fn, arrays, device, grad=True, rtol=1e-7, atol=1e-9, dtype=np.float64):
    """fn(lib, *tensors) on gpumemnet (on device) and on PyTorch (CPU): every output's shape, dtype and values;
    with grad, the gradients of sum(out_i * W_i) (fixed random W_i) for every input."""
    arrays = [np.asarray(a, dtype) for a in arrays]
    gs = [gm.tensor(a, device=device, requires_grad=grad) for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad) for a in arrays]
    go, to = _flat(fn(gm, *gs)), _flat(fn(torch, *ts))
    assert len(go) == len(to)
    for g, t in zip(go, to):
        assert tuple(g.shape) == tuple(t.shape), (tuple(g.shape), tuple(t.shape))
        assert _dt(g) == _dt(t), (g.dtype, t.dtype)
        assert g.device.type == gm.device(device).type
        np.testing.assert_allclose(to_np(g), t.detach().numpy(), rtol=rtol, atol=atol)
    if not grad:
        return
    rs = np.random.RandomState(1)
    ws = [rs.randn(*t.shape) for t in to]
    lg = sum((g * gm.tensor(w, dtype=g.dtype, device=device)).sum() for g, w, t in zip(go, ws, to)
             if t.requires_grad)
    lt = sum((t * torch.tensor(w, dtype=t.dtype)).sum() for t, w in zip(to, ws) if t.requires_grad)
    lg.backward()
    lt.backward()
    for g, t in zip(gs, ts):
        if t.grad is None:  # (an input PyTorch leaves out of the graph, e.g. an empty tau: ours has no gradient)
            assert g.grad is None or not to_np(g.grad).any()
            continue
        np.testing.assert_allclose(to_np(g.grad), t.grad.numpy(), rtol=1e-6, atol=1e-8)


def _sym(shape):
    a = R.randn(*shape)
    return a + np.swapaxes(a, -1, -2) + 0.1 * R.randn(*shape)  # not exactly symmetric: only one triangle is read


# ---- SVD --------------------------------------------------------------------------------------------------------
def _svd_invariants(l, U, S, Vh):
    k = S.shape[-1]
    U, Vh = U.narrow(-1, 0, k), Vh.narrow(-2, 0, k)
    return S, (U * S.unsqueeze(-2)) @ Vh, U @ U.transpose(-2, -1), Vh.transpose(-2, -1) @ Vh, U.abs() * 2 + 1


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [True, False])
def test_linalg_svd(device, shape, full):
    a = R.randn(*shape)
    check(lambda l, t: _svd_invariants(l, *l.linalg.svd(t, full_matrices=full)), [a], device)
    check(lambda l, t: l.linalg.svd(t, full)[1], [a], device, dtype=np.float32, grad=False, rtol=1e-5, atol=1e-5)
    g, t = gm.linalg.svd(gm.tensor(a, device=device), full), torch.linalg.svd(torch.tensor(a), full)
    assert type(g).__name__ == "linalg_svd" and g._fields == ("U", "S", "Vh")
    assert [tuple(x.shape) for x in g] == [tuple(x.shape) for x in t]
    if full:  # the full factors are orthogonal matrices
        for x in (g.U, g.Vh):
            x = to_np(x)
            np.testing.assert_allclose(x @ np.swapaxes(x, -1, -2), np.broadcast_to(np.eye(x.shape[-1]), x.shape),
                                       atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_svd_gradients_of_factors(device, shape):
    a = R.randn(*shape)
    # U[:, i] Vh[i, :] products and |U|, |V| are unchanged by the sign of each pair of singular vectors
    check(lambda l, t: [(x := l.linalg.svd(t, False)).U.unsqueeze(-1) * x.Vh.unsqueeze(-3), x.Vh.abs()], [a], device)
    check(lambda l, t: l.linalg.svd(t)[0].abs().sum(-1) + 0 * t.sum(), [a], device)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3), (0, 3), (3, 0), (2, 0, 3)])
def test_svdvals_and_torch_svd(device, shape):
    a = R.randn(*shape)
    check(lambda l, t: l.linalg.svdvals(t), [a], device)
    for some in (True, False):
        def f(l, t):
            U, S, V = l.svd(t, some=some)
            return _svd_invariants(l, U, S, V.transpose(-2, -1))
        check(f, [a], device)
        check(lambda l, t: t.svd(some).V.shape[-1] + 0 * t.svd(some).S, [a], device)
    check(lambda l, t: l.svd(t, compute_uv=False), [a], device, grad=False)  # zero-filled U and V, S
    g = gm.svd(gm.tensor(a, device=device))
    assert type(g).__name__ == "svd" and g._fields == ("U", "S", "V")


def test_svd_empty_identity_factors():
    for shape in [(0, 3), (3, 0), (2, 0, 3)]:
        check(lambda l, t: l.linalg.svd(t), [np.zeros(shape)], "cpu", grad=False)


# ---- QR ---------------------------------------------------------------------------------------------------------
def _qr_invariants(l, Q, R_):
    k = min(Q.shape[-1], R_.shape[-2])
    return Q @ R_, Q.abs(), R_.abs(), Q.narrow(-1, 0, k) @ Q.narrow(-1, 0, k).transpose(-2, -1)


@pytest.mark.parametrize("shape", SHAPES + [(0, 3), (3, 0)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_linalg_qr(device, shape, mode):
    a = R.randn(*shape)
    differentiable = mode == "reduced" or shape[-2] <= shape[-1]
    check(lambda l, t: _qr_invariants(l, *l.linalg.qr(t, mode)), [a], device, grad=differentiable)
    check(lambda l, t: l.linalg.qr(t, mode).R.abs(), [a], device, grad=False, dtype=np.float32, rtol=1e-5,
          atol=1e-5)
    g = gm.linalg.qr(gm.tensor(a, device=device), mode=mode)
    assert type(g).__name__ == "linalg_qr" and g._fields == ("Q", "R")


def test_qr_mode_r_and_backward_errors(device):
    a = R.randn(4, 3)
    check(lambda l, t: [l.linalg.qr(t, "r")[0], l.linalg.qr(t, "r")[1].abs()], [a], device, grad=False)
    for mode in ("r", "complete"):
        x = gm.tensor(a, device=device, requires_grad=True)
        out = gm.linalg.qr(x, mode=mode).R.sum()
        with pytest.raises(RuntimeError, match=mode):
            out.backward()
        xt = torch.tensor(a, requires_grad=True)
        with pytest.raises(RuntimeError):
            torch.linalg.qr(xt, mode=mode).R.sum().backward()


def test_qr_gradient_of_r_only(device):
    for shape in [(5, 3), (3, 5)]:
        check(lambda l, t: l.linalg.qr(t).R.abs(), [R.randn(*shape)], device)
        check(lambda l, t: (lambda q: q.Q * q.Q)(l.linalg.qr(t)), [R.randn(*shape)], device)


# ---- eigh -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 3), (5, 5), (2, 4, 4), (0, 0), (2, 0, 0)])
@pytest.mark.parametrize("uplo", ["L", "U", "u"])
def test_linalg_eigh(device, shape, uplo):
    a = _sym(shape)

    def f(l, t):
        L, V = l.linalg.eigh(t, UPLO=uplo)
        return L, (V * L.unsqueeze(-2)) @ V.transpose(-2, -1), V * V, V.abs()
    check(f, [a], device)
    check(lambda l, t: l.linalg.eigvalsh(t, UPLO=uplo), [a], device)
    check(lambda l, t: l.linalg.eigvalsh(t, uplo), [a], device, dtype=np.float32, grad=False, rtol=1e-5, atol=1e-5)
    g = gm.linalg.eigh(gm.tensor(a, device=device))
    assert type(g).__name__ == "linalg_eigh" and g._fields == ("eigenvalues", "eigenvectors")


# ---- pinv, matrix_rank ------------------------------------------------------------------------------------------
def _deficient(shape, rank):
    return R.randn(*shape[:-1], rank) @ R.randn(*shape[:-2], rank, shape[-1])


@pytest.mark.parametrize("shape", SHAPES + [(0, 3), (2, 3, 0)])
def test_linalg_pinv(device, shape):
    a = R.randn(*shape)
    check(lambda l, t: l.linalg.pinv(t), [a], device)
    check(lambda l, t: l.pinverse(t), [a], device)
    check(lambda l, t: t.pinverse(rcond=0.3), [a], device)
    check(lambda l, t: l.linalg.pinv(t), [a], device, dtype=np.float32, grad=False, rtol=1e-4, atol=1e-5)


def test_pinv_tolerances_and_hermitian(device):
    d = _deficient((2, 5, 4), 2)
    check(lambda l, t: l.linalg.pinv(t), [d], device, grad=False, rtol=1e-6, atol=1e-8)
    check(lambda l, t: l.linalg.pinv(t, atol=1.0), [R.randn(4, 3)], device)
    check(lambda l, t: l.linalg.pinv(t, 0.4), [R.randn(4, 3)], device)
    check(lambda l, t: l.linalg.pinv(t, rtol=0.4, atol=0.5), [R.randn(4, 3)], device)
    check(lambda l, t: l.linalg.pinv(t, atol=l.tensor([0.1, 1.5], dtype=t.dtype, device=t.device).reshape(2, 1)),
          [R.randn(4, 3)], device)
    s = _sym((2, 4, 4))
    s = s + np.swapaxes(s, -1, -2)
    check(lambda l, t: l.linalg.pinv(t, hermitian=True), [s], device)


def test_matrix_rank(device):
    d = _deficient((2, 5, 4), 2)
    check(lambda l, t: l.linalg.matrix_rank(t), [d], device, grad=False)
    check(lambda l, t: l.linalg.matrix_rank(t), [d], device, grad=False, dtype=np.float32)
    check(lambda l, t: l.linalg.matrix_rank(t, atol=1.0, rtol=0.1), [R.randn(3, 5, 4)], device, grad=False)
    check(lambda l, t: l.linalg.matrix_rank(t, 1.0), [R.randn(3, 5, 4)], device, grad=False)
    check(lambda l, t: l.linalg.matrix_rank(t, rtol=0.5), [R.randn(3, 5, 4)], device, grad=False)
    check(lambda l, t: l.linalg.matrix_rank(t, hermitian=True), [_deficient((4, 4), 2)], device, grad=False)
    check(lambda l, t: l.linalg.matrix_rank(t, atol=l.tensor([0.5, 2.0], dtype=t.dtype, device=t.device)),
          [R.randn(2, 3, 4)], device, grad=False)
    check(lambda l, t: l.linalg.matrix_rank(t), [np.zeros((2, 0, 3))], device, grad=False)


# ---- the norms of the singular values, cond ---------------------------------------------------------------------
@pytest.mark.parametrize("ord", ["nuc", 2, -2])
def test_matrix_norm_svd_orders(device, ord):
    a = R.randn(2, 3, 4)
    check(lambda l, t: l.linalg.matrix_norm(t, ord), [a], device)
    check(lambda l, t: l.linalg.matrix_norm(t, ord, dim=(0, 2), keepdim=True), [a], device)
    check(lambda l, t: l.linalg.matrix_norm(t, ord, dim=(-1, 0)), [a], device)
    check(lambda l, t: l.linalg.norm(t, ord, dim=(2, 1)), [a], device)
    check(lambda l, t: l.linalg.norm(t[0], ord, keepdim=True), [a], device)
    check(lambda l, t: l.linalg.matrix_norm(t, ord), [a], device, dtype=np.float32, grad=False, rtol=1e-5)
    check(lambda l, t: l.linalg.matrix_norm(t, ord, dtype=l.float64), [a], device, dtype=np.float32, grad=False,
          rtol=1e-6)
    if ord != -2:  # (PyTorch's -2 of empty matrices raises IndexError: the error table has it)
        check(lambda l, t: l.linalg.matrix_norm(t, ord), [np.zeros((2, 0, 3))], device, grad=False)


def test_nuclear_norm(device):
    a = R.randn(2, 3, 4)
    check(lambda l, t: l.nuclear_norm(t[0]), [a], device)
    check(lambda l, t: l.nuclear_norm(t[1], True), [a], device)
    check(lambda l, t: l.nuclear_norm(t, dim=(0, 2)), [a], device)
    check(lambda l, t: l.nuclear_norm(t, (2, 1), keepdim=True), [a], device)


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf])
def test_cond(device, p):
    a = R.randn(2, 4, 4)
    # PyTorch's backward of the norm-based orders fails (an in-place write to the saved inverse); ours runs
    check(lambda l, t: l.linalg.cond(t, p), [a], device, grad=p in (None, 2, -2))
    if p not in (None, 2, -2):
        x = gm.tensor(a, device=device, requires_grad=True)
        gm.linalg.cond(x, p).sum().backward()
        assert np.isfinite(to_np(x.grad)).all()
    check(lambda l, t: l.linalg.cond(t, p=p), [a], device, dtype=np.float32, grad=False, rtol=1e-4)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    if p in ("fro", "nuc", 1, -1, math.inf, -math.inf):  # an exactly singular matrix: inf
        check(lambda l, t: l.linalg.cond(t, p), [singular], device, grad=False)
    check(lambda l, t: l.linalg.cond(t, p), [np.zeros((2, 0, 0))], device, grad=False)
    if p in (None, 2, -2):
        check(lambda l, t: l.linalg.cond(t, p), [R.randn(3, 5)], device)
        check(lambda l, t: l.linalg.cond(t, p), [np.zeros((3, 3))], device, grad=False)  # NaN: 0 / 0


# ---- lstsq ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((5, 3), (5,)), ((2, 4, 3), (2, 4, 2)),
                                    ((1, 4, 3), (2, 4, 2)), ((2, 1, 4, 3), (1, 3, 4, 2))])
def test_lstsq(driver, shapes):
    a, b = R.randn(*shapes[0]), R.randn(*shapes[1])
    check(lambda l, A, B: l.linalg.lstsq(A, B, driver=driver), [a, b], "cpu")
    check(lambda l, A, B: l.linalg.lstsq(A, B, driver=driver), [a, b], "cpu", dtype=np.float32, grad=False,
          rtol=1e-4, atol=1e-5)
    g = gm.linalg.lstsq(gm.tensor(a), gm.tensor(b), driver=driver)
    assert type(g).__name__ == "linalg_lstsq"
    assert g._fields == ("solution", "residuals", "rank", "singular_values")


@pytest.mark.parametrize("driver", [None, "gelsd", "gelss"])
def test_lstsq_rank_deficient(driver):
    a, b = _deficient((6, 4), 2), R.randn(6, 3)
    check(lambda l, A, B: l.linalg.lstsq(A, B, driver=driver), [a, b], "cpu", grad=False, rtol=1e-6, atol=1e-8)
    if driver is not None:  # (gelsy truncates through its QR, not the SVD: the module docstring says so)
        check(lambda l, A, B: l.linalg.lstsq(A, B, 0.3, driver=driver), [R.randn(5, 3), b[:5]], "cpu", grad=False)
    check(lambda l, A, B: l.linalg.lstsq(A, B, driver=driver), [np.zeros((0, 3)), np.zeros((0, 2))], "cpu",
          grad=False)
    check(lambda l, A, B: l.linalg.lstsq(A, B, driver=driver), [np.zeros((3, 0)), R.randn(3, 2)], "cpu",
          grad=False)


def test_lstsq_cuda_default_driver(device):
    # PyTorch's CUDA has only gels (residuals, no rank); on the CPU the default is gelsy
    g = gm.linalg.lstsq(gm.tensor(R.randn(5, 3), device=device), gm.tensor(R.randn(5, 2), device=device))
    if device == "cpu":
        assert tuple(g.residuals.shape) == (0,) and tuple(g.rank.shape) == ()
    else:
        assert tuple(g.residuals.shape) == (2,) and tuple(g.rank.shape) == (0,)
        assert g.solution.device.type == "cuda"


# ---- LU ---------------------------------------------------------------------------------------------------------
LU_SHAPES = [(3, 3), (4, 3), (3, 4), (2, 5, 5), (2, 3, 5), (2, 5, 3), (0, 0), (2, 0, 3)]


@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_factor_and_lu(device, shape):
    a = R.randn(*shape)
    check(lambda l, t: l.linalg.lu_factor(t), [a], device)
    check(lambda l, t: l.linalg.lu_factor_ex(t), [a], device)
    check(lambda l, t: l.linalg.lu(t), [a], device)
    check(lambda l, t: l.lu(t, get_infos=True), [a], device)
    check(lambda l, t: t.lu(), [a], device)
    check(lambda l, t: l.lu_unpack(*l.linalg.lu_factor(t)), [a], device)
    check(lambda l, t: l.lu_unpack(*l.linalg.lu_factor(t), unpack_data=False), [a], device, grad=False)
    check(lambda l, t: l.lu_unpack(*l.linalg.lu_factor(t), unpack_pivots=False), [a], device)
    check(lambda l, t: l.linalg.lu(t), [a], device, dtype=np.float32, grad=False, rtol=1e-5, atol=1e-6)
    g = gm.linalg.lu_factor(gm.tensor(a, device=device))
    assert type(g).__name__ == "linalg_lu_factor" and _dt(g.pivots) == "int32"
    assert type(gm.linalg.lu(gm.tensor(a))).__name__ == "linalg_lu"


def test_lu_singular(device):
    z = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    check(lambda l, t: l.linalg.lu_factor_ex(t), [np.zeros((2, 3, 3))], device, grad=False)
    check(lambda l, t: l.linalg.lu(t), [z], device, grad=False)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("shapes", [((3, 3), (3, 2)), ((2, 4, 4), (2, 4, 3)), ((4, 4), (2, 4, 1)),
                                    ((2, 1, 3, 3), (3, 3, 3))])
def test_lu_solve(device, left, adjoint, shapes):
    a, b = R.randn(*shapes[0]), R.randn(*shapes[1])
    if not left:
        b = np.swapaxes(b, -1, -2)
    check(lambda l, A, B: l.linalg.lu_solve(*l.linalg.lu_factor(A), B, left=left, adjoint=adjoint), [a, b],
          device)
    if left and not adjoint:
        check(lambda l, A, B: l.lu_solve(B, *l.linalg.lu_factor(A)), [a, b], device)
        check(lambda l, A, B: B.lu_solve(*l.linalg.lu_factor(A)), [a, b], device)


@pytest.mark.parametrize("shapes", [((4, 3), (3,)), ((4, 3), (2,)), ((2, 5, 3), (2, 3)), ((3, 3), (0,))])
def test_householder_product(device, shapes):
    a, tau = R.randn(*shapes[0]), R.randn(*shapes[1])
    check(lambda l, A, t: l.linalg.householder_product(A, t), [a, tau], device)
    # geqrf's output (from PyTorch) gives linalg.qr's Q
    geq, tg = torch.geqrf(torch.tensor(a))
    q = gm.linalg.householder_product(gm.tensor(geq.numpy(), device=device), gm.tensor(tg.numpy(), device=device))
    np.testing.assert_allclose(to_np(q), torch.linalg.qr(torch.tensor(a)).Q.numpy(), atol=1e-12)


# ---- meta: shapes and dtypes only (the memory estimator) --------------------------------------------------------
META = [
    lambda l, t: l.linalg.svd(t),
    lambda l, t: l.linalg.svd(t, full_matrices=False),
    lambda l, t: l.linalg.svdvals(t),
    lambda l, t: l.svd(t, some=False),
    lambda l, t: l.linalg.qr(t, mode="complete"),
    lambda l, t: l.linalg.qr(t, mode="r"),
    lambda l, t: l.linalg.eigh(t[..., :3, :3]),
    lambda l, t: l.linalg.pinv(t),
    lambda l, t: l.linalg.matrix_rank(t),
    lambda l, t: l.linalg.matrix_norm(t, "nuc"),
    lambda l, t: l.linalg.cond(t),
    lambda l, t: l.linalg.lstsq(t, t[..., :2], driver="gelsd"),
    lambda l, t: l.linalg.lu_factor_ex(t),
    lambda l, t: l.linalg.lu(t),
    lambda l, t: l.linalg.lu_solve(*l.linalg.lu_factor(t[..., :3, :3]), t[..., :3, :]),
    lambda l, t: l.linalg.householder_product(t, t[..., 0, :2]),
]


@pytest.mark.parametrize("i", range(len(META)))
def test_meta_shapes_and_backward(i):
    fn = META[i]
    g = _flat(fn(gm, gm.empty(2, 4, 3, device="meta")))
    t = _flat(fn(torch, torch.randn(2, 4, 3)))  # (PyTorch has no meta kernel for some of them)
    assert [(tuple(x.shape), _dt(x)) for x in g] == [(tuple(x.shape), _dt(x)) for x in t]
    assert all(x.device.type == "meta" for x in g)
    x = gm.empty(2, 4, 3, device="meta", requires_grad=True)
    out = [o for o in _flat(fn(gm, x)) if o.requires_grad]
    if out and i not in (4, 5):  # (mode='r', and 'complete' of a tall A, are not differentiable)
        sum(o.sum() for o in out).backward()
        assert tuple(x.grad.shape) == (2, 4, 3) and x.grad.device.type == "meta"


# ---- LDL^T ------------------------------------------------------------------------------------------------------
LDL_CASES = [np.array([[0.0, 1, 2], [1, 0, 3], [2, 3, 0]]),  # 2x2 pivots
             np.array([[1e-3, 5, 0.1, 2], [5, 1e-3, 3, 1], [0.1, 3, 2, 0.5], [2, 1, 0.5, -1]]),
             _sym((2, 5, 5)), _sym((6, 6)) * np.where(np.eye(6), 1e-2, 1.0), np.zeros((0, 0)), np.zeros((2, 3, 3))]


@pytest.mark.parametrize("i", range(len(LDL_CASES)))
def test_ldl_factor_and_solve(device, i):
    a = LDL_CASES[i]
    check(lambda l, t: l.linalg.ldl_factor_ex(t), [a], device, grad=False)
    if not (a == 0).all() or a.size == 0:
        check(lambda l, t: l.linalg.ldl_factor(t, hermitian=True), [a], device, grad=False)
        b = R.randn(*a.shape[:-1], 2)
        check(lambda l, t, B: l.linalg.ldl_solve(*l.linalg.ldl_factor(t), B), [a, b], device, grad=False, rtol=1e-6)
        check(lambda l, t, B: l.linalg.ldl_solve(*l.linalg.ldl_factor(t), B), [a, b[None]], device, grad=False,
              rtol=1e-6)
        check(lambda l, t: l.linalg.ldl_factor(t), [a], device, grad=False, dtype=np.float32, rtol=1e-4, atol=1e-5)
    g = gm.linalg.ldl_factor_ex(gm.tensor(a, device=device))
    assert type(g).__name__ == "linalg_ldl_factor_ex" and g._fields == ("LD", "pivots", "info")


def test_ldl_has_no_derivative(device):
    # PyTorch records ldl_factor / ldl_solve without a derivative: backward raises
    x = gm.tensor(_sym((3, 3)), device=device, requires_grad=True)
    LD, piv = gm.linalg.ldl_factor(x)
    assert LD.requires_grad
    with pytest.raises(RuntimeError, match="derivative for aten::linalg_ldl_factor_ex is not implemented"):
        LD.sum().backward()
    b = gm.tensor(R.randn(3, 1), device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="linalg_ldl_solve is not implemented"):
        gm.linalg.ldl_solve(LD.detach(), piv, b).sum().backward()
    meta = gm.linalg.ldl_factor_ex(gm.empty(2, 3, 3, device="meta"))
    assert [tuple(t.shape) for t in meta] == [(2, 3, 3), (2, 3), (2,)] and _dt(meta.pivots) == "int32"


def test_lu_without_pivoting_on_cuda(device):
    # PyTorch's CUDA factorises without pivoting (pivots 1..k); its CPU refuses (the error table has that)
    if device == "cpu":
        pytest.skip("CUDA only")
    a = R.randn(2, 4, 4) + 4 * np.eye(4)
    P, L, U = gm.linalg.lu(gm.tensor(a, device=device), pivot=False)
    np.testing.assert_allclose(to_np(P), np.broadcast_to(np.eye(4), (2, 4, 4)))
    np.testing.assert_allclose(to_np(L) @ to_np(U), a, atol=1e-12)


def test_cpu_autocast_widens_as_pytorch():
    # the ops on PyTorch's CPU float32 list run in float32; linalg.pinv, matrix_norm and the LU / LDL factorisations
    # are not on it and refuse bfloat16 there too
    x, s = R.randn(4, 3), _sym((3, 3))
    ops = {"svd": lambda l, a, b: l.linalg.svd(a)[1], "svdvals": lambda l, a, b: l.linalg.svdvals(a),
           "torch.svd": lambda l, a, b: l.svd(a)[1], "qr": lambda l, a, b: l.linalg.qr(a).R.abs(),
           "eigvalsh": lambda l, a, b: l.linalg.eigvalsh(b), "pinverse": lambda l, a, b: l.pinverse(a),
           "matrix_rank": lambda l, a, b: l.linalg.matrix_rank(a), "cond": lambda l, a, b: l.linalg.cond(b),
           "lstsq": lambda l, a, b: l.linalg.lstsq(a, a).solution, "lu": lambda l, a, b: l.lu(b)[0],
           "householder_product": lambda l, a, b: l.linalg.householder_product(a, a[0, :2])}
    for name, f in ops.items():
        with gm.autocast("cpu", dtype=gm.bfloat16):
            g = f(gm, gm.tensor(x).bfloat16(), gm.tensor(s).bfloat16())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            t = f(torch, torch.tensor(x).bfloat16(), torch.tensor(s).bfloat16())
        assert _dt(g) == _dt(t), name
        np.testing.assert_allclose(to_np(g), t.float().numpy(), rtol=1e-4, atol=1e-4, err_msg=name)
    for f in (lambda l, a: l.linalg.pinv(a), lambda l, a: l.linalg.matrix_norm(a, "nuc"),
              lambda l, a: l.linalg.lu_factor(a[:3]), lambda l, a: l.linalg.ldl_factor(a[:3])):
        with gm.autocast("cpu", dtype=gm.bfloat16):
            with pytest.raises((RuntimeError, NotImplementedError)):
                f(gm, gm.tensor(x).bfloat16())


def test_result_types_are_pytorch_s():
    a, b = _sym((3, 3)), R.randn(3, 2)
    calls = [lambda l, A, B: l.linalg.svd(A), lambda l, A, B: A.svd(), lambda l, A, B: l.linalg.qr(A),
             lambda l, A, B: l.linalg.eigh(A), lambda l, A, B: l.linalg.lstsq(A, B),
             lambda l, A, B: l.linalg.lu_factor(A), lambda l, A, B: l.linalg.lu_factor_ex(A),
             lambda l, A, B: l.linalg.lu(A), lambda l, A, B: l.lu_unpack(*l.linalg.lu_factor(A)),
             lambda l, A, B: l.lu(A), lambda l, A, B: l.lu(A, get_infos=True), lambda l, A, B: l.linalg.ldl_factor(A),
             lambda l, A, B: l.linalg.ldl_factor_ex(A)]
    for call in calls:
        g, t = call(gm, gm.tensor(a), gm.tensor(b)), call(torch, torch.tensor(a), torch.tensor(b))
        assert type(g).__name__ == type(t).__name__
        theirs = getattr(t, "_fields", None) or getattr(type(t), "__match_args__", None)
        assert tuple(getattr(g, "_fields", None) or ()) == tuple(theirs or ())


def test_tensor_norm_nuc_is_the_nuclear_norm():
    a = np.random.RandomState(5).standard_normal((3, 4))
    np.testing.assert_allclose(float(gm.tensor(a).norm("nuc")), float(torch.tensor(a).norm("nuc")), rtol=1e-12)
    np.testing.assert_allclose(float(gm.norm(gm.tensor(a), p="nuc")), float(torch.norm(torch.tensor(a), p="nuc")),
                               rtol=1e-12)


# ---- eig, eigvals (forward only), svd_lowrank and pca_lowrank ---------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_eig_and_eigvals_match_pytorch_in_float64(shape):
    """LAPACK's geev on both sides: the same eigenvalues in the same order, the same unit eigenvectors up to a
    phase (LAPACK builds differ in it: each is compared with its largest entry turned real and positive)."""
    a = R.standard_normal(shape)
    w, v = gm.linalg.eig(gm.tensor(a))
    tw, tv = torch.linalg.eig(torch.tensor(a))
    assert str(w.dtype) == "gpumemnet.complex128" and tuple(v.shape) == shape
    np.testing.assert_allclose(gm.view_as_real(w).numpy(), torch.view_as_real(tw).numpy(), rtol=1e-10, atol=1e-12)

    def gauged(vectors):
        top = np.take_along_axis(vectors, np.abs(vectors).argmax(-2)[..., None, :], -2)
        return vectors * np.conj(top) / np.abs(top)
    np.testing.assert_allclose(gauged(gm.view_as_real(v).numpy() @ [1, 1j]), gauged(tv.numpy()), atol=1e-10)
    ev = gm.linalg.eigvals(gm.tensor(a))
    np.testing.assert_allclose(gm.view_as_real(ev).numpy(), torch.view_as_real(tw).numpy(), rtol=1e-10, atol=1e-12)


def test_eig_of_float32_is_complex64_and_decomposes_the_matrix():
    a = R.standard_normal((5, 5)).astype(np.float32)
    w, v = gm.linalg.eig(gm.tensor(a))
    assert str(w.dtype) == "gpumemnet.complex64" and str(v.dtype) == "gpumemnet.complex64"
    av = a.astype(np.complex128) @ (gm.view_as_real(v).numpy() @ [1, 1j])
    vw = (gm.view_as_real(v).numpy() @ [1, 1j]) * (gm.view_as_real(w).numpy() @ [1, 1j])
    np.testing.assert_allclose(av, vw, atol=1e-4)


def test_a_real_tensor_made_complex_keeps_its_values_and_passes_the_real_gradient():
    x = gm.tensor([1.0, -2.0, 3.0], dtype=gm.float64, requires_grad=True)
    z = x.to(gm.complex128)
    assert str(z.dtype) == "gpumemnet.complex128"
    np.testing.assert_array_equal(gm.view_as_real(z).detach().numpy(), [[1, 0], [-2, 0], [3, 0]])
    (z * z).abs().sum().backward()
    t = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (t.to(torch.complex128) * t.to(torch.complex128)).abs().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("fn", ["pca", "svd"])
def test_low_rank_factorisations_match_pytorch_on_a_matrix_of_that_rank(fn):
    """PyTorch's randomized iteration is exact when the matrix has rank <= q: the singular values, the rank-q
    product and the gradient of the singular values' sum equal ours (an exact truncated SVD)."""
    rank = 4  # q = the rank: a zero singular value's vectors (and so their gradient) are arbitrary
    a = R.standard_normal((12, rank)) @ R.standard_normal((rank, 7))
    out = []
    for lib in (gm, torch):
        x = lib.tensor(a, requires_grad=True)
        U, S, V = lib.pca_lowrank(x, q=4) if fn == "pca" else lib.svd_lowrank(x, q=4)
        S.sum().backward()
        out.append((U.shape, S.detach().numpy(), (U @ lib.diag(S) @ V.mT).detach().numpy(), x.grad.numpy()))
    (gs, gS, gP, gG), (ts, tS, tP, tG) = out
    assert tuple(gs) == tuple(ts) == (12, 4)
    np.testing.assert_allclose(gS, tS, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gP, tP, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gG, tG, rtol=1e-8, atol=1e-8)
