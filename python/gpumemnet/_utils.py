"""torch._utils: the two helpers of PyTorch's private module that libraries import (fastai's fp16_utils): flatten a
list of tensors into one, and cut such a flat tensor back into views shaped like the originals."""
from ._core.creation import cat
from ._core.tensor import Tensor

__all__ = []


def _flatten_dense_tensors(tensors):
    """One 1-D tensor holding the tensors' elements in order (PyTorch's: their cat, with type promotion); a single
    tensor gives a view of it."""
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    if len(tensors) == 1:
        return tensors[0].contiguous().view(-1)
    return cat([t.contiguous().view(-1) for t in tensors])


def _unflatten_dense_tensors(flat, tensors):
    """Views of flat, in order, each shaped like the tensor of `tensors` in its place (a tuple)."""
    outputs, offset = [], 0
    for t in tensors:
        n = t.numel()
        outputs.append(flat.narrow(0, offset, n).view_as(t))
        offset += n
    return tuple(outputs)
