"""Module hooks against PyTorch: full backward hooks and backward pre-hooks (per module and global) see the same
grad_input / grad_output, their results change the same gradients, prepend and remove() order them alike, the
forward hooks' with_kwargs / always_call options, Grad-CAM built from them, the state_dict and load_state_dict
hooks, and load_state_dict's result printing as PyTorch's. Each case builds the same model in both libraries with
the same float64 weights and records every hook argument."""
import warnings

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

LIBS = (gm, torch)


def arr(t):
    """A hook argument as NumPy (None stays None, tuples stay tuples)."""
    if t is None:
        return None
    if isinstance(t, (tuple, list)):
        return tuple(arr(x) for x in t)
    if isinstance(t, (int, float, np.ndarray)):
        return t
    return t.detach().numpy().copy()  # a copy: a gradient may become a .grad that a later backward adds into


def same(a, b, what=""):
    """a (gpumemnet's) and b (PyTorch's), converted by arr, are equal to float64 rounding."""
    a, b = arr(a), arr(b)
    if isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b), f"{what}: {a} vs {b}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{what}[{i}]")
    elif b is None:
        assert a is None, f"{what}: expected None, got {a}"
    else:
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=what)


def copy_weights(dst, src):
    dst.load_state_dict({k: v.detach().numpy() for k, v in src.state_dict().items()})


def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3)).double()


def pair(build):
    torch.manual_seed(0)
    t = build(torch)
    g = build(gm)
    copy_weights(g, t)
    return g, t


def inputs(shape, seed=1, requires_grad=True):
    x = np.random.RandomState(seed).randn(*shape)
    return gm.tensor(x, requires_grad=requires_grad), torch.tensor(x, requires_grad=requires_grad)


def recorder(log, tag):
    def hook(module, grad_input, grad_output):
        log.append((tag, type(module).__name__, grad_input, grad_output))
    return hook


def same_logs(lg, lt):
    assert [e[:2] for e in lg] == [e[:2] for e in lt]
    for a, b in zip(lg, lt):
        for i, (x, y) in enumerate(zip(a[2:], b[2:])):
            same(x, y, f"{a[0]} arg {i}")


# ---- full backward hooks -----------------------------------------------------------------------------------
def test_full_backward_hooks_on_every_layer_of_an_mlp():
    g, t = pair(mlp)
    logs = []
    for m in (g, t):
        log = []
        for i, layer in enumerate(m):
            layer.register_full_backward_hook(recorder(log, str(i)))
        m.register_full_backward_hook(recorder(log, "root"))
        logs.append(log)
    xg, xt = inputs((2, 4))
    for m, x in ((g, xg), (t, xt)):
        (m(x) ** 2).sum().backward()
    same_logs(*logs)
    assert [e[0] for e in logs[1]] == ["2", "1", "0", "root"]
    same(xg.grad, xt.grad)
    for (n, pg), (_, pt) in zip(g.named_parameters(), t.named_parameters()):
        same(pg.grad, pt.grad, n)


