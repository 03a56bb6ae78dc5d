"""Matrix decompositions: the singular value decomposition (torch.svd, linalg.svd / svdvals), QR (linalg.qr), the
symmetric eigendecomposition (linalg.eigh / eigvalsh), the pseudo-inverse (linalg.pinv, torch.pinverse) and the
rank (linalg.matrix_rank); gm.linalg exports the torch.linalg names. Tensor methods in DecompMethods (copied into
Tensor); the gm.* functions in __all__ (gpumemnet/__init__.py imports them); least squares (linalg.lstsq). LU
is in tensor_decomp_lu.py, the shared helpers in tensor_decomp_base.py.

These are iterative or pivoting algorithms with no gpumemnet kernel: they run on the host, with NumPy's LAPACK
(numpy.linalg) in the input's dtype (float32 or float64; the others are refused as PyTorch's CPU kernels refuse
them), batched over the leading dims, and the results are copied back to the input's device (a CUDA input makes a
round trip through host memory). Under CPU autocast the ops on PyTorch's float32 list (svd, qr, eigh, pinverse,
matrix_rank, lstsq, cond, householder_product, torch.lu) widen float16 / bfloat16 inputs first. On the meta
device (the memory estimator) they return empty results of the right shapes and dtypes. Signs of singular vectors,
eigenvectors and Q's columns are LAPACK's, as PyTorch's, but only the gauge-invariant quantities are guaranteed
to agree.

linalg.lstsq solves through the SVD (LAPACK's gelsd) whatever driver is named; the driver decides, as in
PyTorch, which of residuals / rank / singular_values are returned. For full-rank systems every driver's solution
is the same; for rank-deficient ones gels (QR, which assumes full rank) gives PyTorch garbage where we give the
minimum-norm solution; gelsy's rank test (on R's diagonal) can differ from the SVD's at the cutoff, and where
rcond drops singular values that are not 0, gelsy's truncated solution (from its complete orthogonal
factorisation) is not the SVD's.

Gradients are autograd Functions whose backward is composed of gpumemnet ops (so it runs on the input's device,
meta too): the SVD's is the Ionescu / Townsend formula PyTorch uses (defined for distinct nonzero singular values),
eigh's the eigenvector formula (distinct eigenvalues), QR's the formula for the reduced factorisation (any shape;
mode='complete' with more rows than columns and mode='r' are not differentiable, as in PyTorch), pinv's the
Golub-Pereyra formula (constant rank). They are first-order."""
import numbers

import numpy as np

from .. import _C
from . import functions as F
from .autograd import Function, needs_grad as _needs_grad
from .tensor_decomp_base import (I64 as _I64, NAMES as _NAMES, back, check_matrices, empty, host,
                                 zeros, eye_mask as _eye_mask, mm as _mm, mT as _mT, pad as _pad,
                                 triangle_mask as _triangle_mask)
from .tensor_decomp_lu import LUMethods, lu, lu_solve, lu_unpack  # noqa: F401  (gm.* takes them from here)
from .tensor_solve import LinAlgError, _mm_graph, _substitute, _widen
from .return_types import SVD, LinalgEigh, LinalgQR, LinalgSVD, Lstsq

__all__ = ["svd", "pinverse", "nuclear_norm", "lu", "lu_solve", "lu_unpack"]

def _lapack(op, fn, *args, **kwargs):
    """fn (numpy.linalg's eigh / eigvalsh / svd) with its failure raised as gm.linalg.LinAlgError, in PyTorch's
    words, so that `except torch.linalg.LinAlgError` (a jitter loop) catches it."""
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError:
        what = "eigenvalues" if "eig" in fn.__name__ else "singular values"
        raise LinAlgError(f"linalg.{op}: The algorithm failed to converge because the input matrix is "
                          f"ill-conditioned or has too many repeated {what}.") from None




