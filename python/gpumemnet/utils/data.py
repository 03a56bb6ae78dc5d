"""gpumemnet.utils.data: Dataset, TensorDataset and DataLoader with PyTorch's names and batching rules.

Batches are gpumemnet tensors allocated under the "input" category, so memory reports show the input batch
apart from activations. A TensorDataset (over NumPy arrays or tensors) is batched by gathering each field's rows
straight into the batch tensor (one copy, no per-sample Python objects); any other dataset goes sample by
sample through collate_fn (default: `default_collate`, PyTorch's rules). Loading runs in the calling process.

Shuffling: generator=None draws each epoch's order from gpumemnet's global generator (gm.manual_seed makes it
reproducible, as torch.manual_seed does for PyTorch's DataLoader); an int seeds a NumPy Generator created once,
so epochs differ from each other and a rerun repeats them; a numpy.random.Generator is used as given.

pin_memory=True puts every batch tensor in pinned host memory (Tensor.pin_memory), so that
`x.cuda(non_blocking=True)` uploads it asynchronously at full bus speed. Pinned bytes are counted under
"cpu-pinned" in gm.memory. Without a CUDA device the flag is ignored with a warning, as in PyTorch.
"""
import numbers
import warnings

import numpy as np

from .. import _C
from .._core.scope import category

__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate"]

_NP_CODE = {"float32": 0, "float64": 1, "float16": 2, "int64": 4, "bool": 5}  # exact NumPy <-> gpumemnet dtypes


class Dataset:
    """Base class of map-style datasets: implement __getitem__(index) and __len__()."""

    def __class_getitem__(cls, item):  # Dataset[T] in type hints and base classes, as PyTorch's Generic allows
        return cls

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")


class TensorDataset(Dataset):
    """Rows of tensors or NumPy arrays sharing their first dimension; item i is (t[i] for each t)."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor or array")
        for i, t in enumerate(tensors):
            if not isinstance(t, (_C.TensorBase, np.ndarray)):
                raise TypeError(f"TensorDataset: argument {i} must be a gpumemnet Tensor or a NumPy array, got "
                                f"{type(t).__name__}")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: argument {i} is 0-dimensional; every argument needs a first "
                                 f"dimension to index samples by")
            if isinstance(t, _C.TensorBase) and t._device == "meta":
                raise ValueError(f"TensorDataset: argument {i} is a meta tensor, which has no data to load")
        n = tensors[0].shape[0]
        for i, t in enumerate(tensors[1:], 1):
            if t.shape[0] != n:
                raise ValueError(f"TensorDataset: size mismatch between tensors: argument 0 has {n} rows but "
                                 f"argument {i} has {t.shape[0]} (shape {tuple(t.shape)}); all must have the same "
                                 f"first dimension")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


# ---- collation ---------------------------------------------------------------------------------------------------
def _from_numpy(a):
    with category("input"):
        return _C.from_numpy(np.ascontiguousarray(a), None, "cpu")


def default_collate(batch):
    """Stack a list of samples into a batch (PyTorch's rules): tensors and arrays are stacked along a new first
    dimension, Python floats become a float64 tensor, ints int64, bools bool; dicts collate per key, tuples and
    lists per position (returned as a list); strings stay a list."""
    if not batch:
        raise ValueError("default_collate: empty batch")
    elem = batch[0]
    if isinstance(elem, _C.TensorBase):
        shape = tuple(elem.shape)
        for i, t in enumerate(batch):
            if not isinstance(t, _C.TensorBase) or tuple(t.shape) != shape:
                raise ValueError(f"default_collate: sample {i} is {_describe(t)} but sample 0 is a tensor of "
                                 f"shape {shape}; samples must have the same shape to be stacked")
        with category("input"):
            return _C.cat([t.detach()._unsqueeze(0) for t in batch], 0)
    if isinstance(elem, np.ndarray):
        try:
            return _from_numpy(np.stack(batch))
        except ValueError as e:
            raise ValueError(f"default_collate: cannot stack the NumPy samples: {e}") from None
    if isinstance(elem, (bool, np.bool_)):
        return _from_numpy(np.asarray(batch, dtype=np.bool_))
    if isinstance(elem, numbers.Integral):
        return _from_numpy(np.asarray(batch, dtype=np.int64))
    if isinstance(elem, numbers.Real):
        return _from_numpy(np.asarray(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, dict):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, (tuple, list)):
        n = len(elem)
        for i, s in enumerate(batch):
            if not isinstance(s, (tuple, list)) or len(s) != n:
                raise ValueError(f"default_collate: sample {i} is {_describe(s)} but sample 0 has {n} fields; "
                                 f"each sample must have the same number of fields")
        return [default_collate(list(field)) for field in zip(*batch)]
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


# ---- the loader ------------------------------------------------------------------------------------------------
class DataLoader:
    """Iterate over `dataset` in batches of `batch_size` samples.

    shuffle: a new order every epoch; drop_last: skip a final incomplete batch; generator: None, an int seed or a
    numpy.random.Generator (see the module docstring); collate_fn: turns a list of samples into a batch.
    pin_memory: batches in pinned host memory (see the module docstring). num_workers is accepted for drop-in
    compatibility: loading runs in this process."""

    def __class_getitem__(cls, item):  # DataLoader[T] in type hints
        return cls

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, generator=None, collate_fn=None,
                 num_workers=0, pin_memory=False):
        if not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise TypeError(f"DataLoader: dataset must have __getitem__ and __len__ (a map-style dataset), got "
                            f"{type(dataset).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size!r}")
        if not isinstance(shuffle, (bool, np.bool_)):
            raise TypeError(f"DataLoader: shuffle must be a bool, got {type(shuffle).__name__}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got {type(collate_fn).__name__}")
        if generator is None or isinstance(generator, np.random.Generator):
            self._rng = generator
        elif isinstance(generator, numbers.Integral) and not isinstance(generator, bool):
            self._rng = np.random.default_rng(int(generator))
        else:
            raise TypeError(f"DataLoader: generator must be None, an int seed or a numpy.random.Generator, got "
                            f"{type(generator).__name__}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.generator = generator
        self.collate_fn = collate_fn
        self.num_workers = num_workers
        self.pin_memory = bool(pin_memory)
        if self.pin_memory and _C._cuda_device_count() == 0:
            warnings.warn("DataLoader: pin_memory=True, but no CUDA device is available: batches stay in ordinary "
                          "(pageable) memory", UserWarning, stacklevel=2)
            self.pin_memory = False

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self, n):
        if not self.shuffle:
            return np.arange(n, dtype=np.int64)
        rng = self._rng
        if rng is None:
            # One draw from gpumemnet's Philox stream per epoch: gm.manual_seed fixes the order.
            bits = _C.TensorBase.numpy(_C.rand((2,), 1, "cpu")).view(np.uint64)
            rng = np.random.default_rng([int(b) for b in bits])
        return rng.permutation(n).astype(np.int64)

    def __iter__(self):
        n = len(self.dataset)
        order = self._order(n)
        stop = n - n % self.batch_size if self.drop_last else n
        fast = type(self.dataset) is TensorDataset and self.collate_fn is None
        collate = self.collate_fn or default_collate
        for start in range(0, stop, self.batch_size):
            idx = order[start:start + self.batch_size]
            if fast:
                batch = [_gather(t, idx) for t in self.dataset.tensors]
            else:
                batch = collate([self.dataset[int(i)] for i in idx])
            yield _pin(batch) if self.pin_memory else batch


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
