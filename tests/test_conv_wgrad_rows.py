"""conv_wgrad's units of whole rows of taps (kernels/cpu/conv_wgrad.c): a unit owns a block of input channels, a
block of output channels and every row of taps whose sums fit its stack block (WG_BLK_FLOATS), so its part of dW is
contiguous runs, flushed in transposed 16x16 tiles and stored (not added) by the first group of items. Checked
exactly on small integers against float64 NumPy where the rows split into blocks (9x9 and 11x11 kernels), where
several groups of items or slices of one item add onto the first's stores, where each thread owns its blocks of
output channels (K a multiple of 128 at 2 threads), odd sizes, 1 and 2 threads."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn.functional import conv2d

from conv_util import T, ref_conv2d_grad_weight, threads, workspace_limit  # noqa: F401


def ints(rng, shape):
    return rng.integers(-2, 3, shape).astype(np.float64)


# x, w, stride, padding, workspace limit (bytes; slices and groups of items below 1 MiB)
CASES = [
    dict(x=(2, 32, 19, 17), w=(64, 32, 9, 9), padding=4),                 # 9x9, K 64: rows in blocks of 5 + 4
    dict(x=(2, 30, 16, 18), w=(16, 30, 11, 11), padding=5),               # K 16, C 30: blocks of 24 + 6; 4+4+3 rows
    dict(x=(3, 20, 21, 21), w=(32, 20, 9, 7), stride=2, padding=(4, 3)),  # K 32, 9x7/2
    dict(x=(3, 32, 19, 17), w=(64, 32, 9, 9), padding=4, limit=323 * 64 * 4),  # one item a group: 3 groups
    dict(x=(1, 16, 40, 40), w=(64, 16, 9, 9), padding=4, limit=300 * 64 * 4),  # slices of 288 positions
    dict(x=(3, 29, 17, 15), w=(48, 29, 3, 3), padding=1, limit=255 * 48 * 4 + 255 * 48 * 4),  # 3x3: whole rows
    dict(x=(2, 64, 14, 14), w=(256, 64, 3, 3), padding=1),                # 3x3 256 out: 4 blocks of 64
    # K a multiple of 128: at 2 threads each owns its blocks of 64 output channels (no barrier)
    dict(x=(3, 32, 19, 17), w=(128, 32, 9, 9), padding=4, limit=323 * 128 * 4),  # 3 groups, rows split
    dict(x=(1, 40, 33, 35), w=(384, 40, 1, 1), limit=300 * 384 * 4),     # 1x1: slices of 288 positions, 6 blocks
    dict(x=(2, 128, 28, 28), w=(128, 128, 1, 1)),                         # the benchmark's 1x1 layer
]


def _ids(c):
    return "-".join(f"{k}{v}" for k, v in c.items()).replace(" ", "")


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_rows_exact_on_integers(case, nthreads, threads, workspace_limit):
    case = dict(case)
    xs, ws = case.pop("x"), case.pop("w")
    gm.set_num_threads(nthreads)
    if "limit" in case:
        _C.set_conv_workspace_limit(case.pop("limit"))
    stride, padding = case.get("stride", 1), case.get("padding", 0)
    rng = np.random.default_rng(21)
    x = ints(rng, xs)
    with gm.no_grad():
        out_hw = conv2d(T(x, gm.float32), T(np.zeros(ws), gm.float32), None, stride, padding).shape[2:]
    dout = ints(rng, (xs[0], ws[0]) + tuple(out_hw))
    dw = _C.conv2d_backward(T(dout, gm.float32), T(x, gm.float32), None, stride, padding, 1, 1, (False, True, False),
                            None, ws)[1]
    np.testing.assert_array_equal(dw.numpy(), ref_conv2d_grad_weight(x, dout, ws, stride, padding))


@pytest.mark.parametrize("nthreads", [1, 2])
def test_rows_against_torch_float64(nthreads, threads):
    """Normal data: the weight-gradient of a 9x9 layer (rows split) and the 3x3 256->256 14x14 layer within float32
    rounding of PyTorch's float64 weight-gradient."""
    torch = pytest.importorskip("torch")
    gm.set_num_threads(nthreads)
    rng = np.random.default_rng(22)
    for xs, ws, pad in (((2, 32, 19, 17), (64, 32, 9, 9), 4), ((2, 256, 14, 14), (256, 256, 3, 3), 1)):
        x = rng.standard_normal(xs).astype(np.float32)
        P, Q = xs[2] + 2 * pad - ws[2] + 1, xs[3] + 2 * pad - ws[3] + 1
        dout = rng.standard_normal((xs[0], ws[0], P, Q)).astype(np.float32)
        dw = _C.conv2d_backward(T(dout), T(x), None, 1, pad, 1, 1, (False, True, False), None, ws)[1].numpy()
        ref = torch.ops.aten.convolution_backward(
            torch.from_numpy(dout).double(), torch.from_numpy(x).double(), torch.zeros(ws, dtype=torch.float64), None,
            [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, [False, True, False])[1].numpy()
        scale = np.sqrt(xs[0] * P * Q)  # the sums' size: terms of unit variance
        assert np.max(np.abs(dw - ref)) / scale < 1e-5


def test_weight_gradients_follow_the_team_openmp_gives():
    """Asked for 2 threads, OpenMP may give fewer (OMP_THREAD_LIMIT, a region inside another): the threads' shares
    of the weight-gradient then follow the team it gave, and every weight is still computed; conv_wgrad's owned
    blocks (K 256) and the gemm route's split rows (conv.c: tiles of items at 7x7, within-item tiles for K 72, the
    pointwise 1x1 at 7x7) both left half of dW unwritten before. A fresh process: libgomp reads the limit when it
    loads."""
    import os
    import subprocess
    import sys
    code = (
        "import numpy as np, gpumemnet as gm\n"
        "from gpumemnet import _C\n"
        "from conv_util import ref_conv2d_grad_weight\n"
        "gm.set_num_threads(2)\n"
        "rng = np.random.default_rng(23)\n"
        "for xs, ws, pad in (((2, 32, 20, 20), (256, 32, 1, 1), 0), ((2, 64, 7, 7), (128, 64, 3, 3), 1),\n"
        "                    ((2, 96, 20, 20), (72, 96, 3, 3), 1), ((2, 64, 7, 7), (64, 64, 1, 1), 0)):\n"
        "    x = rng.integers(-2, 3, xs).astype(np.float64)\n"
        "    d = rng.integers(-2, 3, (xs[0], ws[0]) + xs[2:]).astype(np.float64)\n"
        "    dw = _C.conv2d_backward(gm.tensor(d, dtype=gm.float32), gm.tensor(x, dtype=gm.float32), None, 1, pad,\n"
        "                            1, 1, (False, True, False), None, ws)[1].numpy()\n"
        "    assert np.array_equal(dw, ref_conv2d_grad_weight(x, d, ws, 1, pad)), ws\n"
        "print('ok')\n")
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(__file__), env.get("PYTHONPATH")) if p)
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stderr[-2000:]


