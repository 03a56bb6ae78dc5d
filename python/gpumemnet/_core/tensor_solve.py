"""Small dense linear algebra without LAPACK: det, slogdet, logdet, inverse, solve, solve_triangular, cholesky and
matrix_power (gm.linalg exports the torch.linalg names over these). Tensor methods in SolveMethods (a base of
ProductMethods).

The solvers are Gaussian elimination with partial pivoting (Gauss-Jordan for inverse and solve), cholesky the
column-by-column Cholesky-Banachiewicz scheme; both are batched over the leading dims and run as existing ops
(argmax, gather, where, arithmetic, matmul) on the matrix's own device, priced on meta: one pass per column, so
they suit the small matrices training code uses (a few hundred rows at most), not large systems. The pivots are
those of LAPACK's getrf (the largest entry of the column, the first on ties), so results agree with PyTorch's to
rounding. Gradients are PyTorch's formulas in autograd Functions (d det = det * A^-T, d inv = -X^T g X^T, d solve:
the solve with A^T, d cholesky: L^-T phi(L^T gL) L^-1 symmetrized); they are first-order (backward does not record
a graph for double backward).

inverse, solve and cholesky read on the host whether a pivot was 0 / a minor not positive (one sync), to raise
LinAlgError as PyTorch does; det of a singular matrix is 0, slogdet gives (0, -inf), and the gradient of det
there is 0 (PyTorch 2.15's, although the cofactor matrix is the derivative)."""
import numbers

import numpy as np

from .. import _C
from . import autocast as _amp
from . import functions as F
from .autograd import Function, needs_grad as _needs_grad
from .return_types import SignLogAbsDet

_I64, _BOOL = 4, 5



def _dt(t):
    """t's dtype as PyTorch's messages name it (float32, not gpumemnet.float32)."""
    return str(t.dtype).rsplit(".", 1)[-1]


class LinAlgError(RuntimeError):
    """A linear-algebra routine met a matrix it cannot handle (a singular matrix for inv / solve), as
    torch.linalg.LinAlgError (a RuntimeError)."""


def _square(A, op, arg="A"):
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {arg} must have at least 2 dimensions, got shape "
                           f"{tuple(A.shape)}")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {arg} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    if A._dtype not in (0, 1):  # PyTorch's type: it has no kernel for the dtype
        raise NotImplementedError(f"{op}: Expected a floating point tensor as input ({arg}), got {_dt(A)} (float32 "
                                  f"and float64 are supported)")


def _widen(*tensors):
    """Under CPU autocast, PyTorch runs inv, solve and cholesky in float32 (its CPU float32 list): bfloat16 and
    float16 inputs are widened first. Elsewhere (CUDA autocast too) they stay, and are refused as in PyTorch."""
    return _amp.fp32(*tensors) if _amp._state.enabled and _amp._state.device == "cpu" else tensors


def _mm(a, b):
    """The raw matmul of the solvers' internals: no graph and no autocast lowering (their work is in the input's
    dtype)."""
    return _C.matmul(a, b)


def _arange(n, dev):
    return _C.from_numpy(np.arange(n, dtype=np.int64), _I64, dev)


