"""torch.save under the drop-in alias: the zip archive PyTorch's own torch.save writes (since 1.6), so that a
checkpoint saved by a script running on gpumemnet loads in PyTorch (`torch.load(path)`, weights_only or not) and
in gpumemnet (gm.load reads both formats, _serialization_torch.py). gm.save itself keeps writing safetensors.

The archive: `archive/data.pkl` is a protocol-2 pickle of the object in which each tensor is PyTorch's
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict())` and each storage a
persistent id ('storage', torch.<Kind>Storage, key, location, numel) naming the raw little-endian bytes in
`archive/data/<key>`; tensors over the same memory (tied weights, views) share one storage, as in PyTorch.
gpumemnet's dtypes, Size and devices are written as torch's, complex tensors as torch's complex ones. The torch.*
names are written as references without importing PyTorch (_Global)."""
import collections
import io
import os
import pickle
import zipfile

from . import _C
from ._core.complex import ComplexTensor
from ._core.dtype import device as _device, dtype as _dtype
from ._core.size import Size
from ._serialization_pickle import _raw

_KIND = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
         "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int"}
_PREFIX = "archive"


class _Global:
    """A reference to module.name, written as pickle's GLOBAL opcode (torch's names, which need not be importable
    here). Callable only so that pickle accepts it as the function of a reduce tuple."""
    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):
        raise TypeError("a reference written into a pickle, not a function")


_REBUILD = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")


class _Storage:
    """One storage of the archive: its key, kind (Float ...), device and the raw bytes' element count."""
    __slots__ = ("key", "kind", "location", "numel")

    def __init__(self, key, kind, location, numel):
        self.key, self.kind, self.location, self.numel = key, kind, location, numel


class _Pickler(pickle._Pickler):
    """The pure-Python pickler (its save_global can be given the _Global references), with tensors reduced to
    PyTorch's rebuild call over shared storages."""

    def __init__(self, file, spans):
        super().__init__(file, protocol=2)
        self.spans = spans  # storage id -> (first element, end element, _Storage)

    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", _Global("torch", obj.kind + "Storage"), obj.key, obj.location, obj.numel)
        return None

    def save(self, obj, save_persistent_id=True):
        if isinstance(obj, _dtype):
            obj = _Global("torch", obj.name)  # torch.float32 pickles as a global name
        if isinstance(obj, _Global):
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
            return
        super().save(obj, save_persistent_id)

    def reducer_override(self, obj):
        if isinstance(obj, _C.TensorBase):
            return self._tensor(obj)
        if isinstance(obj, ComplexTensor):
            return self._tensor(obj._r, complex_=True)
        if isinstance(obj, Size):
            return _Global("torch", "Size"), (tuple(obj),)
        if isinstance(obj, _device):
            return _Global("torch", "device"), (str(obj),)
        return NotImplemented

    def _tensor(self, t, complex_=False):
        first, _, storage = self.spans[t._storage_id]
        offset, strides, shape = t._offset - first, list(t._strides), list(t.shape)
        if complex_:  # the (..., 2) real pairs as torch's complex elements
            offset, strides, shape = offset // 2, [s // 2 for s in strides[:-1]], shape[:-1]
        args = (storage, offset, tuple(shape), tuple(strides), bool(t.requires_grad and not t._is_param),
                collections.OrderedDict())
        if t._is_param and t.requires_grad:  # a Parameter (torch.save of a list of parameters, an optimizer's)
            return _REBUILD_PARAMETER, ((_REBUILD, args), True, collections.OrderedDict())
        return _REBUILD, args


def _tensors(obj, out, seen):
    """Every tensor inside obj's containers (the pickler reduces the same ones)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, ComplexTensor):
        out.append((obj._r, True))
    elif isinstance(obj, _C.TensorBase):
        out.append((obj, False))
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors(v, out, seen)
    elif isinstance(obj, (list, tuple, set)):
        for v in obj:
            _tensors(v, out, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for v in vars(obj).values():
            _tensors(v, out, seen)


def _spans(tensors):
    """storage id -> (first element, end element, _Storage, a tensor over it): the part of each storage that some
    tensor reads (a complex tensor's in whole pairs)."""
    reach = {}
    for t, complex_ in tensors:
        if t._device == "meta":
            raise RuntimeError("torch.save: a meta tensor has no data to save; move it to a device first")
        if t.dtype.name not in _KIND:
            raise TypeError(f"torch.save: tensors of dtype {t.dtype} cannot be written in PyTorch's format")
        lo = t._offset
        hi = lo + 1 + sum((n - 1) * s for n, s in zip(t.shape, t._strides)) if t.numel() else lo
        kind = _KIND[t.dtype.name]
        if complex_:
            kind, lo, hi = "Complex" + kind, lo - lo % 2, hi + hi % 2
        first, end, _, _ = reach.get(t._storage_id, (lo, hi, kind, t))
        reach[t._storage_id] = (min(first, lo), max(end, hi), kind, t)
    out = {}
    for key, (sid, (first, end, kind, t)) in enumerate(reach.items()):
        numel = (end - first) // (2 if kind.startswith("Complex") else 1)
        location = "cuda" if t._device.startswith("cuda") else "cpu"
        out[sid] = (first, end, _Storage(str(key), kind, location, numel), t)
    return out


def _bytes(t, first, end):
    """The raw bytes of elements [first, end) of t's storage (little-endian: the machines gpumemnet runs on)."""
    flat = t.detach()._as_strided((end - first,), (1,), first).cpu().contiguous()
    return bytes(_raw(flat))


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """torch.save(obj, f): PyTorch's zip format (see the module's docstring); f a path or a binary file object.
    pickle_module and the legacy-format flags are accepted and change nothing (the zip format is always written)."""
    found = []
    _tensors(obj, found, set())
    spans = _spans(found)
    buf = io.BytesIO()
    _Pickler(buf, {sid: (first, end, st) for sid, (first, end, st, _) in spans.items()}).dump(obj)
    target = os.fspath(f) if not hasattr(f, "write") else f
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(f"{_PREFIX}/data.pkl", buf.getvalue())
        z.writestr(f"{_PREFIX}/byteorder", "little")
        for first, end, st, t in spans.values():
            z.writestr(f"{_PREFIX}/data/{st.key}", _bytes(t, first, end))
        z.writestr(f"{_PREFIX}/version", "3\n")
        z.writestr(f"{_PREFIX}/.data/serialization_id", os.urandom(10).hex())