@pytest.mark.parametrize("route", ["gemm", "widen"])
def test_half_weight_gradient_under_a_smaller_team(route):
    """The bfloat16 and float16 weight-gradients (conv_half.c: bfloat16 products, and the widened float16 route)
    split dW's columns over the team OpenMP gives too: under OMP_THREAD_LIMIT=1 with 2 threads asked, the second
    half of the columns was left zero. Values of -1, 0, 1 over 256 positions keep every sum exact in both types
    (and the shapes reach the 2^20 multiply-adds from which the pass uses 2 threads)."""
    import os
    import subprocess
    import sys
    code = (
        "import numpy as np, gpumemnet as gm\n"
        "from gpumemnet import _C\n"
        "from conv_util import ref_conv2d_grad_weight\n"
        "gm.set_num_threads(2)\n"
        "rng = np.random.default_rng(29)\n"
        "for dt in (gm.bfloat16, gm.float16):\n"
        "    for xs, ws, pad in (((1, 16, 16, 16), (32, 16, 3, 3), 1), ((1, 64, 16, 16), (64, 64, 1, 1), 0)):\n"
        "        x = rng.integers(-1, 2, xs).astype(np.float64)\n"
        "        d = rng.integers(-1, 2, (xs[0], ws[0]) + xs[2:]).astype(np.float64)\n"
        "        dw = _C.conv2d_backward(gm.tensor(d, dtype=dt), gm.tensor(x, dtype=dt), None, 1, pad,\n"
        "                                1, 1, (False, True, False), None, ws)[1].float().numpy()\n"
        "        assert np.array_equal(dw, ref_conv2d_grad_weight(x, d, ws, 1, pad)), (dt, ws)\n"
        "print('ok')\n")
    env = dict(os.environ, OMP_THREAD_LIMIT="1", GPUMEMNET_BF16_CONV=route)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(__file__), env.get("PYTHONPATH")) if p)
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stderr[-2000:]
