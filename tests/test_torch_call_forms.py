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
