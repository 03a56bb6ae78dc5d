"""The route of bfloat16 convolutions (kernels/cpu/conv_half.c, bf16_on_gemm): by default a measured rule puts each
pass on bfloat16 products (gemm_bf16) or on the float16 route (widened tiles, sgemm); GPUMEMNET_BF16_CONV=gemm and
=widen force one route. Every route rounds float32 sums once, so the three agree but for rare ties, and each
matches PyTorch's bfloat16 error (tests/test_bf16_conv.py's check, run here on the forced float16 route too)."""
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

HERE = os.path.dirname(__file__)

# conv shapes on both sides of the rule's thresholds (few / many output channels and positions)
SHAPES = [(2, 64, 16, 64, 3, 1, 1), (2, 512, 2, 512, 3, 1, 1), (4, 16, 24, 3, 1, 1, 0), (2, 16, 32, 16, 3, 1, 1),
          (2, 32, 16, 48, 3, 2, 1)]

RUN = """
import sys, numpy as np, gpumemnet as gm, gpumemnet.nn.functional as F
rng = np.random.default_rng(3)
out = {}
for i, (N, C, H, K, R, s, p) in enumerate(%r):
    x = gm.tensor(rng.standard_normal((N, C, H, H)).astype(np.float32)).to(gm.bfloat16).requires_grad_()
    w = gm.tensor((rng.standard_normal((K, C, R, R)) / (C * R * R) ** 0.5).astype(np.float32)).to(gm.bfloat16)
    w.requires_grad_()
    o = F.conv2d(x, w, None, s, p)
    o.backward(gm.tensor(rng.standard_normal(o.shape).astype(np.float32)).to(gm.bfloat16))
    for name, t in (("out", o.detach()), ("dx", x.grad), ("dw", w.grad)):
        out["%%d/%%s" %% (i, name)] = t.float().numpy()
np.savez(sys.argv[1], **out)
""" % (SHAPES,)


def _route(tmp_path, mode):
    env = dict(os.environ)
    env.pop("GPUMEMNET_BF16_CONV", None)
    if mode:
        env["GPUMEMNET_BF16_CONV"] = mode
    path = str(tmp_path / f"{mode or 'rule'}.npz")
    r = subprocess.run([sys.executable, "-c", RUN, path], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return dict(np.load(path))


def test_routes_agree_but_for_rare_ties(tmp_path):
    routes = {m: _route(tmp_path, m) for m in (None, "gemm", "widen")}
    for key, ref in routes["widen"].items():
        scale = np.abs(ref).max()
        for m in (None, "gemm"):
            got = routes[m][key]
            assert np.mean(got != ref) <= 0.01, (m, key)  # ties of float32 sums summed in another order
            assert np.abs(got - ref).max() <= scale * 2.0 ** -7, (m, key)  # at most an ulp of the largest


def test_forced_float16_route_matches_pytorch():
    code = ("import sys; sys.path.insert(0, {!r}); import test_bf16_conv as t\n"
            "for c in t.CASES: t._check(c, 2)\nprint('ok')").format(HERE)
    env = dict(os.environ, GPUMEMNET_BF16_CONV="widen")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
