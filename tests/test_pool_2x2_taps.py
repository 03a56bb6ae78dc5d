"""2x2 stride-2 max pooling with the argmax kept as its tap in the window (the training path of a relu's output:
python/gpumemnet/nn/_functional_pool.py), on AVX-512 for bfloat16 and float32 (kernels/cpu/pool_2x2.c:
maxpool2x2_forward_taps / _backward_taps): values, taps and the gradient bit for bit equal to the generic loop
(pool.c, taken with GPUMEMNET_NN_BF16=portable in a subprocess), with NaN (the last one wins), windows of -inf
only (tap -1), -0, odd heights and widths, widths past one vector of 16 outputs and a strided input; and
against a NumPy reference of the first maximum."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

SHAPES = [(2, 3, 8, 8), (1, 2, 7, 9), (2, 2, 64, 70), (1, 1, 3, 35)]

RUN = """
import numpy as np, gpumemnet as gm
from gpumemnet import _C
out = []
for dt in (gm.float32, gm.bfloat16):
    for i, shape in enumerate(%r):
        rng = np.random.default_rng(i)
        v = rng.standard_normal(shape[:3] + (shape[3] + 3,)).astype(np.float32)
        v.flat[::11] = np.nan
        v.flat[::13] = -0.0
        v[..., :2, :2] = -np.inf
        x = gm.tensor(v).to(dt)[..., 1:1 + shape[3]]  # rows wider than the plane: the input's strides
        o, t = _C.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), False, 2)
        g = gm.tensor(rng.standard_normal(tuple(o.shape)).astype(np.float32)).to(dt)
        dx = _C.max_pool2d_backward(g, t, tuple(x.shape), (2, 2), (2, 2), (0, 0), (1, 1))
        out += [o.float().numpy().tobytes().hex(), t.numpy().tobytes().hex(), dx.float().numpy().tobytes().hex()]
print(" ".join(out))
""" % (SHAPES,)


def test_fast_path_equals_generic_loop_bit_for_bit():
    runs = []
    for path in (None, "portable"):
        env = dict(os.environ)
        env.pop("GPUMEMNET_NN_BF16", None)
        if path:
            env["GPUMEMNET_NN_BF16"] = path
        r = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        runs.append(r.stdout.split())
    assert len(runs[0]) == 6 * len(SHAPES)
    for i, (a, b) in enumerate(zip(*runs)):
        assert a == b, i


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES)
def test_values_and_taps_match_numpy(dtype, shape):
    rng = np.random.default_rng(7)
    x = gm.tensor(rng.standard_normal(shape).astype(np.float32)).to(getattr(gm, dtype))
    o, t = _C.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), False, 2)
    a = x.float().numpy()
    N, C, H, W = shape
    win = a[:, :, :H // 2 * 2, :W // 2 * 2].reshape(N, C, H // 2, 2, W // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    win = win.reshape(N, C, H // 2, W // 2, 4)
    assert np.array_equal(o.float().numpy(), win.max(-1))
    assert np.array_equal(t.numpy(), win.argmax(-1).astype(np.int8))  # the first maximum
    g = gm.tensor(rng.standard_normal(tuple(o.shape)).astype(np.float32)).to(getattr(gm, dtype))
    dx = _C.max_pool2d_backward(g, t, shape, (2, 2), (2, 2), (0, 0), (1, 1)).float().numpy()
    ref = np.zeros(shape, np.float32)
    taps = win.argmax(-1)
    gv = g.float().numpy()
    for i in range(2):
        for j in range(2):
            ref[:, :, i:H // 2 * 2:2, j:W // 2 * 2:2] = np.where(taps == 2 * i + j, gv, 0)
    assert np.array_equal(dx, ref)


def test_a_tap_outside_the_window_is_an_error():
    x = gm.tensor(np.zeros((1, 1, 4, 32), np.float32))
    o, t = _C.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), False, 2)
    bad = gm.tensor(np.full(tuple(t.shape), 4, np.int8))
    with pytest.raises(Exception):
        _C.max_pool2d_backward(gm.ones(tuple(o.shape)), bad, (1, 1, 4, 32), (2, 2), (2, 2), (0, 0), (1, 1))
