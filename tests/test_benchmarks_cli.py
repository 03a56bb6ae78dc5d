"""`python -m benchmarks` (issue 14): the harness runs both libraries on the smallest case and says so in its
JSON, both sides start from the same weights, and the README table is generated between its markers. Timings are
not checked (a shared machine makes them noise); the structure and the equal starting point are."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import gpumemnet as gm

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GM_PATH = os.path.dirname(os.path.dirname(gm.__file__))  # the workers import the gpumemnet this test imported
sys.path.insert(0, REPO)

from benchmarks import _report, __main__ as bench_main  # noqa: E402


def run_bench(tmp_path, *args, timeout=300):
    env = dict(os.environ, PYTHONPATH=GM_PATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", *args, "--json", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc


def test_digits_both_sides_same_weights(tmp_path):
    pytest.importorskip("torch")
    res, proc = run_bench(tmp_path, "--only", "digits", "fp32", "eval", "--rounds", "1", "--warmup", "1",
                          "--threads", "1")
    env = res["environment"]
    assert set(env["workers"]) == {"gm", "torch"}
    assert env["workers"]["gm"]["blas_core"] and env["workers"]["gm"]["threads"] == 1
    assert env["workers"]["torch"]["threads"] == 1
    assert env["rounds"] == 1 and not res.get("failed")
    # the rule: both OpenBLAS variables leave the workers' environment together, with a warning when set
    removed = [k for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ]
    assert [r.split("=")[0] for r in env["openblas_env_removed"]] == removed
    assert ("warning: OPENBLAS" in proc.stderr) == bool(removed)
    assert [(c["model"], c["mode"]) for c in res["models"]] == [("digits", "fp32"), ("digits", "eval")]
    for case in res["models"]:
        # the same initial weights and data: the first step's loss agrees to float32 rounding
        loss = case["loss0"]
        assert loss["gm"] == pytest.approx(loss["torch"], rel=1e-5), case
        assert case["ms"]["gm"]["n"] == case["ms"]["torch"]["n"] == 1
        assert case["ratio"]["median"] > 0
        for side in ("gm", "torch"):
            peak = case["peak"][side]
            assert 0 < peak["step"] <= peak["total"], (side, peak)
        assert case["params"] == 5178  # 1*16*9 + 16*2 + 16*32*9 + 32*2 + 32*10 + 10
        assert set(case["peak_ratio"]) == {"step", "total"}
    # a training step holds more than an eval forward under no_grad, on both sides
    fp32, ev = res["models"]
    assert fp32["peak"]["gm"]["step"] > ev["peak"]["gm"]["step"]
    assert fp32["peak"]["torch"]["step"] > ev["peak"]["torch"]["step"]


def test_gm_alone_and_kernels(tmp_path):
    res, _ = run_bench(tmp_path, "--no-torch", "--only", "digits", "checkpoint", "overhead", "--rounds", "1",
                       "--warmup", "1", "--threads", "1", "--quick")
    assert set(res["environment"]["workers"]) == {"gm"}
    (case,) = res["models"]
    assert case["mode"] == "checkpoint" and "ratio" in case and case["ratio"] is None
    ov = res["op_overhead"]
    assert set(ov["grad"]) == {"gm"} and ov["grad"]["gm"]["median"] > 0
    assert "conv" not in res and "adam" not in res and "callgrind" not in res


def test_selection():
    models, modes, micro = bench_main.selection([])
    assert "resnet18" in models and "eval" in modes and "callgrind" in micro
    assert bench_main.selection(["unet"]) == (["unet"], list(bench_main._models.MODES), [])
    assert bench_main.selection(["conv", "adam"]) == ([], [], ["conv", "adam"])
    assert bench_main.selection(["autocast", "micro"])[1:] == (["autocast"], list(bench_main.MICRO))
    with pytest.raises(SystemExit):
        bench_main.parse(["--only", "resnet19"])


def test_markdown_between_markers(tmp_path):
    res = {"environment": {"command": "python -m benchmarks --quick", "date": "2026-12-03 19:00 UTC", "cpus": 2,
                           "loadavg": "1.0", "device": "cpu", "rounds": 3, "omp_wait_policy": "PASSIVE",
                           "workers": {"gm": {"backend": "gm", "blas_core": "SkylakeX", "threads": 2},
                                       "torch": {"backend": "torch", "version": "2.15", "threads": 2}}},
           "models": [{"model": "unet", "mode": "fp32",
                       "ms": {"gm": {"median": 190.0}, "torch": {"median": 200.0}},
                       "ratio": {"median": 0.95, "min": 0.9, "max": 1.0},
                       "peak": {"gm": {"step": 2 << 20, "total": 3 << 20},
                                "torch": {"step": 4 << 20, "total": 6 << 20}},
                       "peak_ratio": {"step": 0.5, "total": 0.5}}]}
    readme = tmp_path / "README.md"
    shutil.copy(os.path.join(REPO, "README.md"), readme)
    before = readme.read_text()
    _report.update_readme(str(readme), _report.markdown(res))
    text = readme.read_text()
    assert "| unet, fp32 | 190.0 | 200.0 | 0.95x (0.90-1.00) | 2.00 MiB / 4.00 MiB (0.50x) | 0.50x |" in text
    # only the generated part changed: the quick start and everything outside the markers stay
    head = before.split(_report.BEGIN_MARKER)[0]
    assert text.startswith(head) and text.endswith(before.split(_report.END_MARKER)[1])
    assert "pip install \".[demo]\" && python -m gpumemnet.demo" in head
