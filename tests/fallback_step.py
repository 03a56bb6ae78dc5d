"""A training step whose Adam state does not fit under a limit, with a fallback set: run in a fresh process by
tests/test_fallback.py and tests/test_cuda_fallback.py (an allocator with no history, so that the devices compared
make the same decisions from the same state), printing its figures as one JSON line.

    python fallback_step.py DEVICE LOCATION [TARGET]
DEVICE cpu, cuda or meta; LOCATION a directory or "host" (or "none": no fallback, no limit: the reference run);
TARGET, for meta, the device it stands for (cpu or cuda: the CUDA kernels' extra scratch).
GPUMEMNET_TEST_ALLOCATOR=expandable runs it on expandable segments (gm.memory.set_allocator)."""
import json
import os
import sys

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet import _C

MiB = 1 << 20
# One step: a fallback decides block by block when the device is full, so the state made in step 1 takes the room
# backward's temporaries left, and step 2's backward would not find it again (what gm.memory.plan is for).
STEPS = 1


def build(dev):
    gm.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 16 * 16, 1536),
                          nn.ReLU(), nn.Linear(1536, 10))
    x, y = gm.randn(4, 3, 16, 16), gm.randn(4, 10)
    return model.to(dev), x.to(dev), y.to(dev)


def run(dev, location):
    mode = os.environ.get("GPUMEMNET_TEST_ALLOCATOR", "caching")
    gm.memory.set_allocator(mode, device=dev) if mode != "caching" else None
    model, x, y = build(dev)
    opt = gm.optim.Adam(model.parameters(), lr=1e-2)
    params = sum(p.numel() * 4 for p in model.parameters())
    if location != "none":
        gm.memory.empty_cache(dev)
        # room for the gradients and backward's temporaries (as large as the big weight), not for all of Adam's state
        gm.memory.set_limit(dev, gm.memory.memory_reserved(dev) + 2 * params + 2 * MiB)
        gm.memory.set_fallback(dev, location, ("optimizer",))
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    s = gm.memory.memory_stats(dev)
    out = {"by_location": {k: {"allocated": v["allocated"], "reserved": v["reserved"],
                               "optimizer": v["by_category"]["optimizer"]}
                           for k, v in s["by_location"].items()},
           "limit": s["limit"], "reserved_peak": s["reserved"]["peak"], "params": params,
           "allocated_peak": s["allocated"]["peak"], "allocator": s["allocator"]}
    if dev != "meta":
        out["values"] = [p.detach().cpu().numpy().ravel().tolist()[:64] for p in model.parameters()]
        out["sums"] = [float(p.detach().cpu().numpy().astype("float64").sum()) for p in model.parameters()]
    return out


if __name__ == "__main__":
    dev, location = sys.argv[1], sys.argv[2]
    if dev == "meta" and len(sys.argv) > 3 and sys.argv[3] == "cuda":
        from gpumemnet.memory.estimator import _meta_target
        _C._set_meta_target(*_meta_target("cuda"))
    print(json.dumps(run(dev, location)))
