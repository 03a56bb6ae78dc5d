"""nn.utils.parametrize / parametrizations (weight_norm, spectral_norm), conv/linear + batch-norm fusion,
stateless / gm.func functional_call, clip_grads_with_norm_, skip_init, convert_conv*_weight_memory_format and
utils.data.StackDataset, against PyTorch's: values, gradients, state_dict keys, what the module looks like
afterwards, and the refusals."""
import copy
import inspect
import pickle
import warnings

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.func  # noqa: F401  (gm.func: imported by the package once it lists it)
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")
P = {"gm": gm.nn.utils.parametrize, "torch": torch.nn.utils.parametrize}
LIBS = {"gm": gm, "torch": torch}


def _np(t):
    return to_np(t) if isinstance(t, gm.Tensor) else t.detach().numpy()


def _pair(make, device="cpu"):
    """The same module in both libraries: make(lib) builds it, gm's gets torch's values."""
    tm = make(torch).double()
    gmm = make(gm).double().to(device)
    gmm.load_state_dict({k: gm.tensor(v.detach().numpy(), device=device) for k, v in tm.state_dict().items()})
    return {"gm": gmm, "torch": tm}


def _symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

        def right_inverse(self, a):
            return a.triu()
    return Symmetric()


def _scale(lib, k=2.0):
    class Scale(lib.nn.Module):
        def forward(self, x):
            return x * k

        def right_inverse(self, x):
            return x / k
    return Scale()


def _split(lib):
    class Split(lib.nn.Module):  # two originals: original0 + original1
        def forward(self, a, b):
            return a + b

        def right_inverse(self, w):
            return w * 0.25, w * 0.75
    return Split()


# ---- parametrize -------------------------------------------------------------------------------------------------
def test_parametrize_values_grads_and_keys(device):
    mods = _pair(lambda L: L.nn.Linear(4, 4), device)
    out = {}
    for lib, m in mods.items():
        L = LIBS[lib]
        P[lib].register_parametrization(m, "weight", _symmetric(L))
        P[lib].register_parametrization(m, "weight", _scale(L))
        x = L.tensor(np.arange(8.0).reshape(2, 4) / 7, dtype=L.float64)
        x = x.to(device) if lib == "gm" else x
        y = m(x)
        y.pow(2).sum().backward()
        orig = m.parametrizations.weight.original
        out[lib] = dict(y=_np(y), w=_np(m.weight), g=_np(orig.grad), keys=list(m.state_dict()),
                        name=type(m).__name__, params=[n for n, _ in m.named_parameters()],
                        rep=repr(m).splitlines()[0], is_p=(P[lib].is_parametrized(m),
                                                           P[lib].is_parametrized(m, "weight"),
                                                           P[lib].is_parametrized(m, "bias")),
                        before=P[lib].type_before_parametrizations(m).__name__)
    a, b = out["gm"], out["torch"]
    for k in ("y", "w", "g"):
        np.testing.assert_allclose(a[k], b[k], rtol=1e-12, atol=1e-14, err_msg=k)
    for k in ("keys", "name", "params", "rep", "is_p", "before"):
        assert a[k] == b[k], k
    assert a["keys"] == ["bias", "parametrizations.weight.original"]


def test_parametrize_assignment_goes_through_right_inverse(device):
    mods = _pair(lambda L: L.nn.Linear(3, 3), device)
    res = {}
    for lib, m in mods.items():
        L = LIBS[lib]
        P[lib].register_parametrization(m, "weight", _symmetric(L))
        orig = m.parametrizations.weight.original
        new = L.tensor(np.arange(9.0).reshape(3, 3), dtype=L.float64)
        m.weight = new.to(device) if lib == "gm" else new
        assert m.parametrizations.weight.original is orig  # the same Parameter object, new values
        res[lib] = (_np(orig), _np(m.weight))
        with pytest.raises(KeyError, match="already exists"):
            m.weight = L.nn.Parameter(L.zeros(3, 3, dtype=L.float64))
    np.testing.assert_array_equal(res["gm"][0], res["torch"][0])
    np.testing.assert_array_equal(res["gm"][1], res["torch"][1])


