"""`python -m gpumemnet run`'s replay of the first training step on meta (gpumemnet/memory/first_step.py,
estimator.py, _meta_model.py) in the cases that made it fail or disturb the run: a NumPy Generator drawn from in
forward, a Hugging Face style call (keyword inputs, the loss inside a dict or dataclass output), autocast opened
for the input's device inside forward, a lambda closing over the module (a tied output layer), a loss applied
to a view of an inline model call, one applied to the output cast to float32, parameters read from outside the
model (the replay must not touch their .grad), DistributedDataParallel, graph tensors in list attributes, an
optimizer wrapper taking an optimizer, and the lines for what it cannot replay. Each script runs in a subprocess
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


# ---- 8. a forward reading parameters from outside the model (pyro's global param store) -------------------------
OUTSIDE = """
import torch, torch.nn as nn
REG = {}                                 # pyro's param store: forward fetches parameters by name
class Guide(nn.Module):
    def __init__(self):
        super().__init__(); self.loc = nn.Parameter(torch.tensor([1.0, 2.0, 3.0])); REG["loc"] = self.loc
        self.lin = nn.Linear(3, 3)
    def forward(self, x):
        return FORWARD
REG["scale"] = nn.Parameter(torch.ones(3))   # a parameter of no module
W = nn.Parameter(torch.ones(3))
H = W.exp()                              # a graph tensor made outside, before the steps (its node saves its output)
g = Guide(); x = torch.ones(2, 3)
opt = torch.optim.SGD(list(g.parameters()) + [REG["scale"], W], lr=0.1)
(REG["loc"] ** 2).sum().backward()       # an earlier term: .grad already holds something
for step in range(2):
    g(x).pow(2).sum().backward(retain_graph=True); opt.step()
print("GRADS", [None if t.grad is None else [round(v, 4) for v in t.grad.tolist()]
                for t in (g.loc, REG["scale"], W, g.lin.bias)])
"""


@pytest.mark.parametrize("forward, said", [
    ('REG["loc"] * H + REG["scale"]', "the forward reads 3 tensor(s) requiring grad that are not the model's"),
    ('self.lin(x) + REG["loc"] * H', "could not be estimated: ValueError: estimate: the model's forward reads "
                                     "tensors that are not the model's"),
], ids=["outside-only", "mixed-with-the-model"])
def test_the_replay_never_touches_the_gradients_of_real_tensors_read_from_outside_the_model(tmp_path, forward, said):
    """The replay's graph reaches the script's own tensors (the module's parameter fetched from a global store
    rather than self, a parameter of no module, a graph tensor made before the steps): its backward added its
    gradients into their .grad (the run trained on wrong gradients) and would free the script's graph. It cuts
    those edges now, and the line says the forward reads tensors from outside the model; where they meet the
    meta copy's, the replay cannot run, and the line says why (it blamed the input's shape)."""
    text = OUTSIDE.replace("FORWARD", forward)
    with_estimate, without = _run(tmp_path, text), _run(tmp_path, text, "--no-estimate")
    line = next(ln for ln in with_estimate.stderr.splitlines() if ln.startswith("gpumemnet run: step 1 of Guide"))
    assert said in line, line
    assert _last(with_estimate).startswith("GRADS") and _last(with_estimate) == _last(without)


# ---- 9. DistributedDataParallel ----------------------------------------------------------------------------------
DDP = """
import os, torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
os.environ.setdefault("MASTER_ADDR", "localhost"); os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("mpi", rank=0, world_size=1)
model = DDP(nn.Linear(10, 5))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.ones(4, 10), torch.zeros(4, 5)
MEASURE
for _ in range(2):
    opt.zero_grad()
    loss = nn.MSELoss()(model(x), y)
    loss.backward(); opt.step()
