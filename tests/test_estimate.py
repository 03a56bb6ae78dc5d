"""Know before you run (gpumemnet.memory.estimator): the meta estimate of training equals, byte for byte, the
peak of the same steps really run on the CPU (the highest of three: the second and third run with Adam's state;
digits CNN and story 002's UNet; plain fp32, checkpoint, autocast bfloat16, accumulation), the real model is
untouched, the story-000 summary reproduces torchsummary's rows and says the network fits the 15.92 GiB card with
a fused Adam, and bad inputs raise clear errors."""
import contextlib
import gc
import os
import sys

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F
from gpumemnet.memory import estimator as _estimate
from gpumemnet.demo import make_model
from story000 import STORY_000_TABLE, Story000

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from seed002_unet import UNet  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20


@pytest.fixture(autouse=True)
def meta_is_left_empty():
    yield
    gc.collect()
    gm.memory.empty_cache("meta")


def _digits():
    return make_model(16)


def _unet(checkpointing=False):
    return UNet(3, 3, 4, 2, checkpointing=checkpointing)


def _real_step(model, x, y=None, k=1, amp=None, segments=None, steps=3):
    """Training steps on the CPU exactly as estimate() describes them (zero_grad() after each step); returns the
    highest peak of the `steps` steps over the bytes live before them (the first step's too: second_step_peak)."""
    opt = gm.optim.Adam(model.parameters())
    gc.collect()
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    m = x.shape[0] // k
    for step in range(steps):
        for i in range(k):
            xi = x[i * m:(i + 1) * m] if k > 1 else x
            with gm.autocast("cpu", dtype=amp) if amp is not None else contextlib.nullcontext():
                out = gm.utils.checkpoint_sequential(model, segments, xi, use_reentrant=False) if segments \
                    else model(xi)
                loss = out.sum() if y is None else F.cross_entropy(out, y[i * m:(i + 1) * m])
            del out
            if k > 1:
                loss = loss / k
            loss.backward()
            del loss
        opt.step()
        opt.zero_grad()
        if step == 0:
            _real_step.first = gm.memory.max_memory_allocated("cpu") - base
    peak = gm.memory.max_memory_allocated("cpu") - base
    del opt
    return peak


CASES = [dict(), dict(segments=2), dict(amp=gm.bfloat16), dict(k=4)]


def _ids(c):
    return ",".join(f"{k}={v}" for k, v in c.items()) or "fp32"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_digits_estimate_equals_the_cpu_step(case):
    gm.manual_seed(0)
    model = _digits()
    x = gm.randn(32, 1, 8, 8)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    rng = gm.get_rng_state()
    est = _estimate.estimate(model, (1, 8, 8), batch_size=32, checkpoint_segments=case.get("segments"),
                             autocast=case.get("amp"), accumulation_steps=case.get("k", 1))
    # untouched: values bitwise, no gradients, the generator where it was
    for a, p in zip(before, model.parameters()):
        np.testing.assert_array_equal(a, p.detach().numpy())
        assert p.grad is None and p._device == "cpu"
    assert all(np.array_equal(a, b) for a, b in zip(np.atleast_1d(rng), np.atleast_1d(gm.get_rng_state())))
    assert gm.memory.memory_allocated("meta") == 0
    gm.memory.empty_cache("cpu")
    assert est.peak == _real_step(model, x, **case)
    assert est.first_step_peak == _real_step.first < est.peak  # Adam's state makes the later steps higher
    assert est.params == sum(p.numel() for p in model.parameters()) == est.trainable
    assert est.optimizer_bytes >= 2 * est.params * 4 and est.gradient_bytes >= est.params * 4
    assert 0 < est.inference_peak < est.peak
    # the breakdown at the moment of the peak counts everything the device holds then: it sums to the peak
    assert sum(est.at_peak.values()) == est.total == est.param_bytes + est.input_bytes + est.peak
    assert est.at_peak["parameter"] == est.param_bytes > 0 and est.at_peak["input"] == est.input_bytes > 0
    assert [r.type for r in est.layers] == [type(m).__name__ for m in model.children()]


@pytest.mark.parametrize("case", [dict(), dict(checkpointing=True), dict(amp=gm.bfloat16), dict(k=2)], ids=_ids)
def test_unet_estimate_equals_the_cpu_step(case):
    gm.manual_seed(0)
    model = _unet(case.get("checkpointing", False))
    x, y = gm.randn(4, 3, 16, 16), gm.zeros(4, 16, 16, dtype=gm.int64)
    est = _estimate.estimate(model, (4, 3, 16, 16), loss_fn=F.cross_entropy, target=y, autocast=case.get("amp"),
                             accumulation_steps=case.get("k", 1))
    assert all(p.grad is None for p in model.parameters())
    gm.memory.empty_cache("cpu")
    assert est.peak == _real_step(model, x, y, k=case.get("k", 1), amp=case.get("amp"))
    assert est.first_step_peak == _real_step.first < est.peak


