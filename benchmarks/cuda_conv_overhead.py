"""The host's cost of one CUDA convolution call, piece by piece, gpumemnet beside PyTorch (issue 14, item 6).

    python benchmarks/cuda_conv_overhead.py [--calls N] [--pyspy DIR]

A small convolution (1x1 128->128 at 28x28, batch 8: ~20 µs of GPU time) is launched N times back to back and the
loop's wall time is divided by N: when the host is slower than the GPU, that is the host's cost per call. Rows
for gpumemnet: the forward as cuDNN runs it (its workspace allocated and freed per call), the same with the
candidates replaced by the direct kernels (no cuDNN, no workspace), the input and weight gradients, an allocation
and free of a workspace-sized tensor alone, and `a + b` as the floor of any op. PyTorch's forward and gradients
beside them (its own process). With --pyspy DIR and py-spy installed, gpumemnet's forward loop is sampled with
native frames (where in our C, cuDNN or the driver the host's time goes) into DIR."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time


def per_call(fn, sync, n):
    for _ in range(20):
        fn()
    sync()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6


def side(name, n, loop_seconds):
    import numpy as np
    rng = np.random.default_rng(0)
    if name == "gm":
        import gpumemnet as gm
        torch = gm.as_torch()
        torch.backends.cudnn.allow_tf32 = True
    else:
        import torch
    sync = torch.cuda.synchronize
    x = torch.from_numpy(rng.standard_normal((8, 128, 28, 28), dtype=np.float32)).cuda()
    w = torch.from_numpy(rng.standard_normal((128, 128, 1, 1), dtype=np.float32)).cuda()
    g = torch.from_numpy(rng.standard_normal((8, 128, 28, 28), dtype=np.float32)).cuda()
    a, b = torch.rand(16, device="cuda"), torch.rand(16, device="cuda")
    F = torch.nn.functional
    rows = {}
    with torch.no_grad():
        rows["a + b"] = per_call(lambda: a + b, sync, n)
        rows["conv fwd"] = per_call(lambda: F.conv2d(x, w), sync, n)
        if name == "gm":
            C = gm._C
            rows["conv fwd: algo"] = C._conv_algo_last()
            rows["bwd data"] = per_call(lambda: C.conv2d_backward(g, None, w, 1, 0, 1, 1, (True, False, False),
                                                                  tuple(x.shape)), sync, n)
            rows["bwd weight"] = per_call(lambda: C.conv2d_backward(g, x, None, 1, 0, 1, 1, (False, True, False),
                                                                    None, tuple(w.shape)), sync, n)
            ws = rows["conv fwd: algo"]["workspace"] if isinstance(rows["conv fwd: algo"], dict) else 0
            for nbytes in sorted({1024, max(ws, 1), 6 << 20}):
                rows[f"alloc+free {nbytes} B"] = per_call(lambda: gm.empty(nbytes, dtype=gm.bool, device="cuda"),
                                                          sync, n)
            for fake in ([0], [1024]):
                C._conv_algo_fake(fake)
                rows[f"conv fwd, direct kernel, workspace {fake[0]} B"] = per_call(lambda: F.conv2d(x, w), sync, n)
            C._conv_algo_fake(None)
            if loop_seconds:  # a loop for py-spy to sample
                print("LOOP", os.getpid(), flush=True)
                end = time.perf_counter() + loop_seconds
                while time.perf_counter() < end:
                    for _ in range(100):
                        F.conv2d(x, w)
                    sync()
        else:
            def bwd(mask):
                return lambda: torch.ops.aten.convolution_backward(g, x, w, None, [1, 1], [0, 0], [1, 1], False,
                                                                   [0, 0], 1, mask)
            rows["bwd data"] = per_call(bwd([True, False, False]), sync, n)
            rows["bwd weight"] = per_call(bwd([False, True, False]), sync, n)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--pyspy")
    p.add_argument("--side", choices=("gm", "torch"), help=argparse.SUPPRESS)
    p.add_argument("--loop", type=float, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side:
        print(json.dumps(side(args.side, args.calls, args.loop)), flush=True)
        return
    res = {}
    for s in ("torch", "gm"):
        r = subprocess.run([sys.executable, __file__, "--side", s, "--calls", str(args.calls)], capture_output=True,
                           text=True, timeout=200)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        res[s] = json.loads(lines[-1]) if lines else {"failed": r.stderr[-2000:]}
    print("host µs per call, launched back to back (1x1 128->128 28x28, batch 8, TF32 on):")
    for k in dict.fromkeys(list(res["gm"]) + list(res["torch"])):
        t, g = res["torch"].get(k, ""), res["gm"].get(k, "")
        fmt = lambda v: f"{v:9.1f}" if isinstance(v, float) else f"{str(v):>9}"  # noqa: E731
        print(f"  {k:44s} torch {fmt(t)}   gpumemnet {fmt(g)}")
    if args.pyspy and shutil.which("py-spy"):
        os.makedirs(args.pyspy, exist_ok=True)
        proc = subprocess.Popen([sys.executable, __file__, "--side", "gm", "--calls", "50", "--loop", "8"],
                                stdout=subprocess.PIPE, text=True)
        for ln in proc.stdout:
            if ln.startswith("LOOP"):
                pid = ln.split()[1]
                break
        out = os.path.join(args.pyspy, "pyspy_conv.txt")
        r = subprocess.run(["py-spy", "record", "--native", "--pid", pid, "--duration", "5", "--rate", "500",
                            "--format", "raw", "-o", out], capture_output=True, text=True, timeout=60)
        print("py-spy:", r.returncode, r.stderr[-500:])
        proc.wait(timeout=60)
        if os.path.exists(out):
            summarize_pyspy(out)


def summarize_pyspy(path):
    """Self and total samples per native function in py-spy's raw (collapsed stacks) output, top 40 each."""
    from collections import Counter
    self_c, total_c, n = Counter(), Counter(), 0
    for ln in open(path):
        stack, _, count = ln.rstrip().rpartition(" ")
        if not stack:
            continue
        c = int(count)
        n += c
        frames = stack.split(";")
        self_c[frames[-1]] += c
        for f in set(frames):
            total_c[f] += c
    print(f"py-spy: {n} samples; self (top 40):")
    for f, c in self_c.most_common(40):
        print(f"  {100 * c / n:5.1f}%  {f[:150]}")
    print("total (top 40):")
    for f, c in total_c.most_common(40):
        print(f"  {100 * c / n:5.1f}%  {f[:150]}")


if __name__ == "__main__":
    main()
