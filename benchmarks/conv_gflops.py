"""Convolution throughput on the CPU: conv2d forward (and backward) GFLOP/s for CNN-typical shapes, side by side
with one plain sgemm of the same FLOPs through gm.matmul (the im2col gemm's own shape: (G, K/G, C/G*kh*kw) @
(G, C/G*kh*kw, N*P*Q)), in one run. The gemm column is the ceiling the im2col path can approach; the depthwise
row shows why depthwise convolutions have a direct kernel (a 1-row gemm per channel wastes the BLAS).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/conv_gflops.py [--threads N] [--backward]

Workspace: the peak of the allocator's `workspace` category during each conv (the bounded im2col columns).
"""
import argparse
import time

import numpy as np

import gpumemnet as gm
from gpumemnet.nn._functional_conv import conv2d

# name, input (N, C, H, W), weight (K, C/G, R, S), stride, padding, groups
SHAPES = [
    ("resnet 3x3 64->64 56x56", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1),
    ("vgg first 3->64 224x224", (8, 3, 224, 224), (64, 3, 3, 3), 1, 1, 1),
    ("resnet stem 7x7/2 3->64", (8, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1),
    ("3x3 256->256 14x14", (8, 256, 14, 14), (256, 256, 3, 3), 1, 1, 1),
    ("pointwise 128->128 28x28", (8, 128, 28, 28), (128, 128, 1, 1), 1, 0, 1),
    ("depthwise 128ch 3x3 56x56", (8, 128, 56, 56), (128, 1, 3, 3), 1, 1, 128),
]


def best_time(fn, repeat):
    fn()  # warm-up: first-touch of outputs, allocator cache, BLAS thread start
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def workspace_peak(fn):
    gm.memory.reset_peak_memory_stats("cpu")
    fn()
    return gm.memory.memory_stats("cpu")["by_category"]["workspace"]["peak"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None, help="gm.set_num_threads (default: all cores)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--backward", action="store_true", help="also time the input and weight gradients")
    args = p.parse_args()
    if args.threads:
        gm.set_num_threads(args.threads)
    info = gm._C._build_info()
    print(f"gpumemnet {gm.__version__}; BLAS: {info['blas']} (core {info.get('blas_core')}); "
          f"threads {gm.get_num_threads()}; conv workspace limit {gm._C.get_conv_workspace_limit() >> 20} MiB")
    head = f"{'shape':28} {'GFLOP':>6} {'conv fwd':>9} {'sgemm':>9} {'ratio':>6} {'workspace':>10}"
    if args.backward:
        head += f" {'bwd data':>9} {'bwd wgt':>9}"
    print(head + "   (GFLOP/s)")
    rng = np.random.default_rng(0)
    for name, xs, ws, stride, padding, groups in SHAPES:
        x = gm.tensor(rng.standard_normal(xs, dtype=np.float32))
        w = gm.tensor(rng.standard_normal(ws, dtype=np.float32))
        with gm.no_grad():
            out = conv2d(x, w, None, stride, padding, 1, groups)
        N, K, P, Q = out.shape
        crs = ws[1] * ws[2] * ws[3]
        flop = 2.0 * N * K * P * Q * crs
        fwd = best_time(lambda: conv2d(x, w, None, stride, padding, 1, groups), args.repeat)
        a = gm.tensor(rng.standard_normal((groups, K // groups, crs), dtype=np.float32))
        b = gm.tensor(rng.standard_normal((groups, crs, N * P * Q), dtype=np.float32))
        mm = best_time(lambda: gm.matmul(a, b), args.repeat)
        peak = workspace_peak(lambda: conv2d(x, w, None, stride, padding, 1, groups))
        row = (f"{name:28} {flop / 1e9:6.2f} {flop / fwd / 1e9:9.1f} {flop / mm / 1e9:9.1f} {mm / fwd:6.2f} "
               f"{peak / 2**20:8.2f}Mi")
        if args.backward:
            g = gm.tensor(rng.standard_normal(tuple(out.shape), dtype=np.float32))
            ctx = (stride, padding, 1, groups)
            bd = best_time(lambda: gm._C.conv2d_backward(g, None, w, *ctx, (True, False, False), xs), args.repeat)
            bw = best_time(lambda: gm._C.conv2d_backward(g, x, None, *ctx, (False, True, False), None, ws),
                           args.repeat)
            row += f" {flop / bd / 1e9:9.1f} {flop / bw / 1e9:9.1f}"
        print(row)


if __name__ == "__main__":
    main()
