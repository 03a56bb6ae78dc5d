"""gpumemnet.nn.utils.parametrize: a module's parameter or buffer seen through functions of other tensors, as
torch.nn.utils.parametrize: after register_parametrization(m, "weight", P), reading m.weight computes
P(m.parametrizations.weight.original) and assigning m.weight = X stores P.right_inverse(X) in `original`.

As PyTorch does, the module's class is swapped for a generated subclass ("ParametrizedLinear") that carries one
property per parametrized name, and the originals live in m.parametrizations (a ModuleDict of
ParametrizationList), so state_dict keys are PyTorch's ("parametrizations.weight.original", or original0,
original1, ... when right_inverse returns several tensors). The original Parameter object is kept (its data is
replaced in place), so an optimizer built before registration still updates it. cached() computes each
parametrized tensor once inside its block."""
import collections.abc
import contextlib
import copy
import copyreg

from ... import _C
from ..._core.autograd import no_grad
from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations", "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Inside this block each parametrized tensor is computed once, on its first read, and reused (e.g. a weight
    shared by the steps of a recurrent loop); the values are dropped when the outermost block ends."""
    global _cache_enabled, _cache
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


def _register(module, name, x):
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _set_in_place(dest, src):
    """dest takes src's data (PyTorch's dest.set_(src)): the tensor object, and what refers to it, stays, and so
    does its allocator category (a parameter's or buffer's storage is counted as model state in memory reports)."""
    if src is not dest:
        cat = dest._category
        dest._set_data(src.detach() if src.requires_grad else src)
        dest._category = cat


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, in registration order, and the original tensor(s) they are applied
    to: `original`, or original0, original1, ... when the first right_inverse returns a sequence. Built by
    register_parametrization, not by users."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with no_grad():
            new = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not _is_tensor(new) and not isinstance(new, collections.abc.Sequence):
            raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                             f"Got {type(new).__name__}")
        self.is_tensor = _is_tensor(new)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != original.dtype:
                raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                                 f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}")
            if new.device != original.device:
                raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the device.\n"
                                 f"original.device: {original.device}\nright_inverse(original).device: "
                                 f"{new.device}")
            with no_grad():
                _set_in_place(original, new)
            _register(self, "original", original)
        else:
            for i, t in enumerate(new):
                if not _is_tensor(t):
                    raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, "
                                     f"tuple...). Got element {i} of the sequence with type {type(t).__name__}.")
                if isinstance(original, Parameter):
                    t = Parameter(t.detach(), original.requires_grad)
                else:
                    t.requires_grad_(original.requires_grad)
                _register(self, f"original{i}", t)
        if not self.unsafe:
            z = self()
            if not _is_tensor(z):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if z.dtype != dtype:
                raise ValueError(f"Registering a parametrization may not change the dtype of the tensor, unless "
                                 f"`unsafe` flag is enabled.\nunparametrized dtype: {dtype}\nparametrized dtype: "
                                 f"{z.dtype}")
            if tuple(z.shape) != shape:
                raise ValueError(f"Registering a parametrization may not change the shape of the tensor, unless "
                                 f"`unsafe` flag is enabled.\nunparametrized shape: {shape}\nparametrized shape: "
                                 f"{tuple(z.shape)}")

    def right_inverse(self, value):
        """Store value: the parametrizations' right_inverse, last to first, written into the original(s)."""
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement right_inverse.")
                value = m.right_inverse(value)
            if self.is_tensor:
                if not _is_tensor(value):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype {value.dtype} while "
                                     f"`original` has dtype {self.original.dtype}")
                _set_in_place(self.original, value)
                return
            if not isinstance(value, collections.abc.Sequence):
                raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                                 f"Got a sequence of length {len(value)}.")
            for i, t in enumerate(value):
                orig = getattr(self, f"original{i}")
                if not _is_tensor(t):
                    raise ValueError(f"'right_inverse' must return a sequence of tensors or reference-type "
                                     f"opaques. Got element {i} of type {type(t).__name__}.")
                if t.dtype != orig.dtype:
                    raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype {t.dtype} while "
                                     f"`original{i}` has dtype {orig.dtype}")
                _set_in_place(orig, t)

    def forward(self):
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _deepcopy(self, memo):
    """A parametrized module's deepcopy (its class refuses pickling, which deepcopy would otherwise use)."""
    if id(self) in memo:
        return memo[id(self)]
    replica = self.__new__(self.__class__)
    memo[id(self)] = replica
    replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    for slot in copyreg._slotnames(self.__class__):
        if hasattr(self, slot):
            setattr(replica, slot, copy.deepcopy(getattr(self, slot), memo))
    return replica


