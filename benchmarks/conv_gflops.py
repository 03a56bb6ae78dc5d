"""Convolution throughput on the CPU as a share of the sgemm ceiling: for each CNN shape class, conv2d's forward,
input-gradient and weight-gradient, each against one plain sgemm of the same FLOPs through gm.matmul (the im2col
gemm's own shape: (G, K/G, C/G*kh*kw) @ (G, C/G*kh*kw, N*P*Q)), measured in the same run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/conv_gflops.py [--threads N] [--rounds R]
        [--clock wall|cpu] [--only SUBSTRING]

Rounds are paired: each round times the sgemm and the three passes one after another, and the share of a pass is
that round's sgemm time over the pass's time; the table prints the median share over the rounds and its spread
(lowest-highest), so load from other jobs on a shared machine hits both sides of a ratio alike. `--clock cpu`
times with the process's CPU time instead of the wall clock: with --threads 1 that leaves out the time the process
waited for a core, the steadiest figure on a busy machine (with more threads it counts spinning threads too).

Workspace: the peak of the allocator's `workspace` category during each pass.

The sgemm runs right before each pass, on OpenBLAS's threads. OpenBLAS's idle worker busy-waits for
OPENBLAS_THREAD_TIMEOUT (2^n cycles) after a threaded call: with its default (n = 28, ~0.1 s) it shared a core with
every pass timed after it (the process burnt 7.9 ms of CPU per 3x3 256->256 14x14 forward after an sgemm, 3.1 ms
alone; an earlier session saw the direct kernel at 170-190 GFLOP/s here against ~300 in a loop of its own). gpumemnet sets n = 20 at
import unless the variable is set (python/gpumemnet/_loader.py); the header prints the value in effect.
"""
import argparse
import os
import statistics
import time

import numpy as np

import gpumemnet as gm
from gpumemnet.nn._functional_conv import conv2d

# class, name, input (N, C, H, W), weight (K, C/G, R, S), stride, padding, groups
SHAPES = [
    ("3x3", "3x3 64->64 56x56", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1),
    ("3x3", "3x3 128->128 28x28", (8, 128, 28, 28), (128, 128, 3, 3), 1, 1, 1),
    ("3x3", "3x3 256->256 14x14", (8, 256, 14, 14), (256, 256, 3, 3), 1, 1, 1),
    ("3x3", "3x3 512->512 7x7", (8, 512, 7, 7), (512, 512, 3, 3), 1, 1, 1),
    ("3x3", "3x3/2 128->256 28x28", (8, 128, 28, 28), (256, 128, 3, 3), 2, 1, 1),
    ("1x1", "1x1 128->128 28x28", (8, 128, 28, 28), (128, 128, 1, 1), 1, 0, 1),
    ("1x1", "1x1 256->1024 14x14", (8, 256, 14, 14), (1024, 256, 1, 1), 1, 0, 1),
    ("1x1", "1x1 512->512 7x7", (8, 512, 7, 7), (512, 512, 1, 1), 1, 0, 1),
    ("1x1", "1x1/2 256->512 28x28", (8, 256, 28, 28), (512, 256, 1, 1), 2, 0, 1),
    ("7x7/2", "7x7/2 64->64 56x56", (8, 64, 56, 56), (64, 64, 7, 7), 2, 3, 1),
    ("7x7/2", "stem 7x7/2 3->64 112x112", (8, 3, 112, 112), (64, 3, 7, 7), 2, 3, 1),
    ("grouped", "3x3 g32 128->128 28x28", (8, 128, 28, 28), (128, 4, 3, 3), 1, 1, 32),
    ("depthwise", "dw 3x3 128ch 56x56", (8, 128, 56, 56), (128, 1, 3, 3), 1, 1, 128),
    ("depthwise", "dw 3x3/2 96ch 56x56", (8, 96, 56, 56), (96, 1, 3, 3), 2, 1, 96),
]


def timed(fn, clock):
    t0 = clock()
    fn()
    return clock() - t0