def test_conv2d_hooks_and_the_outputs_they_return():
    g, t = pair(lambda lib: lib.nn.Conv2d(2, 3, 3, padding=1).double())
    logs = ([], [])
    for m, log in zip((g, t), logs):
        m.register_full_backward_pre_hook(lambda mod, go, log=log: log.append(("pre", "Conv2d", go)))
        m.register_full_backward_hook(recorder(log, "full"))
    xg, xt = inputs((2, 2, 5, 5))
    yg, yt = g(xg), t(xt)
    assert yg.grad_fn.name() == yt.grad_fn.name() == "BackwardHookFunctionBackward"
    w = np.random.RandomState(3).randn(2, 3, 5, 5)
    (yg * gm.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    same_logs(*logs)
    same(g.weight.grad, t.weight.grad)


class Multi:
    """forward(a, b, scale, c=None) -> (a * b * scale, b.exp() or None, 7): tensors, a non-tensor input, a keyword
    input (no grad_input entry), a non-tensor output."""

    @staticmethod
    def build(lib):
        class M(lib.nn.Module):
            def forward(self, a, b, scale, c=None):
                y = a * scale if b is None else a * b * scale
                if c is not None:
                    y = y + c
                return y, (b.exp() if b is not None else None), 7
        return M()


@pytest.mark.parametrize("case", ["both", "b_no_grad", "b_none", "int_input", "second_output_unused"])
def test_multiple_inputs_and_outputs(case):
    logs = ([], [])
    results = []
    for lib, log in zip(LIBS, logs):
        m = Multi.build(lib)
        m.register_full_backward_pre_hook(lambda mod, go, log=log: log.append(("pre", "M", go)))
        m.register_full_backward_hook(recorder(log, "full"))
        a = lib.tensor(np.arange(1.0, 4.0), requires_grad=True)
        b = lib.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=case != "b_no_grad")
        c = lib.tensor(np.ones(3), requires_grad=True)
        if case == "b_none":
            b = None
        if case == "int_input":
            y, e, seven = m(a, lib.tensor(np.array([1, 2, 3])), 2.0, c=c)
            (y * y).sum().backward()
        else:
            y, e, seven = m(a, b, 2.0, c=c)
            assert seven == 7
            loss = (y * y).sum() if case in ("b_none", "second_output_unused") else (y * y).sum() + e.sum()
            loss.backward()
        results.append((a.grad, None if b is None else b.grad, c.grad))
    same_logs(*logs)
    same(*results)


def test_no_input_requires_grad_fires_on_the_outputs_with_a_warning():
    g, t = pair(lambda lib: lib.nn.Linear(3, 2).double())
    logs = ([], [])
    for m, log in zip((g, t), logs):
        m.register_full_backward_hook(recorder(log, "full"))
    xg, xt = inputs((2, 3), requires_grad=False)
    for m, x in ((g, xg), (t, xt)):
        with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are computed with respect "
                                             "to module outputs since no inputs require gradients"):
            m(x).sum().backward()
    same_logs(*logs)
    assert logs[0][0][2] == (None,)
    same(g.weight.grad, t.weight.grad)
    # it may not return gradients then
    for m, x in ((g, xg), (t, xt)):
        m.register_full_backward_hook(lambda mod, gi, go: (go[0],))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="where no input requires gradient should always return None"):
                m(x).sum().backward()


def test_a_hook_rescaling_grad_input_changes_the_gradients_upstream():
    g, t = pair(mlp)
    for m in (g, t):
        m[2].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10,))
        m[1].register_full_backward_hook(lambda mod, gi, go: None)  # None keeps them
    xg, xt = inputs((3, 4))
    for m, x in ((g, xg), (t, xt)):
        m(x).sum().backward()
    same(xg.grad, xt.grad)
    for (n, pg), (_, pt) in zip(g.named_parameters(), t.named_parameters()):
        same(pg.grad, pt.grad, n)
    assert np.abs(arr(g[0].weight.grad)).sum() > 0


def test_a_backward_pre_hook_replacing_grad_output():
    g, t = pair(mlp)
    for m in (g, t):
        m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] * -3,))
    xg, xt = inputs((3, 4))
    for m, x in ((g, xg), (t, xt)):
        m(x).sum().backward()
    same(xg.grad, xt.grad)
    for (n, pg), (_, pt) in zip(g.named_parameters(), t.named_parameters()):
        same(pg.grad, pt.grad, n)


@pytest.mark.parametrize("lib", LIBS, ids=["gpumemnet", "torch"])
def test_hooks_returning_the_wrong_number_of_gradients(lib):
    lin = lib.nn.Linear(2, 2)
    x = lib.ones(1, 2, requires_grad=True)
    h = lin.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="Backward hook returned an invalid number of grad_input, got 2, but "
                                           "expected 1"):
        lin(x).sum().backward()
    h.remove()
    lin.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match="Backward pre hook returned an invalid number of grad_output, got 2, "
                                           "but expected 1"):
        lin(x).sum().backward()