def test_parametrize_several_originals_and_removal():
    mods = _pair(lambda L: L.nn.Linear(3, 2))
    res = {}
    for lib, m in mods.items():
        L = LIBS[lib]
        w0 = _np(m.weight).copy()
        P[lib].register_parametrization(m, "weight", _split(L))
        keys = list(m.state_dict())
        w = _np(m.weight)
        with pytest.raises(ValueError, match="sequence of tensors"):
            P[lib].remove_parametrizations(m, "weight", leave_parametrized=False)
        P[lib].remove_parametrizations(m, "weight")
        res[lib] = (keys, w, type(m).__name__, list(m.state_dict()), _np(m.weight), w0,
                    isinstance(m.weight, L.nn.Parameter), hasattr(m, "parametrizations"))
    a, b = res["gm"], res["torch"]
    assert a[0] == b[0] == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    np.testing.assert_allclose(a[1], b[1], rtol=1e-15)
    np.testing.assert_allclose(a[1], a[5], rtol=1e-15)
    assert a[2] == b[2] == "Linear" and a[3] == b[3] and a[6] == b[6] and a[7] == b[7]


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations_keeps_the_parameter_object(leave):
    res = {}
    for lib, m in _pair(lambda L: L.nn.Linear(3, 3)).items():
        L = LIBS[lib]
        P[lib].register_parametrization(m, "weight", _scale(L, 3.0))
        orig = m.parametrizations.weight.original
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        m(L.ones(1, 3, dtype=L.float64)).sum().backward()
        opt.step()
        P[lib].remove_parametrizations(m, "weight", leave_parametrized=leave)
        assert m.weight is orig and type(m) is L.nn.Linear
        res[lib] = _np(m.weight)
    np.testing.assert_allclose(res["gm"], res["torch"], rtol=1e-13)


def test_parametrized_buffer_and_state_dict_round_trip():
    res = {}
    for lib in ("gm", "torch"):
        L = LIBS[lib]
        m = L.nn.BatchNorm1d(3).double()
        m.running_var.copy_(L.tensor([1.0, 2.0, 3.0], dtype=L.float64))
        P[lib].register_parametrization(m, "running_var", _scale(L, 2.0))
        sd = m.state_dict()
        m2 = L.nn.BatchNorm1d(3).double()
        P[lib].register_parametrization(m2, "running_var", _scale(L, 2.0))
        m2.load_state_dict(sd)
        res[lib] = (list(sd), _np(m.running_var), _np(m2.running_var),
                    [n for n, _ in m.named_buffers()])
    assert res["gm"][0] == res["torch"][0] and res["gm"][3] == res["torch"][3]
    for i in (1, 2):
        np.testing.assert_array_equal(res["gm"][i], res["torch"][i])


def test_transfer_and_identity_of_the_original():
    res = {}
    for lib, L in LIBS.items():
        a, b = L.nn.Linear(3, 3).double(), L.nn.Linear(3, 3).double()
        w = a.weight
        opt = L.optim.SGD(a.parameters(), lr=0.5)  # built before registration: still updates the original
        P[lib].register_parametrization(a, "weight", _symmetric(L))
        assert a.parametrizations.weight.original is w
        a(L.ones(2, 3, dtype=L.float64)).sum().backward()
        opt.step()
        P[lib].transfer_parametrizations_and_params(a, b)
        assert b.parametrizations.weight.original is w and P[lib].is_parametrized(b, "weight")
        res[lib] = (_np(b.weight), type(b).__name__, list(b.state_dict()))
    np.testing.assert_array_equal(res["gm"][0], res["gm"][0].T)
    assert res["gm"][1:] == res["torch"][1:]


def test_parametrized_module_on_meta():
    """The memory estimator runs models on meta: a parametrized weight is computed there too (shapes only)."""
    m = gm.nn.Linear(3, 3, device="meta")
    P["gm"].register_parametrization(m, "weight", _symmetric(gm))
    gm.nn.utils.parametrizations.weight_norm(m, "bias", dim=0)
    y = m(gm.zeros(2, 3, device="meta"))
    assert y.device.type == "meta" and tuple(y.shape) == (2, 3)


