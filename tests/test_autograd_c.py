"""The autograd engine in C (csrc/autograd_node.c, csrc/autograd_engine.c): the operators' recording fast path
against PyTorch for every operand combination, the nodes it makes (the same classes, scopes and saved tensors as
Function.apply), saved-tensor hooks on it, and the backward walk's bookkeeping (order, hooks, capture, release)."""
import gc
import itertools

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet._core import functions as F
from gradcheck import assert_close, to_numpy

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b}
KINDS = ["tensor", "broadcast", "const_tensor", "float", "int"]


def _operand(kind, lib, rng_vals, requires_grad):
    """An operand of `kind`; (value, is_grad_tensor)."""
    if kind in ("float", "int"):
        return (2.5 if kind == "float" else 3), False
    vals = rng_vals if kind != "broadcast" else rng_vals[:1, :]
    grad = requires_grad and kind != "const_tensor"
    if lib == "gm":
        return gm.tensor(vals, requires_grad=grad), grad
    import torch
    return torch.tensor(vals, requires_grad=grad), grad


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("ka,kb", [(a, b) for a, b in itertools.product(KINDS, KINDS)
                                   if not (a in ("float", "int") and b in ("float", "int"))])
def test_operators_match_torch(op, ka, kb):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    va = (rng.random((2, 3)) + 0.5).astype(np.float32)
    vb = (rng.random((2, 3)) + 0.5).astype(np.float32)
    ga, _ = _operand(ka, "gm", va, True)
    gb, _ = _operand(kb, "gm", vb, True)
    ta, _ = _operand(ka, "torch", va, True)
    tb, _ = _operand(kb, "torch", vb, True)
    gy, ty = OPS[op](ga, gb), OPS[op](ta, tb)
    assert_close(gy, ty.detach().numpy(), 1e-6, 1e-6, what=f"{ka} {op} {kb}")
    if not ty.requires_grad:
        assert not gy.requires_grad and gy.grad_fn is None
        return
    gw = gm.tensor(np.linspace(-1, 1, ty.numel(), dtype=np.float32).reshape(tuple(ty.shape)))
    (gy * gw).sum().backward()
    (ty * torch.tensor(to_numpy(gw))).sum().backward()
    for g, t, name in ((ga, ta, "a"), (gb, tb, "b")):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            assert_close(g.grad, t.grad.numpy(), 1e-5, 1e-5, what=f"d({ka} {op} {kb})/d{name}")


def test_fast_nodes_are_the_functions_nodes():
    a, b = gm.rand(3, requires_grad=True), gm.rand(3, requires_grad=True)
    for y, cls, n_saved in ((a + b, F.Add, None), (a - b, F.Sub, None), (a * b, F.Mul, 3), (a / b, F.Div, 3)):
        fn = y.grad_fn
        assert type(fn) is cls and isinstance(fn, gm._C.Node)
        assert fn.needs_input_grad == [True, True]
        assert [e[0] for e in fn.next_functions] == [a._grad_acc(), b._grad_acc()]
        assert (fn._saved is None) if n_saved is None else len(fn._saved) == n_saved
    y = a * 2.0
    assert y.grad_fn.next_functions[1] == (None, 0) and y.grad_fn.needs_input_grad == [True, False]
    # _input_meta: (shape, dtype, 0-d on the CPU)
    assert y.grad_fn._input_number(1) == 2.0 and y.grad_fn._input_meta(0) == ((3,), 0, False)


def test_no_node_without_grad():
    a, b = gm.rand(3, requires_grad=True), gm.rand(3)
    with gm.no_grad():
        assert (a + b).grad_fn is None and not (a * b).requires_grad
    with gm.inference_mode():
        assert (a - b).grad_fn is None
    assert (b + b).grad_fn is None and not (b / 2).requires_grad
    with gm.no_grad(), gm.enable_grad():
        assert (a + b).grad_fn is not None


def test_fast_path_scope_names_backward_allocations():
    """A node recorded by the operators keeps the forward's scope: its backward allocates under "X backward"."""
    x = gm.rand(64, requires_grad=True)
    prev = gm._C.set_scope("blk forward")
    try:
        y = x * x
    finally:
        gm._C.set_scope(prev)
    assert y.grad_fn._scope == "blk forward"
    seen = []
    # the leaf's hook runs right after Mul's backward, before the leaf's own scope is set
    x.register_hook(lambda g: seen.append(gm._C.get_scope()))
    y.sum().backward()
    assert seen == ["blk backward"]
    assert gm._C.get_scope() == prev