def _eliminate(A, B=None):
    """Gaussian elimination with partial pivoting of A (..., n, n), no graph. Returns (pivots (..., n), sign of the
    row permutation (...,), X): with B (..., n, k) of A's batch shape, Gauss-Jordan on [A | B] gives X = A^-1 B;
    without B, X is None. A zero pivot (a singular matrix) is left as 0 and its column skipped, so the remaining
    pivots stay finite and the product of the pivots is 0."""
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    M = A.detach() if B is None else _C.cat([A.detach(), B.detach()], A.ndim - 1)
    width = M.shape[-1]
    rows = _arange(n, A._device)
    sign = _C.empty(batch, A._dtype, A._device)
    _C.fill_(sign, 1)
    pivots = []
    for j in range(n):
        col = M.narrow(-2, j, n - j).select(-1, j)
        p = col.abs().argmax(-1) + j
        pe = p.unsqueeze(-1)
        order = _C.where(rows == j, pe, _C.where(rows == pe, j, rows))
        M = M.gather(-2, order.unsqueeze(-1).expand(batch + (n, width)))
        sign = _C.where(p != j, -sign, sign)
        piv = M.select(-2, j).select(-1, j)
        pivots.append(piv)
        safe = _C.where(piv == 0, 1.0, piv).unsqueeze(-1)
        rowj = M.select(-2, j)
        if B is None:  # LU: rows below j lose l = a_ij / pivot times row j
            factor = _C.where(rows > j, M.select(-1, j) / safe, 0.0)
            M = M - factor.unsqueeze(-1) * rowj.unsqueeze(-2)
        else:  # Gauss-Jordan: row j scaled to a unit pivot, column j cleared above and below
            rowj = rowj / safe
            factor = _C.where(rows == j, 0.0, M.select(-1, j))
            M = M - factor.unsqueeze(-1) * rowj.unsqueeze(-2)
            M = _C.where((rows == j).unsqueeze(-1), rowj.unsqueeze(-2), M)
    piv = _C.cat([p.unsqueeze(-1) for p in pivots], len(batch)) if pivots else _C.empty(batch + (0,), A._dtype,
                                                                                          A._device)
    return piv, sign, (M.narrow(-1, n, width - n) if B is not None else None)


def _check_singular(piv, op, invert=False):
    """Raise LinAlgError where a pivot is 0 (PyTorch's message: which diagonal element, which batch element)."""
    if op is None or piv._device == "meta" or piv.numel() == 0:
        return
    zero = (piv == 0)
    if not bool(zero.any()):
        return
    z = _C.TensorBase.numpy(zero.cpu() if zero._device != "cpu" else zero)
    first = np.argwhere(z)[0]
    batch = f"(Batch element {int(np.ravel_multi_index(tuple(first[:-1]), z.shape[:-1]))}): " if z.ndim > 1 else ""
    what = "the inversion could not be completed" if invert else "the solver failed"
    raise LinAlgError(f"{op}: {batch}The diagonal element {int(first[-1]) + 1} is zero, {what} because the input "
                      f"matrix is singular.")


def _eye_like(A):
    n = A.shape[-1]
    eye = _C.from_numpy(np.eye(n, dtype=np.float64), A._dtype, A._device)
    return eye.expand(tuple(A.shape)).contiguous() if A.ndim > 2 else eye


def _inv_raw(A, op):
    piv, _, X = _eliminate(A, _eye_like(A))
    _check_singular(piv, op, invert=True)
    return X


def _det_raw(A):
    piv, sign, _ = _eliminate(A)
    return sign * piv.prod(-1) if piv.shape[-1] else sign


class _Det(Function):
    @staticmethod
    def forward(ctx, A):
        det = _det_raw(A)
        ctx.save_for_backward(A, det)
        return det

    @staticmethod
    def backward(ctx, g):
        A, det = (t.detach() for t in ctx._unpacked)
        g = g.detach()
        _, _, X = _eliminate(A, _eye_like(A))
        # det * A^-T (the transposed adjugate); 0 where det is exactly 0, as PyTorch's gradient is there
        d = det.unsqueeze(-1).unsqueeze(-1)
        return g.unsqueeze(-1).unsqueeze(-1) * _C.where(d == 0, 0.0, d * X.transpose(-2, -1))


class _LogAbsDet(Function):
    @staticmethod
    def forward(ctx, A, logabs):
        ctx.save_for_backward(A)
        return logabs

    @staticmethod
    def backward(ctx, g):
        A, = (t.detach() for t in ctx._unpacked)
        _, _, X = _eliminate(A, _eye_like(A))
        return g.detach().unsqueeze(-1).unsqueeze(-1) * X.transpose(-2, -1), None


class _Inv(Function):
    @staticmethod
    def forward(ctx, A, op):
        X = _inv_raw(A, op)
        ctx.save_for_backward(X)
        return X

    @staticmethod
    def backward(ctx, g):
        X, = (t.detach() for t in ctx._unpacked)
        Xt = X.transpose(-2, -1)
        return -_mm(_mm(Xt, g.detach()), Xt), None


