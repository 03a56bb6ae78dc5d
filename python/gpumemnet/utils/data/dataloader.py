"""DataLoader with PyTorch's arguments, defaults and errors.

Loading runs in the calling process. num_workers > 0 is accepted (with PyTorch's checks of prefetch_factor,
persistent_workers and timeout) and behaves as that many workers running in this process (_Worker), taking the
batches in PyTorch's order: batch k of a map-style dataset is loaded by worker k mod num_workers, and each worker
reads its own copy of an IterableDataset's stream, the active ones taking batches in turn (sharded by
get_worker_info(), each sample comes once; not sharded, once per worker, as in PyTorch). worker_init_fn(id) is
called for each worker at the start of each pass (once, with persistent_workers), and get_worker_info() returns the
worker (id of num_workers) while its code runs. Each worker has its own random states (torch's, NumPy's,
Python's), seeded as PyTorch seeds a worker process (base seed + id), so a worker_init_fn that seeds them does not
reseed the training loop. timeout and prefetch_factor then change nothing.

A TensorDataset without a collate_fn is batched by gathering each field's rows straight into the batch tensor
(one copy, no per-sample Python objects); a map-style dataset with __getitems__ is asked for each batch at once
(PyTorch's fetcher), any other goes sample by sample; either way through collate_fn (default: default_collate).
pin_memory=True puts every batch tensor in pinned host memory (counted under "cpu-pinned"); without a CUDA device
the flag is ignored with a warning, as in PyTorch. Shuffling and the generator argument: see sampler.py.

iter(loader) is loader._get_iterator(), PyTorch's _SingleProcessDataLoaderIter (num_workers == 0) or
_MultiProcessingDataLoaderIter (the in-process worker); both read only the loader attributes PyTorch's iterators
read, so libraries that build one over their own loader-like object (fastai) get the same batches."""
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
    """One in-process worker of a DataLoader with num_workers > 0. What a PyTorch worker process has of its own
    is swapped in around the worker's code (worker_init_fn, the dataset's __getitem__ / __iter__, collate_fn) and
    out around the caller's: get_worker_info(), and torch's, NumPy's and Python's global random states, first seeded
    as PyTorch's _worker_loop seeds them (base_seed + worker id). So `np.random.seed(...)` or
    `torch.manual_seed(42 + worker_id)` in a worker_init_fn seeds the worker's augmentations, not the training
    loop's shuffles and dropout masks (which would then repeat every epoch)."""

    def __init__(self, dataset, seed, id=0, num_workers=1):  # noqa: A002  (PyTorch's name)
        self.info = WorkerInfo(id=id, num_workers=num_workers, seed=seed, dataset=dataset)
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
    """Batches of a dataset: samples drawn by a sampler (shuffled or in order), collated by collate_fn, loaded by
    worker processes or in this one, optionally pinned; PyTorch's arguments and iteration."""

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
        self._dataset_kind = _DatasetKind.Iterable if iterable else _DatasetKind.Map
        self._IterableDataset_len_called = None  # PyTorch's; read by loaders built on its iterators (fastai)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self.prefetch_factor = prefetch_factor
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self.batch_size is not None or batch_sampler is not None else default_convert)
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = bool(persistent_workers)
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order
        self.pin_memory = bool(pin_memory)
        if self.pin_memory and _C._cuda_device_count() == 0:  # the flag kept as given, as PyTorch's
            warnings.warn("DataLoader: pin_memory=True, but no CUDA device is available: batches stay in ordinary "
                          "(pageable) memory", UserWarning, stacklevel=2)

    @property
    def _auto_collation(self):  # PyTorch's name: batches are collated from lists of samples
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        """What each step draws: a batch of indices (batch_sampler) or one index (sampler), as PyTorch's. Read at
        iteration time, so a batch_sampler replaced after construction (ultralytics' _RepeatSampler) is used."""
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # TypeError when the stream has no length, as in PyTorch
            if self.batch_size is not None:
                return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __iter__(self):
        return self._get_iterator()

    def _get_iterator(self):
        """A fresh iterator over the batches (PyTorch's; ultralytics' InfiniteDataLoader calls it itself)."""
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        return _MultiProcessingDataLoaderIter(self)


def _workers_of(loader):
    """The in-process workers of a loader with num_workers > 0, one per worker PyTorch would start: made (seeded
    base_seed + id, worker_init_fn(id) run) for each pass, or once with persistent_workers."""
    workers = getattr(loader, "_persistent", None)
    if workers is None:
        # the base seed comes from the loader's generator (or the global one), as PyTorch's does
        with drawing_from(loader.generator if isinstance(loader.generator, Generator) else None):
            seed = int(_C.TensorBase.numpy(_C.rand((1,), 1, "cpu"))[0] * 2 ** 53)
        n = loader.num_workers
        workers = [_Worker(loader.dataset, seed + i, i, n) for i in range(n)]
        if loader.worker_init_fn is not None:
            for i, worker in enumerate(workers):
                with worker:
                    loader.worker_init_fn(i)
        if loader.persistent_workers:
            loader._persistent = workers
    return workers


