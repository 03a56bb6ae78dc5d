"""gm.save / gm.load of what PyTorch's torch.save pickles (a whole nn.Module, an argparse.Namespace in a
checkpoint) and of file objects (io.BytesIO, an open file), against PyTorch: what loads with the default
weights_only=True, what needs weights_only=False, and that the loaded model computes what the saved one did."""
import argparse
import collections
import io
import pickle

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def net(L):
    L.manual_seed(0)
    return L.nn.Sequential(L.nn.Conv2d(3, 4, 3), L.nn.BatchNorm2d(4), L.nn.ReLU(), L.nn.Flatten(), L.nn.Linear(16, 2))


@pytest.mark.parametrize("target", ["path", "bytesio", "open file"])
def test_a_whole_model_round_trips_with_weights_only_false(target, tmp_path):
    m = net(gm)
    x = gm.randn(2, 3, 4, 4)
    m.train()(x).sum().backward()  # batch-norm statistics move, gradients exist
    m.eval()
    path = tmp_path / "m.pt"
    if target == "path":
        gm.save(m, path)
        m2 = gm.load(path, weights_only=False)
    elif target == "bytesio":
        buf = io.BytesIO()
        gm.save(m, buf)
        buf.seek(0)
        m2 = gm.load(buf, weights_only=False)
    else:
        with open(path, "wb") as f:
            gm.save(m, f)
        with open(path, "rb") as f:
            m2 = gm.load(f, weights_only=False)
    assert type(m2) is type(m) and m2 is not m and not m2.training
    np.testing.assert_array_equal(m2(x).detach().numpy(), m(x).detach().numpy())
    for (k, a), (k2, b) in zip(m.named_parameters(), m2.named_parameters()):
        assert k == k2 and isinstance(b, gm.nn.Parameter) and b.requires_grad
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    np.testing.assert_array_equal(m2[1].running_var.numpy(), m[1].running_var.numpy())
    assert not m2[1].running_var.requires_grad


def test_weights_only_refuses_pickled_objects_as_pytorch_does(tmp_path):
    ck = lambda L: {"model": net(L).state_dict(), "args": argparse.Namespace(lr=0.1, epochs=3), "epoch": 3}
    for L in (torch, gm):
        path = tmp_path / f"{L.__name__}.pt"
        L.save(ck(L), path)
        with pytest.raises(pickle.UnpicklingError, match="weights_only"):
            L.load(path)
        got = L.load(path, weights_only=False)
        assert got["args"] == argparse.Namespace(lr=0.1, epochs=3) and got["epoch"] == 3
        assert sorted(got["model"]) == sorted(net(L).state_dict())


def test_safe_types_load_with_weights_only(tmp_path):
    obj = {"order": collections.OrderedDict(a=1, b=2), "dtype": gm.float16, "set": {1, 2}, "t": gm.ones(2)}
    gm.save(obj, tmp_path / "s.pt")
    got = gm.load(tmp_path / "s.pt")
    assert got["order"] == {"a": 1, "b": 2} and got["dtype"] is gm.float16 and got["set"] == {1, 2}
    assert got["t"].tolist() == [1.0, 1.0]


def test_a_pickled_objects_tensors_are_the_files_tensors(tmp_path):
    """The data stays in the safetensors file (PyTorch-side safetensors readers see it); the pickle is structure."""
    from safetensors.numpy import load_file
    m = net(gm)
    gm.save({"whole": m}, tmp_path / "m.pt")
    arrays = load_file(str(tmp_path / "m.pt"))
    assert sorted(a.size for a in arrays.values()) == sorted(t.numel() for t in m.state_dict().values())
    with pytest.raises(TypeError, match=r"f of type function: pickle cannot take it"):
        gm.save({"f": lambda: 1}, tmp_path / "lambda.pt")  # what pickle cannot take (PyTorch: its pickle error)
    assert not (tmp_path / "lambda.pt").exists()


def test_tensors_pickle_and_copy_as_pytorchs_do():
    import copy
    cases = [gm.ones(2, 3, requires_grad=True), gm.arange(6.0).reshape(2, 3).t(), gm.full((2,), 1.5, dtype=gm.bfloat16),
             gm.tensor([1, -2], dtype=gm.int8), gm.nn.Parameter(gm.ones(2)), gm.zeros(3, device="meta")]
    for x in cases:
        y = pickle.loads(pickle.dumps(x))
        assert (y.dtype, y.device, tuple(y.shape), y.requires_grad) == (x.dtype, x.device, tuple(x.shape),
                                                                         x.requires_grad)
        assert isinstance(y, gm.nn.Parameter) == isinstance(x, gm.nn.Parameter)
        if x.device.type != "meta":
            assert y.tolist() == x.tolist() and y.data_ptr() != x.data_ptr()
    for L in (torch, gm):
        t = L.ones(3, requires_grad=True)
        c = copy.copy(t)
        assert c is not t and c.data_ptr() == t.data_ptr() and c.requires_grad  # the same memory
        for y in (pickle.loads(pickle.dumps(t * 2)), copy.copy(t * 2)):  # a leaf that requires grad
            assert y.requires_grad and y.grad_fn is None and y.tolist() == [2.0, 2.0, 2.0]
    m = pickle.loads(pickle.dumps(net(gm)))
    assert all(isinstance(p, gm.nn.Parameter) and p.requires_grad for p in m.parameters())