MEASURED
print("LOSS %.6f" % loss.item())
dist.destroy_process_group()
"""


def test_a_model_wrapped_in_distributed_data_parallel_is_replayed_as_its_module_under_ddp(tmp_path):
    """The wrapper's process group cannot be copied ("cannot pickle 'module' object"): its module is replayed
    under the estimate's own DDP wrapper, on the wrapper's world size."""
    text = DDP.replace("MEASURED\n", MEASURED).replace("MEASURE\n", MEASURE)
    r = _run(tmp_path, text)
    line = _exact(r, "Linear")
    assert "Linear in DistributedDataParallel over 1 rank(s) (input (4, 10), loss MSELoss, SGD)" in line
    assert _last(r) == _last(_run(tmp_path, text, "--no-estimate"))


# ---- 10. graph tensors kept in a list attribute (reinforce's policy.saved_log_probs) -----------------------------
SAVED = """
import torch, torch.nn as nn, torch.nn.functional as F
class Policy(nn.Module):
    def __init__(self):
        super().__init__(); self.affine = nn.Linear(4, 2); self.saved_log_probs = []; self.rewards = {"r": []}
    def forward(self, x):
        return F.softmax(self.affine(x), dim=1)
torch.manual_seed(0)
policy = Policy(); opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
for ep in range(2):
    for t in range(3):
        probs = policy(torch.ones(1, 4) * t)
        policy.saved_log_probs.append(torch.log(probs[0, 1])); policy.rewards["r"].append(probs.sum())
    opt.zero_grad()
    loss = -torch.stack(policy.saved_log_probs).sum()
    loss.backward(); opt.step()
    del policy.saved_log_probs[:]
print("LOSS %.4f" % loss.item(), len(policy.rewards["r"]))
"""


def test_graph_tensors_in_list_and_dict_attributes_get_meta_twins_in_the_copy(tmp_path):
    """deepcopy refuses a tensor in a graph ("only leaf tensors can be deep-copied"): the copy holds meta twins
    of the tensors in the module's plain lists and dicts, as of its plain tensor attributes."""
    r = _run(tmp_path, SAVED)
    assert "loss not seen (output.sum() instead), Adam) on cpu" in _line(r, "Policy")
    assert _last(r) == _last(_run(tmp_path, SAVED, "--no-estimate"))


# ---- 11. an optimizer wrapper that takes an optimizer (opacus' DPOptimizer) --------------------------------------
DPOPT = """
import gc, torch, torch.nn as nn, torch.nn.functional as F
class DPOptimizer(torch.optim.Optimizer):     # opacus': shares the wrapped optimizer's groups and state
    def __init__(self, optimizer, *, noise_multiplier, max_grad_norm):
        self.original_optimizer, self.noise_multiplier, self.max_grad_norm = optimizer, noise_multiplier, max_grad_norm
    @property
    def param_groups(self): return self.original_optimizer.param_groups
    @property
    def defaults(self): return self.original_optimizer.defaults
    @property
    def state(self): return self.original_optimizer.state
    def zero_grad(self, set_to_none=True): self.original_optimizer.zero_grad(set_to_none)
    def step(self, closure=None): return self.original_optimizer.step(closure)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
gc.collect()  # the optimizer itself moves to an older generation: gc lists the wrapper first
dp = DPOptimizer(opt, noise_multiplier=1.0, max_grad_norm=1.0)
x, y = torch.ones(3, 4), torch.tensor([0, 1, 0])
""" + MEASURE + """
for _ in range(2):
    loss = F.cross_entropy(model(x), y)
    dp.zero_grad(); loss.backward(); dp.step()
""" + MEASURED


def test_an_optimizer_wrapper_taking_an_optimizer_gives_way_to_the_optimizer_it_wraps(tmp_path):
    """DPOptimizer(optimizer, *, noise_multiplier, ...) holds the same groups: picked at times by gc's order, its
    rebuild failed ("missing 3 required keyword-only arguments"). The optimizer it wraps is rebuilt."""
    line = _exact(_run(tmp_path, DPOPT), "Sequential")
    assert "loss F.cross_entropy, Adam) on cpu" in line


