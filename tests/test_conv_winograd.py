"""Winograd F(2x2, 3x3) (kernels/cpu/conv_winograd.c): float32 3x3 stride-1 convolutions of one group with at
least 64 channels each way, forward and input-gradient, on CPUs with AVX-512. GPUMEMNET_CONV_WINOGRAD=1 forces it
wherever it applies, =0 turns it off, unset lets conv_plan.c's rule choose (64 or more 2x2 output tiles, 128 or
more beyond 256x256 channels).

Values against the float64 NumPy references of tests/conv_util.py and against PyTorch (odd sizes, padding 0/1/2,
batch 1/3, channel counts that are not multiples of the kernel's blocks of 8, a bias, conv_transpose2d, a strided
input, 1 and 2 threads); its error against float64 on realistic data (He-initialised weights, ReLU inputs) beside
the direct/im2col path's and PyTorch's; the workspace (the transformed weight and each thread's transformed
tiles: exact, the same on meta, bounded whatever the batch); where the rule takes it and where it does not. Where
the CPU has no AVX-512 the direct/im2col path runs: the values are still checked, the bytes and ratios are not."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn.functional import conv2d, conv_transpose2d

from conv_util import T, _workspace_peak, ref_conv2d, ref_conv_transpose2d, threads, workspace_limit  # noqa: F401
from gradcheck import assert_close


def _avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


AVX512 = _avx512()
ENV = "GPUMEMNET_CONV_WINOGRAD"
# this file's own generator: drawing from conv_util's shared one would change the data of the tests run after it
_rng = np.random.default_rng(1414)


def R(*shape):
    return _rng.standard_normal(shape)


def _cdiv(a, b):
    return -(-a // b)


def wino_bytes(ci, co, ho, wo, n, nthreads):
    """conv_winograd.c's workspace, as make_plan sizes it: the transformed weight (16 x Co rounded up to 8 x Ci
    floats; beyond 2 MiB up to 4 MiB, a block of cb of those channels at a time: halves, a multiple of 8, within 2
    MiB), then per thread the transformed input tiles of up to 64 input channels at a time (16 x min(Ci, 64) x T) and
    the products (16 x cb x T; 16 x 8 x T where V holds every input channel, at most 64), each rounded up to 64
    bytes, T tiles per block (in rows rounded up to 16: 512 KiB per thread, at least 48 tiles; all Ci at a time
    beyond 256 output channels a block); the allocator rounds the whole up to 512 bytes."""
    tiles = n * _cdiv(ho, 2) * _cdiv(wo, 2)
    co8 = _cdiv(co, 8) * 8
    u_cap = 2 << 20
    cb = co8
    if u_cap < 16 * co8 * ci * 4 <= 2 * u_cap:
        cb = _cdiv(co8, 16) * 8
        while cb > 8 and 16 * cb * ci * 4 > u_cap:
            cb -= 8
    vc = min(ci, 64) if cb <= 256 else ci
    cap = max(48, (512 << 10) // (16 * (vc + cb) * 4) // 16 * 16)
    nt = nthreads if nthreads > 1 and 16 * tiles * ci * co >= 1 << 20 else 1
    nb = max(1, _cdiv(tiles, cap))
    if nt > 1:
        nb = min(_cdiv(nb, nt) * nt, max(1, _cdiv(tiles, 16)))
    t = max(1, _cdiv(tiles, nb))
    ldv = _cdiv(t, 16) * 16
    nt = min(nt, max(1, _cdiv(tiles, t)))
    fb = lambda k: _cdiv(k * 4, 64) * 64  # noqa: E731
    mrows = 8 if vc == ci <= 64 else cb  # V of every input channel, at most 64: M holds one register tile's 8 rows
    n_bytes = fb(16 * cb * ci) + nt * (fb(16 * vc * ldv) + fb(16 * mrows * ldv))
    return _cdiv(n_bytes, 512) * 512


@pytest.fixture
def winograd(monkeypatch):
    """set(v): GPUMEMNET_CONV_WINOGRAD for this test ('0', '1', or None: unset); C reads it on every call."""
    def set_(v):
        if v is None:
            monkeypatch.delenv(ENV, raising=False)
        else:
            monkeypatch.setenv(ENV, v)
    set_(None)
    return set_


# x, w, padding, bias, threads
CASES = [
    dict(x=(2, 64, 8, 8), w=(64, 64, 3, 3), padding=1),
    dict(x=(1, 65, 7, 9), w=(70, 65, 3, 3), padding=0),                   # odd channels and sizes, no padding
    dict(x=(3, 96, 11, 5), w=(64, 96, 3, 3), padding=1, bias=True),       # batch 3, odd width: runs across items
    dict(x=(2, 64, 5, 6), w=(67, 64, 3, 3), padding=2),                   # padding 2: the gradient's is 0
    dict(x=(3, 64, 33, 35), w=(64, 64, 3, 3), padding=1, threads=2),      # blocks over rows of 17/18 tiles
    dict(x=(1, 256, 14, 14), w=(256, 256, 3, 3), padding=1, bias=True, threads=2),
    dict(x=(2, 128, 1, 1), w=(64, 128, 3, 3), padding=1),                 # one position: 3 of 4 outputs unused
    dict(x=(2, 160, 9, 10), w=(330, 160, 3, 3), padding=1, bias=True),  # U in blocks of 168 | 80 channels each way
]


def _ids(c):
    return "-".join(f"{k}{v}" for k, v in c.items()).replace(" ", "")


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_forced_winograd_matches_numpy(case, winograd, threads):
    winograd("1")
    xs, ws, pad, nt = case["x"], case["w"], case["padding"], case.get("threads", 1)
    gm.set_num_threads(nt)
    x, w = R(*xs), R(*ws) / np.sqrt(ws[1] * 9)
    b = R(ws[0]) if case.get("bias") else None
    xt, wt = T(x, gm.float32, True), T(w, gm.float32)
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(xt, wt, None if b is None else T(b, gm.float32), padding=pad)
    N, K, P, Q = out.shape
    if AVX512:
        assert _workspace_peak() == wino_bytes(xs[1], K, P, Q, N, nt), "the forward did not take Winograd"
    assert_close(out, ref_conv2d(x, w, b, 1, pad), 2e-5, 2e-5, what="forward")
    dout = R(*out.shape)
    gm.memory.reset_peak_memory_stats("cpu")
    out.backward(T(dout, gm.float32))
    if AVX512:
        assert _workspace_peak() == wino_bytes(K, xs[1], xs[2], xs[3], N, nt), "the gradient did not take Winograd"
    assert_close(xt.grad, ref_conv_transpose2d(dout, w, None, 1, pad), 2e-5, 2e-5, what="input gradient")


def test_conv_transpose2d_with_bias_and_a_strided_input(winograd):
    """conv_transpose2d at stride 1 is the input-gradient pass with its bias; the forward reads an input whose
    channels are a slice of a wider tensor (its item stride is not C*H*W)."""
    winograd("1")
    x, w, b = R(2, 64, 9, 10), R(64, 72, 3, 3) / 24, R(72)
    out = conv_transpose2d(T(x, gm.float32), T(w, gm.float32), T(b, gm.float32), padding=1)
    assert_close(out, ref_conv_transpose2d(x, w, b, 1, 1), 2e-5, 2e-5, what="conv_transpose2d")
    wide, w = R(2, 80, 12, 12), R(64, 64, 3, 3) / 24
    xt = T(wide, gm.float32)[:, 3:67]
    assert_close(conv2d(xt, T(w, gm.float32), padding=1), ref_conv2d(wide[:, 3:67], w, None, 1, 1), 2e-5, 2e-5,
                 what="strided input")


@pytest.mark.parametrize("shape", [((2, 64, 10, 10), (64, 64, 3, 3), 1), ((3, 96, 7, 9), (128, 96, 3, 3), 0)])
def test_forced_winograd_matches_pytorch(shape, winograd):
    torch = pytest.importorskip("torch")
    winograd("1")
    xs, ws, pad = shape
    x, w, b = R(*xs).astype(np.float32), (R(*ws) / np.sqrt(ws[1] * 9)).astype(np.float32), R(ws[0]).astype(np.float32)
    xt = T(x, gm.float32, True)
    out = conv2d(xt, T(w, gm.float32), T(b, gm.float32), padding=pad)
    tx = torch.tensor(x, requires_grad=True)
    tout = torch.nn.functional.conv2d(tx, torch.tensor(w), torch.tensor(b), padding=pad)
    assert_close(out, tout.detach().numpy(), 2e-5, 2e-5, what="forward")
    g = R(*out.shape).astype(np.float32)
    out.backward(T(g, gm.float32))
    tout.backward(torch.tensor(g))
    assert_close(xt.grad, tx.grad.numpy(), 2e-5, 2e-5, what="input gradient")


def _rms_err(got, ref):
    return float(np.sqrt(np.mean((np.asarray(got, np.float64) - ref) ** 2)) / np.sqrt(np.mean(ref ** 2)))


# measured (3 seeds, rms error over rms of the float64 result, ReLU inputs): Winograd / direct-im2col and / PyTorch
#   64->64 8x8 1.09 / 1.07 fwd, 0.90 / 0.87 gradient; 128->128 14x14 1.08 / 1.05, 0.89 / 0.87;
#   256->256 14x14 1.13 / 1.11, 0.95 / 0.93; 512->512 7x7 1.21 / 1.19, 1.09 / 1.03 (sums in chunks of 16 input
#   channels; chunks of 128, as the gemm path's, were up to 2.04x)
@pytest.mark.parametrize("shape", [(4, 64, 8, 64), (2, 128, 14, 128), (2, 256, 14, 256), (2, 512, 7, 512)],
                         ids=lambda s: "x".join(map(str, s)))
def test_error_against_float64_is_near_the_gemm_paths_and_pytorchs(shape, winograd):
    if not AVX512:
        pytest.skip("no AVX-512: Winograd does not run")
    torch = pytest.importorskip("torch")
    N, C, H, K = shape
    rng = np.random.default_rng(7)
    x = np.maximum(rng.standard_normal((N, C, H, H)), 0).astype(np.float32)  # after a ReLU
    w = (rng.standard_normal((K, C, 3, 3)) * np.sqrt(2 / (C * 9))).astype(np.float32)  # He initialisation
    dy = rng.standard_normal((N, K, H, H)).astype(np.float32)
    x64 = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ref = torch.nn.functional.conv2d(x64, torch.tensor(w, dtype=torch.float64), padding=1)
    ref.backward(torch.tensor(dy, dtype=torch.float64))
    ref, dref = ref.detach().numpy(), x64.grad.numpy()
    errs = {}
    for mode in ("0", "1"):
        winograd(mode)
        gm.memory.reset_peak_memory_stats("cpu")
        with gm.no_grad():
            y = conv2d(T(x), T(w), padding=1)
        dx = _C.conv2d_backward(T(dy), None, T(w), 1, 1, 1, 1, (True, False, False), x.shape)[0]
        errs[mode] = (_rms_err(y.numpy(), ref), _rms_err(dx.numpy(), dref))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, torch.tensor(w), padding=1)
    ty.backward(torch.tensor(dy))
    errs["torch"] = (_rms_err(ty.detach().numpy(), ref), _rms_err(tx.grad.numpy(), dref))
    for i, what in enumerate(("forward", "input gradient")):
        assert errs["1"][i] <= 1.4 * errs["0"][i], (what, errs)
        assert errs["1"][i] <= 1.4 * errs["torch"][i], (what, errs)
        assert errs["1"][i] != errs["0"][i], "the two paths gave the same rounding: did Winograd run?"


@pytest.mark.parametrize("nthreads", [1, 2])
def test_meta_allocates_the_cpus_bytes(nthreads, winograd, threads):
    """A training step of two Winograd layers (one taken by the rule, one forced): every allocation, in order, is
    the same on meta as on the CPU."""
    gm.set_num_threads(nthreads)
    hist = []
    for dev in ("cpu", "meta"):
        x = gm.zeros((4, 64, 16, 16), device=dev, requires_grad=True)
        w1 = gm.zeros((96, 64, 3, 3), device=dev, requires_grad=True)
        w2 = gm.zeros((64, 96, 3, 3), device=dev, requires_grad=True)
        gm.memory.record_history(True, device=dev)
        conv2d(conv2d(x, w1, padding=1), w2, padding=1).sum().backward()
        hist.append([(e["delta"], e["category"]) for e in gm.memory.history(dev) if e["kind"] == "alloc"])
        gm.memory.record_history(False, device=dev)
    assert hist[0] == hist[1]
    if AVX512:
        assert (wino_bytes(64, 96, 16, 16, 4, nthreads), "workspace") in hist[0]
        assert (wino_bytes(96, 64, 16, 16, 4, nthreads), "workspace") in hist[0]


def test_workspace_does_not_grow_with_the_batch(winograd, threads):
    """The transformed tiles are blocks of at most 512 KiB per thread: batch 64 takes what batch 16 does."""
    if not AVX512:
        pytest.skip("no AVX-512: Winograd does not run")
    gm.set_num_threads(2)
    w = gm.zeros((64, 64, 3, 3))
    peaks = []
    for n in (16, 64):
        gm.memory.reset_peak_memory_stats("cpu")
        with gm.no_grad():
            conv2d(gm.zeros((n, 64, 28, 28)), w, padding=1)
        peaks.append(_workspace_peak())
    assert peaks[0] == peaks[1] == wino_bytes(64, 64, 28, 28, 64, 2) == wino_bytes(64, 64, 28, 28, 16, 2)


def test_where_the_rule_takes_it(winograd, threads):
    """Unset: 64 tiles of 64 channels take Winograd (8x8 at batch 4); 32 tiles do not (batch 2), nor the 4 tiles
    of 512 channels at 2x2 (ResNet-18's last stage at 64x64), nor 64 tiles of 512x512 channels (the transformed
    weight costs more there), nor a 3x3 image (9 outputs in 4 tiles); =0 turns it off everywhere; and a
    workspace limit below its bytes falls back to the direct kernel."""
    if not AVX512:
        pytest.skip("no AVX-512: Winograd does not run")
    gm.set_num_threads(1)

    def peak(xs, ws):
        gm.memory.reset_peak_memory_stats("cpu")
        with gm.no_grad():
            conv2d(gm.zeros(xs), gm.zeros(ws), padding=1)
        return _workspace_peak()

    assert peak((4, 64, 8, 8), (64, 64, 3, 3)) == wino_bytes(64, 64, 8, 8, 4, 1)
    assert peak((4, 128, 16, 16), (256, 128, 3, 3)) == wino_bytes(128, 256, 16, 16, 4, 1)
    # 17.7 MiB: from a cached 20 MiB segment the allocator keeps the rest (> 1 MiB) apart, or not
    assert 0 <= peak((8, 512, 7, 7), (512, 512, 3, 3)) - wino_bytes(512, 512, 7, 7, 8, 1) < 2 << 20
    for xs, ws in [((2, 64, 8, 8), (64, 64, 3, 3)), ((4, 512, 2, 2), (512, 512, 3, 3)),
                   ((4, 512, 7, 7), (512, 512, 3, 3)), ((16, 64, 3, 3), (64, 64, 3, 3)),
                   ((4, 32, 16, 16), (64, 32, 3, 3))]:
        n, c, h, w_ = xs
        assert peak(xs, ws) != wino_bytes(c, ws[0], h, w_, n, 1), (xs, ws)
    winograd("0")
    assert peak((4, 64, 8, 8), (64, 64, 3, 3)) != wino_bytes(64, 64, 8, 8, 4, 1)


def test_a_limit_below_its_workspace_falls_back(winograd, threads, workspace_limit):
    if not AVX512:
        pytest.skip("no AVX-512: Winograd does not run")
    winograd("1")
    gm.set_num_threads(1)
    x, w = R(2, 64, 12, 12), R(64, 64, 3, 3) / 24
    need = wino_bytes(64, 64, 12, 12, 2, 1)
    _C.set_conv_workspace_limit(need - 1024)
    gm.memory.reset_peak_memory_stats("cpu")
    out = conv2d(T(x, gm.float32), T(w, gm.float32), padding=1)
    assert 0 < _workspace_peak() <= need - 1024
    assert_close(out, ref_conv2d(x, w, None, 1, 1), 2e-5, 2e-5, what="fallback forward")


def test_what_it_never_takes(winograd, threads):
    """Forced on, the other geometries keep their paths: stride 2, dilation 2, groups, 5x5, fewer than 64 channels,
    float64; the weight-gradient never runs Winograd. Their values are those of the references."""
    winograd("1")
    gm.set_num_threads(1)
    for xs, ws, kw in [((2, 64, 12, 12), (64, 64, 3, 3), dict(stride=2, padding=1)),
                       ((2, 64, 12, 12), (64, 64, 3, 3), dict(dilation=2, padding=2)),
                       ((2, 128, 8, 8), (128, 64, 3, 3), dict(groups=2, padding=1)),
                       ((2, 64, 8, 8), (72, 64, 5, 5), dict(padding=2)),  # 72: 64 made the direct bytes Winograd's
                       ((2, 32, 8, 8), (64, 32, 3, 3), dict(padding=1))]:
        x, w = R(*xs), R(*ws) / 24
        gm.memory.reset_peak_memory_stats("cpu")
        out = conv2d(T(x, gm.float32), T(w, gm.float32), **kw)
        if AVX512:
            n, c, h, w_ = xs
            assert _workspace_peak() != wino_bytes(c, ws[0], out.shape[2], out.shape[3], n, 1), kw
        assert_close(out, ref_conv2d(x, w, None, **kw), 2e-5, 2e-5, what=str(kw))
    x, w = R(2, 64, 8, 8), R(64, 64, 3, 3)
    out = conv2d(T(x, gm.float64), T(w, gm.float64), padding=1)
    assert_close(out, ref_conv2d(x, w, None, 1, 1), 1e-10, 1e-10, what="float64")


def test_empty_batch_and_image(winograd):
    """Forced on, an empty batch gives empty results and its passes ask for no workspace, on the CPU as on meta;
    an empty image stays an error."""
    w, b = gm.zeros((64, 64, 3, 3)), gm.ones(64)
    for dev in ("cpu", "meta"):
        peaks = []
        for mode in ("1", "0"):
            winograd(mode)
            x, wd = gm.zeros((0, 64, 8, 8), device=dev), w.to(dev)
            gm.memory.reset_peak_memory_stats(dev)
            out = conv2d(x, wd, padding=1)
            dx = _C.conv2d_backward(gm.zeros((0, 64, 8, 8), device=dev), None, wd, 1, 1, 1, 1, (True, False, False),
                                    (0, 64, 8, 8))[0]
            assert tuple(out.shape) == (0, 64, 8, 8) and tuple(dx.shape) == (0, 64, 8, 8)
            peaks.append(gm.memory.memory_stats(dev)["by_category"]["workspace"]["peak"])
        assert peaks == [0, 0], (dev, peaks)
    winograd("1")
    with pytest.raises(gm.ArgumentError, match="height and width"):  # an image of no rows: an error
        conv2d(gm.zeros((2, 64, 0, 5)), w, b, padding=1)
