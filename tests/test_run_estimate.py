"""`python -m gpumemnet run`: the peak of each model's training steps, printed before step 1's backward (issue 12
§2; gpumemnet/memory/first_step.py). Each test writes a small PyTorch script (spelled `import torch`) to a tmp file
and runs it through `python -m gpumemnet run` in a subprocess: the printed peak equals the peak the script then
measures (gm.memory.max_memory_allocated over its three steps, wherever it calls zero_grad), --cap small enough
says "does not fit" with plan()'s remedies, --estimate-only stops before step 1, and the run trains exactly as without the estimate."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

import gpumemnet as gm
from gpumemnet.memory import first_step

# the gpumemnet this test imported (installed, an in-place build, the sanitizer's build), for subprocesses
GM_PATH = os.path.dirname(os.path.dirname(gm.__file__))

SCRIPT = """
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
import gpumemnet as gm  # only to measure what the step really took

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(self.drop(torch.flatten(x, 1)))

torch.manual_seed(0)
model = Net()
OPTIMIZER
criterion = nn.CrossEntropyLoss()
x = torch.randn(BATCH, 3, 32, 32)
y = torch.zeros(BATCH, dtype=torch.int64)
gm.memory.reset_peak_memory_stats("cpu")
for step in range(3):
    out = model(x)
    loss = LOSS
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step == 0:
        print("STEP1", gm.memory.max_memory_allocated("cpu"), flush=True)
print("MEASURED", gm.memory.max_memory_allocated("cpu"), flush=True)  # the highest of the three steps
print("PARAMS", sum(float(p.detach().sum().item()) for p in model.parameters()))
"""

SGD = "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)"
ADAM = "optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)"


ZERO_GRAD = "    optimizer.zero_grad()\n"


def _write(tmp_path, optimizer=SGD, loss="criterion(out, y)", batch=32, zero_grad="between"):
    """zero_grad: where the loop calls optimizer.zero_grad(): "between" the loss and backward (the last step's
    gradients are alive in the next forward), at the "top" of the loop, or at its "end", after the step."""
    text = SCRIPT.replace("OPTIMIZER", optimizer).replace("LOSS", loss).replace("BATCH", str(batch))
    if zero_grad != "between":
        text = text.replace(ZERO_GRAD, "")
        at = "    out = model(x)\n" if zero_grad == "top" else "    optimizer.step()\n"
        text = text.replace(at, ZERO_GRAD + at if zero_grad == "top" else at + ZERO_GRAD)
    path = tmp_path / "train.py"
    path.write_text(text)
    return path


def _run(script, *flags):
    env = dict(os.environ, PYTHONPATH=GM_PATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # The scripts train on the CPU, and --cap stands for the device a script trains on: each CUDA device when
    # there is one. So the run sees none: no GPU (CUDA_VISIBLE_DEVICES) and no emulated one (GPUMEMNET_EMU_DEVICES),
    # or a build with CUDA would cap the GPU and leave the CPU step uncapped.
    env.update(CUDA_VISIBLE_DEVICES="", GPUMEMNET_EMU_DEVICES="0")
    return subprocess.run([sys.executable, "-m", "gpumemnet", "run", *flags, str(script)], capture_output=True,
                          text=True, timeout=300, env=env, cwd=str(script.parent))


def _lines(text, prefix):
    return [ln for ln in text.splitlines() if ln.startswith(prefix)]


def _predicted(stderr):
    lines = _lines(stderr, "gpumemnet run: step 1 of Net")
    assert len(lines) == 1, stderr  # one line per model, printed once
    return int(re.search(r"predicted \((\d+) bytes", lines[0]).group(1)), lines[0]


@pytest.mark.parametrize("optimizer, loss", [(SGD, "criterion(out, y)"), (SGD, "F.cross_entropy(out, y)"),
                                             (ADAM, "criterion(out, y)"), (SGD, "criterion(out.view(-1, 10), y)")],
                         ids=["SGD-CrossEntropyLoss", "SGD-F.cross_entropy", "Adam-CrossEntropyLoss", "view"])
def test_printed_peak_equals_the_measured_peak_of_the_steps(tmp_path, optimizer, loss):
    r = _run(_write(tmp_path, optimizer, loss))
    assert r.returncode == 0, r.stderr
    predicted, line = _predicted(r.stderr)
    measured = int(_lines(r.stdout, "MEASURED")[0].split()[1])
    assert predicted == measured, line
    # the first step peaks lower (no momentum or moments yet, no gradients of a step before): the line says so
    step1 = int(_lines(r.stdout, "STEP1")[0].split()[1])
    assert step1 < measured and f"from step 2 on (step 1: {gm.memory.format_bytes(step1)})" in line
    kind = "Adam" if optimizer == ADAM else "SGD"
    name = "CrossEntropyLoss" if loss.startswith("criterion") else "F.cross_entropy"
    assert "not seen" not in line
    assert f"loss {name}, {kind}) on cpu" in line and line.endswith(": fits")
    assert "(--cap)" not in line and "guessed" not in line


RNN_LM = """
import torch
import torch.nn as nn
import gpumemnet as gm