# ---- SVD --------------------------------------------------------------------------------------------------------
def _svd_raw(A, full, compute_uv=True):
    """(U, S, Vh) or S, no graph."""
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    batch = tuple(A.shape[:-2])
    if A._device == "meta":
        S = empty(batch + (k,), A)
        if not compute_uv:
            return S
        return empty(batch + (m, m if full else k), A), S, empty(batch + (n if full else k, n), A)
    a = host(A)
    if not compute_uv:
        return back(_lapack("svdvals", np.linalg.svd, a, compute_uv=False), A)
    U, S, Vh = _lapack("svd", np.linalg.svd, a, full_matrices=full)
    return back(U, A), back(S, A), back(Vh, A)


class _SVD(Function):
    """A = U diag(S) Vh. backward is PyTorch's (Ionescu / Townsend): with full_matrices only the first k columns of
    U and rows of Vh carry gradient."""

    @staticmethod
    def forward(ctx, A, full):
        U, S, Vh = _svd_raw(A, full)
        k = S.shape[-1]
        ctx.full = full
        ctx.save_for_backward(U.narrow(-1, 0, k) if full else U, S, Vh.narrow(-2, 0, k) if full else Vh)
        return U, S, Vh

    @staticmethod
    def backward(ctx, *grads):
        gU, gS, gVh = _pad(grads, 3)
        U, S, Vh = (t.detach() for t in ctx._unpacked)
        m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
        if ctx.full:
            gU = None if gU is None else gU.narrow(-1, 0, k)
            gVh = None if gVh is None else gVh.narrow(-2, 0, k)
        if gU is None and gVh is None:  # only S: U diag(gS) Vh
            return (_mm(U, gS.detach().unsqueeze(-1) * Vh) if gS is not None else None), None
        eye = _eye_mask(k, S)
        S2 = S * S
        E = _C.where(eye, 1.0, S2.unsqueeze(-2) - S2.unsqueeze(-1))  # E[i, j] = S_j^2 - S_i^2
        inner = None
        if gU is not None:
            gU = gU.detach()
            UtgU = _mm(_mT(U), gU)
            inner = (UtgU - _mT(UtgU)) * S.unsqueeze(-2)
        if gVh is not None:
            gVh = gVh.detach()
            VtgV = _mm(Vh, _mT(gVh))
            part = S.unsqueeze(-1) * (VtgV - _mT(VtgV))
            inner = part if inner is None else inner + part
        inner = inner / E
        if gS is not None:
            inner = inner + _C.where(eye, gS.detach().unsqueeze(-1), 0.0)
        if m > n and gU is not None:  # U's complement: (I - U U^T) gU S^-1
            gUS = gU / S.unsqueeze(-2)
            gA = _mm(U, inner) + gUS - _mm(U, _mm(_mT(U), gUS))
            return _mm(gA, Vh), None
        if m < n and gVh is not None:  # Vh's complement: S^-1 gVh (I - V Vh)
            SgVh = gVh / S.unsqueeze(-1)
            gA = _mm(inner, Vh) + SgVh - _mm(_mm(SgVh, _mT(Vh)), Vh)
            return _mm(U, gA), None
        return _mm(_mm(U, inner), Vh), None


def _check_driver(A, driver, op):
    if driver is not None and not A._device.startswith("cuda"):  # PyTorch's: drivers are cuSOLVER's
        raise RuntimeError(f"{op}: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER "
                           f"backend (got driver={driver!r} for a {A._device} tensor).")
    if driver is not None and driver not in ("gesvd", "gesvdj", "gesvda"):
        raise RuntimeError(f"{op}: driver must be one of 'gesvd', 'gesvdj', 'gesvda' or None, got {driver!r}")


