"""LU factorisation (linalg.lu_factor, lu_factor_ex, lu, lu_solve; torch.lu, lu_unpack, lu_solve; Tensor.lu,
lu_solve) and linalg.householder_product. The factorisation is computed on the host as tensor_decomp.py's
decompositions (its docstring says how: NumPy in the input's dtype, a host round trip for CUDA inputs, shapes only
on meta).

The LU is LAPACK's getrf (partial pivoting: the largest |entry| of the column, the first on ties; a zero pivot
column is skipped and reported in info), written with NumPy over the whole batch, so its pivots and factors are
PyTorch's. Its gradient is the standard formula (P L^-T M U^-T, with the tall / wide cases), first-order.
lu_solve, lu_unpack and householder_product are composed of differentiable gpumemnet ops (triangular solves,
where, a permutation matmul, rank-1 updates)."""
import collections

import numpy as np

from .. import _C
from . import autocast as _amp
from . import functions as F
from .autograd import Function, needs_grad as _needs_grad
from .tensor_decomp_base import BOOL as _BOOL, I32 as _I32, NAMES as _NAMES, back, check_matrices, empty, host
from .tensor_decomp_base import mm as _mm, mT as _mT
from .tensor_solve import _mm_graph, _substitute, _where_any, _widen, solve_triangular

__all__ = ["lu_unpack", "lu", "lu_solve"]


LUFactor = collections.namedtuple("linalg_lu_factor", ["LU", "pivots"])
LUFactorEx = collections.namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LinalgLU = collections.namedtuple("linalg_lu", ["P", "L", "U"])
LUWithInfo = collections.namedtuple("_lu_with_info", ["LU", "pivots", "info"])
LUUnpack = collections.namedtuple("lu_unpack", ["P", "L", "U"])


# ---- LU ---------------------------------------------------------------------------------------------------------
def _getrf(a, pivot=True):
    """(LU, pivots (1-based, int32), info (int32)) of a NumPy batch (..., m, n), as LAPACK's getrf (pivot=False:
    no row interchanges, the pivots 1, 2, ..., k, as cuSOLVER's getrf without pivoting)."""
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    batch = a.shape[:-2]
    lu = np.array(a, copy=True).reshape((int(np.prod(batch, dtype=np.int64)), m, n))
    rows = np.arange(lu.shape[0])
    piv = np.zeros((lu.shape[0], k), np.int32)
    info = np.zeros(lu.shape[0], np.int32)
    for j in range(k):
        p = j + np.argmax(np.abs(lu[:, j:, j]), axis=1) if pivot else np.full(lu.shape[0], j)
        piv[:, j] = p + 1
        top = lu[rows, j].copy()
        lu[rows, j] = lu[rows, p]
        lu[rows, p] = top
        d = lu[:, j, j]
        zero = d == 0
        info = np.where(zero & (info == 0), j + 1, info).astype(np.int32)
        col = lu[:, j + 1:, j] / np.where(zero, 1, d)[:, None]  # a zero pivot's column is all zeros already
        lu[:, j + 1:, j] = col
        lu[:, j + 1:, j + 1:] -= col[:, :, None] * lu[:, j, None, j + 1:]
    return lu.reshape(a.shape), piv.reshape(batch + (k,)), info.reshape(batch)


def _perm(piv, m):
    """The row order (..., m) that the pivots' interchanges give: A[order] = L U."""
    batch = piv.shape[:-1]
    count = int(np.prod(batch, dtype=np.int64))
    order = np.broadcast_to(np.arange(m), batch + (m,)).copy().reshape((count, m))
    p = piv.reshape((count, piv.shape[-1])).astype(np.int64) - 1
    rows = np.arange(order.shape[0])
    for i in range(p.shape[-1]):
        a, b = order[rows, i].copy(), order[rows, p[:, i]].copy()
        order[rows, i], order[rows, p[:, i]] = b, a
    return order.reshape(batch + (m,))


