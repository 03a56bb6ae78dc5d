"""torch.library: custom operators defined from Python. An operator made with custom_op (or triton_op), or defined
with Library.define / torch.library.define and given a kernel with impl, is callable directly and as
torch.ops.<ns>.<name> (and .default, .<overload>), as in PyTorch (spikingjelly's neurons call theirs so). Its
kernel is the Python function registered for the CPU or a composite key (an "Autograd" one first: it carries its
backward; a CUDA-only kernel when there is no other); register_autograd gives it a backward. gpumemnet's meta
device infers shapes in C for its own ops, so fake (meta) kernels are accepted and unused."""
import functools
import inspect

from . import ops as _ops


def _accept(*args, **kwargs):
    def register(fn):
        return fn
    # used both as @register_fake("ns::op") and as register_fake("ns::op", fn)
    return args[1] if len(args) > 1 and callable(args[1]) else register


register_fake = impl_abstract = _accept

# Which registered kernel an operator runs, by dispatch key: the highest rank (Meta and other keys: never)
_RANK = {"Autograd": 4, "AutogradCPU": 4, "CompositeImplicitAutograd": 3, "CompositeExplicitAutograd": 2, "CPU": 2,
         "": 2, "CUDA": 1, "AutogradCUDA": 1}


class CustomOpDef:
    """A custom operator (what custom_op returns, and each overload a Library defines): calling it runs its kernel
    (on meta too: it is made of gpumemnet's ops); a backward given by register_autograd replaces the kernel's own
    gradient, as PyTorch's operator then has."""

    def __init__(self, name, fn=None, mutates_args=()):
        self._name, self._fn, self._mutates = name, fn, mutates_args
        self._rank = 2 if fn is not None else -1
        self._backward = self._setup_context = None
        if fn is not None:
            functools.update_wrapper(self, fn)

    def _set_kernel(self, key, fn):
        rank = _RANK.get(key, -1)
        if rank >= self._rank and rank >= 0:  # a later kernel for the same key replaces the earlier
            self._fn, self._rank = fn, rank

    def __call__(self, *args, **kwargs):
        if self._fn is None:
            raise NotImplementedError(f"Could not run '{self._name}' with arguments from the 'CPU' backend: no "
                                      f"kernel was registered for it (torch.library impl / register_kernel)")
        if self._backward is None:
            return self._fn(*args, **kwargs)
        bound = inspect.signature(self._fn).bind(*args, **kwargs)
        bound.apply_defaults()
        return _custom_function().apply(self, *bound.arguments.values())

    def __repr__(self):
        return f"<CustomOpDef({self._name})>"

    def register_fake(self, fn=None, /):
        return fn if fn is not None else (lambda f: f)

    def register_kernel(self, device_types, fn=None, /):
        keys = [device_types] if isinstance(device_types, str) or device_types is None else list(device_types)

        def register(f):
            for key in keys:
                self._set_kernel({"cpu": "CPU", "cuda": "CUDA", None: ""}.get(key, key), f)
            return f
        return register(fn) if fn is not None else register

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
                op._setup_context(ctx=ctx, inputs=inputs, output=out)  # by keyword, as PyTorch calls it
            return out

        @staticmethod
        def backward(ctx, *grads):
            g = ctx.op._backward(ctx, *grads)
            return (None,) + (tuple(g) if isinstance(g, (tuple, list)) else (g,))
    return CustomOpFunction


def _op(ns, name):
    """The registered operator ns::name[.overload] (made, without a kernel, at its first mention)."""
    name, _, overload = name.partition(".")
    return _ops.python_op(ns, name, overload or "default", lambda: CustomOpDef(f"{ns}::{name}"))


def _split(qualname):
    if isinstance(qualname, CustomOpDef):
        return qualname
    ns, sep, name = str(qualname).partition("::")
    if not sep:
        raise ValueError(f"torch.library: expected a qualified name 'namespace::name', got {qualname!r}")
    return _op(ns, name)


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None, tags=None):
    """A custom operator made of a Python function: @custom_op("ns::name", mutates_args=()) (Hugging Face's MoE
    kernels register theirs so), also torch.ops.ns.name."""
    def make(f):
        op = _split(name)
        op._set_kernel("", f)
        op._mutates = mutates_args
        functools.update_wrapper(op, f)
        return op
    return make(fn) if fn is not None else make


def triton_op(name, fn=None, /, *, mutates_args, schema=None):
    """A custom operator whose function launches Triton kernels (through wrap_triton): here the function itself."""
    return custom_op(name, fn, mutates_args=mutates_args, schema=schema)


def wrap_triton(kernel):
    return kernel


def define(qualname, schema, *, lib=None, tags=()):
    _split(qualname)


def impl(qualname, types, func=None, *, lib=None):
    """torch.library.impl("ns::name", "cpu" or ["cpu", "cuda"], fn): the operator's kernel for those devices."""
    return _split(qualname).register_kernel(types, func)


def register_kernel(op, device_types, func=None, /, *, lib=None):
    return _split(op).register_kernel(device_types, func)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    _split(op).register_autograd(backward, setup_context=setup_context)


class Library:
    def __init__(self, ns, kind, dispatch_key=""):
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key

    def define(self, schema, *args, **kwargs):
        name = schema.split("(")[0].strip()
        _op(self.ns, name)
        return name

    def impl(self, op_name, fn=None, dispatch_key="", *, with_keyset=False, allow_override=True):
        """The kernel of op_name ('name', 'name.overload' or 'ns::name') for dispatch_key; with_keyset passes
        PyTorch's DispatchKeySet first, which gpumemnet's kernels have no use for (None)."""
        if not isinstance(op_name, str):
            op_name = getattr(op_name, "_name", str(op_name))
        ns, sep, name = op_name.partition("::")
        op = _op(ns, name) if sep else _op(self.ns, op_name)
        if fn is None:  # @lib.impl("name", dispatch_key=...) is not PyTorch's form, but harmless to accept
            return lambda f: self.impl(op_name, f, dispatch_key, with_keyset=with_keyset)
        op._set_kernel(dispatch_key or self.dispatch_key, functools.partial(fn, None) if with_keyset else fn)
        return fn
