"""The CUDA convolutions' two cuDNN routes (kernels/cuda/conv_plan.cu and conv.cu): execution plans of the graph API
built once per geometry, and the legacy API for what the plans cannot take. Each case is checked against the CPU:
operands that are views 4 bytes into their storage (the plans assume 16-byte alignment, so these run a legacy
algorithm within the workspace allocated for the plan), a bias added after a plan ran (plans run with beta = 0),
and the whole legacy route (GPUMEMNET_CUDNN_API=legacy) in a fresh process. On the emulator every route is its
direct kernel, so these hold there trivially; on a GPU they exercise each route."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import _C
from gpumemnet.nn import functional as F
from cuda_util import requires_cuda, to_np

pytestmark = requires_cuda

PLAN_BASE = 0x10000  # kernels/cuda/conv_plan.h: candidates from here on are plans
_rng = np.random.default_rng(7)


def R(*shape):
    return _rng.standard_normal(shape).astype(np.float32)


def _grads(device, x, w, b, offset):
    """conv2d forward and backward on `device`; with offset, x is read through a view `offset` elements into a
    larger buffer (so its data pointer is 4 bytes past an aligned one for offset 1)."""
    flat = gm.tensor(np.concatenate([np.zeros(offset, np.float32), x.ravel()]), device=device)
    xt = flat[offset:].view(*x.shape).detach().requires_grad_(True)
    wt = gm.tensor(w, device=device, requires_grad=True)
    bt = gm.tensor(b, device=device, requires_grad=True)
    out = F.conv2d(xt, wt, bt, padding=1)
    out.backward(gm.tensor(np.cos(np.arange(out.numel(), dtype=np.float32)).reshape(tuple(out.shape)), device=device))
    return [to_np(t) for t in (out, xt.grad, wt.grad, bt.grad)]


@pytest.mark.parametrize("offset", [0, 1])
def test_plans_and_the_misaligned_fallback_match_the_cpu(offset):
    x, w, b = R(2, 8, 9, 9), R(16, 8, 3, 3), R(16)
    got, want = _grads("cuda", x, w, b, offset), _grads("cpu", x, w, b, offset)
    for g, c in zip(got, want):
        np.testing.assert_allclose(g, c, rtol=2e-4, atol=2e-4 * max(1.0, np.abs(c).max()))


@pytest.mark.skipif(gm.cuda.is_available() and gm.cuda.is_emulated(), reason="the emulator has no cuDNN")
def test_a_plain_convolution_runs_a_plan():
    F.conv2d(gm.tensor(R(1, 4, 8, 8), device="cuda"), gm.tensor(R(4, 4, 3, 3), device="cuda"), padding=1)
    assert _C._conv_algo_last()["algo"] >= PLAN_BASE


def test_the_legacy_route_matches_the_plans():
    x, w, b = R(2, 8, 9, 9), R(16, 8, 3, 3), R(16)
    code = ("import sys, numpy as np, gpumemnet as gm\n"
            "from gpumemnet.nn import functional as F\n"
            "gm.backends.cudnn.allow_tf32 = False\n"
            "x, w, b = (gm.tensor(np.load(p), device='cuda') for p in sys.argv[1:4])\n"
            "out = F.conv2d(x, w, b, padding=1)\n"
            "np.save(sys.argv[4], out.cpu().numpy())\n"
            "print(gm._C._conv_algo_last()['algo'])\n")
    d = os.path.dirname(os.path.abspath(__file__))
    paths = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, a in (("x", x), ("w", w), ("b", b)):
            paths.append(os.path.join(tmp, name + ".npy"))
            np.save(paths[-1], a)
        outs, algos = [], []
        for api in ("graph", "legacy"):
            out = os.path.join(tmp, f"out_{api}.npy")
            env = dict(os.environ, GPUMEMNET_CUDNN_API=api)
            r = subprocess.run([sys.executable, "-c", code, *paths, out], env=env, capture_output=True, text=True,
                               cwd=d, timeout=120)
            assert r.returncode == 0, r.stderr
            outs.append(np.load(out))
            algos.append(int(r.stdout.split()[-1]))
    np.testing.assert_allclose(outs[0], outs[1], rtol=2e-4, atol=2e-4 * np.abs(outs[1]).max())
    if not gm.cuda.is_emulated():
        assert algos[0] >= PLAN_BASE > algos[1]
