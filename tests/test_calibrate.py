"""gm.memory.calibrate() (issue 15, item 5, the time model's measurements): measured once, cached as JSON under the
user's cache directory keyed by machine, read back without measuring; set_fallback's slowdown reads it."""
import json
import os

import gpumemnet as gm
from gpumemnet.memory import calibration, policy


def test_calibrate_measures_once_and_caches_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert calibration.cached_rates() is None
    rates = gm.memory.calibrate(nbytes=8 << 20)
    for key in ("host_memory", "cpu_adam", "per_op", "disk"):
        assert rates[key] > 0, key
    assert rates["per_op"] < 1.0  # seconds per small op
    path = calibration.cache_path()
    assert os.path.dirname(path) == str(tmp_path / "gpumemnet")
    doc = json.load(open(path))
    assert doc["version"] == calibration.VERSION and doc["rates"] == rates
    assert doc["machine"]["host"] in os.path.basename(path)
    assert [f for f in os.listdir(tmp_path / "gpumemnet") if not f.endswith(".json")] == []  # no probe left
    # the second call reads the cache: change it on disk and see the change come back
    doc["rates"]["disk"] = 1e9
    json.dump(doc, open(path, "w"))
    assert gm.memory.calibrate()["disk"] == 1e9
    assert gm.memory.calibrate(force=True, nbytes=8 << 20)["disk"] != 1e9
    # the fallback's expected slowdown comes from the cached figures
    doc = json.load(open(path))
    doc["rates"].update(host_memory=30e9, disk=3e9, host_link=20e9, device_memory=2e12)
    json.dump(doc, open(path, "w"))
    assert policy.slowdown("cpu", "file") == 10.0
    assert policy.slowdown("cuda:0", "host") == 100.0


def test_without_a_cache_the_documented_defaults_are_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    r = policy.DEFAULT_RATES
    assert policy.slowdown("meta", "host") == r["device_memory"] / r["host_link"]
    assert policy.slowdown("cpu", "file") == r["host_memory"] / r["disk"]


def test_the_planner_uses_the_measured_factors(tmp_path, monkeypatch):
    from gpumemnet.memory import planner
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert planner.cost_factors() == (planner.CHECKPOINT_COST, planner.HALVING_COST)
    assert planner.step_cost(4, 2) == planner.HALVING_COST ** 2 * planner.CHECKPOINT_COST
    rates = gm.memory.calibrate(nbytes=8 << 20)
    assert 1.0 <= rates["checkpoint_cost"] <= 2.0 and 1.0 <= rates["halving_cost"] <= 2.0
    path = calibration.cache_path()
    doc = json.load(open(path))
    doc["rates"].update(checkpoint_cost=1.5, halving_cost=1.25)
    json.dump(doc, open(path, "w"))
    assert planner.cost_factors() == (1.5, 1.25)
    assert planner.step_cost(4, 2) == 1.25 ** 2 * 1.5


def test_a_cpu_plan_prices_autocast_by_its_measured_cost(tmp_path, monkeypatch):
    """On the CPU bfloat16 autocast may cost time (the README's figures: 1.2-2x our own fp32 step): calibrate()
    times it, and plan() for the CPU then picks fp32 where both fit; a plan for a GPU keeps the default factor."""
    from gpumemnet.memory import planner
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert planner.step_cost(autocast=gm.bfloat16) == planner.AUTOCAST_COST  # not calibrated: the default
    rates = gm.memory.calibrate(nbytes=8 << 20)
    assert 0.5 <= rates["cpu_autocast_cost"] <= 3.0
    path = calibration.cache_path()
    doc = json.load(open(path))
    doc["rates"].update(cpu_autocast_cost=1.8, checkpoint_cost=1.3, halving_cost=1.1)
    json.dump(doc, open(path, "w"))
    assert planner.step_cost(autocast=gm.bfloat16) == 1.8
    assert planner.step_cost(autocast=gm.bfloat16, device="cuda") == planner.AUTOCAST_COST
    model = gm.nn.Sequential(gm.nn.Conv2d(3, 8, 3, padding=1), gm.nn.ReLU(), gm.nn.Flatten(),
                             gm.nn.Linear(8 * 8 * 8, 10))
    roomy = gm.memory.plan(model, (3, 8, 8), batch_size=8, budget=1 << 30, device="cpu",
                           candidates=[dict(autocast=gm.bfloat16), dict(autocast=None)])
    assert roomy.autocast is None and roomy.predicted_time == 1.0
    doc["rates"].update(cpu_autocast_cost=0.7)  # a CPU where bfloat16 pays
    json.dump(doc, open(path, "w"))
    faster = gm.memory.plan(model, (3, 8, 8), batch_size=8, budget=1 << 30, device="cpu",
                            candidates=[dict(autocast=gm.bfloat16), dict(autocast=None)])
    assert faster.autocast == gm.bfloat16 and faster.predicted_time == 0.7
