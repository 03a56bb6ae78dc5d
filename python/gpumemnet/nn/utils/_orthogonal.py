"""parametrizations.orthogonal: a matrix (or a batch of them) kept orthogonal (or with orthonormal columns / rows
when not square), as torch.nn.utils.parametrizations.orthogonal, through one of PyTorch's three maps of an
unconstrained matrix X: "matrix_exp" (exp of the skew-symmetric part of X), "cayley" ((I - A/2)^-1 (I + A/2)) or
"householder" (a product of reflections whose vectors are X's strict lower triangle). With use_trivialization
(the default) the result is base @ map(X), base an orthogonal buffer set when a value is assigned, and X starts
at -I, where the map is I.

The matrix exponential and the Householder product are written here from matmuls, so autograd differentiates
them and they run on every device; the QR factorisation that makes an assigned non-orthogonal matrix orthogonal
runs on the host in NumPy (LAPACK's geqrf, as PyTorch's), under no_grad, once per assignment."""
import enum

import numpy as np

from ... import _C
from ... import linalg
from ..._core import creation
from ..._core.autograd import no_grad
from ..._core.dtype import finfo
from ..._core.tensor_solve import matrix_exp
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal"]


def _eye_like(x, n, k=None):
    return creation.eye(n, n if k is None else k, dtype=x.dtype, device=x.device)


def _householder_product(a, tau):
    """The first n columns of H_1 ... H_k for a (..., m, n) with the reflection vectors below its diagonal
    (implicit unit diagonal) and tau (..., k): H_i = I - tau_i v_i v_i^T (LAPACK's orgqr, torch's
    linalg.householder_product)."""
    m, n = a.shape[-2], a.shape[-1]
    k = tau.shape[-1]
    v = a.tril(-1) + _eye_like(a, m, n)
    q = _eye_like(a, m, n).expand(*a.shape[:-2], m, n) if a.ndim > 2 else _eye_like(a, m, n)
    for i in range(k - 1, -1, -1):  # q = H_i q, the last reflection applied first
        vi = v[..., :, i:i + 1]
        q = q - (tau[..., i:i + 1].unsqueeze(-1) * vi).matmul(vi.mT.matmul(q))
    return q


def _host(t):
    return t.detach().cpu().numpy()


def _from_host(arr, like):
    return creation.tensor(np.asarray(arr, order="C"), dtype=like.dtype, device=like.device)


def _qr_batch(x, fn):
    """fn applied to each matrix of x (..., m, n) on the host; the results stacked back into x's batch shape."""
    arr = _host(x)
    flat = arr.reshape((-1,) + arr.shape[-2:])
    outs = [fn(m) for m in flat]
    return [np.stack([o[j] for o in outs]).reshape(arr.shape[:-2] + outs[0][j].shape) for j in range(len(outs[0]))]


def _make_orthogonal(a):
    """The Q of a = QR with R's diagonal made non-negative (Q's columns times sgn(R_ii)), as PyTorch's."""
    if a._device == "meta":
        return a.clone()

    def one(m):
        q, r = np.linalg.qr(m)
        return (q * np.sign(np.diagonal(r))[None, :],)
    return _from_host(_qr_batch(a, one)[0], a)


def _is_orthogonal(q):
    if q._device == "meta":
        return True
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * finfo(q.dtype).eps
    return bool((q.mT.matmul(q) - _eye_like(q, k)).abs().le(eps).all())


class _OrthMaps(enum.Enum):
    matrix_exp = enum.auto()
    cayley = enum.auto()
    householder = enum.auto()


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                pad = creation.zeros(*X.shape[:-2], n, n - k, dtype=X.dtype, device=X.device)
                X = creation.cat([X, pad], -1)
            A = X - X.mT
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:
                eye = _eye_like(A, n)
                Q = linalg.solve(eye - A * 0.5, eye + A * 0.5)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base.matmul(Q)
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        with no_grad():
            if tuple(Q.shape) != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of "
                                 f"shape {tuple(Q.shape)}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the "
                                              "Cayley parametrizations when use_trivialization=False.")
                return self._householder_inverse(Q, transpose)
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                N = creation.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(creation.cat([Q, N], -1))
            Q._category = "parameter"  # model state (a buffer), as BatchNorm's running statistics
            self.base = Q
            r, c = Q_init.shape[-2], Q_init.shape[-1]
            return creation.zeros(*Q_init.shape, dtype=Q_init.dtype, device=Q_init.device) - \
                _eye_like(Q_init, r, c)

    @staticmethod
    def _householder_inverse(Q, transpose):
        """geqrf(Q)'s compact reflectors with the diagonal set to the signs PyTorch's forward multiplies by."""
        if Q._device == "meta":
            A = Q.clone()
            return A.mT if transpose else A

        def one(m):
            h, tau = np.linalg.qr(m, mode="raw")  # LAPACK geqrf: h is the factor transposed
            a = h.T.copy()
            d = np.sign(np.diagonal(a)).copy()
            d[: tau.shape[0]][tau == 0.0] *= -1
            np.fill_diagonal(a, d)
            return (a,)
        A = _from_host(_qr_batch(Q, one)[0], Q)
        return A.mT if transpose else A


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Keep module.<name> (a matrix or a batch of matrices) orthogonal, as
    torch.nn.utils.parametrizations.orthogonal. orthogonal_map: "matrix_exp" (default for square matrices),
    "cayley" or "householder" (default otherwise)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.TensorBase):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None) if isinstance(orthogonal_map, str) else None
    if orth_enum is None:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: '
                         f"{orthogonal_map}")
    parametrize.register_parametrization(module, name,
                                         _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization),
                                         unsafe=True)
    return module
