"""gpumemnet.utils.data: TensorDataset and DataLoader batching (over NumPy arrays, tensors and generic datasets),
the "input" category of batches, seeded and global-seed shuffling, drop_last, lengths, collation and errors."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.utils.data import DataLoader, Dataset, TensorDataset, default_collate
from gradcheck import to_numpy

_rng = np.random.default_rng(11)
X = _rng.standard_normal((10, 3, 2)).astype(np.float32)
Y = _rng.integers(0, 5, 10)  # int64


def _epoch(loader):
    return [[to_numpy(t) for t in batch] for batch in loader]


def _rows(loader):
    """The sample order of one epoch, read back from the X values (rows are distinct)."""
    order = []
    for xb, _ in loader:
        for row in to_numpy(xb):
            order.append(int(np.flatnonzero((X == row).all(axis=(1, 2)))[0]))
    return order


def test_tensor_dataset():
    ds = TensorDataset(X, gm.tensor(Y))
    assert len(ds) == 10
    x3, y3 = ds[3]
    np.testing.assert_array_equal(x3, X[3])
    assert int(y3) == Y[3]
    with pytest.raises(AssertionError, match="Size mismatch.*10 rows.*9"):
        TensorDataset(X, Y[:9])
    with pytest.raises(ValueError, match="0-dimensional"):
        TensorDataset(np.array(1.0))
    with pytest.raises(TypeError, match="argument 1 must be a gpumemnet Tensor or a NumPy array"):
        TensorDataset(X, [1, 2, 3])
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()


@pytest.mark.parametrize("as_tensors", [False, True], ids=["arrays", "tensors"])
def test_batches_in_order(as_tensors):
    data = (gm.tensor(X), gm.tensor(Y)) if as_tensors else (X, Y)
    loader = DataLoader(TensorDataset(*data), batch_size=4)
    assert len(loader) == 3
    batches = list(loader)
    assert [tuple(b[0].shape) for b in batches] == [(4, 3, 2), (4, 3, 2), (2, 3, 2)]
    for k, (xb, yb) in enumerate(batches):
        assert xb.dtype == gm.float32 and yb.dtype == gm.int64
        assert xb._category == "input" and yb._category == "input"
        np.testing.assert_array_equal(to_numpy(xb), X[4 * k:4 * k + 4])
        np.testing.assert_array_equal(to_numpy(yb), Y[4 * k:4 * k + 4])
    assert not batches[0][0].requires_grad


def test_drop_last_and_lengths():
    for n, bs, drop, expect in [(10, 4, False, 3), (10, 4, True, 2), (10, 5, True, 2), (10, 20, False, 1),
                                (10, 20, True, 0), (0, 3, False, 0)]:
        loader = DataLoader(TensorDataset(X[:n], Y[:n]), batch_size=bs, drop_last=drop)
        assert len(loader) == expect, (n, bs, drop)
        assert len(list(loader)) == expect
    sizes = [len(b[0]) for b in DataLoader(TensorDataset(X, Y), batch_size=3, drop_last=True, shuffle=True,
                                           generator=0)]
    assert sizes == [3, 3, 3]


def test_seeded_shuffle_is_reproducible_and_changes_each_epoch():
    make = lambda seed: DataLoader(TensorDataset(X, Y), batch_size=3, shuffle=True, generator=seed)  # noqa: E731
    a, b, c = make(5), make(5), make(6)
    a1, a2 = _rows(a), _rows(a)
    assert sorted(a1) == list(range(10)) and sorted(a2) == list(range(10))  # a permutation, every sample once
    assert a1 != a2, "every epoch must have a new order"
    assert [_rows(b), _rows(b)] == [a1, a2], "same seed, same sequence of epochs"
    assert _rows(c) != a1
    # labels travel with their samples
    for xb, yb in make(1):
        for row, label in zip(to_numpy(xb), to_numpy(yb)):
            assert Y[int(np.flatnonzero((X == row).all(axis=(1, 2)))[0])] == label


def test_global_seed_drives_an_unseeded_shuffle():
    loader = DataLoader(TensorDataset(X, Y), batch_size=4, shuffle=True)
    gm.manual_seed(123)
    first = [_rows(loader), _rows(loader)]
    gm.manual_seed(123)
    assert [_rows(loader), _rows(loader)] == first
    assert first[0] != first[1]


def test_numpy_generator():
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    a = DataLoader(TensorDataset(X, Y), batch_size=2, shuffle=True, generator=g1)
    b = DataLoader(TensorDataset(X, Y), batch_size=2, shuffle=True, generator=g2)
    assert _rows(a) == _rows(b)


def test_dtypes_of_numpy_fields():
    f64 = _rng.standard_normal((6, 2))
    i32 = np.arange(6, dtype=np.int32)
    flags = np.arange(6) % 2 == 0
    xb, ib, fb = next(iter(DataLoader(TensorDataset(f64, i32, flags), batch_size=6)))
    assert xb.dtype == gm.float64 and ib.dtype == gm.int32 and fb.dtype == gm.bool
    np.testing.assert_array_equal(to_numpy(ib), i32)
    np.testing.assert_array_equal(to_numpy(fb), flags)


class Pairs(Dataset):
    """A generic map-style dataset returning (ndarray, int label, float weight)."""

    def __len__(self):
        return 5

    def __getitem__(self, i):
        return X[i], int(Y[i]), float(i) / 2


def test_generic_dataset_default_collate():
    batches = list(DataLoader(Pairs(), batch_size=2))
    assert len(batches) == 3
    xb, yb, wb = batches[0]
    assert xb.dtype == gm.float32 and tuple(xb.shape) == (2, 3, 2)
    assert yb.dtype == gm.int64 and to_numpy(yb).tolist() == [int(Y[0]), int(Y[1])]
    assert wb.dtype == gm.float64 and to_numpy(wb).tolist() == [0.0, 0.5]  # Python floats: float64, as PyTorch
    assert xb._category == "input"
    assert tuple(batches[-1][0].shape) == (1, 3, 2)


def test_collate_rules():
    t = default_collate([gm.tensor([1.0, 2.0]), gm.tensor([3.0, 4.0])])
    assert to_numpy(t).tolist() == [[1.0, 2.0], [3.0, 4.0]] and t._category == "input"
    d = default_collate([{"x": 1, "name": "a"}, {"x": 2, "name": "b"}])
    assert to_numpy(d["x"]).tolist() == [1, 2] and d["name"] == ["a", "b"]
    assert to_numpy(default_collate([True, False])).tolist() == [True, False]
    with pytest.raises(ValueError, match="same shape"):
        default_collate([gm.zeros(2), gm.zeros(3)])
    with pytest.raises(ValueError, match="same number of fields"):
        default_collate([(1, 2), (1,)])
    with pytest.raises(TypeError, match="collate_fn"):
        default_collate([object(), object()])


def test_custom_collate_fn():
    seen = []

    def collate(samples):
        seen.append(len(samples))
        return len(samples)
    loader = DataLoader(TensorDataset(X, Y), batch_size=4, collate_fn=collate)
    assert list(loader) == [4, 4, 2] and seen == [4, 4, 2]


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(batch_size=-2), ValueError, "batch_size"),
    (dict(batch_size=1.5), ValueError, "batch_size"),
    (dict(batch_size=True), ValueError, "batch_size"),
    (dict(shuffle="yes"), TypeError, "shuffle"),
    (dict(generator="seed"), TypeError, "generator"),
    (dict(collate_fn=3), TypeError, "collate_fn"),
])
def test_loader_argument_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        DataLoader(TensorDataset(X, Y), **kwargs)


def test_loader_needs_a_map_style_dataset():
    with pytest.raises(TypeError, match="__getitem__ and __len__"):
        DataLoader(iter(range(3)))
