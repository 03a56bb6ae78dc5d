"""gpumemnet.nn.Parameter: a tensor that a Module registers as one of its parameters.

A Parameter is a plain gpumemnet.Tensor, not a subclass: the autograd fast path tests `type(x) is Tensor`, and a
subclass would miss it on every op. What makes a tensor a parameter is the C flag `_is_param` (isinstance reads
it through the metaclass below) and its storage's allocator category, "parameter", which is what the memory
reports and the OOM message count as parameters."""
from .. import _C
from .._core.complex import ComplexTensor
from .._core.dtype import get_default_dtype
from .._core.tensor import as_parameter


class _ParameterMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.TensorBase) and obj._is_param


class Parameter(metaclass=_ParameterMeta):
    """Parameter(data=None, requires_grad=True) -> a Tensor sharing data's storage, registered as a parameter.

    The result is a detached alias of `data` (no copy: writes through either are seen by both) whose storage is
    re-tagged "parameter". Create parameters from freshly made tensors, as the layers do."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty((0,), get_default_dtype().code, "cpu")
        if data.__class__ is ComplexTensor:  # its real (..., 2) tensor becomes the parameter (nn/modules/module.py)
            return ComplexTensor(Parameter(data._r, requires_grad))
        if not isinstance(data, _C.TensorBase):
            raise TypeError(f"Parameter: data must be a gpumemnet Tensor, got {type(data).__name__}")
        return as_parameter(data, requires_grad)
