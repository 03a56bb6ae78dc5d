"""Products and small linear algebra against PyTorch itself (_core/tensor_products.py, tensor_solve.py,
tensor_stats.py, linalg.py): addmm / addmv / addr / baddbmm / addbmm and their in-place forms, mv, inner, vdot,
kron, tensordot, chain_matmul, linalg.multi_dot / matmul / vecdot / cross, cross, block_diag, cartesian_prod,
combinations, diag_embed, diagflat, cov, corrcoef, the trapezoid rules, det / slogdet / logdet / inv / solve /
solve_triangular / cholesky / cholesky_solve / cholesky_inverse / matrix_power / matrix_exp / tensorinv /
tensorsolve, linalg.vander / diagonal. Values, dtypes, shapes and (float64) gradients on the CPU and on CUDA;
shapes and dtypes on meta; autocast's dtypes; singular matrices."""
import math
import warnings

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)


def rn(*shape):
    return R.randn(*shape)


def well_conditioned(*shape):
    """Random square matrices with a dominant diagonal (invertible, pivots still move: rows are shuffled)."""
    a = R.randn(*shape)
    n = shape[-1]
    a = a + np.eye(n) * 3 * np.sign(R.randn(*shape[:-2], 1, 1) + 0.1)
    return a[..., R.permutation(n), :]