def linalg_svd(A, full_matrices=True, *, driver=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending; full_matrices=False gives the reduced factors (k =
    min(m, n) columns of U, rows of Vh). driver (cuSOLVER's, CUDA only) is accepted and has no effect: the work is
    LAPACK's on the host."""
    A, = _widen(A)
    check_matrices(A, "linalg.svd", kernel="linalg_svd_cpu", fn="linalg_svd")
    _check_driver(A, driver, "torch.linalg.svd")
    full = bool(full_matrices)
    if _needs_grad(A):
        return LinalgSVD(*_SVD.apply(A, full))
    return LinalgSVD(*_svd_raw(A, full))


def linalg_svdvals(A, *, driver=None):
    """The singular values of each matrix of A, descending (what linalg.svd's S is)."""
    A, = _widen(A)
    check_matrices(A, "linalg.svd", kernel="linalg_svd_cpu", fn="linalg_svdvals")
    _check_driver(A, driver, "torch.linalg.svd")
    if _needs_grad(A):
        return _SVD.apply(A, False)[1]
    return _svd_raw(A, False, compute_uv=False)


def svd(input, some=True, compute_uv=True):  # noqa: A002
    """torch.svd: (U, S, V) with input = U diag(S) V^T (V, not linalg.svd's Vh); some=False gives square U and V.
    compute_uv=False: U and V are zero-filled (m, m) and (n, n) matrices (not differentiable) and only S is
    computed. Computed on the host (see the module docstring)."""
    if isinstance(input, _C.TensorBase) and input.ndim < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has {input.ndim} dimensions "
                           f"instead")
    input, = _widen(input)
    check_matrices(input, "linalg.svd", arg="input", kernel="linalg_svd_cpu", fn="svd")
    if not compute_uv:
        m, n = input.shape[-2], input.shape[-1]
        batch = tuple(input.shape[:-2])
        return SVD(zeros(batch + (m, m), input), linalg_svdvals(input), zeros(batch + (n, n), input))
    U, S, Vh = linalg_svd(input, full_matrices=not some)
    return SVD(U, S, _mT(Vh))


# ---- QR ---------------------------------------------------------------------------------------------------------
def _qr_raw(A, mode):
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    batch = tuple(A.shape[:-2])
    if A._device == "meta":
        Q = empty((0,), A) if mode == "r" else empty(batch + (m, m if mode == "complete" else k), A)
        return Q, empty(batch + ((m if mode == "complete" else k), n), A)
    a = host(A)
    if mode == "r":
        return empty((0,), A), back(np.linalg.qr(a, mode="r"), A)
    Q, R = np.linalg.qr(a, mode=mode)
    return back(Q, A), back(R, A)


def _qr_square_backward(Q, R, gQ, gR):
    """gA for A = Q R with R (k, k) square invertible: (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q, where
    copyltu(M) is the symmetric matrix of M's lower triangle."""
    k = R.shape[-1]
    M = None
    if gR is not None:
        M = _mm(R, _mT(gR))
    if gQ is not None:
        M = -_mm(_mT(gQ), Q) if M is None else M - _mm(_mT(gQ), Q)
    low = _C.where(_triangle_mask(k, R, -1), M, 0.0)
    sym = low + _mT(low) + _C.where(_eye_mask(k, R), M, 0.0)
    b = _mm(Q, sym) if gQ is None else gQ + _mm(Q, sym)
    # b R^-T = (R^-1 b^T)^T: one back substitution with the upper triangular R
    return _mT(_substitute(R, _mT(b).contiguous(), True))


class _QR(Function):
    @staticmethod
    def forward(ctx, A, mode):
        Q, R = _qr_raw(A, mode)
        ctx.mode = mode
        ctx.save_for_backward(Q, R)
        return Q, R

    @staticmethod
    def backward(ctx, *grads):
        gQ, gR = _pad(grads, 2)
        if ctx.mode == "r":
            raise RuntimeError("linalg.qr_backward: The derivative of linalg.qr depends on Q, which is not computed "
                               "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
                               "differentiate through linalg.qr.")
        Q, R = (t.detach() for t in ctx._unpacked)
        m, n = Q.shape[-2], R.shape[-1]
        if ctx.mode == "complete" and m > n:
            raise RuntimeError(f"linalg.qr_backward: The QR decomposition is not differentiable when "
                               f"mode='complete' and nrows > ncols (A is {m} by {n}).")
        gQ = None if gQ is None else gQ.detach()
        gR = None if gR is None else gR.detach()
        if m >= n:
            return _qr_square_backward(Q, R, gQ, gR), None
        # A = [X | Y] with X = Q U (square) and Y = Q V: Y's gradient is Q gV, and gV reaches gQ through Y
        U, V = R.narrow(-1, 0, m), R.narrow(-1, m, n - m)
        Y = _mm(Q, V)
        gU = None if gR is None else gR.narrow(-1, 0, m)
        gV = None if gR is None else gR.narrow(-1, m, n - m)
        if gV is not None:
            gQ = _mm(Y, _mT(gV)) if gQ is None else gQ + _mm(Y, _mT(gV))
        gX = _qr_square_backward(Q, U, gQ, gU)
        gY = _mm(Q, gV) if gV is not None else zeros(tuple(Y.shape), Y)
        return _C.cat([gX, gY], gX.ndim - 1), None


def linalg_qr(A, mode="reduced"):
    """(Q, R) with A = Q R, Q with orthonormal columns, R upper triangular (LAPACK's Householder QR: R's diagonal
    may be negative). mode: 'reduced' (k = min(m, n) columns of Q), 'complete' (square Q) or 'r' (R only; Q is
    an empty tensor)."""
    A, = _widen(A)
    check_matrices(A, "linalg.qr", kernel="geqrf_cpu", fn="linalg_qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           f"or 'complete'")
    if _needs_grad(A):
        return LinalgQR(*_QR.apply(A, mode))
    return LinalgQR(*_qr_raw(A, mode))


# ---- eigh -------------------------------------------------------------------------------------------------------
def _check_uplo(UPLO):
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U") or len(UPLO) != 1:
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO.upper()


def _eigh_raw(A, uplo, vectors=True):
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    if A._device == "meta":
        return empty(batch + (n,), A), (empty(batch + (n, n), A) if vectors else None)
    a = host(A)
    if not vectors:
        return back(_lapack("eigvalsh", np.linalg.eigvalsh, a, UPLO=uplo), A), None
    L, V = _lapack("eigh", np.linalg.eigh, a, UPLO=uplo)
    return back(L, A), back(V, A)


class _Eigh(Function):
    """A = V diag(L) V^T from one triangle of A. backward: V (diag(gL) + (V^T gV) / E) V^T with
    E[i, j] = L_j - L_i off the diagonal (the eigenvector part needs distinct eigenvalues), symmetrized."""

    @staticmethod
    def forward(ctx, A, uplo):
        L, V = _eigh_raw(A, uplo)
        ctx.save_for_backward(L, V)
        return L, V

    @staticmethod
    def backward(ctx, *grads):
        gL, gV = _pad(grads, 2)
        L, V = (t.detach() for t in ctx._unpacked)
        n = L.shape[-1]
        eye = _eye_mask(n, L)
        if gV is not None:
            E = _C.where(eye, 1.0, L.unsqueeze(-2) - L.unsqueeze(-1))
            inner = _C.where(eye, 0.0, _mm(_mT(V), gV.detach()) / E)
            if gL is not None:
                inner = inner + _C.where(eye, gL.detach().unsqueeze(-1), 0.0)
        else:
            inner = _C.where(eye, gL.detach().unsqueeze(-1), 0.0)
        gA = _mm(_mm(V, inner), _mT(V))
        return (gA + _mT(gA)) * 0.5, None  # symmetrized, as PyTorch's (A is taken as symmetric)


def linalg_eigh(A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of each symmetric matrix of A, read from its lower
    (UPLO='L') or upper triangle only."""
    A, = _widen(A)
    check_matrices(A, "linalg.eigh", square=True, kernel="linalg_eigh_cpu", int_kernel=True, fn="linalg_eigh")
    uplo = _check_uplo(UPLO)
    if _needs_grad(A):
        return LinalgEigh(*_Eigh.apply(A, uplo))
    return LinalgEigh(*_eigh_raw(A, uplo))


def linalg_eigvalsh(A, UPLO="L"):
    """The eigenvalues (ascending) of each symmetric matrix of A, from one triangle as linalg.eigh."""
    A, = _widen(A)
    check_matrices(A, "linalg.eigh", square=True, kernel="linalg_eigh_cpu", int_kernel=True,
                   fn="linalg_eigvalsh")
    uplo = _check_uplo(UPLO)
    if _needs_grad(A):
        return _Eigh.apply(A, uplo)[0]
    return _eigh_raw(A, uplo, vectors=False)[0]


# ---- pinv and rank ----------------------------------------------------------------------------------------------
def _tolerance_array(t, like, name, op):
    """atol / rtol as a NumPy array (a number or a tensor; None stays None)."""
    if t is None:
        return None
    if isinstance(t, _C.TensorBase):
        if t._device == "meta" or like._device == "meta":
            return np.zeros(tuple(t.shape))
        if t._dtype not in (0, 1):
            raise RuntimeError(f"{op}: {name} must be a floating point tensor, got {t.dtype}")
        return host(t).astype(np.float64)
    if isinstance(t, numbers.Real) and not isinstance(t, bool):
        return np.asarray(float(t))
    raise TypeError(f"{op}(): argument '{name}' must be Tensor or float, not {type(t).__name__}")


def _cutoff(S, smax, atol, rtol, m, n, dtype):
    """PyTorch's rule: tol = max(atol, rtol * smax); rtol defaults to eps * max(m, n), or to 0 where atol > 0 is
    given. S (..., k), smax (...,) NumPy arrays; returns the mask of the values kept (batches broadcast)."""
    default = np.finfo(dtype).eps * max(m, n)
    if rtol is None:
        rtol = default if atol is None else np.where(atol > 0, 0.0, default)
    tol = np.maximum(0.0 if atol is None else atol, rtol * smax) if atol is not None else rtol * smax
    return S > np.asarray(tol)[..., None]


def _spectrum(A, hermitian):
    """(values, U, Vh) on the host: the SVD, or for hermitian the eigendecomposition (|L| as the values, with
    U = V diag(sign L), Vh = V^T)."""
    a = host(A)
    if hermitian:
        L, V = _lapack("pinv", np.linalg.eigh, a)
        return np.abs(L), V * np.where(L < 0, -1.0, 1.0)[..., None, :].astype(a.dtype), np.swapaxes(V, -1, -2)
    U, S, Vh = _lapack("pinv", np.linalg.svd, a, full_matrices=False)
    return S, U, Vh


def _pinv_raw(A, atol, rtol, hermitian):
    m, n = A.shape[-2], A.shape[-1]
    batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), *(np.shape(t) for t in (atol, rtol) if t is not None)))
    if A._device == "meta":
        return empty(batch + (n, m), A)
    S, U, Vh = _spectrum(A, hermitian)
    if S.shape[-1] == 0:
        return zeros(batch + (n, m), A)
    keep = _cutoff(S, S.max(-1), atol, rtol, m, n, S.dtype)
    inv = np.where(keep, 1.0 / np.where(keep, S, 1.0), 0.0).astype(S.dtype)
    P = np.matmul(np.swapaxes(Vh, -1, -2) * inv[..., None, :], np.swapaxes(U, -1, -2))
    return back(np.broadcast_to(P, batch + (n, m)), A)


class _Pinv(Function):
    """P = A^+. backward (Golub-Pereyra, for a constant rank):
    gA = -P^T gP P^T + (I - A P) gP^T P P^T + P^T P gP^T (I - P A)."""

    @staticmethod
    def forward(ctx, A, atol, rtol, hermitian):
        P = _pinv_raw(A, atol, rtol, hermitian)
        ctx.save_for_backward(A, P)
        return P

    @staticmethod
    def backward(ctx, gP):
        A, P = (t.detach() for t in ctx._unpacked)
        gP = gP.detach()
        Pt, gPt = _mT(P), _mT(gP)
        gA = -_mm(_mm(Pt, gP), Pt)
        gA = gA + _mm(_mm(gPt, P), Pt) - _mm(_mm(_mm(A, P), gPt), _mm(P, Pt))
        gA = gA + _mm(_mm(Pt, P), gPt) - _mm(_mm(_mm(Pt, P), gPt), _mm(P, A))
        if tuple(gA.shape) != tuple(A.shape):  # atol / rtol broadcast the batch
            gA = F.sum_to(gA, tuple(A.shape))
        return gA, None, None, None


def linalg_pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None):
    """The Moore-Penrose pseudo-inverse of each matrix of A (n by m), from its SVD (hermitian=True: from eigh of
    a symmetric A, reading its lower triangle): singular values at most max(atol, rtol * largest) count as 0.
    rtol defaults to eps * max(m, n) (to 0 where a positive atol is given); rcond is the older name of rtol.
    atol / rtol may be tensors, broadcast with A's batch."""
    op = "linalg.pinv"
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"linalg_pinv(): argument 'input' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2 or A._dtype not in (0, 1):
        raise RuntimeError(f"{op}({_NAMES.get(A._dtype)}{list(A.shape)}): expected a tensor with 2 or more "
                           f"dimensions of float, double, cfloat or cdouble types")
    if rcond is not None:
        if rtol is not None:
            raise RuntimeError(f"{op}: give rtol or rcond (its older name), not both")
        rtol = rcond
    if hermitian:
        check_matrices(A, "linalg.eigh", square=True)
    atol_a, rtol_a = _tolerance_array(atol, A, "atol", op), _tolerance_array(rtol, A, "rtol", op)
    if _needs_grad(A):
        return _Pinv.apply(A, atol_a, rtol_a, bool(hermitian))
    return _pinv_raw(A, atol_a, rtol_a, bool(hermitian))


def pinverse(input, rcond=1e-15):  # noqa: A002
    """torch.pinverse: linalg.pinv(input, rtol=rcond)."""
    if not isinstance(input, _C.TensorBase):
        raise TypeError(f"pinverse(): argument 'input' must be Tensor, not {type(input).__name__}")
    input, = _widen(input)  # (on CPU autocast's float32 list, where linalg.pinv is not)
    return linalg_pinv(input, rtol=rcond)


def linalg_matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None):
    """The number of singular values above max(atol, rtol * largest) of each matrix (int64), the tolerances as
    linalg.pinv's (tol: the older name of atol, with rtol 0). hermitian=True uses eigvalsh's |eigenvalues|."""
    op = "torch.linalg.matrix_rank"
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"linalg_matrix_rank(): argument 'input' must be Tensor, not {type(A).__name__}")
    A, = _widen(A)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor input must have at least 2 dimensions.")
    if A._dtype not in (0, 1):
        raise RuntimeError(f"{op}: This function doesn't handle types other than float and double (got {A.dtype})")
    if tol is not None:
        if atol is not None or rtol is not None:
            raise RuntimeError(f"{op}: give tol or atol / rtol, not both")
        atol, rtol = tol, 0.0
    if hermitian:
        check_matrices(A, "linalg.eigh", square=True)
    atol_a, rtol_a = _tolerance_array(atol, A, "atol", op), _tolerance_array(rtol, A, "rtol", op)
    m, n = A.shape[-2], A.shape[-1]
    batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), *(np.shape(t) for t in (atol_a, rtol_a)
                                                             if t is not None)))
    if A._device == "meta":
        return empty(batch, A, _I64)
    a = host(A)
    S = np.abs(_lapack("matrix_rank", np.linalg.eigvalsh, a)) if hermitian else \
        _lapack("matrix_rank", np.linalg.svd, a, compute_uv=False)
    if S.shape[-1] == 0:
        return zeros(batch, A, _I64)
    keep = _cutoff(S, S.max(-1), atol_a, rtol_a, m, n, S.dtype)
    return back(np.broadcast_to(keep.sum(-1), batch).astype(np.int64), A, _I64)