class _Solve(Function):
    """X = A^-1 B for A (..., n, n), B (..., n, k) of the same batch shape."""

    @staticmethod
    def forward(ctx, A, B, op):
        piv, _, X = _eliminate(A, B)
        _check_singular(piv, op)
        ctx.save_for_backward(A, X)
        return X

    @staticmethod
    def backward(ctx, g):
        A, X = (t.detach() for t in ctx._unpacked)
        _, _, gB = _eliminate(A.transpose(-2, -1).contiguous(), g.detach())
        gA = -_mm(gB, X.transpose(-2, -1)) if ctx.needs_input_grad[0] else None
        return gA, gB, None


def det(A):
    """The determinant of each square matrix of A (..., n, n); 0 for a singular one."""
    _square(A, "linalg.det")
    return _Det.apply(A) if _needs_grad(A) else _det_raw(A)


def slogdet(A):
    """(sign, log |det|) of each square matrix; (0, -inf) for a singular one."""
    _square(A, "linalg.slogdet")
    piv, sign, _ = _eliminate(A)
    sign = sign * piv.sign().prod(-1) if piv.shape[-1] else sign
    logabs = piv.abs().log().sum(-1)
    return SignLogAbsDet(sign, _LogAbsDet.apply(A, logabs) if _needs_grad(A) else logabs)


def logdet(A):
    """log det A: NaN where det is negative, -inf where it is 0 (PyTorch's)."""
    _square(A, "logdet")
    sign, logabs = slogdet(A)
    nan = _C.from_numpy(np.array(np.nan), A._dtype, A._device)
    if _needs_grad(logabs):
        return F.Where.apply(sign < 0, nan, logabs)
    return _C.where(sign < 0, nan, logabs)


def inverse(A):
    """The inverse of each square matrix; LinAlgError (a RuntimeError) for a singular one."""
    A, = _widen(A)
    _square(A, "linalg.inv")
    return _Inv.apply(A, "linalg.inv") if _needs_grad(A) else _inv_raw(A, "linalg.inv")


def info(A):
    """linalg.inv_ex's info: per matrix, 0, or the 1-based index of the first zero pivot (LAPACK's getrf info)."""
    _square(A, "linalg.inv_ex")
    piv, _, _ = _eliminate(A)
    zero = F.cast(piv == 0, 0)
    if zero.shape[-1] == 0:
        return F.cast(zero.sum(-1), 9)
    first = zero.argmax(-1) + 1
    return F.cast(_C.where(zero.amax(-1) > 0, first, 0), 9)


def inverse_unchecked(A):
    """(inverse, info) without raising for a singular matrix (linalg.inv_ex)."""
    A, = _widen(A)
    _square(A, "linalg.inv_ex")
    X = _Inv.apply(A, None) if _needs_grad(A) else _eliminate(A, _eye_like(A))[2]
    return X, info(A)


def _batch_shape(a, b, op):
    try:
        return tuple(_C.binary(F.ADD, _C.empty(a, 0, "meta"), _C.empty(b, 0, "meta")).shape)
    except Exception:  # noqa: BLE001 - reworded below with both shapes
        raise RuntimeError(f"{op}: the batch dimensions of A {a} and B {b} cannot be broadcast") from None


def solve(A, B, *, left=True, check=True):
    """X with A X = B (left=False: X A = B), batched with broadcasting; B a vector (..., n) or matrices
    (..., n, k). LinAlgError for a singular A (unless check is False: solve_ex)."""
    op = "linalg.solve"
    if check:  # solve_ex is not on PyTorch's autocast list
        A, B = _widen(A, B)
    _square(A, op)
    if not isinstance(B, _C.TensorBase):
        raise TypeError(f"{op}(): argument 'B' must be Tensor, not {type(B).__name__}")
    if B._dtype != A._dtype:
        raise RuntimeError(f"{op}: Expected A and B to have the same dtype, but found A of type {_dt(A)} and B of "
                           f"type {_dt(B)} instead")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector else B
    n = A.shape[-1]
    if Bm.ndim < 2 or (Bm.shape[-2] if left else Bm.shape[-1]) != n:
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'}"
                           f" ({n}x{n} and {Bm.shape[-2]}x{Bm.shape[-1]})")
    X = _solve_matrices(A, Bm, left, op, check)
    return X.squeeze(-1) if vector else X