# name -> (function of (lib, *tensors), inputs (arrays), differentiable)
CASES = {
    "addmm": (lambda l, i, a, b: l.addmm(i, a, b), [rn(3, 4), rn(3, 5), rn(5, 4)], True),
    "addmm bias row, beta alpha": (lambda l, i, a, b: l.addmm(i, a, b, beta=0.5, alpha=-2), [rn(4), rn(3, 5),
                                                                                            rn(5, 4)], True),
    "addmm 0-d input": (lambda l, i, a, b: i.addmm(a, b, alpha=3), [rn(), rn(3, 5), rn(5, 4)], True),
    "addmm beta 0": (lambda l, i, a, b: l.addmm(i, a, b, beta=0), [rn(1, 4), rn(3, 5), rn(5, 4)], True),
    "addmm empty inner": (lambda l, i, a, b: l.addmm(i, a, b, beta=2), [rn(3, 4), rn(3, 0), rn(0, 4)], True),
    "addmv": (lambda l, i, a, v: l.addmv(i, a, v, beta=2, alpha=0.5), [rn(3), rn(3, 5), rn(5)], True),
    "addmv 0-d input": (lambda l, i, a, v: i.addmv(a, v), [rn(), rn(3, 5), rn(5)], True),
    "addr": (lambda l, i, a, b: l.addr(i, a, b, beta=-1, alpha=2), [rn(3, 4), rn(3), rn(4)], True),
    "addr broadcast": (lambda l, i, a, b: i.addr(a, b), [rn(4), rn(3), rn(4)], True),
    "baddbmm": (lambda l, i, a, b: l.baddbmm(i, a, b, beta=0.25, alpha=1.5), [rn(2, 3, 4), rn(2, 3, 5),
                                                                              rn(2, 5, 4)], True),
    "baddbmm broadcast input": (lambda l, i, a, b: i.baddbmm(a, b), [rn(3, 1), rn(2, 3, 5), rn(2, 5, 4)], True),
    "addbmm": (lambda l, i, a, b: l.addbmm(i, a, b, beta=2, alpha=-1), [rn(3, 4), rn(2, 3, 5), rn(2, 5, 4)], True),
    "addbmm empty batch": (lambda l, i, a, b: i.addbmm(a, b), [rn(3, 4), rn(0, 3, 5), rn(0, 5, 4)], True),
    "mv": (lambda l, a, v: l.mv(a, v), [rn(3, 5), rn(5)], True),
    "mv method": (lambda l, a, v: a.mv(v), [rn(0, 5), rn(5)], True),
    "inner": (lambda l, a, b: l.inner(a, b), [rn(2, 3, 4), rn(5, 4)], True),
    "inner vectors": (lambda l, a, b: a.inner(b), [rn(4), rn(4)], True),
    "inner 0-d": (lambda l, a, b: l.inner(a, b), [rn(), rn(2, 3)], True),
    "vdot": (lambda l, a, b: l.vdot(a, b), [rn(5), rn(5)], True),
    "vdot method": (lambda l, a, b: a.vdot(b), [rn(5), rn(5)], True),
    "kron": (lambda l, a, b: l.kron(a, b), [rn(2, 3), rn(4, 2)], True),
    "kron ranks differ": (lambda l, a, b: a.kron(b), [rn(3), rn(2, 2, 2)], True),
    "kron 0-d": (lambda l, a, b: l.kron(a, b), [rn(), rn(2, 3)], True),
    "chain_matmul": (lambda l, a, b, c: l.chain_matmul(a, b, c), [rn(3, 10), rn(10, 2), rn(2, 6)], True),
    "chain_matmul one": (lambda l, a: l.chain_matmul(a), [rn(3, 4)], True),
    "multi_dot": (lambda l, a, b, c, d: l.linalg.multi_dot([a, b, c, d]), [rn(5), rn(5, 2), rn(2, 7), rn(7, 3)],
                  True),
    "multi_dot vectors": (lambda l, a, b: l.linalg.multi_dot((a, b)), [rn(4), rn(4)], True),
    "multi_dot last vector": (lambda l, a, b, c: l.linalg.multi_dot([a, b, c]), [rn(3, 4), rn(4, 6), rn(6)], True),
    "linalg.matmul": (lambda l, a, b: l.linalg.matmul(a, b), [rn(2, 3, 4), rn(4)], True),
    "vecdot": (lambda l, a, b: l.linalg.vecdot(a, b), [rn(2, 3, 4), rn(3, 4)], True),
    "vecdot dim": (lambda l, a, b: l.linalg.vecdot(a, b, dim=0), [rn(4, 3), rn(4, 1)], True),
    "cross dim": (lambda l, a, b: l.cross(a, b, dim=0), [rn(3, 4), rn(3, 4)], True),
    "cross method negative dim": (lambda l, a, b: a.cross(b, dim=-1), [rn(2, 3), rn(2, 3)], True),
    "cross broadcast": (lambda l, a, b: l.cross(a, b, 1), [rn(4, 3), rn(1, 3)], True),
    "linalg.cross": (lambda l, a, b: l.linalg.cross(a, b), [rn(2, 5, 3), rn(5, 3)[None]], True),
    "linalg.cross dim": (lambda l, a, b: l.linalg.cross(a, b, dim=1), [rn(2, 3, 2), rn(2, 3, 2)], True),
    "block_diag": (lambda l, a, b, c, d: l.block_diag(a, b, c, d), [rn(2, 3), rn(), rn(4), rn(3, 1)], True),
    "block_diag one": (lambda l, a: l.block_diag(a), [rn(2, 2)], True),
    "block_diag empty block": (lambda l, a, b: l.block_diag(a, b), [rn(0, 2), rn(2, 0)], True),
    "cartesian_prod": (lambda l, a, b, c: l.cartesian_prod(a, b, c), [rn(2), rn(3), rn(2)], True),
    "cartesian_prod one": (lambda l, a: l.cartesian_prod(a) * 1, [rn(3)], True),
    "combinations": (lambda l, a: l.combinations(a), [rn(4)], True),
    "combinations r=3": (lambda l, a: l.combinations(a, 3), [rn(5)], True),
    "combinations replacement": (lambda l, a: l.combinations(a, r=2, with_replacement=True), [rn(3)], True),
    "combinations r=1": (lambda l, a: l.combinations(a, 1), [rn(3)], True),
    "combinations r too big": (lambda l, a: l.combinations(a, 4), [rn(3)], True),
    "diag_embed": (lambda l, a: l.diag_embed(a), [rn(2, 3)], True),
    "diag_embed offset dims": (lambda l, a: a.diag_embed(1, 0, 2), [rn(2, 3)], True),
    "diag_embed negative offset": (lambda l, a: l.diag_embed(a, -2, dim1=-1, dim2=0), [rn(3, 2, 4)], True),
    "diag_embed vector": (lambda l, a: l.diag_embed(a), [rn(4)], True),
    "diagflat": (lambda l, a: l.diagflat(a), [rn(2, 2)], True),
    "diagflat offset": (lambda l, a: a.diagflat(-1), [rn(3)], True),
    "cov": (lambda l, a: l.cov(a), [rn(3, 6)], True),
    "cov vector": (lambda l, a: a.cov(), [rn(6)], True),
    "cov correction 0": (lambda l, a: l.cov(a, correction=0), [rn(2, 5)], True),
    "cov aweights": (lambda l, a, w: l.cov(a, aweights=w.abs()), [rn(3, 5), rn(5)], True),
    "cov fweights and aweights": (lambda l, a, w: l.cov(a, correction=2, fweights=l.tensor(
        [1, 3, 0, 2, 1], device=a.device), aweights=w.abs()), [rn(3, 5), rn(5)], True),
    "cov fweights": (lambda l, a: a.cov(fweights=l.tensor([1, 3, 0, 2, 1], device=a.device)), [rn(3, 5)], True),
    "corrcoef": (lambda l, a: l.corrcoef(a), [rn(3, 6)], True),
    "corrcoef method": (lambda l, a: a.corrcoef(), [rn(2, 4)], True),
    "trapezoid": (lambda l, y: l.trapezoid(y), [rn(3, 5)], True),
    "trapezoid dx dim": (lambda l, y: l.trapezoid(y, dx=0.5, dim=0), [rn(3, 5)], True),
    "trapezoid x": (lambda l, y, x: l.trapezoid(y, x), [rn(3, 5), rn(5)], True),
    "trapezoid x 2-D": (lambda l, y, x: l.trapezoid(y, x, dim=0), [rn(3, 5), rn(3, 5)], True),
    "trapezoid x broadcast": (lambda l, y, x: l.trapezoid(y, x), [rn(2, 3, 5), rn(3, 5)], True),
    "trapezoid empty": (lambda l, y: l.trapezoid(y) + 0, [rn(3, 0)], True),
    "trapz x": (lambda l, y, x: l.trapz(y, x), [rn(3, 5), rn(5)], True),
    "trapz dx": (lambda l, y: l.trapz(y, dx=2.0, dim=0), [rn(3, 5)], True),
    "cumulative_trapezoid": (lambda l, y: l.cumulative_trapezoid(y), [rn(3, 5)], True),
    "cumulative_trapezoid dx": (lambda l, y: l.cumulative_trapezoid(y, dx=0.3, dim=0), [rn(4, 2)], True),
    "cumulative_trapezoid x": (lambda l, y, x: l.cumulative_trapezoid(y, x), [rn(3, 5), rn(5)], True),
    "cumulative_trapezoid one sample": (lambda l, y: l.cumulative_trapezoid(y) + 0, [rn(3, 1)], True),
    "det": (lambda l, a: l.linalg.det(a), [well_conditioned(4, 4)], True),
    "det batch": (lambda l, a: l.det(a), [well_conditioned(2, 3, 5, 5)], True),
    "det method 1x1": (lambda l, a: a.det(), [rn(3, 1, 1)], True),
    "det random": (lambda l, a: a.det(), [rn(6, 6)], True),
    "det 0x0": (lambda l, a: l.det(a) + 0, [rn(2, 0, 0)], True),
    "slogdet": (lambda l, a: l.linalg.slogdet(a).logabsdet, [well_conditioned(3, 4, 4)], True),
    "slogdet sign": (lambda l, a: l.slogdet(a)[0], [rn(5, 3, 3)], False),
    "slogdet method": (lambda l, a: a.slogdet()[1], [rn(4, 4)], True),
    "logdet": (lambda l, a: l.logdet(a), [rn(6, 3, 3)], True),
    "inv": (lambda l, a: l.linalg.inv(a), [well_conditioned(4, 4)], True),
    "inv batch": (lambda l, a: l.inverse(a), [rn(3, 2, 5, 5)], True),
    "inverse method": (lambda l, a: a.inverse(), [rn(3, 3)], True),
    "inv_ex": (lambda l, a: l.linalg.inv_ex(a).inverse, [rn(2, 3, 3)], True),
    "solve": (lambda l, a, b: l.linalg.solve(a, b), [well_conditioned(4, 4), rn(4, 3)], True),
    "solve vector": (lambda l, a, b: l.linalg.solve(a, b), [rn(4, 4), rn(4)], True),
    "solve batched vector": (lambda l, a, b: l.linalg.solve(a, b), [rn(2, 4, 4), rn(2, 4)], True),
    "solve broadcast": (lambda l, a, b: l.linalg.solve(a, b), [rn(2, 1, 3, 3), rn(4, 3, 2)], True),
    "solve left=False": (lambda l, a, b: l.linalg.solve(a, b, left=False), [rn(3, 3), rn(2, 3)], True),
    "solve_ex": (lambda l, a, b: l.linalg.solve_ex(a, b).result, [rn(3, 3), rn(3, 2)], True),
    "matrix_power": (lambda l, a: l.matrix_power(a, 5), [rn(3, 3) / 2], True),
    "matrix_power batch 2": (lambda l, a: a.matrix_power(2), [rn(2, 3, 3)], True),
    "matrix_power negative": (lambda l, a: l.linalg.matrix_power(a, -3), [well_conditioned(3, 3)], True),
    "matrix_power 1": (lambda l, a: l.matrix_power(a, 1), [rn(3, 3)], True),
    "matrix_power 0": (lambda l, a: l.matrix_power(a, 0), [rn(2, 3, 3)], True),
    "linalg.vander": (lambda l, x: l.linalg.vander(x), [rn(2, 3)], True),
    "linalg.vander N": (lambda l, x: l.linalg.vander(x, N=4), [np.array([0.0, 2.0, -1.0])], True),
    "linalg.vander 0-d": (lambda l, x: l.linalg.vander(x, N=3), [rn()], True),
    "linalg.diagonal": (lambda l, a: l.linalg.diagonal(a, offset=1), [rn(2, 3, 4)], True),
    "linalg.diagonal dims": (lambda l, a: l.linalg.diagonal(a, offset=-1, dim1=0, dim2=2), [rn(3, 2, 4)], True),
    "solve_triangular upper": (lambda l, a, b: l.linalg.solve_triangular(a, b, upper=True),
                               [well_conditioned(4, 4), rn(4, 2)], True),
    "solve_triangular lower right unit": (lambda l, a, b: l.linalg.solve_triangular(a, b, upper=False, left=False,
                                                                                     unitriangular=True),
                                          [rn(2, 3, 3), rn(5, 3)], True),
    "solve_triangular broadcast": (lambda l, a, b: l.linalg.solve_triangular(a, b, upper=False),
                                   [rn(3, 3) + 4 * np.eye(3), rn(2, 3, 1)], True),
    "tensordot": (lambda l, a, b: l.tensordot(a, b), [rn(2, 3, 4), rn(3, 4, 5)], True),
    "tensordot 0": (lambda l, a, b: l.tensordot(a, b, 0), [rn(2, 3), rn(4)], True),
    "tensordot lists": (lambda l, a, b: l.tensordot(a, b, dims=([1, -1], [1, 0])), [rn(2, 3, 4), rn(4, 3, 5)], True),
    "tensordot tensor dims": (lambda l, a, b: l.tensordot(a, b, dims=l.tensor([[2], [0]])), [rn(2, 3, 4), rn(4, 5)],
                              True),
    "tensordot size-1 broadcast": (lambda l, a, b: l.tensordot(a, b, 1), [rn(2, 1), rn(3, 2)], True),
    "tensordot all dims": (lambda l, a, b: l.tensordot(a, b, 2), [rn(2, 3), rn(2, 3)], True),
    "matrix_exp": (lambda l, a: l.matrix_exp(a), [rn(4, 4)], True),
    "matrix_exp large norm batch": (lambda l, a: a.matrix_exp(), [rn(2, 3, 3) * 4], True),
    "linalg.matrix_exp": (lambda l, a: l.linalg.matrix_exp(a), [rn(3, 3) * 0.01], True),
    "matrix_exp empty": (lambda l, a: l.matrix_exp(a) + 0, [rn(0, 0)], True),
    "cholesky_solve": (lambda l, b, a: l.cholesky_solve(b, l.linalg.cholesky(a @ a.mT + l.eye(
        3, dtype=a.dtype, device=a.device))), [rn(3, 2), rn(3, 3)], True),
    "cholesky_solve upper broadcast": (lambda l, b, u: b.cholesky_solve(u.triu() + 3 * l.eye(3, dtype=u.dtype,
                                                                                            device=u.device),
                                                                        upper=True), [rn(2, 3, 2), rn(3, 3)], True),
    "cholesky_solve reads the triangle": (lambda l, b, m: l.cholesky_solve(b, m + 3 * l.eye(3, dtype=m.dtype,
                                                                                            device=m.device)),
                                          [rn(3, 1), rn(3, 3)], True),
    "cholesky_inverse": (lambda l, m: l.cholesky_inverse(m.tril() + 3 * l.eye(3, dtype=m.dtype, device=m.device)),
                         [rn(3, 3)], True),
    "cholesky_inverse reads the triangle": (lambda l, m: l.cholesky_inverse(m + 3 * l.eye(3, dtype=m.dtype,
                                                                                          device=m.device)),
                                            [rn(2, 3, 3)], True),
    "cholesky_inverse upper batch": (lambda l, m: (m.triu() + 3 * l.eye(3, dtype=m.dtype, device=m.device))
                                     .cholesky_inverse(upper=True), [rn(2, 3, 3)], True),
    "tensorinv": (lambda l, a: l.linalg.tensorinv(a.reshape(4, 6, 8, 3), ind=2), [well_conditioned(24, 24)], True),
    "tensorinv ind=1": (lambda l, a: l.linalg.tensorinv(a, ind=1), [rn(4, 4)], True),
    "tensorsolve": (lambda l, a, b: l.linalg.tensorsolve(a.reshape(2, 3, 6), b), [rn(6, 6), rn(2, 3)], True),
    "tensorsolve dims": (lambda l, a, b: l.linalg.tensorsolve(a.reshape(2, 3, 2, 3), b, dims=(0,)),
                         [rn(6, 6), rn(3, 2)], True),
    "cholesky": (lambda l, a: l.linalg.cholesky(a @ a.mT + l.eye(4, dtype=a.dtype, device=a.device)),
                 [rn(4, 4)], True),
    "cholesky batch upper": (lambda l, a: l.linalg.cholesky(a @ a.mT + 0.5 * l.eye(3, dtype=a.dtype,
                                                                                   device=a.device), upper=True),
                             [rn(2, 3, 3)], True),
    "cholesky lower triangle only": (lambda l, a, b: l.linalg.cholesky(a @ a.mT + b.triu(1) + l.eye(
        3, dtype=a.dtype, device=a.device)), [rn(3, 3), rn(3, 3)], True),
    "cholesky_ex": (lambda l, a: l.linalg.cholesky_ex(a @ a.mT + l.eye(3, dtype=a.dtype, device=a.device)).L,
                    [rn(3, 3)], True),
}