def _batches(loader, workers):
    """The batches of `loader` (a DataLoader, or an object with its attributes, as fastai's _FakeLoader): the
    dataset's and collate_fn's code runs inside a worker (the samplers' outside it). `workers` is False for the
    calling process, else True: the loader's num_workers in-process workers take the batches in turn, as PyTorch's
    worker processes deliver them in order; they are made on the first batch, so nothing is drawn before it is
    asked for."""
    pool = _workers_of(loader) if workers else [contextlib.nullcontext()]
    ds, collate, auto = loader.dataset, loader.collate_fn, loader._auto_collation
    pin = loader.pin_memory and _C._cuda_device_count() > 0
    if loader._dataset_kind == _DatasetKind.Iterable:
        # every worker reads its own copy of the stream (sharded by get_worker_info(), or not: then each sample
        # comes once per worker, as in PyTorch); the active workers take the batches in turn until each stream ends
        streams = []
        for worker in pool:
            with worker:
                streams.append(iter(ds))
        alive, nxt = [True] * len(pool), 0
        for idx in loader._index_sampler:  # one None per sample (a list of them when batching)
            out = None
            while out is None and any(alive):
                w = nxt
                while not alive[w]:
                    w = (w + 1) % len(pool)
                nxt = (w + 1) % len(pool)
                with pool[w]:
                    batch = list(_take(streams[w], len(idx) if auto else 1))
                    short = len(batch) < (len(idx) if auto else 1)
                    if batch and not (short and auto and loader.drop_last):
                        out = collate(batch if auto else batch[0])
                if short:  # this stream has ended: its worker is not asked again (PyTorch's fetcher's `ended`)
                    alive[w] = False
            if out is None:
                return
            yield _pin(out) if pin else out
        return
    # gathered straight into the batch: a TensorDataset collated by default_collate (read here: a collate_fn set
    # after the loader was made counts) whose tensors need no graph (a batch of learnable data is stacked, as
    # PyTorch's collate keeps its graph)
    fast = type(ds) is TensorDataset and auto and getattr(loader, "collate_fn", None) is default_collate and \
        not any(getattr(t, "requires_grad", False) for t in ds.tensors)
    for k, idx in enumerate(loader._index_sampler):
        try:
            with pool[k % len(pool)]:  # batch k: worker k mod num_workers, as PyTorch's in-order delivery
                if fast:
                    out = [_gather(t, np.asarray(idx, dtype=np.int64)) for t in ds.tensors]
                elif auto and getattr(ds, "__getitems__", None):  # PyTorch's fetcher: the batch in one call
                    out = collate(ds.__getitems__(idx))
                elif auto:
                    out = collate([ds[int(i) if isinstance(i, np.integer) else i] for i in idx])
                else:
                    out = collate(ds[idx])
        except Exception as e:  # noqa: BLE001 - handed to the caller, and the next batch still comes after it
            yield _Failed(e)
            continue
        yield _pin(out) if pin else out


class _Failed:
    """A batch whose dataset or collate_fn raised: the iterator raises it, and the epoch goes on after it (a loop
    that skips a bad batch gets the rest, as PyTorch's; raised inside the generator, it ended the epoch)."""
    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


class _DatasetKind:
    """PyTorch's codes of a loader's dataset kind (fastai's loader declares itself Iterable)."""
    Map = 0
    Iterable = 1


class _BaseDataLoaderIter:
    """PyTorch's base class of a DataLoader's iterators: one pass over the batches of `loader`, read from the
    attributes PyTorch's iterators read (dataset, _dataset_kind, _auto_collation, _index_sampler, collate_fn,
    drop_last, pin_memory, ...), so an object that is not a DataLoader but has them (fastai's _FakeLoader) can be
    iterated too."""
    _workers_in_process = False

    def __init__(self, loader):
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._num_yielded = 0
        self._batches = _batches(loader, self._workers_in_process)

    def __iter__(self):
        return self

    def __next__(self):
        out = next(self._batches)
        self._num_yielded += 1
        if type(out) is _Failed:
            raise out.error
        return out

    def __len__(self):
        return len(self._index_sampler)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """The iterator of a loader with num_workers == 0."""

    def __init__(self, loader):
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        if self._num_workers != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires num_workers == 0")


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """The iterator of a loader with num_workers > 0: here its workers run in this process (module docstring)."""
    _workers_in_process = True

    def __init__(self, loader):
        super().__init__(loader)
        if self._num_workers <= 0:
            raise AssertionError("_MultiProcessingDataLoaderIter requires num_workers > 0")