# ---- the norms of the singular values ---------------------------------------------------------------------------
def svd_norm(A, ord, dims, keepdim):
    """matrix_norm's 'nuc' (sum of the singular values), 2 (largest) and -2 (smallest) over the two dims (already
    checked and non-negative), differentiable through the SVD."""
    if A._dtype in (2, 3):  # refused before CPU autocast would widen it in svdvals, as PyTorch's
        raise NotImplementedError(f"linalg.matrix_norm: Low precision dtypes not supported. Got "
                                  f"{_NAMES[A._dtype]}")
    d0, d1 = dims
    rest = [d for d in range(A.ndim) if d not in (d0, d1)]
    M = A.permute(tuple(rest) + (d0, d1)) if (d0, d1) != (A.ndim - 2, A.ndim - 1) else A
    S = linalg_svdvals(M)
    if ord == "nuc":
        out = S.sum(-1)
    elif S.shape[-1] == 0:  # no singular values: PyTorch's 2-norm is 0, its -2 (a min of nothing) raises
        if ord == -2:
            raise IndexError(f"linalg.matrix_norm: ord=-2 of empty matrices (shape {tuple(A.shape)}): the smallest "
                             f"singular value of none is undefined (amin(): Expected reduction dim -1 to have "
                             f"non-zero size)")
        out = S.sum(-1)
    else:
        out = S.amax(-1) if ord == 2 else S.amin(-1)
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out


