"""gm.save / gm.load (layer 2, a library): checkpoints (model and optimizer state_dicts, or any nesting of dicts,
lists and tuples of tensors and plain values) as ONE safetensors file.

Layout. Every tensor is stored under its key path ("fc1.weight" for a flat model state_dict, so that
safetensors.torch.load_file gives PyTorch the same keys; "state.0.exp_avg" inside an optimizer's state_dict).
The rest of the structure (dict/list/tuple nesting, dict keys of any JSON type — an optimizer numbers its
parameters with ints —, ints, floats, strings, bools, None) is JSON in the safetensors metadata under
"gpumemnet"; each tensor appears there as {"__tensor__": key}. Any other object (an argparse.Namespace, a whole
nn.Module) is pickled into the structure with its tensors stored as the file's tensors, and unpickles only with
weights_only=False unless it is of PyTorch's safe types (_serialization_pickle.py). A file without that entry
(written by another program) loads as a flat {key: tensor} dict.

Memory. Writing passes each tensor's own buffer to the safetensors package by address (no copy, except for a
non-contiguous tensor, which is made contiguous first); reading allocates each tensor once and reads the file
straight into it. The reader parses the header itself (the format is an 8-byte length, a JSON header, then raw
bytes): the package's readers go through NumPy, which has no bfloat16, and would add a copy.

Safety. A write goes to a temporary file in the destination's directory, is flushed and fsync'ed, and only then
replaces the destination (os.replace, atomic on POSIX): a failure at any point leaves an existing file as it
was, and every I/O failure is an OSError naming the path (the safetensors package's own error for a full disk
is translated). The temporary file's name carries the writer's process id (".NAME.gmsave-PID-XXXX.tmp"): a save
killed mid-write (SIGKILL, power loss) cannot remove its own, so the next save to the same path removes the
temporary files of writers that no longer run. Loading validates the header completely (a truncated, foreign or
absurdly nested file is a ValueError naming the path).

Structure. Checkpoints are trees: an object that contains itself, or nests deeper than _MAX_DEPTH levels, is a
ValueError before any file is touched (JSON cannot express a cycle, and a reader would need that much stack).
"""
import ctypes
import errno
import json
import os
import pickle  # noqa: F401  (torch.serialization.pickle: code passes it as pickle_module)
import re
import shutil
import struct
import tempfile
import typing
import warnings

import numpy as np

from . import _C
from . import _serialization_pickle as _pickled
from ._serialization_pickle import _raw
from . import _serialization_torch as _torch_format
from ._core.dtype import DTYPES, device as _device, device_str
from ._core.scope import category

__all__ = ["save", "load"]

# PyTorch's type of load's map_location (Pyro imports it for its annotations): a function (storage, location) ->
# storage, a device, a str, a {location: location} dict, or None.
MAP_LOCATION = typing.Optional[typing.Union[typing.Callable[[typing.Any, str], typing.Any], _device, str,
                                            typing.Dict[str, str]]]

# PyTorch's pickle protocol for torch.save (MONAI imports it); the PyTorch-format writer
# (_serialization_torch_write.py) pickles with this protocol too
DEFAULT_PROTOCOL = 2

_FORMAT_KEY = "gpumemnet"
_FORMAT_VERSION = 1
_MAX_HEADER = 100 * 1024 * 1024  # the limit the safetensors package itself enforces
_MAX_DEPTH = 200  # nesting of dicts/lists/tuples; each level is three JSON levels, well inside json's own limit

# gpumemnet dtype code <-> safetensors header dtype (and the name the package's TensorSpec takes).
_ST_OF_CODE = {0: "F32", 1: "F64", 2: "F16", 3: "BF16", 4: "I64", 5: "BOOL", 6: "U8", 7: "I8", 8: "I16", 9: "I32"}
_CODE_OF_ST = {v: k for k, v in _ST_OF_CODE.items()}
_SPEC_NAME = {"F32": "float32", "F64": "float64", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
              "BOOL": "bool", "I8": "int8", "U8": "uint8", "I16": "int16", "U16": "uint16", "I32": "int32",
              "U32": "uint32", "U64": "uint64"}
