"""Containers: Sequential, ModuleList, ModuleDict — the module trees whose names ("features.0.weight") match
PyTorch's for the same structure, so that state_dicts and reports line up."""
import operator
import sys
from collections import OrderedDict

from ..._core.state import grad_mode
from . import _donation
from .module import Module, _addindent, _global_hooks, _global_pre_hooks

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


def _index(idx, n, what):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a {what} of length {n}")
    return idx % n


class Sequential(Module):
    """Sequential(*modules) or Sequential(OrderedDict(name=module)): calls them in order."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[_index(idx, len(self), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, list(self._modules.keys())[_index(idx, len(self), "Sequential")])
        # PyTorch numbers what is left 0, 1, ... (named children too: their state_dict keys change)
        mods = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def pop(self, key):
        """The module at index `key`, removed (the rest renumbered), as PyTorch's."""
        v = self[key]
        del self[key]
        return v

    def __add__(self, other):
        """A new Sequential of self's modules then other's (PyTorch's; other must be a Sequential)."""
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return self.extend(list(other))

    def __mul__(self, other):
        """self's modules repeated other times (the same module objects, as PyTorch's)."""
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        return Sequential(*(list(self) * other))

    __rmul__ = __mul__

    def __imul__(self, other):
        return self.extend(list(self) * (other - 1)) if isinstance(other, int) and other > 0 else self.__mul__(other)

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise TypeError(f"module should be of type Module, got {type(module).__name__}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"index {index} is out of range for insertion into a Sequential of length {n}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)
        return self

    def forward(self, input):
        modules = iter(self._modules.values())
        hooks = (_global_pre_hooks, _global_hooks)
        # The first child reads the caller's input, which the caller may still hold, unless this Sequential is
        # itself the child of one that handed that input over (torchvision's ConvNormActivation in a block).
        handed = _donation.granted(input)
        for module in modules:
            granted = handed and _donation.may_overwrite(module, input, hooks)
            input = _granted_call(module, input) if granted else module(input)
            break
        if grad_mode.get():
            for module in modules:
                input = module(input)
            return input
        # no_grad: a child may write over an intermediate that nothing else holds (_donation.py says when)
        for module in modules:
            # counted before the call below puts input on the stack once more
            grant = sys.getrefcount(input) == _donation.SOLE_LOCAL_REFS and \
                _donation.may_overwrite(module, input, hooks)
            input = _granted_call(module, input) if grant else module(input)
        return input

    _may_overwrite_input = forward  # reads its input once, by its first child (a grant: _donation.py)


def _granted_call(module, input):
    """module(input), with input handed over to be overwritten (_donation.py); a plain call costs no frame more."""
    _donation.grant(input)
    try:
        return module(input)
    finally:
        _donation.revoke()


class ModuleList(Module):
    """A list of modules, registered (so their parameters are seen) but not called in any order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self))[idx]:
                del self._modules[str(k)]
        else:
            del self._modules[str(_index(idx, len(self), "ModuleList"))]
        mods = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def pop(self, key):
        """The module at index `key`, removed (the rest renumbered), as PyTorch's."""
        v = self[key]
        del self[key]
        return v

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got "
                            f"{type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList is not callable: iterate over it in your module's forward")

    def __repr__(self):
        # PyTorch's compact form: runs of identical entries print once, as "(0-2): 3 x Linear(...)"
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2) for a, b, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class KeyedSlots:
    """The dict protocol of ModuleDict and ParameterDict over the module's own registry (_SLOTS: "_modules" or
    "_parameters"); __setitem__, which registers, is each class's own."""
    _SLOTS = None

    def _slots(self):
        return getattr(self, self._SLOTS)

    def __getitem__(self, key):
        return self._slots()[key]

    def __delitem__(self, key):
        del self._slots()[key]

    def __len__(self):
        return len(self._slots())

    def __iter__(self):
        return iter(self._slots())

    def __contains__(self, key):
        return key in self._slots()

    def keys(self):
        return self._slots().keys()

    def items(self):
        return self._slots().items()

    def values(self):
        return self._slots().values()

    def get(self, key, default=None):
        return self._slots().get(key, default)

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def clear(self):
        self._slots().clear()

    def update(self, pairs):
        items = pairs.items() if hasattr(pairs, "items") else pairs
        for j, kv in enumerate(items):
            if len(kv) != 2:
                raise ValueError(f"{type(self).__name__} update sequence element #{j} has length {len(kv)}; 2 is "
                                 f"required")
            self[kv[0]] = kv[1]


class ModuleDict(KeyedSlots, Module):
    """An ordered dict of modules, registered under their keys."""
    _SLOTS = "_modules"

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict is not callable: look modules up by key in your module's forward")
