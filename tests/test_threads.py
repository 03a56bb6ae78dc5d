"""State is per thread (DESIGN.md): grad mode, inference mode and autocast set in one thread are not seen in
another; two models trained in two threads at once give exactly what they give one after the other; an
estimate running beside a training loop neither changes the trainer's results (its dropout stream included) nor
its own answer; and two estimates at once each give their own answer."""
import sys
import threading

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn
import gpumemnet.nn.functional as F

STEPS = 8


def _cnn(seed, dropout=0.0):
    gm.manual_seed(seed)
    layers = [nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
              nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers, nn.Linear(32, 5))


def _data(seed, n=6):
    rng = np.random.default_rng(seed)
    x = gm.tensor(rng.standard_normal((n, 3, 8, 8)).astype(np.float32))
    y = gm.tensor(rng.integers(0, 5, n).astype(np.int64))
    return x, y


def _train(model, x, y, losses, steps=STEPS):
    opt = gm.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())


def _params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def _in_threads(*fns):
    """Run each fn in its own thread, started together; re-raise the first exception any of them raised."""
    errors = []
    barrier = threading.Barrier(len(fns))

    def run(fn):
        try:
            barrier.wait()
            fn()
        except BaseException as e:  # noqa: BLE001  (reported in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in fns]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: state shared by mistake then shows on every run
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    if errors:
        raise errors[0]


def test_two_models_trained_at_once_match_one_after_the_other():
    data = [_data(1), _data(2)]
    alone = []
    for i in range(2):
        m, losses = _cnn(10 + i), []
        _train(m, *data[i], losses)
        alone.append((losses, _params(m)))

    models = [_cnn(10), _cnn(11)]
    losses = [[], []]
    _in_threads(*[lambda i=i: _train(models[i], *data[i], losses[i], steps=STEPS) for i in range(2)])
    for i in range(2):
        assert losses[i] == alone[i][0], f"model {i}: losses {losses[i]} in a thread, {alone[i][0]} alone"
        for a, b in zip(_params(models[i]), alone[i][1]):
            np.testing.assert_array_equal(a, b)


def test_an_estimate_beside_a_trainer_changes_neither():
    x, y = _data(3)
    other = _cnn(20, dropout=0.5)  # the estimated model: its meta dropout must not draw from the generator
    reference = gm.memory.estimate(other, (3, 8, 8), loss_fn=F.cross_entropy, batch_size=4).peak

    def trainer_run(estimate_beside):
        model = _cnn(5, dropout=0.3)
        gm.manual_seed(123)  # the dropout stream of the trainer
        losses, peaks, done = [], [], threading.Event()

        def estimator():
            while not done.is_set() or not peaks:
                peaks.append(gm.memory.estimate(other, (3, 8, 8), loss_fn=F.cross_entropy, batch_size=4).peak)

        def trainer():
            try:
                _train(model, x, y, losses, steps=6)
            finally:
                done.set()

        if estimate_beside:
            _in_threads(trainer, estimator)
        else:
            trainer()
        return losses, _params(model), gm.get_rng_state(), peaks

    losses0, params0, rng0, _ = trainer_run(False)
    losses1, params1, rng1, peaks = trainer_run(True)
    assert peaks and set(peaks) == {reference}, f"estimates beside training: {sorted(set(peaks))}, alone {reference}"
    assert losses1 == losses0
    assert rng1.equal(rng0), "the estimate moved the global random stream"
    for a, b in zip(params1, params0):
        np.testing.assert_array_equal(a, b)


def test_an_estimate_leaves_the_random_stream_alone():
    model = _cnn(0, dropout=0.5)
    gm.manual_seed(7)
    before = gm.get_rng_state()
    gm.memory.estimate(model, (3, 8, 8), loss_fn=F.cross_entropy, batch_size=2)
    gm.memory.estimate(model, (3, 8, 8), loss_fn=F.cross_entropy, batch_size=4, checkpoint_segments=2)
    gm.summary(model, (3, 8, 8), batch_size=2)
    assert gm.get_rng_state().equal(before)


