"""Autograd and saved tensors: in-place ops against the version counter (a saved tensor modified in place is an
error, correct in-place gradients otherwise), saved-tensor hooks, and the freeing of saved tensors after backward
(by exact allocator bytes, without the cycle collector)."""
import gc

import numpy as np
import pytest

import gpumemnet as gm
from autograd_util import P, R
from gradcheck import assert_close, gradcheck, to_numpy


# ---- in-place and the version counter -----------------------------------------------------------------------------
def test_inplace_modification_of_saved_tensor_raises():
    x = gm.tensor(R(3), requires_grad=True)
    a = x * 1.0
    b = a * x  # Mul saves a and x
    a += 1.0
    with pytest.raises(RuntimeError, match="in-place"):
        b.sum().backward()


def test_inplace_on_saved_constant_raises():
    x = gm.tensor(R(3), requires_grad=True)
    c = gm.tensor(R(3))
    y = x * c
    c += 1.0  # c requires no grad, so this is allowed; but Mul saved it
    with pytest.raises(RuntimeError, match="modified by an in-place"):
        y.sum().backward()


def test_inplace_on_saved_output_raises():
    x = gm.tensor(R(3), requires_grad=True)
    y = x.exp()  # Exp saves its output
    y += 1.0
    with pytest.raises(RuntimeError, match="in-place"):
        y.sum().backward()


def test_inplace_on_view_of_saved_tensor_raises():
    x = gm.tensor(R(2, 3), requires_grad=True)
    c = gm.tensor(R(2, 3))
    y = x * c
    with gm.no_grad():
        c[0] = 5.0  # writes through a view of c's storage
    with pytest.raises(RuntimeError, match="in-place"):
        y.sum().backward()


def test_inplace_add_on_non_leaf_gives_correct_gradients():
    def f(x, y):
        h = x * 2.0
        h += y
        h -= x * y
        return h * h
    gradcheck(f, [gm.tensor(R(3, 4), requires_grad=True), gm.tensor(R(4), requires_grad=True)], what="iadd")
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    h2 = h
    h += 1.0
    assert h is h2 and h.grad_fn is not None
    h.sum().backward()
    assert_close(x.grad, np.full(3, 2.0), 0, 0, what="h += 1")


def test_inplace_add_grad_tensor_into_plain_tensor():
    w = gm.tensor(R(3), requires_grad=True)
    a = gm.zeros(3, dtype=gm.float64)
    a += w
    assert a.requires_grad and a.grad_fn is not None
    (a * 2.0).sum().backward()
    assert_close(w.grad, np.full(3, 2.0), 0, 0, what="w.grad")
    assert a.grad is None  # a is not a leaf: PyTorch leaves its .grad None


def test_inplace_on_view_of_non_leaf_is_refused_or_correct():
    x = gm.tensor(np.ones((2, 3)), requires_grad=True)
    y = gm.tensor(np.ones(3), requires_grad=True)
    h = x * 1.0
    v = h[0]
    try:
        v += y
    except RuntimeError:
        return  # refusing is acceptable
    h.sum().backward()
    assert y.grad is not None, "y's gradient through the view was silently dropped"
    assert_close(y.grad, np.ones(3), 0, 0, what="y.grad")


def test_inplace_on_leaf_requiring_grad():
    x = gm.tensor(R(3), requires_grad=True)
    v = x._version
    with pytest.raises(RuntimeError, match="no_grad"):
        x += 1.0
    with pytest.raises(RuntimeError, match="no_grad"):
        x.mul_(2.0)
    with pytest.raises(RuntimeError):
        x.fill_(0.0)
    with pytest.raises(RuntimeError):
        x[0] = 1.0
    before = to_numpy(x)
    with gm.no_grad():
        x += 1.0
        x.mul_(2.0)
        x[0] = 7.0
    assert x._version > v
    expect = (before + 1.0) * 2.0
    expect[0] = 7.0
    assert_close(x, expect, 0, 0, what="in-place under no_grad")
    assert x.requires_grad and x.is_leaf
    (x * 3.0).sum().backward()
    assert_close(x.grad, np.full(3, 3.0), 0, 0, what="grad after update")


def test_version_counter_bumps_on_inplace():
    t = gm.tensor(R(3))
    v0 = t._version
    t += 1.0
    t.mul_(2.0)
    t.fill_(0.0)
    assert t._version >= v0 + 3


# ---- saved-tensor hooks ------------------------------------------------------------------------------------------
def test_saved_tensor_hooks_see_every_saved_tensor():
    x = gm.tensor(R(3, 4), requires_grad=True)
    w = gm.tensor(R(4, 2), requires_grad=True)
    packed, unpacked = [], []

    def pack(t):
        packed.append((tuple(t.shape), to_numpy(t)))
        return len(packed) - 1, t

    def unpack(obj):
        unpacked.append(obj[0])
        return obj[1]
    with gm.autograd.graph.saved_tensors_hooks(pack, unpack):
        h = x.exp()          # saves its output (3, 4)
        y = h @ w            # saves h (3, 4) and w (4, 2)
        z = (y * y).sum()    # Mul saves y twice (2 x (3, 2))
    shapes = sorted(s for s, _ in packed)
    assert shapes == sorted([(3, 4), (3, 4), (4, 2), (3, 2), (3, 2)]), shapes
    assert unpacked == []
    assert_close(packed[0][1], np.exp(to_numpy(x)), 1e-15, 1e-15, what="pack saw exp's output")
    z.backward()
    assert sorted(unpacked) == list(range(len(packed)))
    g = 2 * to_numpy(y) @ to_numpy(w).T * np.exp(to_numpy(x))
    assert_close(x.grad, g, 1e-12, 1e-12, what="grad through hooks")
    # Outside the context nothing is packed.
    n = len(packed)
    (x.exp() * 2.0).sum().backward()
    assert len(packed) == n


