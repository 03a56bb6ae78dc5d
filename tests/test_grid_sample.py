"""F.affine_grid and F.grid_sample (nn/_functional_grid.py) against PyTorch: values, and gradients with respect to
theta, the input and the grid, for every mode, padding_mode and align_corners, on 4-D and 5-D inputs, points
outside the input and exactly on its edges; the default's warning, empty batches, the meta device, and memory."""
import itertools
import warnings

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"float64": dict(rtol=1e-10, atol=1e-10), "float32": dict(rtol=1e-4, atol=1e-4)}


def _both(array, dtype, device, grad=True):
    return (gm.tensor(array, dtype=getattr(gm, dtype), device=device, requires_grad=grad),
            torch.tensor(array, dtype=getattr(torch, dtype), requires_grad=grad))


def _compare(fn_gm, fn_torch, arrays, device, dtype="float64", seed=0):
    """Values, and the gradients of a random weighting of the output with respect to every input."""
    pairs = [_both(a, dtype, device) for a in arrays]
    og, ot = fn_gm(*[p[0] for p in pairs]), fn_torch(*[p[1] for p in pairs])
    assert tuple(og.shape) == tuple(ot.shape)
    assert str(og.dtype).split(".")[-1] == str(ot.dtype).split(".")[-1]
    np.testing.assert_allclose(to_np(og), ot.detach().double().numpy(), **TOL[dtype])
    w = np.random.default_rng(seed).standard_normal(tuple(ot.shape))
    (og * gm.tensor(w, dtype=og.dtype, device=device)).sum().backward()
    (ot * torch.tensor(w, dtype=ot.dtype)).sum().backward()
    for a, b in pairs:
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            np.testing.assert_allclose(to_np(a.grad), b.grad.double().numpy(), **TOL[dtype])


