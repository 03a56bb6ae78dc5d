"""_C._backward_next() (csrc/autograd_engine.c): called from inside a node's backward, the node the walk runs next,
which save_on_cpu(prefetch=True) brings the saved tensors of back early. Checked against the order the walk then
really runs the nodes in, on graphs with branches, and outside backward (None)."""
import numpy as np

import gpumemnet as gm
from gpumemnet import _C

ORDER = []


def _tagged(tag):
    class Tag(gm.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            ORDER.append((tag, _C._backward_next()))
            return g

    Tag.__name__ = f"Tag_{tag}"
    return Tag.apply


def _check(loss, outputs):
    """Each tagged node's answer is the node that ran right after it (when that one is tagged too)."""
    ORDER.clear()
    nodes = {out.grad_fn: tag for tag, out in outputs.items()}
    loss.backward()
    ran = [tag for tag, _ in ORDER]
    assert sorted(ran) == sorted(outputs)
    for k, (tag, nxt) in enumerate(ORDER[:-1]):
        if nxt in nodes:
            assert nodes[nxt] == ran[k + 1], (tag, nodes[nxt], ran)
    return [nodes.get(n, n) for _, n in ORDER]


def test_outside_backward_there_is_no_next_node():
    assert _C._backward_next() is None


def test_a_chain_names_each_next_node():
    x = gm.tensor(np.arange(4.0), requires_grad=True)
    a = _tagged("a")(x)
    b = _tagged("b")(a.exp())
    c = _tagged("c")(b * 2)
    got = _check(c.sum(), {"a": a, "b": b, "c": c})
    assert [t for t, _ in ORDER] == ["c", "b", "a"]
    assert got[0] is not None and got[0] != "a"  # after c runs its input's node (b * 2's MulBackward), not a


def test_branches_follow_the_walks_order():
    x = gm.tensor(np.linspace(-1, 1, 6), requires_grad=True)
    y = _tagged("y")(x)
    p = _tagged("p")(y)
    q = _tagged("q")(y * 3)
    r = _tagged("r")(p)
    s = _tagged("s")(q)
    loss = (r * s).sum() + r.sum()
    got = _check(loss, {"y": y, "p": p, "q": q, "r": r, "s": s})
    assert ORDER[-1][0] == "y" and type(got[-1]).__name__ == "AccumulateGrad"
    assert sum(g in ("y", "p", "q", "r", "s") for g in got) >= 2  # tagged successors were named and checked


def test_direct_neighbours_are_found_before_they_are_ready():
    x = gm.tensor(np.ones(3), requires_grad=True)
    a = _tagged("a")(x)
    b = _tagged("b")(a)
    c = _tagged("c")(b)
    got = _check(c.sum(), {"a": a, "b": b, "c": c})
    assert got[:2] == ["b", "a"]
    assert type(got[2]).__name__ == "AccumulateGrad"  # after a: x's AccumulateGrad
