"""`python -m gpumemnet run`'s replay of the first training step on meta (gpumemnet/memory/first_step.py,
estimator.py, _meta_model.py) in the cases that made it fail or disturb the run: a NumPy Generator drawn from in
forward, a Hugging Face style call (keyword inputs, the loss inside a dict or dataclass output), autocast opened
for the input's device inside forward, a lambda closing over the module (a tied output layer), a loss applied
to a view of an inline model call, and one applied to the output cast to float32. Each script runs in a subprocess
through `python -m gpumemnet run`; where it measures its steps' peak (gm.memory.max_memory_allocated), the printed
peak must equal it byte for byte."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

import gpumemnet as gm

GM_PATH = os.path.dirname(os.path.dirname(gm.__file__))

# the measured peak of the script's steps, printed last
MEASURE = """
import gpumemnet as gm
gm.memory.reset_peak_memory_stats("cpu")
"""
MEASURED = 'print("MEASURED", gm.memory.max_memory_allocated("cpu"), flush=True)\n'


def _run(tmp_path, text, *flags):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(text))
    env = dict(os.environ, PYTHONPATH=GM_PATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(CUDA_VISIBLE_DEVICES="", GPUMEMNET_EMU_DEVICES="0")  # the steps run on the CPU, as in run's tests
    r = subprocess.run([sys.executable, "-m", "gpumemnet", "run", *flags, str(path)], capture_output=True, text=True,
                       timeout=300, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    return r


def _line(r, model):
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(f"gpumemnet run: step 1 of {model}")]
    assert len(lines) == 1 and "could not be estimated" not in lines[0], r.stderr
    return lines[0]


def _exact(r, model):
    """The estimate's line, after checking that its peak is the measured one."""
    line = _line(r, model)
    predicted = int(re.search(r"predicted \((\d+) bytes", line).group(1))
    measured = int(next(ln for ln in r.stdout.splitlines() if ln.startswith("MEASURED")).split()[1])
    assert predicted == measured, line
    return line


def _last(r):
    return r.stdout.strip().splitlines()[-1]


# ---- 1. the host's generators ------------------------------------------------------------------------------------
GENERATORS = """
import random
import numpy as np, torch, torch.nn as nn
rng = np.random.default_rng(0)           # a module's own Generator, drawn from in forward (noise, masks)
legacy = np.random.RandomState(1)        # and the older RandomState (its cached gaussian too)
pyrng = random.Random(2)                 # and a Python Random that is not the global one
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(4, 1)
    def forward(self, x):
        noise = rng.normal(size=x.shape) + legacy.standard_normal(x.shape) * pyrng.random()
        return self.lin(x + torch.tensor(noise, dtype=x.dtype))
torch.manual_seed(0)
model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(8, 4)
for step in range(2):
    loss = model(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
print("NEXT", rng.normal(), legacy.standard_normal(), pyrng.random(), float(model.lin.weight.sum()))
"""


def test_the_replay_leaves_every_numpy_and_python_generator_where_it_was(tmp_path):
    """The replay runs forward again: each Generator, RandomState and Random it draws from is where it was after,
    so the run draws and trains as with --no-estimate."""
    with_estimate, without = _run(tmp_path, GENERATORS), _run(tmp_path, GENERATORS, "--no-estimate")
    _line(with_estimate, "Net")
    assert _last(with_estimate) == _last(without)
    assert "step 1 of" not in without.stderr


# ---- 2. Hugging Face style calls ---------------------------------------------------------------------------------
HF = """
import dataclasses
import torch, torch.nn as nn, torch.nn.functional as F
from collections import OrderedDict
@dataclasses.dataclass
class Output:                            # a plain dataclass output (Hugging Face's ModelOutput is a dict)
    loss: torch.Tensor
    logits: torch.Tensor
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(8, 3)
    def forward(self, x, labels=None, return_dict=True):
        logits = self.fc(x)
        if labels is None:
            return logits
        loss = F.cross_entropy(logits, labels)
        return OrderedDict(loss=loss, logits=logits) if return_dict else Output(loss, logits)
torch.manual_seed(0)
model = Net(); opt = torch.optim.AdamW(model.parameters())
x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
MEASURE
for step in range(3):
    STEP
    opt.step(); opt.zero_grad()
MEASURED
print("PARAMS", float(model.fc.weight.sum()))
"""


