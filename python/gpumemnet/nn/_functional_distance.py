"""normalize and cosine_similarity (embedding heads, metric learning, SimCLR-style losses), composed of the core's
differentiable ops as PyTorch composes them, so that every device, meta and the gradients follow."""
from .._core.activation import _check_tensor
from .._core.creation_more import broadcast_tensors
from .._core.tensor_misc import promote_types


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p over dim, eps) (PyTorch's formula: the norm clamped, then divided by)."""
    _check_tensor(input, "normalize")
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported; use the returned tensor")
    return input / input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum over dim of (x1 / max(||x1||, eps)) (x2 / max(||x2||, eps)), x1 and x2 broadcast together: PyTorch's
    formula, each side divided by its own clamped norm."""
    _check_tensor(x1, "cosine_similarity", "x1")
    _check_tensor(x2, "cosine_similarity", "x2")
    common = promote_types(x1.dtype, x2.dtype)  # computed in it (a one-hot int64 x2: FocalCosineLoss)
    if not common.is_floating_point:
        raise RuntimeError(f"cosine_similarity: expected common dtype to be floating point, yet common dtype is "
                           f"{common} (x1 {x1.dtype}, x2 {x2.dtype})")
    if x1.dtype != x2.dtype:
        x1, x2 = x1.to(common), x2.to(common)
    if x1.shape != x2.shape:  # broadcast first: each norm runs over the dim both sides have after it
        x1, x2 = broadcast_tensors(x1, x2)
    n1 = x1.norm(2, dim, keepdim=True).clamp_min(eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)