def test_saved_tensor_hooks_apply_to_fast_path():
    packed = []

    def pack(t):
        packed.append(tuple(t.shape))
        return ("box", t)

    def unpack(box):
        return box[1]

    a, b = gm.rand(2, 3, requires_grad=True), gm.rand(3, requires_grad=True)
    with gm.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = a * b  # Mul saves a and b (each for the other's gradient)
        z = a / b  # Div saves b and its output (a is not read by its backward, as in PyTorch)
    assert packed == [(2, 3), (3,), (3,), (2, 3)]
    (y + z).sum().backward()
    bn, an = to_numpy(b), to_numpy(a)
    assert_close(a.grad, np.broadcast_to(bn + 1 / bn, (2, 3)), 1e-5, 1e-5, what="a.grad")
    assert_close(b.grad, (an - an / bn ** 2).sum(0), 1e-5, 1e-5, what="b.grad")


def test_version_check_on_fast_path():
    x = gm.rand(3, requires_grad=True)
    h = x * 1.0 + 0.5
    y = x / h  # Div saves its divisor h (and its output)
    with gm.no_grad():
        h.add_(1.0)
    with pytest.raises(RuntimeError, match="gradient of DivBackward0 has been modified by an in-place operation"):
        y.sum().backward()


def test_backward_twice_without_retain_graph_is_refused():
    x = gm.rand(3, requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_close(x.grad, 4 * to_numpy(x), 1e-6, 1e-6, what="two backwards")
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_walk_order_hooks_and_capture():
    """Each node runs once with its summed gradient (a diamond); tensor hooks see and may replace gradients;
    autograd.grad captures without touching .grad."""
    x = gm.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    seen = []
    h.register_hook(lambda g: seen.append(to_numpy(g).tolist()))
    y = (h * h + h).sum()
    (gx,) = gm.autograd.grad(y, x, retain_graph=True)
    assert x.grad is None
    assert_close(gx, 3 * (2 * 3 * to_numpy(x) + 1), 1e-6, 1e-6, what="captured")
    x.register_hook(lambda g: g * 0.0 + 1.0)  # replaces the leaf's gradient
    y.backward()
    assert_close(x.grad, np.ones(2), 0, 0, what="replaced by the hook")
    assert seen == [[7.0, 13.0], [7.0, 13.0]]  # once per walk, summed over both uses


def test_walk_restores_state_when_backward_raises():
    class Boom(gm.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    x = gm.rand(3, requires_grad=True)
    y = Boom.apply(x * 2.0).sum()
    prev_scope, prev_cat = gm._C.get_scope(), gm._C.get_category()
    with pytest.raises(ValueError, match="boom"):
        y.backward()
    assert gm.is_grad_enabled() and gm._C.get_scope() == prev_scope and gm._C.get_category() == prev_cat


def _bytes_when_leaf_grad_arrives(retain):
    x = gm.rand(1024, requires_grad=True)  # 4 KiB
    a = x * 2.0
    y = (a * a).sum()  # Mul saves a
    del a
    seen = []
    x.register_hook(lambda g: seen.append(gm.memory.memory_allocated("cpu")))
    y.backward(retain_graph=retain)
    assert_close(x.grad, 8 * to_numpy(x), 1e-5, 1e-5, what="d(4x^2)/dx")
    return seen[0]


def test_saved_tensors_freed_as_each_node_runs():
    """What a fast-path node saved is freed as soon as its backward returns (before the nodes after it run),
    unless retain_graph: exactly a's 4 KiB apart, without the cycle collector."""
    gc.collect()
    gc.disable()
    try:
        kept = _bytes_when_leaf_grad_arrives(True)
        freed = _bytes_when_leaf_grad_arrives(False)
    finally:
        gc.enable()
    assert kept - freed == 4096


def test_products_keep_only_what_their_backward_reads():
    """x * mask keeps the mask for x's gradient and not x (PyTorch's MulBackward0); x / 3.0 keeps nothing of x.
    Exact bytes from the allocator."""
    x = gm.randn(1000, 1000, requires_grad=True)
    mask = gm.randn(1000, 1000)
    before = gm.memory.memory_allocated("cpu")
    v = x * 2.0
    v_block = gm.memory.memory_allocated("cpu") - before
    y = mask * v
    q = v / 3.0
    held = gm.memory.memory_allocated("cpu")
    del v  # kept by neither node: its memory goes back at once
    assert held - gm.memory.memory_allocated("cpu") == v_block
    (y + q).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * mask.numpy() + 2 / 3, rtol=1e-5)
