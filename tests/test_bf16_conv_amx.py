"""bfloat16 convolutions on the AMX tile unit (kernels/cpu/conv_half_amx.c): the forward, input-gradient and
weight-gradient of stride-1 convolutions as implicit products on pair planes of the input (no im2col). Each
result is a float32 sum rounded once, so against a float64 NumPy reference of the same bfloat16 operands it is
within half an ulp plus 2^-14 of the sum of the terms' magnitudes; shapes with odd and few channels (pairs padded
with zero), partial blocks of 16 output channels, non-square and small maps (flat blocks across rows), asymmetric
padding, 1x1 and 5x5 kernels, a bias, a transposed input layout, several item groups in the weight-gradient, 1 and
2 threads, the measured rule and GPUMEMNET_BF16_CONV=amx. Where the CPU has AMX, the workspace each pass takes is
the route's (so the route did run) and meta's bytes equal the CPU's."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet import _C


def _has_amx():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return all(k in flags for k in ("amx_bf16", "amx_tile", "avx512_bf16"))


AMX = _has_amx()

# (N, C, H, W, K, kernel, padding h, padding w, stride)
SHAPES = [
    (2, 16, 16, 16, 16, 3, 1, 1, 1),   # the UNet's 16-channel layers: 8 pairs a block
    (3, 3, 9, 13, 20, 3, 1, 1, 1),     # 3 channels (2 pairs, one half zero), 2 blocks of output channels
    (2, 33, 12, 7, 40, 3, 0, 1, 1),    # odd channels, no padding on the rows, 7 columns (flat blocks span rows)
    (2, 64, 5, 6, 130, 3, 1, 1, 1),    # more than 128 output channels, small maps
    (1, 5, 9, 9, 7, 5, 2, 2, 1),       # 5x5
    (2, 40, 4, 4, 48, 1, 0, 0, 1),     # 1x1
    (2, 70, 6, 5, 33, 3, 1, 0, 1),     # 35 pairs: 3 blocks of 16, the last partial
    (5, 48, 64, 64, 16, 3, 1, 1, 1),   # the weight-gradient in groups of 3 items, then 2
    (5, 64, 48, 48, 80, 3, 1, 1, 1),   # the same with 32 x 32-channel units rounding dw themselves (1 thread)
    (2, 24, 17, 16, 40, 3, 1, 1, 2),   # stride 2 (the forward and weight-gradient on the input's phases), odd H
    (3, 3, 20, 21, 16, 7, 3, 3, 2),    # ResNet's 7x7/2 stem, odd W
    (2, 32, 16, 16, 48, 2, 0, 0, 2),   # 2x2/2 (a transposed convolution's backward), 1x1/2 below
    (2, 64, 9, 8, 40, 1, 0, 0, 2),
]
HALF_ULP = 2.0 ** -8


def _reference(x, w, go, ph, pw, st):
    """float64 forward, input-gradient and weight-gradient of a convolution of stride st."""
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    P, Q = go.shape[2:]
    xp = np.zeros((N, C, H + 2 * ph + R + st * P, W + 2 * pw + S + st * Q))
    xp[:, :, ph:ph + H, pw:pw + W] = x
    fwd = np.zeros((N, K, P, Q))
    dw = np.zeros_like(w)
    dxp = np.zeros_like(xp)
    for r in range(R):
        for s in range(S):
            win = xp[:, :, r:r + st * P:st, s:s + st * Q:st]
            fwd += np.einsum("nchw,kc->nkhw", win, w[:, :, r, s], optimize=True)
            dw[:, :, r, s] = np.einsum("nkpq,ncpq->kc", go, win, optimize=True)
            dxp[:, :, r:r + st * P:st, s:s + st * Q:st] += np.einsum("nkpq,kc->ncpq", go, w[:, :, r, s],
                                                                       optimize=True)
    return fwd, dxp[:, :, ph:ph + H, pw:pw + W], dw


def _operands(shape, transposed):
    N, C, H, W, K, R, ph, pw, st = shape
    rng = np.random.default_rng(sum(shape))
    P, Q = (H + 2 * ph - R) // st + 1, (W + 2 * pw - R) // st + 1
    if transposed:  # stored (N, C, W, H), seen as (N, C, H, W): the pair planes read it at its strides
        x = gm.tensor(rng.standard_normal((N, C, W, H)).astype(np.float32)).to(gm.bfloat16).transpose(2, 3)
    else:
        x = gm.tensor(rng.standard_normal((N, C, H, W)).astype(np.float32)).to(gm.bfloat16)
    w = gm.tensor((rng.standard_normal((K, C, R, R)) / (C * R * R) ** 0.5).astype(np.float32)).to(gm.bfloat16)
    go = gm.tensor(rng.standard_normal((N, K, P, Q)).astype(np.float32)).to(gm.bfloat16)
    b = gm.tensor(rng.standard_normal(K).astype(np.float32)).to(gm.bfloat16)
    return x, w, go, b


def _check(name, got, val, mag):
    assert got.dtype == gm.bfloat16
    err = np.abs(got.float().numpy().astype(np.float64) - val)
    bound = HALF_ULP * np.abs(val) + 2.0 ** -14 * mag
    assert (err <= bound).all(), (name, float((err / bound).max()))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("route", [None, "amx"])
def test_passes_match_float64(shape, threads, route, monkeypatch):
    if route:
        monkeypatch.setenv("GPUMEMNET_BF16_CONV", route)
    else:
        monkeypatch.delenv("GPUMEMNET_BF16_CONV", raising=False)
    N, C, H, W, K, R, ph, pw, st = shape
    x, w, go, b = _operands(shape, transposed=shape[0] == 3)
    f64 = [t.float().numpy().astype(np.float64) for t in (x, w, go)]
    val = _reference(*f64, ph, pw, st)
    mag = _reference(*(np.abs(a) for a in f64), ph, pw, st)
    bias = b.float().numpy().astype(np.float64)
    old = gm.get_num_threads()
    gm.set_num_threads(threads)
    try:
        fwd = F.conv2d(x, w, b, st, (ph, pw))
        grads = [_C.conv2d_backward(go, x, w, (st, st), (ph, pw), (1, 1), 1, mask, tuple(x.shape),
                                    tuple(w.shape))[i]
                 for i, mask in ((0, (True, False, False)), (1, (False, True, False)))]
        # conv_transpose2d's forward is conv2d's input-gradient pass, here with a bias of the input's channels
        tb = gm.tensor(np.linspace(-1, 1, C).astype(np.float32)).to(gm.bfloat16)
        op = (H + 2 * ph - R) % st, (W + 2 * pw - R) % st  # output_padding: back to H x W
        tr = F.conv_transpose2d(go, w, tb, st, (ph, pw), op)
    finally:
        gm.set_num_threads(old)
    _check("forward", fwd, val[0] + bias[:, None, None], mag[0] + np.abs(bias)[:, None, None])
    _check("input-gradient", grads[0], val[1], mag[1])
    _check("weight-gradient", grads[1], val[2], mag[2])
    tbv = tb.float().numpy().astype(np.float64)[:, None, None]
    _check("conv_transpose2d", tr, val[1] + tbv, mag[1] + np.abs(tbv))


def _amx_bytes(shape, pass_, threads):
    """The route's workspace (conv_half_amx.c: conv_half_amx_nbytes), from the shapes."""
    N, C, H, W, K, R, ph, pw, st = shape
    P, Q = (H + 2 * ph - R) // st + 1, (W + 2 * pw - R) // st + 1
    a64 = lambda n: (n + 63) // 64 * 64  # noqa: E731
    cdiv = lambda a, b: -(-a // b)  # noqa: E731
    nph, ext = st * st, (R - 1) // st  # the input's phases; a tap's reach in a phase
    if pass_ == "weight":
        Wp = Q + ext
        Fl = cdiv(P * Wp, 32) * 32
        Lx = cdiv(Fl + ext * Wp + ext, 32) * 32
        kp, cp = cdiv(K, 16) * 16, cdiv(C, 16) * 16
        item = a64(cp * nph * Lx * 2 + Fl * kp * 2)
        nb = max(1, min(N, (2 << 20) // item))
        return a64(R * R * kp * cp * 4) + nb * item
    if pass_ == "data":  # the forward of grad_output with the weight transposed and flipped
        C, K, H, W, P, Q = K, C, P, Q, H, W
    npb = min(16, (C + 1) // 2)
    cbn, kbn = cdiv(cdiv(C, 2), npb), cdiv(K, 16)
    Wp = Q + ext
    nblk = cdiv((P - 1) * Wp + Q, 16)
    PS = max((P + ext) * Wp, cdiv(nblk, 2) * 32 + ext * Wp + ext)
    nt = min(threads, N) if N * K * C * R * R * P * Q >= 1 << 24 else 1  # AMX_GRAIN
    return a64(R * R * kbn * cbn * 16 * npb * 4) + nt * a64(cbn * npb * nph * PS * 4)


SCRIPT = """
import sys, numpy as np, gpumemnet as gm, gpumemnet.nn.functional as F
from gpumemnet import _C
N, C, H, W, K, R, ph, pw, st = %r
gm.set_num_threads(%d)
rng = np.random.default_rng(0)
bf = lambda a: gm.tensor(a.astype(np.float32)).to(gm.bfloat16)
x = bf(rng.standard_normal((N, C, W, H))).transpose(2, 3)
P, Q = (H + 2 * ph - R) // st + 1, (W + 2 * pw - R) // st + 1
w, go = bf(rng.standard_normal((K, C, R, R))), bf(rng.standard_normal((N, K, P, Q)))

def operands(dev):
    if dev == "cpu":
        return go, x, w
    md = lambda t: gm.empty(tuple(t.shape), dtype=gm.bfloat16, device="meta")
    return md(go), gm.empty((N, C, W, H), dtype=gm.bfloat16, device="meta").transpose(2, 3), md(w)

def peak(dev, run):
    gm.memory.reset_peak_memory_stats(dev)
    run(*operands(dev))
    return gm.memory.memory_stats(dev)["by_category"]["workspace"]["peak"]

for mask in ((True, False, False), (False, True, False)):
    run = lambda a, b, c: _C.conv2d_backward(a, b, c, (st, st), (ph, pw), (1, 1), 1, mask, (N, C, H, W),
                                             (K, C, R, R))
    print(*(peak(d, run) for d in ("cpu", "meta")))
print(*(peak(d, lambda a, b, c: F.conv2d(b, c, None, st, (ph, pw))) for d in ("cpu", "meta")))
"""


def _rule_takes(shape, pass_):
    """conv_half_amx_use's measured rule: the forward of 256 or more positions in the batch, or 64 or more with a
    weight of at most 2^18 elements; the backward passes but of < 8 input channels into >= 32."""
    N, C, H, W, K, R, ph, pw, st = shape
    P, Q = (H + 2 * ph - R) // st + 1, (W + 2 * pw - R) // st + 1
    if st > 1 and (pass_ == "data" or R == 1):
        return False  # a strided input-gradient is not a stride-1 forward, a 1x1/2 reads one phase: other routes
    if pass_ == "forward":
        return N * P * Q >= 256 or (N * P * Q >= 64 and K * C * R * R <= 1 << 18)
    return not (C < 8 and K >= 32)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("route", [None, "amx"])
def test_workspace_on_meta_equals_cpu_and_is_the_routes(shape, threads, route):
    env = dict(os.environ, GPUMEMNET_NO_CACHING="1")
    env.pop("GPUMEMNET_BF16_CONV", None)
    if route:
        env["GPUMEMNET_BF16_CONV"] = route
    r = subprocess.run([sys.executable, "-c", SCRIPT % (shape, threads)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")[:3]
    for pass_, line in zip(("data", "weight", "forward"), lines):
        cpu, meta = map(int, line.split())
        assert cpu == meta > 0, (pass_, r.stdout)
        amx = -(-_amx_bytes(shape, pass_, threads) // 512) * 512  # in the allocator's blocks of 512
        forced = route and not (pass_ == "data" and shape[8] > 1)  # where conv_half_amx_use applies
        if AMX and (forced or _rule_takes(shape, pass_)):
            assert cpu == amx, (pass_, cpu)
