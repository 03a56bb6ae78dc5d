"""gm.linalg (layer 2, over _core): torch.linalg's norms, composed of the core's differentiable ops —
vector_norm, matrix_norm ('fro', 1, -1, inf, -inf) and norm. The norms that need a singular value decomposition
('nuc', 2, -2) and the factorisations are not here yet: they raise NotImplementedError saying so."""
import math
import numbers

from . import _C

__all__ = ["vector_norm", "matrix_norm", "norm"]


def _tensor(x, op):
    if not isinstance(x, _C.TensorBase):
        raise TypeError(f"linalg.{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if not x.is_floating_point():
        raise RuntimeError(f"linalg.{op}: Expected a floating point tensor as input. Got {x.dtype}")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """(sum |x|^ord)^(1/ord) over dim (every entry by default); inf / -inf: the largest / smallest |x|; 0: the
    count of nonzero entries."""
    _tensor(x, "vector_norm")
    if not isinstance(ord, numbers.Real) or isinstance(ord, bool):
        raise TypeError(f"linalg.vector_norm: ord must be a number, got {type(ord).__name__}")
    x = x if dtype is None else x.to(dtype)
    if dim is None and not keepdim:
        return x.reshape(-1).norm(ord, 0)
    if dim is None:
        dim = tuple(range(x.ndim))
    return x.norm(ord, dim, keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm over the two dims: 'fro' (Frobenius), 1 / -1 (largest / smallest column sum of |A|), inf /
    -inf (largest / smallest row sum)."""
    _tensor(A, "matrix_norm")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    A = A if dtype is None else A.to(dtype)
    d0, d1 = (d % A.ndim for d in dim)
    if ord == "fro":
        return A.norm(2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs singular values, which gpumemnet does not "
                                  f"compute yet ('fro', 1, -1, inf and -inf are here)")
    if ord in (1, -1, math.inf, -math.inf):
        over, across = (d0, d1) if ord in (1, -1) else (d1, d0)  # sum down the columns (1) or along rows (inf)
        sums = A.abs().sum(over, keepdim=True)
        out = sums.amax(across, keepdim=True) if ord > 0 else sums.amin(across, keepdim=True)
        return out if keepdim else out.reshape(tuple(n for i, n in enumerate(out.shape) if i not in (d0, d1)))
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """vector_norm or matrix_norm as torch.linalg.norm chooses: ord=None is the 2-norm of the flattened input
    (or over dim); an ord with a 2-D input, or with two dims, is a matrix norm."""
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
