"""LBFGS, Rprop, ASGD and Adafactor against PyTorch's, from the same float64 parameters: the parameters after each
step agree to tight tolerance (LBFGS on a linear regression and a tiny CNN, with and without its strong-Wolfe line
search; the others from the same gradients, with weight decay and maximize), state_dicts round-trip, and bad
arguments are refused as PyTorch refuses them."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")


def _to_gm(obj):
    """A PyTorch state_dict with its tensors as gpumemnet tensors (what a checkpoint converter hands over)."""
    if isinstance(obj, torch.Tensor):
        return gm.tensor(obj.detach().numpy())
    if isinstance(obj, dict):
        return {k: _to_gm(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_gm(v) for v in obj)
    return obj


# ---- LBFGS ---------------------------------------------------------------------------------------------------
def _regression(lib, r):
    m = lib.nn.Linear(5, 3).double()
    return m, r.randn(16, 5), r.randn(16, 3)


def _cnn(lib, r):
    m = lib.nn.Sequential(lib.nn.Conv2d(1, 2, 3), lib.nn.Tanh(), lib.nn.Flatten(), lib.nn.Linear(2 * 4 * 4, 2))
    return m.double(), r.randn(4, 1, 6, 6), r.randn(4, 2)


def _copy_weights(src, dst, device):
    for (na, a), (nb, b) in zip(src.named_parameters(), dst.named_parameters()):
        assert na == nb
        with gm.no_grad():
            a.copy_(gm.tensor(b.detach().numpy(), device=device))


def _lbfgs_pair(build, device, steps, **kw):
    """(gm losses, torch losses, gm params, torch params) after each of `steps` steps."""
    r = np.random.RandomState(0)
    tm, x, y = build(torch, r)
    gm_model = build(gm, np.random.RandomState(0))[0].to(device)
    _copy_weights(gm_model, tm, device)
    xs = {"gm": (gm.tensor(x, device=device), gm.tensor(y, device=device)), "torch": (torch.tensor(x), torch.tensor(y))}
    out = {}
    for lib, model in (("gm", gm_model), ("torch", tm)):
        L = gm if lib == "gm" else torch
        opt = L.optim.LBFGS(model.parameters(), **kw)
        xin, yin = xs[lib]

        def closure(model=model, opt=opt, xin=xin, yin=yin, L=L):
            opt.zero_grad()
            loss = L.nn.functional.mse_loss(model(xin), yin)
            loss.backward()
            return loss

        losses, params = [], []
        for _ in range(steps):
            losses.append(float(opt.step(closure).detach()))
            params.append([to_np(p) if lib == "gm" else p.detach().numpy().copy() for p in model.parameters()])
        out[lib] = (losses, params, opt)
    return out


LBFGS_CONFIGS = [dict(), dict(line_search_fn="strong_wolfe"), dict(lr=0.5, max_iter=4, history_size=2),
                 dict(lr=0.8, max_iter=5, history_size=3, line_search_fn="strong_wolfe"),
                 dict(max_iter=3, max_eval=4, line_search_fn="strong_wolfe"), dict(max_iter=6, maximize=False)]


@pytest.mark.parametrize("build", [_regression, _cnn], ids=["regression", "cnn"])
@pytest.mark.parametrize("kw", LBFGS_CONFIGS, ids=[str(i) for i in range(len(LBFGS_CONFIGS))])
def test_lbfgs_matches_pytorch(build, kw, device):
    out = _lbfgs_pair(build, device, 4, **kw)
    (la, pa, oa), (lb, pb, ob) = out["gm"], out["torch"]
    np.testing.assert_allclose(la, lb, rtol=1e-9, atol=1e-12)
    for step, (xa, xb) in enumerate(zip(pa, pb)):
        for a, b in zip(xa, xb):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10, err_msg=f"step {step + 1}")
    sa, sb = oa.state_dict()["state"][0], ob.state_dict()["state"][0]
    assert set(sa) == set(sb)
    assert sa["n_iter"] == sb["n_iter"] and sa["func_evals"] == sb["func_evals"]
    assert len(sa["old_dirs"]) == len(sb["old_dirs"])


def test_lbfgs_maximize_climbs_the_negated_loss():
    """maximize=True on -f follows the same iterates as minimising f (PyTorch's negation of loss and gradient)."""
    out = {}
    for lib in (gm, torch):
        w = lib.nn.Parameter(lib.tensor([1.5, -0.5], dtype=lib.float64))
        opt = lib.optim.LBFGS([w], maximize=True, line_search_fn="strong_wolfe")

        def closure(w=w, opt=opt):
            opt.zero_grad()
            loss = -((w - 3.0) ** 2).sum() - (w[0] * w[1]) ** 2
            loss.backward()
            return loss
        for _ in range(2):
            opt.step(closure)
        out[lib.__name__] = w.detach().numpy()
    np.testing.assert_allclose(out["gpumemnet"], out["torch"], rtol=1e-10)


def test_lbfgs_state_dict_round_trip_and_from_pytorch():
    """Loading a state (ours or PyTorch's) continues the same run."""
    res = {}
    for src in ("gm", "torch"):
        r = np.random.RandomState(3)
        w0, t = r.randn(4), r.randn(4)

        def make(L):
            w = L.nn.Parameter(L.tensor(w0.copy()))
            opt = L.optim.LBFGS([w], max_iter=3, history_size=5)
            target = L.tensor(t)

            def closure():
                opt.zero_grad()
                loss = ((w - target) ** 4).sum() + (w ** 2).sum()
                loss.backward()
                return loss
            return w, opt, closure
        w1, o1, c1 = make(gm if src == "gm" else torch)
        for _ in range(2):
            o1.step(c1)
        w2, o2, c2 = make(gm)
        with gm.no_grad():
            w2.copy_(gm.tensor(w1.detach().numpy()))
        o2.load_state_dict(_to_gm(o1.state_dict()) if src == "torch" else o1.state_dict())
        o1.step(c1)
        o2.step(c2)
        res[src] = (w1.detach().numpy(), to_np(w2))
        np.testing.assert_allclose(res[src][1], res[src][0], rtol=1e-10, err_msg=src)


def test_lbfgs_refusals():
    p = gm.nn.Parameter(gm.zeros(2))
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        gm.optim.LBFGS([p], lr=-1)
    with pytest.raises(ValueError, match="parameter groups"):
        gm.optim.LBFGS([{"params": [p]}, {"params": [gm.nn.Parameter(gm.zeros(2))]}])
    opt = gm.optim.LBFGS([p], line_search_fn="backtracking")

    def closure():
        opt.zero_grad()
        loss = ((p - 1) ** 2).sum()
        loss.backward()
        return loss
    with pytest.raises(RuntimeError, match="strong_wolfe"):
        opt.step(closure)
    with pytest.raises(TypeError):
        opt.step()


def test_lbfgs_stops_at_an_optimum():
    """A zero gradient: one evaluation, nothing moves, the closure's loss is returned."""
    p = gm.nn.Parameter(gm.ones(3, dtype=gm.float64))
    opt = gm.optim.LBFGS([p])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = ((p - 1) ** 2).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert float(loss) == 0.0 and len(calls) == 1
    assert to_np(p).tolist() == [1.0, 1.0, 1.0]


# ---- Rprop, ASGD, Adafactor: the same gradients, step by step ----------------------------------------------------
STEP_CONFIGS = [("Rprop", dict()), ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.06))),
                ("Rprop", dict(maximize=True, foreach=False, capturable=False, differentiable=False)),
                ("ASGD", dict()), ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1)),
                ("ASGD", dict(t0=0, maximize=True, weight_decay=0.05)),
                ("Adafactor", dict()), ("Adafactor", dict(lr=0.05, weight_decay=0.1, maximize=True)),
                ("Adafactor", dict(beta2_decay=-0.5, eps=(1e-20, 1e-2), d=1.5, foreach=False)),
                ("Adafactor", dict(lr=0.2, eps=(1e-3, 1e-3), d=2.0))]