def _solve_matrices(A, Bm, left, op, check):
    """X with A X = Bm (left=False: X A = Bm), Bm (..., n, k) or (..., k, n), batches broadcast."""
    if not left:  # X A = B is A^T X^T = B^T
        A, Bm = A.transpose(-2, -1), Bm.transpose(-2, -1)
    batch = _batch_shape(tuple(A.shape[:-2]), tuple(Bm.shape[:-2]), op)
    Ab = A.expand(batch + tuple(A.shape[-2:]))
    Bb = Bm.expand(batch + tuple(Bm.shape[-2:]))
    if _needs_grad(Ab, Bb):
        X = _Solve.apply(Ab, Bb, op if check else None)
    else:
        Ab, Bb = Ab.contiguous(), Bb.contiguous()
        piv, _, X = _eliminate(Ab, Bb)
        _check_singular(piv, op if check else None)
    return X if left else X.transpose(-2, -1)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (left=False: X A = B) for triangular A: only A's upper (upper=True) or lower triangle is
    read, its diagonal taken as ones with unitriangular=True; B (..., n, k), batches broadcast. Back or forward
    substitution (the gradient reaches only the triangle read, as PyTorch's); a zero on A's diagonal gives inf /
    NaN, as PyTorch's."""
    op = "linalg.solve_triangular"
    _square(A, op)
    if not isinstance(B, _C.TensorBase):
        raise TypeError(f"{op}(): argument 'B' must be Tensor, not {type(B).__name__}")
    if not isinstance(upper, bool):
        raise TypeError(f"{op}(): argument 'upper' must be bool, not {type(upper).__name__}")
    if B.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor B must have at least 2 dimensions, got shape {tuple(B.shape)}")
    if B._dtype != A._dtype:
        if not (A.is_floating_point() and B.is_floating_point()):
            raise RuntimeError(f"{op}: Expected A and B to have the same dtype, but found A of type {_dt(A)} and B "
                               f"of type {_dt(B)} instead")
        B = B.to(A.dtype)  # PyTorch's solve_triangular answers in A's float dtype (a float32 GP, float64 targets)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'}"
                           f" ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    keep = np.triu(np.ones((n, n), bool), 1 if unitriangular else 0) if upper else \
        np.tril(np.ones((n, n), bool), -1 if unitriangular else 0)
    T = _where_any(_C.from_numpy(keep, _BOOL, A._device), A, 0.0)
    if unitriangular:
        T = _where_any(_C.from_numpy(np.eye(n, dtype=bool), _BOOL, A._device), 1.0, T)
    if not left:  # X A = B is A^T X^T = B^T, A^T triangular the other way
        T, B, upper = T.transpose(-2, -1), B.transpose(-2, -1), not upper
    batch = _batch_shape(tuple(T.shape[:-2]), tuple(B.shape[:-2]), op)
    Tb, Bb = T.expand(batch + (n, n)), B.expand(batch + tuple(B.shape[-2:]))
    X = _TriSolve.apply(Tb, Bb, upper) if _needs_grad(Tb, Bb) else _substitute(Tb, Bb, upper)
    return X if left else X.transpose(-2, -1)


def _substitute(T, B, upper):
    """X with T X = B for triangular T (zeros off its triangle), by back (upper) or forward substitution, no
    graph: as LAPACK's trsm, a zero on T's diagonal gives inf / NaN rather than an error."""
    n = T.shape[-1]
    T, B = T.detach(), B.detach()
    rows = _arange(n, T._device).unsqueeze(-1)
    X = _C.empty(tuple(B.shape), B._dtype, B._device)
    _C.fill_(X, 0)
    for i in (range(n - 1, -1, -1) if upper else range(n)):
        # row i of T times the rows of X found so far (the others are still 0)
        acc = B.select(-2, i) - _mm(T.narrow(-2, i, 1), X).squeeze(-2)
        xi = acc / T.select(-2, i).select(-1, i).unsqueeze(-1)
        X = _C.where(rows == i, xi.unsqueeze(-2), X)
    return X


class _TriSolve(Function):
    """PyTorch's gradient: gB = the solve with T^T (triangular the other way), gT = -gB X^T (the triangle is
    kept by the where that built T)."""

    @staticmethod
    def forward(ctx, T, B, upper):
        X = _substitute(T, B, upper)
        ctx.upper = upper
        ctx.save_for_backward(T, X)
        return X

    @staticmethod
    def backward(ctx, g):
        T, X = (t.detach() for t in ctx._unpacked)
        gB = _substitute(T.transpose(-2, -1), g.detach(), not ctx.upper)
        gT = -_mm(gB, X.transpose(-2, -1)) if ctx.needs_input_grad[0] else None
        return gT, gB, None


def _where_any(cond, a, b):
    return F.Where.apply(cond, a, b) if _needs_grad(a, b) else _C.where(cond, a, b)


def _cholesky_raw(A):
    """(L, info) with A = L L^T from A's lower triangle, column by column, no graph; info (int32, per matrix) is 0,
    or k where the leading minor of order k is not positive-definite (LAPACK's potrf info)."""
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    A = A.detach()
    rows = _arange(n, A._device)
    L = _C.empty(tuple(A.shape), A._dtype, A._device)
    _C.fill_(L, 0)
    info = _C.empty(batch, _I64, A._device)
    _C.fill_(info, 0)
    for j in range(n):
        s = A.select(-1, j)
        if j:  # A[:, j] - L[:, :j] @ L[j, :j]
            s = s - _mm(L.narrow(-1, 0, j), L.select(-2, j).narrow(-1, 0, j).unsqueeze(-1)).squeeze(-1)
        d = s.select(-1, j)
        bad = (d > 0).logical_not()  # NaN is not positive either
        info = _C.where(bad.logical_and(info == 0), j + 1, info)
        col = s / _C.where(bad, 1.0, d).sqrt().unsqueeze(-1)
        col = _C.where(rows < j, 0.0, col)
        L = _C.where(rows == j, col.unsqueeze(-1), L)
    return L, F.cast(info, 9)


def _check_positive_definite(info, op):
    if op is None or info._device == "meta" or info.numel() == 0:
        return
    i = _C.TensorBase.numpy(info.cpu() if info._device != "cpu" else info)
    if not i.any():
        return
    first = np.argwhere(i.reshape(i.shape or (1,)))[0]
    batch = f"(Batch element {int(np.ravel_multi_index(tuple(first), i.shape))}): " if i.ndim else ""
    raise LinAlgError(f"{op}: {batch}The factorization could not be completed because the input is not "
                      f"positive-definite (the leading minor of order {int(i[tuple(first)] if i.ndim else i)} is not "
                      f"positive-definite).")


def cholesky_phi(L):
    """The constants of phi in the Cholesky factor's gradient (graph_backward_linalg.py's too): the lower-triangle
    mask, and ones with the diagonal halved, in L's dtype."""
    n = L.shape[-1]
    return (_C.from_numpy(np.tril(np.ones((n, n), bool)), _BOOL, L._device),
            _C.from_numpy(np.where(np.eye(n, dtype=bool), 0.5, 1.0), L._dtype, L._device))


class _Cholesky(Function):
    @staticmethod
    def forward(ctx, A, op):
        L, info = _cholesky_raw(A)
        _check_positive_definite(info, op)
        ctx.save_for_backward(L)
        return L, info

    @staticmethod
    def backward(ctx, g, _g_info=None):
        # PyTorch's: gA = L^-T phi(L^T gL) L^-1, symmetrized; phi keeps the lower triangle, the diagonal halved
        L, = (t.detach() for t in ctx._unpacked)
        lower, half = cholesky_phi(L)
        g = _C.where(lower, g.detach(), 0.0)
        P = _C.where(lower, _mm(L.transpose(-2, -1), g), 0.0) * half
        Li = _inv_raw(L, None)
        gA = _mm(_mm(Li.transpose(-2, -1), P), Li)
        return (gA + gA.transpose(-2, -1)) * 0.5, None


def cholesky(A, *, upper=False, check=True, op="linalg.cholesky"):
    """(L, info): the Cholesky factor of each symmetric positive-definite matrix (from its lower triangle);
    upper=True gives L^T. LinAlgError for a matrix that is not positive-definite (unless check is False)."""
    A, = _widen(A)
    _square(A, op)
    if _needs_grad(A):
        L, info = _Cholesky.apply(A, op if check else None)
    else:
        L, info = _cholesky_raw(A)
        _check_positive_definite(info, op if check else None)
    return (L.transpose(-2, -1) if upper else L), info


def matrix_power(A, n):
    """A multiplied by itself n times (binary powering); n = 0 gives identities, n < 0 the inverse's power."""
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"matrix_power(): argument 'input' must be Tensor, not {type(A).__name__}")
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_power: The input tensor A must have at least 2 dimensions, got shape "
                           f"{tuple(A.shape)}")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    n = int(n)
    if n == 0:  # identities; connected to A with a zero gradient where A needs one, as PyTorch's result is
        eye = _C.from_numpy(np.eye(A.shape[-1]), A._dtype, A._device).expand(tuple(A.shape))
        if _needs_grad(A):
            return F.Where.apply(_C.from_numpy(np.ones((), bool), _BOOL, A._device), eye, A)
        return eye.clone()
    if n < 0:
        A, n = inverse(A), -n
    out, base = None, A
    while n:
        if n & 1:
            out = base if out is None else out.matmul(base)
        n >>= 1
        if n:
            base = base.matmul(base)
    return out if out is not A else A.clone()


