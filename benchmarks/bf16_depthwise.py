"""The depthwise convolutions of torchvision's MobileNetV2 at 3x64x64 (a micro-batch of 2, as the benchmark's
autocast mode runs it) in bfloat16 and float32 on the CPU: per shape the forward, input-gradient and
weight-gradient C passes (best of `--repeat` calls, ms), and the autograd forward + backward of F.conv2d on
bfloat16 operands, which is what an autocast step pays (it took float32 copies and an item-by-item backward before
kernels/cpu/conv_depthwise.c had half passes: run this file with an older build on PYTHONPATH to compare).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bf16_depthwise.py [--threads 2] [--repeat 20]
"""
import argparse
import time

import numpy as np

# (C, H, stride) of MobileNetV2's depthwise 3x3 layers at a 64x64 input, with how often each occurs
SHAPES = [(32, 32, 1, 1), (96, 32, 2, 1), (144, 16, 1, 1), (144, 16, 2, 1), (192, 8, 1, 2), (192, 8, 2, 1),
          (384, 4, 1, 4), (576, 4, 1, 2), (576, 4, 2, 1), (960, 2, 1, 3)]


def best(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--batch", type=int, default=2)
    a = ap.parse_args()
    import gpumemnet as gm
    import gpumemnet.nn.functional as F
    from gpumemnet import _C
    gm.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    tot = np.zeros(5)
    print(f"{gm.__file__}\n{'C':>4} {'HxW':>5} s  x  | f32 fwd   dx    dw  | bf16 fwd   dx    dw  | bf16 autograd")
    for C, H, s, times in SHAPES:
        P = (H - 1) // s + 1
        x32 = gm.tensor(rng.standard_normal((a.batch, C, H, H)).astype(np.float32))
        w32 = gm.tensor(rng.standard_normal((C, 1, 3, 3)).astype(np.float32))
        g32 = gm.tensor(rng.standard_normal((a.batch, C, P, P)).astype(np.float32))
        row = []
        for dt in (gm.float32, gm.bfloat16):
            x, w, g = x32.to(dt), w32.to(dt), g32.to(dt)
            try:
                row += [best(lambda: _C.conv2d(x, w, None, s, 1, 1, C), a.repeat),
                        best(lambda: _C.conv2d_backward(g, x, w, s, 1, 1, C, (True, False, False)), a.repeat),
                        best(lambda: _C.conv2d_backward(g, x, w, s, 1, 1, C, (False, True, False)), a.repeat)]
            except TypeError:  # an older build: no half depthwise C passes
                row += [float("nan")] * 3
        xb, wb, gb = x32.to(gm.bfloat16), w32.to(gm.bfloat16), g32.to(gm.bfloat16)

        def autograd():
            xr, wr = xb.detach().requires_grad_(), wb.detach().requires_grad_()
            F.conv2d(xr, wr, None, s, 1, 1, C).backward(gb)
        row.append(best(autograd, a.repeat))
        print(f"{C:4d} {H:2d}x{H:<2d} {s} {times} | " + " ".join(f"{v:5.3f}" for v in row[:3]) + " | " +
              " ".join(f"{v:5.3f}" for v in row[3:6]) + f" | {row[6]:6.3f}")
        tot += times * np.array([sum(row[0:3]), sum(row[3:6]), row[6], 0, 0])
    print(f"per micro-batch, all depthwise layers: f32 passes {tot[0]:.2f} ms, bf16 passes {tot[1]:.2f} ms, "
          f"bf16 autograd fwd+bwd {tot[2]:.2f} ms")


if __name__ == "__main__":
    main()
