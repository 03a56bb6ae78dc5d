"""The two routes of bfloat16 convolutions on the CPU side by side, per pass, interleaved in one process: the float16
route (widened tiles, sgemm) and bfloat16 products (kernels/cpu/gemm_bf16.c), on ResNet-18's layers (batch 2 of
3x64x64, the autocast micro-batch of python -m benchmarks) and the UNet's (batch 16). kernels/cpu/conv_half.c's
rule (bf16_on_gemm) was set from this table; the route is switched through GPUMEMNET_BF16_CONV between calls.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bf16_conv_routes.py [--reps 11]
"""
import argparse
import os
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
          ("r18 l4 3x3", 2, 512, 2, 512, 3, 1, 1), ("unet 3->16", 16, 3, 64, 16, 3, 1, 1),
          ("unet 16 64x64", 16, 16, 64, 16, 3, 1, 1), ("unet 32 32x32", 16, 32, 32, 32, 3, 1, 1),
          ("unet 64 16x16", 16, 64, 16, 64, 3, 1, 1), ("unet 128 8x8", 16, 128, 8, 128, 3, 1, 1),
          ("unet 1x1 16->3", 16, 16, 64, 3, 1, 1, 0)]
ROUTES = ("widen", "gemm")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = ap.parse_args()
    gm.set_num_threads(a.threads)
    print(f"blas core {_C._build_info().get('blas_core')}; {a.threads} threads; best of {a.reps}, routes interleaved")
    print(f"{'shape':<15}" + "".join(f"{r + ' fwd / data / weight ms':<30}" for r in ROUTES))
    rng = np.random.default_rng(0)
    saved = os.environ.get("GPUMEMNET_BF16_CONV")
    try:
        for name, N, C, H, K, R, s, p in SHAPES:
            x = gm.tensor(rng.standard_normal((N, C, H, H)).astype(np.float32)).to(gm.bfloat16)
            w = gm.tensor(rng.standard_normal((K, C, R, R)).astype(np.float32) * 0.1).to(gm.bfloat16)
            go = gm.ones(F.conv2d(x, w, None, s, p).shape, dtype=gm.bfloat16)
            best = {(r, k): float("inf") for r in ROUTES for k in range(3)}
            for _ in range(a.reps):
                for r in ROUTES:
                    os.environ["GPUMEMNET_BF16_CONV"] = r
                    t = [time.perf_counter()]
                    F.conv2d(x, w, None, s, p)
                    t.append(time.perf_counter())
                    for mask in ((True, False, False), (False, True, False)):
                        _C.conv2d_backward(go, x, w, (s, s), (p, p), (1, 1), 1, mask, tuple(x.shape), tuple(w.shape))
                        t.append(time.perf_counter())
                    for k in range(3):
                        best[(r, k)] = min(best[(r, k)], t[k + 1] - t[k])
            print(f"{name:<15}" + "".join(f"{'  '.join(f'{best[(r, k)] * 1e3:6.2f}' for k in range(3)):<30}"
                                          for r in ROUTES), flush=True)
    finally:
        if saved is None:
            os.environ.pop("GPUMEMNET_BF16_CONV", None)
        else:
            os.environ["GPUMEMNET_BF16_CONV"] = saved


if __name__ == "__main__":
    main()
