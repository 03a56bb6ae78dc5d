"""gm.load of the files PyTorch's torch.save writes, without importing PyTorch.

Formats. torch.save's default since PyTorch 1.6 is a zip archive: `<name>/data.pkl` is a pickle of the object whose
storages are persistent ids ('storage', storage class, key, location, numel) naming raw storage files
`<name>/data/<key>` (little-endian unless `<name>/byteorder` says "big"). The legacy format (every file from before
1.6, and `_use_new_zipfile_serialization=False` since) is a stream of pickles: a magic number, a protocol version,
the writer's system info, the object (the same persistent ids plus a storage-view field), the sorted storage keys,
then each storage as an 8-byte element count and its bytes. PyTorch's older tar format is refused with a message.

Storages and views. Each storage is read once into one gpumemnet tensor (1-D, of its dtype); every tensor pickled
over it becomes a view of that tensor (its offset, sizes and strides checked against the storage's size first, as a
malicious file could otherwise point outside it). Tied weights, and a tensor with its transposed view, thus share
memory as they did in PyTorch; the same tensor pickled twice is one object (pickle's memo).

Safety follows PyTorch 2.6+: with weights_only (the default) only the names PyTorch's own weights-only unpickler
admits are resolved (tensors, storages, dtypes, torch.Size, devices, OrderedDict, ...); any other global is a
pickle.UnpicklingError naming it. weights_only=False resolves any global; a torch.* name becomes gpumemnet's object
of the same path (torch.nn.modules.linear.Linear -> gpumemnet.nn.modules.linear.Linear), so a whole pickled model
comes back as a gpumemnet model; other modules import as usual (under the drop-in alias, torchvision's classes are
built on gpumemnet).
"""
import _compat_pickle
import codecs
import collections
import importlib
import os
import pickle
import struct
import types
import warnings
import zipfile

import numpy as np

from . import _C
from ._core.complex import ComplexTensor
from ._core.dtype import DTYPES, _by_name, device as _device, device_str
from ._core.size import Size
from ._core.storage import TypedStorage, UntypedStorage
from ._serialization_pickle import _raw

_U8, _I64 = 6, 4
_LEGACY_MAGIC = (0x1950a86a20f9469cfc6c).to_bytes(10, "little")
_LEGACY_PROTOCOL = 1001
# torch's legacy storage classes -> the dtype name of their elements
_STORAGE_DTYPE = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
                  "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
                  "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
                  "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128", "QInt8Storage": "qint8",
                  "QUInt8Storage": "quint8", "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2",
                  "QUInt2x4Storage": "quint2x4"}
# PyTorch dtypes gpumemnet has no tensors of, with their element sizes (a file may name them; only a tensor of one
# is an error). Unsigned integers load widened to int64, as gm.load does for a safetensors file's U16/U32/U64.
_FOREIGN_ITEMSIZE = {"uint16": 2, "uint32": 4, "uint64": 8, "complex32": 4, "chalf": 4, "complex64": 8, "cfloat": 8,
                     "complex128": 16, "cdouble": 16, "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1,
                     "quint2x4": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
                     "float8_e8m0fnu": 1, "float4_e2m1fn_x2": 1, "bits8": 1, "bits16": 2, "bits1x8": 1, "bits2x4": 1,
                     "bits4x2": 1, **{f"uint{n}": 1 for n in range(1, 8)}, **{f"int{n}": 1 for n in range(1, 8)}}
