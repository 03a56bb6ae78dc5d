"""benchmarks/_worker.py's conv micro-benchmark: the three passes take turns at the head of each round, after the
ceiling's untimed settle sleep, so that no pass is always the one timed first after it (that position cost the
same code 10-15 %; see conv() there). The sgemm ceiling stays last, followed by its sleep."""
import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _worker():
    path = os.path.join(HERE, "..", "benchmarks", "_worker.py")
    spec = importlib.util.spec_from_file_location("bench_worker_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _calls(rotate, repeat=3):
    w = _worker()
    log = []
    fns = {name: (lambda n=name: log.append(n)) for name in ("fwd", "bwd_data", "bwd_weight", "sgemm")}
    best = w._interleaved(fns, repeat, settle={"sgemm": 0.0}, rotate=rotate)
    assert set(best) == set(fns) and all(v >= 0 for v in best.values())
    return log[4:]  # after the warm-up calls, in fns order


def test_passes_take_turns_at_the_head():
    log = _calls(("fwd", "bwd_data", "bwd_weight"))
    rounds = [log[i:i + 4] for i in range(0, len(log), 4)]
    assert rounds == [["fwd", "bwd_data", "bwd_weight", "sgemm"],
                      ["bwd_data", "bwd_weight", "fwd", "sgemm"],
                      ["bwd_weight", "fwd", "bwd_data", "sgemm"]]


def test_without_rotate_the_order_is_fixed():
    log = _calls(())
    assert log == ["fwd", "bwd_data", "bwd_weight", "sgemm"] * 3


def test_conv_task_rotates_its_passes():
    """The conv task itself asks for the rotation (a fixed order put the forward first after the sleep)."""
    src = open(os.path.join(HERE, "..", "benchmarks", "_worker.py")).read()
    body = src[src.index("def conv(req)"):src.index("TASKS = ")]
    assert 'rotate=("fwd", "bwd_data", "bwd_weight")' in body


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