def _perm_matrix(pivots, m, like):
    """P (..., m, m) with A = P L U, built on the host from the pivots (int32)."""
    batch = tuple(pivots.shape[:-1])
    if like._device == "meta" or pivots._device == "meta":
        return empty(batch + (m, m), like)
    p = host(pivots)
    if p.size and (p.min() < 1 or p.max() > m):
        raise RuntimeError(f"lu_unpack / lu_solve: the pivots must lie in [1, {m}] (got values from {int(p.min())} "
                           f"to {int(p.max())}). Pivots given to lu_solve must all be greater or equal to 1. Did "
                           f"you properly pass the result of lu_factor?")
    order = _perm(p, m)
    P = np.zeros(batch + (m, m))
    np.put_along_axis(P, order[..., :, None], 1.0, axis=-1)  # P^T[i, order[i]] = 1
    return back(np.swapaxes(P, -1, -2), like)


def _unpack(LU, k):
    """(L (m, k) unit lower, U (k, n) upper) of the packed LU, no graph."""
    m, n = LU.shape[-2], LU.shape[-1]
    low = _C.from_numpy(np.tril(np.ones((m, k), bool), -1), _BOOL, LU._device)
    eye = _C.from_numpy(np.eye(m, k, dtype=bool), _BOOL, LU._device)
    up = _C.from_numpy(np.triu(np.ones((k, n), bool)), _BOOL, LU._device)
    L = _C.where(eye, 1.0, _C.where(low, LU.narrow(-1, 0, k), 0.0))
    return L, _C.where(up, LU.narrow(-2, 0, k), 0.0)


def _left_solve_t(T, M, upper):
    """T^-T M for triangular T (zeros off its triangle)."""
    return _substitute(_mT(T).contiguous(), M.contiguous(), not upper)


def _right_solve_t(M, T, upper):
    """M T^-T: (T^-1 M^T)^T."""
    return _mT(_substitute(T, _mT(M).contiguous(), upper))


def _tri(X, k, lower):
    n0, n1 = X.shape[-2], X.shape[-1]
    keep = np.tril(np.ones((n0, n1), bool), k) if lower else np.triu(np.ones((n0, n1), bool), k)
    return _C.where(_C.from_numpy(keep, _BOOL, X._device), X, 0.0)


class _LUFactor(Function):
    """(LU, pivots, info); A = P L U. backward, square: gA = P L^-T M U^-T with M = tril(L^T gL, -1) +
    triu(gU U^T) (gL, gU: the strict lower / upper parts of gLU); tall (m > n): [L1; L2], M also takes
    -triu(L2^T gL2) and the rows below get gL2 U^-T; wide (m < n): [U1 U2], M also takes -tril(gU2 U2^T, -1) and
    the columns right get L^-T gU2."""

    @staticmethod
    def forward(ctx, A, pivot):
        m, n = A.shape[-2], A.shape[-1]
        batch = tuple(A.shape[:-2])
        if A._device == "meta":
            LU, piv, info = empty(tuple(A.shape), A), empty(batch + (min(m, n),), A, _I32), empty(batch, A, _I32)
        else:
            lu, p, i = _getrf(host(A), pivot)
            LU, piv, info = back(lu, A), back(p, A, _I32), back(i, A, _I32)
        ctx.save_for_backward(LU, piv)
        return LU, piv, info

    @staticmethod
    def backward(ctx, gLU, *_):
        LU, piv = ctx._unpacked
        LU, g = LU.detach(), gLU.detach()
        m, n = LU.shape[-2], LU.shape[-1]
        k = min(m, n)
        L, U = _unpack(LU, k)
        P = _perm_matrix(piv, m, LU)
        gL, gU = _tri(g.narrow(-1, 0, k), -1, True), _tri(g.narrow(-2, 0, k), 0, False)
        L1, U1 = L.narrow(-2, 0, k), U.narrow(-1, 0, k)
        gL1, gU1 = gL.narrow(-2, 0, k), gU.narrow(-1, 0, k)
        M = _mm(_mT(L1), gL1)
        N = _mm(gU1, _mT(U1))
        if m > n:
            L2, gL2 = L.narrow(-2, k, m - k), gL.narrow(-2, k, m - k)
            N = N - _mm(_mT(L2), gL2)
        if m < n:
            U2, gU2 = U.narrow(-1, k, n - k), gU.narrow(-1, k, n - k)
            M = M - _mm(gU2, _mT(U2))
        M = _tri(M, -1, True) + _tri(N, 0, False)
        gA = _right_solve_t(_left_solve_t(L1, M, False), U1, True)
        if m > n:
            gA = _C.cat([gA, _right_solve_t(gL2, U1, True)], gA.ndim - 2)
        if m < n:
            gA = _C.cat([gA, _left_solve_t(L1, gU2, False)], gA.ndim - 1)
        return _mm(P, gA), None