@pytest.mark.parametrize("step, loss", [
    ("out = model(x=x); F.cross_entropy(out, y).backward()", "loss F.cross_entropy"),
    ("out = model(x, labels=y); out['loss'].backward()", "loss output['loss']"),
    ("out = model(x=x, labels=y, return_dict=False); out.loss.backward()", "loss output.loss"),
], ids=["keywords-only", "dict-output", "dataclass-output"])
def test_keyword_inputs_and_a_loss_inside_the_output_are_replayed(tmp_path, step, loss):
    """model(x=x) is a training step too (it was not watched: no positional input); labels=y reaches the replayed
    forward (it was dropped: the model's own cross_entropy got None); backward() on the output's own loss
    (out["loss"], out.loss) replays that loss, not the sum of the output's tensors."""
    text = HF.replace("MEASURED\n", MEASURED).replace("MEASURE\n", MEASURE).replace("STEP", step)
    r = _run(tmp_path, text)
    line = _exact(r, "Net")
    assert f"{loss}, AdamW) on cpu" in line and "not seen" not in line
    assert ("labels=(4,)" in line) == ("labels" in step)
    assert _last(r) == _last(_run(tmp_path, text, "--no-estimate"))


# ---- 3. autocast for the input's device inside forward -----------------------------------------------------------
AUTOCAST = """
import torch, torch.nn as nn, torch.nn.functional as F
from torch.amp import autocast
class Rot(nn.Module):                    # x-transformers' rotary embedding: autocast(t.device.type, enabled=False)
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(8, 8)
    def forward(self, x):
        with autocast(x.device.type, enabled=False):
            return self.lin(x.float())
m = Rot(); opt = torch.optim.Adam(m.parameters())
x, y = torch.ones(4, 8), torch.zeros(4, 8)
MEASURE
for i in range(2):
    loss = F.mse_loss(m(x), y); opt.zero_grad(); loss.backward(); opt.step()
MEASURED
"""


def test_autocast_for_the_inputs_device_type_inside_forward_is_replayed(tmp_path):
    """On meta, x.device.type is "meta": the replay's autocast takes it as the device estimated."""
    _exact(_run(tmp_path, AUTOCAST.replace("MEASURED\n", MEASURED).replace("MEASURE\n", MEASURE)), "Rot")


def test_autocast_refuses_meta_outside_an_estimate():
    for make in (gm.autocast, gm.amp.autocast):
        with pytest.raises(gm._C.ArgumentError, match="device_type must be 'cpu' or 'cuda', got 'meta'"):
            make("meta", enabled=False)


# ---- 4. a lambda closing over the module -------------------------------------------------------------------------
LAMBDA = """
import torch, torch.nn as nn, torch.nn.functional as F
class LM(nn.Module):                     # x-transformers' TransformerWrapper(tie_embedding=True)
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(20, 8)
        self.to_logits = lambda t: t @ self.emb.weight.t()
        self.heads = [lambda t: t * self.emb.weight.sum()]
    def forward(self, x): return self.heads[0](self.to_logits(self.emb(x)))
torch.manual_seed(0)
m = LM(); opt = torch.optim.Adam(m.parameters())
x = torch.arange(12).reshape(3, 4)
MEASURE
for i in range(2):
    loss = F.cross_entropy(m(x).flatten(0, 1), x.flatten()); opt.zero_grad(); loss.backward(); opt.step()
MEASURED
print("CLOSURE", m.to_logits.__closure__[0].cell_contents is m, float(m.emb.weight.sum()))
"""


def test_a_lambda_closing_over_the_module_runs_on_the_meta_copy(tmp_path):
    """The copy's lambdas are remade over the copy (they reached the CPU weight: "expected all tensors on the same
    device, got meta and cpu"); the script's own lambdas still close over its model."""
    text = LAMBDA.replace("MEASURED\n", MEASURED).replace("MEASURE\n", MEASURE)
    r = _run(tmp_path, text)
    assert "loss F.cross_entropy" in _exact(r, "LM")
    assert _last(r).startswith("CLOSURE True") and _last(r) == _last(_run(tmp_path, text, "--no-estimate"))