_WIDENED = {"uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64}
_QSCHEMES = ("per_tensor_affine", "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric",
             "per_channel_affine_float_qparams")


class ForeignDtype:
    """A PyTorch dtype gpumemnet has no tensors of (torch.uint16, torch.complex64, torch.float8_e4m3fn, ...)."""

    def __init__(self, name):
        self.name = name
        self.itemsize = _FOREIGN_ITEMSIZE[name]

    def __repr__(self):
        return f"torch.{self.name}"


def _dtype(name):
    try:
        return _by_name(name)
    except TypeError:
        return ForeignDtype(name)


class _LoadedStorage(TypedStorage):
    """A typed storage read from the file: the memory as a 1-D tensor of its dtype (`_tensor`). It is what a bare
    storage in the file loads as; the rebuild functions take views of `_tensor`."""

    def __init__(self, tensor):
        UntypedStorage.__init__(self, tensor)  # TypedStorage's own __init__ warns that it is deprecated: not ours
        self.dtype = tensor.dtype
        self._tensor = tensor


class _StorageType:
    """What a pickled storage class (torch.FloatStorage, torch.storage.UntypedStorage) resolves to: its dtype."""

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype

    def __repr__(self):
        return f"torch.{self.name}"


def sniff(path):
    """'zip', 'legacy' or 'tar' for PyTorch's formats, 'safetensors' for a file that may be one (its own reader gives
    the details of what is wrong with it), None for a directory or a missing file (the caller's open says so);
    anything else is a ValueError that says what the file looks like."""
    try:
        with open(path, "rb") as f:
            head = f.read(32)
            size = os.fstat(f.fileno()).st_size
    except (IsADirectoryError, FileNotFoundError):
        return None
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:1] == b"\x80" and b"\x8a\x0a" + _LEGACY_MAGIC in head:  # (protocol 4+ puts a FRAME before it)
        return "legacy"
    if len(head) < 8:
        return "safetensors"
    (n,) = struct.unpack("<Q", head[:8])
    if 8 + n <= size and n <= 100 * 1024 * 1024:
        return "safetensors"
    if size >= 512 and _is_tar(path):
        return "tar"
    raise _C.ArgumentError(f"load: {path} is not a PyTorch checkpoint (zip archive or legacy pickle) nor a "
                           f"gpumemnet (safetensors) file: it starts with {head[:16]!r}; read as a safetensors file, "
                           f"its header length field says {n} bytes but the file has {size - 8} after it")


def _is_tar(path):
    import tarfile
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def load(path, kind, device, map_location, weights_only):
    """The object in the PyTorch file at path (kind: what sniff said), its tensors placed by device/map_location."""
    if kind == "tar":
        raise ValueError(f"load: {path} is in PyTorch's tar format (before PyTorch 0.4), which gpumemnet cannot read; "
                         f"convert it with PyTorch: torch.save(torch.load(path, weights_only=False), new_path)")
    placement = _Placement(path, device, map_location)
    reader = (_ZipReader if kind == "zip" else _LegacyReader)(path, placement, weights_only is not False)
    obj = reader.read()
    if weights_only is False:
        _adopt_modules(obj)
    return obj


# ---- where storages go -------------------------------------------------------------------------------------------
class _Placement:
    """PyTorch's map_location rules: None keeps each storage where it was saved (gm.load's `device`, when given,
    replaces that), a device or string sends all there, a dict maps saved locations ({"cuda:0": "cpu"}), and a
    callable gets (storage, saved location) and returns the storage to use, or None for the default. Here the
    "storage" is the storage's memory as a 1-D gpumemnet tensor (gm.load hands its own files' callables tensors)."""

    def __init__(self, path, device, map_location):
        self.path, self.device, self.map_location = path, device, map_location
        self.fn = map_location if callable(map_location) and not isinstance(map_location, (str, _device)) else None

    def target(self, location):
        m = self.map_location
        if isinstance(m, dict):
            where = m.get(location, location)
        elif m is None or self.fn is not None:
            where = location if self.device is None else self.device
        else:
            where = m
        return self._checked(where, location)

    def _checked(self, where, saved):
        name = str(where)
        if name.startswith("cuda"):
            from .cuda import is_available
            if not is_available():
                raise RuntimeError(f"load: {self.path} holds a storage saved on {saved!r}, to be placed on {name!r}, "
                                   f"but CUDA is not available here (gm.cuda.is_available() is False); pass "
                                   f"map_location='cpu' to load it on the CPU")
        try:
            return device_str(where)
        except (TypeError, ValueError, _C.ArgumentError) as e:
            raise RuntimeError(f"load: {self.path} holds a storage saved on {saved!r}, which gpumemnet cannot place "
                               f"on {where!r} ({e}); pass map_location='cpu' (or a dict such as {{{saved!r}: 'cpu'}})"
                               ) from None

    def needs_data(self, location):
        return self.fn is not None or self.target(location) != "meta"

    def place(self, base, location):
        """base (a CPU tensor, or a meta one when needs_data said no) where it belongs."""
        if base._device == "meta":
            return base
        if self.fn is not None:
            out = self.fn(base, location)
            if isinstance(out, UntypedStorage) and not isinstance(out, _LoadedStorage):
                out = out._data if base._dtype == _U8 else out._data._view_dtype(base._dtype)
            elif isinstance(out, _LoadedStorage):
                out = out._tensor
            if isinstance(out, _C.TensorBase):
                if out._dtype != base._dtype or tuple(out.shape) != tuple(base.shape):
                    raise ValueError(f"load: map_location returned a tensor of dtype {out.dtype} and shape "
                                     f"{tuple(out.shape)} for a storage of dtype {base.dtype} and shape "
                                     f"{tuple(base.shape)}; expected the storage itself or a copy of it")
                return out
        dev = self.target(location)
        return base if dev == "cpu" else base.to(dev)


