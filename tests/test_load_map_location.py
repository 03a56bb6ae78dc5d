"""gm.load with PyTorch's keywords: map_location in each of its forms, weights_only, and the errors."""
import numpy as np
import pytest

import gpumemnet as gm


@pytest.fixture
def checkpoint(tmp_path):
    gm.manual_seed(0)
    net = gm.nn.Linear(3, 2)
    opt = gm.optim.Adam(net.parameters())
    net(gm.randn(4, 3)).sum().backward()
    opt.step()
    path = tmp_path / "ck.safetensors"
    gm.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, path)
    return path, net


def _same_weights(loaded, net):
    np.testing.assert_array_equal(loaded["model"]["weight"].cpu().numpy(), net.weight.detach().numpy())
    assert loaded["epoch"] == 3


@pytest.mark.parametrize("where", ["cpu", gm.device("cpu"), {"cuda:0": "cpu"}, {"cpu": "cpu"}, None])
def test_map_location_to_cpu(checkpoint, where):
    path, net = checkpoint
    loaded = gm.load(path, map_location=where)
    assert loaded["model"]["weight"].device.type == "cpu"
    assert loaded["optimizer"]["state"][0]["exp_avg"].device.type == "cpu"
    _same_weights(loaded, net)


def test_map_location_storage_lambda_keeps_the_tensor(checkpoint):
    path, net = checkpoint
    seen = []
    loaded = gm.load(path, map_location=lambda storage, loc: seen.append(loc) or storage)
    assert seen and set(seen) == {"cpu"}
    _same_weights(loaded, net)


def test_map_location_callable_may_replace_the_tensor(checkpoint):
    path, _ = checkpoint
    loaded = gm.load(path, map_location=lambda t, loc: t * 0)
    assert float(loaded["model"]["weight"].abs().sum()) == 0.0


def test_map_location_meta_reads_no_data(checkpoint):
    path, _ = checkpoint
    loaded = gm.load(path, map_location="meta")
    assert loaded["model"]["weight"].device.type == "meta"
    assert tuple(loaded["model"]["weight"].shape) == (2, 3)


@pytest.mark.skipif(not gm.cuda.is_available(), reason="no CUDA device (nor the emulator build)")
def test_map_location_cuda(checkpoint):
    path, net = checkpoint
    loaded = gm.load(path, map_location="cuda:0")
    assert loaded["model"]["weight"].device.type == "cuda"
    _same_weights(loaded, net)


def test_map_location_cuda_without_cuda_says_so(checkpoint):
    if gm.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(RuntimeError, match="no CUDA support|no CUDA device|not available"):
        gm.load(checkpoint[0], map_location="cuda:0")


def test_weights_only_is_accepted(checkpoint):
    path, net = checkpoint
    _same_weights(gm.load(path, weights_only=True), net)
    _same_weights(gm.load(path, weights_only=False, mmap=False), net)


def test_unknown_keyword_is_a_type_error(checkpoint):
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        gm.load(checkpoint[0], foo=1)
