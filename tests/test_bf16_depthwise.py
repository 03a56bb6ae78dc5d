"""bfloat16 and float16 depthwise convolutions on the CPU (kernels/cpu/conv_depthwise.c: each plane widened into
per-thread float32 buffers, float32 sums, every result rounded once): forward and both gradients against
PyTorch's bfloat16 depthwise convolution and, on small integers (every sum exact), bit for bit against float64
NumPy rounded once; the shapes MobileNetV2 and EfficientNet use (3x3 and 5x5, stride 1 and 2, padding k//2) and
others (odd sizes, batch 1, a channel multiplier, dilation, conv_transpose2d); 1 and 2 threads; workspace bytes
exactly as planned and meta's equal to the CPU's; a team smaller than the threads asked for; autocast running
the depthwise convolution in bfloat16 without float32 copies."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet import _C

from conv_util import ref_conv2d, ref_conv2d_grad_weight, ref_conv_transpose2d, threads, workspace_limit  # noqa: F401

# (N, C, H, W, kernel, stride): MobileNetV2's 3x3 at stride 1 and 2, EfficientNet's 5x5, odd sizes, batch 1
CASES = [
    (2, 8, 9, 7, 3, 1),
    (1, 5, 8, 8, 3, 2),
    (2, 6, 11, 10, 5, 1),
    (3, 4, 9, 9, 5, 2),
    (1, 16, 7, 13, 3, 2),
    (4, 32, 16, 16, 3, 1),  # 2^20 multiply-adds and more: both threads work
    (2, 24, 33, 33, 5, 2),
]


def _ids(c):
    return "N{}C{}H{}W{}k{}s{}".format(*c)


def _round(a, dtype):
    """float64 values rounded once to dtype (through an exact float32)."""
    return gm.tensor(np.asarray(a, np.float32)).to(dtype).float().numpy().astype(np.float64)


def _ours(x, w, b, go, dtype, stride, padding, groups, dilation=1):
    ts = [gm.tensor(np.asarray(t, np.float32)).to(dtype).requires_grad_() for t in (x, w, b)]
    out = F.conv2d(ts[0], ts[1], ts[2], stride, padding, dilation, groups)
    assert out.dtype == dtype
    out.backward(gm.tensor(np.asarray(go, np.float32)).to(dtype))
    assert all(t.grad.dtype == dtype for t in ts)
    return [out.detach().float().numpy().astype(np.float64)] + [t.grad.float().numpy().astype(np.float64) for t in ts]


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_matches_pytorch_bf16(case, nthreads, threads):  # noqa: F811
    torch = pytest.importorskip("torch")
    N, C, H, W, k, s = case
    gen = torch.Generator().manual_seed(sum(case))
    x = torch.randn(N, C, H, W, generator=gen).bfloat16()
    w = (torch.randn(C, 1, k, k, generator=gen) / k).bfloat16()
    b = torch.randn(C, generator=gen).bfloat16()
    P, Q = (H + 2 * (k // 2) - k) // s + 1, (W + 2 * (k // 2) - k) // s + 1
    go = torch.randn(N, C, P, Q, generator=gen).bfloat16()

    def torch_side(dtype):
        ts = [t.detach().to(dtype).requires_grad_() for t in (x, w, b)]
        out = torch.nn.functional.conv2d(ts[0], ts[1], ts[2], s, k // 2, 1, C)
        out.backward(go.to(dtype))
        return [out.detach().double().numpy()] + [t.grad.double().numpy() for t in ts]

    gm.set_num_threads(nthreads)
    ours = _ours(*(t.float().numpy() for t in (x, w, b, go)), gm.bfloat16, s, k // 2, C)
    for name, o, t, r in zip(("out", "dx", "dw", "db"), ours, torch_side(torch.bfloat16), torch_side(torch.float64)):
        scale = np.abs(r).max() + 1e-30
        # as tests/test_bf16_conv.py's _check: float32 sums rounded once to bfloat16
        err, terr = np.abs(o - r).max() / scale, np.abs(t - r).max() / scale
        assert err <= 2.0 ** -6, (name, err)
        assert err <= terr + 2 * 2.0 ** -8, (name, err, terr)


# (N, C, H, W, K, kernel, stride, dilation): the cases above, and a channel multiplier of 2, dilation 2
EXACT = [c[:4] + (c[1],) + c[4:] + (1,) for c in CASES] + [(2, 3, 9, 8, 6, 3, 1, 1), (1, 4, 10, 9, 8, 3, 2, 1),
                                                             (2, 4, 11, 11, 4, 3, 1, 2)]


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("case", EXACT, ids=lambda c: "N{}C{}H{}W{}K{}k{}s{}d{}".format(*c))
def test_exact_on_small_integers(case, dtype, nthreads, threads):  # noqa: F811
    """Values of -2..2 (-1..1 for the weight-gradient's longer sums): every float32 sum is exact, so each result is
    the float64 one rounded once to the half type, bit for bit."""
    N, C, H, W, K, k, s, d = case
    rng = np.random.default_rng(sum(case))
    pad = d * (k // 2)
    x = rng.integers(-1, 2, (N, C, H, W)).astype(np.float64)
    w = rng.integers(-2, 3, (K, 1, k, k)).astype(np.float64)
    b = rng.integers(-2, 3, K).astype(np.float64)
    P, Q = (H + 2 * pad - d * (k - 1) - 1) // s + 1, (W + 2 * pad - d * (k - 1) - 1) // s + 1
    go = rng.integers(-1, 2, (N, K, P, Q)).astype(np.float64)
    gm.set_num_threads(nthreads)
    out, dx, dw, db = _ours(x, w, b, go, dtype, s, pad, C, d)
    ref_out = ref_conv2d(x, w, b, s, pad, d, C)
    opad = H - ((P - 1) * s - 2 * pad + d * (k - 1) + 1), W - ((Q - 1) * s - 2 * pad + d * (k - 1) + 1)
    ref_dx = ref_conv_transpose2d(go, w, None, s, pad, opad, C, d)
    ref_dw = ref_conv2d_grad_weight(x, go, w.shape, s, pad, d, C)
    for name, got, ref in (("out", out, ref_out), ("dx", dx, ref_dx), ("dw", dw, ref_dw),
                           ("db", db, go.sum(axis=(0, 2, 3)))):
        assert np.array_equal(got, _round(ref, dtype)), name


@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float16], ids=["bf16", "f16"])
def test_conv_transpose2d_depthwise(dtype):
    """conv_transpose2d with groups == out_channels is the input-gradient of a depthwise convolution: the same
    kernels, exact on small integers."""
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, (2, 8, 5, 6)).astype(np.float64)
    w = rng.integers(-2, 3, (8, 1, 3, 3)).astype(np.float64)
    b = rng.integers(-2, 3, 4 * 2).astype(np.float64)
    for stride, opad in ((1, 0), (2, 1)):
        got = F.conv_transpose2d(gm.tensor(x.astype(np.float32)).to(dtype), gm.tensor(w.astype(np.float32)).to(dtype),
                                 gm.tensor(b.astype(np.float32)).to(dtype), stride, 1, opad, 8)
        assert got.dtype == dtype
        ref = ref_conv_transpose2d(x, w, b, stride, 1, opad, 8)
        assert np.array_equal(got.float().numpy(), _round(ref, dtype)), stride


def _per_thread(H, W, P, Q, k, s=1):
    """Bytes of one thread's float32 buffers (kernels/cpu/conv_depthwise.c, dw_layout; padding k // 2): the padded
    input's s x s phases (rows x pitch each, in whole vectors, and k + 16 floats of slack), the flat output plane
    (after `front` zeros in the input-gradient), a padded input row, and 16 floats per tap, in 64-byte lines."""
    a = lambda n: (n + 15) // 16 * 16  # noqa: E731
    cdiv = lambda n, d: -(-n // d)  # noqa: E731
    rows = cdiv(max(H + k // 2, (P - 1) * s + k), s)
    pitch = cdiv(max(W + k // 2, (Q - 1) * s + k), s)
    F, front = a(rows * pitch), (k - 1) // s * pitch + (k - 1) // s
    return 4 * (a(s * s * F + k + 16) + a(front + F + 16) + a(pitch * s) + 16 * k * k)


def _blocks(n):
    return (n + 511) // 512 * 512  # the allocator's unit


@pytest.mark.parametrize("nthreads", [1, 2])
def test_workspace_bytes_exact_and_meta_equal(nthreads, threads, workspace_limit):  # noqa: F811
    """Per thread one widened input plane, one output plane and one channel's taps (threads that have work: 2 only
    from 2^20 multiply-adds); meta allocates the same; a limit that holds one thread's buffers runs on one."""
    gm.set_num_threads(nthreads)
    for (N, C, H, W, k, s) in ((4, 32, 16, 16, 3, 1), (1, 4, 9, 9, 5, 2)):
        P, Q = (H + 2 * (k // 2) - k) // s + 1, (W + 2 * (k // 2) - k) // s + 1
        macs = N * C * P * Q * k * k
        nt = nthreads if nthreads > 1 and macs >= 32768 else 1
        want = _blocks(nt * _per_thread(H, W, P, Q, k, s))
        peaks = {}
        for dev in ("cpu", "meta"):
            mk = (lambda shape: gm.zeros(shape, dtype=gm.bfloat16)) if dev == "cpu" else \
                (lambda shape: gm.empty(shape, dtype=gm.bfloat16, device="meta"))
            x, w, g = mk((N, C, H, W)), mk((C, 1, k, k)), mk((N, C, P, Q))
            gm.memory.reset_peak_memory_stats(dev)
            _C.conv2d(x, w, None, s, k // 2, 1, C)
            _C.conv2d_backward(g, x, w, s, k // 2, 1, C, (True, True, False))
            peaks[dev] = gm.memory.memory_stats(dev)["by_category"]["workspace"]["peak"]
        assert peaks["cpu"] == want, (peaks, want)
        assert peaks["meta"] == peaks["cpu"]
    # a limit of one thread's buffers: one thread, the same values
    x = gm.tensor(np.random.default_rng(0).standard_normal((4, 32, 16, 16)).astype(np.float32)).to(gm.bfloat16)
    w = gm.tensor(np.random.default_rng(1).standard_normal((32, 1, 3, 3)).astype(np.float32)).to(gm.bfloat16)
    full = _C.conv2d(x, w, None, 1, 1, 1, 32).float().numpy()
    one = _per_thread(16, 16, 16, 16, 3)
    _C.set_conv_workspace_limit(one)
    gm.memory.reset_peak_memory_stats("cpu")
    assert np.array_equal(_C.conv2d(x, w, None, 1, 1, 1, 32).float().numpy(), full)
    assert gm.memory.memory_stats("cpu")["by_category"]["workspace"]["peak"] == _blocks(one)
    _C.set_conv_workspace_limit(one - 1)
    with pytest.raises(RuntimeError, match="workspace limit"):
        _C.conv2d(x, w, None, 1, 1, 1, 32)


def test_smaller_team_than_asked():
    """Under OMP_THREAD_LIMIT=1, 2 threads asked in a fresh process: OpenMP gives a team of one, which must still
    cover every plane and channel (exact small-integer results against float64)."""
    code = (
        "import numpy as np, gpumemnet as gm\n"
        "from gpumemnet import _C\n"
        "from conv_util import ref_conv2d, ref_conv2d_grad_weight, ref_conv_transpose2d\n"
        "gm.set_num_threads(2)\n"
        "rng = np.random.default_rng(3)\n"
        "for dt in (gm.bfloat16, gm.float16):\n"
        "    for s in (1, 2):\n"
        "        x = rng.integers(-1, 2, (4, 32, 16, 16)).astype(np.float64)\n"
        "        w = rng.integers(-2, 3, (32, 1, 3, 3)).astype(np.float64)\n"
        "        P = (16 + 2 - 3) // s + 1\n"
        "        g = rng.integers(-1, 2, (4, 32, P, P)).astype(np.float64)\n"
        "        T = lambda a: gm.tensor(a.astype(np.float32)).to(dt)\n"
        "        R = lambda a: gm.tensor(a.astype(np.float32)).to(dt).float().numpy()\n"
        "        out = _C.conv2d(T(x), T(w), None, s, 1, 1, 32).float().numpy()\n"
        "        assert np.array_equal(out, R(ref_conv2d(x, w, None, s, 1, 1, 32))), ('out', dt, s)\n"
        "        dx, dw, _ = _C.conv2d_backward(T(g), T(x), T(w), s, 1, 1, 32, (True, True, False))\n"
        "        op = 16 - ((P - 1) * s - 2 + 3)\n"
        "        assert np.array_equal(dx.float().numpy(), R(ref_conv_transpose2d(g, w, None, s, 1, op, 32))), s\n"
        "        assert np.array_equal(dw.float().numpy(), R(ref_conv2d_grad_weight(x, g, w.shape, s, 1, 1, 32))), s\n"
        "print('ok')\n")
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(__file__), env.get("PYTHONPATH")) if p)
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stderr[-2000:]


def test_autocast_runs_depthwise_in_bf16_without_float32_copies():
    """Under bfloat16 autocast a depthwise conv2d takes bfloat16 operands to the C kernels as they are: its output
    and gradients are bfloat16 and its workspace is the per-thread planes, far below a float32 copy of the input
    (which it took when the operands were widened)."""
    rng = np.random.default_rng(2)
    x = gm.tensor(rng.standard_normal((4, 32, 32, 32)).astype(np.float32)).to(gm.bfloat16).requires_grad_()
    conv = gm.nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False)
    gm.memory.reset_peak_memory_stats("cpu")
    ws0 = gm.memory.memory_stats("cpu")["by_category"]["workspace"]["current"]
    with gm.autocast("cpu", dtype=gm.bfloat16):
        out = conv(x)
    assert out.dtype == gm.bfloat16
    g = gm.tensor(rng.standard_normal(tuple(out.shape)).astype(np.float32)).to(gm.bfloat16)
    gm.memory.reset_peak_memory_stats("cpu")
    out.backward(g)  # (a contiguous gradient: an expanded one would be copied first)
    assert x.grad.dtype == gm.bfloat16 and conv.weight.grad.dtype == gm.float32
    peak = gm.memory.memory_stats("cpu")["by_category"]["workspace"]["peak"] - ws0
    # the planes and the weight's bfloat16 cast again for the backward (nn/_functional_conv.py, _recast)
    assert peak <= _blocks(2 * _per_thread(32, 32, 32, 32, 3)) + _blocks(2 * 32 * 9), peak
    ref = F.conv2d(x.detach().float(), conv.weight.detach().to(gm.bfloat16).float(), None, 1, 1, 1, 32)
    np.testing.assert_allclose(out.detach().float().numpy(), ref.numpy(), rtol=2 ** -7, atol=1e-6)


# other geometries: no padding, a 1x1 and a 7x7 kernel, unequal strides and paddings, a non-contiguous input
OTHER = [dict(k=(3, 3), stride=(2, 2), padding=(0, 0)), dict(k=(1, 1), stride=(1, 1), padding=(0, 0)),
         dict(k=(7, 7), stride=(1, 1), padding=(3, 3)), dict(k=(3, 5), stride=(1, 2), padding=(0, 2)),
         dict(k=(3, 3), stride=(3, 2), padding=(1, 0)), dict(k=(3, 3), stride=(2, 2), padding=(1, 1), sliced=True)]


@pytest.mark.parametrize("dtype", [gm.bfloat16, gm.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("case", OTHER, ids=lambda c: "k{}s{}p{}{}".format(c["k"], c["stride"], c["padding"],
                                                                         "-sliced" if c.get("sliced") else ""))
def test_exact_other_geometries(case, dtype):
    rng = np.random.default_rng(11)
    N, C, H, W = 2, 6, 11, 9
    x = rng.integers(-1, 2, (N, C, H, 2 * W if case.get("sliced") else W)).astype(np.float64)
    w = rng.integers(-2, 3, (C, 1) + case["k"]).astype(np.float64)
    xt = gm.tensor(x.astype(np.float32)).to(dtype)
    if case.get("sliced"):  # every other column: the kernels read the input at its strides
        xt, x = xt[:, :, :, ::2], x[:, :, :, ::2]
    xt.requires_grad_()
    wt = gm.tensor(w.astype(np.float32)).to(dtype).requires_grad_()
    out = F.conv2d(xt, wt, None, case["stride"], case["padding"], 1, C)
    go = rng.integers(-1, 2, tuple(out.shape)).astype(np.float64)
    out.backward(gm.tensor(go.astype(np.float32)).to(dtype))
    s, p = case["stride"], case["padding"]
    assert np.array_equal(out.detach().float().numpy(), _round(ref_conv2d(x, w, None, s, p, 1, C), dtype))
    P, Q = out.shape[2:]
    opad = tuple(n - ((m - 1) * st - 2 * pd + kk) for n, m, st, pd, kk in zip((H, W), (P, Q), s, p, case["k"]))
    assert np.array_equal(xt.grad.float().numpy(), _round(ref_conv_transpose2d(go, w, None, s, p, opad, C), dtype))
    assert np.array_equal(wt.grad.float().numpy(), _round(ref_conv2d_grad_weight(x, go, w.shape, s, p, 1, C), dtype))


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_transpose2d_depthwise_backward_exact(stride):
    """conv_transpose2d's gradients on a depthwise geometry run the same half passes (its input's gradient is the
    forward, its weight's the weight-gradient with the roles swapped): exact on small integers against PyTorch's
    float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(stride)
    x = rng.integers(-1, 2, (2, 8, 6, 5)).astype(np.float64)
    w = rng.integers(-2, 3, (8, 1, 3, 3)).astype(np.float64)
    xt, wt = (gm.tensor(a.astype(np.float32)).to(gm.bfloat16).requires_grad_() for a in (x, w))
    out = F.conv_transpose2d(xt, wt, None, stride, 1, stride - 1, 8)
    go = rng.integers(-1, 2, tuple(out.shape)).astype(np.float64)
    out.backward(gm.tensor(go.astype(np.float32)).to(gm.bfloat16))
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    tout = torch.nn.functional.conv_transpose2d(tx, tw, None, stride, 1, stride - 1, 8)
    tout.backward(torch.tensor(go))
    assert np.array_equal(out.detach().float().numpy(), _round(tout.detach().numpy(), gm.bfloat16))
    assert np.array_equal(xt.grad.float().numpy(), _round(tx.grad.numpy(), gm.bfloat16))
    assert np.array_equal(wt.grad.float().numpy(), _round(tw.grad.numpy(), gm.bfloat16))
