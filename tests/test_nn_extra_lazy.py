"""The lazy modules (nn/modules/lazy.py) against PyTorch's: reprs and state_dict keys before and after the first
call, the class they become, the shapes they infer, outputs and gradients once PyTorch's weights are loaded, and
load_state_dict before the first call; UninitializedParameter / UninitializedBuffer; on the CPU and on CUDA."""
import numpy as np
import pytest

import gpumemnet as gm
from cuda_util import device, to_np  # noqa: F401  (device is a fixture)

torch = pytest.importorskip("torch")

R = np.random.RandomState(0)

# name -> (constructor kwargs, input shape)
LAZY = {
    "LazyLinear": ({"out_features": 3}, (2, 4, 5)),
    "LazyLinear no bias": ({"out_features": 3, "bias": False}, (2, 5)),
    "LazyConv1d": ({"out_channels": 4, "kernel_size": 3}, (2, 3, 9)),
    "LazyConv1d unbatched": ({"out_channels": 4, "kernel_size": 3, "padding": 1}, (3, 9)),
    "LazyConv2d groups": ({"out_channels": 6, "kernel_size": 3, "groups": 2, "padding": 1}, (2, 4, 7, 7)),
    "LazyConvTranspose1d": ({"out_channels": 4, "kernel_size": 3, "stride": 2}, (3, 9)),
    "LazyConvTranspose2d": ({"out_channels": 6, "kernel_size": 3, "groups": 2, "stride": 2, "output_padding": 1},
                            (2, 4, 5, 5)),
    "LazyBatchNorm1d": ({}, (4, 3)),
    "LazyBatchNorm2d cumulative": ({"momentum": None}, (4, 3, 2, 2)),
    "LazyBatchNorm3d no affine": ({"affine": False}, (2, 3, 2, 2, 2)),
    "LazyInstanceNorm1d": ({}, (2, 3, 5)),
    "LazyInstanceNorm2d untracked": ({"track_running_stats": False}, (2, 3, 4, 4)),
    "LazyInstanceNorm3d": ({}, (2, 3, 2, 3, 3)),
}


def _make(lib, name, device=None):
    kw, _ = LAZY[name]
    if lib is gm:
        return getattr(gm.nn, name.split()[0])(**kw, device=device, dtype=gm.float64)
    return getattr(torch.nn, name.split()[0])(**kw, dtype=torch.float64)


def _sd(theirs):
    return {k: gm.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}