def _getstate(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through state_dict(): save "
                       "module.state_dict() and load it into a module parametrized the same way")


def _inject_new_class(module):
    """module's class becomes a generated subclass, Parametrized<Name>, which will carry the properties."""
    cls = module.__class__
    body = {"__getstate__": _getstate}
    if not hasattr(cls, "__deepcopy__"):
        body["__deepcopy__"] = _deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), body)


def _inject_property(module, name):
    if hasattr(module, name):
        raise AssertionError(f"Module already has an attribute named '{name}'")

    def get(self):
        plist = self.parametrizations[name]
        if not _cache_enabled:
            return plist()
        key = (id(self), name)
        t = _cache.get(key)
        if t is None:
            t = _cache[key] = plist()
        return t

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(module.__class__, name, property(get, set_))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Parametrize module.<tensor_name> (a parameter or a buffer, or one parametrized already: the new
    parametrization is applied after the others) by the module `parametrization`. Unless unsafe, it may not
    change the tensor's dtype or shape. Returns module."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not _is_tensor(x):
                raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
            if x.dtype != y.dtype:
                raise ValueError(f"Registering a parametrization may not change the dtype of the tensor, unless "
                                 f"the `unsafe` flag is enabled.\nmodule.{tensor_name}.dtype: {y.dtype}\n"
                                 f"parametrization(module.{tensor_name}).dtype: {x.dtype}")
            if tuple(x.shape) != tuple(y.shape):
                raise ValueError(f"Registering a parametrization may not change the shape of the tensor, unless "
                                 f"the `unsafe` flag is enabled.\nmodule.{tensor_name}.shape: {tuple(y.shape)}\n"
                                 f"parametrization(module.{tensor_name}).shape: {tuple(x.shape)}")
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    if not _is_tensor(z):
                        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: "
                                         f"{type(z).__name__}")
                    if z.dtype != y.dtype:
                        raise ValueError(f"The tensor returned by parametrization.right_inverse must have the same "
                                         f"dtype as module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
                                         f"module.{tensor_name}.dtype: {y.dtype}\nreturned dtype: {z.dtype}")
                    if tuple(z.shape) != tuple(y.shape):
                        raise ValueError(f"The tensor returned by parametrization.right_inverse must have the same "
                                         f"shape as module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
                                         f"module.{tensor_name}.shape: {tuple(y.shape)}\nreturned shape: "
                                         f"{tuple(z.shape)}")
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with "
                         f"name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """Whether module has any parametrization (tensor_name None) or one on tensor_name."""
    plists = getattr(module, "parametrizations", None)
    if plists is None or not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo the parametrizations of module.<tensor_name>: it becomes a plain parameter (or buffer) again, holding
    its current parametrized value (leave_parametrized=True) or the original's. The original Parameter object is
    kept. When nothing is parametrized any more, the module gets its own class back."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
                _set_in_place(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                             "parametrized in terms of a sequence of tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t.detach()) if t.requires_grad else t
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The module's class as it was before parametrization (type(module) when it has none)."""
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Give to_module the parametrizations of from_module (all, or tensor_name's) and their original tensors
    (shared, not copied); a missing parameter is created first. Returns to_module."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        for p in from_module.parametrizations[name]:
            register_parametrization(to_module, name, p)
        src, dst = from_module.parametrizations[name], to_module.parametrizations[name]
        if hasattr(src, "original"):
            dst.original = src.original
        else:
            i = 0
            while hasattr(src, f"original{i}"):
                setattr(dst, f"original{i}", getattr(src, f"original{i}"))
                i += 1
    return to_module