def test_prepend_order_and_remove():
    orders = []
    for lib in LIBS:
        order = []
        m = lib.nn.Linear(2, 2).double()
        handles = []
        for tag in ("a", "b", "c"):
            prepend = tag == "c"
            handles.append(m.register_forward_pre_hook(lambda *a, tag=tag: order.append("fpre" + tag),
                                                       prepend=prepend))
            handles.append(m.register_forward_hook(lambda *a, tag=tag: order.append("fwd" + tag), prepend=prepend))
            handles.append(m.register_full_backward_pre_hook(lambda *a, tag=tag: order.append("bpre" + tag),
                                                             prepend=prepend))
            handles.append(m.register_full_backward_hook(lambda *a, tag=tag: order.append("bwd" + tag),
                                                         prepend=prepend))
        x = lib.ones(1, 2, dtype=lib.float64, requires_grad=True)
        m(x).sum().backward()
        for h in handles[4:8]:  # every hook "b"
            h.remove()
            h.remove()  # twice is harmless
        order.append("|")
        m(x).sum().backward()
        with m.register_forward_hook(lambda *a: order.append("ctx")):
            m(x)
        m(x)
        for h in handles:
            h.remove()
        order.append("|")
        m(x).sum().backward()
        orders.append(order)
    assert orders[0] == orders[1]
    assert orders[0][:12] == ["fprec", "fprea", "fpreb", "fwdc", "fwda", "fwdb",
                              "bprec", "bprea", "bpreb", "bwdc", "bwda", "bwdb"]
    assert orders[0][-1] == "|"


def test_a_module_without_hooks_takes_the_fast_path_again():
    m = gm.nn.Linear(2, 2)
    assert m._has_hooks is False
    h1 = m.register_full_backward_hook(lambda *a: None)
    h2 = m.register_forward_hook(lambda *a: None)
    assert m._has_hooks is True
    h1.remove()
    assert m._has_hooks is True
    h2.remove()
    assert m._has_hooks is False
    # the same function twice: each handle removes its own registration
    seen = []
    f = lambda mod, args: seen.append(1)  # noqa: E731
    m.register_forward_pre_hook(f)
    h = m.register_forward_pre_hook(f, prepend=True)
    m(gm.ones(1, 2))
    assert seen == [1, 1]
    h.remove()
    m(gm.ones(1, 2))
    assert seen == [1, 1, 1]


def test_global_hooks_run_before_the_modules_own():
    orders = []
    for lib in LIBS:
        mm = lib.nn.modules.module
        order = []
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Tanh()).double()
        m[0].register_full_backward_hook(lambda mod, gi, go: order.append(("own", type(mod).__name__,
                                                                           arr(gi), arr(go))))
        m[0].register_full_backward_pre_hook(lambda mod, go: order.append(("ownpre", type(mod).__name__, arr(go))))
        handles = [
            mm.register_module_full_backward_hook(
                lambda mod, gi, go: order.append(("global", type(mod).__name__, arr(gi), arr(go)))),
            mm.register_module_full_backward_pre_hook(
                lambda mod, go: order.append(("globalpre", type(mod).__name__, arr(go)))),
            mm.register_module_forward_pre_hook(lambda mod, args: order.append(("fpre", type(mod).__name__))),
            mm.register_module_forward_hook(lambda mod, args, kwargs, out: order.append(
                ("fwd", type(mod).__name__, sorted(kwargs))), with_kwargs=True),
        ]
        x = lib.tensor(np.array([[0.5, -0.25]]), requires_grad=True)
        torch.manual_seed(0)
        with lib.no_grad():
            m[0].weight.copy_(lib.tensor(np.arange(6.0).reshape(3, 2) / 10))
            m[0].bias.fill_(0.1)
        m(x).sum().backward()
        for h in handles:
            h.remove()
        order.append("removed")
        m(x).sum().backward()
        orders.append(order)
    assert [o[:2] if isinstance(o, tuple) else o for o in orders[0]] == \
        [o[:2] if isinstance(o, tuple) else o for o in orders[1]]
    for a, b in zip(*orders):
        if isinstance(a, tuple):
            for x, y in zip(a[2:], b[2:]):
                if isinstance(y, list):
                    assert x == y
                else:
                    same(x, y, a[0])
    # as in PyTorch, the kind of the first global backward hook stays (full ones were registered above)
    for lib in LIBS:
        with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks as "
                                               "a global Module hook"):
            lib.nn.modules.module.register_module_backward_hook(lambda *a: None)


