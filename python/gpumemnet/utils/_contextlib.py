"""torch.utils._contextlib: the base class of PyTorch's context managers that also decorate functions (no_grad,
inference_mode); libraries subclass it for their own switches (tensordict)."""
import functools
import inspect

from .._core.autograd import _generator_in

__all__ = ["_DecoratorContextManager", "_NoParamDecoratorContextManager", "context_decorator"]


def context_decorator(ctx_factory, func):
    """func run inside a fresh context from ctx_factory() on each call (each step of a generator function)."""
    if inspect.isgeneratorfunction(func):
        return _generator_in(ctx_factory, func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with ctx_factory():
            return func(*args, **kwargs)
    return wrapper


class _DecoratorContextManager:
    """A context manager that, called on a function, decorates it: the function runs inside a clone of it."""

    def __call__(self, orig_func):
        if inspect.isclass(orig_func):
            raise RuntimeError("Please decorate methods of the class, not the class itself")
        return context_decorator(self.clone, orig_func)

    def __enter__(self):
        raise NotImplementedError

    def __exit__(self, exc_type, exc_value, traceback):
        raise NotImplementedError

    def clone(self):
        return type(self)()


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """One that may also be applied bare (@ctx without parentheses)."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)
