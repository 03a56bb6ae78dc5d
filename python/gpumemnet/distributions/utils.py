"""torch.distributions.utils: argument broadcasting and the probs <-> logits conversions."""
from numbers import Number

from . import _ops as T

euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant (PyTorch's utils.euler_constant)

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits",
           "tril_matrix_to_vec", "vec_to_tril_matrix"]


def broadcast_all(*values):
    """The values broadcast to one shape: numbers become tensors of the first tensor's dtype and device (of the
    default dtype when all are numbers)."""
    if not all(isinstance(v, (T.Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or gpumemnet/torch Tensor, got "
                         + ", ".join(type(v).__name__ for v in values))
    if not all(isinstance(v, T.Tensor) for v in values):
        options = {"dtype": T.get_default_dtype()}
        for v in values:
            if isinstance(v, T.Tensor):
                options = {"dtype": v.dtype, "device": v.device}
                break
        values = [v if isinstance(v, T.Tensor) else T.tensor(v, **options) for v in values]
    return T.broadcast_tensors(*values)


def _standard_normal(shape, dtype, device):
    return T.randn(tuple(shape), dtype=dtype, device=device)


def _sum_rightmost(value, dim):
    """value summed over its dim rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


def _xlogy(x, y):
    """x * log(y), 0 where x is 0, with PyTorch's gradients (gm.xlogy's own)."""
    return T.xlogy(x, y)


def expand_probs_or_logits(new, old, batch_shape):
    """expand()'s part shared by the distributions parameterised by probs or logits: whichever of the two old
    holds (the other is a lazy property not read yet, so not in its __dict__), expanded, and _param on it."""
    if "probs" in old.__dict__:
        new.probs = old.probs.expand(batch_shape)
        new._param = new.probs
    if "logits" in old.__dict__:
        new.logits = old.logits.expand(batch_shape)
        new._param = new.logits


def logits_to_probs(logits, is_binary=False):
    """Probabilities from logits: sigmoid (binary) or softmax over the last dimension."""
    if is_binary:
        return T.sigmoid(logits)
    return T.softmax(logits, dim=-1)


def clamp_probs(probs):
    """probs clamped into [eps, 1 - eps] of their dtype (finite logits)."""
    eps = T.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Logits from probabilities (clamped first, so the result is finite)."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return T.log(ps_clamped) - T.log1p(-ps_clamped)
    return T.log(ps_clamped)


class lazy_property:
    """A property computed on first use and then stored on the instance (under enable_grad, so a cached logits
    keeps its graph)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with T.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _tril_positions(n, diag):
    """The flat positions (row-major) of the entries of an n x n matrix on or below diagonal diag."""
    return [i * n + j for i in range(n) for j in range(n) if j < i + diag + 1]


def vec_to_tril_matrix(vec, diag=0):
    """A (batch of) vector(s) laid out row by row into the lower triangle (below diagonal diag) of D x D
    matrices, zeros elsewhere."""
    m = vec.shape[-1]
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * m + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if abs(round(n) - n) > 1e-6:
        raise ValueError(f"The size of last dimension is {m} which cannot be expressed as the lower triangular part "
                         "of a square D x D matrix.")
    n = round(n)
    # gather from the vector with a zero in front: every position outside the triangle reads that zero
    source = {p: k + 1 for k, p in enumerate(_tril_positions(n, diag))}
    index = T.tensor([source.get(p, 0) for p in range(n * n)], dtype=T.int64, device=vec.device)
    padded = T.cat([T.zeros(tuple(vec.shape[:-1]) + (1,), dtype=vec.dtype, device=vec.device), vec], -1)
    return padded.index_select(-1, index).reshape(tuple(vec.shape[:-1]) + (n, n))


def tril_matrix_to_vec(mat, diag=0):
    """The entries of the lower triangle (below diagonal diag) of (batches of) square matrices, row by row."""
    n = mat.shape[-1]
    if mat.shape[-2] != n:
        raise ValueError(f"tril_matrix_to_vec: expected square matrices, got shape {tuple(mat.shape)}")
    index = T.tensor(_tril_positions(n, diag), dtype=T.int64, device=mat.device)
    return mat.reshape(tuple(mat.shape[:-2]) + (n * n,)).index_select(-1, index)
