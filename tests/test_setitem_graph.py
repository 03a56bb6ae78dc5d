"""x[idx] = value inside a graph, against PyTorch: into a tensor computed from parameters (its gradient loses the
overwritten entries), of a value that requires grad (it gets the gradient of its entries, summed over
broadcasting), into a preallocated buffer filled row by row; and the refusals (a leaf that requires grad, as
PyTorch; a view of a tensor in a graph, which gpumemnet cannot rebase). fill_ / zero_ on a tensor in a graph and
on a slice of one (Swin V2's qkv_bias[n:2n].zero_())."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
W, V = R.standard_normal((4, 5)), R.standard_normal(5)


def _mask(lib, dev):
    return lib.tensor(W > 0.3, device=dev)


ASSIGNMENTS = {
    "slice from a value in the graph": lambda lib, dev, b, w, v: b.__setitem__((slice(None), 1), v[:4] * 3),
    "int pair from a scalar": lambda lib, dev, b, w, v: b.__setitem__((0, 0), 2.5),
    "row broadcast": lambda lib, dev, b, w, v: b.__setitem__(2, v),
    "mask": lambda lib, dev, b, w, v: b.__setitem__(_mask(lib, dev), 0.5),
    "advanced index": lambda lib, dev, b, w, v: b.__setitem__(lib.tensor([3, 1], device=dev), v * v),
    "negative step-free slice": lambda lib, dev, b, w, v: b.__setitem__((slice(1, 3), slice(-2, None)), v[0]),
}


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_assignment_in_a_graph(name, device):
    got = {}
    for lib, dev in ((gm, device), (torch, "cpu")):
        w = lib.tensor(W, requires_grad=True, device=dev)
        v = lib.tensor(V, requires_grad=True, device=dev)
        b = w * 2
        ASSIGNMENTS[name](lib, dev, b, w, v)
        g = lib.tensor(np.arange(20.0).reshape(4, 5), device=dev)
        (b * g).sum().backward()
        got[lib] = [b.detach(), w.grad, v.grad]
    for a, t in zip(got[gm], got[torch]):
        if t is None:
            assert a is None or float(a.abs().sum()) == 0.0
        else:
            np.testing.assert_allclose(to_np(a), t.numpy(), rtol=1e-12, atol=1e-12)


def test_filling_a_buffer_row_by_row(device):
    got = {}
    for lib, dev in ((gm, device), (torch, "cpu")):
        w = lib.tensor(W, requires_grad=True, device=dev)
        out = lib.zeros(3, 5, device=dev)
        for i in range(3):
            out[i] = (w[i] * (i + 1)).tanh()
        assert out.requires_grad
        (out ** 2).sum().backward()
        got[lib] = (out.detach(), w.grad)
    for a, t in zip(got[gm], got[torch]):
        np.testing.assert_allclose(to_np(a), t.numpy(), rtol=1e-12, atol=1e-12)


def test_refusals(device):
    for lib, dev in ((gm, device), (torch, "cpu")):
        leaf = lib.ones(3, requires_grad=True, device=dev)
        with pytest.raises(RuntimeError):
            leaf[0] = 2.0
    grads = []
    for lib, dev in ((gm, device), (torch, "cpu")):  # a write into a view of a graph tensor: recorded, as PyTorch's
        w = lib.ones(2, 3, requires_grad=True, device=dev)
        b = w * 2
        b[0][1] = 5.0
        (b * lib.arange(6.0, device=dev).reshape(2, 3)).sum().backward()
        grads.append((b.detach().cpu().numpy().tolist(), w.grad.cpu().numpy().tolist()))
    assert grads[0] == grads[1]
    seen = []
    for lib, dev in ((gm, device), (torch, "cpu")):  # a view alive beside the write takes the graph, as PyTorch's
        base = lib.zeros(2, 3, device=dev)
        keep = base[0]
        v = lib.ones(3, requires_grad=True, device=dev)
        base[1] = v * 2
        (base * 2 + keep.sum()).sum().backward()
        seen.append((keep.requires_grad, base.requires_grad, v.grad.cpu().numpy().tolist()))
    assert seen[0] == seen[1]


def test_fill_in_a_graph_and_on_a_slice_of_one(device):
    got = {}
    for lib, dev in ((gm, device), (torch, "cpu")):
        w = lib.tensor(V, requires_grad=True, device=dev)
        s = lib.tensor(1.5, requires_grad=True, device=dev)
        b = w.clone() * 2
        b[1:3].zero_()           # a slice of a tensor in the graph
        c = w * 3
        c.fill_(4.0)              # the whole tensor: no gradient reaches w through c
        e = w * 1
        e[4].fill_(s * 2)         # a value in the graph
        ((b + c + e) * lib.tensor(np.arange(5.0), device=dev)).sum().backward()
        got[lib] = (b.detach(), c.detach(), e.detach(), w.grad, s.grad)
    for a, t in zip(got[gm], got[torch]):
        np.testing.assert_allclose(to_np(a), t.numpy(), rtol=1e-12, atol=1e-12)


def test_in_place_arithmetic_and_copy_on_slices(device):
    """x[:, 0] += 1, x[1] *= y, x[2, 1:3].sub_(5), x[0].copy_(y * 3), a slice's div_, and a buffer's copy_ of a
    value in the graph (with non_blocking=, as data prefetchers write it)."""
    got = {}
    for lib, dev in ((gm, device), (torch, "cpu")):
        w = lib.arange(12.0, device=dev).reshape(3, 4).requires_grad_()
        y = lib.ones(4, requires_grad=True, device=dev)
        b = w * 2
        b[:, 0] += 1
        b[1] *= y
        b[2, 1:3].sub_(5)
        b[0].copy_(y * 3)
        c = w.clone()
        c[:, 2].div_(2)
        out = lib.zeros(2, 4, device=dev)
        out.copy_(y * 2, non_blocking=True)
        weights = lib.arange(12.0, device=dev).reshape(3, 4)
        ((b + c) * weights).sum().backward(retain_graph=True)
        out.sum().backward()
        got[lib] = (b.detach(), c.detach(), w.grad, y.grad)
    for a, t in zip(got[gm], got[torch]):
        np.testing.assert_allclose(to_np(a), t.numpy(), rtol=1e-12, atol=1e-12)
