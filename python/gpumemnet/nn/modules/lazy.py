"""Lazy modules (PyTorch's LazyModuleMixin): LazyLinear, LazyConv1d/2d, LazyConvTranspose1d/2d, LazyBatchNorm1d/2d/3d
and LazyInstanceNorm1d/2d/3d, whose parameters and buffers are UninitializedParameter / UninitializedBuffer until
the first call infers their shapes from the input; the module then becomes its non-lazy class (LazyLinear ->
Linear), as in PyTorch.

gpumemnet's tensors are plain Tensors (nn/parameter.py explains why), so an uninitialized one is a 0-element
placeholder on the requested device and dtype, recorded as such here (isinstance sees it through the metaclass).
It is materialised in place (same object, new storage), so an optimizer or a reference taken before the first
call holds the real parameter afterwards. Loading a state_dict into a lazy module materialises what it holds, as
PyTorch's load hook does (Module.load_state_dict calls _lazy_load_hook on itself and every submodule)."""
import itertools

from ... import _C
from ..._core.autograd import no_grad
from ..._core.tensor import Tensor
from ..parameter import UninitializedBuffer, UninitializedParameter, _LAZY, _mark, is_lazy  # noqa: F401
from ._utils import new_tensor
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, _NormBase
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .linear import Linear
from .volumetric import Conv3d, ConvTranspose3d
from .module import Module

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyLinear", "LazyConv1d", "LazyConv2d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConv3d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]

def materialize(t, shape, device=None, dtype=None):
    """Give the placeholder t storage of `shape` (uninitialised values), in place: t stays the same object.
    (PyTorch's UninitializedParameter.materialize; a gpumemnet Tensor has no such method.)"""
    if not is_lazy(t):
        raise RuntimeError("materialize: the tensor is not an uninitialized parameter or buffer")
    with no_grad():
        t._set_data(new_tensor(tuple(shape), device if device is not None else t._device,
                               dtype if dtype is not None else t.dtype))
    t._name = t._name  # label the new storage for memory reports
    _LAZY.pop(id(t), None)
    return t


def _materialize_method(self, shape, device=None, dtype=None):
    """p.materialize(shape): PyTorch's UninitializedParameter / UninitializedBuffer method (PyG's Linear(-1, out)
    calls it). The placeholders are plain gpumemnet Tensors, so the method is Tensor's, refused for any tensor that
    is not such a placeholder."""
    return materialize(self, shape, device, dtype)


Tensor.materialize = _materialize_method


class LazyModuleMixin:
    """Shape inference on the first call: initialize_parameters(*args) materialises every uninitialized parameter
    and buffer, then the module's class becomes cls_to_become (e.g. Linear)."""
    cls_to_become = None

    def __call__(self, *args, **kwargs):
        self._infer_parameters(self, args, kwargs)
        return Module.__call__(self, *args, **kwargs)  # by name: after the switch, self is no longer lazy

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self):
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """As Module's, with the uninitialized parameters and buffers themselves (PyTorch's)."""
        out = super().state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            if t is not None and is_lazy(t) and prefix + name in out:
                out[prefix + name] = t
        return out

    def _lazy_load_hook(self, state_dict, prefix):
        """Materialise each uninitialized parameter and buffer that state_dict has a (shaped) value for, so that
        loading then copies it (PyTorch's load_state_dict pre-hook)."""
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if t is not None and key in state_dict and is_lazy(t):
                value = state_dict[key]
                if not is_lazy(value):
                    materialize(t, tuple(getattr(value, "shape", ())))

    def _moved_buffer(self, old, new):
        # buffers are replaced by a move: the new one is still uninitialized
        return _mark(new) if new is not old and is_lazy(old) else new


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose in_features is inferred from the first input's last dim."""
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            if input.ndim == 0:
                raise IndexError("LazyLinear: cannot infer in_features from a 0-d input (it has no last dim)")
            self.in_features = input.shape[-1]
            materialize(self.weight, (self.out_features, self.in_features))
            if self.bias is not None:
                materialize(self.bias, (self.out_features,))
            self.reset_parameters()
        if self.in_features == 0:  # materialised by load_state_dict: the loaded weight says
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(f"LazyLinear: the in_features inferred from input: {input.shape[-1]} is not "
                                     f"equal to in_features from self.weight: {self.weight.shape[-1]}")
            self.in_features = input.shape[-1]


