"""gm.linalg (layer 2, over _core): torch.linalg's norms, composed of the core's differentiable ops —
vector_norm, matrix_norm and norm ('nuc', 2 and -2 through the singular values); the products (matmul,
multi_dot, vecdot, cross), diagonal and vander; tensorinv and tensorsolve; the small dense solvers of
_core/tensor_solve.py (det, slogdet, inv, inv_ex, solve, solve_ex, solve_triangular, cholesky, cholesky_ex,
matrix_power, matrix_exp: elimination and series composed of gpumemnet ops, no LAPACK); and the decompositions of
_core/tensor_decomp.py and tensor_decomp_lu.py (svd, svdvals, qr, eigh, eigvalsh, pinv, matrix_rank, cond, lstsq,
lu_factor, lu_factor_ex, lu, lu_solve, ldl_factor, ldl_factor_ex, ldl_solve computed on the host with NumPy's
LAPACK or NumPy loops; householder_product composed of gpumemnet ops); eig and eigvals (complex results from
LAPACK on the host, forward only); svd_lowrank and pca_lowrank (torch.*) as exact truncated SVDs."""
import collections
import math
import numbers

import numpy as np

from . import _C
from ._core.tensor import matmul
from ._core.tensor_products import linalg_cross, linalg_vander as _vander, multi_dot
from ._core import autocast as _amp
from ._core import complex as _complex
from ._core import out_arg as _out_arg
from ._core.arg_forms import numpy_forms as _numpy_forms
from ._core.autograd import needs_grad as _needs_grad
from ._core import tensor_solve as _solve
from ._core.tensor_solve import LinAlgError, det, matrix_exp, matrix_power, solve_triangular
from ._core import tensor_decomp as _decomp
from ._core.creation import where as _where
from ._core.return_types import LinalgSignLogAbsDet as SignLogAbsDet
from ._core.tensor_decomp import (linalg_svd as svd, linalg_svdvals as svdvals, linalg_qr as qr,  # noqa: F401
                                  linalg_eigh as eigh, linalg_eigvalsh as eigvalsh, linalg_pinv as pinv,
                                  linalg_matrix_rank as matrix_rank, linalg_lstsq as lstsq)
from ._core.tensor_decomp_lu import (linalg_lu as lu, linalg_lu_factor as lu_factor,  # noqa: F401
                                     linalg_lu_factor_ex as lu_factor_ex, linalg_lu_solve as lu_solve,
                                     householder_product, linalg_ldl_factor as ldl_factor,
                                     linalg_ldl_factor_ex as ldl_factor_ex, linalg_ldl_solve as ldl_solve)

__all__ = ["vector_norm", "matrix_norm", "norm", "matmul", "multi_dot", "vecdot", "cross", "det", "slogdet", "inv",
           "inv_ex", "solve", "solve_ex", "solve_triangular", "matrix_power", "cholesky", "cholesky_ex", "diagonal",
           "vander", "matrix_exp", "tensorinv", "tensorsolve", "LinAlgError", "svd", "svdvals", "qr", "eigh",
           "eigvalsh", "pinv", "matrix_rank", "cond", "lstsq", "lu_factor", "lu_factor_ex", "lu", "lu_solve",
           "householder_product", "ldl_factor", "ldl_factor_ex", "ldl_solve", "eig", "eigvals"]

cross = linalg_cross
InvEx = collections.namedtuple("linalg_inv_ex", ["inverse", "info"])
SolveEx = collections.namedtuple("linalg_solve_ex", ["result", "info"])
CholeskyEx = collections.namedtuple("linalg_cholesky_ex", ["L", "info"])


def _magnitudes(x, op, ord=None):
    """A complex input as its elementwise |x| (vector norms, and the matrix norms of sums, depend on nothing else:
    torchaudio's Frechet distance takes one); other inputs as they are."""
    if isinstance(x, _C.TensorBase) or not getattr(type(x), "_tensor_like", False) or not x.is_complex():
        return x
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"linalg.{op}: ord={ord!r} of a complex matrix needs its singular values, which "
                                  f"gpumemnet does not compute for complex tensors")
    return x.abs()