SHAPES = [(3, 4), (5,), (2, 3, 4), ()]


@pytest.mark.parametrize("name,kw", STEP_CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(STEP_CONFIGS)])
def test_matches_pytorch_step_by_step(name, kw, device):
    r = np.random.RandomState(0)
    w0 = [np.asarray(r.randn(*s), dtype=np.float64) for s in SHAPES]
    a = [gm.nn.Parameter(gm.tensor(w, device=device)) for w in w0]
    b = [torch.nn.Parameter(torch.tensor(w)) for w in w0]
    oa = getattr(gm.optim, name)(a, **kw)
    ob = getattr(torch.optim, name)(b, **kw)
    for step in range(8):
        for pa, pb in zip(a, b):
            # a gradient that sometimes keeps its sign and sometimes flips (Rprop's two branches), some exact 0s
            g = np.asarray(r.randn(*pa.shape) * (1 + step % 3) * (r.rand(*pa.shape) > 0.1), dtype=np.float64)
            pa.grad, pb.grad = gm.tensor(g, device=device), torch.tensor(g)
        oa.step()
        ob.step()
        for i, (pa, pb) in enumerate(zip(a, b)):
            np.testing.assert_allclose(to_np(pa), pb.detach().numpy(), rtol=1e-11, atol=1e-13,
                                       err_msg=f"{name} step {step + 1}, parameter of shape {SHAPES[i]}")
    sa, sb = oa.state_dict(), ob.state_dict()
    assert [set(s) for s in sa["state"].values()] == [set(s) for s in sb["state"].values()]
    assert sorted(sa["param_groups"][0]) == sorted(sb["param_groups"][0])
    for st_a, st_b in zip(sa["state"].values(), sb["state"].values()):
        assert int(st_a["step"]) == int(st_b["step"]) == 8
        for k, v in st_b.items():
            if torch.is_tensor(v) and v.ndim > 0:
                np.testing.assert_allclose(to_np(st_a[k]), v.numpy(), rtol=1e-11, atol=1e-13, err_msg=k)