class CharLM(nn.Module):  # the word language model example's shape: time-major input, (output, hidden) returned
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(12, 16)
        self.rnn = nn.RNNTYPE(16, 16, 2)
        self.decoder = nn.Linear(16, 12)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(output).view(-1, 12), hidden

model = CharLM()
optimizer = torch.optim.Adam(model.parameters())
hidden = HIDDEN
gm.memory.reset_peak_memory_stats("cpu")
for step in range(3):
    x, y = torch.randint(0, 12, (6, 4)), torch.randint(0, 12, (24,))
    hidden = DETACH
    optimizer.zero_grad()
    out, hidden = model(x, hidden)
    loss = nn.CrossEntropyLoss()(out, y)
    loss.backward()
    optimizer.step()
print("MEASURED", gm.memory.max_memory_allocated("cpu"), flush=True)
"""


@pytest.mark.parametrize("rnn", ["GRU", "LSTM"])
def test_a_recurrent_language_model_is_estimated_byte_for_byte(tmp_path, rnn):
    """Truncated backpropagation through time: the state carried from step to step, detached; the (T * N,)
    targets of (T, N) inputs, which are not batch-first. An LSTM's state is a tuple, which the estimate does not
    replay: the line says so."""
    lstm = rnn == "LSTM"
    text = RNN_LM.replace("RNNTYPE", rnn).replace(
        "HIDDEN", "(torch.zeros(2, 4, 16), torch.zeros(2, 4, 16))" if lstm else "torch.zeros(2, 4, 16)").replace(
        "DETACH", "tuple(h.detach() for h in hidden)" if lstm else "hidden.detach()")
    path = tmp_path / "lm.py"
    path.write_text(text)
    r = _run(path)
    assert r.returncode == 0, r.stderr
    lines = _lines(r.stderr, "gpumemnet run: step 1 of CharLM")
    assert len(lines) == 1, r.stderr
    if lstm:  # its state is a tuple: not replayed, and the line says so
        assert lines[0].endswith("is not estimated: its forward takes tuple arguments besides tensors, and the "
                                 "estimate replays tensor inputs only"), lines[0]
        return
    predicted = int(re.search(r"predicted \((\d+) bytes", lines[0]).group(1))
    assert predicted == int(_lines(r.stdout, "MEASURED")[0].split()[1]), lines[0]
    assert "loss CrossEntropyLoss, Adam" in lines[0]


@pytest.mark.parametrize("reentrant", [True, False])
def test_an_input_that_requires_grad_is_replayed_so(tmp_path, reentrant):
    """The replay made its inputs as plain tensors: x.grad was left out, and under a reentrant checkpoint the
    segment trained only because its input required grad, so the replay had no backward for it (37,888 bytes
    predicted, 116,736 measured)."""
    path = tmp_path / "grad_input.py"
    path.write_text(
        "import torch, torch.nn as nn\n"
        "from torch.utils.checkpoint import checkpoint\n"
        "import gpumemnet as gm\n"
        "class Net(nn.Module):\n"
        "    def __init__(s):\n"
        "        super().__init__()\n"
        "        s.a = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())\n"
        "        s.b = nn.Linear(64, 4)\n"
        "    def forward(s, x):\n"
        f"        return s.b(checkpoint(s.a, x * 1.0, use_reentrant={reentrant}))\n"
        "m = Net(); opt = torch.optim.Adam(m.parameters(), 1e-3)\n"
        "x = torch.ones(8, 32, requires_grad=True); y = torch.zeros(8, dtype=torch.long)\n"
        "gm.memory.reset_peak_memory_stats('cpu')\n"
        "for i in range(3):\n"
        "    opt.zero_grad(); out = m(x); loss = nn.functional.cross_entropy(out, y); loss.backward(); opt.step()\n"
        "print('MEASURED', gm.memory.max_memory_allocated('cpu'))\n")
    r = _run(path)
    assert r.returncode == 0, r.stderr
    predicted, line = _predicted(r.stderr)
    assert predicted == int(_lines(r.stdout, "MEASURED")[0].split()[1]), line


@pytest.mark.parametrize("losses", ["F.cross_entropy(a, y) + F.mse_loss(b, z)",
                                    "nn.CrossEntropyLoss()(a, y) + 0.5 * nn.SmoothL1Loss()(b, z)"])
def test_a_multi_task_loss_is_replayed_whole(tmp_path, losses):
    """Only the last loss applied to the output was replayed (and named): a step summing a classification and a
    regression loss was predicted 3.70 MiB where it took 6.89. Every loss that carries a gradient is replayed now,
    summed, each with its own target."""
    path = tmp_path / "multi.py"
    path.write_text(
        "import torch, torch.nn as nn, torch.nn.functional as F\n"
        "import gpumemnet as gm\n"
        "class Net(nn.Module):\n"
        "    def __init__(s):\n"
        "        super().__init__(); s.a = nn.Linear(64, 256); s.c = nn.Linear(256, 1000); s.r = nn.Linear(256, 1)\n"
        "    def forward(s, x):\n"
        "        h = torch.relu(s.a(x)); return s.c(h), s.r(h)\n"
        "m = Net(); opt = torch.optim.Adam(m.parameters(), 1e-3)\n"
        "x, y, z = torch.ones(256, 64), torch.zeros(256, dtype=torch.long), torch.zeros(256, 1)\n"
        "gm.memory.reset_peak_memory_stats('cpu')\n"
        "for i in range(3):\n"
        f"    opt.zero_grad(); a, b = m(x); loss = {losses}; loss.backward(); opt.step()\n"
        "    with torch.no_grad():\n"
        "        metric = F.l1_loss(b, z).item()  # a metric: not replayed\n"
        "print('MEASURED', gm.memory.max_memory_allocated('cpu'))\n")
    r = _run(path)
    assert r.returncode == 0, r.stderr
    predicted, line = _predicted(r.stderr)
    assert predicted == int(_lines(r.stdout, "MEASURED")[0].split()[1]), line
    assert "(backward from their sum)" in line


def test_where_the_script_calls_zero_grad(tmp_path):
    """Between the loss and backward, the last step's gradients are alive through the next forward: the
    estimate sees that call (a no-op in step 1) and counts them; at the top of the loop or after the step they
    are gone before the forward. Each way the printed peak is the measured one, and the ways differ."""
    peaks = {}
    for where in ("between", "top", "end"):
        r = _run(_write(tmp_path, ADAM, zero_grad=where))
        assert r.returncode == 0, r.stderr
        predicted, line = _predicted(r.stderr)
        assert predicted == int(_lines(r.stdout, "MEASURED")[0].split()[1]), (where, line)
        peaks[where] = predicted
    assert peaks["top"] == peaks["end"] < peaks["between"]


def _revised(stderr):
    lines = _lines(stderr, "gpumemnet run: step 2 of Net")
    assert len(lines) == 1, stderr
    return int(re.search(r"predicted \((\d+) bytes", lines[0]).group(1)), lines[0]


def test_zero_grad_to_zeros_after_the_step_revises_the_line_at_step_2(tmp_path):
    """zero_grad(set_to_none=False) after the step is seen only after step 1's line (which assumed PyTorch's
    default): the zeroed gradients stay alive through every later forward, so at step 2 the line is revised, and
    the revised peak is the measured one (step 1's was a whole set of gradients short)."""
    script = _write(tmp_path, ADAM, zero_grad="end")
    script.write_text(script.read_text().replace("optimizer.zero_grad()", "optimizer.zero_grad(set_to_none=False)"))
    r = _run(script)
    assert r.returncode == 0, r.stderr
    first, _ = _predicted(r.stderr)
    revised, line = _revised(r.stderr)
    measured = int(_lines(r.stdout, "MEASURED")[0].split()[1])
    assert first < revised == measured, line
    assert "revised at step 2: the script zeroes its gradients in place (zero_grad(set_to_none=False))" in line


def test_gradient_accumulation_revises_the_line_at_step_2(tmp_path):
    """Two forward and backward passes before each optimizer step: the second forward runs with the first one's
    gradients alive, which step 1's line could not know; the revised line counts both micro-batches."""
    script = _write(tmp_path, ADAM, zero_grad="end")
    text = script.read_text().replace("for step in range(3):\n", "for step in range(6):\n").replace(
        "    optimizer.step()\n    optimizer.zero_grad()\n",
        "    if step % 2:\n        optimizer.step()\n        optimizer.zero_grad()\n")
    assert "step % 2" in text
    script.write_text(text)
    r = _run(script)
    assert r.returncode == 0, r.stderr
    revised, line = _revised(r.stderr)
    assert revised == int(_lines(r.stdout, "MEASURED")[0].split()[1]), line
    assert "revised at step 2: the script accumulates 2 forward and backward passes per optimizer step;" in line


def test_a_loop_as_step_1_assumed_is_not_revised(tmp_path):
    r = _run(_write(tmp_path, ADAM, zero_grad="end"))
    assert r.returncode == 0 and "step 2 of" not in r.stderr, r.stderr


def test_autocast_and_adamw_are_estimated_as_the_script_runs_them(tmp_path):
    script = _write(tmp_path, "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)")
    text = script.read_text().replace("    out = model(x)\n    loss = criterion(out, y)\n",
                                      "    with torch.autocast('cpu', dtype=torch.bfloat16):\n"
                                      "        out = model(x)\n        loss = criterion(out, y)\n")
    assert "torch.autocast" in text
    script.write_text(text)
    r = _run(script)
    predicted, line = _predicted(r.stderr)
    assert "AdamW, autocast bfloat16) on cpu" in line
    assert predicted == int(_lines(r.stdout, "MEASURED")[0].split()[1])


def test_the_estimate_does_not_disturb_the_run(tmp_path):
    """Dropout draws from the generator and the model has BatchNorm statistics: the trained parameters are the
    same, bit for bit, with and without the estimate before step 1."""
    script = _write(tmp_path, ADAM)
    with_estimate, without = _run(script), _run(script, "--no-estimate")
    assert with_estimate.returncode == 0 and without.returncode == 0, with_estimate.stderr + without.stderr
    assert _lines(with_estimate.stdout, "PARAMS") == _lines(without.stdout, "PARAMS")
    assert "step 1 of" in with_estimate.stderr and "step 1 of" not in without.stderr


def test_the_estimate_leaves_the_runs_own_memory_alone(tmp_path):
    """The watcher's global module hooks made every Sequential under no_grad keep each intermediate (a global hook
    may keep a module's input, so no child wrote over it): an eval forward after training peaked 60% higher with
    the estimate on than off. The peak is the same byte for byte now."""
    script = tmp_path / "evaluate.py"
    script.write_text(
        "import torch, torch.nn as nn\n"
        "import gpumemnet as gm\n"
        "m = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))\n"
        "opt = torch.optim.SGD(m.parameters(), 0.1)\n"
        "x, y = torch.ones(64, 256), torch.zeros(64, dtype=torch.long)\n"
        "loss = nn.functional.cross_entropy(m(x), y); opt.zero_grad(); loss.backward(); opt.step()\n"
        "del loss\n"
        "m.eval()\n"
        "X = torch.ones(4096, 256)\n"
        "gm.memory.reset_peak_memory_stats('cpu')\n"
        "base = gm.memory.memory_allocated('cpu')\n"
        "with torch.no_grad():\n"
        "    o = m(X)\n"
        "print('EVAL', gm.memory.max_memory_allocated('cpu') - base)\n")
    with_estimate, without = _run(script), _run(script, "--no-estimate")
    assert with_estimate.returncode == 0 and without.returncode == 0, with_estimate.stderr + without.stderr
    assert "step 1 of" in with_estimate.stderr
    assert _lines(with_estimate.stdout, "EVAL") == _lines(without.stdout, "EVAL") == ["EVAL 5242880"]


def test_a_small_cap_does_not_fit_and_gets_plans_remedies(tmp_path):
    script = _write(tmp_path, ADAM, batch=64)
    full, _ = _predicted(_run(script, "--estimate-only").stderr)
    # between the forward's need and the step's: the estimate is made at backward(), the run then fails
    cap = full - 2 * 2**20
    r = _run(script, "--cap", f"{cap // 1024}KiB")
    predicted, line = _predicted(r.stderr)
    assert f"capacity {gm.memory.format_bytes(cap // 1024 * 1024)} (--cap): does not fit" in line
    remedies = r.stderr[r.stderr.index(line) + len(line):]
    assert "remedies ranked by plan() (fastest first" in remedies
    assert re.search(r"- accumulation_steps=1, checkpoint_segments=None, fp32: .* predicted, time x1.00: does not "
                     r"fit", remedies)
    assert "fits with accumulation_steps=" in remedies
    assert r.returncode == 1 and "OutOfMemoryError" in r.stderr  # the cap is the card's: the real step fails too


def test_remedies_leave_the_same_room_whatever_state_the_optimizer_made_at_construction(tmp_path):
    """Adagrad's state_sum exists before step 1 (Adam's not): plan()'s configurations count it in their totals, so
    the room left for them is the cap less what the process holds besides model, batch and that state, the same
    room as with Adam (it was counted twice: the state's size less)."""
    rooms = []
    for opt in (ADAM, "optimizer = torch.optim.Adagrad(model.parameters(), lr=1e-2)"):
        r = _run(_write(tmp_path, opt, batch=64), "--cap", "3MiB")
        assert "remedies ranked by plan()" in r.stderr, r.stderr
        rooms.append(re.search(r"fastest first; (.*) left for the model", r.stderr).group(1))
    assert rooms[0] == rooms[1]


def test_a_cap_below_the_forward_estimates_when_the_forward_runs_out(tmp_path):
    r = _run(_write(tmp_path, ADAM, batch=64), "--cap", "4MiB")
    _, line = _predicted(r.stderr)
    assert "its forward ran out of memory" in line and "loss CrossEntropyLoss (guessed" in line
    assert "does not fit" in line and "out of memory on cpu" in r.stderr


def test_estimate_only_stops_before_step_1(tmp_path):
    r = _run(_write(tmp_path), "--estimate-only")
    assert r.returncode == 0, r.stderr
    predicted, line = _predicted(r.stderr)
    assert "MEASURED" not in r.stdout and "PARAMS" not in r.stdout
    assert predicted == int(_lines(_run(_write(tmp_path)).stdout, "MEASURED")[0].split()[1])


def test_estimate_only_without_training(tmp_path):
    path = tmp_path / "noop.py"
    path.write_text("import torch\nprint(torch.zeros(2).sum().item())\n")
    r = _run(path, "--estimate-only")
    assert r.returncode == 0 and "without reaching a training step" in r.stderr


def test_bad_options_are_refused(tmp_path):
    r = _run(_write(tmp_path), "--cap", "six gigs")
    assert r.returncode == 2 and "--cap: cannot read 'six gigs' as a size" in r.stderr
    r = _run(_write(tmp_path), "--estimate-only", "--no-estimate")
    assert r.returncode == 2 and "opposite things" in r.stderr


@pytest.mark.parametrize("text, n", [("6GiB", 6 * 2**30), ("6 GiB", 6 * 2**30), ("512MiB", 512 * 2**20),
                                     ("6G", 6 * 2**30), ("8GB", 8 * 10**9), ("1.5KiB", 1536), ("4096", 4096)])
def test_parse_bytes(text, n):
    assert first_step.parse_bytes(text) == n


def test_parse_bytes_errors():
    for bad in ("", "GiB", "-1GiB", "6 parsecs"):
        with pytest.raises(ValueError):
            first_step.parse_bytes(bad)


def test_watch_is_off_outside_run_mode():
    """Outside `run`, no hook of first_step is set: backward() and torch attributes are left alone."""
    from gpumemnet._core import hooks
    assert hooks.get("backward_starting") is None
    w = first_step.watch()
    try:
        assert hooks.get("backward_starting") is not None
    finally:
        assert first_step.unwatch() == 0
    assert hooks.get("backward_starting") is None
    assert first_step.wrap_torch_attribute("torch.nn.functional.cross_entropy", len) is len
    del w


def test_a_failure_of_the_watching_never_breaks_the_script(monkeypatch):
    import io
    import gpumemnet.nn as nn

    def broken(*args):
        raise RuntimeError("made to fail")
    monkeypatch.setattr(first_step, "_Call", broken)
    out = io.StringIO()
    first_step.watch(out=out)
    try:
        model = nn.Linear(4, 2)
        for _ in range(2):
            model(gm.randn(3, 4)).sum().backward()  # runs as without the watching
    finally:
        first_step.unwatch()
    assert out.getvalue() == "gpumemnet run: watching for step 1 stopped: RuntimeError: made to fail\n"
    assert model.weight.grad is not None


def test_zero_grad_calls_are_counted_but_not_the_estimates_own():
    """Run mode counts the script's zero_grad() calls (an optimizer's or a module's) and their set_to_none; the
    estimate's own call between its two steps on meta is not the script's."""
    import io
    import gpumemnet.nn as nn
    w = first_step.watch(out=io.StringIO())
    try:
        model = nn.Linear(4, 2)
        gm.memory.estimate(model, (4,), batch_size=2)
        assert w.zero_grads == 0
        gm.optim.SGD(model.parameters(), lr=0.1).zero_grad(set_to_none=False)
        assert (w.zero_grads, w.set_to_none) == (1, False)
        model.zero_grad()
        assert (w.zero_grads, w.set_to_none) == (2, True)
    finally:
        first_step.unwatch()
    from gpumemnet._core import hooks
    assert hooks.get("zero_grad_called") is None


def test_the_estimate_does_not_run_the_scripts_hooks(tmp_path):
    """The estimate runs a meta copy of the model: a forward hook that stores activations (feature extraction,
    Grad-CAM) keeps the real run's tensors, and fires once per real forward."""
    script = tmp_path / "hooked.py"
    script.write_text(textwrap.dedent("""
        import torch, torch.nn as nn
        calls, feats = [0], {}
        def hook(m, i, o):
            calls[0] += 1
            feats["fc"] = o.detach()
        model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
        model[0].register_forward_hook(hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(torch.ones(4, 3)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(calls[0], feats["fc"].device)
    """))
    out = subprocess.run([sys.executable, "-m", "gpumemnet", "run", str(script)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "step 1 of Sequential" in out.stdout + out.stderr  # the step was estimated
    assert out.stdout.strip().splitlines()[-1] == "1 cpu"


def test_a_tensor_made_in_forward_without_a_device_is_estimated(tmp_path):
    """A GCN's torch.zeros(n, d).index_add_(...) inside forward: on meta while the step is estimated (it met the
    meta tensors as a CPU tensor, and the estimate failed)."""
    script = tmp_path / "gcn.py"
    script.write_text(textwrap.dedent("""
        import torch, torch.nn as nn
        class GCN(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 3)
            def forward(self, x, row, col):
                return torch.zeros(x.shape[0], 3).index_add_(0, col, self.lin(x)[row])
        m = GCN()
        opt = torch.optim.Adam(m.parameters())
        x, row, col = torch.randn(5, 4), torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 4])
        for _ in range(2):
            loss = m(x, row, col).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(torch.zeros(1).device)
    """))
    out = subprocess.run([sys.executable, "-m", "gpumemnet", "run", str(script)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert "step 1 of GCN" in text and "could not be estimated" not in text, text
    assert out.stdout.strip().splitlines()[-1] == "cpu"  # the default device is the script's again
