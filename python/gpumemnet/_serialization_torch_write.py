"""torch.save under the drop-in alias: the zip archive PyTorch's own torch.save writes (since 1.6), so that a
checkpoint saved by a script running on gpumemnet loads in PyTorch (`torch.load(path)`, weights_only or not) and
in gpumemnet (gm.load reads both formats, _serialization_torch.py). gm.save itself keeps writing safetensors.

The archive: `archive/data.pkl` is a protocol-2 pickle of the object in which each tensor is PyTorch's
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict())` and each storage a
persistent id ('storage', torch.<Kind>Storage, key, location, numel) naming the raw little-endian bytes in
`archive/data/<key>`, each storage whole; tensors over the same memory (tied weights, views) share one storage, as
in PyTorch.
gpumemnet's dtypes, Size and devices are written as torch's, complex tensors as torch's complex ones, whole modules
(torch.save(model): ultralytics' checkpoints, fastai's export) as PyTorch's Module state of torch.nn's classes. The
torch.* names are written as references without importing PyTorch (_Global)."""
import collections
import io
import os
import pickle
import types
import zipfile

from . import _C
from ._core.complex import ComplexTensor
from ._core.dtype import device as _device, dtype as _dtype
from ._core.size import Size
from ._serialization_pickle import _raw
from .sparse import SparseTensor

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
_REBUILD_SPARSE = _Global("torch._utils", "_rebuild_sparse_tensor")


class _Call:
    """A call written into the pickle as an argument of another (the tensor inside _rebuild_parameter's arguments):
    pickle writes an object's reduction, not a bare (function, args) tuple, as a call."""
    __slots__ = ("fn", "args")

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


class _Storage:
    """One storage of the archive: its key, kind (Float ...), device and the raw bytes' element count."""
    __slots__ = ("key", "kind", "location", "numel")

    def __init__(self, key, kind, location, numel):
        self.key, self.kind, self.location, self.numel = key, kind, location, numel


class _Pickler(pickle._Pickler):
    """The pure-Python pickler (its save_global can be given the _Global references), with tensors reduced to
    PyTorch's rebuild call over shared storages."""

    def __init__(self, file):
        super().__init__(file, protocol=2)
        self.storages = {}  # storage id -> (_Storage, a tensor over it): each written whole, as PyTorch writes them

    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", _Global("torch", obj.kind + "Storage"), obj.key, obj.location, obj.numel)
        return None

    def save(self, obj, save_persistent_id=True):
        if isinstance(obj, _dtype):
            obj = _Global("torch", obj.name)  # torch.float32 pickles as a global name
        elif isinstance(obj, types.FunctionType) and _public(obj.__module__):
            # a public function of gpumemnet (a module's self.act = F.gelu) as torch's of that name
            obj = _Global("torch" + obj.__module__[len("gpumemnet"):], obj.__qualname__)
        if isinstance(obj, _Global):
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
            return
        super().save(obj, save_persistent_id)

    def reducer_override(self, obj):
        if isinstance(obj, _C.TensorBase):
            return self._tensor(obj)
        if isinstance(obj, ComplexTensor):
            return self._tensor(obj._r, complex_=True)
        if isinstance(obj, SparseTensor):  # as PyTorch writes a COO tensor: its layout's name and its parts
            layout = _Call(_Global("torch.serialization", "_get_layout"), ("torch.sparse_coo",))
            return _REBUILD_SPARSE, (layout, (obj._i, obj._v, Size(obj._size), obj._coalesced))
        if isinstance(obj, Size):
            return _Global("torch", "Size"), (tuple(obj),)
        if isinstance(obj, _device):
            return _Global("torch", "device"), (str(obj),)
        if isinstance(obj, _module_class()):
            return _module(obj)
        return NotImplemented


    def _storage(self, t, complex_):
        """The archive's storage of t's memory, made when a tensor over it is first pickled."""
        if t._device == "meta":
            raise RuntimeError("torch.save: a meta tensor has no data to save; move it to a device first")
        if t.dtype.name not in _KIND:
            raise TypeError(f"torch.save: tensors of dtype {t.dtype} cannot be written in PyTorch's format")
        kind = ("Complex" if complex_ else "") + _KIND[t.dtype.name]
        found = self.storages.get(t._storage_id)
        if found is None:
            numel = t._storage_nbytes // t.element_size() // (2 if complex_ else 1)
            location = "cuda" if t._device.startswith("cuda") else "cpu"
            found = self.storages[t._storage_id] = (_Storage(str(len(self.storages)), kind, location, numel), t)
        if found[0].kind != kind:
            raise TypeError(f"torch.save: one memory viewed as {found[0].kind} and as {kind} cannot be written in "
                            f"PyTorch's format, where a storage has one element type")
        return found[0]

    def _tensor(self, t, complex_=False):
        storage = self._storage(t, complex_)
        offset, strides, shape = t._offset, list(t._strides), list(t.shape)
        if complex_:  # the (..., 2) real pairs as torch's complex elements
            offset, strides, shape = offset // 2, [s // 2 for s in strides[:-1]], shape[:-1]
        args = (storage, offset, tuple(shape), tuple(strides), bool(t.requires_grad and not t._is_param),
                collections.OrderedDict())
        if t._is_param:  # a Parameter (a frozen one too: it loads as a Parameter with requires_grad False)
            return _REBUILD_PARAMETER, (_Call(_REBUILD, args), bool(t.requires_grad), collections.OrderedDict())
        return _REBUILD, args


