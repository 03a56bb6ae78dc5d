"""create_graph formulas (graph_backward.py explains them) for the linear algebra: det, slogdet, inv, solve,
solve_triangular, cholesky, svdvals (and the nuclear / spectral norms built on it) and eigh. Each is the ordinary
backward's formula (tensor_solve.py, tensor_decomp.py) written with recorded ops on the linked input and outputs:
a Gaussian process's marginal likelihood under a Hessian, a normalizing flow's log-determinant under a gradient
penalty, torch.func.hessian of a loss with a solve in it.

Not here (NotImplementedError naming the op): the gradients of SVD's U / Vh (svd with them used), of QR, of pinv /
lstsq, and det of a singular matrix (PyTorch's formula goes through an SVD there)."""
from .. import _C
from . import functions as fn
from .autograd import register_graph_backward as register
from .graph_backward import not_recorded, record, saved_input, saved_output, where
from .tensor_decomp import _SVD, _Eigh
from .tensor_decomp_base import eye_mask, mT as _mT
from .tensor_solve import _Cholesky, _Det, _Inv, _LogAbsDet, _Solve, _TriSolve, cholesky_phi, inverse


def _matrix(g):
    return g.unsqueeze(-1).unsqueeze(-1)


def _det(ctx, g):
    A, det = ctx._unpacked
    if bool(_C.binary(fn.EQ, det, 0.0).any()):
        raise not_recorded(ctx, "a singular matrix")
    return _matrix(g * saved_output(ctx, det)) * _mT(inverse(saved_input(ctx, 0, A)))


def _logabsdet(ctx, g):
    A, = ctx._unpacked
    return _matrix(g) * _mT(inverse(saved_input(ctx, 0, A))), None


def _inv(ctx, g):
    Xt = _mT(saved_output(ctx, ctx._unpacked[0]))
    return -(Xt @ g @ Xt), None


def _solve(ctx, g):
    A, X = ctx._unpacked
    gB = record(_Solve, _mT(saved_input(ctx, 0, A)), g, None)
    gA = -(gB @ _mT(saved_output(ctx, X))) if ctx.needs_input_grad[0] else None
    return gA, (gB if ctx.needs_input_grad[1] else None), None


def _trisolve(ctx, g):
    T, X = ctx._unpacked
    gB = record(_TriSolve, _mT(saved_input(ctx, 0, T)), g, not ctx.upper)
    gT = -(gB @ _mT(saved_output(ctx, X))) if ctx.needs_input_grad[0] else None
    return gT, (gB if ctx.needs_input_grad[1] else None), None


def _cholesky(ctx, g, _g_info=None):
    L, = ctx._unpacked
    lower, half = cholesky_phi(L)
    Ll = saved_output(ctx, L)
    P = where(lower, _mT(Ll) @ where(lower, g, 0.0), 0.0) * half
    Li = inverse(Ll)
    gA = _mT(Li) @ P @ Li
    return (gA + _mT(gA)) * 0.5, None


def _svd(ctx, *grads):
    gU, gS, gVh = (tuple(grads) + (None,) * 3)[:3]
    if ctx.full or gU is not None or gVh is not None or gS is None:
        raise not_recorded(ctx, "gradients of U or Vh (only the singular values' are recorded)")
    U, _, Vh = ctx._unpacked
    return (saved_output(ctx, U, 0) * gS.unsqueeze(-2)) @ saved_output(ctx, Vh, 2), None


def _eigh(ctx, *grads):
    gL, gV = (tuple(grads) + (None,) * 2)[:2]
    L, V = ctx._unpacked
    eye = eye_mask(L.shape[-1], L)
    Vl = saved_output(ctx, V, 1)
    inner = where(eye, gL.unsqueeze(-1), 0.0) if gL is not None else None
    if gV is not None:
        Ll = saved_output(ctx, L, 0)
        E = where(eye, 1.0, Ll.unsqueeze(-2) - Ll.unsqueeze(-1))
        off = where(eye, 0.0, (_mT(Vl) @ gV) / E)
        inner = off if inner is None else inner + off
    gA = Vl @ inner @ _mT(Vl)
    return (gA + _mT(gA)) * 0.5, None


register(_Det, _det)
register(_LogAbsDet, _logabsdet)
register(_Inv, _inv)
register(_Solve, _solve)
register(_TriSolve, _trisolve)
register(_Cholesky, _cholesky)
register(_SVD, _svd)
register(_Eigh, _eigh)
