"""torch.ops: PyTorch's registry of C++ operators. gpumemnet loads no C++ library; torchvision's is answered by
gpumemnet's own versions of the operators its detection models call (compat/torchvision_ops.py) and its image
extension by Pillow (compat/torchvision_image.py), and every other library is refused, so that it sees its ops
absent, as on a machine where they failed to load; operators defined from Python (torch.library) are there as
PyTorch has them. torch.ops.aten
(PyTorch's own operators, which code names as torch.ops.aten.clone.default) answers with the Tensor methods of
the same names, and aten's convolution (the operator FLOP counters key on) with the functional convolutions."""
import os

from .._core.creation import cat as _cat
from .._core.tensor import Tensor
from ..nn import functional as F

_LOADED = {}  # namespace -> module of operators
_PYTHON = {}  # (namespace, name) -> {overload: operator}: those defined from Python (compat/library.py)


def python_op(ns, name, overload, make):
    """The operator ns::name.overload defined from Python; make() gives it when there is none yet."""
    overloads = _PYTHON.setdefault((ns, name), {})
    if overload not in overloads:
        overloads[overload] = make()
    return overloads[overload]


class _PythonPacket:
    """torch.ops.<ns>.<name> of an operator defined from Python: called, its default overload (or its only one);
    .default and .<overload> name each."""

    def __init__(self, ns, name):
        self._ns, self._name = ns, name

    def overloads(self):
        return list(_PYTHON[(self._ns, self._name)])

    def __getattr__(self, overload):
        op = _PYTHON[(self._ns, self._name)].get(overload)
        if op is None:
            raise AttributeError(f"The underlying op of '{self._ns}.{self._name}' has no overload name '{overload}'")
        return op

    def __call__(self, *args, **kwargs):
        overloads = _PYTHON[(self._ns, self._name)]
        op = overloads.get("default") or next(iter(overloads.values()))
        return op(*args, **kwargs)

    def __repr__(self):
        return f"torch.ops.{self._ns}.{self._name}"


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, *flags):
    """aten::convolution (and aten::_convolution, whose trailing cuDNN flags are ignored): by weight's dims."""
    n = weight.ndim - 2
    if transposed:
        return (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1](
            input, weight, bias, stride, padding, output_padding, groups, dilation)
    return (F.conv1d, F.conv2d, F.conv3d)[n - 1](input, weight, bias, stride, padding, dilation, groups)


def _slice(x, dim=0, start=None, end=None, step=1):
    return x[(slice(None),) * (dim % x.ndim) + (slice(start, end, step),)]


# aten's operators that are no Tensor method of the same name (the ones that libraries key their
# __torch_dispatch__ tables on at import: PyG's); None: present, and refused when called
_ATEN_OWN = {"convolution": _convolution, "_convolution": _convolution, "cat": _cat, "slice": _slice,
             "_to_copy": lambda x, **kw: x.to(dtype=kw.get("dtype"), device=kw.get("device"), copy=True),
             "alias": lambda x: x.view(tuple(x.shape)), "_pin_memory": lambda x, device=None: x.pin_memory(),
             "index": lambda x, indices: x[tuple(indices)], "_sparse_mm_reduce_impl": None, "_sparse_addmm": None}


class _AtenNames:
    def __contains__(self, op):
        return op in _ATEN_OWN or not op.startswith("_") and callable(getattr(Tensor, op, None))


class _AtenImplemented:
    def get(self, op, default=None):
        # a Tensor method unbound: aten.clone.default(t) is Tensor.clone(t)
        return _ATEN_OWN[op] if op in _ATEN_OWN else getattr(Tensor, op, default)


class _Aten:
    NAMES = _AtenNames()
    IMPLEMENTED = _AtenImplemented()


_LOADED["aten"] = _Aten


def load_library(path):
    name, parent = os.path.basename(str(path)), os.path.basename(os.path.dirname(str(path)))
    if parent == "torchvision" and name.startswith(("_C_stable", "_C.")):
        from . import torchvision_ops
        _LOADED["torchvision"] = torchvision_ops
        return
    if parent == "torchvision" and name.startswith(("image_stable", "image.")):  # torchvision.io's decoders
        from . import torchvision_image
        _LOADED["image"] = torchvision_image
        return
    raise OSError(f"torch.ops.load_library({path!r}): gpumemnet cannot load PyTorch C++ operator libraries")


class _Op:
    """torch.ops.<ns>.<op>: callable, with its overloads (.default, which torchvision's meta registrations look up;
    aten.add.Tensor, aten.sort.stable, which libraries key their dispatch tables on): each calls the operator."""

    def __init__(self, qualname, fn, overload="default"):
        self._qualname, self._fn, self._overload = qualname, fn, overload

    @property
    def default(self):
        return self

    def __getattr__(self, overload):
        if overload.startswith("_"):
            raise AttributeError(overload)
        return _Op(self._qualname, self._fn, overload)

    def __eq__(self, other):  # one per lookup: the same operator compares equal, as PyTorch's one object does
        return isinstance(other, _Op) and (other._qualname, other._overload) == (self._qualname, self._overload)

    def __hash__(self):
        return hash((self._qualname, self._overload))

    def __repr__(self):  # PyTorch's
        return f"<OpOverload(op='{self._qualname}', overload='{self._overload}')>"

    def __call__(self, *args, **kwargs):
        if self._fn is None:
            raise NotImplementedError(f"torch.ops.{self._qualname}: gpumemnet does not implement this operator")
        return self._fn(*args, **kwargs)


class _Namespace:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        ops = _LOADED.get(self._name)
        if (self._name, op) in _PYTHON and (ops is None or op not in ops.NAMES):  # (torchvision registers meta
            return _PythonPacket(self._name, op)                             # kernels of its ops: ours run)
        if ops is None:
            raise AttributeError(f"torch.ops.{self._name}.{op}: no C++ operator library is loaded under gpumemnet")
        if op not in ops.NAMES:
            raise AttributeError(f"torch.ops.{self._name}.{op}: no such operator")
        return _Op(f"{self._name}.{op}", ops.IMPLEMENTED.get(op))


def __getattr__(namespace):  # torch.ops.torchvision, torch.ops.image, ...
    if namespace.startswith("__"):
        raise AttributeError(namespace)
    return _Namespace(namespace)