# ---- tensors from storages ---------------------------------------------------------------------------------------
def _storage_tensor(storage, what):
    if isinstance(storage, _LoadedStorage):
        return storage._tensor
    if isinstance(storage, UntypedStorage):
        return storage._data
    raise pickle.UnpicklingError(f"load: {what} expected a storage as its first argument, got "
                                 f"{type(storage).__name__}")


def _ints(v, what, name):
    if not isinstance(v, (tuple, list)) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise pickle.UnpicklingError(f"load: {what}: {name} must be a tuple of ints, got {v!r}")
    return tuple(v)


def _view(storage, offset, size, stride, dtype=None, what="_rebuild_tensor_v2"):
    """The tensor of (size, stride, offset in elements) over storage, viewed as dtype (a v3 tensor over an untyped
    storage); a view of the storage's memory wherever gpumemnet has the dtype."""
    base = _storage_tensor(storage, what)
    size, stride = _ints(size, what, "size"), _ints(stride, what, "stride")
    if getattr(storage, "_complex", False):  # the (..., 2) real pairs of torch's complex elements
        _check_geometry(size + (2,), tuple(2 * s for s in stride) + (1,), 2 * offset, base.numel(), what)
        return ComplexTensor(base._as_strided(size + (2,), tuple(2 * s for s in stride) + (1,), 2 * offset))
    if isinstance(dtype, ForeignDtype):
        return _foreign(base, offset, size, stride, dtype, what)
    if dtype is not None and dtype.code != base._dtype:
        if base._dtype != _U8:
            raise pickle.UnpicklingError(f"load: {what}: a {dtype} tensor over a storage of {base.dtype}")
        if base.numel() % dtype.itemsize:
            raise pickle.UnpicklingError(f"load: {what}: a storage of {base.numel()} bytes holds no whole number of "
                                         f"{dtype} elements")
        base = base._view_dtype(dtype.code) if base.numel() else _C.empty((0,), dtype.code, base._device)
    _check_geometry(size, stride, offset, base.numel(), what)
    return base._as_strided(size, stride, offset)


def _check_geometry(size, stride, offset, numel, what):
    if len(size) != len(stride) or any(s < 0 for s in size + stride) or not isinstance(offset, int) or offset < 0:
        raise pickle.UnpicklingError(f"load: {what}: invalid geometry: size {size}, stride {stride}, offset "
                                     f"{offset!r}")
    need = 0 if 0 in size else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if need > numel:
        raise pickle.UnpicklingError(f"load: {what}: size {size}, stride {stride} and offset {offset} reach element "
                                     f"{need - 1} of a storage of {numel} elements (a corrupt file)")