def workspace_peak(fn):
    gm.memory.reset_peak_memory_stats("cpu")
    fn()
    return gm.memory.memory_stats("cpu")["by_category"]["workspace"]["peak"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None, help="gm.set_num_threads (default: all cores)")
    p.add_argument("--rounds", "--repeat", type=int, default=7, help="paired rounds per shape (median and spread)")
    p.add_argument("--backward", action="store_true", help="accepted for older command lines: both gradients are "
                   "always timed")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    p.add_argument("--only", default=None, help="only the shapes whose name or class contains this")
    args = p.parse_args()
    if args.threads:
        gm.set_num_threads(args.threads)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    info = gm._C._build_info()
    print(f"gpumemnet {gm.__version__}; BLAS: {info['blas']} (core {info.get('blas_core')}); "
          f"threads {gm.get_num_threads()}; conv workspace limit {gm._C.get_conv_workspace_limit() >> 20} MiB; "
          f"clock {args.clock}; {args.rounds} paired rounds; "
          f"OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT')}")
    print(f"{'class':9} {'shape':26} {'GFLOP':>5} {'sgemm':>6} | {'fwd % of sgemm':>17} | {'bwd-data %':>17} | "
          f"{'bwd-weight %':>17} | workspace MiB f/d/w")
    rng = np.random.default_rng(0)
    for cls, name, xs, ws, stride, padding, groups in SHAPES:
        if args.only and args.only not in name and args.only != cls:
            continue
        x = gm.tensor(rng.standard_normal(xs, dtype=np.float32))
        w = gm.tensor(rng.standard_normal(ws, dtype=np.float32))
        with gm.no_grad():
            out = conv2d(x, w, None, stride, padding, 1, groups)
        N, K, P, Q = out.shape
        crs = ws[1] * ws[2] * ws[3]
        flop = 2.0 * N * K * P * Q * crs
        a = gm.tensor(rng.standard_normal((groups, K // groups, crs), dtype=np.float32))
        b = gm.tensor(rng.standard_normal((groups, crs, N * P * Q), dtype=np.float32))
        if groups == 1:
            a, b = a[0].contiguous(), b[0].contiguous()
        dy = gm.tensor(rng.standard_normal(tuple(out.shape), dtype=np.float32))
        ctx = (stride, padding, 1, groups)
        passes = {
            "sgemm": lambda: gm.matmul(a, b),
            "fwd": lambda: conv2d(x, w, None, stride, padding, 1, groups),
            "data": lambda: gm._C.conv2d_backward(dy, None, w, *ctx, (True, False, False), xs),
            "weight": lambda: gm._C.conv2d_backward(dy, x, None, *ctx, (False, True, False), None, ws),
        }
        with gm.no_grad():
            for fn in passes.values():
                fn()  # warm-up: first touch of outputs, allocator cache, BLAS threads
            peaks = [workspace_peak(passes[k]) / 2**20 for k in ("fwd", "data", "weight")]
            shares = {k: [] for k in ("fwd", "data", "weight")}
            mm_times = []
            for _ in range(args.rounds):
                for k in shares:  # each pass right after its own sgemm: load changes hit both alike
                    t_mm = timed(passes["sgemm"], clock)
                    mm_times.append(t_mm)
                    shares[k].append(t_mm / max(timed(passes[k], clock), 1e-9))
        cells = []
        for k in ("fwd", "data", "weight"):
            s = sorted(shares[k])
            cells.append(f"{100 * statistics.median(s):5.0f} ({100 * s[0]:4.0f}-{100 * s[-1]:4.0f})")
        gflops = flop / statistics.median(mm_times) / 1e9
        print(f"{cls:9} {name:26} {flop / 1e9:5.2f} {gflops:6.1f} | " + " | ".join(f"{c:>17}" for c in cells)
              + " | " + "/".join(f"{v:.2f}" for v in peaks), flush=True)


if __name__ == "__main__":
    main()
