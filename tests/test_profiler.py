"""gm.profiler (python/gpumemnet/profiler/) against torch.profiler: schedules and the steps each cycle records,
on_trace_ready's calls, nesting (self = total - children) on a sleep workload, the table's columns, the Chrome
trace, tensorboard_trace_handler's files, FLOPs, and memory columns equal to the allocator's byte counts.
Times are only checked coarsely (a range that sleeps lasts at least the sleep)."""
import gzip
import json
import os
import re
import time
import warnings

import pytest

import gpumemnet as gm
from cuda_util import device  # noqa: F401  (device is a fixture)
from gpumemnet import _C
from gpumemnet.profiler import ProfilerAction, ProfilerActivity, autograd_profiler, profile, record_function, schedule

torch = pytest.importorskip("torch")

SCHEDULES = [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=1, active=1, repeat=2),
             dict(wait=2, warmup=1, active=3, repeat=1, skip_first=2), dict(wait=1, warmup=2, active=1, repeat=3),
             dict(wait=3, warmup=1, active=2, skip_first=1, skip_first_wait=1),
             dict(wait=0, warmup=0, active=1), dict(wait=1, warmup=0, active=3, repeat=2)]


@pytest.mark.parametrize("kw", SCHEDULES, ids=[str(k) for k in SCHEDULES])
def test_schedule_actions_match_torch(kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warmup=0 warns in both
        ours, theirs = schedule(**kw), torch.profiler.schedule(**kw)
    assert [ours(s).name for s in range(40)] == [theirs(s).name for s in range(40)]


def test_schedule_refusals_and_warning():
    for lib in (gm, torch):
        with pytest.raises(AssertionError, match=r"active=0 \(need > 0\)"):
            lib.profiler.schedule(wait=1, warmup=1, active=0)
        with pytest.raises(AssertionError, match=r"wait=-1"):
            lib.profiler.schedule(wait=-1, warmup=1, active=1)
        with pytest.raises(AssertionError, match=r"Step must be non-negative. Got -1"):
            lib.profiler.schedule(wait=1, warmup=1, active=1)(-1)
        with pytest.warns(UserWarning, match="won't be using warmup"):
            lib.profiler.schedule(wait=1, warmup=0, active=1)


def test_enums_match_torch():
    assert [a.name for a in ProfilerAction] == [a.name for a in torch.profiler.ProfilerAction]
    assert [a.value for a in ProfilerAction] == [a.value for a in torch.profiler.ProfilerAction]
    for name in ("CPU", "CUDA"):
        assert int(getattr(ProfilerActivity, name)) == int(getattr(torch.profiler.ProfilerActivity, name))
    assert ProfilerActivity.CPU in gm.profiler.supported_activities()


def _run_steps(lib, steps, sched, quiet=True, **kw):
    """A loop of `steps` steps, each with a record_function("work<i>"); what each on_trace_ready call saw."""
    seen = []

    def ready(prof):
        names = sorted({e.name for e in prof.events() if e.name.startswith(("work", "ProfilerStep"))})
        seen.append((prof.step_num, names))

    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU], schedule=sched,
                                  on_trace_ready=ready, **kw) as p:
            for i in range(steps):
                with lib.profiler.record_function(f"work{i}"):
                    lib.ones(2) * 2
                p.step()
    return seen, p


@pytest.mark.parametrize("kw", SCHEDULES[:5], ids=[str(k) for k in SCHEDULES[:5]])
def test_cycles_record_the_steps_torch_records(kw):
    mine, _ = _run_steps(gm, 12, schedule(**kw))
    theirs, _ = _run_steps(torch, 12, torch.profiler.schedule(**kw))
    assert mine == theirs
    assert mine  # a cycle was handed over