def _foreign(base, offset, size, stride, dtype, what):
    if dtype.name not in _WIDENED:
        raise ValueError(f"load: the file holds a tensor of dtype torch.{dtype.name}, which gpumemnet has no tensors "
                         f"of; convert it in PyTorch first (e.g. tensor.float()) and save again")
    if base._device == "meta":
        return _C.empty(size, _I64, "meta")
    raw = base.cpu().numpy()
    if raw.size % dtype.itemsize:
        raise pickle.UnpicklingError(f"load: {what}: a storage of {raw.size} bytes holds no whole number of "
                                     f"{dtype} elements")
    elems = raw.view(np.dtype(_WIDENED[dtype.name]).newbyteorder("<"))
    _check_geometry(size, stride, offset, elems.size, what)
    isz = elems.itemsize
    arr = np.lib.stride_tricks.as_strided(elems[offset:], size, tuple(s * isz for s in stride))
    return _C.from_numpy(np.asarray(arr, order="C").astype(np.int64), None, base._device)


def _grad(t, requires_grad):
    return t.requires_grad_() if requires_grad and t.is_floating_point() else t


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _view(storage, storage_offset, size, stride, what="_rebuild_tensor")


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    return _grad(_view(storage, storage_offset, size, stride), requires_grad)


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
    return _grad(_view(storage, storage_offset, size, stride, dtype, "_rebuild_tensor_v3"), requires_grad)


def _parameter(data, requires_grad):
    from .nn.parameter import Parameter
    if not isinstance(data, _C.TensorBase):
        raise pickle.UnpicklingError(f"load: a Parameter's data must be a tensor, got {type(data).__name__}")
    return Parameter(data, requires_grad=bool(requires_grad) and data.is_floating_point())


def _rebuild_parameter(data, requires_grad, backward_hooks):
    return _parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _set_state(_parameter(data, requires_grad), state)


def _set_state(t, state):
    """The Python attributes PyTorch pickled with a tensor (a dict, or (dict, slots))."""
    if isinstance(state, tuple) and len(state) == 2:
        state = {**(state[0] or {}), **(state[1] or {})}
    for k, v in (state or {}).items():
        try:
            setattr(t, k, v)
        except (AttributeError, TypeError):
            warnings.warn(f"load: the tensor's attribute {k!r} saved by PyTorch cannot be set on a gpumemnet tensor; "
                          f"it is dropped", stacklevel=2)
    return t


def _rebuild_from_type_v2(func, new_type, args, state):
    from .nn.parameter import Parameter
    t = func(*args)
    if not isinstance(t, _C.TensorBase):  # state is set with setattr: only ever on a tensor
        raise pickle.UnpicklingError(f"load: _rebuild_from_type_v2 expected its function to build a tensor, got "
                                     f"{type(t).__name__}")
    if new_type is Parameter and not t._is_param:
        t = _parameter(t, t.requires_grad)
    elif new_type not in (Parameter, _tensor_class()):
        warnings.warn(f"load: a tensor of the subclass {getattr(new_type, '__qualname__', new_type)} loads as a plain "
                      f"gpumemnet tensor (gpumemnet tensors have no subclasses)", stacklevel=2)
    return _set_state(t, state)


def _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad=False):
    if isinstance(dtype, ForeignDtype):
        raise ValueError(f"load: the file holds a meta tensor of dtype {dtype}, which gpumemnet has no tensors of")
    return _grad(_C.empty(_ints(size, "_rebuild_meta_tensor_no_storage", "size"), dtype.code, "meta"), requires_grad)


def _rebuild_device_tensor_from_cpu_tensor(data, dtype, device, requires_grad):
    return _grad(data.to(device=device_str(device), dtype=dtype), requires_grad)


def _rebuild_device_tensor_from_numpy(data, dtype, device, requires_grad):
    return _grad(_C.from_numpy(np.asarray(data, order="C"), dtype.code, device_str(device)), requires_grad)


def _unsupported(what):
    def rebuild(*args, **kwargs):
        raise ValueError(f"load: the file holds {what}, which gpumemnet cannot load; convert them to dense tensors "
                         f"in PyTorch and save again")
    return rebuild


def _tensor_class():
    from ._core.tensor import Tensor
    return Tensor


