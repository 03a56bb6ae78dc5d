"""The conformance suite's own criterion and worker protocol can fail: dropin_harness.compare rejects what issue
12's rule rejects and accepts what it accepts, and a worker that dies is reported, not waited for."""
import numpy as np

import dropin_harness
from dropin_harness import compare, err
from dropin_models import KNOWN_GAPS, SPECS, known_gap


def test_err_is_the_largest_error_relative_to_the_scale():
    assert err([1.0, 100.0], [1.0, 100.0]) == 0
    assert err([1.5, 100.0], [1.0, 100.0]) == 0.5 / 100
    assert err([np.nan, 1.0], [1.0, 1.0]) == np.inf
    assert err([1.0], [1.0, 2.0]) == np.inf


def test_compare_applies_both_rules():
    rng = np.random.default_rng(0)
    t64 = rng.standard_normal(100)
    t32 = t64 + 1e-2 * rng.standard_normal(100)      # PyTorch float32 drifted (a chaotic few steps)
    close = {"a": t32 * (1 + 1e-4)}                    # within 1e-3 of PyTorch float32
    as_far = {"a": t64 - 1e-2 * rng.standard_normal(100)}   # as far from float64 as PyTorch float32 is
    too_far = {"a": t64 + 0.2 * rng.standard_normal(100)}
    assert compare(close, {"a": t32}, {"a": t64}) == []
    assert compare(as_far, {"a": t32}, {"a": t64}) == []
    assert [k for k, _ in compare(too_far, {"a": t32}, {"a": t64})] == ["a"]
    assert [k for k, _ in compare(as_far, {"a": t32})] == ["a"]        # no float64 run: 1e-3 only
    assert [k for k, _ in compare({}, {"a": t32})] == ["a"]            # a missing array fails
    assert [k for k, _ in compare({"a": t32[:3]}, {"a": t32})] == ["a"]
    assert [k for k, _ in compare(close, {"a": t32}, {"a": t64}, rtol=0.0)] == []   # the float64 rule alone


def test_the_table_and_the_gaps_name_real_builders():
    for key in KNOWN_GAPS:
        name = key.split(":")[0]
        assert name == "*" or name in SPECS or key.endswith(":script"), key
    assert all(s.tier in ("train", "forward", "huge") for s in SPECS.values())
    assert known_gap("no_such_builder", "train") == KNOWN_GAPS.get("*")


def test_a_dead_worker_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(dropin_harness, "WORKER", str(tmp_path / "dies.py"))
    (tmp_path / "dies.py").write_text("import sys; sys.stdin.readline(); sys.exit(3)\n")
    w = dropin_harness.Worker("gm", str(tmp_path))
    ans = w.request(task="train", model="resnet18")
    assert not ans["ok"] and "died (exit status 3)" in ans["error"]
    (tmp_path / "dies.py").write_text("import time; time.sleep(30)\n")
    ans = w.request(timeout=1, task="train", model="resnet18")
    assert not ans["ok"] and "took more than 1 s" in ans["error"]
    w.close()


def test_float64_diagnosis_tells_rounding_from_a_bug():
    rng = np.random.default_rng(1)
    ref = {"grad/w": rng.standard_normal(10), "grad/zero": 1e-17 * rng.standard_normal(3), "eval/x": np.ones(2)}
    noise = {"grad/w": ref["grad/w"] * (1 + 1e-12), "grad/zero": 1e-17 * rng.standard_normal(3),
             "eval/x": np.ones(2) * (1 + 1e-5)}   # after the steps: amplified rounding, not judged
    assert dropin_harness.float64_diagnosis(noise, ref)[0]
    wrong = dict(noise, **{"grad/w": ref["grad/w"] + 1e-3})
    agrees, why = dropin_harness.float64_diagnosis(wrong, ref)
    assert not agrees and "a bug" in why
