"""Fused Adam on a CUDA device against the device's copy bandwidth (issue target: >= 80 %).

100M float32 parameters in --tensors tensors. One Adam step reads param, grad, exp_avg, exp_avg_sq and writes
param, exp_avg, exp_avg_sq: 7 x 4 bytes per parameter. Copy bandwidth: a device-to-device copy of a tensor as
large as all parameters (read + write: 2 x 4 bytes per element), timed the same way. PyTorch's fused Adam
(torch.optim.Adam(fused=True)) is timed beside it when torch is importable.

    python benchmarks/gpu_adam.py [--json out.json]
"""
import argparse
import json
import sys
import time

import gpumemnet as gm


def timed(fn, sync, warmup, reps):
    for _ in range(warmup):
        fn()
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t) / reps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--params", type=int, default=100_000_000)
    p.add_argument("--tensors", type=int, default=10)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json")
    args = p.parse_args(argv)
    if not gm.cuda.is_available():
        print("gpu_adam: no CUDA device (gm.cuda.is_available() is False); nothing to measure")
        return 0
    n = args.params // args.tensors
    total = n * args.tensors
    params = [gm.nn.Parameter(gm.randn(n, device="cuda")) for _ in range(args.tensors)]
    for q in params:
        q.grad = gm.randn(n, device="cuda")
    opt = gm.optim.Adam(params, lr=1e-3)
    adam_s = timed(opt.step, gm.cuda.synchronize, 3, args.reps)
    src, dst = gm.randn(total, device="cuda"), gm.empty(total, device="cuda")
    copy_s = timed(lambda: dst.copy_(src), gm.cuda.synchronize, 3, args.reps)
    adam_bw, copy_bw = 28 * total / adam_s, 8 * total / copy_s
    r = {"params": total, "adam_ms": adam_s * 1e3, "adam_GBps": adam_bw / 1e9, "copy_ms": copy_s * 1e3,
         "copy_GBps": copy_bw / 1e9, "fraction_of_copy": adam_bw / copy_bw,
         "step_peak_extra_bytes": None}
    # nothing parameter-sized is allocated by the step: the peak over a step equals what was allocated before
    gm.cuda.reset_peak_memory_stats()
    before = gm.cuda.memory_allocated()
    opt.step()
    gm.cuda.synchronize()
    r["step_peak_extra_bytes"] = gm.cuda.max_memory_allocated() - before
    del src, dst
    try:
        import torch
        if torch.cuda.is_available():
            tp = [torch.nn.Parameter(torch.randn(n, device="cuda")) for _ in range(args.tensors)]
            for q in tp:
                q.grad = torch.randn(n, device="cuda")
            topt = torch.optim.Adam(tp, lr=1e-3, fused=True)
            r["torch_fused_adam_ms"] = timed(topt.step, torch.cuda.synchronize, 3, args.reps) * 1e3
            a, b = torch.randn(total, device="cuda"), torch.empty(total, device="cuda")
            r["torch_copy_GBps"] = 8 * total / timed(lambda: b.copy_(a), torch.cuda.synchronize, 3, args.reps) / 1e9
    except ImportError:
        pass
    for k, v in r.items():
        print(f"{k:>24}: {v:.4g}" if isinstance(v, float) else f"{k:>24}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