# ---- Grad-CAM ---------------------------------------------------------------------------------------------
def small_cnn(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 5)).double()


def grad_cam(lib, model, layer, x, target):
    """The usual implementation: activations from a forward hook, their gradients from a full backward hook."""
    store = {}
    h1 = layer.register_forward_hook(lambda m, args, out: store.__setitem__("act", out))
    h2 = layer.register_full_backward_hook(lambda m, gi, go: store.__setitem__("grad", go[0]))
    model.zero_grad()
    scores = model(x)
    scores[:, target].sum().backward()
    h1.remove()
    h2.remove()
    weights = store["grad"].mean(dim=(2, 3), keepdim=True)
    cam = (weights * store["act"]).sum(dim=1).clamp(min=0)
    return cam.detach(), store["grad"], scores.detach()


def test_grad_cam_on_a_small_cnn():
    g, t = pair(small_cnn)
    xg, xt = inputs((2, 3, 8, 8), requires_grad=False)
    cg, gg, sg = grad_cam(gm, g, g[2], xg, 3)
    ct, gt, st = grad_cam(torch, t, t[2], xt, 3)
    same(sg, st, "scores")
    same(gg, gt, "gradient of the activations")
    same(cg, ct, "cam")
    assert arr(cg).max() > 0
    for (n, pg), (_, pt) in zip(g.named_parameters(), t.named_parameters()):
        same(pg.grad, pt.grad, n)


def test_double_backward_through_a_hooked_module():
    g, t = pair(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 1)).double())
    logs = ([], [])
    for m, log in zip((g, t), logs):
        m[0].register_full_backward_hook(recorder(log, "full"))
    xg, xt = inputs((2, 3))
    for lib, m, x in ((gm, g, xg), (torch, t, xt)):
        (dx,) = lib.autograd.grad(m(x).sum(), x, create_graph=True)
        (dx ** 2).sum().backward()
    same_logs(*logs)
    for (n, pg), (_, pt) in zip(g.named_parameters(), t.named_parameters()):
        same(pg.grad, pt.grad, n)


@pytest.mark.parametrize("lib", LIBS, ids=["gpumemnet", "torch"])
def test_legacy_backward_hook_does_not_mix_with_full_ones(lib):
    m = lib.nn.Linear(2, 2)
    m.register_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks on a "
                                           "single Module"):
        m.register_backward_hook(lambda *a: None)


def test_legacy_backward_hook_is_the_full_hook_with_a_warning():
    m = gm.nn.Linear(2, 2).double()
    seen = []
    with pytest.warns(FutureWarning, match="register_backward_hook is deprecated"):
        m.register_backward_hook(lambda mod, gi, go: seen.append((arr(gi), arr(go))))
    x = gm.ones(1, 2, dtype=gm.float64, requires_grad=True)
    m(x).sum().backward()
    same(seen[0][0], (x.grad,))
    with pytest.raises(RuntimeError, match="Cannot use both"):
        m.register_full_backward_hook(lambda *a: None)


