"""DataLoader with PyTorch's arguments, defaults and errors.

Loading runs in the calling process. num_workers > 0 is accepted (with PyTorch's checks of prefetch_factor,
persistent_workers and timeout) and behaves as one worker running in this process (_Worker): worker_init_fn(0) is
called at the start of each pass (once, with persistent_workers), and get_worker_info() returns that worker (id 0
of 1) while its code runs, so IterableDataset sharding code reads every sample exactly once. The worker has its own
random states (torch's, NumPy's, Python's), seeded as PyTorch seeds a worker process, so a worker_init_fn that
seeds them does not reseed the training loop. timeout and prefetch_factor then change nothing.

A TensorDataset without a collate_fn is batched by gathering each field's rows straight into the batch tensor
(one copy, no per-sample Python objects); any other map-style dataset goes sample by sample through collate_fn
(default: default_collate). pin_memory=True puts every batch tensor in pinned host memory (counted under
"cpu-pinned"); without a CUDA device the flag is ignored with a warning, as in PyTorch. Shuffling and the
generator argument: see sampler.py."""
import contextlib
import numbers
import random
import typing
import warnings

import numpy as np

from ... import _C
from ..._core.random import Generator, drawing_from
from ._collate import _gather, _pin, default_collate, default_convert
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler, _resolve_generator

__all__ = ["DataLoader", "get_worker_info"]

# PyTorch's type aliases of a collate_fn and a worker_init_fn (Opacus imports _collate_fn_t for its annotations)
_T = typing.TypeVar("_T")
_collate_fn_t = typing.Callable[[typing.List[_T]], typing.Any]
_worker_init_fn_t = typing.Callable[[int], None]


class WorkerInfo:
    """What get_worker_info() returns inside a worker: id, num_workers, seed, dataset."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_worker_info = None


class _Worker:
    """The one in-process worker of a DataLoader with num_workers > 0. What a PyTorch worker process has of its own
    is swapped in around the worker's code (worker_init_fn, the dataset's __getitem__ / __iter__, collate_fn) and
    out around the caller's: get_worker_info(), and torch's, NumPy's and Python's global random states, first seeded
    as PyTorch's _worker_loop seeds them (base_seed + worker id). So `np.random.seed(...)` or
    `torch.manual_seed(42 + worker_id)` in a worker_init_fn seeds the worker's augmentations, not the training
    loop's shuffles and dropout masks (which would then repeat every epoch)."""

    def __init__(self, dataset, seed):
        self.info = WorkerInfo(id=0, num_workers=1, seed=seed, dataset=dataset)
        self.states = None  # the worker's (torch, NumPy, Python) random states between its runs

    def __enter__(self):
        global _worker_info
        self.outer = (_C.get_rng_state(), np.random.get_state(), random.getstate(), _worker_info)
        if self.states is None:
            seed = self.info.seed
            _C.manual_seed(seed)
            random.seed(seed)
            np.random.seed([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF])
        else:
            _C.set_rng_state(*self.states[0])
            np.random.set_state(self.states[1])
            random.setstate(self.states[2])
        _worker_info = self.info
        return self

    def __exit__(self, *exc):
        global _worker_info
        self.states = (_C.get_rng_state(), np.random.get_state(), random.getstate())
        _C.set_rng_state(*self.outer[0])
        np.random.set_state(self.outer[1])
        random.setstate(self.outer[2])
        _worker_info = self.outer[3]
        return False


def _take(it, n):
    """Up to n items of iterator it."""
    for _ in range(n):
        try:
            yield next(it)
        except StopIteration:
            return


def get_worker_info():
    """The worker loading data now (see the module docstring), or None in the main process."""
    return _worker_info


class _InfiniteNone:
    """The sampler of an IterableDataset: the loader reads the stream, not indices."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    def __class_getitem__(cls, item):  # DataLoader[T] in type hints
        return cls

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got {type(collate_fn).__name__}")
        if shuffle is not None and not isinstance(shuffle, (bool, np.bool_)):
            raise TypeError(f"DataLoader: shuffle must be a bool, got {type(shuffle).__name__}")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        elif not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise TypeError(f"DataLoader: dataset must have __getitem__ and __len__ (a map-style dataset) or be an "
                            f"IterableDataset, got {type(dataset).__name__}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                 "drop_last")
        elif isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if sampler is None:
            if iterable:
                sampler = _InfiniteNone()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))
        if not shuffle:
            _resolve_generator(generator, "DataLoader")  # the same type check when nothing draws from it
        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self.prefetch_factor = prefetch_factor
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self.batch_size is not None or batch_sampler is not None else default_convert)
        self._user_collate = collate_fn is not None
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = bool(persistent_workers)
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order
        self.pin_memory = bool(pin_memory)
        if self.pin_memory and _C._cuda_device_count() == 0:
            warnings.warn("DataLoader: pin_memory=True, but no CUDA device is available: batches stay in ordinary "
                          "(pageable) memory", UserWarning, stacklevel=2)
            self.pin_memory = False

    @property
    def _auto_batch(self):
        return self.batch_sampler is not None

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # TypeError when the stream has no length, as in PyTorch
            if self.batch_size is not None:
                return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self.batch_sampler) if self._auto_batch else len(self.sampler)

    def __iter__(self):
        worker = None
        if self.num_workers > 0:
            worker = getattr(self, "_persistent", None)
            if worker is None:
                # the base seed comes from the loader's generator (or the global one), as PyTorch's does
                with drawing_from(self.generator if isinstance(self.generator, Generator) else None):
                    seed = int(_C.TensorBase.numpy(_C.rand((1,), 1, "cpu"))[0] * 2 ** 53)
                worker = _Worker(self.dataset, seed)
                if self.worker_init_fn is not None:
                    with worker:
                        self.worker_init_fn(0)
                if self.persistent_workers:
                    self._persistent = worker
        for batch in self._raw_batches(worker or contextlib.nullcontext()):
            yield _pin(batch) if self.pin_memory else batch

    def _raw_batches(self, worker):
        """The batches; the dataset's and collate_fn's code runs inside `worker` (the samplers' outside it)."""
        ds = self.dataset
        if isinstance(ds, IterableDataset):
            with worker:
                samples = iter(ds)
            while True:
                with worker:
                    batch = list(_take(samples, self.batch_size if self._auto_batch else 1))
                    if not batch or (self._auto_batch and len(batch) < self.batch_size and self.drop_last):
                        return
                    out = self.collate_fn(batch if self._auto_batch else batch[0])
                yield out
        if not self._auto_batch:
            for i in self.sampler:
                with worker:
                    out = self.collate_fn(ds[i])
                yield out
            return
        # gathered straight into the batch: a TensorDataset without collate_fn whose tensors need no graph (a
        # batch of learnable data is stacked, as PyTorch's collate keeps its graph)
        fast = type(ds) is TensorDataset and not self._user_collate and \
            not any(getattr(t, "requires_grad", False) for t in ds.tensors)
        for idx in self.batch_sampler:
            with worker:
                if fast:
                    out = [_gather(t, np.asarray(idx, dtype=np.int64)) for t in ds.tensors]
                else:
                    out = self.collate_fn([ds[int(i) if isinstance(i, (np.integer,)) else i] for i in idx])
            yield out


class _BaseDataLoaderIter:
    """PyTorch's base class of a DataLoader's iterators. gpumemnet's iterators are generators (DataLoader.__iter__),
    so no object is one of these; they exist for the isinstance checks and imports of libraries (Lightning)."""


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    pass


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    pass
