"""RMSprop, Adagrad, Adadelta (and SGD's / Adam's remaining options) against torch.optim on the same parameters and
gradients over several steps: float64 to 1e-12, float32 to its rounding; state_dict keys and values as torch's,
round trips (here and into torch), param_groups' defaults, argument errors; a step allocates nothing once the
state exists, and meta gives the CPU's bytes."""
import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import optim

torch = pytest.importorskip("torch")

SHAPES = [(4, 5), (7,), (2, 3, 3), (1,)]
GROUPS = [[0, 1], [2, 3]]

CASES = {
    "RMSprop": [dict(), dict(lr=0.05, momentum=0.9), dict(centered=True, weight_decay=0.1),
                dict(lr=0.02, alpha=0.9, eps=1e-3, momentum=0.5, centered=True, maximize=True)],
    "Adagrad": [dict(), dict(lr=0.1, lr_decay=0.05), dict(weight_decay=0.1, initial_accumulator_value=0.3),
                dict(lr=0.3, eps=1e-3, maximize=True, lr_decay=0.01)],
    "Adadelta": [dict(), dict(lr=0.5, rho=0.5), dict(weight_decay=0.1, eps=1e-3), dict(maximize=True, rho=0.99)],
    "SGD": [dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
            dict(lr=0.1, momentum=0.5, dampening=0.2, maximize=True)],
    "Adam": [dict(lr=0.01, amsgrad=True, weight_decay=0.1), dict(lr=0.02, amsgrad=True, maximize=True)],
}
RUNS = [(name, [opts[i], opts[(i + 1) % len(opts)]]) for name, opts in CASES.items() for i in range(len(opts))]


def _grads(step, dtype):
    rng = np.random.default_rng(100 + step)
    return [rng.standard_normal(s).astype(dtype) * 2 for s in SHAPES]


def _x0(dtype):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _run(lib, name, opts, dtype, steps=6):
    np_dt = np.float64 if dtype == "float64" else np.float32
    if lib is torch:
        ps = [torch.tensor(x, requires_grad=True) for x in _x0(np_dt)]
        o = getattr(torch.optim, name)([dict(params=[ps[i] for i in idx], **op) for idx, op in zip(GROUPS, opts)],
                                       foreach=False)
    else:
        ps = [gm.tensor(x, requires_grad=True) for x in _x0(np_dt)]
        o = getattr(optim, name)([dict(params=[ps[i] for i in idx], **op) for idx, op in zip(GROUPS, opts)])
    for step in range(steps):
        for p, g in zip(ps, _grads(step, np_dt)):
            p.grad = lib.tensor(g)
        o.step()
    return [p.detach().numpy() for p in ps], o


def _np(v):
    if isinstance(v, torch.Tensor):
        return v.detach().numpy()
    if isinstance(v, gm.Tensor):
        return v.numpy()
    return v


