"""gpumemnet.utils.data against torch.utils.data: the DataLoader options PyTorch scripts pass (sampler,
batch_sampler, batch_size=None, drop_last, num_workers with worker_init_fn / get_worker_info, timeout,
prefetch_factor, persistent_workers), default_collate over nested samples, the datasets (IterableDataset,
ConcatDataset, ChainDataset, Subset, random_split) and samplers, their lengths and errors."""
import collections

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.utils import data as D

torch = pytest.importorskip("torch")
import torch.utils.data as TD  # noqa: E402


def _np(x):
    """A batch (nested) as NumPy / plain Python for comparison."""
    if isinstance(x, (gm.Tensor, torch.Tensor)):
        return x.detach().numpy() if isinstance(x, gm.Tensor) else x.numpy()
    if isinstance(x, dict):
        return {k: _np(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_np(v) for v in x))
    if isinstance(x, (list, tuple)):
        return [_np(v) for v in x]
    return x


def _same(a, b):
    a, b = _np(a), _np(b)
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, (a, b)
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b


Point = collections.namedtuple("Point", "x y")


class Samples:
    """A map-style dataset of nested samples (both libraries index it the same way)."""

    def __init__(self, n=10):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"img": np.full((2, 3), i, np.float32), "label": i, "w": float(i) / 2, "name": f"s{i}",
                "pair": (np.int64(i), np.float32(i) * 2), "pt": Point(i, np.array([i, i + 1]))}


@pytest.mark.parametrize("kw", [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=4),
                                dict(batch_size=None), dict(batch_size=1)])
def test_default_collate_and_batching_like_torch(kw):
    got = list(D.DataLoader(Samples(), **kw))
    want = list(TD.DataLoader(Samples(), **kw))
    assert len(got) == len(want) == len(D.DataLoader(Samples(), **kw)) == len(TD.DataLoader(Samples(), **kw))
    for a, b in zip(got, want):
        _same(a, b)


def test_samplers_and_batch_sampler_like_torch():
    ds = Samples(11)
    for kw in (dict(sampler=D.SequentialSampler(ds), batch_size=4),
               dict(batch_sampler=D.BatchSampler(D.SequentialSampler(ds), 3, drop_last=False)),
               dict(batch_sampler=[[0, 5], [3], [10, 1, 2]])):
        tkw = {k: (TD.SequentialSampler(ds) if k == "sampler" else
                   TD.BatchSampler(TD.SequentialSampler(ds), 3, False) if isinstance(v, D.BatchSampler) else v)
               for k, v in kw.items()}
        got, want = list(D.DataLoader(ds, **kw)), list(TD.DataLoader(ds, **tkw))
        assert len(got) == len(want)
        for a, b in zip(got, want):
            _same(a, b)


def test_random_samplers_are_permutations_and_seeded():
    ds = list(range(20))
    gm.manual_seed(1)
    a = list(D.RandomSampler(ds))
    gm.manual_seed(1)
    b = list(D.RandomSampler(ds))
    assert a == b and sorted(a) == ds and a != ds
    s = D.RandomSampler(ds, generator=5)
    e1, e2 = list(s), list(s)
    assert e1 != e2 and list(D.RandomSampler(ds, generator=5)) == e1  # epochs differ, reruns repeat
    assert len(list(D.RandomSampler(ds, num_samples=45))) == 45
    assert sorted(list(D.RandomSampler(ds, num_samples=45))[:40]) == sorted(ds * 2)
    r = list(D.RandomSampler(ds, replacement=True, num_samples=100))
    assert len(r) == 100 and set(r) <= set(ds) and len(set(r)) < 20 + 1
    sub = list(D.SubsetRandomSampler([3, 7, 9, 11]))
    assert sorted(sub) == [3, 7, 9, 11]
    w = list(D.WeightedRandomSampler([0, 0, 1.0, 0], 10))
    assert w == [2] * 10
    w = list(D.WeightedRandomSampler(gm.tensor([0.1, 0.9, 0.0]), 2, replacement=False))
    assert sorted(w) == [0, 1]
    assert len(D.WeightedRandomSampler([1, 2], 7)) == 7 == len(TD.WeightedRandomSampler([1, 2], 7))
    class SeededGenerator:  # what a script's torch.Generator().manual_seed(7) offers
        def initial_seed(self):
            return 7
    assert list(D.RandomSampler(ds, generator=SeededGenerator())) == list(D.RandomSampler(ds, generator=7))
    with pytest.raises(TypeError, match="generator"):
        D.RandomSampler(ds, generator="seed")
    dl = D.DataLoader(ds, batch_size=6, shuffle=True, generator=3)
    batches = [b.numpy().tolist() for b in dl]
    assert sorted(sum(batches, [])) == ds and [len(b) for b in batches] == [6, 6, 6, 2]