def test_asgd_float32_scalars_match_pytorch():
    """ASGD's eta and mu are PyTorch float32 scalars: the iterates agree in float32 and float64 parameters."""
    for dtype in ("float32", "float64"):
        r = np.random.RandomState(1)
        w = r.randn(6)
        a = gm.nn.Parameter(gm.tensor(w, dtype=getattr(gm, dtype)))
        b = torch.nn.Parameter(torch.tensor(w, dtype=getattr(torch, dtype)))
        oa, ob = gm.optim.ASGD([a], lr=0.3, lambd=0.1, t0=2), torch.optim.ASGD([b], lr=0.3, lambd=0.1, t0=2)
        for _ in range(6):
            g = r.randn(6)
            a.grad, b.grad = gm.tensor(g, dtype=a.dtype), torch.tensor(g, dtype=b.dtype)
            oa.step()
            ob.step()
        np.testing.assert_allclose(to_np(a), b.detach().double().numpy(), rtol=1e-6 if dtype == "float32" else 1e-13)
        np.testing.assert_allclose(to_np(oa.state[a]["ax"]), ob.state[b]["ax"].double().numpy(),
                                   rtol=1e-6 if dtype == "float32" else 1e-13)
        assert oa.state[a]["eta"] == float(ob.state[b]["eta"]) and oa.state[a]["mu"] == float(ob.state[b]["mu"])


@pytest.mark.parametrize("name", ["Rprop", "ASGD", "Adafactor"])
def test_state_dict_round_trip_and_from_pytorch(name):
    r = np.random.RandomState(2)
    w0 = [r.randn(3, 4), r.randn(4)]
    grads = [[r.randn(3, 4), r.randn(4)] for _ in range(5)]
    for src in ("gm", "torch"):
        L = gm if src == "gm" else torch
        p = [L.nn.Parameter(L.tensor(w)) for w in w0]
        opt = getattr(L.optim, name)(p, lr=0.05)
        for gs in grads[:3]:
            for t, g in zip(p, gs):
                t.grad = L.tensor(g)
            opt.step()
        q = [gm.nn.Parameter(gm.tensor(t.detach().numpy().copy())) for t in p]
        opt2 = gm.optim.__dict__[name](q, lr=0.05)
        opt2.load_state_dict(opt.state_dict() if src == "gm" else _to_gm(opt.state_dict()))
        for gs in grads[3:]:
            for t, u, g in zip(p, q, gs):
                t.grad, u.grad = L.tensor(g), gm.tensor(g)
            opt.step()
            opt2.step()
        for t, u in zip(p, q):
            np.testing.assert_allclose(to_np(u), t.detach().numpy(), rtol=1e-12, err_msg=src)


