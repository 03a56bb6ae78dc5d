"""spectral_norm / weight_norm (nn/utils/weight_norms.py) and ParameterList / ParameterDict against PyTorch: the
same state_dict keys, the same forward and gradients from the same state, the same power-iteration updates of u
and v in training (none in eval), and remove_* giving back a plain weight."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def _pair(kind):
    torch.manual_seed(0)
    tm = (torch.nn.Conv2d(3, 4, 3) if kind == "conv" else
          torch.nn.ConvTranspose2d(3, 4, 3) if kind == "convT" else torch.nn.Linear(5, 6)).double()
    m = (gm.nn.Conv2d(3, 4, 3) if kind == "conv" else
         gm.nn.ConvTranspose2d(3, 4, 3) if kind == "convT" else gm.nn.Linear(5, 6)).double()
    x = np.random.RandomState(1).randn(*((2, 3, 6, 6) if kind != "linear" else (3, 5)))
    return tm, m, x


def _load(m, tm):
    m.load_state_dict({k: gm.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def _close(a, b, rtol=1e-10):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("kind", ["conv", "convT", "linear"])
def test_spectral_norm_matches_pytorch(kind):
    tm, m, x = _pair(kind)
    torch.nn.utils.spectral_norm(tm, n_power_iterations=2)
    gm.nn.utils.spectral_norm(m, n_power_iterations=2)
    assert sorted(m.state_dict()) == sorted(tm.state_dict())
    _load(m, tm)
    for step in range(2):  # training: u and v move by power iteration each forward
        a, b = gm.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = m(a), tm(b)
        _close(ya, yb)
        (ya * ya).sum().backward()
        (yb * yb).sum().backward()
        _close(a.grad, b.grad, 1e-9)
        _close(m.weight_orig.grad, tm.weight_orig.grad, 1e-9)
        _close(m.weight_u, tm.weight_u)
        _close(m.weight_v, tm.weight_v)
    m.eval()
    tm.eval()
    u = m.weight_u.clone()
    _close(m(gm.tensor(x)), tm(torch.tensor(x)))
    assert gm.equal(u, m.weight_u)  # no power iteration in eval
    gm.nn.utils.remove_spectral_norm(m)
    torch.nn.utils.remove_spectral_norm(tm)
    assert sorted(m.state_dict()) == sorted(tm.state_dict())
    _close(m.weight, tm.weight)


@pytest.mark.parametrize("dim", [0, 1, 3, -1, None])
def test_weight_norm_matches_pytorch(dim):
    tm, m, x = _pair("conv")
    torch.nn.utils.weight_norm(tm, dim=dim)
    gm.nn.utils.weight_norm(m, dim=dim)
    assert sorted(m.state_dict()) == sorted(tm.state_dict())
    assert tuple(m.weight_g.shape) == tuple(tm.weight_g.shape)
    _load(m, tm)
    a, b = gm.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = m(a), tm(b)
    _close(ya, yb)
    (ya * ya).sum().backward()
    (yb * yb).sum().backward()
    for name in ("weight_g", "weight_v", "bias"):
        _close(getattr(m, name).grad, getattr(tm, name).grad, 1e-9)
    gm.nn.utils.remove_weight_norm(m)
    torch.nn.utils.remove_weight_norm(tm)
    _close(m.weight, tm.weight)


def test_two_hooks_on_one_weight_are_refused():
    m = gm.nn.utils.spectral_norm(gm.nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        gm.nn.utils.spectral_norm(m)
    with pytest.raises(ValueError, match="not found"):
        gm.nn.utils.remove_weight_norm(m)


def test_parameter_list_and_dict_register_like_pytorch():
    class Net(gm.nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = gm.nn.ParameterList([gm.nn.Parameter(gm.ones(2)), gm.zeros(3)])
            self.ws.append(gm.ones(1))
            self.d = gm.nn.ParameterDict({"a": gm.ones(2)})
            self.d["b"] = gm.nn.Parameter(gm.zeros(2))

        def forward(self, x):
            return sum((w.sum() for w in self.ws), x) + self.d["a"].sum() * self.d["b"].sum()

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2)), torch.zeros(3)])
            self.ws.append(torch.ones(1))
            self.d = torch.nn.ParameterDict({"a": torch.ones(2)})
            self.d["b"] = torch.nn.Parameter(torch.zeros(2))

    net, tnet = Net(), TNet()
    assert [k for k, _ in net.named_parameters()] == [k for k, _ in tnet.named_parameters()]
    assert all(isinstance(p, gm.nn.Parameter) for p in net.ws) and len(net.ws) == 3
    assert isinstance(net.ws[-1], gm.nn.Parameter) and len(net.ws[1:]) == 2
    assert list(net.d.keys()) == ["a", "b"] and "a" in net.d and len(net.d) == 2
    out = net(gm.tensor(0.0))
    out.backward()
    assert net.ws[0].grad.tolist() == [1.0, 1.0] and net.d["b"].grad.tolist() == [2.0, 2.0]
    opt = gm.optim.SGD(net.parameters(), lr=0.1)
    assert len(opt.param_groups[0]["params"]) == 5
