"""ParameterList and ParameterDict: parameters held in a list or a dict, registered under "0", "1", ... or their
keys, so state_dicts and optimizers see them as PyTorch's do. A plain tensor put in one becomes a Parameter."""
import operator

from ..parameter import Parameter
from .container import KeyedSlots
from .module import Module

__all__ = ["ParameterList", "ParameterDict"]


def _as_parameter(value):
    return value if value is None or isinstance(value, Parameter) else Parameter(value)


class ParameterList(Module):
    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self)[idx])
        n = len(self)
        i = operator.index(idx)
        if not -n <= i < n:
            raise IndexError(f"index {idx} is out of range")
        return self._parameters[str(i % n)]

    def __setitem__(self, idx, value):
        n = len(self)
        i = operator.index(idx)
        if not -n <= i < n:
            raise IndexError(f"index {idx} is out of range")
        self.register_parameter(str(i % n), _as_parameter(value))

    def append(self, value):
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def __iadd__(self, values):
        return self.extend(values)

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter containing: [{type(p).__name__} of size {'x'.join(map(str, p.shape))}]"
                         for k, p in self._parameters.items())


class ParameterDict(KeyedSlots, Module):
    _SLOTS = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_parameter(value))
