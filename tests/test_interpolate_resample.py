"""F.interpolate's separable modes against PyTorch: 'linear' (3-D), 'bicubic', and antialias=True for 'bilinear'
and 'bicubic' (torchvision's tensor Resize and RandomResizedCrop default), downscaling and upscaling, with and
without align_corners and scale factors: values and float64 gradients; nearest on integer images (masks)."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)
CASES = [
    ((2, 3, 17, 13), (7, 5), None, "bilinear", False, True),
    ((2, 3, 17, 13), (40, 31), None, "bilinear", False, True),
    ((1, 2, 16, 16), None, 0.37, "bilinear", False, True),
    ((1, 1, 16, 16), (5, 9), None, "bilinear", True, True),
    ((1, 2, 16, 16), (5, 9), None, "bicubic", False, True),
    ((1, 1, 16, 16), (5, 9), None, "bicubic", True, True),
    ((1, 2, 16, 16), (16, 16), None, "bicubic", False, True),
    ((1, 2, 16, 16), (33, 21), None, "bicubic", False, False),
    ((1, 2, 16, 16), (33, 21), None, "bicubic", True, False),
    ((1, 2, 16, 16), None, 2.5, "bicubic", False, False),
    ((1, 2, 16, 16), (6, 6), None, "bicubic", False, False),
    ((2, 3, 20), (7,), None, "linear", False, False),
    ((2, 3, 20), (45,), None, "linear", True, False),
    ((2, 3, 20), None, 1.7, "linear", False, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[3]}-{c[1] or c[2]}-ac{int(c[4])}-aa{int(c[5])}")
def test_matches_pytorch(case, device):
    shape, size, sf, mode, ac, aa = case
    x = R.standard_normal(shape)
    kw = dict(size=size, scale_factor=sf, mode=mode, align_corners=ac, antialias=aa)
    tx = torch.tensor(x, requires_grad=True)
    gx = gm.tensor(x, device=device, requires_grad=True)
    ty = torch.nn.functional.interpolate(tx, **kw)
    gy = gm.nn.functional.interpolate(gx, **kw)
    g = R.standard_normal(tuple(ty.shape))
    (ty * torch.tensor(g)).sum().backward()
    (gy * gm.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(to_np(gy), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(to_np(gx.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_float32_and_bfloat16_keep_their_dtype(device):
    x = R.standard_normal((1, 3, 20, 20)).astype(np.float32)
    want = torch.nn.functional.interpolate(torch.tensor(x), size=(8, 8), mode="bilinear", antialias=True)
    got = gm.nn.functional.interpolate(gm.tensor(x, device=device), size=(8, 8), mode="bilinear", antialias=True)
    assert got.dtype == gm.float32
    np.testing.assert_allclose(to_np(got), want.numpy(), rtol=1e-5, atol=1e-6)
    b = gm.nn.functional.interpolate(gm.tensor(x, device=device).bfloat16(), size=(8, 8), mode="bicubic")
    assert b.dtype == gm.bfloat16


def test_nearest_on_integer_masks(device):
    m = R.randint(0, 255, (2, 1, 9, 7)).astype(np.uint8)
    for mode in ("nearest", "nearest-exact"):
        want = torch.nn.functional.interpolate(torch.tensor(m), size=(5, 11), mode=mode)
        got = gm.nn.functional.interpolate(gm.tensor(m, device=device), size=(5, 11), mode=mode)
        assert got.dtype == gm.uint8
        np.testing.assert_array_equal(to_np(got), want.numpy())


def test_antialias_is_refused_where_pytorch_refuses_it():
    for lib in (gm, torch):
        with pytest.raises(ValueError, match="Anti-alias option"):
            lib.nn.functional.interpolate(lib.zeros(1, 1, 4, 4), size=(2, 2), mode="nearest", antialias=True)
        with pytest.raises(NotImplementedError):
            lib.nn.functional.interpolate(lib.zeros(1, 1, 4), size=2, mode="bicubic")
