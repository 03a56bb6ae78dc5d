"""Batching: default_collate (PyTorch's rules), default_convert (for batch_size=None), the TensorDataset fast path
(_gather: rows straight into the batch tensor) and pinning (_pin). Batches are allocated under the "input"
category, so memory reports show the input batch apart from activations."""
import collections.abc
import numbers

import numpy as np

from ... import _C
from ..._core.scope import category

__all__ = ["default_collate", "default_convert"]

_NP_CODE = {"float32": 0, "float64": 1, "float16": 2, "int64": 4, "bool": 5}  # exact NumPy <-> gpumemnet dtypes


# ---- collation ---------------------------------------------------------------------------------------------------
def _from_numpy(a):
    with category("input"):
        return _C.from_numpy(np.asarray(a, order="C"), None, "cpu")


def default_collate(batch):
    """Stack a list of samples into a batch (PyTorch's rules): tensors and arrays are stacked along a new first
    dimension, Python floats become a float64 tensor, ints int64, bools bool; dicts collate per key, tuples and
    lists per position (returned as a list); strings are returned as they come."""
    if not batch:
        raise ValueError("default_collate: empty batch")
    elem = batch[0]
    if isinstance(elem, _C.TensorBase):
        shape = tuple(elem.shape)
        for i, t in enumerate(batch):
            if not isinstance(t, _C.TensorBase) or tuple(t.shape) != shape:
                raise _C.ArgumentError(f"default_collate: sample {i} is {_describe(t)} but sample 0 is a tensor of "
                                 f"shape {shape}; samples must have the same shape to be stacked")
        with category("input"):
            return _C.cat([t.detach()._unsqueeze(0) for t in batch], 0)
    if isinstance(elem, np.ndarray):
        try:
            return _from_numpy(np.stack(batch))
        except ValueError as e:
            raise _C.ArgumentError(f"default_collate: cannot stack the NumPy samples: {e}") from None
    if isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        return _from_numpy(np.asarray(batch, dtype=elem.dtype))  # NumPy scalars keep their dtype, as in PyTorch
    if isinstance(elem, (bool, np.bool_)):
        return _from_numpy(np.asarray(batch, dtype=np.bool_))
    if isinstance(elem, numbers.Integral):
        return _from_numpy(np.asarray(batch, dtype=np.int64))
    if isinstance(elem, numbers.Real):
        return _from_numpy(np.asarray(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return batch  # as given, as PyTorch's: a list at the top, a tuple as a field of tuple samples
    if isinstance(elem, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple stays one
        return type(elem)(*(default_collate(f) for f in zip(*batch)))
    if isinstance(elem, (tuple, list)):
        n = len(elem)
        for i, s in enumerate(batch):
            if not isinstance(s, (tuple, list)) or len(s) != n:
                raise _C.ArgumentError(f"default_collate: sample {i} is {_describe(s)} but sample 0 has {n} fields; "
                                 f"each sample must have the same number of fields")
        return [default_collate(field) for field in zip(*batch)]
    raise TypeError(f"default_collate: don't know how to batch samples of type {type(elem).__name__}; expected "
                    f"tensors, NumPy arrays, numbers, str, dicts, tuples or lists (or pass collate_fn=)")


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


def _pin(batch):
    """batch with every CPU tensor in it (nested in lists, tuples, dicts) moved to pinned memory."""
    if isinstance(batch, _C.TensorBase):
        if batch._device != "cpu":
            return batch
        with category("input"):
            return batch.pin_memory()
    if isinstance(batch, dict):
        return {k: _pin(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_pin(v) for v in batch) if type(batch) in (list, tuple) else batch
    return batch


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