# Dtypes gpumemnet has no tensor type for, kept as NumPy arrays (when saved as arrays, or converted on load).
_NP_OF_ST = {"I8": np.int8, "U8": np.uint8, "I16": np.int16, "U16": np.uint16, "I32": np.int32,
             "U32": np.uint32, "U64": np.uint64, "F32": np.float32, "F64": np.float64, "F16": np.float16,
             "I64": np.int64, "BOOL": np.bool_}
_ST_OF_NP = {np.dtype(v).str: k for k, v in _NP_OF_ST.items()}
_ITEMSIZE = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I64": 8, "BOOL": 1, "I8": 1, "U8": 1, "I16": 2, "U16": 2,
             "I32": 4, "U32": 4, "U64": 8}


# ---- save ------------------------------------------------------------------------------------------------------
class _Encoder:
    """Walks the object, collecting tensors under unique flat keys and building the JSON structure."""

    def __init__(self):
        self.entries = {}  # flat key -> (st_dtype, shape, data_ptr, nbytes, owner)
        self.by_id = {}    # id(tensor or array) -> flat key (one object saved twice is stored once)
        self.keep = []     # contiguous copies and the originals, alive until the write is done
        self.open = set()  # id() of the containers being walked: one met again is a reference cycle

    def key_for(self, path):
        key = path or "tensor"
        if key in self.entries or key == "__metadata__":
            n = 1
            while f"{key}#{n}" in self.entries:
                n += 1
            key = f"{key}#{n}"
        return key

    def tensor(self, t, path):
        if id(t) in self.by_id:
            return {"__tensor__": self.by_id[id(t)]}
        if t._device == "meta":
            raise ValueError(f"save: cannot save {path or 'the object'}: it is a meta tensor (shape "
                             f"{tuple(t.shape)}), which has no data")
        if t._device != "cpu":
            raise ValueError(f"save: cannot save {path or 'the object'}: tensors on {t._device} must be moved to "
                             f"the CPU first")
        self.keep.append(t)
        src = t.detach()
        if not src._is_contiguous():
            with category("workspace"):  # a temporary, freed when the file is written
                src = src.clone()
        self.keep.append(src)
        key = self.key_for(path)
        self.by_id[id(t)] = key
        st = _ST_OF_CODE[src._dtype]
        self.entries[key] = (st, list(src.shape), src._data_ptr, src.numel() * DTYPES[src._dtype].itemsize)
        return {"__tensor__": key}

    def array(self, a, path):
        if id(a) in self.by_id:
            return {"__ndarray__": self.by_id[id(a)]}
        st = _ST_OF_NP.get(a.dtype.newbyteorder("<").str if a.dtype.byteorder == ">" else a.dtype.str)
        if st is None:
            raise TypeError(f"save: cannot save {path or 'the object'}: NumPy dtype {a.dtype} has no safetensors "
                            f"equivalent here")
        self.keep.append(a)
        c = np.asarray(a, dtype=a.dtype.newbyteorder("<"), order="C")
        self.keep.append(c)
        key = self.key_for(path)
        self.by_id[id(a)] = key
        self.entries[key] = (st, list(c.shape), c.ctypes.data, c.nbytes)
        return {"__ndarray__": key}

    def encode(self, obj, path="", depth=0):
        if isinstance(obj, _C.TensorBase):
            return self.tensor(obj, path)
        if isinstance(obj, np.ndarray):
            return self.array(obj, path)
        if isinstance(obj, np.generic):
            obj = obj.item()
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, (dict, list, tuple)):
            return self.container(obj, path, depth)
        return _pickled.dumps(obj, self, path)  # any other object, as PyTorch's save pickles it


    def container(self, obj, path, depth):
        where = path or "the object"
        if id(obj) in self.open:
            raise ValueError(f"save: {where} contains itself (a reference cycle); a checkpoint must be a tree of "
                             f"dicts, lists and tuples")
        if depth >= _MAX_DEPTH:
            raise ValueError(f"save: {where} nests dicts, lists and tuples more than {_MAX_DEPTH} levels deep")
        sub = (lambda k: f"{path}.{k}") if path else (lambda k: str(k))
        self.open.add(id(obj))
        try:
            if isinstance(obj, dict):
                items = []
                for k, v in obj.items():
                    if isinstance(k, np.generic):
                        k = k.item()
                    if not (k is None or isinstance(k, (bool, int, float, str))):
                        raise TypeError(f"save: dict key {k!r} at {path or 'the top level'} has type "
                                        f"{type(k).__name__}; keys must be str, int, float, bool or None")
                    items.append([k, self.encode(v, sub(k), depth + 1)])
                return {"__dict__": items}
            enc = [self.encode(v, sub(i), depth + 1) for i, v in enumerate(obj)]
            return {"__tuple__": enc} if isinstance(obj, tuple) else enc
        finally:
            self.open.discard(id(obj))


