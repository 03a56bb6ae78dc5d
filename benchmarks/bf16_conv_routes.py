"""The routes of bfloat16 convolutions on the CPU side by side, per pass, interleaved in one process: the float16
route (widened tiles, sgemm), bfloat16 products (kernels/cpu/gemm_bf16.c), the direct route (groups of items
widened for the float32 direct kernels, conv_half.c), the AMX route (stride 1: conv_half_amx.c; elsewhere the
rule) and the measured rule (which also takes the small route of conv_half_small.c at <= 16 positions in the
batch), with float32 beside them; on ResNet-18's layers (batch 2 of 3x64x64, the autocast micro-batch of python
-m benchmarks), VGG-11's (batch 2) and the UNet's (batch 16). kernels/cpu/conv_half.c's rules (bf16_on_gemm,
half_direct_route) and conv_half_amx_use were set from this table; the route is switched through
GPUMEMNET_BF16_CONV between calls. Printed: the median time per pass and route, and the median over rounds of each
round's ratio of the rule to float32.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bf16_conv_routes.py [--reps 11] [--only vgg]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gpumemnet as gm  # noqa: E402
import gpumemnet.nn.functional as F  # noqa: E402
from gpumemnet import _C  # noqa: E402

# (name, N, C, H=W, K, kernel, stride, padding)
SHAPES = [("r18 conv1", 2, 3, 64, 64, 7, 2, 3), ("r18 l1 3x3", 2, 64, 16, 64, 3, 1, 1),
          ("r18 l2 3x3", 2, 128, 8, 128, 3, 1, 1), ("r18 l3 3x3", 2, 256, 4, 256, 3, 1, 1),
          ("r18 l4 3x3", 2, 512, 2, 512, 3, 1, 1), ("r18 l4 3x3/2", 2, 256, 4, 512, 3, 2, 1),
          ("vgg 64->128", 2, 64, 32, 128, 3, 1, 1), ("vgg 128->256", 2, 128, 16, 256, 3, 1, 1),
          ("vgg 256 16x16", 2, 256, 16, 256, 3, 1, 1), ("vgg 256->512", 2, 256, 8, 512, 3, 1, 1),
          ("vgg 512 8x8", 2, 512, 8, 512, 3, 1, 1), ("vgg 512 4x4", 2, 512, 4, 512, 3, 1, 1),
          ("unet 3->16", 16, 3, 64, 16, 3, 1, 1), ("unet 16 64x64", 16, 16, 64, 16, 3, 1, 1),
          ("unet 32 32x32", 16, 32, 32, 32, 3, 1, 1), ("unet 64 16x16", 16, 64, 16, 64, 3, 1, 1),
          ("unet 128 8x8", 16, 128, 8, 128, 3, 1, 1), ("unet 1x1 16->3", 16, 16, 64, 3, 1, 1, 0)]
ROUTES = ("f32", "widen", "gemm", "direct", "amx", "rule")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--only", default="", help="shapes whose name starts with this (r18, vgg, unet)")
    a = ap.parse_args()
    gm.set_num_threads(a.threads)
    print(f"blas core {_C._build_info().get('blas_core')}; {a.threads} threads; median of {a.reps}, routes "
          f"interleaved; ms forward / input-gradient / weight-gradient")
    print(f"{'shape':<15}" + "".join(f"{r:<21}" for r in ROUTES) + "rule / f32")
    rng = np.random.default_rng(0)
    saved = os.environ.get("GPUMEMNET_BF16_CONV")
    try:
        for name, N, C, H, K, R, s, p in SHAPES:
            if not name.startswith(a.only):
                continue
            x32 = gm.tensor(rng.standard_normal((N, C, H, H)).astype(np.float32))
            w32 = gm.tensor(rng.standard_normal((K, C, R, R)).astype(np.float32) * 0.1)
            go32 = gm.ones(F.conv2d(x32, w32, None, s, p).shape)
            ops = {False: (x32, w32, go32), True: tuple(t.to(gm.bfloat16) for t in (x32, w32, go32))}
            times = {(r, k): [] for r in ROUTES for k in range(3)}
            for _ in range(a.reps):
                for r in ROUTES:
                    if r in ("f32", "rule"):
                        os.environ.pop("GPUMEMNET_BF16_CONV", None)
                    else:
                        os.environ["GPUMEMNET_BF16_CONV"] = r
                    x, w, go = ops[r != "f32"]
                    t = [time.perf_counter()]
                    F.conv2d(x, w, None, s, p)
                    t.append(time.perf_counter())
                    for mask in ((True, False, False), (False, True, False)):
                        _C.conv2d_backward(go, x, w, (s, s), (p, p), (1, 1), 1, mask, tuple(x.shape), tuple(w.shape))
                        t.append(time.perf_counter())
                    for k in range(3):
                        times[(r, k)].append(t[k + 1] - t[k])
            med = {key: statistics.median(v) * 1e3 for key, v in times.items()}
            ratio = [statistics.median(q / f for q, f in zip(times[("rule", k)], times[("f32", k)])) for k in range(3)]
            print(f"{name:<15}" + "".join(f"{' '.join(f'{med[(r, k)]:6.2f}' for k in range(3)):<21}" for r in ROUTES)
                  + " ".join(f"{v:.2f}" for v in ratio), flush=True)
    finally:
        if saved is None:
            os.environ.pop("GPUMEMNET_BF16_CONV", None)
        else:
            os.environ["GPUMEMNET_BF16_CONV"] = saved


if __name__ == "__main__":
    main()
