"""torch.library: registrations of custom operators' fake (meta) kernels and autograd formulas. gpumemnet's
meta device infers shapes in C for its own ops, so these registrations are accepted and unused; custom_op's
operator runs its Python function, with the backward registered for it (register_autograd) where there is one."""
import functools
import inspect


def _accept(*args, **kwargs):
    def register(fn):
        return fn
    # used both as @register_fake("ns::op") and as register_fake("ns::op", fn)
    return args[1] if len(args) > 1 and callable(args[1]) else register


register_fake = impl_abstract = register_autograd = register_kernel = impl = _accept


class Library:
    def __init__(self, ns, kind, dispatch_key=""):
        self.ns, self.kind = ns, kind

    def define(self, schema, *args, **kwargs):
        return schema.split("(")[0]

    def impl(self, *args, **kwargs):
        return _accept(*args, **kwargs)


class CustomOpDef:
    """What custom_op returns: calling it runs the function (on meta too: it is made of gpumemnet's ops); a backward
    given by register_autograd replaces the function's own gradient, as PyTorch's operator then has."""

    def __init__(self, name, fn, mutates_args):
        self._name, self._fn, self._mutates = name, fn, mutates_args
        self._backward = self._setup_context = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if self._backward is None:
            return self._fn(*args, **kwargs)
        bound = inspect.signature(self._fn).bind(*args, **kwargs)
        bound.apply_defaults()
        return _custom_function().apply(self, *bound.arguments.values())

    def register_fake(self, fn=None, /):
        return fn if fn is not None else (lambda f: f)

    def register_kernel(self, device_types, fn=None, /):
        return fn if fn is not None else (lambda f: f)

    def register_autograd(self, backward, /, *, setup_context=None):
        self._backward, self._setup_context = backward, setup_context


@functools.lru_cache(maxsize=None)
def _custom_function():
    from .._core.autograd import Function  # noqa: PLC0415

    class CustomOpFunction(Function):
        # the registered backward is the user's: its ctx answers PyTorch's name (gpumemnet's own nodes have none)
        saved_tensors = Function._unpacked

        @staticmethod
        def forward(ctx, op, *inputs):
            ctx.op = op
            out = op._fn(*inputs)
            if op._setup_context is not None:
                op._setup_context(ctx, inputs, out)
            return out

        @staticmethod
        def backward(ctx, *grads):
            g = ctx.op._backward(ctx, *grads)
            return (None,) + (tuple(g) if isinstance(g, (tuple, list)) else (g,))
    return CustomOpFunction


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None, tags=None):
    """A custom operator made of a Python function: @custom_op("ns::name", mutates_args=()) (Hugging Face's MoE
    kernels register theirs so)."""
    if fn is None:
        return lambda f: CustomOpDef(name, f, mutates_args)
    return CustomOpDef(name, fn, mutates_args)