def _rebuild_sparse_tensor(layout, data):
    """A sparse tensor as PyTorch pickles one: the layout's name (torch.serialization._get_layout, read as str)
    and (indices, values, size[, is_coalesced]). COO only: gpumemnet has no compressed layouts."""
    if str(layout) != "torch.sparse_coo":
        raise NotImplementedError(f"torch.load: the file holds a sparse tensor of layout {layout}; gpumemnet's "
                                  f"sparse tensors are COO only")
    from .sparse import sparse_coo_tensor
    coalesced = data[3] if len(data) > 3 else None
    return sparse_coo_tensor(data[0], data[1], tuple(data[2]), is_coalesced=coalesced)


def _safe_globals():
    """(module, name) -> object for every global weights_only admits: PyTorch's allow-list, in gpumemnet's terms."""
    from .nn.parameter import Parameter
    g = {("collections", "OrderedDict"): collections.OrderedDict, ("collections", "Counter"): collections.Counter,
         ("builtins", "set"): set, ("builtins", "frozenset"): frozenset, ("builtins", "bytearray"): bytearray,
         ("builtins", "complex"): complex, ("builtins", "slice"): slice, ("builtins", "range"): range,
         ("_codecs", "encode"): codecs.encode,  # how protocol 2 pickles bytes
         ("torch", "Size"): Size, ("torch", "Tensor"): _tensor_class(), ("torch._tensor", "Tensor"): _tensor_class(),
         ("torch", "device"): _device, ("torch.nn.parameter", "Parameter"): Parameter,
         ("torch.serialization", "_get_layout"): str,
         ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
         ("torch.storage", "UntypedStorage"): _StorageType("UntypedStorage", None),
         ("torch", "UntypedStorage"): _StorageType("UntypedStorage", None),
         ("torch.storage", "TypedStorage"): _StorageType("TypedStorage", None)}
    for f in (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter,
              _rebuild_parameter_with_state, _rebuild_meta_tensor_no_storage, _rebuild_device_tensor_from_cpu_tensor,
              _rebuild_device_tensor_from_numpy):
        g[("torch._utils", f.__name__)] = f
    g[("torch._utils", "_rebuild_sparse_tensor")] = _rebuild_sparse_tensor
    for name, what in (("_rebuild_qtensor", "quantized tensors"),
                       ("_rebuild_wrapper_subclass", "tensor subclasses built by __torch_dispatch__"),
                       ("_rebuild_nested_tensor", "nested tensors")):
        g[("torch._utils", name)] = _unsupported(what)
    for d in DTYPES:
        g[("torch", d.name)] = d
    for alias in ("float", "double", "half", "long", "int", "short", "char", "byte"):
        g[("torch", alias)] = _by_name(alias)
    for name in _FOREIGN_ITEMSIZE:
        g[("torch", name)] = ForeignDtype(name)
    for cls, dt in _STORAGE_DTYPE.items():
        g[("torch", cls)] = g[("torch.cuda", cls)] = _StorageType(cls, _dtype(dt))
    for q in _QSCHEMES:
        g[("torch", q)] = q
    return g


_SAFE = None


def _safe():
    global _SAFE
    if _SAFE is None:
        _SAFE = _safe_globals()
    return _SAFE


def _gm_global(module, name, path):
    """torch.X.Y.name as gpumemnet's gpumemnet.X.Y.name, else the nearest enclosing gpumemnet module's `name`
    (torch.nn.modules.linear.Linear where gpumemnet keeps Linear elsewhere)."""
    parts = module.split(".")[1:]
    while True:
        try:
            obj = getattr(importlib.import_module(".".join(["gpumemnet"] + parts)), name, None)
        except ImportError:
            obj = None
        if obj is not None:
            return obj
        if not parts:
            raise pickle.UnpicklingError(f"load: {path} pickles {module}.{name}, a PyTorch name gpumemnet does not "
                                         f"have")
        parts.pop()


