"""torch.overrides: PyTorch's __torch_function__ protocol for Tensor subclasses (_core/subclass_dispatch.py has
the dispatch: subclass methods and operators, and a library's own functions through handle_torch_function).
A TorchFunctionMode entered here sees no calls (Lightning's empty-init mode then lets parameters initialise as
usual, which its checkpoint load overwrites)."""
from ._core import subclass_dispatch as _sd
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


has_torch_function_variadic = lambda *args: has_torch_function(args)  # noqa: E731  (PyTorch's signature)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """A library's own function called with subclass instances: through their __torch_function__."""
    overloaded = [] if _sd.disabled() else _sd._overloaded(tuple(relevant_args), None)
    if not overloaded:
        return public_api(*args, **kwargs)
    return _sd.dispatch(public_api, overloaded, args, kwargs)


def is_tensor_like(inp):
    return isinstance(inp, Tensor)