def test_a_user_schedule_with_incorrect_transitions_warns_as_torch():
    A = {lib: lib.profiler.ProfilerAction for lib in (gm, torch)}
    plan = ["WARMUP", "NONE", "RECORD", "NONE", "RECORD", "WARMUP", "RECORD_AND_SAVE", "NONE"]
    results = []
    for lib in (gm, torch):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            seen, _ = _run_steps(lib, len(plan), lambda s, lib=lib: getattr(A[lib], plan[min(s, len(plan) - 1)]),
                                 quiet=False)
        results.append((seen, sorted(str(x.message) for x in w if "Incorrect schedule" in str(x.message))))
    assert results[0] == results[1]
    assert results[0][1]


def test_without_schedule_records_everything_and_calls_ready_once():
    for lib in (gm, torch):
        seen, p = _run_steps(lib, 3, None)
        assert seen == [(3, ["work0", "work1", "work2"])], lib.__name__  # no ProfilerStep ranges without one
        assert p.step_num == 3


def test_results_before_start_are_refused():
    for lib in (gm, torch):
        p = lib.profiler.profile()
        for call in (p.events, p.key_averages, lambda: p.export_chrome_trace("/nonexistent/x.json")):
            with pytest.raises(AssertionError, match="must be initialized"):
                call()


def test_activity_refusals():
    for lib in (gm, torch):
        with pytest.raises(AssertionError, match="No valid profiler activities"):
            lib.profiler.profile(activities=[])
        with pytest.raises(TypeError, match="Expected ProfilerActivity or dict"):
            lib.profiler.profile(activities=["cpu"])


def _sleep_workload():
    with profile() as p:
        with record_function("outer"):
            time.sleep(0.02)
            with record_function("inner"):
                time.sleep(0.03)
            with record_function("inner"):
                time.sleep(0.01)
    return p


def test_nesting_self_and_total_are_consistent():
    p = _sleep_workload()
    ev = {e.name: e for e in p.events() if e.name == "outer"}
    outer = ev["outer"]
    inners = [e for e in p.events() if e.name == "inner"]
    assert [c.name for c in outer.cpu_children] == ["inner", "inner"]
    assert all(e.cpu_parent is outer for e in inners)
    assert outer.cpu_time_total >= 60e3 and inners[0].cpu_time_total >= 30e3 and inners[1].cpu_time_total >= 10e3
    assert outer.self_cpu_time_total == pytest.approx(outer.cpu_time_total - sum(e.cpu_time_total for e in inners))
    assert outer.self_cpu_time_total >= 20e3
    for e in inners:  # children lie inside their parent
        assert outer.time_range.start <= e.time_range.start <= e.time_range.end <= outer.time_range.end
    avg = {a.key: a for a in p.key_averages()}
    assert avg["inner"].count == 2
    assert avg["inner"].cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in inners))
    assert avg["inner"].cpu_time == pytest.approx(avg["inner"].cpu_time_total / 2)
    # every microsecond is some range's own: the self times add up to the top-level ranges' totals
    top = sum(e.cpu_time_total for e in p.events() if e.cpu_parent is None)
    assert p.events().self_cpu_time_total == pytest.approx(top)


def test_record_function_as_decorator_and_outside_a_profile():
    @record_function("decorated")
    def f(x):
        return x + 1

    assert f(1) == 2  # no profile: a plain call
    with record_function("nothing records"):
        pass
    with profile() as p:
        for i in range(3):
            f(i)
    avg = {a.key: a for a in p.key_averages()}
    assert avg["decorated"].count == 3 and avg["decorated"].is_user_annotation
    with pytest.raises(RuntimeError):
        record_function(3).__enter__()
    with pytest.raises(RuntimeError):
        torch.profiler.record_function(3).__enter__()


