"""Backward writes an input gradient over the incoming gradient when nothing else can see it (autograd.Function's
reuses_grad / grad_is_free, _C._grads_free): activations, softmax, dropout and batch norm then allocate no tensor of
the activation's size in backward. Checked in exact allocator bytes against the same graph with the gradient held
(a hook keeping it), and checked never to change a gradient that someone can still read: a hook's, a retained
.grad, a captured autograd.grad result, a NumPy view, the gradient passed to backward(), one shared by two
consumers. Values against NumPy. On every device (cuda_util's `device` fixture: a GPU or the emulator)."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from cuda_util import device, to_np  # noqa: F401  (device: the per-device fixture)

SHAPE = (4, 8, 16, 16)  # float32: 32 KiB, a whole number of allocator blocks
NBYTES = int(np.prod(SHAPE)) * 4


def _x(device, seed=0):
    a = np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)
    return a, gm.from_numpy(a, device=device).requires_grad_()


def _np_grad(op, h, g):
    """d op(h)/dh * g in float64 (op on h = 3x)."""
    if op == "relu":
        return g * (h > 0)
    if op == "leaky_relu":
        return g * np.where(h > 0, 1.0, 0.01)
    if op == "sigmoid":
        s = 1 / (1 + np.exp(-h))
        return g * s * (1 - s)
    if op == "tanh":
        return g * (1 - np.tanh(h) ** 2)
    if op == "softmax":  # over dim 1
        y = np.exp(h - h.max(1, keepdims=True))
        y /= y.sum(1, keepdims=True)
        return y * (g - (g * y).sum(1, keepdims=True))
    if op == "log_softmax":  # over dim 3
        y = np.exp(h - h.max(3, keepdims=True))
        y /= y.sum(3, keepdims=True)
        return g - y * g.sum(3, keepdims=True)
    raise AssertionError(op)


OPS = {"relu": F.relu, "leaky_relu": F.leaky_relu, "sigmoid": F.sigmoid, "tanh": F.tanh,
       "relu_": lambda h: F.relu(h, inplace=True), "softmax": lambda h: F.softmax(h, dim=1),
       "log_softmax": lambda h: F.log_softmax(h, dim=3)}


def _backward_allocs(device, fn, hold):
    """Bytes allocated during backward of (fn(3x) * 2).sum(), and (x.grad, the held gradient of fn's output)."""
    a_np, x = _x(device)
    h = x * 3
    out = fn(h)
    held = []
    if hold:
        out.register_hook(held.append)
    loss = (out * 2).sum()
    gm.memory.record_history(True, device=device)
    loss.backward()
    allocs = sum(e["delta"] for e in gm.memory.history(device) if e["kind"] == "alloc")
    gm.memory.record_history(False, device=device)
    return allocs, to_np(x.grad), (to_np(held[0]) if held else None)


@pytest.mark.parametrize("op", list(OPS))
def test_activation_backward_reuses_a_free_gradient(device, op):
    free, gx_free, _ = _backward_allocs(device, OPS[op], hold=False)
    held, gx_held, g_held = _backward_allocs(device, OPS[op], hold=True)
    # Holding the incoming gradient costs exactly one more tensor of its size: the one backward then allocates.
    assert held - free == NBYTES
    np.testing.assert_array_equal(gx_free, gx_held)
    np.testing.assert_array_equal(g_held, np.full(SHAPE, 2.0))  # the hook's gradient was not written over
    a = _x("cpu")[0].astype(np.float64)
    ref = 3 * _np_grad(op.rstrip("_"), 3 * a, np.full(SHAPE, 2.0))
    # log_softmax's g - exp(y) * sum(g) cancels (2 - 32 y) in float32: an absolute tolerance of its size
    np.testing.assert_allclose(gx_free, ref, rtol=1e-5, atol=1e-5 if op == "log_softmax" else 1e-6)


def test_dropout_and_batch_norm_backward_reuse_a_free_gradient(device):
    w = gm.ones(8, device=device).requires_grad_()
    b = gm.zeros(8, device=device).requires_grad_()

    def fn(h):
        gm.manual_seed(1)
        y = F.batch_norm(h, None, None, w, b, training=True)
        return F.dropout(y, 0.25, training=True)

    free, gx_free, _ = _backward_allocs(device, fn, hold=False)
    w.grad = b.grad = None
    held, gx_held, _ = _backward_allocs(device, fn, hold=True)
    # Held: dropout's backward allocates its result, and batch norm's lands in a new tensor too (dropout's result
    # is free either way, so batch norm reuses it in both runs): one tensor more.
    assert held - free == NBYTES
    np.testing.assert_array_equal(gx_free, gx_held)


def test_a_gradient_someone_can_read_is_never_written_over(device):
    a_np, x = _x(device)
    h = x * 3
    out = F.relu(h)
    out.retain_grad()
    kept = []
    h.register_hook(kept.append)  # relu's result: must stay intact for the hook's owner
    loss = (out * 2).sum()
    loss.backward()
    two = np.full(SHAPE, 2.0)
    np.testing.assert_array_equal(to_np(out.grad), two)
    np.testing.assert_array_equal(to_np(kept[0]), two * (3 * a_np > 0))
    np.testing.assert_array_equal(to_np(x.grad), 3 * two * (3 * a_np > 0))


def test_captured_gradients_and_the_callers_gradient_stay_intact(device):
    a_np, x = _x(device)
    out = F.relu(x * 3)
    g_out, g_x = gm.autograd.grad((out * 2).sum(), [out, x])
    two = np.full(SHAPE, 2.0)
    np.testing.assert_array_equal(to_np(g_out), two)
    np.testing.assert_array_equal(to_np(g_x), 3 * two * (3 * a_np > 0))
    # The gradient passed to backward() belongs to the caller.
    x.grad = None
    out = F.sigmoid(x * 3)
    g = gm.from_numpy(np.full(SHAPE, 0.5, dtype=np.float32), device=device)
    out.backward(g)
    np.testing.assert_array_equal(to_np(g), np.full(SHAPE, 0.5))


def test_one_gradient_feeding_two_backwards(device):
    # Add's backward hands the same tensor to both branches: the first consumer must not write over it.
    a_np, x = _x(device)
    h = x * 3
    ((F.relu(h) + F.tanh(h)) * 2).sum().backward()  # * 2: a contiguous gradient, which could be written over
    hn = 3 * a_np.astype(np.float64)
    ref = 6 * ((hn > 0) + (1 - np.tanh(hn) ** 2))
    np.testing.assert_allclose(to_np(x.grad), ref, rtol=1e-5, atol=1e-6)


def test_a_numpy_view_of_the_gradient_stays_intact():
    a_np, x = _x("cpu")
    views = []
    out = F.relu(x * 3)
    out.register_hook(lambda g: views.append(g.numpy()))
    (out * 2).sum().backward()
    np.testing.assert_array_equal(views[0], np.full(SHAPE, 2.0))


def test_grads_free_counts_every_reference():
    t = gm.ones(4)
    assert gm._C._grads_free([gm.ones(4), None]) == (True, False)
    assert gm._C._grads_free([t]) == (False,)  # the local `t` holds it too
    assert gm._C._grads_free([t[1:]]) == (False,)  # nothing else holds the view, but `t` shares its storage
    assert gm._C._grads_free([gm.ones(4)[1:]]) == (True,)  # a view whose base is gone owns its storage alone
    with pytest.raises(TypeError, match="expected a list"):
        gm._C._grads_free((t,))
