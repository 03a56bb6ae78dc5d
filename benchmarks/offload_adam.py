"""The host side of optimizer offload: the fused CPU Adam step (kernels/cpu/optim.c, what Adam(offload="cpu") runs
on the fp32 masters) against memcpy bandwidth on the same machine, both as bytes moved through memory per second.

An fp32 Adam step reads the master, the gradient and both moments and writes the master and both moments: 28
bytes per parameter. A memcpy of n bytes reads n and writes n. Adam is memory-bound, so the ratio of the two rates
says how close the kernel is to the machine's limit (goal >= 70 %). The rounds alternate (Adam, memcpy, Adam,
...) so that a shared machine's noise hits both alike; the median and the spread over the rounds are printed.

--dtype bfloat16 / float16: the headline configuration (half parameters on the device, fp32 masters on the host).
The one-pass mixed kernel (adam_step_mixed: reads the half gradient, master and moments, writes them and the half
parameter over the gradient: 28 bytes per parameter) against memcpy of the same bytes, and against the three
passes it replaces (widen the gradient to fp32, fp32 Adam, round the master into a half buffer: 40 bytes),
all three interleaved.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/offload_adam.py [--mparams 64] [--rounds 9]
        [--dtype float32|bfloat16|float16] [--json out.json]
"""
import argparse
import json
import statistics
import time

import numpy as np

import gpumemnet as gm
from gpumemnet import _C

ADAM_BYTES = 28  # per fp32 parameter: read p, g, m, v (16), write p, m, v (12)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mparams", type=float, default=64, help="millions of fp32 parameters in the step")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.dtype != "float32":
        return mixed(args)
    if args.threads:
        gm.set_num_threads(args.threads)
    info = _C._build_info()
    print(f"gpumemnet {gm.__version__}, {gm.get_num_threads()} threads, BLAS {info.get('blas')} "
          f"({info.get('blas_package', '')})".replace(" ()", ""))
    n = int(args.mparams * 1e6)
    rng = np.random.default_rng(0)
    master = gm.from_numpy(rng.standard_normal(n).astype(np.float32))
    grad = gm.from_numpy(rng.standard_normal(n).astype(np.float32))
    m, v = gm.zeros(n), gm.zeros(n)
    # memcpy of the bytes one Adam step moves (half read, half written): the same traffic, the machine's limit
    src = np.ones(ADAM_BYTES * n // 2, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch the pages once
    adam_s, copy_s = [], []
    for r in range(args.rounds + 1):
        t = time.perf_counter()
        _C.adam_step_([master], [grad], [m], [v], None, [r + 1], 1e-3, 0.9, 0.999, 1e-8, 0.0, False, False, False)
        a = time.perf_counter() - t
        t = time.perf_counter()
        np.copyto(dst, src)
        c = time.perf_counter() - t
        if r:  # the first round warms the caches and the thread pool
            adam_s.append(a)
            copy_s.append(c)
    adam_bw = [ADAM_BYTES * n / s for s in adam_s]
    copy_bw = [2 * src.nbytes / s for s in copy_s]
    ratios = [a / c for a, c in zip(adam_bw, copy_bw)]
    med = statistics.median
    r = {"params": n, "adam_GBps": med(adam_bw) / 1e9, "memcpy_GBps": med(copy_bw) / 1e9,
         "ratio_median": med(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
         "adam_params_per_s": n / med(adam_s), "rounds": args.rounds}
    print(f"CPU Adam (fp32, {n / 1e6:.0f}M parameters): {r['adam_GBps']:.2f} GB/s through memory, "
          f"{r['adam_params_per_s'] / 1e9:.2f} G parameters/s")
    print(f"memcpy of the same bytes: {r['memcpy_GBps']:.2f} GB/s")
    print(f"Adam / memcpy: {r['ratio_median'] * 100:.0f} % (median of {args.rounds} paired rounds; "
          f"{r['ratio_min'] * 100:.0f}-{r['ratio_max'] * 100:.0f} %); goal >= 70 %")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return r


def mixed(args):
    """Half parameters: the one-pass mixed kernel, the three passes it replaces, and memcpy, interleaved."""
    if args.threads:
        gm.set_num_threads(args.threads)
    half = getattr(gm, args.dtype)
    info = _C._build_info()
    print(f"gpumemnet {gm.__version__}, {gm.get_num_threads()} threads, BLAS {info.get('blas')} "
          f"({info.get('blas_package', '')}), {args.dtype} parameters, fp32 masters".replace(" ()", ""))
    n = int(args.mparams * 1e6)
    rng = np.random.default_rng(0)
    master = gm.from_numpy(rng.standard_normal(n).astype(np.float32))
    grad = gm.from_numpy(rng.standard_normal(n).astype(np.float32)).to(half)
    stage = grad.clone()
    wide, out = gm.zeros(n), gm.zeros(n, dtype=half)
    m, v = gm.zeros(n), gm.zeros(n)
    src = np.ones(ADAM_BYTES * n // 2, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    fused_s, three_s, copy_s = [], [], []
    hp = (1e-3, 0.9, 0.999, 1e-8, 0.0, False, False, False)
    for r in range(args.rounds + 1):
        _C.copy_(stage, grad)  # the gradient, as the copy down leaves it (not timed)
        t = time.perf_counter()
        _C.adam_step_mixed_(stage, master, m, v, None, r + 1, *hp)
        f = time.perf_counter() - t
        t = time.perf_counter()
        _C.copy_(wide, grad)
        _C.adam_step_([master], [wide], [m], [v], None, [r + 1], *hp)
        _C.copy_(out, master)
        s3 = time.perf_counter() - t
        t = time.perf_counter()
        np.copyto(dst, src)
        c = time.perf_counter() - t
        if r:
            fused_s.append(f)
            three_s.append(s3)
            copy_s.append(c)
    med = statistics.median
    fused_bw = [ADAM_BYTES * n / s for s in fused_s]
    copy_bw = [2 * src.nbytes / s for s in copy_s]
    ratios = [a / c for a, c in zip(fused_bw, copy_bw)]
    speedups = [b / a for a, b in zip(fused_s, three_s)]
    r = {"params": n, "dtype": args.dtype, "fused_GBps": med(fused_bw) / 1e9, "memcpy_GBps": med(copy_bw) / 1e9,
         "fused_ms": med(fused_s) * 1e3, "three_pass_ms": med(three_s) * 1e3, "ratio_median": med(ratios),
         "ratio_min": min(ratios), "ratio_max": max(ratios), "speedup_median": med(speedups),
         "speedup_min": min(speedups), "speedup_max": max(speedups), "rounds": args.rounds}
    print(f"mixed CPU Adam ({args.dtype} gradient and parameter, fp32 master and state, {n / 1e6:.0f}M parameters): "
          f"{r['fused_ms']:.1f} ms, {r['fused_GBps']:.2f} GB/s through memory; memcpy of the same bytes "
          f"{r['memcpy_GBps']:.2f} GB/s: {r['ratio_median'] * 100:.0f} % ({r['ratio_min'] * 100:.0f}-"
          f"{r['ratio_max'] * 100:.0f} %); goal >= 70 %")
    print(f"widen + fp32 Adam + round (before): {r['three_pass_ms']:.1f} ms; one pass is {r['speedup_median']:.2f}x "
          f"faster ({r['speedup_min']:.2f}-{r['speedup_max']:.2f}x over {args.rounds} paired rounds)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return r


if __name__ == "__main__":
    main()