def _write_safetensors(entries, metadata, filename):
    import safetensors
    if hasattr(safetensors, "TensorSpec"):  # safetensors >= 0.7: buffers passed by address, no copy
        specs = {k: safetensors.TensorSpec(dtype=_SPEC_NAME[st], shape=shape, data_ptr=ptr, data_len=n)
                 for k, (st, shape, ptr, n) in entries.items()}
        safetensors.serialize_file(specs, filename, metadata=metadata)
    else:  # older releases take bytes (one copy of each tensor)
        specs = {k: {"dtype": _SPEC_NAME[st], "shape": shape,
                     "data": ctypes.string_at(ptr, n) if n else b""}
                 for k, (st, shape, ptr, n) in entries.items()}
        safetensors.serialize_file(specs, filename, metadata=metadata)


def _file_mode(path):
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        # mkstemp makes the file 0600; a new checkpoint should get the usual 0666 & ~umask. Reading the umask
        # means setting it briefly (POSIX has no getter).
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _permission_error(path, where, e):
    return PermissionError(errno.EACCES, f"save: cannot write {path}: {where} is not writable "
                                         f"({e.strerror or e})", os.fspath(path))


def _as_os_error(e, path):
    """The safetensors package reports a failed write (a full disk, a file-size limit) as its own SafetensorError
    carrying "(os error N)": gm.save promises OSError for every I/O failure."""
    if isinstance(e, OSError):
        return e
    m = re.search(r"os error (\d+)", str(e))
    if m is None:
        return None
    code = int(m.group(1))
    return OSError(code, f"save: cannot write {path}: {os.strerror(code)}", path)


def _temp_prefix(path):
    return f".{os.path.basename(path)}.gmsave-"


def _remove_stale_temps(directory, path):
    """Remove the temporary files that saves to `path` by processes no longer running left behind."""
    pattern = re.compile(re.escape(_temp_prefix(path)) + r"(\d+)-[^/]*\.tmp\Z")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        m = pattern.match(name)
        if m is None or _process_runs(int(m.group(1))):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass  # another save removed it first, or it is not ours to remove: either way, not this save's concern


