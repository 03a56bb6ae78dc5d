"""plan() with the device's fallback as a choice (issue 15 item 5: "adds offload and fallback to its choices"): on a
device with gm.memory.set_fallback set, a budget that no on-device configuration fits is met by the blocks past it
going to the fallback; the plan says so, prices it (FALLBACK_COST) and predicts the fallback's peak, and the real
steps under gm.memory.set_limit(device, budget) reach exactly that split. On the CPU, whose fallback is a mapped
file in a directory; the real run is a fresh process (an allocator with no history, as tests/test_fallback.py's)."""
import json
import os
import subprocess
import sys

import pytest

import gpumemnet as gm
import gpumemnet.nn.functional as F
from gpumemnet.memory import planner as _plan

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


def _worker(directory):
    """In a fresh process: plan the fallback_step model (a 12 MiB Linear: Adam's moments 12 MiB each) for a budget
    12 MiB under its step's reserved peak, then train it by the plan under that budget as the CPU's limit."""
    sys.path.insert(0, HERE)
    from fallback_step import build
    r_pre = gm.memory.memory_reserved("cpu")
    model, x, y = build("cpu")
    kw = dict(loss_fn=F.mse_loss, batch_size=4, target=(4, 10), device="cpu")
    free = gm.memory.estimate(model, (3, 16, 16), **kw)
    budget = free.peak_reserved - 12 * MiB
    out = {"budget": budget}
    try:
        gm.memory.plan(model, (3, 16, 16), budget=budget, **kw)
    except ValueError as e:
        out["without"] = str(e)
    gm.memory.set_fallback("cpu", directory, ("optimizer",))
    p = gm.memory.plan(model, (3, 16, 16), budget=budget, **kw)
    out.update(fallback=p.fallback, time=p.predicted_time, peak=p.predicted_peak,
               fallback_peak=p.predicted_fallback_peak, text=repr(p), k=p.accumulation_steps)
    opt = p.optimizer(model.parameters(), lr=1e-2)
    gm.memory.set_limit("cpu", r_pre + budget)  # the budget holds the model, its input and the step
    gm.memory.reset_peak_memory_stats("cpu")
    losses = [p.step(x, y, opt) for _ in range(3)]
    s = gm.memory.memory_stats("cpu")
    out.update(losses=losses, file_peak=s["by_location"].get("file", {}).get("allocated", {}).get("peak", 0),
               reserved_peak=s["reserved"]["peak"], limit=s["limit"])
    return out


def test_plan_takes_the_fallback_when_nothing_fits_on_the_device(tmp_path):
    import gpumemnet
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(gpumemnet.__file__))] +
                                                      os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    r = subprocess.run([sys.executable, "-W", "ignore", os.path.abspath(__file__), str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "no configuration fits" in out["without"]  # without the fallback nothing fits
    assert out["fallback"] and out["time"] >= _plan.FALLBACK_COST
    assert "fallback=True" in out["text"] and out["fallback_peak"] > 0
    assert out["peak"] <= out["budget"]
    # the real steps ran under the limit, the state that did not fit in the file, as predicted
    assert out["file_peak"] == out["fallback_peak"]
    assert out["reserved_peak"] <= out["limit"]
    assert len(out["losses"]) == 3 and all(v == v for v in out["losses"])  # ran; the values: test_fallback.py
    assert os.listdir(tmp_path) == []  # the spill files were unlinked at once


def test_fallback_candidates_and_their_checks(tmp_path):
    sys.path.insert(0, HERE)
    from fallback_step import build
    model, _, _ = build("meta")
    grid = _plan._grid(model, 4)
    assert not any(c.get("fallback") for c in grid)
    fell = [c for c in _plan._grid(model, 4, fallback=True) if c.get("fallback")]
    assert len(fell) == len(grid)  # each on-device configuration once more, with the fallback
    assert _plan.step_cost(fallback=True) == pytest.approx(_plan.FALLBACK_COST)
    assert _plan.FALLBACK_COST > _plan.OFFLOAD_OPTIMIZER_COST  # after offload (the module's docstring says why)
    assert "device's fallback" in _plan._describe(dict(fell[0]))
    with pytest.raises(ValueError, match="needs a fallback set on cpu"):
        gm.memory.plan(model, (3, 16, 16), batch_size=4, budget=1 << 30, candidates=[dict(fallback=True)])


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1])))