def _run(name, device):
    fn, xs, differentiable = CASES[name]
    a = [gm.tensor(x, dtype=gm.float64, device=device, requires_grad=differentiable) for x in xs]
    b = [torch.tensor(x, dtype=torch.float64, requires_grad=differentiable) for x in xs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return a, b, fn(gm, *a), fn(torch, *b)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_pytorch(name, device):
    differentiable = CASES[name][2]
    a, b, ya, yb = _run(name, device)
    assert tuple(ya.shape) == tuple(yb.shape), name
    assert str(ya.dtype).split(".")[-1] == str(yb.dtype).split(".")[-1], name
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-9, atol=1e-11, err_msg=name)
    if differentiable and yb.requires_grad:
        w = np.random.RandomState(1).randn(*yb.shape)
        (ya * gm.tensor(w, device=device)).sum().backward()
        (yb * torch.tensor(w)).sum().backward()
        for ta, tb in zip(a, b):
            if tb.grad is None:
                assert ta.grad is None or not to_np(ta.grad).any(), name
                continue
            np.testing.assert_allclose(to_np(ta.grad), tb.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=name)


def _pair(x, device, dtype="float32"):
    return gm.tensor(x, dtype=getattr(gm, dtype), device=device), torch.tensor(x, dtype=getattr(torch, dtype))


