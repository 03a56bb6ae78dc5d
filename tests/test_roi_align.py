"""torchvision's roi_align (what torch.ops.torchvision.roi_align runs under the alias: compat/torchvision_ops.py, a
kernel each way) against torchvision's own C++ operator: values and input gradients for boxes inside, across and
outside the feature map (samples more than a pixel outside count as 0), thin boxes at the edges, aligned and not,
fixed and adaptive sampling, float32 and float64, on the CPU and on CUDA; half inputs run in float32; meta
allocates what the CPU does; bad arguments are refused with the argument named."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.compat import torchvision_ops
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
import torchvision  # noqa: E402,F401  (registers torch.ops.torchvision)

BOXES = [[0, 1.0, 2.0, 20.0, 18.0],     # inside
         [1, -6.0, -4.0, 9.0, 30.0],    # across the top-left corner
         [0, 45.0, 36.0, 80.0, 60.0],   # wholly outside (right and below)
         [1, 37.5, 3.0, 39.9, 28.0],    # a thin box at the right edge
         [0, 2.0, 31.0, 30.0, 31.9],    # a thin box at the bottom edge
         [1, 5.0, 5.0, 5.0, 5.0]]       # empty


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matches_torchvision(aligned, sampling_ratio, dtype, device):
    rng = np.random.default_rng(sampling_ratio + 2 * aligned)
    x = rng.standard_normal((2, 3, 16, 20)).astype(dtype)
    rois = np.asarray(BOXES, dtype)
    args = (0.5, 3, 4, sampling_ratio, aligned)
    w = rng.standard_normal((len(BOXES), 3, 3, 4))

    tx = torch.from_numpy(x).requires_grad_()
    ref = torch.ops.torchvision.roi_align(tx, torch.from_numpy(rois), *args)
    (ref * torch.from_numpy(w).to(ref.dtype)).sum().backward()

    gx = gm.tensor(x, device=device, requires_grad=True)
    out = torchvision_ops.roi_align(gx, gm.tensor(rois, device=device), *args)
    (out * gm.tensor(w, device=device).to(out.dtype)).sum().backward()
    assert out.dtype == gx.dtype and tuple(out.shape) == tuple(ref.shape)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(to_np(out), ref.detach().numpy(), **tol)
    np.testing.assert_allclose(to_np(gx.grad), tx.grad.numpy(), **tol)
    assert not to_np(out)[2].any()  # the box outside the map reads nothing


def test_half_runs_in_float32_and_meta_allocates_what_the_cpu_does():
    rng = np.random.default_rng(0)
    x, rois = rng.standard_normal((2, 3, 16, 20)), np.asarray(BOXES)
    half = torchvision_ops.roi_align(gm.tensor(x).to(gm.bfloat16), gm.tensor(rois).to(gm.bfloat16), 0.5, 3, 4, 2,
                                     True)
    ref = torch.ops.torchvision.roi_align(torch.from_numpy(x).bfloat16().float(),
                                          torch.from_numpy(rois).bfloat16().float(), 0.5, 3, 4, 2, True)
    assert half.dtype == gm.bfloat16
    np.testing.assert_allclose(to_np(half), ref.bfloat16().float().numpy(), rtol=1e-2, atol=1e-2)
    peaks = {}
    for dev in ("cpu", "meta"):
        xt = gm.tensor(x, device=dev, requires_grad=True)
        gm.memory.reset_peak_memory_stats(dev)
        base = gm.memory.memory_allocated(dev)
        torchvision_ops.roi_align(xt, gm.tensor(rois, device=dev), 0.5, 3, 4, 0, False).sum().backward()
        peaks[dev] = gm.memory.max_memory_allocated(dev) - base
    assert peaks["cpu"] == peaks["meta"]


@pytest.mark.parametrize("case, error, pattern", [
    ("int input", TypeError, r"roi_align: input must be float32 or float64"),
    ("rois of 4 columns", RuntimeError, r"roi_align: rois must have shape \(K, 5\), got \(2, 4\)"),
    ("3-D input", RuntimeError, r"roi_align: input must be \(N, C, H, W\)"),
    ("rois of another dtype", RuntimeError, r"roi_align: Expected tensor for input to have the same type"),
    ("batch index out of range", RuntimeError, r"roi_align"),
    ("no bins", ValueError, r"roi_align: the output size must be positive, got \(0, 4\)"),
])
def test_bad_arguments_are_refused(case, error, pattern):
    x, rois = gm.randn(2, 3, 8, 8), gm.tensor([[0, 1.0, 1.0, 4.0, 4.0], [1, 0.0, 0.0, 2.0, 3.0]])
    if case == "int input":
        x = x.long()
    elif case == "rois of 4 columns":
        rois = rois[:, 1:]
    elif case == "3-D input":
        x = x[0]
    elif case == "rois of another dtype":
        rois = rois.double()
    elif case == "batch index out of range":
        rois = gm.tensor([[2, 1.0, 1.0, 4.0, 4.0]])
    with pytest.raises(error, match=pattern):
        gm._C.roi_align(x, rois, 1.0, 0 if case == "no bins" else 3, 4, 2, False)