def _mm_graph(a, b):
    """a @ b, recorded where a graph needs it, without autocast's lowering (these ops are not on its lists)."""
    return F.Matmul.apply(a, b) if _needs_grad(a, b) else _C.matmul(a, b)


def matrix_exp(A):
    """exp(A) = sum A^k / k! of each square matrix: the Taylor series of degree 18 (Horner's scheme) of A / 2^s,
    squared s times, with s chosen on the host so that the scaled 1-norm is at most 1 (truncation below 1e-16
    relative). Composed of matmuls, so its gradient is the derivative of that approximation; float16 and
    bfloat16 are computed in float32 and rounded back."""
    op = "linalg.matrix_exp"
    if isinstance(A, _C.TensorBase) and A._dtype in (2, 3):
        return matrix_exp(A.float()).to(A.dtype)
    _square(A, op)
    n = A.shape[-1]
    s = 0
    if A._device != "meta" and A.numel():
        norm = float(A.detach().abs().sum(-2).amax())  # the largest 1-norm in the batch (one host read)
        if 1 < norm < np.inf:  # (NaN and inf: no scaling helps; they propagate as in PyTorch)
            s = int(np.ceil(np.log2(norm)))
    X = A / float(2 ** s) if s else A
    eye = _C.from_numpy(np.eye(n), A._dtype, A._device)
    E = eye + X / 18.0
    for k in range(17, 0, -1):  # Horner: I + X/k (I + X/(k+1) (...))
        E = eye + _mm_graph(X, E) / float(k)
    for _ in range(s):
        E = _mm_graph(E, E)
    return E