def _same(ya, yb, exact=False):
    assert tuple(ya.shape) == tuple(yb.shape)
    assert str(ya.dtype).split(".")[-1] == str(yb.dtype).split(".")[-1]
    if exact:
        np.testing.assert_array_equal(to_np(ya), yb.numpy())
    else:
        np.testing.assert_allclose(to_np(ya), yb.double().numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)


def test_integer_products_truncate_beta_and_alpha(device):
    i = R.randint(-5, 5, (2, 3))
    m1, m2 = R.randint(-3, 3, (2, 4)), R.randint(-3, 3, (4, 3))
    (gi, ti), (g1, t1), (g2, t2) = (_pair(x, device, "int64") for x in (i, m1, m2))
    _same(gm.addmm(gi, g1, g2, beta=1.5, alpha=2.7), torch.addmm(ti, t1, t2, beta=1.5, alpha=2.7), exact=True)
    _same(gm.addmv(gi[:, 0], g1, g2[:, 0], beta=0.5), torch.addmv(ti[:, 0], t1, t2[:, 0], beta=0.5), exact=True)
    _same(gm.mv(g1, g2[:, 0]), torch.mv(t1, t2[:, 0]), exact=True)
    _same(gm.inner(g1, g2.T), torch.inner(t1, t2.T), exact=True)
    _same(gm.addr(gi, g1[:, 0], gi[0]), torch.addr(ti, t1[:, 0], ti[0]), exact=True)
    _same(gm.kron(g1, g2), torch.kron(t1, t2), exact=True)
    _same(gm.cross(g2[:3, :3], g2[1:4, :3], dim=0), torch.cross(t2[:3, :3], t2[1:4, :3], dim=0), exact=True)
    _same(gm.matrix_power(g2[:3], 3), torch.matrix_power(t2[:3], 3), exact=True)
    _same(gm.combinations(gi[0]), torch.combinations(ti[0]), exact=True)


