"""Session fixtures of the conformance suite: one PyTorch worker and one gpumemnet worker (dropin_harness.Worker)
for the whole session, the PyTorch reference runs cached per model and mode, and a closing table of what each
builder did (builds / trains / matches / estimate-exact, with the first failure)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dropin_harness  # noqa: E402
from dropin_harness import MISSING, OUTCOMES, SPEED, init_path  # noqa: E402


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("dropin")


@pytest.fixture(scope="session")
def torch_worker(workdir):
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    w = dropin_harness.Worker("torch", str(workdir))
    yield w
    w.close()


@pytest.fixture(scope="session")
def gm_worker(workdir):
    pytest.importorskip("torchvision")  # gpumemnet's side runs torchvision's code under the alias
    w = dropin_harness.Worker("gm", str(workdir))
    yield w
    w.close()


@pytest.fixture
def fresh_gm_worker(workdir):
    """A gm worker of its own: a process whose allocator has served nothing but this test. The estimate is the
    step of a script that builds the model and trains it; a worker that built 40 models before keeps partly used
    segments whose free space changes where the step's blocks land (by up to 1 MB in the large pool, where a block
    is not split for a remainder of 1 MiB or less), which no estimate from the model alone can know."""
    pytest.importorskip("torchvision")
    w = dropin_harness.Worker("gm", str(workdir))
    yield w
    w.close()


@pytest.fixture(scope="session")
def reference(torch_worker, workdir):
    """reference(name, mode) -> {key: array} of PyTorch's run (mode: "float32" (which also saves the initial state
    to init_path(name)), "float64", "amp", "cuda_amp", "forward", "forward64"), each run once and kept on disk
    while its model is the one under test; reference.answer(name, mode) is the worker's answer (its warnings, its
    time)."""
    cache, answers = {}, {}

    def forget_other_models(name):
        """Delete the arrays of every model but `name`: a session's would fill the disk (~15 GB for CI's tier;
        a CI machine ran out of space at 75% of the suite). A model met again is run again."""
        for key in [k for k in cache if k[0] != name]:
            os.remove(cache.pop(key))
        for f in workdir.glob("*.init.npz"):
            if f.name != f"{name}.init.npz":
                f.unlink()

    def get(name, mode):
        from dropin_models import STEPS
        forget_other_models(name)
        if (name, mode) not in cache:
            out = str(workdir / f"{name}.{mode}.torch.npz")
            init = init_path(workdir, name)
            if mode in ("forward", "forward64"):
                if mode == "forward64":
                    get(name, "forward")
                have = os.path.exists(init)
                ans = torch_worker.request(task="forward", model=name, out=out, init=init if have else None,
                                           save_init=None if have else init,
                                           dtype="float64" if mode == "forward64" else "float32")
            else:
                if mode != "float32":
                    get(name, "float32")
                ans = torch_worker.request(task="train", model=name, mode=mode, steps=STEPS, out=out,
                                           init=None if mode == "float32" else init,
                                           save_init=init if mode == "float32" else None)
            if not ans["ok"]:
                pytest.fail(f"PyTorch's own run of {name} ({mode}) failed: {ans['error']}\n{ans['traceback']}")
            cache[name, mode], answers[name, mode] = out, ans  # the path: a model's arrays may not fit in memory
        return dropin_harness.load(cache[name, mode])

    get.answer = lambda name, mode: answers[name, mode]
    return get


def pytest_terminal_summary(terminalreporter):
    if not OUTCOMES:
        return
    checks = ["train", "forward", "estimate", "amp", "cuda_amp", "script"]
    used = [c for c in checks if any(c in o for o in OUTCOMES.values())]
    tr = terminalreporter
    tr.section("gpumemnet drop-in conformance")
    tr.write_line(f"{'case':30} " + " ".join(f"{c:9}" for c in used) + " step gm/torch  first failure")
    for name in sorted(OUTCOMES):
        o = OUTCOMES[name]
        cells = " ".join(f"{('ok' if o[c].startswith('ok') else 'FAIL') if c in o else '-':9}" for c in used)
        first = next((o[c] for c in used if c in o and o[c] != "ok"), "")  # "ok (conditioning...)" shows
        speed = f"{SPEED[name][0] / SPEED[name][1]:5.2f}x" if name in SPEED and SPEED[name][1] > 0 else "-"
        tr.write_line(f"{name:30} {cells} {speed:14} {first.splitlines()[0][:150] if first else ''}")
    if MISSING:
        tr.write_line("PyTorch names gpumemnet lacks, by the case that met them first:")
        for name in sorted(MISSING):
            tr.write_line(f"  {name}: {', '.join(sorted(MISSING[name]))}")