def _triangle(L, upper):
    """L's lower (upper=True: upper) triangle, the rest zeros, no graph: what the Cholesky helpers read."""
    n = L.shape[-1]
    keep = np.triu(np.ones((n, n), bool)) if upper else np.tril(np.ones((n, n), bool))
    return _C.where(_C.from_numpy(keep, _BOOL, L._device), L.detach(), 0.0)


def _cholesky_solve_raw(B, L, upper):
    """(L L^T)^-1 B (upper: (U^T U)^-1 B) by two triangular solves, no graph, batches of the same shape."""
    T = _triangle(L, upper)
    if upper:  # U^T Y = B, then U X = Y
        return _substitute(T, _substitute(T.transpose(-2, -1), B, False), True)
    return _substitute(T.transpose(-2, -1), _substitute(T, B, False), True)


class _CholeskySolve(Function):
    """PyTorch's gradient: gB = cholesky_solve(g, L), gL = -(C L) (upper: -(L C)) with C = gB X^T + X gB^T."""

    @staticmethod
    def forward(ctx, B, L, upper):
        X = _cholesky_solve_raw(B, L, upper)
        ctx.upper = upper
        ctx.save_for_backward(L, X)
        return X

    @staticmethod
    def backward(ctx, g):
        L, X = (t.detach() for t in ctx._unpacked)
        gB = _cholesky_solve_raw(g.detach(), L, ctx.upper)
        common = _mm(gB, X.transpose(-2, -1))
        common = common + common.transpose(-2, -1)
        gL = -_mm(L, common) if ctx.upper else -_mm(common, L)
        return gB, gL, None


