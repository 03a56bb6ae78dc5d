"""Several advanced indices in one expression (python/gpumemnet/_core/indexing_multi.py) against PyTorch: values,
shapes (where the broadcast index dims land), gradients of reading, assignment of tensors and numbers (index dims
that merge in memory and those that do not), index_put_ with accumulate, and the errors."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

A = np.random.default_rng(0).standard_normal((4, 5, 6, 7))
CASES = {
    "logits[arange, target]": lambda L: (L.arange(4), L.tensor([0, 4, 2, 1])),
    "broadcast after a slice": lambda L: (slice(None), L.tensor([0, -1]), L.tensor([[1], [2]])),
    "apart: B dims first": lambda L: (L.tensor([1, 2]), slice(None), L.tensor([3, 0])),
    "after an ellipsis": lambda L: (Ellipsis, L.tensor([0, 1]), L.tensor([6, 5])),
    "mask and index": lambda L: (L.tensor([True, False, True, True]), L.tensor([0, 1, 2])),
    "apart around an int": lambda L: (L.tensor([0, 1]), 2, L.tensor([3, 4])),
    "None first": lambda L: (None, L.tensor([0, 1]), L.tensor([1, 2]), slice(1, 3)),
    "lists": lambda L: ([0, 1], [2, 3]),
    "2-d and 1-d": lambda L: (L.tensor([[0, 1], [2, 3]]), L.tensor([1, 0])),
    "repeated positions": lambda L: (L.tensor([1, 1, 3]), L.tensor([2, 2, 0])),
}


@pytest.mark.parametrize("case", CASES)
def test_reading_and_its_gradient_match_pytorch(case):
    t, g = torch.tensor(A, requires_grad=True), gm.tensor(A, requires_grad=True)
    want, got = t[CASES[case](torch)], g[CASES[case](gm)]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    w = np.random.default_rng(1).standard_normal(tuple(want.shape))
    (want * torch.tensor(w)).sum().backward()
    (got * gm.tensor(w)).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c != "repeated positions"])  # which write wins is unspecified
def test_assignment_matches_pytorch(case):
    shape = tuple(torch.tensor(A)[CASES[case](torch)].shape)
    v = np.random.default_rng(2).standard_normal(shape)
    for value in (lambda L: L.tensor(v), lambda L: 2.5, lambda L: L.tensor(v[..., :1])):  # broadcast values too
        t, g = torch.tensor(A), gm.tensor(A)
        t[CASES[case](torch)] = value(torch)
        g[CASES[case](gm)] = value(gm)
        np.testing.assert_array_equal(g.numpy(), t.numpy())


def test_index_put_accumulates_repeated_positions():
    idx = (lambda L: (L.tensor([1, 1, 3]), L.tensor([2, 2, 0])))
    v = np.arange(3 * 6 * 7, dtype=np.float64).reshape(3, 6, 7)
    t, g = torch.tensor(A), gm.tensor(A)
    t.index_put_(idx(torch), torch.tensor(v), accumulate=True)
    assert g.index_put_(idx(gm), gm.tensor(v), accumulate=True) is g
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12)
    # a transposed view, whose two indexed dims do not merge in memory (the storage-offset path), writing its base
    t2, g2 = torch.tensor(A), gm.tensor(A)
    for L, x in ((torch, t2), (gm, g2)):
        x.transpose(0, 1).index_put_((L.tensor([0, 0, 4]), L.tensor([1, 1, 2])), L.tensor(1.5, dtype=L.float64),
                                     accumulate=True)
    np.testing.assert_allclose(g2.numpy(), t2.numpy(), rtol=1e-12)


def test_where_of_a_condition_alone_is_nonzero():
    c = np.array([[True, False], [True, True]])
    got, want = gm.where(gm.tensor(c)), torch.where(torch.tensor(c))
    assert isinstance(got, tuple) and len(got) == len(want) == 2
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_errors():
    for L in (torch, gm):
        x = L.zeros(3, 4)
        with pytest.raises(IndexError, match="out of bounds"):
            x[L.tensor([0, 3]), L.tensor([0, 1])]
        with pytest.raises(IndexError, match="out of bounds"):
            x[L.tensor([0, 1]), L.tensor([0, -5])] = 1.0
        with pytest.raises((IndexError, RuntimeError)):  # shapes that do not broadcast
            x[L.tensor([0, 1]), L.tensor([0, 1, 2])]


def test_several_indices_keep_no_broadcast_index_for_backward():
    """x[i, j] with i (100, 1) and j (1, 100): the merged int64 position has the result's 10000 elements (80000
    bytes, twice the float32 result); it is rebuilt in backward rather than kept. Exact bytes from the allocator."""
    x = gm.randn(100, 100, requires_grad=True)
    i, j = gm.arange(100).reshape(100, 1), gm.arange(100).reshape(1, 100).flip(1)
    before = gm.memory.memory_allocated("cpu")
    one = gm.empty(100, 100)
    result_bytes = gm.memory.memory_allocated("cpu") - before  # a (100, 100) float32 block, as allocated
    del one
    y = x[i, j]
    assert gm.memory.memory_allocated("cpu") - before == result_bytes  # the result alone
    y.pow(2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