# ---- forward hook options ------------------------------------------------------------------------------------
def test_forward_hooks_with_kwargs():
    outs = []
    for lib in LIBS:
        class M(lib.nn.Module):
            def forward(self, x, scale=1.0, shift=0.0):
                return x * scale + shift
        m = M()
        seen = []

        def pre(mod, args, kwargs):
            seen.append(("pre", len(args), dict(kwargs)))
            return (args[0] + 1,), {**kwargs, "shift": 10.0}

        def post(mod, args, kwargs, out):
            seen.append(("post", arr(args), dict(kwargs)))
            return out * 2

        m.register_forward_pre_hook(pre, with_kwargs=True)
        m.register_forward_pre_hook(lambda mod, args: args[0] * 3)  # a non-tuple is wrapped
        m.register_forward_hook(post, with_kwargs=True)
        m.register_forward_hook(lambda mod, args, out: out - 1)
        y = m(lib.tensor(np.array([1.0, 2.0])), scale=2.0)
        outs.append((arr(y), list(seen)))
        m.register_forward_pre_hook(lambda mod, args, kwargs: args, with_kwargs=True)
        with pytest.raises(RuntimeError, match=r"forward pre-hook must return None or a tuple of \(new_args, "
                                               r"new_kwargs\)"):
            m(lib.tensor(np.array([1.0])))
    same(outs[0][0], outs[1][0])
    assert [s[0] for s in outs[0][1]] == ["pre", "post"]
    assert outs[0][1][0] == outs[1][1][0] and outs[0][1][1][2] == outs[1][1][1][2]
    same(outs[0][1][1][1], outs[1][1][1][1])


def test_always_call_forward_hooks_run_when_forward_raises():
    logs = []
    for lib in LIBS:
        class Boom(lib.nn.Module):
            def forward(self, x, **kwargs):
                raise ValueError("boom")
        m = Boom()
        log = []
        m.register_forward_hook(lambda mod, args, out: log.append(("always", out)), always_call=True)
        m.register_forward_hook(lambda mod, args, kwargs, out: log.append(("kw", sorted(kwargs), out)),
                                with_kwargs=True, always_call=True)
        m.register_forward_hook(lambda mod, args, out: log.append(("plain", out)))
        m.register_forward_hook(lambda mod, args, out: 1 / 0, always_call=True)
        with pytest.warns(UserWarning, match="module forward hook with ``always_call=True`` raised an exception that "
                                             "was silenced"):
            with pytest.raises(ValueError, match="boom"):
                m(lib.ones(1), k=1)
        logs.append(log)
    assert logs[0] == logs[1] == [("always", None), ("kw", ["k"], None)]


# ---- state_dict hooks ---------------------------------------------------------------------------------------------
def net(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Sequential(nn.Linear(3, 1))).double()


def test_state_dict_hooks():
    results = []
    for lib in LIBS:
        m = net(lib)
        log = []
        m[0].register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))
        m[2].register_state_dict_post_hook(
            lambda mod, sd, prefix, meta: log.append(("post", prefix, sorted(sd), type(meta).__name__)))

        def drop_bias(mod, sd, prefix, meta):
            del sd[prefix + "bias"]
        m[2][0].register_state_dict_post_hook(drop_bias)
        sd = m.state_dict()
        keys = list(sd)
        m[2][0]._register_state_dict_hook(lambda mod, sd, prefix, meta: {"child": 1})  # not the root: ignored
        keys2 = list(m.state_dict(keep_vars=True))
        m._register_state_dict_hook(lambda mod, sd, prefix, meta: {"replaced": len(sd)})
        replaced = m.state_dict()
        results.append((log, keys, keys2, replaced, dict(sd._metadata[""])))
    assert results[0][:4] == results[1][:4]
    assert results[0][1] == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                             "1.num_batches_tracked", "2.0.weight"]
    assert results[0][4] == results[1][4] == {"version": 1}
    for lib in LIBS:
        m = lib.nn.Linear(1, 1)

        def returns(mod, sd, prefix, meta):
            return sd
        m.register_state_dict_post_hook(returns)
        with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
            m.state_dict()
        with pytest.raises(RuntimeError, match="Cannot register the same function as the state dict post hook"):
            m._register_state_dict_hook(returns)


