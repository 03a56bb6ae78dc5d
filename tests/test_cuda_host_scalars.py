"""0-d CPU tensors beside CUDA tensors, as PyTorch allows them: `x_cuda * torch.tensor(0.5)` (a loss weight, a
learning rate or a temperature kept on the CPU), and CPU index tensors for a CUDA tensor. PyTorch (on the CPU) is the
reference for values, result dtypes and gradients; the 0-d tensor's gradient comes back on the CPU."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import requires_cuda, to_np

torch = pytest.importorskip("torch")
pytestmark = requires_cuda

OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
       "rsub": lambda a, b: b - a, "pow": lambda a, b: a ** b, "maximum": lambda a, b: a.maximum(b),
       "lt": lambda a, b: a < b, "where": lambda a, b: a.where(a > 1, b), "clamp": lambda a, b: a.clamp(min=b)}
XS = {"float32": [0.5, 1.5, 2.0, 3.25], "float16": [0.5, 1.5, 2.0, 3.25], "int64": [1, 2, 3, 4]}
SCALARS = {"float64": 1.5, "float32": 2.0, "int64": 3, "bool": True}


def _pair(lib, dev, x, xdt, s, sdt):
    return lib.tensor(x, dtype=getattr(lib, xdt), device=dev), lib.tensor(s, dtype=getattr(lib, sdt))


@pytest.mark.parametrize("sdt", SCALARS)
@pytest.mark.parametrize("xdt", XS)
@pytest.mark.parametrize("op", OPS)
def test_a_host_scalar_joins_cuda_tensors_as_in_pytorch(op, xdt, sdt):
    f = OPS[op]
    tx, ts = _pair(torch, "cpu", XS[xdt], xdt, SCALARS[sdt], sdt)
    try:
        want = f(tx, ts)
    except RuntimeError:  # what PyTorch refuses (pow of an int64 tensor by a bool, ...) gpumemnet refuses too
        with pytest.raises((RuntimeError, TypeError, NotImplementedError)):
            f(*_pair(gm, "cuda", XS[xdt], xdt, SCALARS[sdt], sdt))
        return  # refused by both, as it should be
    got = f(*_pair(gm, "cuda", XS[xdt], xdt, SCALARS[sdt], sdt))
    assert got.device.type == "cuda"
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(to_np(got), want.double().numpy() if want.is_floating_point() else want.numpy(),
                               rtol=1e-3 if xdt == "float16" else 1e-6)


def test_gradients_of_a_host_scalar_come_back_on_the_cpu():
    def run(lib, dev):
        x = lib.tensor([0.5, 1.5, -2.0], device=dev, requires_grad=True)
        s = lib.tensor(1.25, requires_grad=True)            # a leaf on the CPU
        w = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)  # a CPU vector whose sum joins the CUDA graph
        y = (x * s + s ** 2 / x - x.maximum(s) + x * w.sum()).sum()
        y.backward()
        return y, x.grad, s.grad, w.grad

    want = run(torch, "cpu")
    got = run(gm, "cuda")
    assert got[1].device.type == "cuda"
    assert got[2].device.type == "cpu" and got[3].device.type == "cpu"
    for g, w in zip(got, want):
        np.testing.assert_allclose(to_np(g), w.detach().double().numpy(), rtol=1e-6)


def test_host_index_tensors_index_a_cuda_tensor():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    rows, mask = [2, 0, 2], [True, False, True]
    g, t = gm.tensor(x, device="cuda"), torch.tensor(x)
    for idx_g, idx_t in ((gm.tensor(rows), torch.tensor(rows)), (gm.tensor(mask), torch.tensor(mask))):
        got = g[idx_g]
        assert got.device.type == "cuda"
        np.testing.assert_array_equal(to_np(got), t[idx_t].numpy())
    g[gm.tensor([1])] = 7.0
    t[torch.tensor([1])] = 7.0
    g[gm.tensor(mask), 1] = -1.0
    t[torch.tensor(mask), 1] = -1.0
    np.testing.assert_array_equal(to_np(g), t.numpy())


def test_what_pytorch_refuses_across_devices_is_refused():
    x = gm.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match="cuda:0 and cpu"):
        x + gm.ones(3)            # a CPU tensor with dimensions is not a number
    with pytest.raises(RuntimeError, match="cuda:0 and cpu"):
        x + gm.ones(1)
    with pytest.raises(RuntimeError, match="cpu"):
        gm.add(x, gm.tensor(1.0), out=gm.empty(3))  # the result cannot be written to another device


def test_a_host_condition_selects_between_cuda_tensors():
    x = gm.tensor([1.0, -2.0], device="cuda")
    for c in (True, False):
        got = gm.where(gm.tensor(c), x, gm.zeros(()))
        assert got.device.type == "cuda"
        np.testing.assert_array_equal(to_np(got), torch.where(torch.tensor(c), torch.tensor([1.0, -2.0]), 0.0))