def _py3_name(module, name):
    """Protocol 2 (PyTorch's) writes Python 2 names (__builtin__.set); pickle's own find_class, which ours
    replaces, maps them back."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


# (module, name) -> object: what torch.serialization.add_safe_globals / safe_globals admit under weights_only
USER_SAFE = {}


def _unpickler_class(path, weights_only, persistent_load):
    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            module, name = _py3_name(module, name)
            found = _safe().get((module, name)) or USER_SAFE.get((module, name))
            if found is not None:
                return found
            if weights_only:
                raise pickle.UnpicklingError(
                    f"Weights only load failed: {path} holds a pickled {module}.{name}, which weights_only=True (the "
                    f"default) does not load (Unsupported global: GLOBAL {module}.{name}). Re-running load with "
                    f"weights_only=False will load it, but that can run arbitrary code: do it only if you got the "
                    f"file from a trusted source.")
            if module == "torch" or module.startswith("torch."):
                return _gm_global(module, name, path)
            return super().find_class(module, name)

        def persistent_load(self, pid):
            return persistent_load(pid)

    return Unpickler


def _storage_args(pid, path, n):
    """(storage type, key, location, numel) of a ('storage', ...) persistent id of n fields."""
    if not (isinstance(pid, tuple) and len(pid) == n and pid[0] == "storage"):
        raise pickle.UnpicklingError(f"load: {path}: unknown persistent id {pid!r:.200}")
    stype, key, location, numel = pid[1:5]
    if isinstance(stype, ForeignDtype):  # PyTorch 2's legacy files may name a dtype where a storage class was
        stype = _StorageType(stype.name, stype)
    elif not isinstance(stype, _StorageType) and hasattr(stype, "code"):
        stype = _StorageType(stype.name, stype)
    if not isinstance(stype, _StorageType) or not isinstance(numel, int) or numel < 0 or \
            not isinstance(location, str):
        raise pickle.UnpicklingError(f"load: {path}: malformed storage reference {pid!r:.200}")
    return stype, str(key), location, numel


_COMPLEX_PARTS = {"complex64": "float32", "cfloat": "float32", "complex128": "float64", "cdouble": "float64"}


def _pairs(stype):
    """2 for a complex storage (read as its real and imaginary parts side by side: _core/complex.py), else 1."""
    return 2 if isinstance(stype.dtype, ForeignDtype) and stype.dtype.name in _COMPLEX_PARTS else 1


def _element(stype, path):
    """(gpumemnet dtype code, itemsize) of a storage type's elements (a complex one's real parts); untyped storages
    are bytes."""
    dt = stype.dtype
    if dt is None:
        return _U8, 1
    if _pairs(stype) == 2:
        part = _by_name(_COMPLEX_PARTS[dt.name])
        return part.code, part.itemsize
    if isinstance(dt, ForeignDtype):
        raise ValueError(f"load: {path} holds a storage of torch.{stype.name}, elements of dtype {dt} that gpumemnet "
                         f"has no tensors of; convert them in PyTorch first (e.g. tensor.float()) and save again")
    return dt.code, dt.itemsize


def _byteswap(t, itemsize):
    if itemsize > 1 and t.numel():
        np.frombuffer(_raw(t), dtype=f"u{itemsize}").byteswap(inplace=True)


def _wrap(base, stype):
    if stype.dtype is None:
        return UntypedStorage(_bytes=base)
    storage = _LoadedStorage(base)
    storage._complex = _pairs(stype) == 2
    return storage


def _readinto(f, view, what, chunk=16 << 20):
    """Fill view from f; in chunks, as a zip member's readinto reads into a temporary bytes object first."""
    got = 0
    while got < len(view):
        r = f.readinto(view[got:got + chunk])
        if not r:
            raise ValueError(f"load: {what} ended early (a truncated file)")
        got += r


