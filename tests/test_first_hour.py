"""What a PyTorch user met in gpumemnet's first hour (issue 12 §6, bullets 2-7), each fixed: real signatures and
one argument order for estimate/plan/max_batch_size; OOM remedies checked against the limit, with plan()'s answer
when none fits; memory figures with one definition (the breakdown at the moment of the peak, a named category for
activation gradients, MiB/GiB, the same inference peak in summary and estimate); torch.cuda.amp's names warn and
disable themselves without CUDA, as PyTorch's do."""
import inspect
import os
import pydoc
import re
import subprocess
import sys
import warnings

import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet.memory import planner as _plan

# the gpumemnet this test imported (installed, an in-place build, the sanitizer's build), for subprocesses
GM_PATH = os.path.dirname(os.path.dirname(gm.__file__))
SAMPLE = (1, 8, 8)


def _model():
    gm.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10))


# ---- signatures and one argument order -----------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [gm.memory.estimate, gm.memory.plan, gm.memory.max_batch_size])
def test_real_signatures_in_the_same_order(fn):
    params = inspect.signature(fn).parameters
    kinds = {p.kind for p in params.values()}
    assert inspect.Parameter.VAR_POSITIONAL not in kinds and inspect.Parameter.VAR_KEYWORD not in kinds
    names = list(params)
    assert names[:4] == ["model", "input_shape", "loss_fn", "optimizer"]
    common = [n for n in ("batch_size", "target") if n in names]
    assert [n for n in names if n in common] == common  # batch_size before target wherever both are
    text = pydoc.render_doc(fn, renderer=pydoc.plaintext)
    assert f"{fn.__name__}(model, input_shape, loss_fn=None, optimizer=None" in text and "**" not in text


def test_plan_and_max_batch_size_take_estimates_order_and_keywords():
    model, y = _model(), gm.zeros(8, dtype=gm.int64)
    by_position = _plan.plan(model, SAMPLE, F.cross_entropy, None, 8, y, 1 << 30)
    by_keyword = _plan.plan(model=model, loss_fn=F.cross_entropy, input_shape=SAMPLE, batch_size=8, budget=1 << 30,
                            target=y)
    assert repr(by_position) == repr(by_keyword)
    with pytest.raises(TypeError, match="missing required argument: 'budget'"):
        _plan.plan(model, SAMPLE, batch_size=8)
    with pytest.raises(TypeError, match="missing required argument: 'budget'"):
        _plan.max_batch_size(model, SAMPLE)
    assert _plan.max_batch_size(model, SAMPLE, F.cross_entropy, budget=1 << 30, hi=6) == 6


def test_the_former_positional_orders_still_work_and_warn():
    model = _model()
    with pytest.warns(DeprecationWarning, match="the order is now estimate"):
        old = _plan.plan(model, F.cross_entropy, SAMPLE, 8, 1 << 30)
    assert repr(old) == repr(_plan.plan(model, SAMPLE, F.cross_entropy, batch_size=8, budget=1 << 30))
    with pytest.warns(DeprecationWarning, match="budget is now a keyword"):
        assert _plan.max_batch_size(model, SAMPLE, 1 << 30, hi=5) == 5


# ---- memory figures: one definition ----------------------------------------------------------------------------------
def test_every_category_is_named_and_defined_once():
    stats = gm.memory.memory_stats("meta")
    assert tuple(stats["by_category"]) == gm.memory.CATEGORIES == tuple(gm.memory.CATEGORY_DOCS)
    assert "activation_grad" in gm.memory.CATEGORIES and all(gm.memory.CATEGORY_DOCS.values())
    with pytest.raises(ValueError, match="activation, activation_grad, workspace"):
        gm._C.set_category("activation_gradient")


def test_gradients_of_activations_are_tagged_activation_grad():
    seen = {}
    w = gm.randn(16, 16, requires_grad=True)
    h = gm.randn(4, 16) @ w
    h.register_hook(lambda g: seen.update({"h.grad": g._category}))  # (returns None: the gradient is kept)
    out = F.relu(h) * 3.0
    out.sum().backward()
    assert seen == {"h.grad": "activation_grad"} and w.grad._category == "gradient"
    assert gm._C.get_category() == "other"  # backward restores the category it found


def test_at_peak_counts_parameters_and_input_and_adds_up_to_the_peak():
    est = gm.memory.estimate(_model(), SAMPLE, F.cross_entropy, batch_size=32)
    assert est.at_peak["parameter"] == est.param_bytes > 0
    assert est.at_peak["input"] == est.input_bytes > 0
    assert sum(est.at_peak.values()) == est.total
    assert est.at_peak["activation_grad"] > 0 and est.peak_scope.endswith("backward")
    assert est.at_peak["other"] < est.at_peak["activation_grad"]  # "other" is no longer where backward goes