def test_ops_are_timed_and_wrappers_restored():
    originals = {n: getattr(_C, n) for n in ("matmul", "binary", "conv2d", "_run_backward")}
    x = gm.randn(8, 8, requires_grad=True)
    with profile() as p:
        assert _C.matmul is not originals["matmul"]
        y = (x @ x + 1) * 2
        y.sum().backward()
    names = [e.name for e in p.events()]
    for op in ("gm::matmul", "gm::add", "gm::mul", "gm::sum", "autograd::engine::backward"):
        assert op in names
    for e in p.events():  # an operator's kernel is its range, not a second range inside it
        if e.name in ("gm::add", "gm::mul"):
            assert not any(c.name == e.name for c in e.cpu_children), e
    backward = next(e for e in p.events() if e.name == "autograd::engine::backward")
    assert any(c.name == "gm::matmul" for c in backward.cpu_children)  # the backward's ops nest inside the walk
    assert all(getattr(_C, n) is f for n, f in originals.items())
    assert "__add__" not in vars(gm.Tensor) and "__mul__" not in vars(gm.Tensor)
    with pytest.raises(ValueError, match="boom"):
        with profile():
            raise ValueError("boom")
    assert all(getattr(_C, n) is f for n, f in originals.items())  # restored after an exception too
    assert "__add__" not in vars(gm.Tensor)


def _columns(table):
    lines = table.splitlines()
    return [c for c in re.split(r"\s{2,}", lines[1].strip()) if c]


@pytest.mark.parametrize("opts", [{}, {"profile_memory": True}, {"record_shapes": True}],
                         ids=["plain", "memory", "shapes"])
def test_table_columns_match_torch(opts):
    tables = []
    for lib in (gm, torch):
        x = lib.ones(16, 16)
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU], **opts) as p:
            with lib.profiler.record_function("block"):
                y = x @ x
        del y
        group = opts.get("record_shapes", False)
        tables.append(p.key_averages(group_by_input_shape=group).table(sort_by="cpu_time_total", row_limit=5))
    assert _columns(tables[0]) == _columns(tables[1])
    assert "Self CPU time total:" in tables[0]


def test_table_sort_and_row_limit():
    with profile() as p:
        x = gm.ones(64, 64)
        for _ in range(3):
            x = x @ x
        with record_function("slow"):
            time.sleep(0.01)
    avgs = p.key_averages()
    table = avgs.table(sort_by="self_cpu_time_total", row_limit=2)
    rows = table.splitlines()[3:-2]
    assert len(rows) == 2 and rows[0].strip().startswith("slow")
    table = avgs.table(sort_by="count", row_limit=-1)
    counts = [int(r.split()[-1]) for r in table.splitlines()[3:-2]]
    assert counts == sorted(counts, reverse=True) and len(counts) == len(avgs)
    assert avgs.table(sort_by="self_cuda_memory_usage")  # PyTorch's device names are accepted
    for lib, prof in ((gm, p), (torch, None)):
        if lib is torch:
            with torch.profiler.profile() as prof:
                torch.ones(2)
        with pytest.raises(AttributeError):
            prof.key_averages().table(sort_by="bogus")


def test_memory_columns_are_the_allocators_bytes(device):
    n = 1000  # 4000 bytes of float32: the allocator holds a block of 4096
    before = gm.memory.memory_allocated(device)
    probe = gm.empty(n, device=device)
    block = gm.memory.memory_allocated(device) - before
    del probe
    assert block >= 4000
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities, profile_memory=True) as p:
        with record_function("alloc"):
            a = gm.empty(n, device=device)
        with record_function("free"):
            del a
    ev = {e.name: e for e in p.events() if e.name in ("alloc", "free")}
    used = (lambda e: e.cpu_memory_usage) if device == "cpu" else (lambda e: e.device_memory_usage)
    self_used = (lambda e: e.self_cpu_memory_usage) if device == "cpu" else (lambda e: e.self_device_memory_usage)
    assert used(ev["alloc"]) == block
    assert self_used(ev["alloc"]) == 0  # the bytes are the op's (gm::empty), not the range's own
    assert any(c.name == "gm::empty" and self_used(c) == block for c in ev["alloc"].cpu_children)
    assert used(ev["free"]) == -block and self_used(ev["free"]) == -block
    table = p.key_averages().table()
    assert gm.memory.format_bytes(block) in table
    if device == "cuda":
        assert "CUDA Mem" in table


