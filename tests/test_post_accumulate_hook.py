"""Tensor.register_post_accumulate_grad_hook (PyTorch's name): the hook sees the leaf after .grad was updated, once
per backward, in the order the engine reaches the leaves; removable; refused on non-leaves."""
import numpy as np
import pytest

import gpumemnet as gm


def test_runs_after_accumulation_with_the_updated_grad():
    w = gm.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (w * 3).sum().backward()
    (w * 2).sum().backward()  # accumulates: the hook sees the sum
    assert seen == [[3.0, 3.0], [5.0, 5.0]]


def test_order_and_pre_hooks_still_run():
    a = gm.tensor([1.0], requires_grad=True)
    b = gm.tensor([2.0], requires_grad=True)
    order = []
    a.register_post_accumulate_grad_hook(lambda t: order.append("a"))
    b.register_post_accumulate_grad_hook(lambda t: order.append("b"))
    b.register_hook(lambda g: g * 10)  # a pre-accumulation hook on the same leaf changes what is accumulated
    (a * 2 + (b * 3) * 4).sum().backward()
    assert sorted(order) == ["a", "b"]
    assert b.grad.tolist() == [120.0]
    assert a.grad.tolist() == [2.0]


def test_matches_torch_order():
    torch = pytest.importorskip("torch")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    lin_t = [torch.tensor(x, requires_grad=True), torch.tensor(x[0], requires_grad=True)]
    lin_g = [gm.tensor(x, requires_grad=True), gm.tensor(x[0], requires_grad=True)]
    got_t, got_g = [], []
    for i, (pt, pg) in enumerate(zip(lin_t, lin_g)):
        pt.register_post_accumulate_grad_hook(lambda t, i=i: got_t.append((i, t.grad.numpy().copy())))
        pg.register_post_accumulate_grad_hook(lambda t, i=i: got_g.append((i, t.grad.numpy().copy())))
    ((lin_t[0] @ lin_t[1]) ** 2).sum().backward()
    ((lin_g[0] @ lin_g[1]) ** 2).sum().backward()
    assert [i for i, _ in got_t] == [i for i, _ in got_g]
    for (_, a), (_, b) in zip(got_t, got_g):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_remove_and_errors():
    w = gm.tensor([1.0], requires_grad=True)
    calls = []
    h = w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    h.remove()
    (w * 2).sum().backward()
    assert calls == []
    with pytest.raises(RuntimeError, match="only be registered on leaf tensors that require grad"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="only be registered on leaf tensors that require grad"):
        gm.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)


def test_not_run_by_autograd_grad():
    """autograd.grad returns gradients without accumulating them: nothing is accumulated, no hook runs."""
    w = gm.tensor([1.0], requires_grad=True)
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    gm.autograd.grad((w * 2).sum(), [w])
    assert calls == [] and w.grad is None
