"""Batching: default_collate (PyTorch's rules), default_convert (for batch_size=None), the TensorDataset fast path
(_gather: rows straight into the batch tensor) and pinning (_pin). Batches are allocated under the "input"
category, so memory reports show the input batch apart from activations."""
import collections.abc
import copy
import re

import numpy as np

from ... import _C
from ..._core.autograd import needs_grad as _needs_grad
from ..._core.creation import stack as _stack, tensor as _tensor
from ..._core.scope import category
from ..._core.tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_NP_CODE = {"float32": 0, "float64": 1, "float16": 2, "int64": 4, "bool": 5}  # exact NumPy <-> gpumemnet dtypes


# ---- collation ---------------------------------------------------------------------------------------------------
def _from_numpy(a):
    with category("input"):
        return _C.from_numpy(np.asarray(a, order="C"), None, "cpu")


def default_collate(batch):
    """Stack a list of samples into a batch (PyTorch's rules): tensors and arrays are stacked along a new first
    dimension, Python floats become a float64 tensor, ints int64, bools bool; mappings collate per key (keeping
    their type), namedtuples per field, tuples and lists per position (a tuple as a list); strings come as they are.
    It is collate(batch, collate_fn_map=default_collate_fn_map), as in PyTorch, so a type registered in that map
    (`default_collate_fn_map[MyType] = fn`) is batched by its function here too."""
    if not batch:
        raise ValueError("default_collate: empty batch")
    return collate(batch, collate_fn_map=default_collate_fn_map)


def collate(batch, *, collate_fn_map=None):
    """Collate a batch: an element type found in collate_fn_map (exactly, else the first key it is an instance of)
    goes to that function; mappings, namedtuples and sequences collate per key or position (PyTorch's rules)."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        per_key = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}
        try:  # the sample's own mapping type, as PyTorch (an OrderedDict, a dict subclass with attributes)
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update(per_key)
                return clone
            return elem_type(per_key)
        except TypeError:
            return per_key
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple stays one
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        n = len(elem)
        for i, s in enumerate(batch):
            if not isinstance(s, collections.abc.Sequence) or len(s) != n:
                raise _C.ArgumentError(f"default_collate: each element in list of batch should be of equal size: "
                                       f"sample {i} is {_describe(s)} but sample 0 has {n} fields; each sample "
                                       f"must have the same number of fields")
        fields = [collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, f in enumerate(fields):
                    clone[i] = f
                return clone
            return elem_type(fields)
        except TypeError:
            return fields
    raise TypeError(default_collate_err_msg_format.format(elem_type))


default_collate_err_msg_format = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                                  "found {} (pass collate_fn= to batch other types)")
np_str_obj_array_pattern = re.compile(r"[SaUO]")


# PyTorch's per-type functions of default_collate_fn_map (same names and signatures), with gpumemnet's checks: the
# batch lands in the "input" category.
def collate_tensor_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if getattr(elem, "is_sparse", False):
        raise RuntimeError("Batches of sparse tensors are not currently supported by the default collate_fn; "
                           "please provide a custom collate_fn to handle them appropriately.")
    shape = tuple(elem.shape)
    for i, t in enumerate(batch):
        if not isinstance(t, _C.TensorBase) or tuple(t.shape) != shape:
            raise _C.ArgumentError(f"default_collate: stack expects each tensor to be equal size, but sample {i} is "
                                   f"{_describe(t)} and sample 0 is a tensor of shape {shape}; samples must have "
                                   f"the same shape to be stacked")
    if _needs_grad(*batch):  # stacked with its graph, as PyTorch's torch.stack (learnable inputs, augmentations)
        return _stack(batch, 0)
    with category("input"):
        return _C.cat([t.detach()._unsqueeze(0) for t in batch], 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    if np_str_obj_array_pattern.search(batch[0].dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(batch[0].dtype))
    try:
        return _from_numpy(np.stack(batch))
    except ValueError as e:
        raise _C.ArgumentError(f"default_collate: cannot stack the NumPy samples: {e}") from None


def _inferred(batch):
    """tensor(batch), its dtype inferred from every sample as PyTorch's collate does (torch.tensor / as_tensor):
    all bools give bool, ints int64 (NumPy scalars their own dtype), any float the default float dtype (NumPy
    floats theirs, promoted together). The first sample alone decided it: [3, 2.5] came out int64, [3, 2]."""
    with category("input"):
        return _tensor(batch)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return _inferred(batch)


def collate_float_fn(batch, *, collate_fn_map=None):
    return _from_numpy(np.asarray(batch, dtype=np.float64))


def collate_int_fn(batch, *, collate_fn_map=None):
    return _inferred(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch  # as given, as PyTorch's: a list at the top, a tuple as a field of tuple samples


default_collate_fn_map = {Tensor: collate_tensor_fn, np.ndarray: collate_numpy_array_fn,
                          (np.bool_, np.number, np.object_): collate_numpy_scalar_fn, float: collate_float_fn,
                          int: collate_int_fn, str: collate_str_fn, bytes: collate_str_fn}


def _describe(x):
    if isinstance(x, (_C.TensorBase, np.ndarray)):
        return f"of shape {tuple(x.shape)}"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)} fields"
    return f"a {type(x).__name__}"


def _gather(t, idx):
    """Rows idx of a tensor or array, as a new "input" tensor (one copy)."""
    if isinstance(t, np.ndarray):
        code = _NP_CODE.get(t.dtype.name) if t.dtype.isnative else None
        if code is None:  # int32, uint8, ...: gpumemnet widens them (from_numpy's rules)
            return _from_numpy(t[idx])
        with category("input"):
            out = _C.empty((len(idx),) + tuple(t.shape[1:]), code, "cpu")
        np.take(t, idx, axis=0, out=_C.TensorBase.numpy(out))
        return out
    with category("input"):
        index = _C.from_numpy(idx, None, t._device)
        return _C.index(t.detach(), 0, index)


def _pin(data):
    """data with every CPU tensor in it moved to pinned memory, through PyTorch's containers (its pin_memory):
    an object with its own pin_memory() pins itself; mappings and mutable sequences are copied and updated (so
    their type and extra attributes survive), named tuples and tuples rebuilt, other sequences rebuilt or made
    lists."""
    if isinstance(data, _C.TensorBase):
        if data._device != "cpu":
            return data
        with category("input"):
            return data.pin_memory()
    if hasattr(data, "pin_memory"):
        with category("input"):
            return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        pinned = {k: _pin(v) for k, v in data.items()}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update(pinned)
                return clone
            return type(data)(pinned)
        except TypeError:  # no copy() / update() / constructor from a dict
            return pinned
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):  # a named tuple
            return type(data)(*(_pin(v) for v in data))
        return type(data)(_pin(v) for v in data)
    if isinstance(data, collections.abc.Sequence):
        pinned = [_pin(v) for v in data]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, v in enumerate(pinned):
                    clone[i] = v
                return clone
            return type(data)(pinned)
        except TypeError:  # e.g. range
            return pinned
    return data


def default_convert(data):
    """What the loader does to each sample when batch_size=None (no batching): NumPy arrays become tensors,
    containers are converted per element, anything else is returned as is (PyTorch's default_convert)."""
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
        return _from_numpy(data)
    if isinstance(data, np.generic) and data.dtype.kind in "biuf":
        return _from_numpy(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data
