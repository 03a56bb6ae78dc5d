"""uint8/int8/int16/int32 on CUDA against the CPU: every cast pair (gm_cast_any in kernels/elementwise_ops.h runs
on both), fill, arange, strided copies, indexing, cat and comparisons give the same bytes."""
import itertools

import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import requires_cuda

pytestmark = [requires_cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

NARROW = [gm.uint8, gm.int8, gm.int16, gm.int32]
ALL = [gm.float32, gm.float64, gm.float16, gm.bfloat16, gm.int64, gm.bool] + NARROW
VALUES = [0.0, 1.0, -1.0, 2.7, -3.5, 127.0, 128.0, 255.0, 256.0, -129.0, 70000.0, -70000.0, 3e9, -3e9, 1e20,
          float("nan"), float("inf"), -0.0]


def host(t):
    t = t.cpu()
    return (t.float() if t.dtype == gm.bfloat16 else t).numpy()


def same(a, b, what):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=what)


def test_every_cast_pair_matches_cpu():
    for src, dst in itertools.product(ALL, ALL):
        if src not in NARROW and dst not in NARROW:
            continue  # the other pairs: test_cuda_elementwise.py
        x = gm.tensor(VALUES, dtype=gm.float64).to(src)
        same(host(x.cuda().to(dst)), host(x.to(dst)), f"{src} -> {dst}")
        xs = x[::2]  # strided
        same(host(xs.cuda().to(dst)), host(xs.to(dst)), f"{src} -> {dst} strided")


@pytest.mark.parametrize("d", NARROW, ids=lambda d: d.name)
def test_fill_arange_copy_index_cat_compare(d):
    info = gm.iinfo(d)
    for v in (0, 1, -1, 300, 2 ** 40 + 7):
        if -info.max <= v <= info.max:  # (unsigned types take -max..-1 too, wrapping, as PyTorch's)
            same(host(gm.full((5,), v, dtype=d, device="cuda")), host(gm.full((5,), v, dtype=d)), f"fill {v}")
        else:  # a number past the dtype is refused on both devices, as PyTorch refuses it
            for dev in ("cuda", "cpu"):
                with pytest.raises(RuntimeError, match="without overflow"):
                    gm.full((5,), v, dtype=d, device=dev)
    same(host(gm.arange(-5, 300, 7, dtype=d, device="cuda")), host(gm.arange(-5, 300, 7, dtype=d)), "arange")
    a = (np.arange(60).reshape(5, 12) * 13 - 300)
    x = gm.tensor(a).to(d)
    xc = x.cuda()
    same(host(xc.t().contiguous()), host(x.t().contiguous()), "transpose copy")
    same(host(xc[gm.tensor([4, 0, 2], device="cuda")]), host(x[gm.tensor([4, 0, 2])]), "gather")
    same(host(xc[xc > 3]), host(x[x > 3]), "mask")
    same(host(gm.cat([xc, xc[:2]], 0)), host(gm.cat([x, x[:2]], 0)), "cat")
    same(host(xc[1:] == xc[:-1]), host(x[1:] == x[:-1]), "eq")
    same(host(xc[1:] >= xc[:-1].flatten()[:12]), host(x[1:] >= x[:-1].flatten()[:12]), "ge broadcast")
    same(host(xc < 7), host(x < 7), "lt scalar")
    y, yc = x.clone(), xc.clone()
    y[1] = 9
    yc[1] = 9
    y[gm.tensor([0, 3])] = gm.tensor([7]).to(d)
    yc[gm.tensor([0, 3], device="cuda")] = gm.tensor([7]).to(d).cuda()
    same(host(yc), host(y), "index_put")
    # arithmetic and reductions run as int64 and wrap back: the same values as on the CPU
    same(host(xc * 3 + xc), host(x * 3 + x), "mul add")
    same(host(-xc), host(-x), "neg")
    same(host(xc.sum(1)), host(x.sum(1)), "sum")
    same(host(xc.amax(0)), host(x.amax(0)), "amax")
    same(host(xc.max(1).values), host(x.max(1).values), "max values")
    same(host(xc.clamp(-3, 100)), host(x.clamp(-3, 100)), "clamp")
    same(host(gm.where(xc > 0, xc, xc * 2)), host(gm.where(x > 0, x, x * 2)), "where")
    same(host(xc @ xc.t()), host(x @ x.t()), "matmul")  # (int64 products, wrapped back, as PyTorch's values)