# ---- the two formats ---------------------------------------------------------------------------------------------
class _ZipReader:
    def __init__(self, path, placement, weights_only):
        self.path, self.placement, self.weights_only = path, placement, weights_only

    def read(self):
        path = self.path
        try:
            zf = zipfile.ZipFile(path)
        except zipfile.BadZipFile as e:
            raise _C.ArgumentError(f"load: {path} starts like a zip archive but is not a valid one ({e}): a "
                                   f"truncated or damaged PyTorch checkpoint?") from None
        with zf:
            names = zf.namelist()
            pkl = [n for n in names if n == "data.pkl" or (n.endswith("/data.pkl") and n.count("/") == 1)]
            if not pkl:
                hint = (" (a TorchScript archive from torch.jit.save: gpumemnet cannot run TorchScript)"
                        if any(n.endswith("constants.pkl") for n in names) else
                        " (a NumPy .npz archive? load it with numpy.load)" if any(n.endswith(".npy") for n in names)
                        else "")
                raise ValueError(f"load: {path} is a zip archive but not a PyTorch checkpoint: it has no data.pkl"
                                 f"{hint}")
            prefix = pkl[0][:-len("data.pkl")]
            big = prefix + "byteorder" in names and zf.read(prefix + "byteorder").strip() == b"big"
            storages = {}

            def persistent_load(pid):
                stype, key, location, numel = _storage_args(pid, path, 5)
                if key not in storages:
                    storages[key] = _wrap(self._storage(zf, prefix, stype, key, location, numel, big), stype)
                return storages[key]

            with zf.open(pkl[0]) as f:
                try:
                    return _unpickler_class(path, self.weights_only, persistent_load)(f).load()
                except EOFError:
                    raise ValueError(f"load: {path}: its {pkl[0]} ends early (a damaged checkpoint)") from None

    def _storage(self, zf, prefix, stype, key, location, numel, big):
        code, isz = _element(stype, self.path)
        numel *= _pairs(stype)
        if not self.placement.needs_data(location):
            return _C.empty((numel,), code, "meta")
        name = f"{prefix}data/{key}"
        try:
            info = zf.getinfo(name)
        except KeyError:
            raise ValueError(f"load: {self.path} refers to storage {key!r} but has no {name} (a damaged "
                             f"checkpoint)") from None
        if info.file_size < numel * isz:  # checked before allocating: the count comes from the file
            raise ValueError(f"load: {self.path}: {name} holds {info.file_size} bytes, but its {numel} elements of "
                             f"{stype} need {numel * isz}")
        base = _C.empty((numel,), code, "cpu")
        if numel:
            with zf.open(name) as src:
                _readinto(src, _raw(base), f"{name} of {self.path}")
        if big:
            _byteswap(base, isz)
        return self.placement.place(base, location)