def test_summary_and_estimate_give_the_same_peaks_in_one_unit(capsys):
    model = _model()
    est = gm.memory.estimate(model, SAMPLE, batch_size=32)
    text = gm.summary(model, SAMPLE, batch_size=32)
    capsys.readouterr()
    fmt = gm.memory.format_bytes
    assert f"Inference peak: {fmt(est.inference_total)}" in text and f"inference peak {fmt(est.inference_total)}" \
        in repr(est)
    assert f"Training step peak: {fmt(est.total)}" in text and f"training peak {fmt(est.total)}" in repr(est)
    assert "MB" not in text.replace("MiB", "")  # never MB meaning MiB
    for figure in re.findall(r"(\d+(?:\.\d+)?) ?([KMGT]?i?B)\b", text.split("=" * 78)[-1]):
        assert figure[1] in ("B", "KiB", "MiB", "GiB", "TiB"), figure
    at_line = next(ln for ln in text.splitlines() if ln.startswith("  at that moment: "))
    assert f"parameter {fmt(est.param_bytes)}" in at_line


# ---- OOM remedies against the limit ----------------------------------------------------------------------------------
OOM_SCRIPT = """
import gpumemnet as gm, gpumemnet.nn as nn
gm.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                      nn.Flatten(), nn.Linear(32 * 16 * 16, 10))
x = gm.randn(64, 3, 16, 16)
est = gm.memory.estimate(model, tuple(x.shape))
gm.memory.set_limit("cpu", LIMIT)
opt = gm.optim.Adam(model.parameters())
try:
    model(x).sum().backward()
    opt.step()
except gm.OutOfMemoryError as e:
    print("ERROR", str(e))
    print("PREDICTIONS", [(t.split(":")[0], p) for t, p, s in e.predictions])
    print("PLAN", repr(e.plan))
"""


def _oom_run(limit_expr):
    env = dict(os.environ, PYTHONPATH=GM_PATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", OOM_SCRIPT.replace("LIMIT", limit_expr)], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_oom_remedies_are_checked_against_the_limit_and_plan_is_offered_when_none_fits():
    # a limit below every remedy's need: each says by how much it is still over, and plan()'s answer follows
    out = _oom_run("int(est.total * 0.3)")
    assert "ERROR" in out, out
    remedies = [ln for ln in out.split("predicted by meta runs")[1].splitlines() if ln.startswith("    - ")]
    assert remedies and all("still" in ln and "over the" in ln for ln in remedies), out
    assert "none of these fits the" in out
    assert "gm.memory.plan finds one that does: accumulation_steps=" in out or "nor does any configuration" in out
    # a limit some remedies fit: those say so, and no plan is needed
    out = _oom_run("int(est.total * 0.6)")
    remedies = [ln for ln in out.split("predicted by meta runs")[1].splitlines() if ln.startswith("    - ")]
    assert any(": fits the" in ln for ln in remedies) and any("over the" in ln for ln in remedies), out
    assert "PLAN None" in out and "none of these fits" not in out


# ---- torch.cuda.amp without CUDA -------------------------------------------------------------------------------------
needs_no_cuda = pytest.mark.skipif(gm.cuda.is_available(), reason="checks the behaviour on a machine without CUDA")


@needs_no_cuda
def test_grad_scaler_warns_and_disables_itself_as_pytorch_does():
    for make in (gm.amp.GradScaler, gm.cuda.amp.GradScaler, lambda: gm.amp.GradScaler("cuda")):
        with pytest.warns(UserWarning) as record:
            scaler = make()
        assert [str(w.message) for w in record] == \
            ["torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling."]
        loss = gm.ones(3, requires_grad=True).sum()
        assert not scaler.is_enabled() and scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gm.amp.GradScaler("cpu").is_enabled() and not gm.amp.GradScaler(enabled=False).is_enabled()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        with pytest.warns(UserWarning) as record:
            torch.amp.GradScaler("cuda")
        assert str(record[0].message) == "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  " \
                                         "Disabling."


@needs_no_cuda
def test_cuda_amp_autocast_warns_and_disables_itself():
    with pytest.warns(UserWarning, match="CUDA is not available or torch_xla is imported. Disabling autocast"):
        region = gm.cuda.amp.autocast()
    with region:
        assert not gm.amp.is_autocast_enabled("cuda") and not gm.amp.is_autocast_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gm.cuda.amp.autocast(enabled=False)  # asked for nothing: nothing to warn about


# ---- no driver -------------------------------------------------------------------------------------------------------
def test_no_driver_says_so():
    """A CUDA build on a machine with no NVIDIA driver: the runtime's cudaErrorInsufficientDriver ("driver version
    is insufficient") would send people to upgrade a driver they do not have."""
    info = gm._C._build_info()
    if info["cuda"] in (None, "emulator") or info["cuda_driver"] is not None:
        pytest.skip("needs a real CUDA build on a machine without an NVIDIA driver")
    assert gm.cuda.device_count() == 0
    with pytest.raises(RuntimeError, match="no NVIDIA driver found") as e:
        gm.zeros(2, device="cuda")
    assert "insufficient" not in str(e.value)
