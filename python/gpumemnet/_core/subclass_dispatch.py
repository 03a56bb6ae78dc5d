"""Tensor subclasses and PyTorch's __torch_function__ protocol (fastai's TensorBase / TensorImage, MONAI's MetaTensor,
torchvision's tv_tensors).

An op on an instance of a Tensor subclass calls the subclass's `__torch_function__(func, types, args, kwargs)`;
Tensor's own (the default) runs func with dispatch disabled and returns tensor results as the subclass, so that
`(x * 2).sum()` of a subclass instance is one too; autograd records ops on subclass instances as on any tensor
(autograd._is_tensor).

Plain tensors pay nothing until a subclass that takes part is defined: the dispatching wrappers exist on subclasses
(their methods and operators, installed when the class is defined: install_methods) and, from the first such class
on, around the public functions of gm / nn.functional / linalg / special / fft and their torch.* aliases (the layer
above wraps them in place through the "torch_function_functions" hook), as PyTorch's torch.cat, F.pad or
F.interpolate of a subclass instance dispatch too (MONAI's MetaTensor keeps its affine through them: without it,
Spacingd skipped its resampling). A name imported before that (`from torch import cat`) keeps calling the function
itself, which does not dispatch.

What is left out, by choice:
- properties (x.T, x.data), and methods that return no tensor (size, dim, item, tolist, numpy, repr...), which
  dispatch in PyTorch but whose default result is the same;
- objects that are not Tensor subclasses but define __torch_function__; TorchFunctionMode."""
import functools
import inspect
import threading

from . import hooks


_state = threading.local()  # .disabled: depth of DisableTorchFunctionSubclass on this thread
_Tensor = None  # gpumemnet.Tensor, set by tensor.py

# Tensor methods that never dispatch: construction and attribute machinery, pickling and copying, and methods
# whose result is not a tensor (the default __torch_function__ would hand it back unchanged).
_NEVER = frozenset({
    "__new__", "__init__", "__init_subclass__", "__subclasshook__", "__torch_function__", "__getattribute__",
    "__getattr__", "__setattr__", "__delattr__", "__dir__", "__sizeof__", "__reduce__", "__reduce_ex__",
    "__getstate__", "__setstate__", "__copy__", "__deepcopy__", "__hash__", "__class_getitem__", "__array__",
    "__array_wrap__", "__repr__", "__str__", "__format__", "__len__", "__bool__", "__index__", "__int__",
    "__float__", "__complex__", "__iter__", "__contains__", "__dlpack__", "__dlpack_device__", "__reversed__",
    "as_subclass", "data_ptr", "dim", "ndimension", "numel", "nelement", "size", "stride", "storage_offset",
    "is_contiguous", "is_floating_point", "is_complex", "is_signed", "element_size", "item", "tolist", "numpy",
    "untyped_storage", "storage", "get_device", "is_shared", "is_pinned", "is_set_to", "is_nonzero", "type",
    "register_hook", "register_post_accumulate_grad_hook", "retain_grad", "backward", "share_memory_",
})


def disabled():
    return getattr(_state, "disabled", 0) > 0


class DisableTorchFunctionSubclass:
    """A context in which ops on Tensor subclass instances run as on plain tensors (no __torch_function__ call);
    Tensor's default __torch_function__ runs func inside one."""

    def __enter__(self):
        _state.disabled = getattr(_state, "disabled", 0) + 1
        return self

    def __exit__(self, *exc):
        _state.disabled -= 1
        return False


def _takes_part(cls):
    """Whether instances of cls dispatch: a proper Tensor subclass that has not opted out with
    torch._C._disabled_torch_function_impl (PyG's Index: that marker is a plain function, not a classmethod)."""
    part = _PART.get(cls)
    if part is None:
        part = _PART[cls] = cls is not _Tensor and \
            not inspect.isfunction(inspect.getattr_static(cls, "__torch_function__", None))
    return part


_PART = {}  # class -> _takes_part
_functions_dispatch = [False]  # whether the public functions were wrapped (once, at the first subclass)


def _overloaded(args, kwargs):
    """PyTorch's overloaded arguments: subclass instances among args, kwargs' values and the items of list / tuple
    arguments, one per type, a subclass before its base class, else in argument order."""
    found = []
    for group in (args, kwargs.values() if kwargs else ()):
        for a in group:
            for x in (a if type(a) in (list, tuple) else (a,)):
                t = type(x)
                if t is _Tensor or not isinstance(x, _Tensor) or any(type(f) is t for f in found) or \
                        not _takes_part(t):
                    continue
                i = next((i for i, f in enumerate(found) if issubclass(t, type(f))), len(found))
                found.insert(i, x)
    return found


def dispatch(func, overloaded, args, kwargs):
    """Call each overloaded argument's type's __torch_function__ until one does not return NotImplemented."""
    types = tuple(type(x) for x in overloaded)
    for x in overloaded:
        ret = type(x).__torch_function__(func, types, args, kwargs or {})
        if ret is not NotImplemented:
            return ret
    raise TypeError(f"no implementation found for '{getattr(func, '__name__', func)}' on types that implement "
                    f"__torch_function__: {[t.__name__ for t in types]}")


