"""Training-step time and peak allocated memory on a CUDA device, gpumemnet beside PyTorch (same model, same
initial weights, same data), fp32, one Adam step per iteration.

Models: the demo's digits CNN (batch 256 of 1x8x8), the story-000 convolutions with a global-average-pool head
(batch 32 of 2x96x96, channels divided by --scale), and story 002's UNet (batch 16 of 3x128x128).
Time: --steps steps after --warmup, the device synchronised before and after, divided by --steps. PyTorch runs
twice: torch.backends.cudnn.benchmark off (cuDNN's heuristics, like gpumemnet) and on (autotuned).
Peak: max_memory_allocated over the timed steps (parameters, Adam state, gradients, activations, workspace),
from each library's own caching allocator.

    python benchmarks/gpu_train_step.py [--json out.json]
"""
import argparse
import functools
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import gpumemnet as gm  # noqa: E402
import gpumemnet.nn as gnn  # noqa: E402
from seed002_unet import UNet, make_shapes, unet_class  # noqa: E402
from train_step import copy_weights, digits_cnn, story_gap  # noqa: E402


def models(args):
    """(name, gm builder, torch builder(torch), x, y) for each model."""
    rng = np.random.default_rng(0)
    s = args.size_scale
    x1 = rng.standard_normal((256 // s, 1, 8, 8)).astype(np.float32)
    y1 = rng.integers(0, 10, x1.shape[0]).astype(np.int64)
    x2 = rng.standard_normal((32 // s, 2, 96, 96)).astype(np.float32)
    y2 = rng.integers(0, 1000, x2.shape[0]).astype(np.int64)
    x3, y3 = make_shapes(16 // s, 128 // s, seed=0)

    def torch_unet(torch):
        cls = unet_class(torch.nn, torch.cat, functools.partial(torch.utils.checkpoint.checkpoint,
                                                                 use_reentrant=False))
        return cls(3, 3, args.unet_width, 3)
    return [
        ("digits CNN", lambda: digits_cnn(gnn, 32, 10), lambda torch: digits_cnn(torch.nn, 32, 10), x1, y1),
        (f"story-000 / {args.scale} + GAP", lambda: story_gap(gnn, args.scale),
         lambda torch: story_gap(torch.nn, args.scale), x2, y2),
        ("UNet", lambda: UNet(3, 3, args.unet_width, 3), torch_unet, x3, y3),
    ]


def timed(step, sync, warmup, steps):
    for _ in range(warmup):
        step()
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t) * 1e3 / steps


def run_gm(build, x, y, args):
    gm.manual_seed(0)
    model = build().to("cuda")
    opt = gm.optim.Adam(model.parameters(), lr=1e-3)
    crit = gnn.CrossEntropyLoss()
    xt, yt = gm.from_numpy(x, device="cuda"), gm.from_numpy(y, device="cuda")

    def step():
        opt.zero_grad()
        crit(model(xt), yt).backward()
        opt.step()
    step()  # Adam's state exists from here on
    gm.cuda.reset_peak_memory_stats()
    ms = timed(step, gm.cuda.synchronize, args.warmup, args.steps)
    return model, ms, gm.cuda.max_memory_allocated()


def run_torch(torch, build, gm_model, x, y, args, benchmark):
    torch.backends.cudnn.benchmark = benchmark
    model = build(torch)
    copy_weights(torch, gm_model.to("cpu"), model)
    model = model.cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    crit = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()

    def step():
        opt.zero_grad()
        crit(model(xt), yt).backward()
        opt.step()
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ms = timed(step, torch.cuda.synchronize, args.warmup, args.steps)
    peak = torch.cuda.max_memory_allocated()
    del model, opt, xt, yt
    torch.cuda.empty_cache()
    return ms, peak


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--scale", type=int, default=2, help="divide story 000's channel counts by this")
    p.add_argument("--unet-width", type=int, default=32)
    p.add_argument("--size-scale", type=int, default=1, help="divide batch sizes and the UNet's image size "
                                                             "(a quick run on the emulator)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--no-torch", action="store_true")
    args = p.parse_args(argv)
    if not gm.cuda.is_available():
        print("gpu_train_step: no CUDA device (gm.cuda.is_available() is False); nothing to measure")
        return 0
    torch = None
    if not args.no_torch:
        try:
            import torch
            if not torch.cuda.is_available():
                torch = None
        except ImportError:
            pass
    props = gm.cuda.get_device_properties(0)
    print(f"gpumemnet {gm.__version__} on {props.name}" + (" (emulator)" if gm.cuda.is_emulated() else "")
          + (f"; PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}" if torch else "; no PyTorch"))
    results = {}
    head = f"{'model':<26}{'gm ms':>9}{'torch ms':>10}{'bench ms':>10}{'ratio':>7}{'gm peak':>12}{'torch peak':>12}"
    print(head)
    for name, gm_build, torch_build, x, y in models(args):
        model, ms, peak = run_gm(gm_build, x, y, args)
        r = {"gm_ms": ms, "gm_peak": peak}
        if torch:
            r["torch_ms"], r["torch_peak"] = run_torch(torch, torch_build, model, x, y, args, False)
            r["torch_bench_ms"], _ = run_torch(torch, torch_build, model, x, y, args, True)
            r["speed_ratio"] = r["torch_ms"] / ms            # >= 1: at least as fast as PyTorch
            r["speed_ratio_vs_bench"] = r["torch_bench_ms"] / ms
            r["peak_ratio"] = peak / r["torch_peak"]          # <= 1: no more memory than PyTorch
        del model
        gm.cuda.empty_cache()
        results[name] = r
        mib = 2 ** 20
        print(f"{name:<26}{ms:9.2f}{r.get('torch_ms', float('nan')):10.2f}{r.get('torch_bench_ms', float('nan')):10.2f}"
              f"{r.get('speed_ratio', float('nan')):7.2f}{peak / mib:9.1f} MiB"
              f"{r.get('torch_peak', float('nan')) / mib:9.1f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": props.name, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
