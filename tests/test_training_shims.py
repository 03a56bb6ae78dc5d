"""Small PyTorch names training scripts touch: gm.utils.model_zoo.load_url (no network: NotImplementedError, as
gm's hub), nn.DataParallel as a one-device pass-through with PyTorch's "module." state_dict keys,
gm.backends.cudnn's flags, and gm.compile returning the model unchanged."""
import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.nn as nn

torch = pytest.importorskip("torch")


def test_model_zoo_load_url_says_no_network():
    from gpumemnet.utils import model_zoo
    with pytest.raises(NotImplementedError, match="does not download"):
        model_zoo.load_url("https://download.pytorch.org/models/resnet18-f37072fd.pth", progress=False)
    import torch.utils.model_zoo as tz
    assert model_zoo.load_url.__name__ == tz.load_url.__name__


def _pair():
    gm.manual_seed(0)
    g = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
    t = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(4 * 6 * 6, 2))
    return g, t


def test_data_parallel_is_a_pass_through_with_torch_keys():
    g, t = _pair()
    dg, dt = nn.DataParallel(g), torch.nn.DataParallel(t)
    assert nn.parallel.DataParallel is nn.DataParallel
    assert dg.module is g and dg.dim == 0
    assert list(dg.state_dict()) == list(dt.state_dict())
    assert [n for n, _ in dg.named_parameters()] == [n for n, _ in dt.named_parameters()]
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    dg.eval()
    np.testing.assert_array_equal(dg(gm.tensor(x)).detach().numpy(), g(gm.tensor(x)).detach().numpy())
    # a checkpoint of a DataParallel model loads into another DataParallel model (the keys match)
    dg2 = nn.DataParallel(_pair()[0], device_ids=[0], output_device=0)
    dg2.load_state_dict(dg.state_dict())
    assert dg2.device_ids == [0] and dg2.output_device == 0
    dg2.eval()
    np.testing.assert_array_equal(dg2(gm.tensor(x)).detach().numpy(), dg(gm.tensor(x)).detach().numpy())
    loss = dg(gm.tensor(x)).sum()
    loss.backward()
    assert g[0].weight.grad is not None
    with pytest.raises(TypeError, match="nn.Module"):
        nn.DataParallel(lambda x: x)


def test_cudnn_flags():
    import gpumemnet.backends.cudnn as cudnn
    assert gm.backends.cudnn is cudnn
    for name in ("benchmark", "deterministic", "enabled", "allow_tf32"):
        assert type(getattr(cudnn, name)) is type(getattr(torch.backends.cudnn, name))
    assert (cudnn.benchmark, cudnn.deterministic, cudnn.enabled) == (False, False, True)
    cudnn.benchmark = True
    try:
        assert gm.backends.cudnn.benchmark is True
        with cudnn.flags(enabled=True, benchmark=False, deterministic=True):
            assert cudnn.deterministic and not cudnn.benchmark
        assert cudnn.benchmark and not cudnn.deterministic
    finally:
        cudnn.benchmark = False
    built = gm._C._build_info()["cudnn"]
    assert cudnn.is_available() is (built is not None)
    if built is None:
        assert cudnn.version() is None
    else:
        major, minor, patch = (int(v) for v in built.split("."))
        assert cudnn.version() == major * 10000 + minor * 100 + patch
    assert cudnn.is_acceptable(gm.zeros(2)) is False  # a CPU tensor


def test_compile_returns_the_model():
    g, _ = _pair()
    assert gm.compile(g) is g
    assert gm.compile(g, mode="max-autotune", fullgraph=True, dynamic=False, backend="inductor") is g

    @gm.compile(mode="reduce-overhead")
    def f(x):
        return x + 1

    assert f(1) == 2
    assert gm.compile(f) is f
