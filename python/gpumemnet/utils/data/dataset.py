"""Datasets with PyTorch's names and rules: Dataset (map-style), IterableDataset, TensorDataset, ConcatDataset,
ChainDataset, Subset, StackDataset and random_split (lengths as counts or fractions)."""
import bisect
import itertools
import math
import warnings

import numpy as np

from ... import _C
from ..._core.random import Generator, default_generator, drawing_from
from .distributed import _RANDPERM_32BIT_LIMIT, _torch_randperm
from .sampler import _resolve_generator, _rng

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
           "StackDataset", "random_split"]


class Dataset:
    """Base class of map-style datasets: implement __getitem__(index) and __len__()."""

    def __class_getitem__(cls, item):  # Dataset[T] in type hints and base classes, as PyTorch's Generic allows
        return cls

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """Base class of datasets read as a stream: implement __iter__()."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


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
                # AssertionError, PyTorch's type (it raises it explicitly, so it stays under python -O)
                raise AssertionError(f"Size mismatch between tensors: argument 0 has {n} rows but argument {i} has "
                                     f"{t.shape[0]} (shape {tuple(t.shape)}); all must have the same first "
                                     f"dimension")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """Map-style datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        assert len(self.datasets) > 0, "datasets should not be an empty iterable"
        for d in self.datasets:
            assert not isinstance(d, IterableDataset), "ConcatDataset does not support IterableDataset"
        self.cumulative_sizes = self.cumsum(self.datasets)

    @staticmethod
    def cumsum(sequence):
        """The running total of the datasets' lengths (PyTorch's static helper, which libraries call)."""
        return list(itertools.accumulate(len(d) for d in sequence))

    @property
    def cummulative_sizes(self):
        """PyTorch's misspelled, deprecated alias of cumulative_sizes, with its warning."""
        warnings.warn("`cummulative_sizes` attribute is renamed to `cumulative_sizes`", FutureWarning, stacklevel=2)
        return self.cumulative_sizes

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        i = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[i][idx - (self.cumulative_sizes[i - 1] if i > 0 else 0)]


class ChainDataset(IterableDataset):
    """Iterable datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            assert isinstance(d, IterableDataset), "ChainDataset only supports IterableDataset"
            yield from d

    def __len__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):  # PyTorch's assert, kept under python -O
                raise AssertionError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices
        # PyTorch's check: the DataLoader fetches a Subset's batches through __getitems__, so a subclass that
        # changes __getitem__ alone would be silently bypassed
        if type(self).__getitem__ is not Subset.__getitem__ and type(self).__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. When subclassing Subset and "
                "overriding __getitem__, you must also override __getitems__ to ensure DataLoader works correctly "
                "with your custom logic. A simple implementation:\n\n"
                "def __getitems__(self, indices):\n    return [self.__getitem__(idx) for idx in indices]")

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        """One batch of samples: the wrapped dataset's __getitems__ (batched loading) when it has one."""
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[idx] for idx in indices])
        return [self.dataset[self.indices[idx]] for idx in indices]

    def __len__(self):
        return len(self.indices)


class StackDataset(Dataset):
    """Datasets of one length side by side: StackDataset(a, b)[i] is (a[i], b[i]); StackDataset(x=a, y=b)[i]
    is {"x": a[i], "y": b[i]} (PyTorch's tuple and dict forms; not both at once)."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                             "input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])
        lengths = [len(d) for d in parts]
        if any(n != self._length for n in lengths):
            names = [f"#{i}" for i in range(len(parts))] if args else list(kwargs)
            raise ValueError(f"Size mismatch between datasets: lengths "
                             f"{', '.join(f'{k}={n}' for k, n in zip(names, lengths))}")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        """One batch of samples; a part that has __getitems__ is asked for the whole batch at once."""
        def column(d):
            fetch = getattr(d, "__getitems__", None)
            if not callable(fetch):
                return [d[i] for i in indices]
            items = fetch(indices)
            if len(items) != len(indices):
                raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, got "
                                 f"{len(items)}")
            return items
        if isinstance(self.datasets, dict):
            cols = {k: column(d) for k, d in self.datasets.items()}
            return [{k: c[j] for k, c in cols.items()} for j in range(len(indices))]
        cols = [column(d) for d in self.datasets]
        return [tuple(c[j] for c in cols) for j in range(len(indices))]

    def __len__(self):
        return self._length


def _split_order(n, generator):
    """random_split's permutation. From a generator seeded and not drawn from since (torch.Generator().manual_seed(42),
    or the global one right after manual_seed), PyTorch's own order for that seed, so that a train / validation split
    made under PyTorch is the same split here (no sample changes side); the generator then moves on. Otherwise one
    of gpumemnet's draws."""
    resolved = _resolve_generator(generator, "random_split")
    gen = default_generator if generator is None else resolved
    if isinstance(gen, Generator) and gen._state[1] == 0 and n < _RANDPERM_32BIT_LIMIT:
        perm = _torch_randperm(n, gen._state[0])
        with drawing_from(resolved):
            _C.rand((2,), 1, "cpu")  # a later split from the same generator differs, as in PyTorch
        return perm
    return _rng(resolved).permutation(n).tolist()


def random_split(dataset, lengths, generator=None):
    """Split into non-overlapping Subsets of the given lengths (counts summing to len(dataset), or fractions
    summing to 1: floor(n * f) each, the remainder dealt round-robin, as PyTorch does)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * frac)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=2)
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _split_order(n, generator)
    return [Subset(dataset, perm[end - length:end])
            for end, length in zip(itertools.accumulate(lengths), lengths)]
