"""Training steps of a small conv net whose convolutions choose among made-up cuDNN candidates (_C._conv_algo_fake)
under a limit, in a fresh process (an allocator and a table of choices with no history, as an estimate assumes):
run by tests/test_cuda_estimate_workspace.py, printing its figures as one JSON line.

    python conv_workspace_step.py MODE LIMIT SIZE...
MODE cuda: the steps on cuda:0 under gm.memory.set_limit("cuda", LIMIT) set before anything is on the device;
     estimate: gm.memory.estimate(device="cuda", limit=LIMIT) of the same model and batch.
SIZE...: the candidates' workspace bytes, best first (the last should be 0, which always fits).
Figures: peak and first_step_peak (bytes above the parameters and input, as Estimate.peak), inference_peak (a
forward under no_grad in eval mode after the steps, their state released, as estimate() runs it: the table of
choices holds the steps' choices, some made where the workspace was scarcer), and how many workspace blocks of
each candidate's size were taken (the device's or meta's allocation history)."""
import gc
import json
import sys

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C

STEPS = 8  # estimate() runs at most 8 steps (estimator.MAX_STEPS); later steps repeat the last


def build():
    gm.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, stride=2, padding=1),
                          nn.ReLU(), nn.Flatten(), nn.Linear(16 * 16 * 16, 10))
    return model, gm.randn(16, 3, 32, 32), gm.zeros(16, dtype=gm.int64)


def taken(dev, sizes):
    """{size: how many workspace blocks of that size (rounded as the allocator rounds) were allocated}."""
    rounded = {-(-s // 512) * 512: s for s in sizes if s}
    counts = dict.fromkeys(rounded.values(), 0)
    for e in gm.memory.history(dev):
        if e["category"] == "workspace" and e["delta"] > 0 and e["delta"] in rounded:
            counts[rounded[e["delta"]]] += 1
    return {str(s): n for s, n in counts.items()}


def run(mode, limit, sizes):
    _C._conv_algo_fake(sizes)
    model, x, y = build()
    if mode == "estimate":
        gm.memory.record_history(True, device="meta")
        est = gm.memory.estimate(model, tuple(x.shape), loss_fn=F.cross_entropy, target=y, device="cuda",
                                 limit=limit)
        return {"peak": est.peak, "first_step_peak": est.first_step_peak, "inference_peak": est.inference_peak,
                "steps": est.steps, "counted": est.conv_workspace_counted, "taken": taken("meta", sizes)}
    gm.memory.set_limit("cuda", limit)
    gm.memory.record_history(True, device="cuda")
    model, x, y = model.to("cuda"), x.to("cuda"), y.to("cuda")
    opt = gm.optim.Adam(model.parameters())
    base = gm.memory.memory_allocated("cuda")
    first = None
    for _ in range(STEPS):
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        first = first if first is not None else gm.memory.max_memory_allocated("cuda") - base
    peak = gm.memory.max_memory_allocated("cuda") - base
    del opt
    for p in model.parameters():
        p.grad = None
    gc.collect()
    gm.memory.empty_cache("cuda")
    model.eval()
    gm.memory.reset_peak_memory_stats("cuda")
    with gm.no_grad():
        model(x)
    inference = gm.memory.max_memory_allocated("cuda") - base
    return {"peak": peak, "first_step_peak": first, "inference_peak": inference, "taken": taken("cuda", sizes)}


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]])))