def _public(module):
    """Whether module is gpumemnet's namespace or a public module of it (gpumemnet/_pickle_names.py puts its public
    functions there)."""
    return module == "gpumemnet" or (module or "").startswith("gpumemnet.") and not module.startswith("gpumemnet._")


def _module_class():
    from .nn.modules.module import Module  # noqa: PLC0415  (nn is loaded by then; this module loads before it)
    return Module


_OBJECT_GETSTATE = getattr(object, "__getstate__", None)  # (Python 3.11 on; a class without its own has this one)
_GM_ONLY = ("_has_hooks", "_path", "_scope")  # gpumemnet's bookkeeping, remade on load (_serialization_torch)


def _module(m):
    """A module as PyTorch pickles one (copyreg's object reconstruction, then its __dict__ as state): a class of
    gpumemnet's nn as torch.nn's of that name, a script's own class as itself; hook lists as PyTorch's OrderedDicts
    of hooks, gpumemnet's own attributes left out (PyTorch's Module.__setstate__ fills in what it lacks)."""
    from . import nn  # noqa: PLC0415
    cls = type(m)
    if cls.__module__.startswith("gpumemnet.") and getattr(nn, cls.__name__, None) is cls:
        cls = _Global("torch.nn", cls.__name__)
    # a class's own __getstate__ gives the state (torchmetrics' Metric drops its wrapped methods there), as pickle
    # asks it in PyTorch
    raw = m.__getstate__() if getattr(type(m), "__getstate__", None) not in (None, _OBJECT_GETSTATE) else vars(m)
    if not isinstance(raw, dict):
        return _Global("copyreg", "_reconstructor"), (cls, object, None), raw
    state = {k: collections.OrderedDict(v.items()) if hasattr(v, "items") and isinstance(v, list) else v
             for k, v in raw.items() if k not in _GM_ONLY}
    if "_flat_weights_names" in vars(m):  # a recurrent layer: PyTorch's RNNBase unpickles its weights' list too
        state["_flat_weights"] = [m._parameters.get(n) for n in m._flat_weights_names]
    from .nn.modules._hooks import _Flagged  # noqa: PLC0415  (nn is loaded by then, as in _module_class)
    for name in ("_forward_pre_hooks", "_forward_hooks"):  # the hooks' options, in PyTorch's dicts by handle id
        hooks = vars(m).get(name)
        flagged = [(hooks.key_of(e), e) for e in list.__iter__(hooks) if type(e) is _Flagged] \
            if hasattr(hooks, "key_of") else []
        state[name + "_with_kwargs"] = collections.OrderedDict((k, True) for k, e in flagged if e.with_kwargs)
        if name == "_forward_hooks":
            state[name + "_always_called"] = collections.OrderedDict((k, True) for k, e in flagged if e.always_call)
    return _Global("copyreg", "_reconstructor"), (cls, object, None), state


def _bytes(t):
    """The raw bytes of t's whole storage (little-endian: the machines gpumemnet runs on)."""
    n = t._storage_nbytes // t.element_size()
    flat = t.detach()._as_strided((n,), (1,), 0).cpu().contiguous()
    return bytes(_raw(flat))


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """torch.save(obj, f): PyTorch's zip format (see the module's docstring); f a path or a binary file object.
    pickle_module and the legacy-format flags are accepted and change nothing (the zip format is always written)."""
    buf = io.BytesIO()
    pickler = _Pickler(buf)
    pickler.dump(obj)
    # a stream that is not a plain file (gzip.open(..., "wb"), a socket wrapper) gets the archive in one write:
    # zipfile seeks back over what it wrote, which only files and BytesIO allow
    stream = hasattr(f, "write") and not isinstance(f, (io.BytesIO, io.FileIO, io.BufferedWriter, io.BufferedRandom))
    target = io.BytesIO() if stream else os.fspath(f) if not hasattr(f, "write") else f
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(f"{_PREFIX}/data.pkl", buf.getvalue())
        z.writestr(f"{_PREFIX}/byteorder", "little")
        for st, t in pickler.storages.values():
            z.writestr(f"{_PREFIX}/data/{st.key}", _bytes(t))
        z.writestr(f"{_PREFIX}/version", "3\n")
        z.writestr(f"{_PREFIX}/.data/serialization_id", os.urandom(10).hex())
    if stream:
        f.write(target.getvalue())

