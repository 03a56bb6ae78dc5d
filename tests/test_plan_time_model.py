"""plan() prices offload and fallback by the time model calibrated on the machine (issue 15 item 5): with
gm.memory.calibrate()'s figures cached (host_link, cpu_adam, disk) and the step's own time (plan(...,
step_seconds=)), each remedy's slowdown comes from its configuration's estimated bytes, and the order of the
candidates follows the bandwidth; without them the fixed factors stay, and the Plan says which priced it.
The cache here is a hand-written one under a temporary XDG_CACHE_HOME: these tests check the arithmetic and the
ordering, not this machine's speed."""
import json
import os

import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet.memory import calibration
from gpumemnet.memory import planner as _plan

ADAM_OFF = staticmethod(lambda ps: gm.optim.Adam(ps, offload="cpu"))


def _cache(tmp_path, monkeypatch, **rates):
    """A calibration cache holding exactly `rates` (the planner's step factors then keep their defaults)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = calibration.cache_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf8") as f:
        json.dump({"version": calibration.VERSION, "machine": {}, "rates": rates}, f)
    assert calibration.cached_rates() == rates


def _mlp(batch=1):
    gm.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256, device="meta"), nn.ReLU(), nn.Linear(256, 256, device="meta"),
                         nn.ReLU(), nn.Linear(256, 8, device="meta"))


def _by_formula(est, bw, adam, seconds, offload, base=1.0):
    """offload_cost's formula written out once more: the synchronous bytes and the CPU's Adam add to the step
    (base * seconds), the overlapped bytes only what backward (2/3 of it) does not cover."""
    step = base * seconds
    hidden = est.bytes_overlapped
    extra = (est.bytes_moved - hidden) / bw + max(0.0, hidden / bw - 2 / 3 * step)
    if offload:
        extra += est.trainable / adam
    return base * (1 + extra / step)


def test_offload_candidates_are_priced_from_their_estimates(tmp_path, monkeypatch):
    bw, adam, seconds = 2e8, 5e7, 4e-3
    _cache(tmp_path, monkeypatch, host_link=bw, cpu_adam=adam)
    m, kw = _mlp(), dict(batch_size=4, device="cuda", loss_fn=F.mse_loss, target=(4, 8))
    cands = [dict(offload_optimizer=True), dict(save_on_cpu=True), dict(offload_optimizer=True, save_on_cpu=True),
             dict(offload_optimizer=True, accumulation_steps=2)]
    p = gm.memory.plan(m, (64,), budget=1 << 30, candidates=cands, step_seconds=seconds, **kw)
    assert p.priced_by == _plan.PRICED_MEASURED and "priced by: calibrated time model" in repr(p)
    times = {}
    for c, _, t in p.considered:
        est = gm.memory.estimate(m, (64,), optimizer=ADAM_OFF if c.get("offload_optimizer") else None,
                                 save_on_cpu=bool(c.get("save_on_cpu")),
                                 accumulation_steps=c["accumulation_steps"], **kw)
        assert est.bytes_moved > 0
        base = _plan.HALVING_COST ** (c["accumulation_steps"] - 1)
        want = _by_formula(est, bw, adam, seconds, c.get("offload_optimizer"), base)
        assert t == pytest.approx(want, rel=1e-12), c
        assert want != pytest.approx(_plan.step_cost(**c))  # not the fixed factors
        times[repr(sorted(c.items(), key=str))] = t
    assert len(times) == len(p.considered) >= 3
    # a candidate left unestimated could not have been faster: its on-device part alone is slower than the choice
    left = [c for c in cands if not any(all(d.get(k) == v for k, v in c.items()) for d, _, _ in p.considered)]
    assert all(_plan.HALVING_COST ** (c.get("accumulation_steps", 1) - 1) >= p.predicted_time for c in left)
    assert p.predicted_time == pytest.approx(min(times.values()), rel=1e-12)
    assert p.remedy_time == pytest.approx(p.predicted_time / (_plan.HALVING_COST if p.accumulation_steps > 1
                                                              else 1.0))
    assert f"remedies expected {p.remedy_time:.2f}x the step's time" in repr(p)


def test_the_link_decides_between_activations_and_optimizer_on_the_host(tmp_path, monkeypatch):
    """A batch whose saved activations outweigh the parameters: over a slow link moving the optimizer is the
    cheaper remedy (fewer bytes), over a fast link with a slow CPU Adam saving activations on the host is; the
    fixed factors always put activations first."""
    m, kw = _mlp(), dict(batch_size=512, device="cuda", loss_fn=F.mse_loss, target=(512, 8))
    cands = [dict(save_on_cpu=True), dict(offload_optimizer=True)]
    save = gm.memory.estimate(m, (64,), save_on_cpu=True, **kw)
    off = gm.memory.estimate(m, (64,), optimizer=ADAM_OFF, **kw)
    assert save.bytes_moved > 2 * off.bytes_moved  # the case really is activation-heavy
    fixed = gm.memory.plan(m, (64,), budget=1 << 30, candidates=cands, **kw)
    assert fixed.save_on_cpu and not fixed.offload_optimizer
    assert fixed.predicted_time == pytest.approx(_plan.SAVE_ON_CPU_COST)
    assert fixed.priced_by == _plan.PRICED_FIXED and "not calibrated" in repr(fixed)
    seconds = 1e-3
    chosen = {}
    for name, bw, adam in (("slow link", 1e8, 1e12), ("fast link", 1e12, 1e7)):
        _cache(tmp_path / name, monkeypatch, host_link=bw, cpu_adam=adam)
        p = gm.memory.plan(m, (64,), budget=1 << 30, candidates=cands, step_seconds=seconds, **kw)
        t_save, t_off = _by_formula(save, bw, adam, seconds, False), _by_formula(off, bw, adam, seconds, True)
        assert p.predicted_time == pytest.approx(min(t_save, t_off), rel=1e-12)
        chosen[name] = "save_on_cpu" if p.save_on_cpu else "offload_optimizer"
        assert chosen[name] == ("save_on_cpu" if t_save < t_off else "offload_optimizer")
    assert chosen == {"slow link": "offload_optimizer", "fast link": "save_on_cpu"}


def _cnn():
    gm.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, device="meta"), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1, device="meta"), nn.ReLU(), nn.Flatten(),
                         nn.Linear(16 * 32 * 32, 10, device="meta"))


def test_the_cpu_fallback_beats_accumulation_only_over_a_fast_disk(tmp_path, monkeypatch):
    """On the CPU (fallback: a mapped file, priced at the disk's bandwidth) a budget that a two-micro-batch step
    fits: under the fixed factors accumulation (1.1) comes before the fallback (2.0); with a disk fast against the
    few bytes past the budget, the fallback costs less than the accumulation, and over a slow one more."""
    m, kw = _cnn(), dict(batch_size=64, device="cpu", loss_fn=F.mse_loss, target=(64, 10))
    cands = [dict(), dict(accumulation_steps=2), dict(fallback=True)]
    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not calibrated"))
    gm.memory.set_fallback("cpu", str(spill), ("activation", "optimizer"))
    MiB = 1 << 20

    def fits(budget):
        return [_plan._fit(budget, m, (3, 32, 32), fallback=bool(c.get("fallback")), **kw,
                           **_plan._estimate_kwargs(c, None)) for c in cands]
    # a budget the whole batch misses, two micro-batches fit, and the fallback meets with some bytes in the file
    # (searched: the segments' layout under a limit does not follow the allocated bytes smoothly)
    try:
        two = gm.memory.estimate(m, (3, 32, 32), accumulation_steps=2, **kw)
        budget = next(b for b in range(two.total, two.total + 16 * MiB, MiB // 4)
                      if [r[2] for r in fits(b)] == [False, True, True] and fits(b)[2][0].fallback_peak > 0)
        fixed = gm.memory.plan(m, (3, 32, 32), budget=budget, candidates=cands, step_seconds=0.01, **kw)
        assert fixed.accumulation_steps == 2 and not fixed.fallback  # no cache: the fixed factors
        assert fixed.priced_by == _plan.PRICED_FIXED
        seconds, got = 0.01, {}
        for name, disk in (("fast disk", 1e12), ("slow disk", 1e7)):
            _cache(tmp_path / name, monkeypatch, disk=disk)
            p = gm.memory.plan(m, (3, 32, 32), budget=budget, candidates=cands, step_seconds=seconds, **kw)
            fell = [(c, t) for c, _, t in p.considered if c.get("fallback")]
            assert len(fell) == 1
            est = gm.memory.estimate(m, (3, 32, 32), limit=budget, **kw)
            assert est.fallback_peak > 0
            want = 1 + _plan.FALLBACK_ACCESSES * est.fallback_peak / disk / seconds
            assert fell[0][1] == pytest.approx(want, rel=1e-12)
            got[name] = p.fallback
            assert p.fallback == (want < _plan.HALVING_COST)
            if p.fallback:
                assert p.predicted_time == pytest.approx(want) and p.remedy_time == pytest.approx(want)
                assert p.predicted_fallback_peak == est.fallback_peak and "priced by: calibrated" in repr(p)
        assert got == {"fast disk": True, "slow disk": False}
    finally:
        gm.memory.set_fallback("cpu", None)


def test_missing_figures_keep_the_fixed_factors(tmp_path, monkeypatch):
    _cache(tmp_path, monkeypatch, cpu_adam=1e9, disk=1e9)  # no host_link: a calibration without a CUDA device
    assert _plan.time_model("cuda", 0.1) is None
    assert _plan.time_model("cuda", 0.1, offload=False, fallback=False) == {"step_seconds": 0.1}
    assert _plan.time_model("cpu", None) is None  # no step time
    assert _plan.time_model("cpu", 0.1, offload=False) == {"step_seconds": 0.1, "fallback_bandwidth": 1e9}
    assert _plan.time_model("meta", 0.1) is None
    m, kw = _mlp(), dict(batch_size=1, device="cuda")
    p = gm.memory.plan(m, (64,), budget=1 << 30, candidates=[dict(offload_optimizer=True)], step_seconds=0.1, **kw)
    assert p.predicted_time == pytest.approx(_plan.OFFLOAD_OPTIMIZER_COST) and p.priced_by == _plan.PRICED_FIXED
    assert "run gm.memory.calibrate()" in repr(p)
    for bad in (0, -1.0, True, "1"):
        with pytest.raises(ValueError, match="step_seconds must be a positive number"):
            gm.memory.plan(m, (64,), budget=1 << 30, step_seconds=bad, **kw)
    # a plan without remedies is unchanged in its text
    p = gm.memory.plan(m, (64,), budget=1 << 30, **kw)
    assert p.remedy_time == 1.0 and "remedies expected" not in repr(p)


def test_remedy_cost_prices_a_cuda_fallback_by_the_link():
    class E:
        bytes_moved, bytes_overlapped, trainable, fallback_peak = 0, 0, 0, 3e9
    timing = dict(step_seconds=2.0, fallback_bandwidth=1e9)
    assert _plan.remedy_cost(fallback=True, estimate=E, timing=timing) == pytest.approx(1 + 2 * 3e9 / 1e9 / 2.0)
    # a slower configuration on the device pays the same seconds for the fallback on top of its own time (the
    # fixed factor would multiply: 1.1 * 2.0)
    assert _plan.step_cost(accumulation_steps=2, fallback=True, estimate=E, timing=timing) == pytest.approx(
        _plan.HALVING_COST + 2 * 3e9 / 1e9 / 2.0)
    assert _plan.remedy_cost(fallback=True) == _plan.FALLBACK_COST
