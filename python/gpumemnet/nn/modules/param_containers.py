"""ParameterList and ParameterDict: parameters held in a list or a dict, registered under "0", "1", ... or their
keys, so state_dicts and optimizers see them as PyTorch's do. A plain tensor put in one becomes a Parameter."""
import collections
import operator

from ..._core.tensor import Tensor
from ..parameter import Parameter
from .container import KeyedSlots
from .module import Module

__all__ = ["ParameterList", "ParameterDict"]


def _as_parameter(value):
    """A plain tensor becomes a Parameter (PyTorch's rule); a Parameter, a module or any other object is kept."""
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


class ParameterList(Module):
    """PyTorch's: entry i is the attribute "i", so a Parameter is registered as one, a module (a nested
    ParameterList: vit-pytorch's nViT) as a submodule, and anything else kept as a plain attribute."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def _index(self, idx):
        n = len(self)
        i = operator.index(idx)
        if not -n <= i < n:
            raise IndexError(f"index {idx} is out of range")
        return str(i % n)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self)[idx])
        return getattr(self, self._index(idx))

    def __setitem__(self, idx, value):
        setattr(self, self._index(idx), _as_parameter(value))

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def __iadd__(self, values):
        return self.extend(values)

    def extra_repr(self):
        return _entries_repr(self, entries=[(str(i), v) for i, v in enumerate(self)])


def _entries_repr(container, type_names=False, entries=None):
    """PyTorch's lines for each entry, indented as its are: `  (key): Parameter containing: [torch.float32 of size
    2x3]` (and the device, on CUDA); ParameterDict names the legacy type instead (torch.FloatTensor); an entry that
    is no tensor: `  (key): Object of type: Linear`."""
    lines = []
    for k, p in container._parameters.items() if entries is None else entries:
        if not isinstance(p, Tensor):
            lines.append(f"  ({k}): Object of type: {type(p).__name__}")
            continue
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
