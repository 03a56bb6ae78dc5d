"""gm.foreach and torch._foreach_* (python/gpumemnet/foreach.py) against PyTorch's torch.foreach: every function it
has, each form of the second operand (one number, one tensor, a list of numbers, a list of tensors), what the in-place
ones return, and the errors. PyTorch's foreach.mm (a batched matmul, not an elementwise op) is the one left out."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")
F = pytest.importorskip("torch.foreach")

RNG = np.random.default_rng(7)
ARRAYS = [RNG.uniform(0.2, 0.9, s) for s in ((3,), (2, 4), ())]  # in every unary op's domain (acos, log, ...)


def lists(dtype="float64"):
    return ([gm.tensor(a, dtype=getattr(gm, dtype)) for a in ARRAYS],
            [torch.tensor(a, dtype=getattr(torch, dtype)) for a in ARRAYS])


def same(g, t):
    assert type(g) is type(t) and len(g) == len(t)
    for a, b in zip(g, t):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-15)


def test_the_functions_are_pytorchs():
    theirs = {n for n in dir(F)
              if not n.startswith("_") and getattr(getattr(F, n), "__module__", "") == "torch.foreach"}
    assert theirs - set(gm.foreach.__all__) == {"mm"} and set(gm.foreach.__all__) <= theirs
    for n in gm.foreach.__all__:
        assert getattr(gm, f"_foreach_{n}") is getattr(gm.foreach, n) and hasattr(torch, f"_foreach_{n}")


@pytest.mark.parametrize("name", gm.foreach.UNARY)
def test_unary(name):
    (g, t), (gi, ti) = lists(), lists()
    same(getattr(gm.foreach, name)(g), getattr(F, name)(t))
    r, rt = getattr(gm.foreach, name + "_")(gi), getattr(F, name + "_")(ti)
    assert r is gi and rt is ti
    same(gi, ti)


SECONDS = {"number": lambda L: 0.75, "tensor": lambda L: L.tensor(0.5, dtype=L.float64),
           "numbers": lambda L: [0.5, 1.5, 2.0],
           "tensors": lambda L: [L.tensor(a * 0.5 + 0.3, dtype=L.float64) for a in ARRAYS]}


@pytest.mark.parametrize("form", SECONDS)
@pytest.mark.parametrize("name", gm.foreach.BINARY)
def test_binary(name, form):
    for kw in ({}, {"alpha": 2.0}) if name in ("add", "sub") and form != "numbers" else ({},):
        (g, t), (gi, ti) = lists(), lists()
        try:
            want = getattr(F, name)(t, SECONDS[form](torch), **kw)
        except (RuntimeError, TypeError):  # a form PyTorch's op does not take (its signature's overloads)
            continue
        same(getattr(gm.foreach, name)(g, SECONDS[form](gm), **kw), want)
        assert getattr(gm.foreach, name + "_")(gi, SECONDS[form](gm), **kw) is gi
        getattr(F, name + "_")(ti, SECONDS[form](torch), **kw)
        same(gi, ti)


@pytest.mark.parametrize("name", gm.foreach.TERNARY)
def test_ternary(name):
    (g, t), (g2, t2), (g3, t3) = lists(), lists(), lists()
    if name == "lerp":
        for w in (0.25, [0.1, 0.5, 0.9]):
            same(gm.foreach.lerp(g, g2, w), F.lerp(t, t2, w))
            # the private name takes weight= (timm's ModelEmaV3: torch._foreach_lerp_(ema, params, weight=...))
            same(gm._foreach_lerp(g, g2, weight=w), torch._foreach_lerp(t, t2, weight=w))
        assert gm.foreach.lerp_(g, g2, 0.3) is g
        F.lerp_(t, t2, 0.3)
    else:
        for v in ({}, {"value": 0.5}):
            same(getattr(gm.foreach, name)(g, g2, g3, **v), getattr(F, name)(t, t2, t3, **v))
        getattr(gm.foreach, name + "_")(g, g2, g3, value=2.0)
        getattr(F, name + "_")(t, t2, t3, value=2.0)
    same(g, t)


def test_norm_max_clone_copy_zero():
    (g, t), (g2, t2) = lists(), lists()
    for ord in (1, 2, float("inf")):
        same(gm.foreach.norm(g, ord=ord), F.norm(t, ord=ord))
    same(gm.foreach.max(g), F.max(t))
    c = gm.foreach.clone(g)
    assert all(a is not b for a, b in zip(c, g))
    same(c, F.clone(t))
    assert gm.foreach.copy_(g, g2) is g
    same(g, tuple(F.copy_(t, t2)) and t)
    assert gm.foreach.zero_(g) is g and all(not a.numpy().any() for a in g)


def test_errors_are_pytorchs():
    g, t = lists()
    for lib, fe in ((gm, gm.foreach), (torch, F)):
        with pytest.raises(RuntimeError, match="at least one tensor"):
            fe.add([], 1.0)
        with pytest.raises(RuntimeError, match="same number of elements"):
            fe.add(g if lib is gm else t, [1.0, 2.0])
    with pytest.raises(TypeError, match="list or tuple of Tensors"):
        gm.foreach.add(gm.ones(2), 1.0)