def _check_lu_input(A, op, fn, pivot):
    if isinstance(A, _C.TensorBase) and A.ndim < 2:
        raise RuntimeError(f"{op}: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} instead")
    check_matrices(A, op, kernel="lu_cpu", int_kernel=True, fn=fn)
    if not pivot and not A._device.startswith("cuda"):  # (PyTorch's CUDA has it; so has ours)
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")


def _lu_factor_ex(A, pivot):
    return _LUFactor.apply(A, bool(pivot))


def _check_zero_pivot(info, op):
    """A RuntimeError (PyTorch's type: not LinAlgError here) where U has an exact zero on its diagonal (one host
    read)."""
    if info._device == "meta" or not info.numel():
        return
    i = host(info).ravel()
    if not i.any():
        return
    first = int(np.flatnonzero(i)[0])
    batch = f"(Batch element {first}): " if info.ndim else ""
    raise RuntimeError(f"{op}: {batch}U[{int(i[first])},{int(i[first])}] is zero and using it on lu_solve would "
                       f"result in a division by zero. If you still want to perform the factorization, consider "
                       f"calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info): L (unit diagonal, not stored) and U packed in LU, the 1-based row interchanges (int32),
    and info (int32 per matrix: 0, or i where U[i-1, i-1] is exactly zero). check_errors=True raises a
    RuntimeError for a nonzero info, as PyTorch's."""
    _check_lu_input(A, "torch.linalg.lu_factor_ex", "linalg_lu_factor_ex", pivot)
    LU, piv, info = _lu_factor_ex(A, pivot)
    if check_errors:
        _check_zero_pivot(info, "torch.linalg.lu_factor_ex")
    return LUFactorEx(LU, piv, info)


def linalg_lu_factor(A, *, pivot=True):
    """(LU, pivots) as lu_factor_ex; a RuntimeError where U has a zero on its diagonal (lu_solve would divide
    by it), as PyTorch's."""
    _check_lu_input(A, "torch.linalg.lu_factor", "linalg_lu_factor", pivot)
    LU, piv, info = _lu_factor_ex(A, pivot)
    _check_zero_pivot(info, "torch.linalg.lu_factor")
    return LUFactor(LU, piv)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from lu_factor's packed LU and pivots (int32): A = P L U with L (m, k) unit lower triangular
    and U (k, n) upper. unpack_data=False: L and U are empty; unpack_pivots=False: P is empty. P is built on the
    host from the pivots (a read of the pivots for CUDA inputs); L and U carry gradients to LU_data."""
    for name, t in (("LU_data", LU_data), ("LU_pivots", LU_pivots)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"lu_unpack(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if LU_data.ndim < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(LU_data.shape)} instead")
    if LU_pivots._dtype != _I32:
        raise RuntimeError(f"torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 "
                           f"dtype (got {LU_pivots.dtype}).")
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    if tuple(LU_pivots.shape) != tuple(LU_data.shape[:-2]) + (k,):
        raise RuntimeError(f"torch.lu_unpack: LU_pivots of shape {tuple(LU_pivots.shape)} does not match LU_data "
                           f"of shape {tuple(LU_data.shape)} (expected {tuple(LU_data.shape[:-2]) + (k,)})")
    P = _perm_matrix(LU_pivots, m, LU_data) if unpack_pivots else empty((0,), LU_data)
    if not unpack_data:
        return LUUnpack(P, empty((0,), LU_data), empty((0,), LU_data))
    if not _needs_grad(LU_data):
        L, U = _unpack(LU_data, k)
        return LUUnpack(P, L, U)
    low = _C.from_numpy(np.tril(np.ones((m, k), bool), -1), _BOOL, LU_data._device)
    up = _C.from_numpy(np.triu(np.ones((k, n), bool)), _BOOL, LU_data._device)
    eye = _C.from_numpy(np.eye(m, k), LU_data._dtype, LU_data._device)
    L = F.Where.apply(low, LU_data.narrow(-1, 0, k), 0.0) + eye
    return LUUnpack(P, L, F.Where.apply(up, LU_data.narrow(-2, 0, k), 0.0))


def linalg_lu(A, *, pivot=True):
    """(P, L, U) with A = P L U: linalg.lu_factor_ex unpacked (no error for a singular A)."""
    _check_lu_input(A, "linalg.lu", "linalg_lu", pivot)
    LU, piv, _ = _lu_factor_ex(A, pivot)
    return LinalgLU(*lu_unpack(LU, piv))


def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (adjoint: A^T X = B; left=False: X A = B / X A^T = B) for A = P L U given as
    lu_factor's (LU, pivots); batches broadcast. Triangular solves composed of gpumemnet ops, differentiable in
    LU and B."""
    op = "linalg.lu_solve"
    for name, t in (("LU", LU), ("pivots", pivots), ("B", B)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"linalg_lu_solve(): argument '{name}' must be Tensor, not {type(t).__name__}")
    check_matrices(LU, op, arg="LU", fn="linalg_lu_solve")
    if LU.shape[-1] != LU.shape[-2]:
        raise RuntimeError(f"torch.linalg.lu_solve: A must be batches of square matrices, but they are "
                           f"{LU.shape[-2]} by {LU.shape[-1]} matrices")
    if B.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor B must have at least 2 dimensions, got shape {tuple(B.shape)}")
    if B._dtype != LU._dtype:
        raise RuntimeError(f"{op}: Expected LU and B to have the same dtype, but found LU of type {LU.dtype} and B "
                           f"of type {B.dtype} instead")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if not left:  # X A = B is A^T X^T = B^T (and X A^T = B is A X^T = B^T)
        return _mT(linalg_lu_solve(LU, pivots, _mT(B), adjoint=not adjoint))
    P, L, U = lu_unpack(LU, pivots)
    if not adjoint:  # A^-1 B = U^-1 L^-1 P^T B
        # (_mm_graph: autocast does not lower the permutation products)
        Y = solve_triangular(L, _mm_graph(_mT(P), B), upper=False, unitriangular=True)
        return solve_triangular(U, Y, upper=True)
    Y = solve_triangular(_mT(U), B, upper=False)  # A^-T B = P L^-T U^-T B
    return _mm_graph(P, solve_triangular(_mT(L), Y, upper=True, unitriangular=True))


def lu(A, pivot=True, get_infos=False):
    """torch.lu (deprecated in PyTorch for linalg.lu_factor): (LU, pivots), with get_infos the info too."""
    A, = _widen(A)
    _check_lu_input(A, "torch.linalg.lu_factor_ex", "lu", pivot)
    LU, piv, info = _lu_factor_ex(A, pivot)
    return LUWithInfo(LU, piv, info) if get_infos else (LU, piv)


@_amp.float32_op  # (CPU autocast's float32 list)
def lu_solve(b, LU_data, LU_pivots):
    """torch.lu_solve (deprecated in PyTorch): linalg.lu_solve(LU_data, LU_pivots, b)."""
    return linalg_lu_solve(LU_data, LU_pivots, b)


def householder_product(A, tau):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i = (0, ..., 0, 1, A[i+1:, i]) (the
    Householder vectors below A's diagonal, as geqrf stores them); A (..., m, n) with m >= n >= k, tau (..., k).
    Composed of gpumemnet ops (one rank-1 update per reflector), so it runs on A's device and is differentiable."""
    op = "torch.linalg.householder_product"
    for name, t in (("input", A), ("tau", tau)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"linalg_householder_product(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    A, tau = _widen(A, tau)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions, got shape {tuple(A.shape)}")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1] (got {m} "
                           f"and {n})")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{op}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.ndim} and input.ndim is equal to {A.ndim}")
    if tau.shape[-1] > n:
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1] (input "
                           f"{tuple(A.shape)}, tau {tuple(tau.shape)})")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{op}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{tuple(tau.shape[:-1])} and {tuple(A.shape[:-2])}")
    if A._dtype not in (0, 1):
        raise NotImplementedError(f"{op}: \"orgqr_cpu\" not implemented for '{_NAMES.get(A._dtype)}' (float32 "
                                  f"and float64 are supported)")
    if tau._dtype != A._dtype:
        raise RuntimeError(f"{op}: tau dtype {_NAMES.get(tau._dtype)} does not match input dtype "
                           f"{_NAMES.get(A._dtype)}")
    batch = tuple(A.shape[:-2])
    Q = _C.from_numpy(np.eye(m, n), A._dtype, A._device).expand(batch + (m, n))
    rows = np.arange(m)
    for i in range(tau.shape[-1] - 1, -1, -1):  # Q = H_i Q, right to left
        below = _C.from_numpy(rows > i, _BOOL, A._device)
        unit = _C.from_numpy((rows == i).astype(np.float64), A._dtype, A._device)
        v = _where_any(below, A.select(-1, i), unit)
        t = tau.select(-1, i).unsqueeze(-1).unsqueeze(-1)
        Q = Q - (t * v.unsqueeze(-1)) * _mm_graph(v.unsqueeze(-2), Q)  # (not lowered by autocast)
    if tau.shape[-1] == 0:  # no reflector: identity columns, connected to A with a zero gradient as PyTorch's
        return _where_any(_C.from_numpy(np.ones((), bool), _BOOL, A._device), Q, A)
    return Q


