"""Gradients of gradients through the ops whose create_graph formulas came last: gelu's tanh form, mish, hardswish;
smooth_l1, huber, binary cross-entropy and kl_div; lgamma, digamma, polygamma, xlogy, the inverse hyperbolic
functions, sinc; and the linear algebra (det, slogdet, inv, solve, solve_triangular, cholesky, svdvals, the
nuclear norm, eigh). Each op's first gradients and the gradients of a penalty on them against PyTorch's in
float64 (double_backward_util)."""
import numpy as np
import pytest

import gpumemnet as gm
from double_backward_util import check_second_order

torch = pytest.importorskip("torch")

R = np.random.RandomState(7)
X, Y = R.randn(3, 4), R.randn(3, 4)
PROB = R.uniform(0.05, 0.95, (3, 4))
POS = R.rand(3, 4) + 0.5
SQ = R.randn(3, 3) + 3 * np.eye(3)
ZEROS = np.where(R.rand(3, 4) > 0.5, 0.0, POS)


def _F(lib):
    return lib.nn.functional


def _spd(lib, a):
    return a @ a.transpose(-2, -1) + lib.eye(3, dtype=a.dtype)


CASES = {
    "gelu tanh": (lambda L, a: (_F(L).gelu(a * 2, approximate="tanh") ** 2).sum(), (X,)),
    "mish": (lambda L, a: (_F(L).mish(a * 2) ** 2).sum(), (X,)),
    "hardswish": (lambda L, a: (_F(L).hardswish(a * 3) ** 2).sum(), (X,)),
    "smooth_l1 and huber": (lambda L, a, b: _F(L).smooth_l1_loss(a, b, beta=0.8) * 3
                            + (_F(L).huber_loss(a * 2, b, delta=0.7, reduction="none") ** 2).sum(), (X, Y)),
    "binary_cross_entropy": (lambda L, p, q: _F(L).binary_cross_entropy(p, q) * 2
                             + (_F(L).binary_cross_entropy(p, q * 0.5, reduction="none") ** 2).sum(),
                             (PROB, PROB[::-1].copy())),
    "kl_div both forms": (lambda L, a, b: _F(L).kl_div(_F(L).log_softmax(a, 1), _F(L).softmax(b, 1),
                                                        reduction="batchmean") * 3
                          + _F(L).kl_div(_F(L).log_softmax(a * 2, 1), _F(L).log_softmax(b, 1), reduction="sum",
                                         log_target=True) ** 2, (X, Y)),
    "lgamma": (lambda L, a: (a.lgamma() ** 2 + a.lgamma() * a).sum(), (POS,)),
    "xlogy with zeros": (lambda L, a, b: (L.xlogy(a * b, b) ** 2).sum() + (L.xlogy(a, b + 1.0) * a).sum(),
                         (ZEROS, POS)),
    "acosh asinh atanh sinc": (lambda L, a: (L.acosh(a + 1.0) ** 2 + L.asinh(a) * a + L.atanh(a * 0.3) ** 3
                                             + L.sinc(a) ** 2).sum(), (POS,)),
    "det": (lambda L, a: L.linalg.det(a) ** 2 + (L.linalg.det(a * 2) * a).sum(), (SQ,)),
    "slogdet": (lambda L, a: L.linalg.slogdet(a)[1] ** 2 + L.logdet(_spd(L, a)), (SQ,)),
    "inv": (lambda L, a: (L.linalg.inv(a) ** 2).sum() + (L.inverse(a) @ a.exp()).sum(), (SQ,)),
    "solve": (lambda L, a, b: (L.linalg.solve(a, b) ** 2).sum(), (SQ, X[:, :2].copy())),
    "solve_triangular": (lambda L, a, b: (L.linalg.solve_triangular(a, b, upper=False) ** 2).sum()
                         + (L.linalg.solve_triangular(a, b, upper=True) ** 3).sum(), (SQ, X[:, :2].copy())),
    "cholesky": (lambda L, a: (L.linalg.cholesky(_spd(L, a)) ** 3).sum(), (SQ,)),
    "svdvals and the nuclear norm": (lambda L, a: (L.linalg.svdvals(a) ** 3).sum()
                                     + L.linalg.matrix_norm(a * 2, "nuc") ** 2, (X,)),
    "eigh values and vectors": (lambda L, a: (L.linalg.eigh(_spd(L, a))[0] ** 2).sum()
                                + (L.linalg.eigh(_spd(L, a))[1].abs() ** 3).sum(), (SQ,)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_second_order_gradients_match_pytorch(case):
    fn, arrs = CASES[case]
    check_second_order(torch, fn, arrs, "cpu", rtol=1e-8)


def test_digamma_polygamma_second_order_within_the_series_accuracy():
    # polygamma (digamma's derivative and up) comes from a Hurwitz zeta series, about 5e-10 from PyTorch's
    check_second_order(torch, lambda L, a: (a.digamma() * a + a.polygamma(1) * a).sum(), (POS,), "cpu", rtol=1e-6)


def test_qr_says_it_records_no_graph():
    a = gm.tensor(X, requires_grad=True)
    gm.autograd.grad(gm.linalg.qr(a)[1].sum(), a)  # first order runs
    with pytest.raises(NotImplementedError, match="QR"):
        gm.autograd.grad(gm.linalg.qr(a)[1].sum(), a, create_graph=True)