def default_torch_function(cls, func, types, args=(), kwargs=None):
    """Tensor.__torch_function__: func run with dispatch disabled, its tensor results as cls (PyTorch's)."""
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        return convert(func(*args, **(kwargs or {})), cls)


def convert(ret, cls):
    """ret with each tensor in it (nested in lists and tuples) an instance of cls."""
    if cls is _Tensor:
        return ret
    if isinstance(ret, _Tensor):
        return ret if isinstance(ret, cls) else ret.as_subclass(cls)
    if isinstance(ret, (tuple, list)):
        items = [convert(r, cls) for r in ret]
        if hasattr(ret, "_fields"):  # torch.return_types (values, indices)
            return type(ret)(*items)
        return type(ret)(items)
    return ret


def _dispatching(func, name, impl=None):
    """A Tensor method or operator as a subclass runs it: through __torch_function__ with func, unless disabled;
    impl (func by default) is what runs then (an operator: its own code, while func is the method named after it,
    whose code may apply the operator again)."""
    impl = impl or func

    def method(*args, **kwargs):
        if getattr(_state, "disabled", 0) > 0:
            return impl(*args, **kwargs)
        overloaded = _overloaded(args, kwargs)
        if not overloaded:
            return impl(*args, **kwargs)
        return dispatch(func, overloaded, args, kwargs)
    method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"
    method.__doc__ = getattr(func, "__doc__", None)
    method.__wrapped__ = func
    method._dispatching = True
    return method


def install_methods(cls):
    """On a new Tensor subclass: its inherited Tensor methods and operators dispatch (those it or a base class
    between it and Tensor defines itself are left to it)."""
    if not _takes_part(cls):
        return
    for name, value in vars(_Tensor).items():
        if name in _NEVER or name in _C_OPERATORS or \
                (name.startswith("_") and not (name.startswith("__") and name.endswith("__"))):
            continue
        if isinstance(value, (property, classmethod, staticmethod, type)) or not callable(value):
            continue
        if getattr(cls, name, None) is not getattr(_Tensor, name):
            continue  # overridden by the subclass, or already dispatching through a subclass above it
        setattr(cls, name, _dispatching(getattr(_Tensor, name), name))
    for name in _C_OPERATORS:
        if getattr(cls, name, None) is getattr(_Tensor, name, None) and hasattr(_Tensor, name):
            # the func __torch_function__ sees is PyTorch's: Tensor.add for x + y and y + x, Tensor.add_ for +=
            func = getattr(_Tensor, _OPERATOR_FUNCS.get(name, name), None) or getattr(_Tensor, name)
            setattr(cls, name, _dispatching(func, name, getattr(_Tensor, name)))
    if not _functions_dispatch[0]:
        _functions_dispatch[0] = True
        install = hooks.get("torch_function_functions")
        if install is not None:
            install()


# Operators that TensorBase (C) implements: not in vars(Tensor), dispatching on subclasses all the same.
_C_OPERATORS = tuple(f"__{op}__" for op in (
    "add radd iadd sub rsub isub mul rmul imul truediv rtruediv itruediv floordiv rfloordiv ifloordiv mod rmod "
    "imod pow rpow ipow matmul rmatmul imatmul neg pos abs invert and rand iand or ror ior xor rxor ixor lshift "
    "rlshift ilshift rshift rrshift irshift eq ne lt le gt ge getitem setitem").split())

_OPERATOR_FUNCS = {"__add__": "add", "__radd__": "add", "__iadd__": "add_", "__sub__": "sub", "__isub__": "sub_",
                   "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_", "__truediv__": "div",
                   "__itruediv__": "div_", "__ifloordiv__": "floor_divide_", "__mod__": "remainder",
                   "__imod__": "remainder_", "__pow__": "pow", "__ipow__": "pow_", "__matmul__": "matmul",
                   "__neg__": "neg", "__pos__": "positive", "__abs__": "abs", "__rand__": "bitwise_and",
                   "__ror__": "bitwise_or", "__rxor__": "bitwise_xor", "__ne__": "ne", "__lt__": "lt", "__le__": "le",
                   "__gt__": "gt", "__ge__": "ge"}


def dispatching_function(fn):
    """A public function (gm.cat, F.relu) that dispatches when an argument is a subclass instance; the wrapper is
    the func its __torch_function__ sees (what `torch.cat` is then), and fn runs when none takes part."""
    @functools.wraps(fn)
    def function(*args, **kwargs):
        if getattr(_state, "disabled", 0) > 0:
            return fn(*args, **kwargs)
        overloaded = _overloaded(args, kwargs)
        if not overloaded:
            return fn(*args, **kwargs)
        return dispatch(function, overloaded, args, kwargs)
    function._dispatching = True
    return function


WRAPPER_CODE = dispatching_function(len).__code__  # (tests that trace calls look through the wrappers)


def set_tensor_class(cls):
    global _Tensor
    _Tensor = cls
