"""torch.utils.data._utils.collate: default_collate and default_convert (gpumemnet's, the same objects as
gm.utils.data's), and PyTorch's extensible `collate(batch, collate_fn_map=...)` with its per-type functions and
default_collate_fn_map, for code that builds its own collate from them. default_collate does not read
default_collate_fn_map (it is gpumemnet's own batching); collate(batch, collate_fn_map=default_collate_fn_map)
does."""
import collections.abc
import copy
import re

import numpy as np

from ...._core.creation import as_tensor, stack, tensor
from ...._core.dtype import float64
from ...._core.tensor import Tensor
from .._collate import default_collate, default_convert

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map", "collate_tensor_fn",
           "collate_numpy_array_fn", "collate_numpy_scalar_fn", "collate_float_fn", "collate_int_fn",
           "collate_str_fn"]

np_str_obj_array_pattern = re.compile(r"[SaUO]")
default_collate_err_msg_format = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                                  "found {}")


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
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update(per_key)
                return clone
            return elem_type(per_key)
        except TypeError:
            return per_key
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
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


def collate_tensor_fn(batch, *, collate_fn_map=None):
    if getattr(batch[0], "is_sparse", False):
        raise RuntimeError("Batches of sparse tensors are not currently supported by the default collate_fn; "
                           "please provide a custom collate_fn to handle them appropriately.")
    return stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return as_tensor(np.asarray(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    return tensor(batch, dtype=float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {Tensor: collate_tensor_fn, np.ndarray: collate_numpy_array_fn,
                          (np.bool_, np.number, np.object_): collate_numpy_scalar_fn, float: collate_float_fn,
                          int: collate_int_fn, str: collate_str_fn, bytes: collate_str_fn}
