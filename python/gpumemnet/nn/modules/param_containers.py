"""ParameterList and ParameterDict: parameters held in a list or a dict, registered under "0", "1", ... or their
keys, so state_dicts and optimizers see them as PyTorch's do. A plain tensor put in one becomes a Parameter; other
objects are kept as they are (PyTorch's since 1.12)."""
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


class ParameterDict(Module):
    """PyTorch's: entry `key` is the attribute `key` (a Parameter registered as one, a module as a submodule, any
    other object kept as a plain attribute, as PyTorch's accepts since 1.12), in the order the keys came."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def extra_repr(self):
        return _entries_repr(self, type_names=True, entries=list(self.items()))

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        key = next(reversed(self))  # the last one, as dict.popitem
        return key, self.pop(key)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def copy(self):
        return ParameterDict(collections.OrderedDict(self.items()))

    def fromkeys(self, keys, default=None):
        return ParameterDict(collections.OrderedDict((k, default) for k in keys))

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = ParameterDict(other)
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self

    def update(self, parameters):
        """PyTorch's order: an OrderedDict or ParameterDict in its own order, any other mapping sorted by key (so
        parameters(), and the optimizer state indexed by it, come in the order PyTorch's would); a sequence of
        (key, value) pairs in its order."""
        if hasattr(parameters, "items") and not isinstance(parameters, (collections.OrderedDict, ParameterDict)):
            parameters = sorted(parameters.items())
        KeyedSlots.update(self, parameters)  # ModuleDict's: each pair checked, then self[key] = value