def test_saved_tensor_hooks_unpack_result_is_used():
    """A pack that keeps a NumPy copy (host offload) and an unpack that rebuilds the tensor."""
    x = gm.tensor(P(5), requires_grad=True)
    with gm.autograd.graph.saved_tensors_hooks(lambda t: to_numpy(t), lambda a: gm.tensor(a * 2.0)):
        y = x.log()  # saves x; backward uses 1 / x, so unpack's doubling halves the gradient
    y.sum().backward()
    assert_close(x.grad, 0.5 / to_numpy(x), 1e-15, 1e-15, what="unpack used")


def test_saved_tensor_hooks_nest_and_restore_on_exception():
    calls = []
    outer = gm.autograd.graph.saved_tensors_hooks(lambda t: calls.append("outer") or t, lambda t: t)
    inner = gm.autograd.graph.saved_tensors_hooks(lambda t: calls.append("inner") or t, lambda t: t)
    x = gm.tensor(R(3), requires_grad=True)
    with outer:
        with pytest.raises(KeyError):
            with inner:
                x.exp()
                raise KeyError("boom")
        x.exp()
    x.exp()
    assert calls == ["inner", "outer"]


# ---- memory: saved tensors are freed after backward ----------------------------------------------------------------
def _block(nbytes):
    return -(-nbytes // 512) * 512


def _alloc():
    return gm.memory.memory_allocated("cpu")


@pytest.fixture
def no_gc():
    """Freeing must not depend on the cycle collector: a reference cycle would show up as leaked bytes."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_saved_tensors_freed_after_backward(no_gc):
    base = _alloc()
    x = gm.tensor(R(64, 32), requires_grad=True)   # 16384 B
    w = gm.tensor(R(32, 16), requires_grad=True)   # 4096 B
    leaves = _block(64 * 32 * 8) + _block(32 * 16 * 8)
    assert _alloc() - base == leaves
    h = (x @ w).exp()          # (64, 16): 8192 B, Matmul saves x and w; Exp saves h
    y = h * h                  # Mul saves h twice
    loss = y.mean()
    act = _block(64 * 16 * 8)
    # Exactly h, y and the loss: the matmul result is not saved by anyone (Exp keeps its output), and saving
    # a leaf or h costs nothing (an alias of its storage).
    assert _alloc() - base == leaves + 2 * act + _block(8)
    loss.backward()
    grads = leaves  # x.grad and w.grad have the leaves' sizes
    assert _alloc() - base == leaves + grads + 2 * act + _block(8)  # backward's temporaries are all gone
    del h, y
    # What remains: the leaves, their grads and the 0-d loss (whose graph holds no saved tensor any more).
    assert _alloc() - base == leaves + grads + _block(8)
    del loss
    assert _alloc() - base == leaves + grads
    del x, w
    assert _alloc() == base


def test_saved_tensors_kept_with_retain_graph_until_graph_dies(no_gc):
    base = _alloc()
    x = gm.tensor(R(64, 32), requires_grad=True)
    h = x.exp()                # saved by Exp: must stay while the graph is retained
    loss = (h * 2.0).sum()
    del h
    loss.backward(retain_graph=True)
    kept = _alloc() - base
    assert kept == 2 * _block(64 * 32 * 8) + _block(8) + _block(64 * 32 * 8), kept  # x, x.grad, loss, exp out
    loss.backward()            # frees now
    assert _alloc() - base == 2 * _block(64 * 32 * 8) + _block(8)
    del loss, x
    assert _alloc() == base


def test_graph_without_backward_frees_when_dropped(no_gc):
    base = _alloc()
    x = gm.tensor(R(16, 16), requires_grad=True)
    loss = (x.exp() * x).sum()
    # x, exp's output (saved by Exp and Mul) and the loss; the product x.exp() * x is freed (Sum saves nothing)
    assert _alloc() - base == 2 * _block(16 * 16 * 8) + _block(8)
    del loss
    assert _alloc() - base == _block(16 * 16 * 8)
    del x
    assert _alloc() == base


def test_autograd_grad_frees_saved_tensors(no_gc):
    base = _alloc()
    x = gm.tensor(R(32, 32), requires_grad=True)
    loss = (x.exp() * x).sum()
    (g,) = gm.autograd.grad(loss, [x])
    del loss
    assert _alloc() - base == 2 * _block(32 * 32 * 8)
    del g, x
    assert _alloc() == base


def test_hooks_and_indexing_graph_free_without_gc(no_gc):
    base = _alloc()
    x = gm.tensor(R(16, 8), requires_grad=True)
    x.register_hook(lambda g: g * 1.0)
    loss = (x[[0, 3, 3]] * x[1:4]).sum()
    loss.backward()
    del loss
    assert _alloc() - base == 2 * _block(16 * 8 * 8)
    del x
    assert _alloc() == base


def test_retain_grad_frees_without_gc(no_gc):
    base = _alloc()
    x = gm.tensor(R(16, 8), requires_grad=True)
    h = x * 2.0
    h.retain_grad()
    h.sum().backward()
    del h
    assert _alloc() - base == 2 * _block(16 * 8 * 8)