def test_cached_computes_once():
    calls = []

    class Count(gm.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 1.0
    m = gm.nn.Linear(2, 2)
    P["gm"].register_parametrization(m, "weight", Count())
    calls.clear()
    with P["gm"].cached():
        a, b = m.weight, m.weight
        assert a is b
    c = m.weight
    assert len(calls) == 2 and c is not a


def test_parametrized_module_deepcopy_and_no_pickle():
    m = gm.nn.Linear(2, 2)
    P["gm"].register_parametrization(m, "weight", _scale(gm))
    m2 = copy.deepcopy(m)
    assert type(m2).__name__ == "ParametrizedLinear"
    np.testing.assert_array_equal(to_np(m2.weight), to_np(m.weight))
    assert m2.parametrizations.weight.original is not m.parametrizations.weight.original
    with pytest.raises(RuntimeError, match="state_dict"):
        pickle.dumps(m)


def test_register_parametrization_refusals():
    for lib in ("gm", "torch"):
        L = LIBS[lib]

        class Shrink(L.nn.Module):
            def forward(self, x):
                return x[:1]

        class ToHalf(L.nn.Module):
            def forward(self, x):
                return x.to(L.float16)
        m = L.nn.Linear(2, 2)
        with pytest.raises(ValueError, match="may not change the shape"):
            P[lib].register_parametrization(m, "weight", Shrink())
        with pytest.raises(ValueError, match="may not change the dtype"):
            P[lib].register_parametrization(m, "weight", ToHalf())
        with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
            P[lib].register_parametrization(m, "nothing", Shrink())
        with pytest.raises(ValueError, match="does not have a parametrization on weight"):
            P[lib].remove_parametrizations(m, "weight")
        P[lib].register_parametrization(m, "weight", Shrink(), unsafe=True)
        assert tuple(m.weight.shape) == (1, 2)


# ---- parametrizations.weight_norm / spectral_norm ----------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_weight_norm_parametrization(dim, device):
    res = {}
    for lib, m in _pair(lambda L: L.nn.Conv2d(2, 3, 3), device).items():
        L = LIBS[lib]
        L.nn.utils.parametrizations.weight_norm(m, dim=dim)
        g = m.parametrizations.weight.original0
        with (gm.no_grad() if lib == "gm" else torch.no_grad()):
            g.mul_(1.5)  # move g so that the weight is no longer the registered one
        x = L.tensor(np.linspace(-1, 1, 2 * 2 * 5 * 5).reshape(2, 2, 5, 5), dtype=L.float64)
        y = m(x.to(device) if lib == "gm" else x)
        y.square().sum().backward()
        v = m.parametrizations.weight.original1
        res[lib] = dict(keys=list(m.state_dict()), y=_np(y), gg=_np(g.grad), gv=_np(v.grad),
                        gshape=tuple(g.shape))
    a, b = res["gm"], res["torch"]
    assert a["keys"] == b["keys"] == ["bias", "parametrizations.weight.original0",
                                      "parametrizations.weight.original1"]
    assert a["gshape"] == b["gshape"]
    for k in ("y", "gg", "gv"):
        np.testing.assert_allclose(a[k], b[k], rtol=1e-11, atol=1e-13, err_msg=k)


@pytest.mark.parametrize("make,dim", [(lambda L: L.nn.Linear(5, 3), None), (lambda L: L.nn.Conv2d(2, 4, 3), None),
                                      (lambda L: L.nn.ConvTranspose2d(3, 2, 3), None),
                                      (lambda L: L.nn.Linear(4, 6), 1)])
def test_spectral_norm_parametrization(make, dim, device):
    mods = _pair(make, device)
    for lib, m in mods.items():
        LIBS[lib].nn.utils.parametrizations.spectral_norm(m, dim=dim)
    tm, gmm = mods["torch"], mods["gm"]
    # the power iteration starts from random vectors: give ours PyTorch's
    gmm.load_state_dict({k: gm.tensor(v.detach().numpy(), device=device) for k, v in tm.state_dict().items()})
    assert list(gmm.state_dict()) == list(tm.state_dict())
    assert "parametrizations.weight.0._u" in tm.state_dict()
    shape = (2, 5) if isinstance(tm, torch.nn.Linear) and tm.in_features == 5 else \
        (2, 4) if isinstance(tm, torch.nn.Linear) else (1, tm.in_channels, 6, 6)
    x = np.linspace(-1, 2, int(np.prod(shape))).reshape(shape)
    for step in range(3):  # training forwards run the power iteration, and write u and v
        ya, yb = gmm(gm.tensor(x, device=device)), tm(torch.tensor(x))
        np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=f"step {step}")
        ya.sum().backward()
        yb.sum().backward()
        np.testing.assert_allclose(to_np(gmm.parametrizations.weight.original.grad),
                                   tm.parametrizations.weight.original.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(to_np(gmm.parametrizations.weight[0]._u),
                               tm.parametrizations.weight[0]._u.numpy(), rtol=1e-10, atol=1e-12)
    gmm.eval()
    tm.eval()
    np.testing.assert_allclose(to_np(gmm(gm.tensor(x, device=device))), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10, atol=1e-12)


def test_spectral_norm_parametrization_refusals():
    for L in (gm, torch):
        with pytest.raises(ValueError, match="has no parameter or buffer with name 'nope'"):
            L.nn.utils.parametrizations.spectral_norm(L.nn.Linear(2, 2), name="nope")
        with pytest.raises(IndexError, match="Dimension out of range"):
            L.nn.utils.parametrizations.spectral_norm(L.nn.Linear(2, 2), dim=2)
        with pytest.raises(ValueError, match="n_power_iterations"):
            L.nn.utils.parametrizations.spectral_norm(L.nn.Linear(2, 2), n_power_iterations=0)


def test_spectral_norm_parametrization_estimates_sigma():
    """After registration (15 iterations) and a few training forwards, the weight's top singular value is ~1."""
    m = gm.nn.Linear(6, 5).double()
    gm.nn.utils.parametrizations.spectral_norm(m)
    for _ in range(20):
        m(gm.ones(1, 6, dtype=gm.float64))
    assert abs(np.linalg.svd(to_np(m.weight), compute_uv=False)[0] - 1.0) < 1e-6


# ---- fusion ------------------------------------------------------------------------------------------------------
def _bn_stats(m, n, seed):
    r = np.random.RandomState(seed)
    with torch.no_grad():
        m.running_mean.copy_(torch.tensor(r.randn(n)))
        m.running_var.copy_(torch.tensor(r.uniform(0.5, 2.0, n)))
        if m.weight is not None:
            m.weight.copy_(torch.tensor(r.randn(n)))
            m.bias.copy_(torch.tensor(r.randn(n)))


@pytest.mark.parametrize("kind", ["conv", "conv_nobias", "convT", "conv1d", "linear", "linear_bn1", "no_affine"])
def test_fusion_matches_pytorch_and_the_unfused_pair(kind, device):
    def make(L):
        conv = {"conv": lambda: L.nn.Conv2d(2, 3, 3), "conv_nobias": lambda: L.nn.Conv2d(2, 3, 3, bias=False),
                "convT": lambda: L.nn.ConvTranspose2d(2, 3, 3), "conv1d": lambda: L.nn.Conv1d(2, 3, 3),
                "linear": lambda: L.nn.Linear(4, 3), "linear_bn1": lambda: L.nn.Linear(4, 3),
                "no_affine": lambda: L.nn.Conv2d(2, 3, 3)}[kind]()
        n = 1 if kind == "linear_bn1" else 3
        bn = (L.nn.BatchNorm1d(n) if kind in ("linear", "linear_bn1", "conv1d") else
              L.nn.BatchNorm2d(n, affine=kind != "no_affine"))
        return L.nn.Sequential(conv, bn)
    tm = make(torch).double()
    _bn_stats(tm[1], tm[1].num_features, 5)
    gmm = make(gm).double().to(device)
    gmm.load_state_dict({k: gm.tensor(v.numpy(), device=device) for k, v in tm.state_dict().items()})
    shape = {"conv1d": (2, 2, 7), "linear": (2, 4), "linear_bn1": (2, 4)}.get(kind, (2, 2, 6, 6))
    x = np.linspace(-2, 2, int(np.prod(shape))).reshape(shape)
    out = {}
    for lib, m in (("gm", gmm), ("torch", tm)):
        L = LIBS[lib]
        m.eval()
        if kind.startswith("linear"):
            fused = L.nn.utils.fuse_linear_bn_eval(m[0], m[1])
        else:
            fused = L.nn.utils.fuse_conv_bn_eval(m[0], m[1], transpose=kind == "convT")
        assert fused is not m[0] and type(fused) is type(m[0])
        xin = L.tensor(x, dtype=L.float64)
        xin = xin.to(device) if lib == "gm" else xin
        # BatchNorm1d(1) cannot follow Linear(4, 3) in a model; its fusion broadcasts the one channel
        ref = m[0](xin) * ((m[1].running_var + m[1].eps).rsqrt() * m[1].weight) + \
            (m[1].bias - m[1].running_mean * (m[1].running_var + m[1].eps).rsqrt() * m[1].weight) \
            if kind == "linear_bn1" else m(xin)
        out[lib] = (_np(fused(xin)), _np(ref), _np(fused.weight), _np(fused.bias),
                    isinstance(fused.weight, L.nn.Parameter), fused.weight.requires_grad)
    for i in range(4):
        np.testing.assert_allclose(out["gm"][i], out["torch"][i], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out["gm"][0], out["gm"][1], rtol=1e-10, atol=1e-12)
    assert out["gm"][4:] == out["torch"][4:] == (True, True)


def test_fuse_weights_functions_and_refusals():
    r = np.random.RandomState(1)
    args = [r.randn(4, 2, 3, 3), None, r.randn(4), r.uniform(0.5, 2, 4), 1e-3, None, None]
    res = {}
    for lib, L in LIBS.items():
        a = [L.tensor(v) if isinstance(v, np.ndarray) else v for v in args]
        w, b = L.nn.utils.fuse_conv_bn_weights(*a)
        wl, bl = L.nn.utils.fuse_linear_bn_weights(L.tensor(r.randn(4, 5) if lib == "gm" else args[0][:, 0, 0, :2]
                                                              .repeat(1, 1)), None, a[2], a[3], 1e-5,
                                                   L.ones(4, dtype=L.float64), L.zeros(4, dtype=L.float64))
        res[lib] = (_np(w), _np(b), w.requires_grad, b.requires_grad)
        with pytest.raises(AssertionError, match="Fusion only for eval"):
            L.nn.utils.fuse_conv_bn_eval(L.nn.Conv2d(2, 3, 1), L.nn.BatchNorm2d(3))
        with pytest.raises(AssertionError, match="out_features"):
            L.nn.utils.fuse_linear_bn_eval(L.nn.Linear(2, 3).eval(), L.nn.BatchNorm1d(2).eval())
        bn = L.nn.BatchNorm2d(3, track_running_stats=False).eval()
        with pytest.raises(AssertionError, match="running_mean"):
            L.nn.utils.fuse_conv_bn_eval(L.nn.Conv2d(2, 3, 1).eval(), bn)
    for i in range(2):
        np.testing.assert_allclose(res["gm"][i], res["torch"][i], rtol=1e-13)
    assert res["gm"][2:] == res["torch"][2:]


# ---- functional_call ---------------------------------------------------------------------------------------------
def _net(L):
    class Net(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = L.nn.Linear(3, 4)
            self.bn = L.nn.BatchNorm1d(4)
            self.out = L.nn.Linear(4, 3)
            self.out.weight = L.nn.Parameter(self.fc.weight.detach().t().clone())

        def forward(self, x, scale=1.0):
            return self.out(self.bn(self.fc(x)).relu()) * scale
    return Net()


@pytest.mark.parametrize("which", ["func", "stateless"])
def test_functional_call_substitutes_and_restores(which, device):
    mods = _pair(_net, device)
    res = {}
    r = np.random.RandomState(2)
    new_w, x = r.randn(4, 3), r.randn(5, 3)
    for lib, m in mods.items():
        L = LIBS[lib]
        t = (lambda a: L.tensor(a, device=device)) if lib == "gm" else L.tensor
        before = {k: _np(v).copy() for k, v in m.state_dict().items()}
        w = t(new_w).requires_grad_()
        sub = {"fc.weight": w, "bn.running_mean": t(np.zeros(4))}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if which == "func":
                y = L.func.functional_call(m, (sub, {"out.bias": t(np.ones(3))}), (t(x),), {"scale": 2.0})
            else:
                y = L.nn.utils.stateless.functional_call(m, dict(sub, **{"out.bias": t(np.ones(3))}), t(x),
                                                         {"scale": 2.0})
        assert any(issubclass(c.category, FutureWarning) for c in caught) == (which == "stateless")
        y.sum().backward()
        after = {k: _np(v) for k, v in m.state_dict().items()}
        for k in before:
            if k not in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"):
                np.testing.assert_array_equal(after[k], before[k], err_msg=k)  # the module's own, back
        assert m.fc.weight.grad is None and isinstance(m.fc.weight, L.nn.Parameter)
        res[lib] = (_np(y), _np(w.grad), _np(sub["bn.running_mean"]), after["bn.running_var"])
    for i in range(4):
        np.testing.assert_allclose(res["gm"][i], res["torch"][i], rtol=1e-12, atol=1e-13, err_msg=str(i))


def test_functional_call_tied_weights_strict_and_errors():
    for lib, L in LIBS.items():
        m = L.nn.Sequential(L.nn.Linear(2, 2, bias=False), L.nn.Linear(2, 2, bias=False))
        m[1].weight = m[0].weight  # tied
        x = L.ones(1, 2)
        w = L.full((2, 2), 0.5)
        y_tied = L.func.functional_call(m, {"0.weight": w}, x)
        y_untied = L.func.functional_call(m, {"0.weight": w}, x, tie_weights=False)
        w0 = _np(m[0].weight)
        np.testing.assert_allclose(_np(y_tied), [[1.0, 1.0]], rtol=1e-6)  # both layers used w
        np.testing.assert_allclose(_np(y_untied), np.ones((1, 2)) @ np.full((2, 2), 0.5) @ w0.T, rtol=1e-6)
        assert m[0].weight is m[1].weight
        with pytest.raises(ValueError, match="which are tied"):
            L.func.functional_call(m, {"0.weight": w, "1.weight": L.zeros(2, 2)}, x)
        with pytest.raises(RuntimeError, match=r"Unexpected key\(s\): 'nope'"):
            L.func.functional_call(m, {"0.weight": w, "nope": w}, x, strict=True)
        with pytest.raises(RuntimeError, match=r"Missing key\(s\): '0.weight', '1.weight'"):
            L.func.functional_call(m, {}, x, strict=True)
        with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
            L.func.functional_call(m, ({"0.weight": w}, {"0.weight": w}), x)
        with pytest.raises(ValueError, match="to be a dict, or a list/tuple of dicts"):
            L.func.functional_call(m, 3, x)
        with pytest.raises(ValueError, match="all elements of parameter_and_buffer_dicts to be dictionaries"):
            L.func.functional_call(m, [3], x)
        own = m[0].weight
        with pytest.raises(RuntimeError):  # the call fails: the module still gets its own weight back
            L.func.functional_call(m, {"0.weight": L.zeros(3, 3)}, x)
        assert m[0].weight is own and m[1].weight is own


# ---- clip_grads_with_norm_, skip_init, memory formats ------------------------------------------------------------
@pytest.mark.parametrize("max_norm,norm_type", [(0.5, 2.0), (100.0, 2.0), (1.0, float("inf")), (0.3, 1.0)])
def test_clip_grads_with_norm(max_norm, norm_type, device):
    r = np.random.RandomState(3)
    gs = [r.randn(3, 4), r.randn(5)]
    res = {}
    for lib, L in LIBS.items():
        dev = {"device": device} if lib == "gm" else {}
        ps = [L.zeros(g.shape, dtype=L.float64, **dev).requires_grad_() for g in gs] + \
            [L.zeros(2, dtype=L.float64, **dev).requires_grad_()]  # one without a gradient
        for p, g in zip(ps, gs):
            p.grad = L.tensor(g, **dev)
        total = L.nn.utils.get_total_norm([p.grad for p in ps[:2]], norm_type)
        assert L.nn.utils.clip_grads_with_norm_(ps, max_norm, total) is None
        res[lib] = [_np(p.grad) for p in ps[:2]] + [ps[2].grad is None]
    for a, b in zip(res["gm"][:2], res["torch"][:2]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert res["gm"][2] and res["torch"][2]
    t = gm.zeros(2, requires_grad=True)
    t.grad = gm.ones(2)
    gm.nn.utils.clip_grads_with_norm_(t, 1.0, gm.tensor(4.0))
    np.testing.assert_allclose(to_np(t.grad), [1 / (4 + 1e-6)] * 2, rtol=1e-6)


def test_skip_init():
    m = gm.nn.utils.skip_init(gm.nn.Linear, 3, 4, bias=False)
    assert type(m) is gm.nn.Linear and tuple(m.weight.shape) == (4, 3) and m.bias is None
    assert m.weight.device.type == "cpu" and isinstance(m.weight, gm.nn.Parameter)
    for L in (gm, torch):
        with pytest.raises(RuntimeError, match="Expected a Module"):
            L.nn.utils.skip_init(int, 3)

        class NoDevice(L.nn.Module):
            def __init__(self, n):
                super().__init__()
        with pytest.raises(RuntimeError, match="must support a 'device' arg"):
            L.nn.utils.skip_init(NoDevice, 3)


def test_convert_weight_memory_format_keeps_values():
    res = {}
    for lib, m in _pair(lambda L: L.nn.Sequential(L.nn.Conv2d(2, 3, 3), L.nn.ReLU())).items():
        L = LIBS[lib]
        w = _np(m[0].weight).copy()
        assert L.nn.utils.convert_conv2d_weight_memory_format(m, L.channels_last) is m
        assert L.nn.utils.convert_conv3d_weight_memory_format(m, L.channels_last_3d) is m
        res[lib] = (w, _np(m[0].weight))
        with pytest.raises(TypeError):
            L.nn.utils.convert_conv2d_weight_memory_format(m, "channels_last")
        L.nn.utils.convert_conv2d_weight_memory_format(L.nn.ReLU(), "anything: no conv to convert")
    np.testing.assert_array_equal(res["gm"][0], res["gm"][1])
    np.testing.assert_array_equal(res["gm"][1], res["torch"][1])


def test_nn_utils_names_match_pytorch():
    for name in ("clip_grads_with_norm_", "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
                 "fuse_linear_bn_weights", "skip_init", "convert_conv2d_weight_memory_format",
                 "convert_conv3d_weight_memory_format"):
        ours, theirs = inspect.signature(getattr(gm.nn.utils, name)), inspect.signature(getattr(torch.nn.utils, name))
        assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
            [(p.name, p.kind, p.default) for p in theirs.parameters.values()], name
    for mod, names in (("parametrize", torch.nn.utils.parametrize.__all__), ("stateless", ["functional_call"]),
                       ("parametrizations", ["spectral_norm", "weight_norm"])):
        for n in names:
            assert callable(getattr(getattr(gm.nn.utils, mod), n)), f"{mod}.{n}"
    for ours, theirs in ((gm.func.functional_call, torch.func.functional_call),
                         (gm.nn.utils.stateless.functional_call, torch.nn.utils.stateless.functional_call)):
        a, b = inspect.signature(ours).parameters.values(), inspect.signature(theirs).parameters.values()
        assert [(p.name, p.kind, p.default) for p in a] == [(p.name, p.kind, p.default) for p in b]


# ---- StackDataset ------------------------------------------------------------------------------------------------
def test_stack_dataset_tuple_and_dict_forms():
    for lib, L in LIBS.items():
        D = L.utils.data
        a = D.TensorDataset(L.arange(5), L.arange(5) * 10)
        b = list("abcde")
        s = D.StackDataset(a, b)
        assert len(s) == 5
        item = s[2]
        assert isinstance(item, tuple) and item[1] == "c" and int(item[0][1]) == 20
        d = D.StackDataset(x=a, y=b)
        assert set(d[4]) == {"x", "y"} and d[4]["y"] == "e"
        assert [t[1] for t in s.__getitems__([0, 3])] == ["a", "d"]
        assert [t["y"] for t in d.__getitems__([1, 4])] == ["b", "e"]
        batch = next(iter(D.DataLoader(d, batch_size=2)))
        assert list(batch["y"]) == ["a", "b"] and [int(v) for v in batch["x"][0]] == [0, 1]
        with pytest.raises(ValueError, match="Size mismatch between datasets"):
            D.StackDataset(a, b[:3])
        with pytest.raises(ValueError, match="Size mismatch between datasets"):
            D.StackDataset(x=a, y=b[:4])
        with pytest.raises(ValueError, match="At least one dataset should be passed"):
            D.StackDataset()
        with pytest.raises(ValueError, match="but both types are given"):
            D.StackDataset(a, y=b)


# ---- parametrizations.orthogonal ---------------------------------------------------------------------------------
ORTH = [("matrix_exp", (4, 4), True), ("cayley", (4, 4), True), ("householder", (4, 4), True),
        ("matrix_exp", (5, 3), True), ("cayley", (3, 5), True), ("householder", (5, 3), True),
        ("householder", (3, 5), True), (None, (2, 3, 3), True), (None, (2, 4, 2), True),
        ("householder", (5, 3), False), ("householder", (3, 3), False), ("matrix_exp", (3, 3), False),
        ("cayley", (4, 2), False)]


@pytest.mark.parametrize("omap,shape,triv", ORTH, ids=[f"{m}-{s}-{t}" for m, s, t in ORTH])
def test_orthogonal_parametrization(omap, shape, triv, device):
    r = np.random.RandomState(4)
    w0 = r.randn(*shape)

    def make(L):
        m = L.nn.Module()
        m.weight = L.nn.Parameter(L.tensor(w0.copy()))
        return m
    res = {}
    mods = {"torch": make(torch), "gm": make(gm).to(device)}
    for lib, m in mods.items():
        LIBS[lib].nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap, use_trivialization=triv)
    # the trivialization of a non-square matrix completes it with random columns: give ours PyTorch's base
    mods["gm"].load_state_dict({k: gm.tensor(v.detach().numpy(), device=device)
                                for k, v in mods["torch"].state_dict().items()})
    assert list(mods["gm"].state_dict()) == list(mods["torch"].state_dict())
    for lib, m in mods.items():
        L = LIBS[lib]
        w = m.weight
        target = L.tensor(np.linspace(-1, 1, int(np.prod(shape))).reshape(shape))
        target = target.to(device) if lib == "gm" else target
        loss = (w * target).sum() + (w ** 3).sum()
        loss.backward()
        orig = m.parametrizations.weight.original
        grad = _np(orig.grad)
        with (gm.no_grad() if lib == "gm" else torch.no_grad()):
            orig.sub_(orig.grad * 0.1)
        res[lib] = (_np(w), grad, _np(m.weight))
    for i, what in enumerate(("weight", "gradient of original", "weight after a step")):
        np.testing.assert_allclose(res["gm"][i], res["torch"][i], rtol=1e-9, atol=1e-11, err_msg=what)
    w = res["gm"][2]
    gram = np.swapaxes(w, -1, -2) @ w if shape[-2] >= shape[-1] else w @ np.swapaxes(w, -1, -2)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(gram.shape[-1]), gram.shape), atol=1e-10)


