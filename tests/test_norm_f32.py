"""float32 batch norm in AVX-512 double lanes (kernels/cpu/norm_f32.c) against a float64 NumPy reference, and
against norm.c's generic loop (GPUMEMNET_NN_BF16=portable, in a child process): the same double arithmetic per
element, only the order of the per-channel sums differs, so outputs agree to one float32 rounding at most."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [(1, 1, 2), (2, 3, 1), (2, 3, 5), (4, 5, 8), (3, 2, 17), (2, 4, 33), (16, 3, 4096)]


def inputs(N, C, HW, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((N, C, HW)) * 3 + rng.standard_normal((1, C, 1)) * 50).astype(np.float32)
    w, b, rm = (rng.standard_normal(C).astype(np.float32) for _ in range(3))
    rv = (rng.random(C) + 0.5).astype(np.float32)
    g = rng.standard_normal((N, C, HW)).astype(np.float32)
    return [gm.from_numpy(a) for a in (x, w, b, rm, rv, g)]


def f64(t):
    return np.array(t.numpy()).astype(np.float64)


@pytest.mark.parametrize("N,C,HW", SHAPES)
@pytest.mark.parametrize("training", [True, False])
def test_forward_and_backward_against_float64(N, C, HW, training):
    x, w, b, rm, rv, g = inputs(N, C, HW, seed=N * C + HW)
    xv, rm0, rv0 = f64(x), f64(rm), f64(rv)
    out, mean, invstd = _C.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5)
    mu = xv.mean(axis=(0, 2)) if training else rm0
    var = xv.var(axis=(0, 2)) if training else rv0
    ist = 1 / np.sqrt(var + 1e-5)
    ref = (xv - mu[:, None]) * ist[:, None] * f64(w)[:, None] + f64(b)[:, None]
    np.testing.assert_allclose(f64(out), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(f64(mean), mu, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(f64(invstd), ist, rtol=1e-6)
    if training and N * HW > 1:
        np.testing.assert_allclose(f64(rv), 0.9 * rv0 + 0.1 * var * N * HW / (N * HW - 1), rtol=1e-6)
    dx, dw, db = _C.batch_norm_backward(g, x, w, mean, invstd, training, True, True, True)
    gv = f64(g)
    xh = (xv - f64(mean)[:, None]) * f64(invstd)[:, None]
    sg, sgx = gv.sum(axis=(0, 2)), (gv * xh).sum(axis=(0, 2))
    k = f64(w)[:, None] * f64(invstd)[:, None]
    cnt = N * HW
    ref = k * (gv - sg[:, None] / cnt - xh * sgx[:, None] / cnt) if training else k * gv
    np.testing.assert_allclose(f64(dx), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    np.testing.assert_allclose(f64(dw), sgx, rtol=1e-5, atol=1e-5 * np.abs(gv).sum(axis=(0, 2)).max())
    np.testing.assert_allclose(f64(db), sg, rtol=1e-5, atol=1e-5 * np.abs(gv).sum(axis=(0, 2)).max())
    # eval without the weight's gradient: the input is not read
    if not training:
        dx2, dw2, db2 = _C.batch_norm_backward(g, None, w, mean, invstd, False, True, False, True)
        np.testing.assert_array_equal(f64(dx2), f64(dx))
        assert dw2 is None


CHILD = r"""
import sys, numpy as np
sys.path.insert(0, {here!r})
from gpumemnet import _C
from test_norm_f32 import inputs
res = []
for shape in ((2, 3, 5), (4, 6, 37), (8, 4, 1024)):
    for training in (True, False):
        x, w, b, rm, rv, g = inputs(*shape, seed=sum(shape))
        out, m, s = _C.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5)
        dx, dw, db = _C.batch_norm_backward(g, x, w, m, s, training, True, True, True)
        res += [np.array(t.numpy()).ravel().astype(np.float64) for t in (out, m, s, rm, rv, dx, dw, db)]
np.save(sys.argv[1], np.concatenate(res))
"""


def test_fast_and_generic_paths_agree(tmp_path):
    got = {}
    for mode in ("fast", "portable"):
        env = dict(os.environ, GPUMEMNET_NN_BF16=mode)
        path = tmp_path / f"{mode}.npy"
        subprocess.run([sys.executable, "-c", CHILD.format(here=HERE), str(path)], env=env, check=True, timeout=120)
        got[mode] = np.load(path)
    f, p = got["fast"], got["portable"]
    # float32 results: equal, or one float32 unit apart where a statistic's last double bit moved a rounding
    np.testing.assert_allclose(f, p, rtol=2 ** -22, atol=1e-6)
    assert np.mean(f == p) > 0.95
