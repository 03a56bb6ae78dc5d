"""gpumemnet.nn.Parameter: a tensor that a Module registers as one of its parameters.

A Parameter is a plain gpumemnet.Tensor, not a subclass: the autograd fast path tests `type(x) is Tensor`, and a
subclass would miss it on every op. What makes a tensor a parameter is the C flag `_is_param` (isinstance reads
it through the metaclass below) and its storage's allocator category, "parameter", which is what the memory
reports and the OOM message count as parameters. Also here, the rest of PyTorch's torch.nn.parameter: the lazy
modules' placeholders UninitializedParameter / UninitializedBuffer, and nn.Buffer."""
import weakref

from .. import _C
from .._core.complex import ComplexTensor
from .._core.dtype import as_dtype, factory_device, get_default_dtype
from .._core.tensor_misc_extra import as_parameter


class _ParameterMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.TensorBase) and obj._is_param


class Parameter(metaclass=_ParameterMeta):
    """Parameter(data=None, requires_grad=True) -> a Tensor sharing data's storage, registered as a parameter.

    The result is a detached alias of `data` (no copy: writes through either are seen by both) whose storage is
    re-tagged "parameter". Create parameters from freshly made tensors, as the layers do."""
    _makes_parameter = True  # (Tensor._make_subclass(a subclass of this, data) makes a parameter too)

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty((0,), get_default_dtype().code, "cpu")
        if data.__class__ is ComplexTensor:  # its real (..., 2) tensor becomes the parameter (nn/modules/module.py)
            return ComplexTensor(Parameter(data._r, requires_grad))
        if not isinstance(data, _C.TensorBase):
            raise TypeError(f"Parameter: data must be a gpumemnet Tensor, got {type(data).__name__}")
        return as_parameter(data, requires_grad)



# ---- the lazy modules' placeholders (nn/modules/lazy.py materialises them) -------------------------------------
_LAZY = {}  # id(tensor) -> weak reference to it, for every placeholder not yet materialised


def _mark(t):
    key = id(t)
    _LAZY[key] = weakref.ref(t, lambda _, key=key: _LAZY.pop(key, None))
    return t


def is_lazy(t):
    ref = _LAZY.get(id(t))
    return ref is not None and ref() is t


def new_tensor(shape, device=None, dtype=None, category="parameter", floating=True):
    """Uninitialised storage for a parameter or buffer, allocated under `category` from the start (so the peak
    statistics never count it as something else)."""
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()  # set_default_dtype(float64) applies
    code = dt.code
    if floating and dt is not None and not dt.is_floating_point:
        raise TypeError(f"dtype: parameters must be of a floating point dtype, got {dt}")
    prev = _C.set_category(category)
    try:
        return _C.empty(tuple(shape), code, factory_device(device))
    finally:
        _C.set_category(prev)


def _placeholder(device, dtype):
    # any dtype: an integer one is refused where PyTorch refuses it, by requires_grad
    return new_tensor((0,), device, dtype, floating=False)


class _UninitializedMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.TensorBase) and is_lazy(obj) and cls._param in (None, bool(obj._is_param))


class UninitializedTensorMixin(metaclass=_UninitializedMeta):
    """PyTorch's base of the two placeholders below: isinstance(t, UninitializedTensorMixin) is true of either
    (tensordict checks it); they are plain tensors marked lazy here."""
    _param = None


class UninitializedParameter(metaclass=_UninitializedMeta):
    """A parameter whose shape is not known yet: materialize() (or a lazy module's first call) gives it one."""
    _param = True

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return _mark(Parameter(_placeholder(device, dtype), requires_grad))


class UninitializedBuffer(metaclass=_UninitializedMeta):
    """A buffer whose shape is not known yet (a lazy norm's running statistics). persistent is accepted for
    PyTorch's signature; register_buffer's own persistent argument is what decides."""
    _param = False

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        t = _placeholder(device, dtype)
        t.requires_grad = requires_grad
        return _mark(t)


# ---- nn.Buffer ------------------------------------------------------------------------------------------------
class _BufferMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.TensorBase) and getattr(obj, "_is_buffer", False)


class Buffer(metaclass=_BufferMeta):
    """Buffer(data=None, *, persistent=True) -> data (detached, keeping its requires_grad), marked to become a
    buffer of the Module whose attribute it is assigned to (Module.__setattr__); persistent=False keeps it out of
    state_dict. Hugging Face's models write `self.position_ids = nn.Buffer(torch.arange(n), persistent=False)`."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = _C.empty((0,), get_default_dtype().code, "cpu")
        if not isinstance(data, _C.TensorBase):  # AttributeError: PyTorch's (it calls data.detach())
            raise AttributeError(f"'{type(data).__name__}' object has no attribute 'detach' (nn.Buffer: data must be a "
                                 f"Tensor)")
        t = data.detach().requires_grad_(data.requires_grad)
        t._is_buffer, t.persistent = True, persistent
        return t
