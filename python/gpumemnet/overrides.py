"""torch.overrides: PyTorch's __torch_function__ protocol for Tensor subclasses (_core/subclass_dispatch.py has
the dispatch: subclass methods and operators, the public functions once a subclass exists
(_install_function_dispatch, here), and a library's own functions through handle_torch_function).
A TorchFunctionMode entered here sees no calls (Lightning's empty-init mode then lets parameters initialise as
usual, which its checkpoint load overwrites)."""
import sys
import types

from ._core import hooks, subclass_dispatch as _sd
from ._core.tensor import Tensor

__all__ = ["TorchFunctionMode", "has_torch_function", "handle_torch_function", "is_tensor_like"]


class TorchFunctionMode:
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def has_torch_function(relevant_args):
    """Whether relevant_args hold an instance of a Tensor subclass that dispatches (and dispatch is enabled)."""
    return not _sd.disabled() and bool(_sd._overloaded(tuple(relevant_args), None))


def has_torch_function_unary(arg):
    return has_torch_function((arg,))


def has_torch_function_variadic(*args):
    return has_torch_function(args)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """A library's own function called with subclass instances: through their __torch_function__."""
    overloaded = [] if _sd.disabled() else _sd._overloaded(tuple(relevant_args), None)
    if not overloaded:
        return public_api(*args, **kwargs)
    return _sd.dispatch(public_api, overloaded, args, kwargs)


def is_tensor_like(inp):
    return isinstance(inp, Tensor)


# Public functions that never dispatch: they take no tensor to compute with, or are about files and settings.
_NO_DISPATCH = frozenset({"save", "load", "tensor", "as_tensor", "asarray", "from_numpy", "is_tensor", "is_storage",
                          "typename", "manual_seed", "seed", "set_default_dtype", "get_default_dtype", "compile",
                          "set_grad_enabled", "is_grad_enabled", "set_printoptions", "use_deterministic_algorithms"})
_MODULES = ("", ".nn.functional", ".linalg", ".special", ".fft")


def _install_function_dispatch():
    """Wrap, in place, the public functions of gm's function modules and of their torch.* aliases (aliases made
    later copy the wrapped ones), so that a call with a subclass instance dispatches (dispatching_function)."""
    pkg = __name__.rsplit(".", 1)[0]
    wrappers = {}  # id of a function -> its one wrapper, whichever modules hold it
    for suffix in _MODULES:
        for name in (pkg + suffix, "torch" + suffix):
            module = sys.modules.get(name)
            if module is None or (name.startswith("torch") and getattr(module, "_gm_target", None) is None):
                continue  # not imported yet, or PyTorch itself (tests import both)
            for attr, value in list(vars(module).items()):
                if attr.startswith("_") or attr in _NO_DISPATCH or getattr(value, "_dispatching", False) or \
                        not isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
                    continue
                wrapper = wrappers.get(id(value))
                if wrapper is None:
                    wrapper = wrappers[id(value)] = _sd.dispatching_function(value)
                    # pickled by its public name (this module's, gm's first), where it now is
                    wrapper.__module__, wrapper.__qualname__ = module.__name__, attr
                object.__setattr__(module, attr, wrapper)


hooks.register("torch_function_functions", _install_function_dispatch)
