"""torch.autograd.Variable, for code written before PyTorch 0.4 merged it into Tensor. Variable(data) is data's
values as a new leaf (the same memory, detached from any graph), with requires_grad as given; every tensor is an
instance of Variable, as in PyTorch."""
import warnings

from .._core.creation import empty
from .._core.tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if data is None:
            data = empty(0)
        elif not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(bool(requires_grad))