def test_techniques_order_as_expected():
    model = _unet()
    plain = _estimate.estimate(model, (3, 16, 16), batch_size=4)
    ck = _estimate.estimate(_unet(True), (3, 16, 16), batch_size=4)
    acc = _estimate.estimate(model, (3, 16, 16), batch_size=4, accumulation_steps=4)
    assert ck.activation_bytes < plain.activation_bytes and acc.activation_bytes < plain.activation_bytes
    assert plain.peak_reserved >= plain.total


def test_layer_rows_record_saved_bytes():
    gm.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    est = _estimate.estimate(model, (8,), batch_size=32)
    assert [(r.path, r.type, r.output_shape, r.params) for r in est.layers] == \
        [("0", "Linear", (32, 16), 144), ("1", "ReLU", (32, 16), 0), ("2", "Linear", (32, 4), 68)]
    # ReLU saves its output (32 x 16 floats, one 2 KiB block); the second Linear saves its input, which is that
    # same tensor: nothing new
    assert est.layers[1].kept == 2048 and est.layers[2].kept == 0


# ---- summary -------------------------------------------------------------------------------------------------------
def test_story_000_summary_rows_and_verdict(capsys):
    model = Story000(device="meta")
    text = gm.memory.summary(model, (2, 384, 160), capacity=int(15.92 * GiB))
    assert capsys.readouterr().out.strip() == text.strip()
    lines = text.splitlines()
    rows = [ln for ln in lines if ln.strip() and ln.split()[0][-2:].strip("-").isdigit()
            and "-" in ln.split()[0]]
    expected = STORY_000_TABLE.splitlines()
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected):
        assert got.startswith(want), (got, want)
    assert "Total params: 953,937,904" in text
    # 953.9M params x 16 B (weights, gradients, Adam's two moments) = 14.2 GiB: fits with the fused Adam
    assert lines[-1].startswith("fits: 14.2") and lines[-1].endswith("of 15.92 GiB")
    est_small = gm.memory.summary(model, (2, 384, 160), capacity=14 * GiB)
    assert est_small.splitlines()[-1].startswith("does not fit: needs 14.2")
    del model


def test_summary_uses_the_device_limit(capsys):
    gm.memory.set_limit("cpu", 1 << 20)
    try:
        text = gm.memory.summary(_digits(), (1, 8, 8), batch_size=8)
    finally:
        gm.memory.set_limit("cpu", None)
    # the 1 MiB limit is below one 2 MiB segment: the step fits the way the allocator then works (see below)
    assert "[8, 8, 8, 8]" in text and "of 1.00 MiB" in text.splitlines()[-1]


def test_summary_counts_the_allocators_segments(capsys):
    """Allocated bytes within the capacity are not enough: the step also needs the allocator's segments. Between
    the two, summary runs the step under the capacity as a limit and says which way it went."""
    model = _digits()
    est = _estimate.estimate(model, (1, 8, 8), batch_size=64)
    assert est.total < est.peak_reserved  # 2 MiB segments for a ~1 MiB step
    last = lambda cap: gm.memory.summary(model, (1, 8, 8), batch_size=64, capacity=cap).splitlines()[-1]  # noqa

    assert last(est.peak_reserved) == est.verdict(est.peak_reserved)  # even an empty cache's segments fit
    assert last(est.total - 512).startswith("does not fit: needs")  # allocated bytes alone do not fit
    # exactly the allocated bytes: the first segment of backward's gradients finds no room
    tight = last(est.total)
    assert tight.startswith(f"does not fit: needs {_estimate._fmt(est.total)} allocated, which is within")
    assert "segments" in tight and "out of memory on meta" in tight
    with pytest.raises(gm.OutOfMemoryError):
        _estimate.estimate(model, (1, 8, 8), batch_size=64, limit=est.total)
    # halfway: the step fits once the allocator frees its cache, as estimate(limit=) shows
    half = (est.total + est.peak_reserved) // 2
    _estimate.estimate(model, (1, 8, 8), batch_size=64, limit=half)
    assert last(half) == est.verdict(half) + " (with the allocator releasing its cache during the step)"
    capsys.readouterr()


# ---- errors --------------------------------------------------------------------------------------------------------
def test_input_shape_that_does_not_fit_the_model():
    with pytest.raises(ValueError, match=r"does not accept an input of shape \(2, 3, 8, 8\)"):
        _estimate.estimate(_digits(), (3, 8, 8), batch_size=2)