def nuclear_norm(input, dim=None, keepdim=False):  # noqa: A002
    """torch.nuclear_norm: the sum of the singular values over dim (two dims; the last two by default).
    Deprecated in PyTorch in favour of linalg.matrix_norm(A, 'nuc')."""
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim) is PyTorch's other form
        dim, keepdim = None, dim
    check_matrices(input, "linalg.matrix_norm", arg="input", fn="nuclear_norm")
    if dim is None:
        dim = (-2, -1)
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    dims = tuple(d % input.ndim for d in dim)
    if dims[0] == dims[1]:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got {tuple(dim)}")
    return svd_norm(input, "nuc", dims, keepdim)


# ---- least squares ----------------------------------------------------------------------------------------------
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def linalg_lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||A X - B|| for each matrix A (m, n) and B (m, k) (or a
    vector B of A's ndim - 1 dims), batches broadcast. driver (CPU: 'gelsy' by default, or 'gels', 'gelsd',
    'gelss'; CUDA: 'gels' only, m >= n) decides the other results as PyTorch: residuals ||A X - B||^2 per column
    when m > n, the driver is not gelsy and (except gels) every matrix has full rank, else empty; rank (int64)
    unless gels; singular_values for gelsd / gelss. Singular values at most rcond * the largest (default
    eps * max(m, n)) count as 0. Computed through the SVD on the host (see the module docstring); the solution
    (through pinv) and the residuals are differentiable."""
    op = "torch.linalg.lstsq"
    for name, t in (("self", A), ("b", B)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"linalg_lstsq(): argument '{name}' must be Tensor, not {type(t).__name__}")
    A, B = _widen(A, B)
    if A._dtype not in (0, 1) or B._dtype not in (0, 1):
        raise RuntimeError(f"{op}: This function doesn't handle types other than float and double (got {A.dtype} "
                           f"and {B.dtype})")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions, got shape {tuple(A.shape)}")
    if B._dtype != A._dtype:
        raise RuntimeError(f"{op}: Expected input and other to have the same dtype, but got input's dtype "
                           f"{A.dtype} and other's dtype {B.dtype}")
    if B.ndim > A.ndim or A.ndim - B.ndim > 1:
        raise RuntimeError(f"{op}: input.dim() must be greater or equal to other.dim() and (input.dim() - "
                           f"other.dim()) <= 1 (A {tuple(A.shape)}, B {tuple(B.shape)})")
    cuda = A._device.startswith("cuda")
    if driver is None:
        driver = "gels" if cuda else "gelsy"
    if driver not in _DRIVERS:
        raise RuntimeError(f"{op}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), got {driver!r}")
    if cuda and driver != "gels":
        raise RuntimeError(f"{op}: `driver` other than `gels` is not supported on CUDA")
    m, n = A.shape[-2], A.shape[-1]
    vector = B.ndim == A.ndim - 1
    if (B.shape[-1] if vector else B.shape[-2]) != m:
        raise RuntimeError(f"{op}: input.size(-2) should match other.size({-1 if vector else -2}) (A "
                           f"{tuple(A.shape)}, B {tuple(B.shape)})")
    if cuda and m < n:
        raise RuntimeError(f"{op}: only overdetermined systems (input.size(-2) >= input.size(-1)) are allowed on "
                           f"CUDA")
    if rcond is not None and not isinstance(rcond, numbers.Real):
        raise TypeError(f"linalg_lstsq(): argument 'rcond' must be float, not {type(rcond).__name__}")
    Bm = B.unsqueeze(-1) if vector else B
    k = Bm.shape[-1]
    try:
        batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2])))
    except ValueError:
        raise RuntimeError(f"{op}: the batch dims of A {tuple(A.shape)} and B {tuple(B.shape)} cannot be "
                           f"broadcast") from None
    r = float(np.finfo(np.float32 if A._dtype == 0 else np.float64).eps * max(m, n)) if rcond is None or \
        rcond <= 0 else float(rcond)
    want_rank, want_sv = driver != "gels", driver in ("gelsd", "gelss")
    full_rank = True
    if A._device == "meta":
        X = empty(batch + (n, k), A)
        rank = empty(tuple(A.shape[:-2]), A, _I64)
        S = empty(tuple(A.shape[:-2]) + (min(m, n),), A)
    else:
        # rank and singular values per matrix of A (its own batch shape, as PyTorch's); the solution broadcast
        a, b = host(A), host(Bm)
        U, s, Vh = _lapack("lstsq", np.linalg.svd, a, full_matrices=False)
        keep = s > r * (s.max(-1, keepdims=True) if s.shape[-1] else 0)
        inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0).astype(s.dtype)
        x = np.matmul(np.swapaxes(Vh, -1, -2) * inv[..., None, :], np.matmul(np.swapaxes(U, -1, -2), b))
        ranks = keep.sum(-1)
        full_rank = bool(np.all(ranks == n))
        X, rank, S = back(x, A), back(ranks.astype(np.int64), A, _I64), back(s, A)
        res = np.square(np.matmul(a, x) - b).sum(-2)
    if m > n and driver != "gelsy" and (driver == "gels" or full_rank):
        residuals = empty(batch + (k,), A) if A._device == "meta" else back(res, A)
    else:
        residuals = empty((0,), A)
    if _needs_grad(A, B):  # the minimum-norm solution pinv(A) B, and the residuals from it, recorded
        X = _mm_graph(linalg_pinv(A, rtol=r), Bm)  # (_mm_graph: autocast does not lower these products)
        if residuals.numel():
            residuals = (_mm_graph(A, X) - Bm).pow(2).sum(-2)
    return Lstsq(X.squeeze(-1) if vector else X, residuals, rank if want_rank else empty((0,), A, _I64),
                 S if want_sv else empty((0,), A))


class DecompMethods(LUMethods):
    """The Tensor methods of the decompositions (copied into Tensor; Tensor.lu and lu_solve from LUMethods)."""
    __slots__ = ()

    def svd(self, some=True, compute_uv=True):
        """torch.svd(self, some, compute_uv): (U, S, V)."""
        return svd(self, some, compute_uv)

    def pinverse(self, rcond=1e-15):
        """torch.pinverse(self, rcond)."""
        return pinverse(self, rcond)
