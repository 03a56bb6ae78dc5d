"""Helpers shared by the layers: PyTorch's argument forms (_pair) and parameter/buffer creation with the
factory arguments device= and dtype= (device="meta" builds a model without touching a byte of data)."""
import collections.abc

from ..._core.autograd import is_graph_view
from ..._core.indexing import graph_view_writable
from .._args import check_reduction  # noqa: F401  (the layers' losses take it from here)
from ..parameter import new_tensor  # noqa: F401  (the layers take it from here)
from ._donation import granted


def _inplace(module, input):
    """Whether a layer built with inplace=True writes into this input. Into a view of a tensor in a graph too
    (d2l's `nn.ReLU(inplace=True)(y)` on a reshape, its result not re-bound: the caller reads y), where the write
    can be recorded on the viewed tensor (_core/indexing.py graph_view_writable); where it cannot (a view of a
    non-contiguous tensor that is still alive), the layer computes out of place: layers hand on what they return,
    so the network computes the same and only the memory PyTorch would have saved is spent. A Sequential under
    no_grad may also grant an intermediate nothing else holds (_donation.py)."""
    return (module.inplace or granted(input)) and (not is_graph_view(input) or graph_view_writable(input))


def _pair(x, name="argument"):
    if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
        t = tuple(x)
        if len(t) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {x!r}")
        return t
    return (x, x)