@pytest.mark.parametrize("make,exc", [
    (lambda M, ds: M.RandomSampler(ds, replacement=1), TypeError),
    (lambda M, ds: M.RandomSampler(ds, num_samples=0), ValueError),
    (lambda M, ds: M.WeightedRandomSampler([[1.0, 2.0]], 3), ValueError),
    (lambda M, ds: M.WeightedRandomSampler([1.0], 0), ValueError),
    (lambda M, ds: M.BatchSampler(range(3), 0, False), ValueError),
    (lambda M, ds: M.BatchSampler(range(3), 2, 1), ValueError),
    (lambda M, ds: M.WeightedRandomSampler([1.0], 2, replacement=1), ValueError),
    (lambda M, ds: M.DataLoader(ds, sampler=range(3), shuffle=True), ValueError),
    (lambda M, ds: M.DataLoader(ds, batch_sampler=[[0]], batch_size=2), ValueError),
    (lambda M, ds: M.DataLoader(ds, batch_sampler=[[0]], drop_last=True), ValueError),
    (lambda M, ds: M.DataLoader(ds, batch_size=None, drop_last=True), ValueError),
    (lambda M, ds: M.DataLoader(ds, batch_size=0), ValueError),
    (lambda M, ds: M.DataLoader(ds, num_workers=-1), ValueError),
    (lambda M, ds: M.DataLoader(ds, timeout=-1), ValueError),
    (lambda M, ds: M.DataLoader(ds, prefetch_factor=2), ValueError),
    (lambda M, ds: M.DataLoader(ds, persistent_workers=True), ValueError),
    (lambda M, ds: M.random_split(ds, [3, 3]), ValueError),
    (lambda M, ds: M.ConcatDataset([]), AssertionError),
])
def test_errors_like_torch(make, exc):
    ds = list(range(10))
    with pytest.raises(exc) as t:
        make(TD, ds)
    with pytest.raises(exc) as g:
        make(D, ds)
    if exc is ValueError:
        assert str(g.value).split(",")[0].split(":")[0] == str(t.value).split(",")[0].split(":")[0]


class Stream(D.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = D.get_worker_info()
        lo, step = (0, 1) if info is None else (info.id, info.num_workers)  # the usual sharding idiom
        for i in range(lo, self.n, step):
            yield np.array([i, 2 * i], np.int64)

    def __len__(self):
        return self.n


def test_iterable_dataset_and_workers():
    seen = []
    dl = D.DataLoader(Stream(7), batch_size=3, num_workers=2, worker_init_fn=seen.append, timeout=5,
                      prefetch_factor=4, persistent_workers=True)
    batches = [b.numpy() for b in dl]
    assert seen == [0, 1] and D.get_worker_info() is None
    assert [b.shape for b in batches] == [(3, 2), (3, 2), (1, 2)] and len(dl) == 3
    # the two workers' shards, their batches in turn (PyTorch's order): 0 2 4 | 1 3 5 | 6
    np.testing.assert_array_equal(np.concatenate(batches)[:, 0], [0, 2, 4, 1, 3, 5, 6])
    assert len(D.DataLoader(Stream(7), batch_size=3, drop_last=True)) == 2
    assert [b.numpy().tolist() for b in D.DataLoader(Stream(3), batch_size=None)] == [[0, 0], [1, 2], [2, 4]]
    with pytest.raises(ValueError, match="shuffle"):
        D.DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="sampler"):
        D.DataLoader(Stream(3), sampler=[0])
    chained = list(D.DataLoader(Stream(2) + Stream(3), batch_size=None))
    assert len(chained) == 5


def test_concat_subset_random_split():
    a, b = list(range(5)), list(range(100, 103))
    for M in (D, TD):
        c = M.ConcatDataset([a, b])
        assert len(c) == 8 and c[5] == 100 and c[-1] == 102 and c[4] == 4
        with pytest.raises(ValueError, match="absolute value"):
            c[-9]
    s = D.Subset(list(range(10, 20)), [3, 1, 4])
    assert len(s) == 3 and [s[i] for i in range(3)] == [13, 11, 14]
    assert isinstance(D.TensorDataset(np.zeros((2, 1))) + D.TensorDataset(np.ones((3, 1))), D.ConcatDataset)
    ds = list(range(10))
    for lengths in ([3, 7], [0.3, 0.7], [0.25, 0.25, 0.5], [1 / 3] * 3):
        parts = D.random_split(ds, lengths, generator=0)
        tparts = TD.random_split(ds, lengths, generator=torch.Generator().manual_seed(0))
        assert [len(p) for p in parts] == [len(p) for p in tparts]
        assert sorted(sum(([p[i] for i in range(len(p))] for p in parts), [])) == ds
    gm.manual_seed(4)
    x = [list(p.indices) for p in D.random_split(ds, [5, 5])]
    gm.manual_seed(4)
    assert x == [list(p.indices) for p in D.random_split(ds, [5, 5])]
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        D.random_split(list(range(2)), [0.9, 0.1])


def test_tensor_dataset_fast_path_with_samplers():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    ds = D.TensorDataset(gm.tensor(x), x[:, 0].astype(np.int64))
    batches = list(D.DataLoader(ds, batch_sampler=[[9, 0], [4, 4, 1]]))
    np.testing.assert_array_equal(batches[1][0].numpy(), x[[4, 4, 1]])
    np.testing.assert_array_equal(batches[0][1].numpy(), [18, 0])
    sub = list(D.DataLoader(ds, sampler=D.SubsetRandomSampler([2, 5]), batch_size=5))
    assert sorted(sub[0][1].numpy().tolist()) == [4, 10]


def test_default_collate_numpy_scalars_and_namedtuples():
    got = D.default_collate([Point(np.float32(1), 2), Point(np.float32(3), 4)])
    want = TD.default_collate([Point(np.float32(1), 2), Point(np.float32(3), 4)])
    _same(got, want)
    assert got.x.dtype == gm.float32
    _same(D.default_convert((np.arange(3), "a", [1.5])), TD.default_convert((np.arange(3), "a", [1.5])))
