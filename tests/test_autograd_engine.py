"""Autograd's engine: gradients accumulating across backward calls, retain_graph, autograd.grad, hooks on leaves
and non-leaves, retain_grad, the errors of backward; grad modes (no_grad, enable_grad, set_grad_enabled,
inference_mode as contexts and decorators, restored on exceptions); detach and requires_grad."""

import numpy as np
import pytest

import gpumemnet as gm
from autograd_util import R
from gradcheck import assert_close, to_numpy


# ---- the engine ---------------------------------------------------------------------------------------------
def test_gradients_accumulate_across_backward_calls():
    x = gm.tensor(R(3), requires_grad=True)
    (x * 2.0).sum().backward()
    (x * x).sum().backward()
    assert_close(x.grad, 2.0 + 2 * to_numpy(x), 1e-15, 0, what="accumulated")
    x.grad = None
    (x * 3.0).sum().backward()
    assert_close(x.grad, np.full(3, 3.0), 0, 0, what="after reset")


def test_second_backward_without_retain_graph_raises():
    x = gm.tensor(R(3), requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()


def test_retain_graph_allows_second_backward():
    x = gm.tensor(R(3), requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward(retain_graph=True)
    g1 = to_numpy(x.grad)
    loss.backward()
    assert_close(x.grad, 2 * g1, 1e-14, 1e-14, what="twice")
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()


def test_autograd_grad_returns_without_touching_grad():
    x = gm.tensor(R(3), requires_grad=True)
    y = gm.tensor(R(3), requires_grad=True)
    out = (x * x * y).sum()
    gx, gy = gm.autograd.grad(out, [x, y])
    assert x.grad is None and y.grad is None
    assert_close(gx, 2 * to_numpy(x) * to_numpy(y), 1e-14, 1e-14, what="gx")
    assert_close(gy, to_numpy(x) ** 2, 1e-14, 1e-14, what="gy")
    (g,) = gm.autograd.grad((x * 3.0).sum(), x)
    assert_close(g, np.full(3, 3.0), 0, 0, what="single input")


def test_autograd_grad_non_leaf_input():
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    (gh,) = gm.autograd.grad((h * h).sum(), [h])
    assert_close(gh, 2 * to_numpy(h), 1e-14, 0, what="d/dh")
    assert x.grad is None


def test_autograd_grad_unused_input():
    x = gm.tensor(R(3), requires_grad=True)
    z = gm.tensor(R(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused"):
        gm.autograd.grad((x * 2.0).sum(), [x, z], retain_graph=True)
    gx, gz = gm.autograd.grad((x * 2.0).sum(), [x, z], allow_unused=True)
    assert gz is None
    assert_close(gx, np.full(3, 2.0), 0, 0, what="gx")
    assert x.grad is None and z.grad is None


def test_autograd_grad_with_grad_outputs():
    x = gm.tensor(R(2, 3), requires_grad=True)
    w = R(2, 3)
    (g,) = gm.autograd.grad(x * x, [x], grad_outputs=gm.tensor(w))
    assert_close(g, 2 * to_numpy(x) * w, 1e-14, 1e-14, what="grad_outputs")


def test_autograd_grad_input_without_grad_raises():
    x = gm.tensor(R(3), requires_grad=True)
    c = gm.tensor(R(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        gm.autograd.grad((x * c).sum(), [c])


def test_hook_on_leaf_sees_and_replaces_gradient():
    x = gm.tensor(R(3), requires_grad=True)
    seen = []

    def hook(g):
        seen.append(to_numpy(g))
        return g * 10.0
    h = x.register_hook(hook)
    (x * 2.0).sum().backward()
    assert len(seen) == 1
    assert_close(seen[0], np.full(3, 2.0), 0, 0, what="hook saw")
    assert_close(x.grad, np.full(3, 20.0), 0, 0, what="hook replaced")
    h.remove()
    x.grad = None
    (x * 2.0).sum().backward()
    assert len(seen) == 1
    assert_close(x.grad, np.full(3, 2.0), 0, 0, what="after remove")
    h.remove()  # a second remove is harmless


def test_hook_on_non_leaf_replaces_gradient_flowing_on():
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    seen = []
    h.register_hook(lambda g: seen.append(to_numpy(g)))  # returns None: gradient unchanged
    h.register_hook(lambda g: g * 0.5)
    (h * 3.0).sum().backward()
    assert_close(seen[0], np.full(3, 3.0), 0, 0, what="non-leaf hook saw")
    assert_close(x.grad, np.full(3, 3.0), 0, 0, what="x.grad after halving")  # 3 * 0.5 * 2
    assert h.grad is None  # a non-leaf keeps no .grad unless retain_grad()


def test_hook_removed_on_non_leaf():
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    handle = h.register_hook(lambda g: g * 100.0)
    handle.remove()
    h.sum().backward()
    assert_close(x.grad, np.full(3, 2.0), 0, 0, what="removed")


def test_register_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        gm.tensor(R(3)).register_hook(lambda g: g)


def test_retain_grad_on_non_leaf():
    x = gm.tensor(R(3), requires_grad=True)
    h = x * 2.0
    h.retain_grad()
    out = (h * h).sum()
    out.backward(retain_graph=True)
    assert_close(h.grad, 2 * to_numpy(h), 1e-14, 0, what="h.grad")
    out.backward()
    assert_close(h.grad, 4 * to_numpy(h), 1e-14, 0, what="h.grad accumulates")
    x.retain_grad()  # no-op on a leaf
    assert_close(x.grad, 16 * to_numpy(x), 1e-14, 1e-14, what="x.grad")


def test_leaf_used_twice_gets_summed_gradient_and_one_hook_call():
    x = gm.tensor(R(3), requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(to_numpy(g)))
    (x * 2.0 + x * 3.0 + x.exp()).sum().backward()
    assert len(calls) == 1
    expect = 5.0 + np.exp(to_numpy(x))
    assert_close(calls[0], expect, 1e-14, 1e-14, what="hook got the sum")
    assert_close(x.grad, expect, 1e-14, 1e-14, what="x.grad")


def test_backward_on_tensor_without_grad_explains():
    x = gm.tensor(R(3), requires_grad=True)
    with gm.no_grad():
        loss = (x * 2.0).sum()
    with pytest.raises(RuntimeError) as ei:
        loss.backward()
    msg = str(ei.value)
    assert "no_grad" in msg and "detach" in msg, msg
    rewrapped = gm.tensor((x * 2.0).sum().detach())
    with pytest.raises(RuntimeError, match="no_grad"):
        rewrapped.backward()
    with pytest.raises(RuntimeError, match="no_grad"):
        gm.autograd.backward([loss])


def test_backward_on_non_scalar_without_gradient_raises():
    x = gm.tensor(R(2, 3), requires_grad=True)
    with pytest.raises(RuntimeError, match="single-element"):
        (x * 2.0).backward()
    (x[0, 0] * 2.0).backward()  # one element, any ndim: fine
    (x.sum(dim=(0, 1), keepdim=True)).backward()
    assert_close(x.grad, np.array([[3, 1, 1], [1, 1, 1]], float), 0, 0, what="single-element outputs")


def test_backward_gradient_as_number_and_multiple_roots():
    x = gm.tensor(R(3), requires_grad=True)
    (x * 2.0).sum().backward(3.0)
    assert_close(x.grad, np.full(3, 6.0), 0, 0, what="backward(3.0)")
    x.grad = None
    a, b = x * 2.0, x * x
    gm.autograd.backward([a, b], [gm.ones(3, dtype=gm.float64), gm.full((3,), 0.5, dtype=gm.float64)])
    assert_close(x.grad, 2.0 + to_numpy(x), 1e-15, 1e-15, what="two roots")
    (g,) = gm.autograd.grad((x * 2.0).sum(), [x], grad_outputs=0.5)
    assert_close(g, np.full(3, 1.0), 0, 0, what="grad_outputs number")


def test_backward_gradient_count_must_match():
    x = gm.tensor(R(3), requires_grad=True)
    with pytest.raises(ValueError, match="2 outputs but 1 gradients"):
        gm.autograd.backward([x * 2.0, x * 3.0], gm.ones(3, dtype=gm.float64))
    with pytest.raises(ValueError, match="1 outputs but 2 gradients"):
        gm.autograd.backward([x * 2.0], [gm.ones(3, dtype=gm.float64)] * 2)


def test_mixed_dtype_ops_give_grads_in_input_dtypes():
    a = gm.tensor(R(2, 3).astype(np.float32), requires_grad=True)
    b = gm.tensor(R(3), requires_grad=True)
    y = a * b
    assert y.dtype == gm.float64
    y.sum().backward()
    assert a.grad.dtype == gm.float32 and b.grad.dtype == gm.float64
    assert_close(a.grad, np.broadcast_to(to_numpy(b), (2, 3)).astype(np.float32), 0, 0, what="a.grad")
    assert_close(b.grad, to_numpy(a).astype(np.float64).sum(0), 1e-6, 1e-6, what="b.grad")
    c = gm.tensor(R(4).astype(np.float32), requires_grad=True)
    s = c.sum(dtype=gm.float64)
    assert s.dtype == gm.float64
    s.backward()
    assert c.grad.dtype == gm.float32
    assert_close(c.grad, np.ones(4, np.float32), 0, 0, what="sum(dtype=) grad")


def test_leaf_hook_persists_across_graphs():
    x = gm.tensor(R(3), requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(1))
    (x * 2.0).sum().backward()
    (x * 3.0).sum().backward()
    assert len(calls) == 2
    assert_close(x.grad, np.full(3, 5.0), 0, 0, what="x.grad")


def test_backward_on_leaf_itself():
    x = gm.tensor(R(), requires_grad=True)
    x.backward()
    assert_close(x.grad, np.array(1.0), 0, 0, what="leaf backward")


# ---- grad modes -------------------------------------------------------------------------------------------------
def test_no_grad_context_records_nothing_and_restores():
    x = gm.tensor(R(3), requires_grad=True)
    assert gm.is_grad_enabled()
    with gm.no_grad():
        assert not gm.is_grad_enabled()
        y = x * 2.0
        with gm.enable_grad():
            assert gm.is_grad_enabled()
            z = x * 2.0
        assert not gm.is_grad_enabled()
    assert gm.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None


@pytest.mark.parametrize("make", [lambda: gm.no_grad(), lambda: gm.inference_mode(),
                                  lambda: gm.set_grad_enabled(False), lambda: gm.autograd.no_grad()],
                         ids=["no_grad", "inference_mode", "set_grad_enabled", "autograd.no_grad"])
def test_disabling_context_restores_on_exception(make):
    assert gm.is_grad_enabled()
    with pytest.raises(KeyError):
        with make():
            assert not gm.is_grad_enabled()
            raise KeyError("boom")
    assert gm.is_grad_enabled()


def test_enable_grad_context_restores_on_exception():
    with gm.no_grad():
        with pytest.raises(KeyError):
            with gm.enable_grad():
                assert gm.is_grad_enabled()
                raise KeyError("boom")
        assert not gm.is_grad_enabled()
    assert gm.is_grad_enabled()


@pytest.mark.parametrize("mode", [True, False])
def test_set_grad_enabled_function_and_context(mode):
    try:
        gm.set_grad_enabled(mode)
        assert gm.is_grad_enabled() is mode
    finally:
        gm.set_grad_enabled(True)
    with gm.no_grad():
        with gm.set_grad_enabled(True):
            assert gm.is_grad_enabled()
        assert not gm.is_grad_enabled()
    assert gm.is_grad_enabled()


def test_inference_mode_false_keeps_grad():
    with gm.no_grad():
        with gm.inference_mode(False):
            assert gm.is_grad_enabled()
        assert not gm.is_grad_enabled()


_DECORATORS = {  # name: (make the decorator, mode expected inside the decorated function)
    "no_grad": (lambda: gm.no_grad(), False), "enable_grad": (lambda: gm.enable_grad(), True),
    "inference_mode": (lambda: gm.inference_mode(), False),
    "inference_mode_T": (lambda: gm.inference_mode(True), False),
    "inference_mode_F": (lambda: gm.inference_mode(False), True),
    "set_grad_enabled_F": (lambda: gm.set_grad_enabled(False), False),
    "set_grad_enabled_T": (lambda: gm.set_grad_enabled(True), True)}


@pytest.mark.parametrize("outer", [True, False], ids=["outer_grad", "outer_no_grad"])
@pytest.mark.parametrize("name", list(_DECORATORS))
def test_decorators_set_mode_and_restore_even_on_exception(name, outer):
    make, inside = _DECORATORS[name]
    with gm.set_grad_enabled(outer):
        # (set_grad_enabled(...) acts when made, as in PyTorch; applying it as a decorator undoes that.)
        @make()
        def f(fail):
            """doc"""
            seen = gm.is_grad_enabled()
            if fail:
                raise ValueError("boom")
            return seen

        assert gm.is_grad_enabled() is outer, "decorating changed the grad mode"
        assert f.__name__ == "f" and f.__doc__ == "doc"
        assert f(False) is inside
        assert gm.is_grad_enabled() is outer
        with pytest.raises(ValueError):
            f(True)
        assert gm.is_grad_enabled() is outer
    assert gm.is_grad_enabled()


def test_no_grad_decorator_output_has_no_graph():
    x = gm.tensor(R(3), requires_grad=True)

    @gm.no_grad()
    def double(t):
        return t * 2.0
    y = double(x)
    assert not y.requires_grad and y.grad_fn is None


def test_decorated_function_reentrant():
    @gm.no_grad()
    def rec(n):
        assert not gm.is_grad_enabled()
        return 0 if n == 0 else 1 + rec(n - 1)
    assert rec(3) == 3
    assert gm.is_grad_enabled()


# ---- detach, requires_grad --------------------------------------------------------------------------------------
def test_detach_shares_storage_and_has_no_grad():
    x = gm.tensor(R(3), requires_grad=True)
    y = x * 2.0
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert d._storage_id == y._storage_id and d._data_ptr == y._data_ptr
    d += 1.0  # not part of any graph: allowed, and visible through y
    assert_close(to_numpy(y), to_numpy(x) * 2.0 + 1.0, 0, 0, what="shared storage")
    xd = x.detach()
    assert not xd.requires_grad and xd._data_ptr == x._data_ptr


def test_requires_grad_on_int_tensor_raises():
    t = gm.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad = True
    with pytest.raises(RuntimeError, match="floating point"):
        gm.tensor([1, 2, 3], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        gm.zeros(3, dtype=gm.int64).requires_grad_()
    with pytest.raises(RuntimeError, match="floating point"):
        gm.zeros(3, dtype=gm.bool).requires_grad_()


def test_integer_and_bool_results_do_not_require_grad():
    x = gm.tensor(R(3, 4), requires_grad=True)
    assert not (x > 0).requires_grad
    assert not x.argmax().requires_grad
    assert not x.max(dim=1)[1].requires_grad