def test_promotion_and_integer_statistics(device):
    (gi, ti), (gf, tf) = _pair(R.randint(0, 5, (2, 4)), device, "int64"), _pair(rn(4), device)
    _same(gm.addr(gi, gf[:2], gf), torch.addr(ti, tf[:2], tf))
    _same(gm.kron(gi, gf), torch.kron(ti, tf))
    _same(gm.block_diag(gi, gf), torch.block_diag(ti, tf))
    _same(gm.cov(gi), torch.cov(ti))
    _same(gm.corrcoef(gi + gm.tensor([[0], [7]], device=device)), torch.corrcoef(ti + torch.tensor([[0], [7]])))
    _same(gm.trapezoid(gi), torch.trapezoid(ti))
    _same(gm.trapezoid(gi, dx=2), torch.trapezoid(ti, dx=2))
    _same(gm.cumulative_trapezoid(gi), torch.cumulative_trapezoid(ti))
    _same(gm.trapezoid(gi, gi[0]), torch.trapezoid(ti, ti[0]))


def test_beta_zero_ignores_nan_and_gives_zero_gradient(device):
    x = [[float("nan"), 1.0]]
    gi = gm.tensor(x, dtype=gm.float64, device=device, requires_grad=True)
    ti = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    m = rn(2, 2)
    ga, ta = gm.tensor(m, device=device, requires_grad=True), torch.tensor(m, requires_grad=True)
    ya, yb = gm.addmm(gi, ga, ga, beta=0), torch.addmm(ti, ta, ta, beta=0)
    assert not np.isnan(to_np(ya)).any()
    _same(ya.detach(), yb.detach())
    ya.sum().backward()
    yb.sum().backward()
    np.testing.assert_array_equal(to_np(gi.grad), ti.grad.numpy())
    np.testing.assert_allclose(to_np(ga.grad), ta.grad.numpy())
    for lib, t in ((gm, gm.full((2, 2), float("nan"), device=device)), (torch, torch.full((2, 2), float("nan")))):
        lib_m = lib.ones(2, 2, device=device) if lib is gm else torch.ones(2, 2)
        t.addmm_(lib_m, lib_m, beta=0)
        assert not np.isnan(to_np(t) if lib is gm else t.numpy()).any()


