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
# Several steps: the state made in step 1 must leave the room step 2's backward needs again (allocator.c's
# state_first), or step 2 fails in a category that may not fall back.
STEPS = int(os.environ.get("GPUMEMNET_TEST_STEPS", "3"))
# GPUMEMNET_TEST_BATCH=N: a batch whose backward needs more room than the state (1024: 15 MiB allocated besides the
# 12 MiB of parameters, 54 MiB reserved), under a limit of that room + 1 MiB (70 MiB reserved): segment slack leaves
# room for one of Adam's two 12 MiB moments, not both.
BATCH = int(os.environ.get("GPUMEMNET_TEST_BATCH", "0"))


def build(dev, batch=4):
    gm.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 16 * 16, 1536),
                          nn.ReLU(), nn.Linear(1536, 10))
    x, y = gm.randn(batch, 3, 16, 16), gm.randn(batch, 10)
    return model.to(dev), x.to(dev), y.to(dev)


def _backward_room(model, x, y, dev):
    """The bytes one forward + backward takes beyond what is held before it (measured once, no step)."""
    base = gm.memory.memory_allocated(dev)
    gm.memory.reset_peak_memory_stats(dev)
    F.mse_loss(model(x), y).backward()
    model.zero_grad()
    return gm.memory.max_memory_allocated(dev) - base


def run(dev, location):
    mode = os.environ.get("GPUMEMNET_TEST_ALLOCATOR", "caching")
    gm.memory.set_allocator(mode, device=dev) if mode != "caching" else None
    model, x, y = build(dev, BATCH or 4)
    opt = gm.optim.Adam(model.parameters(), lr=1e-2)
    params = sum(p.numel() * 4 for p in model.parameters())
    room = _backward_room(model, x, y, dev) + MiB if BATCH else 2 * params + 2 * MiB
    if location != "none":
        gm.memory.empty_cache(dev)
        # room for the gradients and backward's temporaries, not for all of Adam's state
        gm.memory.set_limit(dev, gm.memory.memory_reserved(dev) + room)
        gm.memory.set_fallback(dev, location, ("optimizer",))
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    s = gm.memory.memory_stats(dev)
    out = {"steps": STEPS, "by_location": {k: {"allocated": v["allocated"], "reserved": v["reserved"],
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