def test_loss_that_is_not_a_scalar():
    with pytest.raises(ValueError, match=r"loss must be a scalar tensor, got \(2, 10\)"):
        _estimate.estimate(_digits(), (1, 8, 8), batch_size=2, loss_fn=lambda out, y: out)


def test_bad_arguments():
    with pytest.raises(ValueError, match="has no parameters"):
        _estimate.estimate(nn.Sequential(nn.ReLU()), (4,), batch_size=2)
    with pytest.raises(TypeError, match="must be a gpumemnet.nn.Module"):
        _estimate.estimate(lambda x: x, (4,))
    with pytest.raises(ValueError, match="input_shape must be positive ints"):
        _estimate.estimate(_digits(), (1, 0, 8))
    with pytest.raises(ValueError, match="batch of 6 .* does not split into 4"):
        _estimate.estimate(_digits(), (1, 8, 8), batch_size=6, accumulation_steps=4)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        _estimate.estimate(_digits(), (1, 8, 8), batch_size=0)
    with pytest.raises(TypeError, match="optimizer must be a function of the parameters .* got str 'adam'"):
        _estimate.estimate(_digits(), (1, 8, 8), batch_size=2, optimizer="adam")


def test_state_the_optimizers_constructor_makes_is_in_the_total():
    """Adagrad makes its state_sum when it is built, before any step: the estimate's total counts it (it held
    2 MiB less than the measured peak), as optimizer_bytes and optimizer_init_bytes do, and the breakdown at the
    peak still sums to the total."""
    gm.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 10))
    make = lambda ps: gm.optim.Adagrad(ps, lr=0.01)  # noqa: E731
    est = _estimate.estimate(model, (1024,), F.cross_entropy, make, batch_size=8)
    gc.collect()
    gm.memory.empty_cache("cpu")
    base = gm.memory.memory_allocated("cpu") - est.param_bytes  # the model is the only thing held from before
    x, y = gm.randn(8, 1024), gm.randint(0, 10, (8,))
    opt = make(model.parameters())
    gm.memory.reset_peak_memory_stats("cpu")
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        del loss
        opt.step()
    measured = gm.memory.max_memory_allocated("cpu") - base
    state = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values() if gm.is_tensor(t))
    del opt
    assert est.total == measured == sum(est.at_peak.values())
    assert est.optimizer_init_bytes == est.optimizer_bytes == est.at_peak["optimizer"] >= state > 0


# ---- a PyTorch-style Adam, for comparison ---------------------------------------------------------------------------
def test_torch_style_adam_replays_pytorchs_temporaries():
    import functools
    # weights of 4 MiB and 2 MiB (multiples of 2 MiB: each block is exactly its tensor), a batch of one
    model = nn.Sequential(nn.Linear(1024, 1024, bias=False), nn.Linear(1024, 512, bias=False))
    w = [4 * MiB, 2 * MiB]
    grads = sum(w)
    fused = _estimate.estimate(model, (1, 1024))
    # the first step peaks in Adam.step: in place, no temporaries
    assert fused.first_step_peak == grads + 2 * grads and fused.first_step_scope == "Adam.step"
    # from the second step on the moments are live in backward: layer 0's weight gradient is made while layer 1's
    # is held (the 3 x grads again), plus 5 KiB of small blocks (the 4 KiB gradient flowing into layer 0)
    assert fused.peak == grads + 2 * grads + 5 * 1024 and fused.peak_scope == "0 backward" and fused.peak_step == 2
    assert fused.at_peak["optimizer"] == 2 * grads and fused.at_peak["gradient"] == w[1]
    # PyTorch's loop, first step, at the second weight: its state appears (both weights' moments are then live),
    # then sqrt and quotient for it, while the first weight's denom is still bound to `denom`. From the second
    # step on every moment is live from the start: at the first weight, sqrt and quotient of its size. Both 8 MiB.
    plain = _estimate.estimate(model, (1, 1024), optimizer=gm.memory.TorchStyleAdam)
    assert plain.peak == grads + 2 * grads + 2 * w[1] + w[0] == grads + 2 * grads + 2 * w[0]
    assert plain.peak_scope == "TorchStyleAdam.step" and plain.peak_step == 1 and plain.first_step_peak == plain.peak
    # weight decay: the gradient's copy too; the first step at the second weight, the later ones at the first
    wd = _estimate.estimate(model, (1, 1024), optimizer=functools.partial(gm.memory.TorchStyleAdam,
                                                                           weight_decay=1e-4))
    assert wd.first_step_peak == plain.peak + w[1]
    assert wd.peak == grads + 2 * grads + 3 * w[0] and wd.at_peak["other"] == 3 * w[0] and wd.peak_step == 2
    with pytest.raises(ValueError, match="TorchStyleAdam: parameter 0 is on cpu: this optimizer only replays"):
        gm.memory.TorchStyleAdam(model.parameters())