@pytest.mark.parametrize("name,opts", RUNS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(RUNS)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_torch(name, opts, dtype):
    got, go = _run(gm, name, opts, dtype)
    want, to = _run(torch, name, opts, dtype)
    rtol, atol = (1e-12, 1e-13) if dtype == "float64" else (2e-6, 2e-6)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    gs, ts = go.state_dict(), to.state_dict()
    assert sorted(gs["state"]) == sorted(ts["state"])
    for k in ts["state"]:
        assert sorted(gs["state"][k]) == sorted(ts["state"][k]), name
        for key, tv in ts["state"][k].items():
            np.testing.assert_allclose(np.asarray(_np(gs["state"][k][key]), np.float64),
                                       np.asarray(_np(tv), np.float64), rtol=rtol * 10, atol=atol * 10)
    for gg, tg in zip(gs["param_groups"], ts["param_groups"]):
        for key in tg:
            if key not in ("foreach", "fused", "differentiable", "capturable", "decoupled_weight_decay"):
                assert gg[key] == tg[key], (name, key)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta"])
def test_defaults_are_torch(name):
    import inspect
    gsig = inspect.signature(getattr(optim, name))
    tsig = inspect.signature(getattr(torch.optim, name))
    for pname, tp in tsig.parameters.items():
        assert pname in gsig.parameters, pname
        assert gsig.parameters[pname].default == tp.default, pname
        assert gsig.parameters[pname].kind == tp.kind, pname


@pytest.mark.parametrize("name,opts", [("RMSprop", dict(momentum=0.9, centered=True)), ("Adagrad", dict(lr_decay=0.1)),
                                       ("Adadelta", dict())])
def test_state_dict_round_trip_and_into_torch(name, opts):
    _, o = _run(gm, name, [opts, opts], "float64", steps=3)
    sd = o.state_dict()
    ps = [gm.tensor(x, requires_grad=True) for x in _run(gm, name, [opts, opts], "float64", steps=3)[0]]
    o2 = getattr(optim, name)([dict(params=[ps[i] for i in idx], **opts) for idx in GROUPS])
    o2.load_state_dict(sd)
    # continue both: the same parameters
    ref = [gm.tensor(x, requires_grad=True) for x in _run(gm, name, [opts, opts], "float64", steps=3)[0]]
    for step in range(3, 6):
        for p, g in zip(ps, _grads(step, np.float64)):
            p.grad = gm.tensor(g)
        o2.step()
    full, _ = _run(gm, name, [opts, opts], "float64", steps=6)
    for p, f in zip(ps, full):
        np.testing.assert_array_equal(p.detach().numpy(), f)
    del ref
    # torch loads ours
    tps = [torch.tensor(x, requires_grad=True) for x in _run(gm, name, [opts, opts], "float64", steps=3)[0]]
    to = getattr(torch.optim, name)([dict(params=[tps[i] for i in idx], **opts) for idx in GROUPS])
    to.load_state_dict({"state": {k: {kk: torch.tensor(_np(vv)) if kk != "step" else torch.tensor(float(vv))
                                      for kk, vv in v.items()} for k, v in sd["state"].items()},
                        "param_groups": [dict(g, foreach=False) for g in sd["param_groups"]]})
    for step in range(3, 6):
        for p, g in zip(tps, _grads(step, np.float64)):
            p.grad = torch.tensor(g)
        to.step()
    for p, f in zip(tps, full):
        np.testing.assert_allclose(p.detach().numpy(), f, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("make", [lambda ps: optim.RMSprop(ps, momentum=0.9, centered=True),
                                  lambda ps: optim.Adagrad(ps, lr_decay=0.1), lambda ps: optim.Adadelta(ps)],
                         ids=["rmsprop", "adagrad", "adadelta"])
def test_steps_allocate_nothing_and_meta_matches_cpu(make):
    def run(device):
        gm.memory.reset_peak_memory_stats(device)
        ps = [gm.zeros(*s, device=device, requires_grad=True) for s in [(300, 200), (17,)]]
        o = make(ps)
        for p in ps:
            p.grad = gm.ones(*p.shape, device=device)
        before = gm.memory.memory_allocated(device)
        o.step()
        after_first = gm.memory.memory_allocated(device)
        gm.memory.reset_peak_memory_stats(device)
        o.step()
        o.step()
        assert gm.memory.max_memory_allocated(device) == after_first  # later steps allocate nothing
        return after_first - before, gm.memory.memory_stats(device)["by_category"].get("optimizer")
    cpu, meta = run("cpu"), run("meta")
    assert cpu == meta
    assert cpu[0] >= 0


def test_adagrad_state_exists_before_the_first_step_as_in_torch():
    p, q = gm.zeros(3, requires_grad=True), torch.zeros(3, requires_grad=True)
    go, to = optim.Adagrad([p], initial_accumulator_value=0.5), torch.optim.Adagrad([q], initial_accumulator_value=0.5)
    assert sorted(go.state_dict()["state"][0]) == sorted(to.state_dict()["state"][0])
    np.testing.assert_array_equal(go.state[p]["sum"].numpy(), to.state[q]["sum"].numpy())
    r = gm.zeros(2, requires_grad=True)
    go.add_param_group({"params": [r], "lr": 0.5, "initial_accumulator_value": 0.25})
    assert go.state[r]["sum"].numpy().tolist() == [0.5, 0.5]  # the constructor's value, as torch fills it


def test_half_types_follow_float32():
    for name, opts in (("RMSprop", dict(momentum=0.9, centered=True)), ("Adagrad", dict()), ("Adadelta", dict())):
        x = np.random.default_rng(1).standard_normal(50)
        res = {}
        for dt in (gm.float32, gm.float16, gm.bfloat16):
            p = gm.tensor(x, dtype=dt, requires_grad=True)
            o = getattr(optim, name)([p], **opts)
            for step in range(4):
                p.grad = gm.tensor(np.random.default_rng(step).standard_normal(50), dtype=dt)
                o.step()
            res[dt] = p.detach().float().numpy()
        np.testing.assert_allclose(res[gm.float16], res[gm.float32], rtol=0, atol=2e-2)
        np.testing.assert_allclose(res[gm.bfloat16], res[gm.float32], rtol=0, atol=1e-1)


@pytest.mark.parametrize("name,kw,match", [
    ("RMSprop", dict(lr=-1.0), "lr"), ("RMSprop", dict(alpha=-0.1), "alpha"), ("RMSprop", dict(eps=-1.0), "eps"),
    ("RMSprop", dict(momentum=-0.5), "momentum"), ("RMSprop", dict(weight_decay=-1.0), "weight_decay"),
    ("Adagrad", dict(lr_decay=-1.0), "lr_decay"), ("Adagrad", dict(initial_accumulator_value=-1.0),
                                                   "initial_accumulator_value"),
    ("Adadelta", dict(rho=1.5), "rho"), ("Adadelta", dict(lr=-0.1), "lr"),
])
def test_argument_errors_like_torch(name, kw, match):
    with pytest.raises(ValueError):
        getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)], **kw)
    with pytest.raises(ValueError, match=match):
        getattr(optim, name)([gm.zeros(1, requires_grad=True)], **kw)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta"])
