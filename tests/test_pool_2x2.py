"""2x2 stride-2 max pooling on AVX-512, bfloat16 and float32 (kernels/cpu/pool_2x2.c): against a float64 NumPy
reference (max pooling only moves values, so results must be exact), bfloat16 against the float32 kernels on the
same values, the fast path against pool.c's generic loops (GPUMEMNET_NN_BF16=portable, in a child process) bit for
bit, and on the special values the window rules are about: nans (values-only forward: any nan gives nan; backward:
a nan always wins), -inf windows (nothing sent back), ties (the first maximum), signed zeros (a -0 gradient
arrives as +0, pool.c's 0 + g). Odd sizes (the last row and column in no window), strided views (row strides that
are not the width), ceil_mode and geometries the fast path leaves to pool.c. Meta bytes equal CPU bytes."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C

HERE = os.path.dirname(os.path.abspath(__file__))
K2 = ((2, 2), (2, 2), (0, 0), (1, 1))


def bits(t):
    return (np.array(t.to(gm.float32).numpy()).view(np.uint32) >> 16).astype(np.uint16)


def same(t):
    """The values as float32 bit patterns (exact for both dtypes; nans compare by their bits)."""
    return np.array(t.to(gm.float32).numpy()).view(np.uint32)


def bf16(a):
    return gm.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(gm.bfloat16)


def values(shape, seed, special=True, ties=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(np.float32)
    if ties:
        a = np.round(a * 2) / 2  # many equal maxima
    if special:
        flat = a.reshape(-1)
        pool = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, -np.nan], np.float32)
        flat[rng.choice(flat.size, max(1, flat.size // 20), replace=False)] = rng.choice(pool, max(1, flat.size // 20))
    return a


def pool_ref(x):
    """float64 NumPy: 2x2 stride 2 max with nan propagation (values-only forward)."""
    N, C, H, W = x.shape
    OH, OW = H // 2, W // 2
    w = x[:, :, :2 * OH, :2 * OW].reshape(N, C, OH, 2, OW, 2)
    return w.max(axis=(3, 5))  # numpy's max propagates nan


def pool_bwd_ref(g, x):
    """float64 NumPy: each window's gradient to its argmax (strictly greater keeps the first, a nan wins (the
    last), an all -inf window sends nothing)."""
    N, C, H, W = x.shape
    d = np.zeros_like(x)
    for n, c, oh, ow in np.ndindex(N, C, H // 2, W // 2):
        best, arg = -np.inf, None
        for i, j in ((0, 0), (0, 1), (1, 0), (1, 1)):
            v = x[n, c, 2 * oh + i, 2 * ow + j]
            if v > best or v != v:
                best, arg = v, (i, j)
        if arg is not None:
            d[n, c, 2 * oh + arg[0], 2 * ow + arg[1]] = 0.0 + g[n, c, oh, ow]
    return d


SHAPES = [(1, 1, 2, 2), (2, 3, 4, 6), (1, 2, 5, 7), (2, 2, 8, 34), (2, 3, 9, 63), (1, 1, 2, 66), (16, 4, 64, 64)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ties", [False, True])
def test_bf16_bit_for_bit_with_float32(shape, ties):
    a = values(shape, seed=sum(shape), ties=ties)
    x = bf16(a)
    x32 = x.to(gm.float32)
    out = _C.max_pool2d(x, *K2, False, False)
    want = _C.max_pool2d(x32, *K2, False, False)
    np.testing.assert_array_equal(bits(out), bits(want.to(gm.bfloat16)))
    g = bf16(np.random.default_rng(1).standard_normal(out.shape))
    dx = _C.max_pool2d_backward_input(g, x, *K2, False)
    dx32 = _C.max_pool2d_backward_input(g.to(gm.float32), x32, *K2, False)
    np.testing.assert_array_equal(bits(dx), bits(dx32.to(gm.bfloat16)))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float32])
def test_against_float64_numpy(shape, dtype):
    x = gm.from_numpy(values(shape, seed=3 + sum(shape), ties=True)).to(dtype)
    xv = np.array(x.to(gm.float64).numpy())
    out = _C.max_pool2d(x, *K2, False, False)
    assert out._dtype == dtype.code
    np.testing.assert_array_equal(np.array(out.to(gm.float64).numpy()), pool_ref(xv))
    gn = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    gn.reshape(-1)[::7] = -0.0
    g = gm.from_numpy(gn).to(dtype)
    dx = np.array(_C.max_pool2d_backward_input(g, x, *K2, False).to(gm.float64).numpy())
    if np.prod(shape) < 5000:
        ref = pool_bwd_ref(np.array(g.to(gm.float64).numpy()), xv)
        np.testing.assert_array_equal(dx, ref)
        assert not np.signbit(dx[dx == 0]).any()  # 0 + (-0) is +0


def test_special_windows():
    a = np.array([[np.nan, 1, -np.inf, -np.inf, 0.0, -0.0, 2, 2],
                  [5, 1, -np.inf, -np.inf, -0.0, 0.0, 2, np.nan]], np.float32).reshape(1, 1, 2, 8)
    x = bf16(a)
    out = np.array(_C.max_pool2d(x, *K2, False, False).to(gm.float32).numpy()).ravel()
    assert np.isnan(out[0]) and out[1] == -np.inf and out[2] == 0.0 and np.isnan(out[3])
    g = bf16(np.array([1, 2, 3, 4], np.float32).reshape(1, 1, 1, 4))
    dx = np.array(_C.max_pool2d_backward_input(g, x, *K2, False).to(gm.float32).numpy()).reshape(2, 8)
    want = np.zeros((2, 8), np.float32)
    want[0, 0] = 1      # the nan wins
    # window 2: all -inf, nothing sent back
    want[0, 4] = 3      # +0 then -0, -0, +0: the first (no later zero is strictly greater)
    want[1, 7] = 4      # the nan wins over the earlier 2s
    np.testing.assert_array_equal(dx, want)


@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float32])
def test_strided_views_and_other_geometries(dtype):
    a = values((2, 3, 12, 20), seed=5)
    full = gm.from_numpy(a).to(dtype)
    x = full[:, :, 1:11, 2:17]  # row stride 20, not the width: the fast path reads through strides
    xc = x.contiguous()
    for args in (K2, ((3, 3), (2, 2), (1, 1), (1, 1)), ((2, 2), (1, 1), (0, 0), (1, 1)), ((2, 2), (2, 2), (1, 1), (1, 1))):
        for ceil in (False, True):
            out = _C.max_pool2d(x, *args, ceil, False)
            want = _C.max_pool2d(xc.to(gm.float32), *args, ceil, False)
            np.testing.assert_array_equal(same(out), same(want.to(dtype)))
            g = gm.from_numpy(np.random.default_rng(2).standard_normal(out.shape).astype(np.float32)).to(dtype)
            gt = g.transpose(2, 3).contiguous().transpose(2, 3)  # a grad whose last dim is strided
            for gg in (g, gt):
                dx = _C.max_pool2d_backward_input(gg, x, *args, ceil)
                dx32 = _C.max_pool2d_backward_input(g.to(gm.float32), xc.to(gm.float32), *args, ceil)
                if args == K2:
                    np.testing.assert_array_equal(same(dx), same(dx32.to(dtype)))
                else:  # overlapping windows add in bfloat16 in pool.c: one rounding per add
                    np.testing.assert_allclose(np.array(dx.to(gm.float32).numpy()), np.array(dx32.numpy()),
                                               rtol=2 ** -7, atol=2 ** -5)


def test_autograd_and_meta_bytes():
    def run(device):
        gm.memory.reset_peak_memory_stats(device)
        before = gm.memory.memory_stats(device)["allocated"]["current"]
        x = gm.ones((4, 8, 16, 16), dtype=gm.bfloat16, device=device, requires_grad=True)
        y = gm.nn.functional.max_pool2d(x * 2, 2)
        y.sum().backward()
        st = gm.memory.memory_stats(device)["allocated"]
        return st["current"] - before, st["peak"] - before
    assert run("meta") == run("cpu")
    torch = pytest.importorskip("torch")
    a = values((2, 3, 10, 14), seed=9, special=False)
    x = bf16(a).requires_grad_()
    (gm.nn.functional.max_pool2d(x, 2) * 3).sum().backward()
    t = torch.from_numpy(a).to(torch.bfloat16).requires_grad_()
    (torch.nn.functional.max_pool2d(t, 2) * 3).sum().backward()
    np.testing.assert_array_equal(np.array(x.grad.to(gm.float32).numpy()), t.grad.float().numpy())


CHILD = r"""
import sys, numpy as np
sys.path.insert(0, {here!r})
import gpumemnet as gm
from gpumemnet import _C
from test_pool_2x2 import values, K2
res = []
for dt in (gm.bfloat16, gm.float32):
    for shape in ((2, 3, 9, 63), (4, 5, 16, 34), (16, 4, 64, 64)):
        x = gm.from_numpy(values(shape, seed=sum(shape), ties=True)).to(dt)
        out = _C.max_pool2d(x, *K2, False, False)
        gn = np.random.default_rng(2).standard_normal(out.shape).astype(np.float32)
        gn.reshape(-1)[::5] = -0.0
        gn.reshape(-1)[1::11] = np.nan
        dx = _C.max_pool2d_backward_input(gm.from_numpy(gn).to(dt), x, *K2, False)
        res += [np.array(t.to(gm.float32).numpy()).ravel().view(np.uint32) for t in (out, dx)]
np.save(sys.argv[1], np.concatenate(res))
"""


def test_fast_and_generic_paths_agree_bit_for_bit(tmp_path):
    got = {}
    for mode in ("fast", "portable"):
        path = tmp_path / f"{mode}.npy"
        subprocess.run([sys.executable, "-c", CHILD.format(here=HERE), str(path)],
                       env=dict(os.environ, GPUMEMNET_NN_BF16=mode), check=True, timeout=120)
        got[mode] = np.load(path)
    np.testing.assert_array_equal(got["fast"], got["portable"])