# ---- LDL^T (Bunch-Kaufman) -------------------------------------------------------------------------------------
LDLFactor = collections.namedtuple("linalg_ldl_factor", ["LD", "pivots"])
LDLFactorEx = collections.namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
_ALPHA = (1.0 + 17.0 ** 0.5) / 8.0  # Bunch-Kaufman's threshold


def _sytf2(a):
    """(LD, pivots, info) of one symmetric NumPy matrix from its lower triangle, as LAPACK's sytf2 ('L'): 1x1 and
    2x2 diagonal blocks, pivots positive for a 1x1 block (the row swapped in, 1-based) and -p twice for a 2x2 one."""
    a = np.tril(a)
    n = a.shape[0]
    piv = np.zeros(n, np.int32)
    info, k = 0, 0
    while k < n:
        step, absakk = 1, abs(a[k, k])
        imax = k + 1 + int(np.argmax(np.abs(a[k + 1:, k]))) if k + 1 < n else k
        colmax = abs(a[imax, k]) if k + 1 < n else 0.0
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            info = info or k + 1
            kp = k
        elif absakk >= _ALPHA * colmax:
            kp = k
        else:  # the largest off-diagonal entry of row / column imax
            row = np.abs(np.concatenate([a[imax, k:imax], a[imax + 1:, imax]]))
            rowmax = row.max()
            if absakk >= _ALPHA * colmax * (colmax / rowmax):
                kp = k
            elif abs(a[imax, imax]) >= _ALPHA * rowmax:
                kp = imax
            else:
                kp, step = imax, 2
        kk = k + step - 1
        if kp != kk:  # swap rows and columns kk and kp of the trailing lower triangle
            a[kp + 1:, [kk, kp]] = a[kp + 1:, [kp, kk]]
            mid = a[kk + 1:kp, kk].copy()
            a[kk + 1:kp, kk] = a[kp, kk + 1:kp]
            a[kp, kk + 1:kp] = mid
            a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
            if step == 2:
                a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
        if step == 1 and k + 1 < n and a[k, k] != 0:
            x = a[k + 1:, k] / a[k, k]
            a[k + 1:, k + 1:] -= np.tril(np.outer(x, a[k + 1:, k]))
            a[k + 1:, k] = x
        elif step == 2 and k + 2 < n:
            d21 = a[k + 1, k]
            d11, d22 = a[k + 1, k + 1] / d21, a[k, k] / d21
            d21 = 1.0 / (d11 * d22 - 1.0) / d21
            wk = d21 * (d11 * a[k + 2:, k] - a[k + 2:, k + 1])
            wkp1 = d21 * (d22 * a[k + 2:, k + 1] - a[k + 2:, k])
            a[k + 2:, k + 2:] -= np.tril(np.outer(a[k + 2:, k], wk) + np.outer(a[k + 2:, k + 1], wkp1))
            a[k + 2:, k], a[k + 2:, k + 1] = wk, wkp1
        piv[k:k + step] = kp + 1 if step == 1 else -(kp + 1)
        k += step
    return a, piv, info