def test_differentiable_is_refused(name):
    # torch supports it (steps recorded by autograd); a fused in-place kernel cannot be, so say so
    with pytest.raises(ValueError, match="differentiable=True is not supported"):
        getattr(optim, name)([gm.zeros(1, requires_grad=True)], differentiable=True)


def test_c_entry_points_check_their_lists():
    from gpumemnet import _C
    p, g = [gm.zeros(3)], [gm.ones(3)]
    with pytest.raises(TypeError, match="momentum_buffers must be a sequence of Tensors, got None"):
        _C.rmsprop_step_(p, g, [gm.zeros(3)], None, None, 0.01, 0.99, 1e-8, 0.0, 0.9)
    with pytest.raises(ValueError, match="square_avgs has 2 entries"):
        _C.rmsprop_step_(p, g, [gm.zeros(3), gm.zeros(3)], None, None, 0.01, 0.99, 1e-8)
    with pytest.raises(ValueError, match=r"steps\[0\] must be >= 1"):
        _C.adagrad_step_(p, g, [gm.zeros(3)], [0], 0.01, 0.0, 0.0, 1e-10)
    with pytest.raises(ValueError, match="rho must be in"):
        _C.adadelta_step_(p, g, [gm.zeros(3)], [gm.zeros(3)], 1.0, 2.0, 1e-6, 0.0)
    with pytest.raises(ValueError, match=r"acc_deltas\[0\] has shape \(4,\) but params\[0\] has shape \(3,\)"):
        _C.adadelta_step_(p, g, [gm.zeros(3)], [gm.zeros(4)], 1.0, 0.9, 1e-6, 0.0)