@pytest.mark.parametrize("name", list(LAZY))
def test_lazy_module_matches_pytorch(name, device):
    ours, theirs = _make(gm, name, device), _make(torch, name)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.has_uninitialized_params()
    params_before = list(ours.parameters())  # what an optimizer built now would hold
    shape = LAZY[name][1]
    x = R.randn(*shape)
    theirs(torch.tensor(x))
    ours(gm.tensor(x, device=device))
    assert type(ours).__name__ == type(theirs).__name__  # e.g. LazyLinear became Linear
    assert isinstance(ours, getattr(gm.nn, type(theirs).__name__))
    assert not isinstance(ours, gm.nn.modules.lazy.LazyModuleMixin)
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert all(a is b for a, b in zip(params_before, ours.parameters()))  # materialised in place
    for p in ours.parameters():
        assert p._category == "parameter" and p.requires_grad and p.device.type == device
    ours.load_state_dict(_sd(theirs))
    x2 = R.randn(*shape)
    xa = gm.tensor(x2, device=device, requires_grad=True)
    xb = torch.tensor(x2, requires_grad=True)
    ya, yb = ours(xa), theirs(xb)
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-10, atol=1e-10)
    w = R.randn(*yb.shape)
    (ya * gm.tensor(w, device=device)).sum().backward()
    (yb * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(to_np(xa.grad), xb.grad.numpy(), rtol=1e-10, atol=1e-10)
    for (n, p), (n2, p2) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(to_np(p.grad), p2.grad.numpy(), rtol=1e-10, atol=1e-10, err_msg=n)
    for (n, b), (n2, b2) in zip(ours.named_buffers(), theirs.named_buffers()):
        np.testing.assert_allclose(to_np(b), b2.numpy(), rtol=1e-10, atol=1e-10, err_msg=n)


@pytest.mark.parametrize("name", [n for n in LAZY if "Instance" not in n])
def test_load_state_dict_before_the_first_call(name, device):
    """Loading materialises the parameters with the checkpoint's shapes; the first call then switches the class
    (instance norms keep num_features 0 after such a load, and PyTorch's then refuse the input: not tested)."""
    done = _make(torch, name)
    x = R.randn(*LAZY[name][1])
    done(torch.tensor(x))
    theirs, ours = _make(torch, name), _make(gm, name, device)
    theirs.load_state_dict(done.state_dict())
    ours.load_state_dict(_sd(done))
    assert not ours.has_uninitialized_params()
    assert type(ours).__name__ == type(theirs).__name__ and repr(ours) == repr(theirs)
    ya, yb = ours(gm.tensor(x, device=device)), theirs(torch.tensor(x))
    assert type(ours).__name__ == type(theirs).__name__ and repr(ours) == repr(theirs)
    np.testing.assert_allclose(to_np(ya), yb.detach().numpy(), rtol=1e-10, atol=1e-10)


def test_uninitialized_parameter_and_buffer():
    p = gm.nn.UninitializedParameter()
    b = gm.nn.UninitializedBuffer(dtype=gm.float64)
    assert isinstance(p, gm.nn.UninitializedParameter) and isinstance(p, gm.nn.Parameter)
    assert not isinstance(p, gm.nn.UninitializedBuffer) and not isinstance(b, gm.nn.UninitializedParameter)
    assert isinstance(b, gm.nn.UninitializedBuffer) and not b.requires_grad and b.dtype == gm.float64
    assert p.requires_grad and not gm.nn.UninitializedParameter(requires_grad=False).requires_grad
    assert not isinstance(gm.nn.Parameter(gm.zeros(0)), gm.nn.UninitializedParameter)
    m = gm.nn.LazyLinear(2)
    assert isinstance(m.state_dict()["weight"], gm.nn.UninitializedParameter)  # as PyTorch's state_dict
    t = torch.nn.LazyLinear(2)
    assert isinstance(t.state_dict()["weight"], torch.nn.UninitializedParameter)


def test_lazy_modules_in_a_model_train(device):
    model = gm.nn.Sequential(gm.nn.LazyConv2d(4, 3, padding=1), gm.nn.LazyBatchNorm2d(), gm.nn.ReLU(),
                             gm.nn.Flatten(), gm.nn.LazyLinear(2)).to(device)
    opt = gm.optim.SGD(model.parameters(), lr=0.1)  # built before the shapes are known, as PyTorch allows
    x = gm.randn(3, 2, 5, 5, device=device)
    model(x).square().mean().backward()
    before = [to_np(p) for p in model.parameters()]
    opt.step()
    assert all(a is b for a, b in zip(opt.param_groups[0]["params"], model.parameters()))
    assert (to_np(model[4].weight) != before[-2]).any() and (to_np(model[0].weight) != before[0]).any()
    assert [type(m).__name__ for m in model] == ["Conv2d", "BatchNorm2d", "ReLU", "Flatten", "Linear"]
    assert tuple(model[0].weight.shape) == (4, 2, 3, 3) and tuple(model[4].weight.shape) == (2, 100)
    assert model[1].num_features == 4 and model[0].in_channels == 2 and model[4].in_features == 100
    assert int(model[1].num_batches_tracked.item()) == 1


def test_lazy_module_on_meta():
    m = gm.nn.LazyLinear(7, device="meta")
    y = m(gm.zeros(2, 3, device="meta"))
    assert tuple(y.shape) == (2, 7) and m.weight.device.type == "meta" and type(m).__name__ == "Linear"
    bn = gm.nn.LazyBatchNorm1d().double()  # a cast replaces the buffers: they stay uninitialized
    assert isinstance(bn.running_mean, gm.nn.UninitializedBuffer) and bn.running_mean.dtype == gm.float64
    bn(gm.randn(4, 3, dtype=gm.float64))
    assert tuple(bn.running_mean.shape) == (3,) and bn.running_mean.dtype == gm.float64


def test_lazy_module_refusals_match_pytorch():
    for lib in (gm, torch):
        with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
            lib.nn.LazyConv2d(4, 3, groups=2)(lib.zeros(1, 3, 5, 5))
        with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input"):
            lib.nn.LazyConv2d(4, 3)(lib.zeros(5, 5))
        with pytest.raises(AssertionError, match="in_features inferred from input: 4"):
            done = lib.nn.LazyLinear(2)
            done(lib.zeros(1, 3))
            fresh = lib.nn.LazyLinear(2)
            fresh.load_state_dict(done.state_dict())
            fresh(lib.zeros(1, 4))


def test_a_lazy_module_loads_through_its_parent(device):
    """Sequential(LazyLinear, ...).load_state_dict(PyTorch's) before the first call: the lazy child takes its shapes
    from the state (PyTorch's load pre-hook), and the model then computes what PyTorch's does."""
    ref = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    net = gm.nn.Sequential(gm.nn.LazyLinear(3), gm.nn.ReLU(), gm.nn.LazyLinear(2)).to(device)
    net.load_state_dict({k: gm.tensor(v.detach().numpy(), device=device) for k, v in ref.state_dict().items()})
    x = R.randn(4, 5).astype(np.float32)
    np.testing.assert_allclose(to_np(net(gm.tensor(x, device=device))), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert type(net[0]) is gm.nn.Linear and net[0].weight.shape == (3, 5)

