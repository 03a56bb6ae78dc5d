"""Call forms PyTorch accepts that libraries use (torchvision's transforms among them), against PyTorch:
randint(high, size=...), Tensor.numpy(force=True), tensor_split's keyword overloads and negative indices."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")


def test_randint_with_one_bound(device):
    for lib in (gm, torch):
        dev = device if lib is gm else "cpu"
        for t in (lib.randint(5, size=(300,), device=dev), lib.randint(5, (300,), device=dev),
                  lib.randint(2, 5, (300,), device=dev)):
            v = to_np(t) if lib is gm else t.numpy()
            assert t.dtype == lib.int64 and v.min() >= 0 and v.max() <= 4
        with pytest.raises(TypeError):
            lib.randint(5)


def test_numpy_force(device):
    x = gm.ones(3, requires_grad=True, device=device) * 2
    with pytest.raises(RuntimeError, match="requires grad"):
        x.numpy()
    np.testing.assert_array_equal(x.numpy(force=True), torch.full((3,), 2.0, requires_grad=True).numpy(force=True))


@pytest.mark.parametrize("args, kwargs", [(((3, 1),), {}), ((), {"indices": (-1,)}), ((), {"sections": 2}),
                                          (((-2, 9),), {}), ((3,), {}), (((0, 0, 5),), {})])
def test_tensor_split_forms(args, kwargs, device):
    got = gm.tensor_split(gm.arange(5, device=device), *args, **kwargs)
    want = torch.tensor_split(torch.arange(5), *args, **kwargs)
    assert [to_np(g).tolist() for g in got] == [w.tolist() for w in want]
    got = gm.arange(12, device=device).reshape(2, 6).tensor_split(gm.tensor([1, 4]), dim=1)
    want = torch.arange(12).reshape(2, 6).tensor_split(torch.tensor([1, 4]), dim=1)
    assert [to_np(g).tolist() for g in got] == [w.tolist() for w in want]


def test_xlogy_gradients_at_zeros(device):
    """d/dx is log(y) also where x is 0, but 0 where x and y are both 0; d/dy is x / y (NaN at 0 / 0)."""
    xs, ys = np.array([0.0, 0.0, 1.0, 2.0, 0.0, -1.0]), np.array([0.0, 2.0, 0.0, 3.0, np.inf, 0.5])
    got = {}
    for lib, dev in ((gm, device), (torch, "cpu")):
        x = lib.tensor(xs, requires_grad=True, device=dev)
        y = lib.tensor(ys, requires_grad=True, device=dev)
        lib.xlogy(x, y).sum().backward()
        x2 = lib.tensor(xs, requires_grad=True, device=dev)
        lib.xlogy(x2, 0.0).sum().backward()
        got[lib] = (x.grad, y.grad, x2.grad)
    for a, t in zip(got[gm], got[torch]):
        np.testing.assert_array_equal(to_np(a), t.numpy())


def test_clamp_gradients_at_the_bounds(device):
    """A number bound passes no gradient at a tie (PyTorch 2.15); tensor bounds split a tie with the input and
    get their own gradient where they win."""
    got = {}
    for lib, dev in ((gm, device), (torch, "cpu")):
        xs = [0.0, 1.0, 2.0, 3.0, 1.5]
        x = lib.tensor(xs, requires_grad=True, device=dev)
        lib.clamp(x, 1.0, 2.0).sum().backward()
        x2 = lib.tensor(xs, requires_grad=True, device=dev)
        lo = lib.ones(5, requires_grad=True, device=dev)
        hi = lib.full((5,), 2.0, requires_grad=True, device=dev)
        (lib.clamp(x2, lo, hi) * lib.arange(5.0, device=dev)).sum().backward()
        got[lib] = (x.grad, x2.grad, lo.grad, hi.grad)
    for a, t in zip(got[gm], got[torch]):
        np.testing.assert_array_equal(to_np(a), t.numpy())


def test_multinomial_of_no_samples_is_refused():
    for lib in (gm, torch):
        with pytest.raises(RuntimeError, match="cannot sample n_sample <= 0 samples"):
            lib.multinomial(lib.ones(3), 0)