def _process_runs(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, as another user
        return True
    return True


def save(obj, path):
    """Write obj (a state_dict, or any nesting of dicts/lists/tuples of tensors and plain values) to path as one
    safetensors file, atomically. Tensors must be on the CPU (meta tensors have no data). Other objects are
    pickled, as PyTorch's save does (_serialization_pickle.py). `path` may also be a binary file object."""
    if hasattr(path, "write"):  # a file object: the file is made aside, then its bytes written into it
        with tempfile.TemporaryDirectory() as d:
            tmp = os.path.join(d, "checkpoint.safetensors")
            save(obj, tmp)
            with open(tmp, "rb") as src:
                shutil.copyfileobj(src, path)
        return
    path = os.fspath(path)
    if not isinstance(path, str):
        path = os.fsdecode(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "save: the path is a directory; expected a file path", path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(errno.ENOENT, f"save: the directory {directory} does not exist", path)
    enc = _Encoder()
    structure = enc.encode(obj)  # every error about the object is raised here, before any file is touched
    metadata = {"format": "pt",  # what PyTorch-side loaders (transformers) check for
                _FORMAT_KEY: json.dumps({"version": _FORMAT_VERSION, "structure": structure},
                                        separators=(",", ":"))}
    try:
        import safetensors  # noqa: F401
    except ImportError:
        raise ImportError("save: gpumemnet checkpoints are safetensors files; install the package: "
                          "pip install safetensors") from None
    _remove_stale_temps(directory, path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{_temp_prefix(path)}{os.getpid()}-", suffix=".tmp", dir=directory)
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise _permission_error(path, f"its directory {directory}", e) from e
        raise
    os.close(fd)
    try:
        _write_safetensors(enc.entries, metadata, tmp)
        with open(tmp, "rb+") as f:
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _file_mode(path))
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        os_error = _as_os_error(e, path) if isinstance(e, Exception) else None
        if os_error is not None and os_error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise _permission_error(path, path, os_error) from e
        if os_error is not None and os_error is not e:
            raise os_error from e
        raise
    finally:
        enc.keep.clear()
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


# ---- load ------------------------------------------------------------------------------------------------------
def _bad(path, why):  # a ValueError and a RuntimeError, which code written against PyTorch's torch.load catches
    return _C.ArgumentError(f"load: {path} is not a valid safetensors file: {why}")


def _read_header(f, size, path):
    """(entries sorted by offset as (key, st_dtype, shape, begin, end), metadata dict, data start)."""
    if size < 8:
        raise _bad(path, f"it is {size} bytes long, shorter than the 8-byte header length (empty or truncated?)")
    (n,) = struct.unpack("<Q", f.read(8))
    if n > _MAX_HEADER or 8 + n > size:
        raise _bad(path, f"the header length field says {n} bytes but the file has {size - 8} after it (a "
                         f"truncated file, or not a safetensors file)")
    raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _bad(path, "its header is not JSON (not a safetensors file?)") from None
    except RecursionError:
        raise _bad(path, "its header nests too deeply") from None
    if not isinstance(header, dict):
        raise _bad(path, "its header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _bad(path, "its __metadata__ is not a map of strings")
    entries = []
    for key, info in header.items():
        try:
            st, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
            ok = (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape) and
                  isinstance(b, int) and isinstance(e, int) and 0 <= b <= e)
        except (TypeError, KeyError, ValueError):
            ok = False
        if not ok:
            raise _bad(path, f"the header entry of tensor {key!r} is malformed: {info!r}")
        if st not in _ITEMSIZE:
            raise ValueError(f"load: {path}: tensor {key!r} has dtype {st}, which gpumemnet cannot load")
        numel = 1
        for d in shape:
            numel *= d
        if e - b != numel * _ITEMSIZE[st]:
            raise _bad(path, f"tensor {key!r} of dtype {st} and shape {tuple(shape)} needs {numel * _ITEMSIZE[st]} "
                             f"bytes but its data_offsets span {e - b}")
        entries.append((key, st, shape, b, e))
    entries.sort(key=lambda x: (x[3], x[4]))
    pos = 0
    for key, _, _, b, e in entries:
        if b != pos:
            raise _bad(path, f"tensor {key!r} starts at byte {b} of the data, expected {pos} (overlapping or "
                             f"missing data)")
        pos = e
    have = size - 8 - n
    if pos > have:
        raise _bad(path, f"it is truncated: its header describes {pos} bytes of tensor data but only {have} "
                         f"follow")
    if pos < have:
        raise _bad(path, f"{have - pos} unexpected bytes follow the tensor data")
    return entries, meta, 8 + n


def _readinto(f, view, path, key):
    got = 0
    while got < len(view):
        r = f.readinto(view[got:])
        if not r:
            raise _bad(path, f"it ended while reading tensor {key!r}")
        got += r


def _decode(node, tensors, arrays, path, weights_only=True):
    if isinstance(node, list):
        return [_decode(v, tensors, arrays, path, weights_only) for v in node]
    if not isinstance(node, dict):
        return node
    if "__pickle__" in node:
        return _pickled.loads(node, tensors, arrays, path, weights_only)
    if "__tensor__" in node or "__ndarray__" in node:
        key = node.get("__tensor__", node.get("__ndarray__"))
        if key not in tensors:
            raise _bad(path, f"its structure refers to a tensor {key!r} that the file does not hold")
        t = tensors[key]
        if "__ndarray__" in node:
            return arrays.get(key, t)
        return t
    if "__tuple__" in node:
        return tuple(_decode(v, tensors, arrays, path, weights_only) for v in node["__tuple__"])
    if "__dict__" in node:
        return {k: _decode(v, tensors, arrays, path, weights_only) for k, v in node["__dict__"]}
    raise _bad(path, f"its structure holds an unknown node {node!r}")


def _weights_only_by_environment(weights_only):
    """PyTorch's environment overrides: TORCH_FORCE_WEIGHTS_ONLY_LOAD makes every load weights-only, whatever the
    call says (an administrator's safety switch); TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD makes a load that does not say
    weights_only unpickle everything (old checkpoints of trusted code: mmengine's resume)."""
    def set_(name):
        return os.getenv(name, "0").lower() in ("1", "y", "yes", "true")
    force, force_no = set_("TORCH_FORCE_WEIGHTS_ONLY_LOAD"), set_("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    if force and force_no:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` "
                           "should be set, but both were set.")
    if force:
        return True
    if force_no and weights_only is None:
        warnings.warn("Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since the`weights_only` "
                      "argument was not explicitly passed to `torch.load`, forcing weights_only=False.", UserWarning,
                      stacklevel=3)
        return False
    return weights_only


def load(path, device=None, map_location=None, weights_only=None, **kwargs):
    """Read a file written by save() (or any safetensors file: it loads as a flat {key: tensor} dict), or one
    PyTorch's torch.save wrote (_serialization_torch.py). With device="meta" the tensors get their shapes and
    dtypes but no data is read (memory estimates). `device` places every tensor; by default the CPU, or for a
    PyTorch file the device each storage was saved from, as torch.load does.

    PyTorch's spelling works too: `map_location` ("cpu", "cuda:0", "meta", a device, a {saved: target} dict, or
    PyTorch's `lambda storage, loc: storage`) says where the tensors go; every tensor in a gpumemnet file was
    saved from the CPU, so a dict is looked up under "cpu" and a callable gets (tensor, "cpu") and may return a
    tensor to use instead. `weights_only` (True unless given False, as in PyTorch 2.6+) matters only for the
    objects save() pickled (anything but tensors, arrays, containers and plain values): with it, only PyTorch's
    safe types unpickle (_serialization_pickle.py). `path` may also be a binary file object."""
    unknown = set(kwargs) - {"pickle_module", "mmap", "encoding"}  # (encoding: of Python 2 pickles, not read)
    if unknown:
        raise TypeError(f"load() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if map_location is None and (isinstance(device, dict) or callable(device)):
        device, map_location = None, device  # PyTorch's second argument is map_location: torch.load(f, {...})
    weights_only = _weights_only_by_environment(weights_only)
    if kwargs.get("pickle_module") is not None:  # PyTorch's rule: an explicit pickle module unpickles everything
        if weights_only:
            raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
        weights_only = False  # (mlflow.pytorch.load_model passes its pickle module)
    if hasattr(path, "read"):  # a file object (io.BytesIO, an open file): its bytes from where it stands
        return _from_file_object(path, lambda p: load(p, device, map_location, weights_only))
    path = os.fspath(path)
    kind = _torch_format.sniff(path)  # PyTorch's own formats keep each storage's saved location
    if kind not in (None, "safetensors"):
        return _torch_format.load(path, kind, device, map_location, weights_only)
    device = "cpu" if device is None else device
    callback = None
    if isinstance(map_location, dict):
        device = map_location.get("cpu", device)
    elif callable(map_location):
        callback = map_location
    elif map_location is not None:
        device = map_location
    dev = device_str(device)
    if dev not in ("cpu", "meta"):  # another device: read on the CPU, then move each tensor there
        obj = load(path, "cpu", weights_only=weights_only)
        return _map_tensors(obj, lambda t: t.to(dev))
    obj = _load(path, dev, weights_only is not False)
    if callback is not None:
        obj = _map_tensors(obj, lambda t: _mapped(callback, t))
    return obj


def _mapped(callback, t):
    out = callback(t, "cpu")
    return out if isinstance(out, _C.TensorBase) else t


def _map_tensors(obj, fn):
    """obj with fn applied to every tensor in its dicts, lists and tuples (the structures save() writes)."""
    if isinstance(obj, _C.TensorBase):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    return obj


def _from_file_object(f, load_path):
    """load() of a file object: its remaining bytes go through a temporary file (the reader seeks by offset). A
    stream holding several torch.save archives one after another (each save appends) gives its first, and is left
    at its end, as torch.load does: the zip reader would find the last one's directory."""
    start = f.tell() if f.seekable() else None
    with tempfile.TemporaryDirectory() as d:
        tmp = os.path.join(d, "checkpoint.safetensors")
        with open(tmp, "w+b") as out:
            shutil.copyfileobj(f, out)
            size = out.tell()
            n = _first_zip_length(out, size)
            if n is not None and n < size:
                out.truncate(n)
                if start is not None:
                    f.seek(start + n)
        return load_path(tmp)


def _first_zip_length(fh, size):
    """The length of the zip archive that starts the file (None if it does not start with one): up to the first
    end-of-directory record whose directory ends right before it (zip64's found through its locator), which a
    match inside stored data would not satisfy."""
    import mmap
    fh.seek(0)
    if size < 22 or fh.read(4) != b"PK\x03\x04":
        return None
    with mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) as m:
        e = m.find(b"PK\x05\x06")
        while 0 <= e <= size - 22:
            cd_size, cd_off, comment = struct.unpack_from("<IIH", m, e + 12)
            if 0xFFFFFFFF not in (cd_size, cd_off):
                if cd_off + cd_size == e:
                    return e + 22 + comment
            elif e >= 20 and m[e - 20:e - 16] == b"PK\x06\x07":
                z64 = struct.unpack_from("<Q", m, e - 12)[0]
                if z64 + 56 <= size and m[z64:z64 + 4] == b"PK\x06\x06" and \
                        sum(struct.unpack_from("<QQ", m, z64 + 40)) == z64:
                    return e + 22 + comment
            e = m.find(b"PK\x05\x06", e + 1)
    return None


def _load(path, dev, weights_only=True):
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "load: the path is a directory; expected a safetensors file", path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        entries, meta, start = _read_header(f, size, path)
        structure = None
        if _FORMAT_KEY in meta:
            try:
                doc = json.loads(meta[_FORMAT_KEY])
                structure = doc["structure"]
                version = doc["version"]
            except (ValueError, KeyError, TypeError, RecursionError):
                raise _bad(path, f"its '{_FORMAT_KEY}' metadata is not a valid structure") from None
            if version > _FORMAT_VERSION:
                raise ValueError(f"load: {path} was written by a newer gpumemnet (format {version}; this one "
                                 f"reads up to {_FORMAT_VERSION})")
        wanted_arrays = set()
        try:
            _collect_arrays(structure, wanted_arrays)
        except RecursionError:
            raise _bad(path, f"its '{_FORMAT_KEY}' structure nests too deeply") from None
        tensors, arrays = {}, {}
        for key, st, shape, b, e in entries:
            if key in wanted_arrays or st not in _CODE_OF_ST:
                f.seek(start + b)
                buf = bytearray(e - b)
                _readinto(f, memoryview(buf), path, key)
                a = np.frombuffer(buf, dtype=np.dtype(_NP_OF_ST[st]).newbyteorder("<")).reshape(shape)
                a = a.astype(a.dtype.newbyteorder("="), copy=False)
                arrays[key] = a
                # (U8/I8/I16/I32 have codes, so only a foreign file's U16/U32/U64 get here: they widen to int64)
                tensors[key] = a if key in wanted_arrays else _C.from_numpy(a, None, dev)
                continue
            t = _C.empty(tuple(shape), _CODE_OF_ST[st], dev)
            if dev != "meta" and e > b:
                f.seek(start + b)
                _readinto(f, _raw(t), path, key)
            tensors[key] = t
    if structure is None:
        return dict((key, tensors[key]) for key, *_ in entries)
    try:
        return _decode(structure, tensors, arrays, path, weights_only)
    except (TypeError, ValueError) as e:
        if isinstance(e, ValueError) and str(e).startswith("load:"):
            raise
        raise _bad(path, "its structure metadata is malformed") from None
    except RecursionError:
        raise _bad(path, f"its '{_FORMAT_KEY}' structure nests too deeply") from None


def _collect_arrays(node, out):
    if isinstance(node, list):
        for v in node:
            _collect_arrays(v, out)
    elif isinstance(node, dict):
        if "__ndarray__" in node:
            out.add(node["__ndarray__"])
        out.update(node.get("__pickle_arrays__", ()))
        for v in node.values():
            if isinstance(v, (list, dict)):
                _collect_arrays(v, out)


# ---- torch.serialization's allow-list of the globals weights_only loads ------------------------------------
def _safe_key(entry):
    """(module, name) of an allow-list entry: an object, or (object, "module.name") as PyTorch takes it."""
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], str):
        obj, full = entry
        module, _, name = full.rpartition(".")
        return (module, name), obj
    if not hasattr(entry, "__module__") or not hasattr(entry, "__qualname__"):
        raise TypeError(f"add_safe_globals: expected a class or function (or (object, 'module.name')), got {entry!r}")
    return (entry.__module__, entry.__qualname__), entry


