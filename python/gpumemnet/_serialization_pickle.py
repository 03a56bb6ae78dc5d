"""The objects gm.save meets that are not tensors, arrays, containers or plain values (an argparse.Namespace in a
checkpoint, a whole nn.Module from `torch.save(model, path)`), as PyTorch's torch.save keeps them: pickled.

Their tensors and arrays do not go into the pickle: each is one of the file's tensors (a persistent id names it,
with the tensor's requires_grad and whether it is a Parameter), so the safetensors file still holds every byte of
data and the pickle only the objects' structure. The pickle's bytes sit in the structure as base64.

Loading follows PyTorch 2.6+: with weights_only (the default) an unpickler that takes only PyTorch's safe types
(OrderedDict, sets, gpumemnet's dtypes and devices, ...) and raises pickle.UnpicklingError for anything else,
saying that weights_only=False would load it (which runs the pickle's code: only for trusted files)."""
import base64
import ctypes
import io
import pickle

import numpy as np

from . import _C
from ._core.dtype import DTYPES

_SAFE = {("collections", "OrderedDict"), ("collections", "defaultdict"), ("builtins", "set"),
         ("builtins", "frozenset"), ("builtins", "slice"), ("builtins", "complex"), ("builtins", "range"),
         ("gpumemnet._core.dtype", "_by_name"), ("gpumemnet._core.dtype", "device"),
         ("gpumemnet._core.tensor_select", "Size"),
         ("gpumemnet.sparse", "SparseTensor"),  # its indices, values and size: tensors and ints, no code
         ("gpumemnet._core.complex", "ComplexTensor")}  # its real pairs: a tensor


def dumps(obj, encoder, path):
    """The structure node of obj: {"__pickle__": base64, "__pickle_arrays__": [keys of its arrays]}."""
    arrays = []

    class _Pickler(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, _C.TensorBase):
                key = encoder.tensor(o, f"{path}.pickled")["__tensor__"]
                return ("tensor", key, bool(o.requires_grad), bool(o._is_param))
            if isinstance(o, np.ndarray):
                key = encoder.array(o, f"{path}.pickled")["__ndarray__"]
                arrays.append(key)
                return ("ndarray", key)
            return None

    buf = io.BytesIO()
    try:
        _Pickler(buf, protocol=4).dump(obj)
    except (pickle.PicklingError, AttributeError, TypeError) as e:  # a lambda, a local class, an open file, ...
        raise TypeError(f"save: cannot save {path or 'the object'} of type {type(obj).__name__}: pickle cannot "
                        f"take it ({e})") from e
    return {"__pickle__": base64.b64encode(buf.getvalue()).decode("ascii"), "__pickle_arrays__": arrays}


def loads(node, tensors, arrays, path, weights_only):
    def persistent_load(pid):
        if pid[0] == "ndarray":
            return arrays[pid[1]]
        _, key, requires_grad, is_param = pid
        t = tensors[key]
        if is_param:
            t._is_param = True
        return t.requires_grad_() if requires_grad and t.is_floating_point() else t

    class _Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if weights_only and (module, name) not in _SAFE:
                raise pickle.UnpicklingError(
                    f"Weights only load failed: {path} holds a pickled {module}.{name}, which weights_only=True (the "
                    f"default) does not load. Re-running load with weights_only=False will load it, but that can "
                    f"run arbitrary code: do it only if you got the file from a trusted source.")
            return super().find_class(module, name)

    u = _Unpickler(io.BytesIO(base64.b64decode(node["__pickle__"])))
    u.persistent_load = persistent_load
    return u.load()


def _raw(t):
    """A writable byte view of a contiguous CPU tensor's memory (the caller keeps t alive while using it)."""
    n = t.numel() * DTYPES[t._dtype].itemsize
    if n == 0:
        return memoryview(bytearray(0))
    return memoryview((ctypes.c_char * n).from_address(t._data_ptr)).cast("B")