def test_memory_is_not_profiled_by_default():
    with profile() as p:
        gm.empty(100)
    assert all(e.cpu_memory_usage == 0 for e in p.events())
    assert "CPU Mem" not in p.key_averages().table()


def test_chrome_trace_is_valid_json(tmp_path):
    with profile(record_shapes=True, profile_memory=True) as p:
        with record_function("outer"):
            y = gm.ones(4, 4) @ gm.ones(4, 4)
    del y
    path = tmp_path / "trace.json"
    p.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert sorted(e["name"] for e in spans) == sorted(e.trace_name for e in p.events())
    for e in spans:
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and isinstance(e["tid"], int)
    outer = next(e for e in spans if e["name"] == "outer")
    assert outer["cat"] == "user_annotation"
    mm = next(e for e in spans if e["name"] == "gm::matmul")
    assert mm["cat"] == "cpu_op" and mm["args"]["Input Dims"] == [[4, 4], [4, 4]]
    assert outer["ts"] <= mm["ts"] and mm["ts"] + mm["dur"] <= outer["ts"] + outer["dur"] + 1e-6
    assert any(e["ph"] == "i" and e["name"] == "[memory]" for e in doc["traceEvents"])
    gz = tmp_path / "trace.json.gz"
    p.export_chrome_trace(str(gz))
    with gzip.open(gz, "rt") as f:
        assert json.load(f)["traceEvents"] == doc["traceEvents"]


def test_tensorboard_trace_handler_writes_a_file_per_cycle(tmp_path):
    counts = []
    for lib in (gm, torch):
        d = tmp_path / lib.__name__
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU],
                                      schedule=lib.profiler.schedule(wait=1, warmup=1, active=2, repeat=2),
                                      on_trace_ready=lib.profiler.tensorboard_trace_handler(str(d), "w")) as p:
                for _ in range(10):
                    lib.ones(2) + 1
                    p.step()
        files = sorted(os.listdir(d))
        assert all(re.fullmatch(r"w\.\d+\.pt\.trace\.json", f) for f in files), files
        for f in files:
            json.loads((d / f).read_text())
        counts.append(len(files))
    assert counts[0] == counts[1] == 2


def test_profiler_steps_show_in_the_table_and_trace(tmp_path):
    got = {}

    def ready(prof):
        got["steps"] = [e.trace_name for e in prof.events() if e.name == "ProfilerStep*"]  # one row for all
        got["count"] = {a.key: a for a in prof.key_averages()}["ProfilerStep*"].count
        prof.export_chrome_trace(str(tmp_path / "t.json"))

    with profile(schedule=schedule(wait=0, warmup=1, active=2), on_trace_ready=ready) as p:
        for _ in range(3):
            gm.ones(2)
            p.step()
    assert got["steps"] == ["ProfilerStep#1", "ProfilerStep#2"] and got["count"] == 2
    names = {e["name"] for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]}
    assert {"ProfilerStep#1", "ProfilerStep#2"} <= names and "ProfilerStep#0" not in names


def test_flops_match_torch():
    totals = []
    for lib in (gm, torch):
        x, y = lib.ones(8, 16), lib.ones(16, 4)
        w, im = lib.ones(6, 3, 3, 3), lib.ones(2, 3, 10, 10)
        lin = lib.nn.Linear(16, 5)
        with lib.no_grad(), lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU],
                                                 with_flops=True) as p:
            x @ y
            lib.nn.functional.conv2d(im, w)
            lin(x)
            x + x
            x * 2
        totals.append(sorted(e.flops for e in p.events() if e.flops > 0))
        if lib is gm:
            ours = p
    p = ours
    assert totals[0] == totals[1] == sorted([1024, 41472, 1280, 128, 128])
    assert "Total FLOPs" in p.key_averages().table()  # the smallest count (128) sets the unit