def test_grad_mode_is_per_thread():
    a = gm.ones(3, requires_grad=True)
    entered, recorded = threading.Event(), threading.Event()
    seen = {}

    def quiet():  # thread A: no_grad / inference_mode held while B records
        with gm.no_grad():
            seen["a_enabled"] = gm.is_grad_enabled()
            entered.set()
            recorded.wait(10)
            seen["a_graph"] = (a * 2).grad_fn is not None
        with gm.inference_mode():
            seen["a_inference"] = gm.is_grad_enabled()

    def recording():  # thread B: grad mode on, as every new thread starts
        entered.wait(10)
        seen["b_enabled"] = gm.is_grad_enabled()
        out = (a * 3).sum()
        seen["b_graph"] = out.grad_fn is not None
        recorded.set()

    _in_threads(quiet, recording)
    assert seen == {"a_enabled": False, "a_graph": False, "a_inference": False, "b_enabled": True,
                    "b_graph": True}
    assert gm.is_grad_enabled()


def test_no_grad_in_main_thread_is_not_seen_by_a_new_thread():
    seen = []
    with gm.no_grad():
        t = threading.Thread(target=lambda: seen.append(gm.is_grad_enabled()))
        t.start()
        t.join()
        assert not gm.is_grad_enabled()
    assert seen == [True]


def test_autocast_is_per_thread():
    w = gm.ones(4, 4)
    entered, checked = threading.Event(), threading.Event()
    seen = {}

    def casting():
        with gm.autocast("cpu", dtype=gm.bfloat16):
            entered.set()
            checked.wait(10)
            seen["a"] = ((w @ w).dtype, gm.amp.is_autocast_enabled("cpu"))

    def plain():
        entered.wait(10)
        seen["b"] = ((w @ w).dtype, gm.amp.is_autocast_enabled("cpu"))
        checked.set()

    _in_threads(casting, plain)
    assert seen == {"a": (gm.bfloat16, True), "b": (gm.float32, False)}


def test_memory_category_and_scope_are_per_thread():
    entered, checked = threading.Event(), threading.Event()
    seen = {}

    def tagging():
        with gm.memory.category("optimizer"), gm.memory.scope("thread A"):
            entered.set()
            checked.wait(10)
            seen["a"] = (gm._C.set_category("other"), gm._C.set_scope(""))

    def plain():
        entered.wait(10)
        t = gm.empty(256)
        seen["b"] = t._category
        checked.set()

    _in_threads(tagging, plain)
    assert seen == {"a": ("optimizer", "thread A"), "b": "other"}


def test_two_estimates_at_once_give_their_own_answers():
    """The meta device's statistics and limit are process-wide (C): estimates in two threads take turns."""
    models = [_cnn(30), _cnn(31, dropout=0.2)]
    shapes = [(3, 8, 8), (3, 16, 16)]
    ref = [gm.memory.estimate(m, s, loss_fn=F.cross_entropy, batch_size=4).peak for m, s in zip(models, shapes)]
    got = [[], []]

    def run(i):
        for _ in range(10):
            got[i].append(gm.memory.estimate(models[i], shapes[i], loss_fn=F.cross_entropy, batch_size=4).peak)

    _in_threads(lambda: run(0), lambda: run(1))
    assert [set(g) for g in got] == [{ref[0]}, {ref[1]}]


def test_live_objects_are_found_by_class_in_one_call():
    """memory/_live_objects.py: what the estimator and `gpumemnet run` look up among the live objects (host random
    generators, optimizers, loss modules), found by exact type among the classes' subclasses in one C call (the
    list of every object, alive across Python code, made a tuple built in a trainer thread fail: SystemError)."""
    import random

    from gpumemnet.memory._live_objects import live_objects
    rs, rng, sysrand = np.random.RandomState(1), np.random.default_rng(2), random.SystemRandom()
    opt = gm.optim.SGD(gm.nn.Linear(2, 2).parameters(), lr=0.1)
    found = live_objects(np.random.BitGenerator, np.random.RandomState, random.Random, exclude=(random.SystemRandom,))
    assert any(o is rs for o in found) and any(o is rng.bit_generator for o in found)
    assert not any(o is sysrand for o in found)
    assert any(o is opt for o in live_objects(gm.optim.Optimizer))
    with pytest.raises(TypeError, match="expected a set of types"):
        gm._C._live_of_types([int])
