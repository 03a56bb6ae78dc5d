"""estimate() made wherever a script is: inside its autocast region (the OOM explainer of a forward under
autocast), in a validation block under no_grad, for the CPU with offload asked for (which the CPU does not do),
and for a model with hooks of its own. Each figure is the measured peak of the same steps, or says why not."""
import contextlib
import gc
import warnings

import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F


@pytest.fixture(autouse=True)
def clean():
    yield
    gc.collect()
    gm.memory.empty_cache("cpu")
    gm.memory.empty_cache("meta")


def _cnn():
    gm.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(8 * 8 * 8, 10))


def _measured(make_opt, soc=False, amp=False, steps=3):
    """The peak of `steps` training steps of a fresh _cnn() (cross-entropy, batch of 4) over the bytes held
    before the model, its batch and its optimizer were made: estimate()'s total."""
    gc.collect()
    gm.memory.empty_cache("cpu")
    base = gm.memory.memory_allocated("cpu")
    model = _cnn()
    x, y = gm.randn(4, 3, 8, 8), gm.randint(0, 10, (4,))
    opt = make_opt(model.parameters())
    gm.memory.reset_peak_memory_stats("cpu")
    for _ in range(steps):
        with gm.autocast("cpu", dtype=gm.bfloat16, enabled=amp), \
                (gm.autograd.graph.save_on_cpu() if soc else contextlib.nullcontext()):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        del loss
    return gm.memory.max_memory_allocated("cpu") - base


def test_inside_an_autocast_region_the_step_is_the_regions():
    """The caller's region stands for the step's autocast (its forward and loss in it), not for the estimate's own
    work: it cached the casts of the whole estimate (a third over the measured peak)."""
    model = _cnn()
    want = gm.memory.estimate(model, (3, 8, 8), F.cross_entropy, batch_size=4, autocast=gm.bfloat16)
    with gm.autocast("cpu", dtype=gm.bfloat16):
        got = gm.memory.estimate(model, (3, 8, 8), F.cross_entropy, batch_size=4)
        assert gm.is_autocast_enabled("cpu")  # the caller's region is back
    assert got.total == want.total == _measured(gm.optim.Adam, amp=True)


def test_under_no_grad_estimate_plan_and_max_batch_size_run_the_training_step():
    model = _cnn()
    want = gm.memory.estimate(model, (3, 8, 8), batch_size=4).total
    with gm.no_grad():
        assert gm.memory.estimate(model, (3, 8, 8), batch_size=4).total == want
        assert gm.memory.max_batch_size(model, (3, 8, 8), budget=1 << 22) > 0
        assert gm.memory.plan(model, (3, 8, 8), batch_size=4, budget=1 << 22).predicted_peak > 0
        assert not gm.is_grad_enabled()


@pytest.mark.parametrize("offload, soc", [(True, False), (False, True), (True, True)],
                         ids=["Adam offload", "save_on_cpu", "both"])
def test_offload_on_the_cpu_is_estimated_as_the_cpu_runs_it(offload, soc):
    """On the CPU both are no-ops (Adam warns that it runs as without offload; save_on_cpu keeps CPU tensors where
    they are): the estimate was priced as if bytes left the device (40 % under the measured peak)."""
    make = (lambda ps: gm.optim.Adam(ps, lr=1e-2, offload="cpu")) if offload else \
        (lambda ps: gm.optim.Adam(ps, lr=1e-2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = gm.memory.estimate(_cnn(), (3, 8, 8), F.cross_entropy, make, batch_size=4, save_on_cpu=soc)
        plain = gm.memory.estimate(_cnn(), (3, 8, 8), F.cross_entropy, batch_size=4, save_on_cpu=soc)
        measured = _measured(make, soc=soc)
    assert (est.host_peak, est.bytes_moved) == (0, 0)
    assert est.total == plain.total == measured


def test_hooks_the_estimate_does_not_run_are_named():
    model = _cnn()
    assert gm.memory.estimate(model, (3, 8, 8), batch_size=4).notes == []
    model[1].register_forward_hook(lambda m, i, o: o * 2)
    for p in model[0].parameters():
        p.register_hook(lambda g: g.clamp(-1, 1))
    notes = gm.memory.estimate(model, (3, 8, 8), batch_size=4).notes
    assert any(n.startswith("the model's 3 hook(s)") and "not counted" in n for n in notes), notes