def test_adafactor_state_is_factored():
    p = gm.nn.Parameter(gm.zeros(6, 5))
    opt = gm.optim.Adafactor([p])
    p.grad = gm.ones(6, 5)
    opt.step()
    assert tuple(opt.state[p]["row_var"].shape) == (6, 1) and tuple(opt.state[p]["col_var"].shape) == (1, 5)
    bad = opt.state_dict()
    bad["state"][0]["row_var"] = gm.zeros(5, 1)
    with pytest.raises(ValueError, match=r"row_var.*\(5, 1\).*\(6, 1\)"):
        gm.optim.Adafactor([gm.nn.Parameter(gm.zeros(6, 5))]).load_state_dict(bad)


REFUSALS = [("Rprop", dict(lr=-1.0), "Invalid learning rate: -1.0"), ("Rprop", dict(etas=(1.5, 2.0)),
            "Invalid eta values: 1.5, 2.0"), ("Rprop", dict(etas=(0.5, 0.9)), "Invalid eta values"),
            ("ASGD", dict(lr=-0.1), "Invalid learning rate"), ("ASGD", dict(lambd=-1.0), "Invalid lambd value"),
            ("ASGD", dict(alpha=-1.0), "Invalid alpha value"), ("ASGD", dict(weight_decay=-1), "Invalid weight_decay"),
            ("Adafactor", dict(lr=-1.0), "Learning rate should be >= 0"),
            ("Adafactor", dict(beta2_decay=0.5), "beta2_decay should be <= 0"),
            ("Adafactor", dict(eps=(-1.0, 1e-3)), "epsilon1 should be >= 0"),
            ("Adafactor", dict(eps=(None, -1.0)), "epsilon2 should be >= 0"),
            ("Adafactor", dict(d=0.5), "Clipping threshold d should be >= 1"),
            ("Adafactor", dict(weight_decay=-0.1), "weight_decay should be >= 0")]


@pytest.mark.parametrize("name,kw,msg", REFUSALS, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(REFUSALS)])
def test_bad_arguments_are_refused_as_pytorch(name, kw, msg):
    for L in (gm, torch):
        with pytest.raises(ValueError, match=msg):
            getattr(L.optim, name)([L.nn.Parameter(L.zeros(2))], **kw)


def test_signatures_match_pytorch():
    import inspect
    for name in ("LBFGS", "Rprop", "ASGD", "Adafactor"):
        ours = inspect.signature(getattr(gm.optim, name).__init__)
        theirs = inspect.signature(getattr(torch.optim, name).__init__)
        assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
            [(p.name, p.kind, p.default) for p in theirs.parameters.values()], name


def test_steps_on_meta_make_the_state():
    """The memory estimator steps optimizers on meta parameters: the state has its shapes and dtype there."""
    for name, keys in (("Rprop", {"prev", "step_size"}), ("ASGD", {"ax"}), ("Adafactor", {"row_var", "col_var"})):
        p = gm.nn.Parameter(gm.zeros(6, 4, device="meta"))
        p.grad = gm.zeros(6, 4, device="meta")
        opt = getattr(gm.optim, name)([p])
        opt.step()
        opt.step()
        st = opt.state[p]
        assert keys <= set(st) and st["step"] == 2, name
        assert all(st[k].device.type == "meta" for k in keys)
    assert tuple(st["row_var"].shape) == (6, 1) and tuple(st["col_var"].shape) == (1, 4)


def test_state_is_tagged_optimizer():
    for name in ("Rprop", "ASGD", "Adafactor"):
        p = gm.nn.Parameter(gm.zeros(3, 4))
        p.grad = gm.ones(3, 4)
        opt = getattr(gm.optim, name)([p])
        opt.step()
        cats = {k: v._category for k, v in opt.state[p].items() if isinstance(v, gm.Tensor)}
        assert cats and set(cats.values()) == {"optimizer"}, (name, cats)
    w = gm.nn.Parameter(gm.ones(5))
    opt = gm.optim.LBFGS([w], history_size=3)

    def closure():
        opt.zero_grad()
        loss = ((w - 2) ** 4).sum()
        loss.backward()
        return loss
    opt.step(closure)
    st = opt.state[w]
    assert {st[k]._category for k in ("d", "prev_flat_grad")} == {"optimizer"}
    assert {t._category for t in st["old_dirs"] + st["old_stps"]} == {"optimizer"}
    assert w.grad._category == "gradient"  # the closure's backward allocates as it would outside the step
