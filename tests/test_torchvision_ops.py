"""torchvision's deform_conv2d and roi_pool under the alias (compat/torchvision_deform.py, what
torch.ops.torchvision's names run) against torchvision's own C++ operators: values and every gradient in float64,
for offsets that reach outside the map, with and without a mask, grouped weights and offsets, stride and dilation;
roi_pool's boxes inside, across and outside the map, its argmax, and the RoIPool module."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.compat import torchvision_deform

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")


@pytest.mark.parametrize("C, Cout, k, stride, pad, dil, wg, og, use_mask", [
    (4, 6, (3, 3), 1, (1, 1), 1, 1, 1, True),
    (4, 6, (3, 3), 2, (0, 0), 2, 2, 2, False),
    (6, 6, (3, 2), 1, (1, 0), 1, 3, 3, True),
])
def test_deform_conv2d_matches_torchvision(C, Cout, k, stride, pad, dil, wg, og, use_mask):
    rng = np.random.RandomState(C + Cout + wg)
    kh, kw = k
    OH = (7 + 2 * pad[0] - dil * (kh - 1) - 1) // stride + 1
    OW = (8 + 2 * pad[1] - dil * (kw - 1) - 1) // stride + 1
    arrays = [rng.randn(2, C, 7, 8), rng.randn(Cout, C // wg, kh, kw), rng.randn(2, 2 * og * kh * kw, OH, OW) * 2,
              rng.rand(2, og * kh * kw, OH, OW), rng.randn(Cout)]
    w_out = rng.randn(2, Cout, OH, OW)
    sizes = (stride, stride, pad[0], pad[1], dil, dil, wg, og, use_mask)

    def run(lib, op):
        x, w, off, mask, b = (lib.tensor(a, requires_grad=True) for a in arrays)
        out = op(x, w, off, mask if use_mask else lib.zeros(2, 1, dtype=lib.float64), b, *sizes)
        (out * lib.tensor(w_out)).sum().backward()
        grads = [t.grad for t in (x, w, off, b) + ((mask,) if use_mask else ())]
        return [np.asarray(out.tolist())] + [np.asarray(g.tolist()) for g in grads]
    ref = run(torch, torch.ops.torchvision.deform_conv2d)
    got = run(gm, torchvision_deform.deform_conv2d)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-11)


def test_deform_conv2d_refuses_groups_that_do_not_divide():
    x, w = gm.randn(1, 6, 5, 5), gm.randn(4, 2, 3, 3)
    with pytest.raises(RuntimeError, match=r"deform_conv2d: weight's 4 output channels cannot be divided into 3"):
        torchvision_deform.deform_conv2d(x, w, gm.zeros(1, 18, 3, 3), gm.zeros(1, 1), gm.zeros(4), 1, 1, 0, 0, 1, 1,
                                         3, 1, False)
    with pytest.raises(RuntimeError, match=r"deform_conv2d: offset of shape \(1, 17, 3, 3\)"):
        torchvision_deform.deform_conv2d(x, gm.randn(6, 6, 3, 3), gm.zeros(1, 17, 3, 3), gm.zeros(1, 1),
                                         gm.zeros(6), 1, 1, 0, 0, 1, 1, 1, 1, False)


def test_roi_pool_matches_torchvision():
    rng = np.random.RandomState(0)
    x, w = rng.randn(2, 3, 12, 10), rng.randn(6, 3, 3, 4)
    rois = np.array([[0, 1.0, 2.0, 14.0, 9.0], [1, -4.0, -3.0, 6.0, 8.0], [0, 30.0, 30.0, 40.0, 44.0],
                     [1, 9.5, 1.2, 30.0, 30.0], [0, 3.0, 3.0, 3.0, 3.0], [1, 2.5, 3.5, 7.5, 10.5]])

    def run(lib, op):
        xt = lib.tensor(x, requires_grad=True)
        out, arg = op(xt, lib.tensor(rois), 0.75, 3, 4)
        (out * lib.tensor(w)).sum().backward()
        return np.asarray(out.tolist()), np.asarray(arg.tolist()), np.asarray(xt.grad.tolist()), str(arg.dtype)
    ref = run(torch, torch.ops.torchvision.roi_pool)
    got = run(gm, torchvision_deform.roi_pool)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-12)
    assert got[3].split(".")[-1] == ref[3].split(".")[-1] == "int32"
    with pytest.raises(RuntimeError, match=r"roi_pool: a box's batch index 2.0 is outside \[0, 2\)"):
        torchvision_deform.roi_pool(gm.tensor(x), gm.tensor([[2, 1.0, 1.0, 3.0, 3.0]]), 1.0, 2, 2)