def test_with_modules_ranges_nest():
    model = gm.nn.Sequential(gm.nn.Linear(4, 3), gm.nn.ReLU())
    with profile(with_modules=True) as p:
        model(gm.ones(2, 4))
    ev = {e.name: e for e in p.events()}
    root = ev["nn.Module: Sequential"]
    assert [c.name for c in root.cpu_children] == ["nn.Module: Linear 0", "nn.Module: ReLU 1"]
    assert any(c.name == "gm::linear" for c in ev["nn.Module: Linear 0"].cpu_children)
    with profile() as p:  # off by default
        model(gm.ones(2, 4))
    assert not any(e.name.startswith("nn.Module") for e in p.events())


def test_with_stack_and_export_stacks(tmp_path):
    def work():
        return gm.ones(3, 3) @ gm.ones(3, 3)

    with profile(with_stack=True) as p:
        work()
    mm = next(e for e in p.events() if e.name == "gm::matmul")
    assert mm.stack and "test_profiler.py" in mm.stack[0] and mm.stack[0].endswith("work")
    assert "Source Location" in p.key_averages(group_by_stack_n=2).table()
    path = tmp_path / "stacks.txt"
    p.export_stacks(str(path), "self_cpu_time_total")
    lines = path.read_text().splitlines()
    assert lines and all(re.fullmatch(r".+ \d+", ln) for ln in lines)


def test_acc_events_keeps_every_cycle():
    seen, p = _run_steps(gm, 8, schedule(wait=0, warmup=1, active=1, repeat=3), acc_events=True)
    works = sorted(e.name for e in p.events() if e.name.startswith("work"))
    assert works == ["work1", "work3", "work5"]
    seen, p = _run_steps(gm, 8, schedule(wait=0, warmup=1, active=1, repeat=3))
    assert sorted(e.name for e in p.events() if e.name.startswith("work")) == ["work5"]


def test_start_stop_without_with():
    p = profile()
    p.start()
    with record_function("manual"):
        pass
    p.stop()
    assert [e.name for e in p.events()] == ["manual"]
    assert _C.matmul.__name__ == "matmul" and not hasattr(_C.matmul, "__wrapped__")


# ---- torch.autograd.profiler (gpumemnet.profiler.autograd_profiler) ---------------------------------------------


def test_autograd_profiler_profile():
    with autograd_profiler.profile(record_shapes=True) as prof:
        with autograd_profiler.record_function("block"):
            gm.ones(4, 4) @ gm.ones(4, 4)
    names = [e.name for e in prof.function_events]
    assert "block" in names and "gm::matmul" in names
    table = prof.table(sort_by="cpu_time_total", row_limit=5)
    theirs = None
    with torch.autograd.profiler.profile(record_shapes=True) as tp:
        torch.ones(4, 4) @ torch.ones(4, 4)
    theirs = tp.table(sort_by="cpu_time_total", row_limit=5)
    assert _columns(table) == _columns(theirs)
    assert prof.self_cpu_time_total == pytest.approx(prof.function_events.self_cpu_time_total)
    assert prof.total_average().count == len(prof.function_events)
    assert {a.key for a in prof.key_averages()} == set(names)
    with autograd_profiler.profile(enabled=False) as off:
        gm.ones(2) + 1
    assert not hasattr(_C.binary, "__wrapped__") and off.enabled is False


def test_autograd_profiler_refusals(tmp_path):
    for mod in (autograd_profiler, torch.autograd.profiler):
        p = mod.profile()
        with p:
            pass
        with pytest.raises(RuntimeError, match="not reentrant"):
            with p:
                pass
        with pytest.raises(AssertionError, match="Device-only events"):
            mod.profile(use_cpu=False)
        with pytest.raises(ValueError, match="post_processing_timeout_s must be non-negative"):
            mod.profile(post_processing_timeout_s=-1)
        with pytest.raises(AssertionError, match="requires with_stack=True"):
            p.export_stacks(str(tmp_path / "s.txt"))