class _LazyConvXdMixin(LazyModuleMixin):
    _spatial = 2

    def _lazy_init(self, out_channels, bias, device, dtype):
        # built with in_channels = out_channels = groups (gpumemnet's constructor checks them), then made lazy
        self.in_channels = 0
        self.out_channels = out_channels
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input):
        unbatched = self._spatial + 1
        if input.ndim not in (unbatched, unbatched + 1):
            raise RuntimeError(f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input to "
                               f"{type(self).__name__}, but got input of size: {list(input.shape)}")
        return input.shape[1] if input.ndim == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError(f"{type(self).__name__}: in_channels must be divisible by groups, got "
                                 f"in_channels={self.in_channels} and groups={self.groups}")
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups) + tuple(self.kernel_size)
            else:
                shape = (self.out_channels, self.in_channels // self.groups) + tuple(self.kernel_size)
            materialize(self.weight, shape)
            if self.bias is not None:
                materialize(self.bias, (self.out_channels,))
            self.reset_parameters()


class LazyConv1d(_LazyConvXdMixin, Conv1d):
    """A Conv1d whose in_channels is inferred from the first input."""
    cls_to_become = Conv1d
    _spatial = 1

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, groups, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConv2d(_LazyConvXdMixin, Conv2d):
    """A Conv2d whose in_channels is inferred from the first input."""
    cls_to_become = Conv2d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, groups, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConvTranspose1d(_LazyConvXdMixin, ConvTranspose1d):
    """A ConvTranspose1d whose in_channels is inferred from the first input."""
    cls_to_become = ConvTranspose1d
    _spatial = 1

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, groups, kernel_size, stride, padding, output_padding, groups, False, dilation,
                         padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConvTranspose2d(_LazyConvXdMixin, ConvTranspose2d):
    """A ConvTranspose2d whose in_channels is inferred from the first input."""
    cls_to_become = ConvTranspose2d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, groups, kernel_size, stride, padding, output_padding, groups, False, dilation,
                         padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConv3d(_LazyConvXdMixin, Conv3d):
    """A Conv3d whose in_channels is inferred from the first input."""
    cls_to_become = Conv3d
    _spatial = 3

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, groups, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConvTranspose3d(_LazyConvXdMixin, ConvTranspose3d):
    """A ConvTranspose3d whose in_channels is inferred from the first input."""
    cls_to_become = ConvTranspose3d
    _spatial = 3

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, groups, kernel_size, stride, padding, output_padding, groups, False, dilation,
                         padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class _LazyNormBase(LazyModuleMixin, _NormBase):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        # built for 1 feature with nothing to hold (gpumemnet's constructor checks num_features), then made lazy
        super().__init__(1, eps, momentum, False, False, device, dtype, bias=False)
        self.num_features = 0
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            count = new_tensor((), device, "int64", floating=False)
            _C.fill_(count, 0)
            self.num_batches_tracked = count

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            self.num_features = input.shape[1]  # PyTorch's, for unbatched instance-norm input too
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if t is not None:
                    materialize(t, (self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """A BatchNorm1d whose num_features is inferred from input.shape[1]."""
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """A BatchNorm2d whose num_features is inferred from input.shape[1]."""
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    """A BatchNorm3d whose num_features is inferred from input.shape[1]."""
    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyNormBase, InstanceNorm1d):
    """An InstanceNorm1d whose num_features is inferred from input.shape[1]."""
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyNormBase, InstanceNorm2d):
    """An InstanceNorm2d whose num_features is inferred from input.shape[1]."""
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyNormBase, InstanceNorm3d):
    """An InstanceNorm3d whose num_features is inferred from input.shape[1]."""
    cls_to_become = InstanceNorm3d