def test_story_000_peak_with_pytorchs_adam_does_not_fit_the_card():
    import functools
    model = Story000(device="meta")
    card = int(15.92 * GiB)
    ours = _estimate.estimate(model, (1, 2, 384, 160))
    torch_like = _estimate.estimate(model, (1, 2, 384, 160),
                                    optimizer=functools.partial(gm.memory.TorchStyleAdam, weight_decay=1e-4))
    assert ours.fits(card) and not torch_like.fits(card)
    assert torch_like.peak_scope == torch_like.first_step_scope == "TorchStyleAdam.step"
    # the first step's peak is at fc2.weight's turn (every moment is live by then): its gradient's copy, sqrt and
    # quotient, each rounded up by at most a 2 MiB segment (fc1's denom was released at fc1.bias's turn)
    fc1, fc2 = 583_680_000 * 4, 361_019_000 * 4
    assert 3 * fc2 <= torch_like.first_step_at_peak["other"] < 3 * (fc2 + 2 * MiB)
    # every moment but fc2.bias's (76,000 bytes each, block-rounded) is live
    assert ours.optimizer_bytes - 2 * MiB < torch_like.first_step_at_peak["optimizer"] < ours.optimizer_bytes
    # from the second step on every moment is live from the start: the peak is at fc1.weight's turn, the largest
    assert 3 * fc1 <= torch_like.at_peak["other"] < 3 * (fc1 + 2 * MiB) and torch_like.peak_step == 2
    assert torch_like.at_peak["optimizer"] == torch_like.optimizer_bytes
    del model


def test_bad_arguments_of_the_memory_functions_name_themselves():
    model = _digits()
    cases = [
        (ValueError, "checkpoint_segments must be a positive int", lambda: _estimate.estimate(
            model, (1, 8, 8), batch_size=2, checkpoint_segments=0)),
        (ValueError, "autocast must be gm.float16 or gm.bfloat16", lambda: _estimate.estimate(
            model, (1, 8, 8), batch_size=2, autocast=gm.int32)),
        (ValueError, "calibrate: nbytes must be an int", lambda: gm.memory.calibrate(nbytes=-1)),
        (TypeError, "format_bytes: n must be a number of bytes, got str", lambda: gm.memory.format_bytes("a")),
        (TypeError, "categories must be a category name or a list", lambda: gm.memory.set_fallback(
            "cpu", "/nonexistent-dir-not-used", categories=5)),
        (ValueError, "summary: capacity must be a positive number", lambda: gm.memory.summary(
            model, (1, 8, 8), capacity=-1)),
        (ValueError, "summary: batch_size must be a positive int, or -1", lambda: gm.memory.summary(
            model, (1, 8, 8), batch_size=0)),
    ]
    for kind, words, fn in cases:
        with pytest.raises(kind, match=words):
            fn()
    assert gm.memory.get_fallback("cpu") is None


def test_keep_outputs_is_the_loop_that_holds_its_output():
    """estimate() and max_batch_size() model `crit(model(x), y).backward()` by default: the usual loop holds `out =
    model(x)` and the loss through backward and the step, which takes about the output twice more (21% for a
    4000-class head: max_batch_size's batch then ran out of memory in that loop). keep_outputs=True is that loop,
    byte for byte, and its batch fits."""
    def make():
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4000))

    def sgd(ps):
        return gm.optim.SGD(ps, lr=0.1)

    budget = 12 * MiB
    b = gm.memory.max_batch_size(make(), (64,), F.cross_entropy, sgd, budget=budget, keep_outputs=True)
    est = gm.memory.estimate(make(), (64,), F.cross_entropy, sgd, batch_size=b, keep_outputs=True)
    freed = gm.memory.estimate(make(), (64,), F.cross_entropy, sgd, batch_size=b)
    net, x, y = make(), gm.zeros(b, 64), gm.zeros(b, dtype=gm.int64)
    opt = sgd(net.parameters())
    gc.collect()
    gm.memory.reset_peak_memory_stats("cpu")
    base = gm.memory.memory_allocated("cpu")
    for _ in range(3):
        opt.zero_grad()
        out = net(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
    measured = gm.memory.max_memory_allocated("cpu") - base
    del out, loss
    assert est.peak == measured and freed.peak < measured
    assert est.total <= budget
