"""bfloat16 convolutions: forward and both gradients against PyTorch's bfloat16 CPU results and float64 references
on the default route and, in subprocesses with GPUMEMNET_BF16_CONV=gemm, on bfloat16 products
(kernels/cpu/gemm_bf16.c) on each of its paths (the AMX tiles, the AVX512-BF16 kernel, the portable float32 slices:
GPUMEMNET_GEMM_BF16 picks one), meta bytes equal to CPU bytes, and an autocast training step of a small CNN beside
PyTorch's."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F

torch = pytest.importorskip("torch")

# (N, C, H, W, K, kernel, stride, padding, groups, bias): 3x3 and 1x1 (read in place), strided, grouped, and a
# 1x1 whose product crosses every block edge of the kernel (K > 256 sums, M > 128 rows, N > 256 columns, odd K)
CASES = [
    (2, 16, 9, 9, 32, 3, 1, 1, 1, True),
    (2, 8, 8, 8, 16, 1, 1, 0, 1, False),
    (3, 6, 11, 7, 10, 3, 2, 1, 2, True),
    (1, 3, 5, 5, 4, 5, 1, 2, 1, True),
    (1, 301, 17, 17, 130, 1, 1, 0, 1, True),
    (2, 33, 12, 12, 40, 3, 1, 1, 1, False),
]


def _ids(c):
    return "N{}C{}H{}W{}K{}k{}s{}p{}g{}{}".format(*c[:9], "b" if c[9] else "")


def _run(case, threads):
    """(gpumemnet's out, dx, dw, db; PyTorch bf16's; float64's) for one case, all as float64 arrays."""
    N, C, H, W, K, R, st, pd, G, bias = case
    gen = torch.Generator().manual_seed(sum(case[:9]))
    x = torch.randn(N, C, H, W, generator=gen).bfloat16()
    w = (torch.randn(K, C // G, R, R, generator=gen) / (C // G * R * R) ** 0.5).bfloat16()
    b = torch.randn(K, generator=gen).bfloat16() if bias else None
    P = (H + 2 * pd - R) // st + 1
    Q = (W + 2 * pd - R) // st + 1
    go = torch.randn(N, K, P, Q, generator=gen).bfloat16()

    def torch_side(dtype):
        ts = [t.detach().to(dtype).requires_grad_() for t in (x, w) + ((b,) if bias else ())]
        out = torch.nn.functional.conv2d(ts[0], ts[1], ts[2] if bias else None, st, pd, 1, G)
        out.backward(go.to(dtype))
        return [out.detach().double().numpy()] + [t.grad.double().numpy() for t in ts]

    gm.set_num_threads(threads)
    gs = [gm.tensor(t.float().numpy()).to(gm.bfloat16).requires_grad_() for t in (x, w) + ((b,) if bias else ())]
    out = F.conv2d(gs[0], gs[1], gs[2] if bias else None, st, pd, 1, G)
    assert out.dtype == gm.bfloat16
    out.backward(gm.tensor(go.float().numpy()).to(gm.bfloat16))
    assert all(t.grad.dtype == gm.bfloat16 for t in gs)
    ours = [out.detach().float().numpy().astype(np.float64)] + [t.grad.float().numpy().astype(np.float64) for t in gs]
    return ours, torch_side(torch.bfloat16), torch_side(torch.float64)


def _check(case, threads):
    ours, tbf, t64 = _run(case, threads)
    for name, o, t, r in zip(("out", "dx", "dw", "db"), ours, tbf, t64):
        scale = np.abs(r).max() + 1e-30
        # float32 sums rounded once to bfloat16 (8 bits): within a few units of the last place of the largest
        # value, and no further from float64 than PyTorch's bfloat16 (oneDNN) is, with a margin of 2 ulps
        err, terr = np.abs(o - r).max() / scale, np.abs(t - r).max() / scale
        assert err <= 2.0 ** -6, (name, err)
        assert err <= terr + 2 * 2.0 ** -8, (name, err, terr)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_bf16_conv_matches_pytorch_and_float64(case, threads):
    _check(case, threads)


@pytest.mark.parametrize("path", ["native", "avx512", "portable"])
def test_bf16_conv_other_product_paths(path):
    """The same cases with every pass on gemm_bf16 (by default a measured rule picks the route per pass,
    kernels/cpu/conv_half.c), on the best product this CPU has, the AVX512-BF16 kernel and the portable path
    (forced: this CPU may have AMX)."""
    code = ("import sys; sys.path.insert(0, {!r}); import test_bf16_conv as t\n"
            "for c in t.CASES: t._check(c, 2)\nprint('ok')").format(os.path.dirname(__file__))
    env = dict(os.environ, GPUMEMNET_GEMM_BF16=path, GPUMEMNET_BF16_CONV="gemm")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_bf16_conv_meta_bytes_equal_cpu_bytes():
    """Forward and backward of a bfloat16 conv allocate on meta exactly what they allocate on the CPU."""
    peaks = {}
    for dev in ("cpu", "meta"):
        gm.memory.reset_peak_memory_stats(dev)
        base = gm.memory.memory_stats(dev)["allocated"]["current"]
        x = gm.zeros(4, 16, 20, 20, dtype=gm.bfloat16, device=dev).requires_grad_()
        w = gm.zeros(32, 16, 3, 3, dtype=gm.bfloat16, device=dev).requires_grad_()
        out = F.conv2d(x, w, None, 1, 1)
        out.sum().backward()
        s = gm.memory.memory_stats(dev)
        peaks[dev] = (s["allocated"]["peak"] - base, s["by_category"]["workspace"]["peak"])
        del x, w, out
    assert peaks["cpu"] == peaks["meta"]
    assert peaks["cpu"][1] > 0


def _cnn(nn):
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 32, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 5))


def test_bf16_autocast_step_matches_pytorch():
    """One SGD step of a small CNN under CPU bfloat16 autocast + GradScaler, from the same weights: loss, outputs
    and updated weights within bfloat16 tolerance of PyTorch's autocast step."""
    import gpumemnet.nn as gnn
    import gpumemnet.optim as goptim
    torch.manual_seed(0)
    tm = _cnn(torch.nn)
    gmod = _cnn(gnn)
    gmod.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3, 16, 16)).astype(np.float32)
    y = rng.integers(0, 5, 8)
    results = []
    for lib, model, opt, scaler, ctx, t in (
            ("torch", tm, torch.optim.SGD(tm.parameters(), lr=0.1), torch.amp.GradScaler("cpu"),
             lambda: torch.autocast("cpu", dtype=torch.bfloat16), torch.from_numpy),
            ("gm", gmod, goptim.SGD(gmod.parameters(), lr=0.1), gm.amp.GradScaler("cpu"),
             lambda: gm.autocast("cpu", dtype=gm.bfloat16), gm.from_numpy)):
        crit = torch.nn.CrossEntropyLoss() if lib == "torch" else gnn.CrossEntropyLoss()
        opt.zero_grad()
        with ctx():
            out = model(t(x))
            loss = crit(out, t(y))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        results.append((float(loss.item()), out.float().detach().numpy() if lib == "torch" else out.detach().float().numpy(),
                        {k: (v.detach().numpy() if lib == "torch" else v.detach().numpy()).astype(np.float64)
                         for k, v in model.state_dict().items()}))
    (tl, to, ts), (gl, go, gs) = results
    assert abs(tl - gl) <= 2e-2 * abs(tl)
    np.testing.assert_allclose(go, to, atol=3e-2 * np.abs(to).max())
    for k in ts:
        if ts[k].dtype.kind == "f" and ts[k].size > 1:
            np.testing.assert_allclose(gs[k], ts[k], atol=2e-2 * (np.abs(ts[k]).max() + 1e-3), err_msg=k)