def test_the_meta_copy_rebinds_closures_without_touching_the_model():
    import gpumemnet.nn as nn
    from gpumemnet.memory._meta_model import _meta_copy

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 3)
            self.out = lambda t: t @ self.emb.weight.t()
            self.fns = {"scale": lambda t: t * self.emb.weight.sum()}

        def forward(self, x):
            return self.fns["scale"](self.out(self.emb(x)))

    m = Tied()
    clone = _meta_copy(m)
    assert clone.out.__closure__[0].cell_contents is clone
    assert clone.fns["scale"].__closure__[0].cell_contents is clone
    assert m.out.__closure__[0].cell_contents is m and m.fns["scale"].__closure__[0].cell_contents is m
    assert clone(gm.empty(2, 4, dtype=gm.int64, device="meta")).device.type == "meta"


# ---- 5. the loss applied to a view of an inline model call -------------------------------------------------------
INLINE = """
import torch, torch.nn as nn, torch.nn.functional as F
m = nn.Sequential(nn.Embedding(20, 8), nn.Linear(8, 20)); opt = torch.optim.Adam(m.parameters())
x = torch.arange(12).reshape(3, 4)
MEASURE
for i in range(3):
    LOSS
    opt.zero_grad(); loss.backward(); opt.step()
MEASURED
"""


@pytest.mark.parametrize("loss", ["loss = F.cross_entropy(m(x).transpose(1, 2), x)",
                                  "out = m(x); loss = F.cross_entropy(out.transpose(1, 2), x)",
                                  "loss = F.cross_entropy(m(x)[:, :-1].transpose(1, 2), x[:, 1:])"],
                         ids=["inline", "two-lines", "slice"])
def test_the_loss_of_a_view_of_the_output_is_seen_and_replayed_as_that_view(tmp_path, loss):
    """The loss takes a view of the output (the output itself already gone when it is inline): it is recognised
    through the view's storage and graph, and replayed on the same view (a transpose as a permute, not a reshape,
    which lays it out otherwise and made the estimate 1 KiB low)."""
    text = INLINE.replace("MEASURED\n", MEASURED).replace("MEASURE\n", MEASURE).replace("LOSS", loss)
    line = _exact(_run(tmp_path, text), "Sequential")
    assert "loss F.cross_entropy, Adam" in line and "not seen" not in line


# ---- 6. an optimizer wrapped by subclassing its class (Lightning's LightningOptimizer) --------------------------
WRAPPED = """
import gc, torch, torch.nn as nn, torch.nn.functional as F
class OptimizerWrapper:
    def __init__(self, optimizer):
        self.__dict__ = {k: v for k, v in optimizer.__dict__.items() if k not in ("step", "__del__")}
        self._optimizer = optimizer
        self.__class__ = type("Wrapped" + optimizer.__class__.__name__, (self.__class__, optimizer.__class__), {})
    def step(self, closure=None):
        return self._optimizer.step(closure)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
gc.collect()  # the optimizer itself moves to an older generation: gc lists the wrapper first
wrapped = OptimizerWrapper(opt)
x, y = torch.ones(3, 4), torch.tensor([0, 1, 0])
""" + MEASURE + """
for _ in range(2):
    loss = F.cross_entropy(model(x), y)
    wrapped.zero_grad(); loss.backward(); wrapped.step()
""" + MEASURED


def test_an_optimizer_wrapped_by_subclassing_is_rebuilt_from_the_wrapped_one(tmp_path):
    assert "AdamW" in _exact(_run(tmp_path, WRAPPED), "Sequential")


# ---- 7. the loss of the output cast to float32 after an autocast forward -----------------------------------------
CAST = """
import torch, torch.nn as nn, torch.nn.functional as F
m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 64, 10))
opt = torch.optim.Adam(m.parameters())
x, y = torch.ones(8, 3, 8, 8), torch.arange(8)
MEASURE
for i in range(3):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(x)
    loss = F.cross_entropy(out.float(), y)
    opt.zero_grad(); loss.backward(); opt.step()
MEASURED
"""


def test_the_loss_of_the_output_cast_to_float32_is_seen_and_replayed_as_that_cast(tmp_path):
    """AMP scripts compute the loss of `logits.float()`: a new tensor, not a view, recognised by its ToDtype node
    whose input is the output's node, and replayed as the same cast (a float32 copy of the logits on the peak)."""
    line = _exact(_run(tmp_path, CAST.replace("MEASURED\n", MEASURED).replace("MEASURE\n", MEASURE)), "Sequential")
    assert "loss F.cross_entropy, Adam, autocast bfloat16" in line and "not seen" not in line