def add_safe_globals(safe_globals):
    """Let weights_only loads resolve these globals too (a checkpoint's own classes: argparse.Namespace ...)."""
    for entry in safe_globals:
        key, obj = _safe_key(entry)
        _torch_format.USER_SAFE[key] = obj


def get_safe_globals():
    return list(_torch_format.USER_SAFE.values())


def clear_safe_globals():
    _torch_format.USER_SAFE.clear()


class safe_globals:
    """with safe_globals([...]): the globals are admitted inside the block only."""

    def __init__(self, safe_globals):
        self.entries = list(safe_globals)

    def __enter__(self):
        self.saved = dict(_torch_format.USER_SAFE)
        add_safe_globals(self.entries)

    def __exit__(self, *exc):
        _torch_format.USER_SAFE.clear()
        _torch_format.USER_SAFE.update(self.saved)
        return False


def get_unsafe_globals_in_checkpoint(f):
    """The "module.name" of every global a torch.save checkpoint's pickle names that weights_only would refuse (not
    in PyTorch's allow-list nor added by add_safe_globals), found by reading its opcodes, never running it (darts
    asks before it loads a model). f: a path or a binary file object."""
    import pickletools  # noqa: PLC0415
    import zipfile  # noqa: PLC0415
    try:
        with zipfile.ZipFile(f) as z:
            pkl = [n for n in z.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
            data = z.read(pkl[0]) if pkl else None
    except zipfile.BadZipFile:
        data = None
    if data is None:
        raise ValueError("Expected input to be a checkpoint returned by torch.save")
    found, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            found.add(arg.replace(" ", ".", 1))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:  # module and name: the two strings pushed before it
            found.add(f"{strings[-2]}.{strings[-1]}")
        elif isinstance(arg, str) and "UNICODE" in op.name:
            strings.append(arg)
    found = {"builtins." + g[len("__builtin__."):] if g.startswith("__builtin__.") else g for g in found}  # (protocol 2)
    safe = {f"{m}.{n}" for m, n in (*_torch_format._safe(), *_torch_format.USER_SAFE)}
    return sorted(found - safe)
