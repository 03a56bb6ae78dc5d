"""F.embedding / nn.Embedding and F.one_hot (nn/_functional_layers.py, composed from the index ops' gather and
accumulating scatter): values against NumPy, gradients (repeated indices accumulate, padding_idx gets none)
against finite differences and PyTorch, max_norm's in-place renormalisation, errors, meta bytes against the
CPU."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
from gpumemnet.nn import functional as F
from gradcheck import assert_close, check_against_torch, gradcheck
from nnops_util import R, T, rng


def test_embedding_values_and_gradients():
    w = R(7, 3)
    idx = np.array([[0, 3, 3], [6, 1, 3]])
    assert_close(F.embedding(T(idx), T(w)), w[idx], 0, 0, what="embedding")
    gradcheck(lambda a: F.embedding(T(idx), a), [T(w, requires_grad=True)], what="embedding")
    a = T(w, requires_grad=True)
    F.embedding(T(idx), a, padding_idx=3).sum().backward()
    ref = np.zeros_like(w)
    np.add.at(ref, idx.reshape(-1), 1.0)
    ref[3] = 0.0
    assert_close(a.grad, ref, 0, 0, what="padding_idx row gets no gradient")


def test_embedding_against_torch():
    torch = pytest.importorskip("torch")
    w = R(9, 4)
    idx = rng.integers(0, 9, (3, 5))
    for kw in ({}, {"padding_idx": 2}, {"padding_idx": -1}):
        check_against_torch(lambda a: F.embedding(T(idx), a, **kw),
                            lambda a: torch.nn.functional.embedding(torch.tensor(idx), a, **kw), [w],
                            what=f"embedding {kw}")


def test_embedding_max_norm_like_torch():
    torch = pytest.importorskip("torch")
    w = R(6, 4) * 3
    idx = np.array([1, 4, 4, 0])
    g, t = T(w.copy()), torch.tensor(w.copy())
    out = F.embedding(T(idx), g, max_norm=1.5)
    ref = torch.nn.functional.embedding(torch.tensor(idx), t, max_norm=1.5)
    assert_close(out, ref.numpy(), 1e-12, 1e-12, what="max_norm output")
    assert_close(g, t.numpy(), 1e-12, 1e-12, what="max_norm renormalises the weight in place")


def test_embedding_module():
    torch = pytest.importorskip("torch")
    e = nn.Embedding(10, 3, padding_idx=1)
    assert repr(e) == repr(torch.nn.Embedding(10, 3, padding_idx=1))
    assert np.all(e.weight.detach().numpy()[1] == 0)
    assert e.weight.requires_grad and tuple(e.weight.shape) == (10, 3)
    out = e(gm.tensor([[1, 2], [2, 9]]))
    assert tuple(out.shape) == (2, 2, 3)
    frozen = nn.Embedding(4, 2, _weight=gm.ones(4, 2), _freeze=True)
    assert not frozen.weight.requires_grad


def test_embedding_errors():
    w = T(R(5, 2))
    with pytest.raises(IndexError, match="out of bounds"):
        F.embedding(T(np.array([5])), w)
    with pytest.raises(RuntimeError, match="scalar type Long"):
        F.embedding(T(np.array([1.0])), w)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(5, 2, padding_idx=5)
    with pytest.raises(IndexError, match="index out of range"):  # a negative index, as PyTorch refuses it
        F.embedding(T(np.array([-1])), w)


def test_embedding_meta_bytes_equal_cpu():
    def run(device):
        e = nn.Embedding(50, 8, device=device)
        idx = gm.zeros(4, 6, dtype=gm.int64, device=device)
        gm.memory.reset_peak_memory_stats(device)
        base = gm.memory.memory_allocated(device)
        e(idx).sum().backward()
        return gm.memory.max_memory_allocated(device) - base, gm.memory.memory_allocated(device) - base
    assert run("cpu") == run("meta")


def test_one_hot():
    t = np.array([[0, 3], [2, 2]])
    got = F.one_hot(T(t), 5)
    assert got.dtype == gm.int64 and tuple(got.shape) == (2, 2, 5)
    np.testing.assert_array_equal(got.numpy(), np.eye(5, dtype=np.int64)[t])
    np.testing.assert_array_equal(F.one_hot(T(t)).numpy(), np.eye(4, dtype=np.int64)[t])
    assert tuple(F.one_hot(gm.zeros(3, dtype=gm.int64, device="meta"), 7).shape) == (3, 7)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(got.numpy(), torch.nn.functional.one_hot(torch.tensor(t), 5).numpy())


def test_one_hot_errors():
    with pytest.raises(RuntimeError, match="Class values must be non-negative"):
        F.one_hot(T(np.array([-1, 0])), 3)
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        F.one_hot(T(np.array([3])), 3)
    with pytest.raises(RuntimeError, match="LongTensor"):
        F.one_hot(T(np.array([1.0])), 3)
    with pytest.raises(RuntimeError, match="empty tensor"):
        F.one_hot(gm.zeros(0, dtype=gm.int64))