def _tensor(x, op):
    if not isinstance(x, _C.TensorBase):
        raise TypeError(f"linalg.{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if not x.is_floating_point():
        raise RuntimeError(f"linalg.{op}: Expected a floating point tensor as input. Got {x.dtype}")


@_numpy_forms  # axis= / keepdims=, as PyTorch's parser takes them (POT's sinkhorn passes keepdims)
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """(sum |x|^ord)^(1/ord) over dim (every entry by default); inf / -inf: the largest / smallest |x|; 0: the
    count of nonzero entries."""
    x = _magnitudes(x, "vector_norm", None)
    _tensor(x, "vector_norm")
    if not isinstance(ord, numbers.Real) or isinstance(ord, bool):
        raise TypeError(f"linalg.vector_norm: ord must be a number, got {type(ord).__name__}")
    x = x if dtype is None else x.to(dtype)
    if dim is None and not keepdim:
        return x.reshape(-1).norm(ord, 0)
    if dim is None:
        dim = tuple(range(x.ndim))
    return x.norm(ord, dim, keepdim)


@_numpy_forms  # axis= / keepdims=, as PyTorch's parser takes them (POT's sinkhorn passes keepdims)
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm over the two dims: 'fro' (Frobenius), 'nuc' (sum of the singular values), 2 / -2 (largest /
    smallest singular value; the SVD is computed on the host), 1 / -1 (largest / smallest column sum of |A|),
    inf / -inf (largest / smallest row sum)."""
    A = _magnitudes(A, "matrix_norm", ord)
    _tensor(A, "matrix_norm")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    A = A if dtype is None else A.to(dtype)
    d0, d1 = (d % A.ndim for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return A.norm(2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        return _decomp.svd_norm(A, ord, (d0, d1), keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        over, across = (d0, d1) if ord in (1, -1) else (d1, d0)  # sum down the columns (1) or along rows (inf)
        sums = A.abs().sum(over, keepdim=True)
        out = sums.amax(across, keepdim=True) if ord > 0 else sums.amin(across, keepdim=True)
        return out if keepdim else out.reshape(tuple(n for i, n in enumerate(out.shape) if i not in (d0, d1)))
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


@_numpy_forms  # axis= / keepdims=, as PyTorch's parser takes them (POT's sinkhorn passes keepdims)
def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """vector_norm or matrix_norm as torch.linalg.norm chooses: ord=None is the 2-norm of the flattened input
    (or over dim); an ord with a 2-D input, or with two dims, is a matrix norm."""
    A = _magnitudes(A, "norm", None)
    _tensor(A, "norm")
    if isinstance(dim, numbers.Integral):
        dim = (dim,)
    if ord is None:
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if (dim is not None and len(dim) == 2) or (dim is None and A.ndim == 2):
        return matrix_norm(A, ord, dim if dim is not None else (-2, -1), keepdim, dtype=dtype)
    if dim is None and A.ndim != 1:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{A.ndim}D.")
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord {ord!r} is a matrix norm; give two dims")
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)


def vecdot(x, y, *, dim=-1):
    """The dot product of x and y along dim, broadcasting the other dims (sum of x * y for real tensors)."""
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"linalg.vecdot(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if not x.is_floating_point():  # PyTorch's error type
        raise NotImplementedError(f"linalg.vecdot: Expected a floating point or complex tensor as input. Got "
                                  f"{str(x.dtype).rsplit('.', 1)[-1]}")
    lowered = _amp._state.enabled
    if lowered:  # on autocast's lower-precision lists (CPU and CUDA), cast before the dtypes are compared
        x, y = _amp.lower(x, y)
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{str(x.dtype).rsplit('.', 1)[-1]} and y of type {str(y.dtype).rsplit('.', 1)[-1]} instead")
    out = (x * y).sum(dim)
    return out.to(x.dtype) if lowered and out.dtype != x.dtype else out  # (the sum would widen it back)


def slogdet(A):
    """(sign, log |det|) of each square matrix of A; (0, -inf) for a singular one."""
    return SignLogAbsDet(*_solve.slogdet(A))


def inv(A):
    """The inverse of each square matrix of A; LinAlgError (a RuntimeError) for a singular one."""
    return _solve.inverse(A)


def inv_ex(A, *, check_errors=False):
    """(inverse, info): info (int32, per matrix) is 0, or k where the k-th pivot was 0 (a singular matrix, whose
    'inverse' is then not meaningful); check_errors=True raises LinAlgError instead, as inv does."""
    if check_errors:
        return InvEx(inv(A), _solve.info(A))
    X, info = _solve.inverse_unchecked(A)
    return InvEx(X, info)


def solve(A, B, *, left=True):
    """X with A X = B (left=False: X A = B); B a vector (..., n) or matrices (..., n, k), batches broadcast."""
    return _solve.solve(A, B, left=left)


def solve_ex(A, B, *, left=True, check_errors=False):
    """(result, info) as inv_ex: info is 0, or the index of the zero pivot of a singular A."""
    X = _solve.solve(A, B, left=left, check=check_errors)
    return SolveEx(X, _solve.info(A))


def cholesky(A, *, upper=False):
    """L (lower triangular, positive diagonal) with A = L L^T, from A's lower triangle; upper=True: L^T.
    LinAlgError (a RuntimeError) where A is not positive-definite."""
    return _solve.cholesky(A, upper=upper)[0]


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info): info (int32, per matrix) is 0, or the order of the first leading minor that is not
    positive-definite (L is then not meaningful); check_errors=True raises as cholesky does."""
    return CholeskyEx(*_solve.cholesky(A, upper=upper, check=check_errors, op="linalg.cholesky_ex"))


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """A.diagonal(offset, dim1, dim2), with linalg's defaults: the diagonals of the last two dims (a view)."""
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"linalg.diagonal(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:  # PyTorch's type: dim1=-2 is out of range
        raise IndexError(f"linalg.diagonal: Dimension out of range: A of shape {tuple(A.shape)} has no dims "
                         f"{dim1} and {dim2} (it needs at least 2 dimensions)")
    return A.diagonal(offset, dim1, dim2)


def vander(x, *, N=None):
    """The Vandermonde matrices of x's last dim: powers x^0 ... x^(N-1) in a new last dim (N defaults to the
    size of x's last dim; it must be at least 2). Integers give int64."""
    return _vander(x, N)


def tensorinv(A, ind=2):
    """The tensor inverse of A over its first ind dims: inv of A as a (prod(A.shape[:ind]), prod(A.shape[ind:]))
    matrix, shaped A.shape[ind:] + A.shape[:ind]."""
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"linalg.tensorinv(): argument 'A' must be Tensor, not {type(A).__name__}")
    if not isinstance(ind, numbers.Integral) or isinstance(ind, bool) or ind <= 0:
        raise RuntimeError(f"linalg.tensorinv: Expected a strictly positive integer for 'ind', but got {ind}")
    front, back = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    rows, cols = math.prod(front), math.prod(back)
    if rows != cols:
        raise RuntimeError(f"linalg.tensorinv: Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows} (shape {tuple(A.shape)}, ind={ind})")
    return _solve.inverse(A.reshape(rows, cols)).reshape(back + front)


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B: A's first B.ndim dims pair with B, the rest are X's shape (dims: A's
    dims moved to the end first)."""
    for name, t in (("A", A), ("B", B)):
        if not isinstance(t, _C.TensorBase):
            raise TypeError(f"linalg.tensorsolve(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if dims is not None:
        moved = [d % A.ndim for d in dims]
        A = A.permute(tuple(d for d in range(A.ndim) if d not in moved) + tuple(moved))
    x_shape = tuple(A.shape[B.ndim:])
    rows, cols = math.prod(A.shape[:B.ndim]), math.prod(x_shape)
    if rows != cols:
        raise RuntimeError(f"linalg.tensorsolve: Expected self to satisfy the requirement "
                           f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got {cols} != {rows} "
                           f"(A {tuple(A.shape)}, B {tuple(B.shape)})")
    if B.numel() != rows:
        raise RuntimeError(f"linalg.tensorsolve: B of shape {tuple(B.shape)} does not match A's leading dims "
                           f"{tuple(A.shape[:B.ndim])}")
    return _solve.solve(A.reshape(rows, cols), B.reshape(rows)).reshape(x_shape)


def cond(A, p=None):
    """The condition number of each matrix: p None / 2 / -2 the ratio of the largest and smallest singular values
    (any shape; NaN for a zero matrix); 'fro', 'nuc', 1, -1, inf, -inf: norm(A) * norm(inv(A)) of square
    matrices, inf for a singular one ('nuc': sum(S) * sum(1 / S), as PyTorch computes it)."""
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"linalg_cond(): argument 'input' must be Tensor, not {type(A).__name__}")
    A, = _solve._widen(A)  # (on CPU autocast's float32 list)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.cond: The input tensor must have at least 2 dimensions, got shape "
                           f"{tuple(A.shape)}")
    if p is None or (not isinstance(p, (str, bool)) and p in (2, -2)):
        S = svdvals(A)
        if S.shape[-1] == 0:  # PyTorch's for empty matrices: 0
            return S.sum(-1)
        big, small = S.narrow(-1, 0, 1).squeeze(-1), S.narrow(-1, S.shape[-1] - 1, 1).squeeze(-1)
        return small / big if p == -2 else big / small
    if p not in ("fro", "nuc", 1, -1, math.inf, -math.inf) or isinstance(p, bool):
        raise ValueError(f"linalg.cond got an invalid norm type: {p}")
    _decomp.check_matrices(A, f"linalg.cond(ord={p})", square=True)
    if A.shape[-1] == 0:
        return A.sum((-2, -1))
    if p == "nuc":  # PyTorch's: through the singular values, sum(S) * sum(1 / S) (NaN for a zero matrix)
        S = svdvals(A)
        return S.sum(-1) * (1.0 / S).sum(-1)
    X, info = inv_ex(A)
    out = matrix_norm(A, p) * matrix_norm(X, p)
    return _where(info > 0, math.inf, out)


# ---- eigenvalues of general matrices, low-rank factorisations ----------------------------------------------------
EigResult = collections.namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])


def _eig_host(A, op):
    """NumPy's (LAPACK geev's, which PyTorch's CPU kernel calls too) eigen-decomposition of each square matrix of
    A, as (values, vectors) NumPy complex arrays. Forward only: gradients through eig are not implemented here,
    so a graph input is refused rather than handing back results that would silently drop its gradient."""
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"linalg_{op}(): argument 'input' (position 1) must be Tensor, not {type(A).__name__}")
    A, = _solve._widen(A)
    _decomp.check_matrices(A, f"linalg.{op}", square=True, kernel="linalg_eig_out_cpu", fn=f"linalg_{op}")
    if _needs_grad(A):
        raise NotImplementedError(f"linalg.{op}: gradients through a general eigen-decomposition are not "
                                  f"implemented in gpumemnet; call it on A.detach() (symmetric matrices: "
                                  f"linalg.eigh, which is differentiable)")
    if A._device == "meta":
        raise NotImplementedError(f"linalg.{op}: its result's dtype and values come from LAPACK on the host; "
                                  f"not available on meta tensors")
    return np.linalg.eig(_decomp.host(A)), A


def _complex_tensor(values, like):
    """A NumPy complex array as a complex tensor of like's precision on like's device."""
    return _complex.view_as_complex(_decomp.back(np.stack([values.real, values.imag], -1), like))


def eig(A):
    """(eigenvalues, eigenvectors) of each square matrix of A, complex (complex64 for float32 input, complex128
    for float64), in LAPACK's order, each eigenvector of norm 1 (PyTorch's CPU results)."""
    (w, v), A = _eig_host(A, "eig")
    return EigResult(_complex_tensor(w, A), _complex_tensor(v, A))


def eigvals(A):
    """The eigenvalues of each square matrix of A (complex), in linalg.eig's order."""
    (w, _), A = _eig_host(A, "eigvals")
    return _complex_tensor(w, A)


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) of A - M truncated to q singular values (at most min(m, n)): A - M ~ U diag(S) V^T, U (*, m, q),
    V (*, n, q).
    PyTorch approximates them by randomized subspace iteration (niter steps, from a random start); this computes
    the truncated SVD exactly (niter has no effect), which is what that iteration converges to and what
    PyTorch's results equal (up to each pair's sign) whenever A - M has rank at most q."""
    _tensor(A, "svd_lowrank")
    if A.ndim < 2:
        raise ValueError(f"svd_lowrank: A must have at least 2 dimensions, got shape {tuple(A.shape)}")
    q = min(6 if q is None else int(q), A.shape[-2], A.shape[-1])  # PyTorch's: at most min(m, n)
    X = A if M is None else A - M
    U, S, Vh = svd(X, full_matrices=False)
    return U[..., :q], S[..., :q], Vh[..., :q, :].mT


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V) of the principal components of A (*, m, n), rows the samples: svd_lowrank of A less its column
    means (center=True), q = min(6, m, n) by default."""
    _tensor(A, "pca_lowrank")
    if A.ndim < 2:
        raise ValueError(f"pca_lowrank: A must have at least 2 dimensions, got shape {tuple(A.shape)}")
    m, n = A.shape[-2], A.shape[-1]
    q = min(6, m, n) if q is None else q
    if not isinstance(q, int) or isinstance(q, bool) or not 0 <= q <= min(m, n):
        raise ValueError(f"pca_lowrank: q(={q}) must be non-negative integer and not greater than min(m, n)="
                         f"{min(m, n)}")
    if not isinstance(niter, int) or niter < 0:
        raise ValueError(f"pca_lowrank: niter(={niter}) must be non-negative integer")
    return svd_lowrank(A - A.mean(-2, keepdim=True) if center else A, q, niter)


# torch.linalg's functions that take out= (linear_operator calls cholesky_ex(A, out=None)): computed as without it,
# then written into out (_core/out_arg.py, PyTorch's checks and resize)
for _name in ("vector_norm matrix_norm norm matmul multi_dot vecdot cross det slogdet inv inv_ex solve solve_ex "
              "solve_triangular cholesky cholesky_ex matrix_power tensorinv tensorsolve svd svdvals qr eigh eigvalsh "
              "eig eigvals pinv matrix_rank cond lu_factor lu_factor_ex lu lu_solve householder_product ldl_factor "
              "ldl_factor_ex ldl_solve").split():
    globals()[_name] = _out_arg._with_out(f"linalg_{_name}", globals()[_name], False)
del _name
