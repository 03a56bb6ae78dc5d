"""torch._utils: the helpers of PyTorch's private module that libraries import: flatten a list of tensors into one,
and cut such a flat tensor back into views shaped like the originals (fastai's fp16_utils); group tensors into
buckets of one type under a size (mmengine's coalesced all-reduce)."""
from collections import defaultdict

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


def _take_tensors(tensors, size_limit):
    """Lists of the tensors, in order within each (dtype, device), each list at most size_limit bytes (a tensor
    larger than that alone): PyTorch's buckets for coalesced communication (a generator, as PyTorch's)."""
    buckets = defaultdict(lambda: ([], [0]))
    for t in tensors:
        held, size = buckets[(t.dtype, t.device)]
        nbytes = t.numel() * t.element_size()
        if held and size[0] + nbytes > size_limit:
            yield held
            held, size = buckets[(t.dtype, t.device)] = ([], [0])
        held.append(t)
        size[0] += nbytes
    for held, _ in buckets.values():
        if held:
            yield held
