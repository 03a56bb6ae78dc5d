"""bfloat16 autocast on the CPU: one training step of torchvision's ResNet-18 (3x64x64, batch 4, SGD) and of the
UNet of examples/seed002_unet.py (width 16, depth 3, batch 16 of 3x64x64, Adam), for gpumemnet in float32,
gpumemnet under bfloat16 autocast + GradScaler and PyTorch the same two ways, in paired rounds.

Each configuration runs in its own worker process (gpumemnet runs torchvision's code under its torch alias,
gm.as_torch(), which cannot share a process with PyTorch); a round asks every worker for one step in turn, so
the machine's load moves all sides alike. Printed: median step time and spread (min-max) per configuration, and
the median over rounds of each round's ratio.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bf16_step.py [--rounds 15] [--models resnet18,unet]
"""
import argparse
import functools
import os
import statistics
import sys

from _paired import paired_step_times, print_blas_config, serve_steps

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(lib, model, mode, accum, threads):
    if lib == "gm":
        import gpumemnet as gm
        gm.as_torch()
    import torch
    torch.set_num_threads(threads)
    import numpy as np
    torch.manual_seed(0)
    if model == "resnet18":
        import torchvision
        net = torchvision.models.resnet18(num_classes=10)
        x = torch.from_numpy(np.random.default_rng(0).standard_normal((4, 3, 64, 64)).astype(np.float32))
        y = torch.from_numpy(np.arange(4) % 10)
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    else:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
        from seed002_unet import unet_class, make_shapes
        import torch.utils.checkpoint
        net = unet_class(torch.nn, torch.cat, functools.partial(torch.utils.checkpoint.checkpoint,
                                                               use_reentrant=False))(width=16, depth=3)
        xs, ys = make_shapes(16, 64)
        x, y = torch.from_numpy(xs), torch.from_numpy(ys)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    crit = torch.nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cpu") if mode == "bf16" else None
    micro = x.shape[0] // accum

    def step():
        for i in range(accum):
            xb, yb = x[i * micro:(i + 1) * micro], y[i * micro:(i + 1) * micro]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
                loss = crit(net(xb), yb) / accum
            (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad()

    serve_steps(step)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--models", default="resnet18,unet")
    ap.add_argument("--accum", type=int, default=1, help="gradient accumulation micro-batches per step")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads of both libraries")
    ap.add_argument("--worker", nargs=3, metavar=("LIB", "MODEL", "MODE"))
    a = ap.parse_args()
    if a.worker:
        return worker(*a.worker, a.accum, a.threads)
    print_blas_config()
    configs = [("gm", "fp32"), ("gm", "bf16"), ("torch", "fp32"), ("torch", "bf16")]
    # gpumemnet sets a passive OpenMP wait policy at import (python/gpumemnet/_loader.py); PyTorch's libgomp
    # spins by default, which on a shared machine costs it seconds a step: both sides run passive here
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    print("OMP_WAIT_POLICY:", env["OMP_WAIT_POLICY"])
    for model in a.models.split(","):
        workers = {(lib, mode): ([sys.executable, __file__, "--worker", lib, model, mode, "--accum", str(a.accum),
                                 "--threads", str(a.threads)], env) for lib, mode in configs}
        times = paired_step_times(workers, a.rounds)
        print(f"\n{model}: median ms (min-max) over {a.rounds} paired rounds, accumulation {a.accum}, "
              f"{a.threads} threads")
        for c in configs:
            t = times[c]
            print(f"  {c[0]:5s} {c[1]}: {statistics.median(t):8.1f} ({min(t):.1f}-{max(t):.1f})")

        def ratio(p, q):
            return statistics.median(x / y for x, y in zip(times[p], times[q]))
        print(f"  gm bf16 / torch bf16: {ratio(('gm', 'bf16'), ('torch', 'bf16')):.2f}x   "
              f"gm bf16 / gm fp32: {ratio(('gm', 'bf16'), ('gm', 'fp32')):.2f}x   "
              f"gm fp32 / torch fp32: {ratio(('gm', 'fp32'), ('torch', 'fp32')):.2f}x")


if __name__ == "__main__":
    main()
