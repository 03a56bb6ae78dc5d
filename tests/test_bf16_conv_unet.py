"""Half-precision convolutions on the routes the measured rule now takes for the UNet's layers (kernels/cpu/
conv_half.c, half_direct_route): groups of items widened to float32 for the float32 kernels, the forward and
input-gradient on Winograd where the float32 passes take it (64 or more channels each way: conv_winograd_use) and
the weight-gradient on the outer-product kernel (conv_wgrad.c) where every group fits it, else the direct kernel
or bfloat16 products. Shapes with several groups whose last one holds fewer items (the workspace is planned for a
whole group). bfloat16 and float16, 1 and 2 threads, against a float64 NumPy reference of the same inputs: each
result is a float32 sum rounded once, within half an ulp plus 2^-14 of the sum of the terms' magnitudes; and
meta's workspace bytes equal to the CPU's per pass (test_bf16_conv_deep.py's script)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet import _C
from test_bf16_conv_deep import WORKSPACES, _reference

# (N, C, H=W, K, kernel, stride, padding)
SHAPES = [
    (9, 128, 16, 64, 3, 1, 1),  # Winograd both ways and the wgrad kernel, in groups of 5 items then 4
    (3, 64, 8, 128, 3, 1, 1),  # 48 tiles: the direct kernel; 192 positions: the weight-gradient on products
    (4, 32, 32, 16, 3, 1, 1),  # the direct kernel and the wgrad kernel (16 output channels)
    (7, 16, 64, 32, 3, 1, 1),  # 2 items per group, 4 groups (the last of one item)
]
HALF_ULP = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_unet_layer_passes_match_float64(shape, dtype, threads, monkeypatch):
    monkeypatch.delenv("GPUMEMNET_BF16_CONV", raising=False)
    N, C, H, K, R, s, p = shape
    dt = getattr(gm, dtype)
    rng = np.random.default_rng(sum(shape))
    P = (H + 2 * p - R) // s + 1
    ops = [gm.tensor(a.astype(np.float32)).to(dt) for a in (rng.standard_normal((N, C, H, H)),
                                                             rng.standard_normal((K, C, R, R)) / (C * R * R) ** 0.5,
                                                             rng.standard_normal((N, K, P, P)))]
    x, w, go = ops
    ref = _reference(*(t.float().numpy().astype(np.float64) for t in ops), s, p)
    old = gm.get_num_threads()
    gm.set_num_threads(threads)
    try:
        fwd = F.conv2d(x, w, None, s, p)
        dx, dw = (_C.conv2d_backward(go, x, w, (s, s), (p, p), (1, 1), 1, mask, tuple(x.shape), tuple(w.shape))[i]
                  for i, mask in ((0, (True, False, False)), (1, (False, True, False))))
    finally:
        gm.set_num_threads(old)
    for name, got, val, mag in zip(("forward", "input-gradient", "weight-gradient"), (fwd, dx, dw), ref["val"],
                                   ref["abs"]):
        assert got.dtype == dt
        err = np.abs(got.float().numpy().astype(np.float64) - val)
        bound = HALF_ULP[dtype] * np.abs(val) + 2.0 ** -14 * mag
        assert (err <= bound).all(), (name, float((err / bound).max()))


@pytest.mark.parametrize("shape", SHAPES)
def test_unet_layer_workspace_on_meta_equals_cpu(shape):
    """Winograd's and the wgrad kernel's workspaces inside the route's: per pass the CPU's peak workspace is what
    meta allocates for the same shapes (without the allocator's cache, as test_bf16_conv_deep.py explains)."""
    env = dict(os.environ, GPUMEMNET_NO_CACHING="1")
    env.pop("GPUMEMNET_BF16_CONV", None)
    r = subprocess.run([sys.executable, "-c", WORKSPACES % (shape,)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    for line in r.stdout.split("\n")[:3]:
        cpu, meta = map(int, line.split())
        assert cpu == meta > 0, r.stdout
