"""In-place writes that the graph must see, against PyTorch: a plain tensor written with a value that requires
grad takes that value's graph (a GCN's `zeros.index_add_(0, col, msg)`: before, only the bias trained, silently),
a tensor in a graph written by an op with no in-place node of its own records the write (index_add_, scatter_,
clamp_ with tensor bounds, masked_scatter_ ...), and an assignment through several tensor indices into a tensor
in a graph records (makemore's `dlogits[range(n), Yb] -= 1`). A view of a plain tensor cannot give its base a
graph in gpumemnet: that is refused with an error instead of a silently missing gradient."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

S = np.array([[1.0, 2.0], [3.0, 4.0]])
W = np.array([[1.0, 10.0], [100.0, 1000.0]])


def _ops(L):
    i = L.tensor([1, 0])
    cols = i.unsqueeze(1).expand(2, 2)
    return {
        "index_add_": lambda z, s: z.index_add_(0, i, s),
        "index_add_ alpha": lambda z, s: z.index_add_(0, i, s, alpha=2.0),
        "scatter_add_": lambda z, s: z.scatter_add_(0, cols, s),
        "scatter_ src": lambda z, s: z.scatter_(0, cols, s),
        "scatter_reduce_ sum": lambda z, s: z.scatter_reduce_(0, cols, s, "sum"),
        "index_copy_": lambda z, s: z.index_copy_(0, i, s),
        "index_put_": lambda z, s: z.index_put_((i,), s),
        "index_put_ accumulate": lambda z, s: z.index_put_((L.tensor([1, 1]),), s, accumulate=True),
        "masked_scatter_": lambda z, s: z.masked_scatter_(L.tensor([[True, False], [True, True]]), s),
        "mul_": lambda z, s: z.add_(1.5).mul_(s) if z.requires_grad else z.fill_(1.5).mul_(s),
        "div_": lambda z, s: z.add_(1.5).div_(s) if z.requires_grad else z.fill_(1.5).div_(s),
        "clamp_ tensor min": lambda z, s: z.clamp_(min=s * 0.5),
        "masked_fill_ tensor value": lambda z, s: z.masked_fill_(L.tensor([[True, False], [False, True]]), s.sum()),
        "several tensor indices": lambda z, s: z.__setitem__((L.tensor([0, 1]), L.tensor([1, 1])), s[0]) or z,
        "several tensor indices -=": lambda z, s: z.__setitem__(
            (L.arange(2), L.tensor([1, 0])), z[L.arange(2), L.tensor([1, 0])] - s[1]) or z,
    }


def _run(L, name, base_in_graph):
    s = L.tensor(S, requires_grad=True)
    w0 = L.tensor(S * 0.1, requires_grad=True)
    z = w0 * 1.0 if base_in_graph else L.zeros(2, 2, dtype=L.float64)
    out = _ops(L)[name](z, s)
    assert out.requires_grad
    (out * L.tensor(W)).sum().backward()
    return out.detach().numpy(), s.grad.numpy(), (w0.grad.numpy() if w0.grad is not None else None)


@pytest.mark.parametrize("base_in_graph", [False, True], ids=["plain target", "target in a graph"])
@pytest.mark.parametrize("name", list(_ops(torch)))
def test_inplace_write_records_like_pytorch(name, base_in_graph):
    ours, ref = _run(gm, name, base_in_graph), _run(torch, name, base_in_graph)
    for a, b in zip(ours, ref):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_makemore_manual_softmax_gradient():
    def run(L):
        logits = L.tensor(np.arange(20.0).reshape(4, 5) / 7, requires_grad=True)
        y = L.tensor([0, 1, 2, 3])
        d = L.nn.functional.softmax(logits, 1) * 2.0  # softmax keeps its output: written in place, backward raises
        d[L.arange(4), y] -= 1
        (d * L.tensor(np.arange(20.0).reshape(4, 5))).sum().backward()
        return d.detach().numpy(), logits.grad.numpy()
    for a, b in zip(run(gm), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_gcn_aggregation_trains_its_weight():
    """The GCN pattern: messages summed into a fresh zeros tensor by index_add_."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 3)), rng.standard_normal((3, 2))
    row, col = np.array([0, 1, 2, 3, 4, 0]), np.array([1, 2, 3, 4, 0, 2])

    def run(L):
        wt = L.tensor(w, requires_grad=True)
        msg = (L.tensor(x) @ wt)[L.tensor(row)]
        h = L.zeros(5, 2, dtype=L.float64).index_add_(0, L.tensor(col), msg)
        h.tanh().pow(2).sum().backward()
        return wt.grad.numpy()
    np.testing.assert_allclose(run(gm), run(torch), rtol=1e-12)


def test_a_view_of_a_plain_tensor_is_written_through_its_base_or_refused():
    """The view alone with its base: the base takes the graph (PyTorch's CopySlices; YOLO's loss[0] += part). With
    another view of the memory alive, that view takes the graph too (test_pytorch_semantics13); an alias that is
    no view (detach()) does not, as in PyTorch."""
    s = gm.ones(2, requires_grad=True)
    z = gm.zeros(2, 2)
    z[0].add_(s * 3)
    (z * gm.tensor([[1.0, 2.0], [4.0, 8.0]])).sum().backward()
    assert z.requires_grad and z.tolist() == [[3.0, 3.0], [0.0, 0.0]] and s.grad.tolist() == [3.0, 6.0]
    y = gm.zeros(2, 2)
    other = y[1]
    y[0].add_(s)
    y.narrow(0, 1, 1).copy_(s.unsqueeze(0) * 2)
    (other * 5).sum().backward()
    assert y.requires_grad and other.requires_grad and y.tolist() == [[1.0, 1.0], [2.0, 2.0]]
    assert s.grad.tolist() == [13.0, 16.0]  # 3, 6 from above, + 10 through the view taken before the writes
    w = gm.zeros(2, 2)
    alias = w.detach()  # shares the memory, not the graph (PyTorch's)
    w[0].add_(s)
    assert w.requires_grad and not alias.requires_grad and alias.tolist() == [[1.0, 1.0], [0.0, 0.0]]
