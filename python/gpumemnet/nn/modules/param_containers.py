"""ParameterList and ParameterDict: parameters held in a list or a dict, registered under "0", "1", ... or their
keys, so state_dicts and optimizers see them as PyTorch's do. A plain tensor put in one becomes a Parameter."""
import collections
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
        return _entries_repr(self)


def _entries_repr(container, type_names=False):
    """PyTorch's lines for each entry, indented as its are: `  (key): Parameter containing: [torch.float32 of size
    2x3]` (and the device, on CUDA); ParameterDict names the legacy type instead (torch.FloatTensor)."""
    lines = []
    for k, p in container._parameters.items():
        device = f" ({p.device})" if p.device.type == "cuda" and not type_names else ""
        kind = p.type() if type_names else p.dtype
        lines.append(f"  ({k}): Parameter containing: [{kind} of size {'x'.join(map(str, p.shape))}{device}]")
    return "\n".join(lines)


class ParameterDict(KeyedSlots, Module):
    _SLOTS = "_parameters"

    def extra_repr(self):
        return _entries_repr(self, type_names=True)

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def update(self, parameters):
        """PyTorch's order: an OrderedDict or ParameterDict in its own order, any other mapping sorted by key (so
        parameters(), and the optimizer state indexed by it, come in the order PyTorch's would)."""
        if hasattr(parameters, "items") and not isinstance(parameters, (collections.OrderedDict, ParameterDict)):
            parameters = sorted(parameters.items())
        super().update(parameters)

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_parameter(value))