@pytest.mark.parametrize("omap", ["matrix_exp", "householder"])
def test_orthogonal_assignment(omap):
    """Assigning a matrix stores it made orthogonal (QR with a positive-diagonal R), as PyTorch's."""
    r = np.random.RandomState(6)
    a = r.randn(4, 4)
    res = {}
    for lib, L in LIBS.items():
        m = L.nn.Linear(4, 4).double()
        L.nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap)
        m.weight = L.tensor(a)
        res[lib] = _np(m.weight)
        q = np.linalg.qr(a)[0]
        m.weight = L.tensor(q)  # already orthogonal: kept as it is
        np.testing.assert_allclose(_np(m.weight), q, atol=1e-12)
    np.testing.assert_allclose(res["gm"], res["torch"], rtol=1e-10, atol=1e-12)


def test_orthogonal_refusals():
    for L in (gm, torch):
        with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1"):
            L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3), "bias")
        with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp"'):
            L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3), orthogonal_map="qr")
        m = L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3), use_trivialization=False)
        with pytest.raises(NotImplementedError, match="not possible to assign"):
            m.weight = L.eye(3)
        m = L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3))
        with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
            m.parametrizations.weight[0].right_inverse(L.eye(2))


def test_parametrized_state_stays_model_state_in_memory_reports():
    m = gm.nn.Linear(3, 3)
    gm.nn.utils.parametrizations.orthogonal(m)
    s = gm.nn.Linear(3, 3)
    gm.nn.utils.parametrizations.spectral_norm(s)
    w = gm.nn.Linear(3, 3)
    gm.nn.utils.parametrizations.weight_norm(w)
    tensors = [m.parametrizations.weight.original, m.parametrizations.weight[0].base,
               s.parametrizations.weight[0]._u, s.parametrizations.weight[0]._v,
               w.parametrizations.weight.original0, w.parametrizations.weight.original1]
    assert [t._category for t in tensors] == ["parameter"] * len(tensors)