def test_load_state_dict_hooks_rename_keys_and_see_the_same_arguments():
    results = []
    torch.manual_seed(0)
    src = {k: v.detach().numpy() for k, v in net(torch).state_dict().items()}
    for lib in LIBS:
        m = net(lib)
        log = []
        old = {("old_" + k if k.startswith("2.") else k): lib.tensor(v) for k, v in src.items()}

        def rename(mod, sd, prefix, meta, strict, missing, unexpected, errors):
            log.append(("pre", type(mod).__name__, prefix, sorted(sd), meta, strict, list(missing)))
            for k in list(sd):
                if k.startswith("old_"):
                    sd[k[4:]] = sd.pop(k)

        def plain(sd, prefix, meta, strict, missing, unexpected, errors):
            log.append(("plain", prefix, sorted(sd)))

        def post(mod, keys):
            log.append(("post", type(mod).__name__, list(keys.missing_keys), list(keys.unexpected_keys)))

        m.register_load_state_dict_pre_hook(rename)
        m[2]._register_load_state_dict_pre_hook(plain)
        m[2][0].register_load_state_dict_post_hook(post)
        m.register_load_state_dict_post_hook(post)
        r = m.load_state_dict(old)
        weights = {k: arr(v) for k, v in m.state_dict().items()}
        results.append((log, repr(r), str(r), weights))
        assert "old_2.0.weight" in old  # the caller's dict is not changed
    assert results[0][:3] == results[1][:3]
    assert results[0][1] == results[0][2] == "<All keys matched successfully>"
    for k in results[1][3]:
        same(results[0][3][k], results[1][3][k], k)


@pytest.mark.parametrize("lib", LIBS, ids=["gpumemnet", "torch"])
def test_load_state_dict_post_hook_sees_loaded_values_and_may_clear_missing_keys(lib):
    m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Linear(2, 2))
    seen = []

    def forgive(mod, keys):
        seen.append(float(mod[0].weight.detach().sum()))
        keys.missing_keys.clear()
    m.register_load_state_dict_post_hook(forgive)
    sd = {"0.weight": lib.ones(2, 2), "0.bias": lib.zeros(2), "extra": lib.zeros(1)}
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "extra"'):
        m.load_state_dict(sd)
    assert seen == [4.0]
    del sd["extra"]
    r = m.load_state_dict(sd)
    assert repr(r) == "<All keys matched successfully>"
    m.register_load_state_dict_post_hook(lambda mod, keys: keys)
    with pytest.raises(AssertionError, match="are not expected to return new values"):
        m.load_state_dict(sd)


def test_incompatible_keys_repr():
    for lib in LIBS:
        from importlib import import_module
        mod = import_module(lib.__name__ + ".nn.modules.module")
        k = mod._IncompatibleKeys([], [])
        assert repr(k) == str(k) == "<All keys matched successfully>"
        k = mod._IncompatibleKeys(["a"], [])
        assert repr(k) == "_IncompatibleKeys(missing_keys=['a'], unexpected_keys=[])"
        m = lib.nn.Linear(2, 2)
        r = m.load_state_dict({"weight": lib.zeros(2, 2)}, strict=False)
        assert repr(r) == "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=[])" and r.missing_keys == ["bias"]
        assert repr(m.load_state_dict(m.state_dict())) == "<All keys matched successfully>"


@pytest.mark.parametrize("lib", LIBS, ids=["gpumemnet", "torch"])
def test_a_load_pre_hook_with_the_module_follows_a_deepcopy(lib):
    import copy
    m = lib.nn.Linear(2, 2)
    seen = []
    m.register_load_state_dict_pre_hook(lambda mod, sd, *rest: seen.append(mod))
    m2 = copy.deepcopy(m)
    m2.load_state_dict(m2.state_dict())
    m.load_state_dict(m.state_dict())
    assert seen[0] is m2 and seen[1] is m