class _ScanObject:
    """What every global is in the legacy reader's first pass, which only collects the storages: nothing the
    pickle names is imported or called."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _ScanObject()

    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):
        pass

    def append(self, value):
        pass

    def extend(self, values):
        pass


class _LegacyReader:
    def __init__(self, path, placement, weights_only):
        self.path, self.placement, self.weights_only = path, placement, weights_only

    def read(self):
        path = self.path
        size = os.path.getsize(path)
        try:
            with open(path, "rb") as f:
                return self._read(f, size)
        except EOFError:
            raise ValueError(f"load: {path} is a legacy PyTorch checkpoint that ends early (a truncated file)") \
                from None

    def _plain(self, f, what):
        def no_storage(pid):
            raise pickle.UnpicklingError(f"load: {self.path}: a storage in the {what}")
        return _unpickler_class(self.path, True, no_storage)(f).load()

    def _read(self, f, size):
        path = self.path
        self._plain(f, "magic number")
        version = self._plain(f, "protocol version")
        if version != _LEGACY_PROTOCOL:
            raise ValueError(f"load: {path} is a legacy PyTorch checkpoint of protocol version {version!r}; "
                             f"gpumemnet reads version {_LEGACY_PROTOCOL}")
        info = self._plain(f, "system info")
        little = not isinstance(info, dict) or info.get("little_endian", True)
        start = f.tell()
        # Pass 1: the storages (their data follows the pickle, and a view needs its storage's memory to exist)
        refs = {}

        def record(pid):
            if isinstance(pid, tuple) and pid[:1] == ("storage",):
                stype, key, location, numel = _storage_args(pid, path, 6)
                refs[key] = (stype, location, numel)
            return _ScanObject  # a class: a ('module', cls, ...) id stands for a class, which NEWOBJ needs

        class Scan(_unpickler_class(path, self.weights_only, record)):
            def find_class(self, module, name):
                return _scan_global(module, name)

        Scan(f).load()
        keys = self._plain(f, "storage keys")
        if not isinstance(keys, list):
            raise ValueError(f"load: {path}: its storage key list is a {type(keys).__name__}, expected a list")
        bases = {}
        for key in keys:
            bases[str(key)] = self._storage(f, str(key), refs, little, size)
        # Pass 2: the object, over the storages just read
        f.seek(start)
        wrapped = {}

        def persistent_load(pid):
            if isinstance(pid, tuple) and pid[:1] == ("module",) and len(pid) == 4:
                return pid[1]  # a pickled nn.Module's class, with its source for PyTorch's source-change warning
            stype, key, location, numel = _storage_args(pid, path, 6)
            if key not in bases:
                raise ValueError(f"load: {path} refers to storage {key!r}, which it does not hold")
            view = pid[5]
            if view is None:
                if key not in wrapped:
                    wrapped[key] = _wrap(bases[key], stype)
                return wrapped[key]
            view_key, offset, view_size = view
            if view_key not in wrapped:
                _check_geometry((view_size,), (1,), offset, bases[key].numel(), "a storage view")
                wrapped[view_key] = _wrap(bases[key]._as_strided((view_size,), (1,), offset), stype)
            return wrapped[view_key]

        return _unpickler_class(path, self.weights_only, persistent_load)(f).load()

    def _storage(self, f, key, refs, little, size):
        if key not in refs:
            raise ValueError(f"load: {self.path} lists storage {key!r} that its object does not refer to")
        stype, location, numel = refs[key]
        code, isz = _element(stype, self.path)
        (count,) = struct.unpack("<q" if little else ">q", f.read(8))
        count, numel = count * _pairs(stype), numel * _pairs(stype)
        if count != numel or f.tell() + numel * isz > size:
            raise ValueError(f"load: {self.path}: storage {key!r} should hold {numel} elements of {stype}; the file "
                             f"says {count}, with {size - f.tell()} bytes left (a damaged checkpoint)")
        if not self.placement.needs_data(location):
            f.seek(numel * isz, os.SEEK_CUR)
            return _C.empty((numel,), code, "meta")
        base = _C.empty((numel,), code, "cpu")
        if numel:
            _readinto(f, _raw(base), f"storage {key!r} of {self.path}")
        if not little:
            _byteswap(base, isz)
        return self.placement.place(base, location)


def _scan_global(module, name):
    found = _safe().get(_py3_name(module, name))
    return found if isinstance(found, (_StorageType, ForeignDtype)) or hasattr(found, "code") else _ScanObject


# ---- whole modules -----------------------------------------------------------------------------------------------
def _adopt_modules(obj):
    """A module PyTorch pickled carries PyTorch's Module attributes (hooks as OrderedDicts, no gpumemnet
    bookkeeping): give each gpumemnet module in obj the attributes gpumemnet's Module.__init__ makes, in its forms."""
    from .nn.modules import _hooks
    from .nn.modules.module import Module
    fresh = object.__new__(Module)
    Module.__init__(fresh)
    defaults = fresh.__dict__
    stack, seen = [obj], set()
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, Module):
            d = o.__dict__
            for k, v in defaults.items():
                if k not in d:
                    d[k] = type(v)() if isinstance(v, (list, set, dict)) else v
            for name in _hooks.CONTAINERS:  # PyTorch's hook dicts (Module.__setstate__ adopts them, if it ran)
                _hooks.adopt(o, name)
            stack.extend(d["_modules"].values())
            stack.extend(v for v in d.values() if isinstance(v, (Module, dict, list, tuple)))
        elif isinstance(getattr(o, "__dict__", None), dict) and not isinstance(o, (type, types.ModuleType,
                                                                                   types.FunctionType, _C.TensorBase)):
            stack.extend(vars(o).values())  # a plain object holding modules (fastai's exported Learner)