# ---- 12. what the replay cannot do, said plainly and once --------------------------------------------------------
ITEM = """
import torch, torch.nn as nn, torch.nn.functional as F
class Net(nn.Module):                    # transformers' mask utilities: a Python branch on the mask's values
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(10, 8); self.fc = nn.Linear(8, 3)
    def forward(self, ids, mask):
        h = self.emb(ids)
        if not bool((mask == 1).all()):
            h = h * mask[..., None]
        return self.fc(h.mean(1))
model = Net(); opt = torch.optim.AdamW(model.parameters())
ids, mask, y = torch.zeros(4, 6, dtype=torch.long), torch.ones(4, 6), torch.tensor([0, 1, 2, 0])
for step in range(2):
    F.cross_entropy(model(ids, mask), y).backward(); opt.step(); opt.zero_grad()
print("done")
"""


def test_a_forward_reading_tensor_values_is_named_as_such_not_blamed_on_the_input(tmp_path):
    r = _run(tmp_path, ITEM)
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("gpumemnet run: step 1 of Net"))
    assert "could not be estimated" in line and "reads tensor values (.item(), bool()" in line, line
    assert "does not accept an input" not in line


CHECKPOINT_NONE = """
import torch, torch.nn as nn
from torch.utils.checkpoint import checkpoint
class Block(nn.Module):
    def __init__(self): super().__init__(); self.l = nn.Linear(8, 8)
    def forward(self, x, mask=None): return torch.relu(self.l(x))
class Net(nn.Module):
    def __init__(self): super().__init__(); self.b = Block(); self.h = nn.Linear(8, 1)
    def forward(self, x): return self.h(checkpoint(self.b, x, None, use_reentrant=False))
class Func(nn.Module):                   # torchdiffeq: a new module around the ODE's function per odeint call
    def __init__(self, f): super().__init__(); self.f = f
    def forward(self, t, y): return self.f(y) * t
net, blk = Net(), Block()
opt = torch.optim.SGD(list(net.parameters()) + list(blk.parameters()), lr=0.1)
x, y = torch.ones(4, 8), torch.zeros(4, 1)
MEASURE
for _ in range(3):
    loss = nn.functional.mse_loss(net(x), y); loss.backward(); opt.step(); opt.zero_grad()
MEASURED
for _ in range(3):
    blk(x, None).sum().backward()        # None positional: replayed as mask=None
for _ in range(3):
    Func(blk)(0.5, x).sum().backward()
print("done")
"""


def test_a_checkpointed_block_is_not_a_step_and_none_arguments_are_replayed(tmp_path):
    """checkpoint(block, x, None) recomputes the block in backward, with no module around it: it was reported as
    a training step of its own that takes NoneType arguments. A None passed positionally is replayed by name, and
    a module the script makes anew for each call (torchdiffeq's _PerturbFunc) is said not estimated once."""
    r = _run(tmp_path, CHECKPOINT_NONE.replace("MEASURED\n", MEASURED).replace("MEASURE\n", MEASURE))
    _exact(r, "Net")
    assert "Block is not estimated" not in r.stderr
    _line(r, "Block")
    skipped = [ln for ln in r.stderr.splitlines() if "step 1 of Func is not estimated" in ln]
    assert len(skipped) == 1 and "takes float arguments" in skipped[0], r.stderr


LBFGS = """
import torch
m = torch.nn.Linear(3, 1)
opt = torch.optim.LBFGS(m.parameters(), lr=0.1)
x = torch.ones(4, 3)
def closure():
    opt.zero_grad(); loss = m(x).pow(2).mean(); loss.backward(); return loss
for _ in range(2):
    opt.step(closure)
print("done")
"""


def test_an_optimizer_step_with_a_closure_is_named_as_such(tmp_path):
    """LBFGS (pykan's too): its step reads the loss's values, which the replay's meta tensors do not have; said in
    words instead of step()'s TypeError, and the script runs on."""
    r = _run(tmp_path, LBFGS)
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("gpumemnet run: step 1 of Linear"))
    assert "LBFGS.step takes a closure" in line and "TypeError" not in line, line
    assert r.stdout.strip().endswith("done")