@pytest.mark.parametrize("name", ["addmm_", "addmv_", "addr_", "baddbmm_", "addbmm_"])
def test_in_place_forms(name, device):
    shapes = {"addmm_": ((3, 4), (3, 5), (5, 4)), "addmv_": ((3,), (3, 5), (5,)), "addr_": ((3, 4), (3,), (4,)),
              "baddbmm_": ((2, 3, 4), (2, 3, 5), (2, 5, 4)), "addbmm_": ((3, 4), (2, 3, 5), (2, 5, 4))}[name]
    xs = [rn(*s) for s in shapes]
    for beta in (1, 0.5, 0):
        ga = [gm.tensor(x, dtype=gm.float64, device=device) for x in xs]
        ta = [torch.tensor(x, dtype=torch.float64) for x in xs]
        ga[1].requires_grad_(True)
        ta[1].requires_grad_(True)
        ra = getattr(ga[0], name)(ga[1], ga[2], beta=beta, alpha=2)
        rb = getattr(ta[0], name)(ta[1], ta[2], beta=beta, alpha=2)
        assert ra is ga[0]
        _same(ra.detach(), rb.detach())
        ra.sum().backward()  # recorded: the product's operand gets its gradient
        rb.sum().backward()
        np.testing.assert_allclose(to_np(ga[1].grad), ta[1].grad.numpy(), rtol=1e-10)
    # in a graph: self's own history gets beta * g (zero for beta = 0, whatever self held)
    for beta in (0.5, 0):
        for lib, t in ((gm, gm.tensor(xs[0], device=device, requires_grad=True)),
                       (torch, torch.tensor(xs[0], requires_grad=True))):
            dev = {"device": device} if lib is gm else {}
            y = t * float("inf") if beta == 0 else t * 3
            out = getattr(y, name)(lib.tensor(xs[1], **dev), lib.tensor(xs[2], **dev), beta=beta)
            y.sum().backward()
            if lib is gm:
                g_gm, out_gm = to_np(t.grad), to_np(out)
            else:
                np.testing.assert_allclose(out_gm, out.detach().numpy(), rtol=1e-6)
                np.testing.assert_allclose(g_gm, t.grad.numpy(), rtol=1e-6)
    leaf = gm.zeros(*shapes[0], device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        getattr(leaf, name)(gm.tensor(xs[1], dtype=gm.float32, device=device),
                            gm.tensor(xs[2], dtype=gm.float32, device=device))


def test_gm_addmv_in_place(device):
    (gi, ti), (gm_, tm), (gv, tv) = (_pair(x, device) for x in (rn(3), rn(3, 4), rn(4)))
    assert gm.addmv_(gi, gm_, gv, alpha=2) is gi
    torch.addmv_(ti, tm, tv, alpha=2)
    _same(gi, ti)


def test_bool_addr(device):
    v1, v2, i = [True, False, True], [False, True], [[True, False], [False, False], [False, True]]
    for beta, alpha in ((True, True), (False, True), (True, False)):
        ga = gm.addr(gm.tensor(i, device=device), gm.tensor(v1, device=device), gm.tensor(v2, device=device),
                     beta=beta, alpha=alpha)
        _same(ga, torch.addr(torch.tensor(i), torch.tensor(v1), torch.tensor(v2), beta=beta, alpha=alpha), exact=True)


def test_cross_default_dim_warns_and_takes_first_size_3(device):
    x, y = rn(3, 3, 4), rn(3, 3, 4)
    gm._core.state.warned_once.clear()  # (said once per process, as PyTorch's)
    with pytest.warns(UserWarning, match="without specifying the dim"):
        ya = gm.cross(gm.tensor(x, device=device), gm.tensor(y, device=device))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yb = torch.cross(torch.tensor(x), torch.tensor(y))
    _same(ya, yb)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for xs, ys in (((3, 1), (3, 3)), ((1, 3), (3, 3))):  # the first dim of size 3 of input
            xa, ya_ = rn(*xs), rn(*ys)
            _same(gm.tensor(xa, device=device).cross(gm.tensor(ya_, device=device)),
                  torch.tensor(xa).cross(torch.tensor(ya_)))


def test_chain_matmul_warns():
    with pytest.warns(UserWarning, match="deprecated"):
        gm.chain_matmul(gm.ones(2, 2), gm.ones(2, 2))


def test_singular_matrices():
    s = [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [4.0, 5.0, 6.0]]  # exactly singular for both libraries' rounding
    ga, ta = gm.tensor(s, dtype=gm.float64), torch.tensor(s, dtype=torch.float64)
    assert float(gm.linalg.det(ga)) == 0.0 == float(torch.linalg.det(ta))
    sa, sb = gm.linalg.slogdet(ga), torch.linalg.slogdet(ta)
    assert float(sa.sign) == float(sb.sign) == 0.0 and float(sa.logabsdet) == float(sb.logabsdet) == -math.inf
    assert float(gm.logdet(ga)) == -math.inf
    assert issubclass(gm.linalg.LinAlgError, RuntimeError)
    for fn in (lambda L, t: L.linalg.inv(t), lambda L, t: L.inverse(t), lambda L, t: L.linalg.solve(t, t[0])):
        with pytest.raises(torch.linalg.LinAlgError):
            fn(torch, ta)
        with pytest.raises(gm.linalg.LinAlgError, match=r"diagonal element 3 is zero.*singular"):
            fn(gm, ga)
    batch = gm.stack([gm.eye(3, dtype=gm.float64), ga])
    with pytest.raises(gm.linalg.LinAlgError, match=r"Batch element 1"):
        gm.linalg.inv(batch)
    info_a, info_b = gm.linalg.inv_ex(batch).info, torch.linalg.inv_ex(torch.stack([torch.eye(3).double(), ta])).info
    _same(info_a, info_b, exact=True)
    _same(gm.linalg.solve_ex(batch, batch).info, torch.linalg.solve_ex(torch.stack([torch.eye(3).double(), ta]),
                                                                       torch.eye(3).double()).info, exact=True)
    # det's gradient where det is exactly 0 is 0 in PyTorch (not the cofactor matrix): the same here
    ga.requires_grad_(True)
    ta.requires_grad_(True)
    gm.linalg.det(ga).backward()
    torch.linalg.det(ta).backward()
    np.testing.assert_allclose(to_np(ga.grad), ta.grad.numpy(), atol=1e-12)


def test_cholesky_of_matrices_that_are_not_positive_definite():
    bad = [[[1.0, 2.0], [2.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]], [[-1.0, 0.0], [0.0, 1.0]]]
    ga, ta = gm.tensor(bad), torch.tensor(bad)
    _same(gm.linalg.cholesky_ex(ga).info, torch.linalg.cholesky_ex(ta).info, exact=True)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(ta)
    with pytest.raises(gm.linalg.LinAlgError, match=r"\(Batch element 0\): .*not positive-definite \(the leading "
                                                    r"minor of order 2 is not positive-definite\)"):
        gm.linalg.cholesky(ga)
    with pytest.raises(gm.linalg.LinAlgError, match="order 1"):
        gm.linalg.cholesky_ex(ga[2], check_errors=True)


def test_det_float32_and_meta(device):
    a = well_conditioned(3, 4, 4)
    _same(gm.det(gm.tensor(a, dtype=gm.float32, device=device)), torch.det(torch.tensor(a, dtype=torch.float32)))
    m = gm.empty(3, 4, 4, device="meta")
    assert tuple(gm.linalg.det(m).shape) == (3,)
    assert tuple(gm.linalg.inv(m).shape) == (3, 4, 4)
    assert tuple(gm.linalg.solve(m, gm.empty(3, 4, device="meta")).shape) == (3, 4)


def test_returned_named_tuples():
    a = gm.tensor(rn(3, 3))
    assert type(gm.slogdet(a)).__name__ == "slogdet" and type(gm.linalg.slogdet(a)).__name__ == "linalg_slogdet"
    assert gm.linalg.inv_ex(a).info.dtype == gm.int32
    assert set(gm.linalg.slogdet(a)._fields) == {"sign", "logabsdet"}


def test_cov_degrees_of_freedom_warning():
    with pytest.warns(UserWarning, match="degrees of freedom"):
        ya = gm.cov(gm.ones(2, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(ya, torch.cov(torch.ones(2, 1)))
        _same(gm.cov(gm.tensor(2.0)), torch.cov(torch.tensor(2.0)))
        _same(gm.corrcoef(gm.tensor(2.0)), torch.corrcoef(torch.tensor(2.0)))


def test_empty_edge_cases(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fa, fb in ((lambda: gm.block_diag(), lambda: torch.block_diag()),
                       (lambda: gm.combinations(gm.ones(3), 0), lambda: torch.combinations(torch.ones(3), 0)),
                       (lambda: gm.combinations(gm.ones(0)), lambda: torch.combinations(torch.ones(0))),
                       (lambda: gm.cumulative_trapezoid(gm.ones(2, 0)), lambda: torch.cumulative_trapezoid(
                           torch.ones(2, 0))),
                       (lambda: gm.trapezoid(gm.ones(2, 0)), lambda: torch.trapezoid(torch.ones(2, 0))),
                       (lambda: gm.inner(gm.ones(2, 0), gm.ones(3, 0)), lambda: torch.inner(torch.ones(2, 0),
                                                                                         torch.ones(3, 0))),
                       (lambda: gm.linalg.inv(gm.ones(0, 0)), lambda: torch.linalg.inv(torch.ones(0, 0)))):
            _same(fa(), fb())


@pytest.mark.parametrize("name", list(CASES))
def test_meta_shapes_and_dtypes(name):
    """The memory estimator runs models on meta: every op gives PyTorch's shape and dtype there, with no values."""
    fn, xs, _ = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ya = fn(gm, *[gm.empty(*np.shape(x), dtype=gm.float64, device="meta") for x in xs])
        yb = fn(torch, *[torch.tensor(x, dtype=torch.float64) for x in xs])
    assert ya.device.type == "meta"
    assert tuple(ya.shape) == tuple(yb.shape), name
    assert str(ya.dtype).split(".")[-1] == str(yb.dtype).split(".")[-1], name


def test_autocast_lowers_what_pytorch_lowers_on_the_cpu():
    """addmm, baddbmm, addbmm, multi_dot, inner, vecdot run in bfloat16 under CPU autocast; addmv, addr and mv do
    not (PyTorch's CPU list lacks them; its CUDA list has them)."""
    xs = [rn(3, 4), rn(3, 5), rn(5, 4)]

    def run(lib, a, b, c):
        return [lib.addmm(a, b, c), lib.addmv(a[:, 0], b, c[:, 0]), lib.baddbmm(a[None], b[None], c[None]),
                lib.addbmm(a, b[None], c[None]), lib.addr(a, b[:, 0], c[0]), lib.mv(b, c[:, 0]),
                lib.linalg.multi_dot([b, c]), lib.inner(b, c.T), lib.linalg.vecdot(a, a)]
    ga, ta = [gm.tensor(x, dtype=gm.float32) for x in xs], [torch.tensor(x, dtype=torch.float32) for x in xs]
    with gm.autocast("cpu", dtype=gm.bfloat16):
        ya = run(gm, *ga)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yb = run(torch, *ta)
    for a, b in zip(ya, yb):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(to_np(a), b.float().numpy(), rtol=3e-2, atol=5e-2)


def test_cpu_autocast_widens_inv_solve_cholesky_to_float32():
    a = well_conditioned(3, 3)
    spd = a @ a.T + np.eye(3)
    for name, fn in (("inverse", lambda l, x, s: l.inverse(x)), ("inv_ex", lambda l, x, s: l.linalg.inv_ex(x)[0]),
                     ("solve", lambda l, x, s: l.linalg.solve(x, x)),
                     ("matrix_power", lambda l, x, s: l.linalg.matrix_power(x, -1)),
                     ("cholesky", lambda l, x, s: l.linalg.cholesky(s))):
        with gm.autocast("cpu", dtype=gm.bfloat16):
            ya = fn(gm, gm.tensor(a, dtype=gm.bfloat16), gm.tensor(spd, dtype=gm.bfloat16))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            yb = fn(torch, torch.tensor(a, dtype=torch.bfloat16), torch.tensor(spd, dtype=torch.bfloat16))
        assert ya.dtype == gm.float32 and yb.dtype == torch.float32, name
        np.testing.assert_allclose(to_np(ya), yb.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    for lib in (gm, torch):  # det and solve_ex are not widened: low precision is refused, as without autocast
        with lib.autocast("cpu", dtype=lib.bfloat16):
            x = lib.tensor(a, dtype=lib.bfloat16)
            with pytest.raises(NotImplementedError):
                lib.linalg.det(x)
            with pytest.raises(NotImplementedError):
                lib.linalg.solve_ex(x, x)


def test_solve_triangular_with_a_zero_on_the_diagonal_gives_inf_as_pytorch():
    a = np.triu(rn(3, 3)) * np.array([1.0, 0.0, 1.0])[:, None]
    b = rn(3, 2)
    ya = gm.linalg.solve_triangular(gm.tensor(a), gm.tensor(b), upper=True)
    yb = torch.linalg.solve_triangular(torch.tensor(a), torch.tensor(b), upper=True)
    np.testing.assert_array_equal(np.isinf(to_np(ya)), np.isinf(yb.numpy()))
    np.testing.assert_allclose(to_np(ya), yb.numpy(), equal_nan=True)