# ---- affine_grid -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [[2, 3, 4, 5], [2, 1, 1, 3], [2, 3, 4, 5, 3], [2, 1, 2, 1, 4]], ids=str)
def test_affine_grid(size, align_corners, device):
    theta = np.random.default_rng(1).standard_normal((2, len(size) - 2, len(size) - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unit-size grids with align_corners=True warn in both
        _compare(lambda t: F.affine_grid(t, size, align_corners=align_corners),
                 lambda t: TF.affine_grid(t, size, align_corners=align_corners), [theta], device)


def test_affine_grid_float32_and_default_warning(device):
    theta = np.random.default_rng(2).standard_normal((3, 2, 3))
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        _compare(lambda t: F.affine_grid(t, (3, 1, 6, 7)), lambda t: TF.affine_grid(t, (3, 1, 6, 7)), [theta],
                 device, "float32")


# ---- grid_sample -------------------------------------------------------------------------------------------------
MODES_2D = list(itertools.product(["bilinear", "nearest", "bicubic"], ["zeros", "border", "reflection"],
                                  [False, True]))


@pytest.mark.parametrize("mode,padding_mode,align_corners", MODES_2D)
def test_grid_sample_4d(mode, padding_mode, align_corners, device):
    rng = np.random.default_rng(3)
    x, grid = rng.standard_normal((2, 3, 5, 6)), rng.uniform(-2.5, 2.5, (2, 4, 7, 2))  # far outside, too
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    _compare(lambda a, g: F.grid_sample(a, g, **kw), lambda a, g: TF.grid_sample(a, g, **kw), [x, grid], device)


@pytest.mark.parametrize("mode,padding_mode,align_corners",
                         list(itertools.product(["bilinear", "nearest"], ["zeros", "border", "reflection"],
                                                [False, True])))
def test_grid_sample_5d(mode, padding_mode, align_corners, device):
    rng = np.random.default_rng(4)
    x, grid = rng.standard_normal((2, 3, 4, 5, 6)), rng.uniform(-2.5, 2.5, (2, 3, 4, 2, 3))
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    _compare(lambda a, g: F.grid_sample(a, g, **kw), lambda a, g: TF.grid_sample(a, g, **kw), [x, grid], device)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_grid_sample_float32(mode, device):
    rng = np.random.default_rng(5)
    x, grid = rng.standard_normal((2, 4, 9, 8)), rng.uniform(-1.2, 1.2, (2, 5, 6, 2))
    kw = dict(mode=mode, padding_mode="border", align_corners=False)
    _compare(lambda a, g: F.grid_sample(a, g, **kw), lambda a, g: TF.grid_sample(a, g, **kw), [x, grid], device,
             "float32")


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_into_grid_sample_on_the_edges(padding_mode, align_corners, device):
    """An identity and a scaled affine grid put points exactly on pixel centres and on the input's edges, where
    the clip's gradient rule (0 at the bound) and the reflections decide."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 2, 5, 4))
    theta = np.array([[[1.0, 0, 0], [0, 1, 0]], [[1.5, 0, 0.5], [0, -2, 0]]])
    kw = dict(padding_mode=padding_mode, align_corners=align_corners)
    _compare(lambda a, t: F.grid_sample(a, F.affine_grid(t, (2, 2, 5, 4), align_corners=align_corners), **kw),
             lambda a, t: TF.grid_sample(a, TF.affine_grid(t, (2, 2, 5, 4), align_corners=align_corners), **kw),
             [x, theta], device)


def test_grid_sample_unit_sizes_empty_batch_and_warning(device):
    rng = np.random.default_rng(7)
    for pm in ("zeros", "border", "reflection"):  # a size-1 dim: reflection over an empty span
        _compare(lambda a, g: F.grid_sample(a, g, padding_mode=pm, align_corners=True),
                 lambda a, g: TF.grid_sample(a, g, padding_mode=pm, align_corners=True),
                 [rng.standard_normal((1, 2, 1, 3)), rng.uniform(-2, 2, (1, 3, 3, 2))], device)
    out = F.grid_sample(gm.zeros(0, 2, 4, 4, device=device), gm.zeros(0, 3, 3, 2, device=device),
                        align_corners=False)
    assert tuple(out.shape) == (0, 2, 3, 3)
    x, g = _both(rng.standard_normal((1, 2, 4, 4)), "float32", device, grad=False)
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        out = F.grid_sample(x, gm.zeros(1, 2, 2, 2, device=device))
    np.testing.assert_allclose(to_np(out), TF.grid_sample(g, torch.zeros(1, 2, 2, 2), align_corners=False).numpy(),
                               rtol=1e-6)


def test_nearest_grid_gradient_is_zero(device):
    x = gm.randn(1, 2, 4, 4, device=device, requires_grad=True)
    g = gm.zeros(1, 3, 3, 2, device=device, requires_grad=True)
    F.grid_sample(x, g, mode="nearest", align_corners=False).sum().backward()
    assert np.all(to_np(g.grad) == 0) and to_np(x.grad).sum() == 2 * 9


def test_meta_and_memory():
    x = gm.empty(2, 3, 6, 7, 8, device="meta", requires_grad=True)
    theta = gm.empty(2, 3, 4, device="meta", requires_grad=True)
    out = F.grid_sample(x, F.affine_grid(theta, (2, 3, 5, 5, 5), align_corners=False), align_corners=False)
    assert tuple(out.shape) == (2, 3, 5, 5, 5)
    out.sum().backward()
    assert tuple(theta.grad.shape) == (2, 3, 4) and tuple(x.grad.shape) == (2, 3, 6, 7, 8)
    # a 64x64 image sampled at 64x64 points: a dense (points x pixels) weight matrix would take 64 MiB
    x = gm.randn(1, 4, 64, 64, requires_grad=True)
    g = (gm.rand(1, 64, 64, 2) * 2 - 1).requires_grad_()
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    F.grid_sample(x, g, align_corners=False).sum().backward()
    assert gm.memory.max_memory_allocated("cpu") - base < 64 * 64 * 4 * 4 * 40  # 40 output-sized float32 tensors