def cholesky_solve(B, L, upper=False):
    """X with (L L^T) X = B, given the Cholesky factor L of A (upper=True: A = U^T U with U = L); batches
    broadcast. Two triangular solves reading only L's triangle; the gradient is PyTorch's formula (which, as
    PyTorch's, also reaches the other triangle of L)."""
    op = "cholesky_solve"
    if not isinstance(B, _C.TensorBase):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(B).__name__}")
    _square(L, op, "input2")
    if B.ndim < 2:
        raise RuntimeError(f"{op}: b should have at least 2 dimensions, but has {B.ndim} dimensions instead")
    if B._dtype != L._dtype:
        raise RuntimeError(f"{op}: Expected b and A to have the same dtype, but found b of type {_dt(B)} and A of "
                           f"type {_dt(L)} instead.")
    n = L.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"{op}: Incompatible matrix sizes for cholesky_solve: each A matrix is {n} by {n} but "
                           f"each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    batch = _batch_shape(tuple(B.shape[:-2]), tuple(L.shape[:-2]), op)
    Bb, Lb = B.expand(batch + tuple(B.shape[-2:])), L.expand(batch + (n, n))
    if _needs_grad(Bb, Lb):
        return _CholeskySolve.apply(Bb, Lb, bool(upper))
    return _cholesky_solve_raw(Bb, Lb, bool(upper))


class _CholeskyInverse(Function):
    """PyTorch's gradient: gL = -(C L) (upper: -(L C)) with C = inv (g + g^T) inv."""

    @staticmethod
    def forward(ctx, L, upper):
        eye = _eye_like(L)
        inv = _cholesky_solve_raw(eye, L, upper)
        ctx.upper = upper
        ctx.save_for_backward(L, inv)
        return inv

    @staticmethod
    def backward(ctx, g):
        L, inv = (t.detach() for t in ctx._unpacked)
        g = g.detach()
        common = _mm(_mm(inv, g + g.transpose(-2, -1)), inv)
        return (-_mm(L, common) if ctx.upper else -_mm(common, L)), None


@_amp.float32_op  # (CPU autocast's float32 list)
def cholesky_inverse(L, upper=False):
    """(L L^T)^-1 (upper=True: (U^T U)^-1) from a Cholesky factor, reading only its triangle; LinAlgError where L
    has a zero on its diagonal (a singular A)."""
    op = "cholesky_inverse"
    _square(L, op)
    if L._device != "meta" and L.numel():
        _check_singular(L.detach().diagonal(0, -2, -1).contiguous(), op, invert=True)
    if _needs_grad(L):
        return _CholeskyInverse.apply(L, bool(upper))
    return _cholesky_solve_raw(_eye_like(L), L, bool(upper))


class SolveMethods:
    """The Tensor methods of this module (see its docstring)."""
    __slots__ = ()

    def det(self):
        return det(self)

    def slogdet(self):
        return slogdet(self)

    def logdet(self):
        return logdet(self)

    def inverse(self):
        return inverse(self)

    def matrix_power(self, n):
        return matrix_power(self, n)

    def matrix_exp(self):
        return matrix_exp(self)

    def cholesky_solve(self, input2, upper=False):
        return cholesky_solve(self, input2, upper)

    def cholesky_inverse(self, upper=False):
        return cholesky_inverse(self, upper)