def _sytrs(ld, piv, b):
    """X with A X = b for A = the sytf2 factorisation (ld, piv), one matrix, b (n, k): LAPACK's sytrs ('L')."""
    b = np.array(b, dtype=ld.dtype, copy=True)
    n, k = ld.shape[0], 0
    while k < n:  # L D Y = b
        if piv[k] > 0:
            p = piv[k] - 1
            b[[k, p]] = b[[p, k]]
            b[k + 1:] -= np.outer(ld[k + 1:, k], b[k])
            b[k] /= ld[k, k]
            k += 1
        else:
            p = -piv[k] - 1
            b[[k + 1, p]] = b[[p, k + 1]]
            b[k + 2:] -= np.outer(ld[k + 2:, k], b[k]) + np.outer(ld[k + 2:, k + 1], b[k + 1])
            akm1k = ld[k + 1, k]
            akm1, ak = ld[k, k] / akm1k, ld[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1, bk = b[k] / akm1k, b[k + 1] / akm1k
            b[k], b[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T X = Y
        if piv[k] > 0:
            b[k] -= ld[k + 1:, k] @ b[k + 1:]
            p = piv[k] - 1
            b[[k, p]] = b[[p, k]]
            k -= 1
        else:
            b[k] -= ld[k + 1:, k] @ b[k + 1:]
            b[k - 1] -= ld[k + 1:, k - 1] @ b[k + 1:]
            p = -piv[k] - 1
            b[[k, p]] = b[[p, k]]
            k -= 2
    return b


class _NoDerivative(Function):
    """Host results that PyTorch records without a derivative: backward raises as PyTorch's does."""

    @staticmethod
    def forward(ctx, name, compute, *inputs):
        ctx.name = name
        return compute()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"derivative for aten::{ctx.name} is not implemented")


def _ldl_raw(A):
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    if A._device == "meta":
        return empty(tuple(A.shape), A), empty(batch + (n,), A, _I32), empty(batch, A, _I32)
    a = host(A).reshape((int(np.prod(batch, dtype=np.int64)), n, n))
    out = [_sytf2(m) for m in a]
    LD = np.stack([o[0] for o in out]) if out else np.zeros(a.shape, a.dtype)
    piv = np.stack([o[1] for o in out]) if out else np.zeros((0, n), np.int32)
    info = np.array([o[2] for o in out], np.int32)
    return back(LD.reshape(A.shape), A), back(piv.reshape(batch + (n,)), A, _I32), back(info.reshape(batch), A,
                                                                                           _I32)


def linalg_ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    """(LD, pivots, info) of each symmetric matrix of A (its lower triangle): A = P L D L^T P^T with Bunch-Kaufman
    pivoting, LAPACK's sytrf, computed on the host; L (unit diagonal, not stored) and D's 1x1 / 2x2 blocks share
    LD's lower triangle (its upper is zero), pivots as LAPACK gives them (int32), info (int32) 0 or the first zero
    pivot. hermitian changes nothing for real matrices. Not differentiable (as PyTorch's)."""
    op = "torch.linalg.ldl_factor_ex"
    check_matrices(A, op, square=True, fn="linalg_ldl_factor_ex")
    out = _NoDerivative.apply("linalg_ldl_factor_ex", lambda: _ldl_raw(A), A) if _needs_grad(A) else _ldl_raw(A)
    if check_errors:
        _check_ldl(out[2], op)
    return LDLFactorEx(*out)


def _check_ldl(info, op):
    if info._device == "meta" or not info.numel():
        return
    i = host(info).ravel()
    if i.any():
        first = int(np.flatnonzero(i)[0])
        batch = f"(Batch element {first}): " if info.ndim else ""
        raise RuntimeError(f"{op}: {batch}The factorization could not be completed: D[{int(i[first])}, "
                           f"{int(i[first])}] is exactly zero (the matrix is singular); PyTorch reports this as an "
                           f"unknown LAPACK error code")


def linalg_ldl_factor(A, *, hermitian=False):
    """(LD, pivots) as ldl_factor_ex; a RuntimeError for a singular matrix (PyTorch's type)."""
    check_matrices(A, "torch.linalg.ldl_factor_ex", square=True, fn="linalg_ldl_factor")
    LD, piv, info = linalg_ldl_factor_ex(A, hermitian=hermitian)
    _check_ldl(info, "torch.linalg.ldl_factor")
    return LDLFactor(LD, piv)


def linalg_ldl_solve(LD, pivots, B, *, hermitian=False):
    """X with A X = B for A given as ldl_factor's (LD, pivots); batches broadcast. Computed on the host
    (LAPACK's sytrs steps); not differentiable (as PyTorch's)."""
    op = "torch.linalg.ldl_solve"
    for name, t in (("LD", LD), ("pivots", pivots), ("B", B)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"linalg_ldl_solve(): argument '{name}' must be Tensor, not {type(t).__name__}")
    check_matrices(LD, op, arg="LD", square=True, fn="linalg_ldl_solve")
    if B.ndim < 2:  # PyTorch's type: it reads B.size(-2)
        raise IndexError(f"{op}: B must have at least 2 dimensions (Dimension out of range), got shape "
                         f"{tuple(B.shape)}")
    n = LD.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"Incompatible matrix sizes for {op}: each A matrix is {n} by {n} but each b matrix is "
                           f"{B.shape[-2]} by {B.shape[-1]}")
    if B._dtype != LD._dtype:
        raise RuntimeError(f"{op}: Expected LD and B to have the same dtype, but got LD of type {LD.dtype} and B of "
                           f"type {B.dtype}")
    if pivots._dtype not in (4, 6, 7, 8, 9) or tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"{op}: pivots must be integers of shape {tuple(LD.shape[:-1])} (LD's without its last "
                           f"dim), got {pivots.dtype} of shape {tuple(pivots.shape)}")
    batch = tuple(np.broadcast_shapes(tuple(LD.shape[:-2]), tuple(B.shape[:-2])))

    def compute():
        if LD._device == "meta" or B._device == "meta":
            return empty(batch + tuple(B.shape[-2:]), B)
        ld = np.broadcast_to(host(LD), batch + (n, n))
        pv = np.broadcast_to(host(pivots), batch + (n,))
        b = np.broadcast_to(host(B), batch + tuple(B.shape[-2:]))
        x = np.empty(b.shape, b.dtype)
        for i in np.ndindex(*batch):
            x[i] = _sytrs(ld[i], pv[i], b[i])
        return back(x, B)
    return _NoDerivative.apply("linalg_ldl_solve", compute, LD, B) if _needs_grad(LD, B) else compute()


class LUMethods:
    """Tensor.lu and Tensor.lu_solve (bases of DecompMethods)."""
    __slots__ = ()

    def lu(self, pivot=True, get_infos=False):
        """torch.lu(self, pivot, get_infos)."""
        return lu(self, pivot, get_infos)

    def lu_solve(self, LU_data, LU_pivots):
        """torch.lu_solve(self, LU_data, LU_pivots)."""
        return lu_solve(self, LU_data, LU_pivots)

