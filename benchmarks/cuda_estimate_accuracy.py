"""Issue 6 on a GPU: gm.memory.estimate(device="cuda") against the measured peak of the same training steps (three
of forward, cross-entropy, backward, Adam.step, zero_grad: the highest) on the device, for the digits CNN, the story-000 net with a GAP head
and story 002's UNet, fp32. The estimate runs on meta standing for CUDA, asking this GPU's cuDNN which algorithm
each convolution gets and taking its workspace as the device does (issue 15: before, it left that workspace out,
1.25 GB of the UNet's 1.56 GB). Target: 0 bytes of difference; the workspace columns show the part of the peak
that is cuDNN's workspace, estimated and measured, at the moment of the peak.

    python benchmarks/cuda_estimate_accuracy.py [--json out.json] [--small]
"""
import argparse
import gc
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import gpumemnet as gm  # noqa: E402
import gpumemnet.nn as gnn  # noqa: E402
import gpumemnet.nn.functional as F  # noqa: E402
from seed002_unet import UNet  # noqa: E402
from train_step import digits_cnn, story_gap  # noqa: E402


def measured(model, shape, classes, steps=3):
    """Peak of `steps` training steps (zero_grad() after each) over the bytes live before them (parameters and the
    batch), which is what Estimate.peak counts (the highest step's); and the first step's seconds."""
    x = gm.randn(*shape, device="cuda")
    y = gm.zeros(*((shape[0],) if classes else (shape[0], shape[2], shape[3])), dtype=gm.int64, device="cuda")
    opt = gm.optim.Adam(model.parameters(), lr=1e-3)
    gc.collect()
    gm.cuda.synchronize()
    gm.memory.reset_peak_memory_stats("cuda")
    base = gm.memory.memory_allocated("cuda")
    step_s = None
    for _ in range(steps):
        t = time.perf_counter()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        gm.cuda.synchronize()
        step_s = step_s or time.perf_counter() - t
    stats = gm.memory.memory_stats("cuda")
    workspace = stats["by_category"]["workspace"]["peak"], stats["at_peak"]["by_category"]["workspace"]
    return gm.memory.max_memory_allocated("cuda") - base, step_s, workspace


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--small", action="store_true", help="tiny shapes (a check of the script on the emulator)")
    args = p.parse_args(argv)
    if not gm.cuda.is_available():
        print("cuda_estimate_accuracy: no CUDA device; nothing to measure")
        return 0
    s = 4 if args.small else 1
    cases = [("digits CNN", lambda: digits_cnn(gnn, 32, 10), (256 // s, 1, 8, 8), True),
             ("story-000 / 2 + GAP", lambda: story_gap(gnn, 2 * s), (32 // s, 2, 32 if args.small else 96,
                                                                    32 if args.small else 96), True),
             ("UNet", lambda: UNet(3, 3, 32 // s, 3), (16 // s, 3, 128 // s, 128 // s), False)]
    results = {}
    # ws at peak: the workspace category's bytes at the moment of the peak, in the estimate and in the measured
    # steps (cuDNN's choice); ws peak: the category's own highest in the measured steps; counted: whether the
    # estimate asked cuDNN (Estimate.conv_workspace_counted)
    print(f"{'model':<22}{'estimate':>14}{'measured':>14}{'diff':>9}{'est s':>8}{'step s':>8}{'est ws@peak':>14}"
          f"{'ws@peak':>14}{'ws peak':>14}{'counted':>8}")
    for name, build, shape, classes in cases:
        gm.manual_seed(0)
        model = build().to("cuda")
        target = None if classes else gm.zeros(shape[0], shape[2], shape[3], dtype=gm.int64, device="meta")
        t = time.perf_counter()
        est = gm.memory.estimate(model, shape, loss_fn=F.cross_entropy, target=target, device="cuda")
        est_s = time.perf_counter() - t
        real, step_s, (ws_peak, ws_at) = measured(model, shape, classes)
        diff = (real - est.peak) / real
        est_ws = est.at_peak.get("workspace", 0)
        results[name] = {"estimate": est.peak, "measured": real, "relative_difference": diff,
                         "estimate_seconds": est_s, "step_seconds": step_s, "workspace_peak": ws_peak,
                         "workspace_at_peak": ws_at, "estimate_workspace_at_peak": est_ws,
                         "workspace_counted": est.conv_workspace_counted}
        print(f"{name:<22}{est.peak:14,d}{real:14,d}{100 * diff:8.2f}%{est_s:8.3f}{step_s:8.3f}{est_ws:14,d}"
              f"{ws_at:14,d}{ws_peak:14,d}{'yes' if est.conv_workspace_counted else 'no':>8}")
        del model
        gm.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
