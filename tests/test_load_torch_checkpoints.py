"""gm.load of files real PyTorch wrote with torch.save (python/gpumemnet/_serialization_torch.py): the zip format
and the legacy one, every dtype gpumemnet has, views sharing a storage, optimizer checkpoints, whole pickled
modules, map_location's forms, weights_only's refusals, and a torchvision resnet18 state_dict running under the
drop-in alias with PyTorch's output. Values are compared exactly (they are the same bytes), through NumPy."""
import argparse
import collections
import io
import os
import pathlib
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import gpumemnet as gm  # noqa: E402  (after torch: the OpenMP warning that order gives is harmless here)


def _np(t):
    """A NumPy copy of a torch or gpumemnet tensor (bfloat16 through float32: NumPy has no bfloat16)."""
    if t.dtype in (torch.bfloat16, gm.bfloat16):
        t = t.float()
    return t.detach().cpu().numpy()


def _same(loaded, ref, where="the object"):
    """loaded (from gm.load) equals ref (PyTorch's object) in structure, types, dtypes, shapes and every value."""
    if isinstance(ref, torch.Tensor):
        assert isinstance(loaded, gm.Tensor), f"{where}: {type(loaded).__name__}"
        assert str(loaded.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1], where
        assert tuple(loaded.shape) == tuple(ref.shape), where
        assert loaded.requires_grad == ref.requires_grad, where
        assert isinstance(loaded, gm.nn.Parameter) == isinstance(ref, torch.nn.Parameter), where
        np.testing.assert_array_equal(_np(loaded), _np(ref), err_msg=where)
    elif isinstance(ref, dict):
        assert type(loaded) is type(ref) and list(loaded) == list(ref), where
        for k in ref:
            _same(loaded[k], ref[k], f"{where}[{k!r}]")
    elif isinstance(ref, (list, tuple)):
        assert type(loaded) is type(ref) and len(loaded) == len(ref), where
        for i, (a, b) in enumerate(zip(loaded, ref)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert type(loaded) is type(ref) and loaded == ref, f"{where}: {loaded!r} != {ref!r}"


@pytest.fixture(params=["zip", "legacy"])
def saved(request, tmp_path):
    """saved(obj) -> the path of obj written by torch.save in the format under test."""
    def write(obj, name="ck.pt"):
        path = tmp_path / name
        torch.save(obj, path, _use_new_zipfile_serialization=request.param == "zip")
        return path
    return write


def test_resnet18_state_dict(saved):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None)
    for m in net.modules():  # running statistics that are not the initial 0/1, and a counted batch
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.num_batches_tracked += 3
    sd = net.state_dict()
    loaded = gm.load(saved(sd))
    assert type(loaded) is collections.OrderedDict
    _same(loaded, sd)
    assert loaded["bn1.num_batches_tracked"].dtype == gm.int64


def test_dtypes_and_shapes(saved):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 5, generator=g)
    obj = {"f32": x, "f64": x.double(), "f16": x.half(), "bf16": x.bfloat16(),
           "i64": torch.arange(-5, 10), "i32": torch.arange(7, dtype=torch.int32), "i16": torch.arange(4).short(),
           "i8": torch.tensor([-128, 0, 127], dtype=torch.int8), "u8": torch.tensor([0, 200, 255], dtype=torch.uint8),
           "bool": x > 0, "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 4), "big_i64": torch.tensor([2 ** 62])}
    _same(gm.load(saved(obj)), obj)


def test_unsigned_dtypes_gpumemnet_lacks_widen_to_int64(tmp_path):
    t = torch.tensor([1, 2, 65535], dtype=torch.int32).to(torch.uint16)
    torch.save(t, tmp_path / "u.pt")
    got = gm.load(tmp_path / "u.pt")
    assert got.dtype == gm.int64 and got.tolist() == [1, 2, 65535]


def test_views_share_their_storage(saved):
    base = torch.arange(24.0).reshape(4, 6)
    obj = {"base": base, "t": base.t(), "rows": base[1:3], "step": base[:, ::2], "flat": base.view(-1)[5:17]}
    loaded = gm.load(saved(obj))
    _same(loaded, obj)
    assert not loaded["t"].is_contiguous() and not loaded["step"].is_contiguous()
    loaded["base"][1, 2] = -1.0  # one storage in PyTorch, one memory here: every view sees the write
    assert float(loaded["t"][2, 1]) == -1.0
    assert float(loaded["rows"][0, 2]) == -1.0
    assert float(loaded["step"][1, 1]) == -1.0
    assert float(loaded["flat"][3]) == -1.0


def test_tied_weights_stay_tied(saved):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)
            self.out = torch.nn.Linear(4, 10, bias=False)
            self.out.weight = self.emb.weight
    torch.manual_seed(0)
    sd = Tied().state_dict()
    loaded = gm.load(saved(sd))
    _same(loaded, sd)
    loaded["emb.weight"][0, 0] = 123.0
    assert float(loaded["out.weight"][0, 0]) == 123.0
    same = gm.load(saved({"a": sd["emb.weight"], "b": sd["emb.weight"]}, "same.pt"))
    assert same["a"] is same["b"]  # one tensor pickled twice is one object, as in PyTorch


def test_checkpoint_with_optimizer_and_plain_values(saved):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, betas=(0.8, 0.99))
    for _ in range(2):
        opt.zero_grad()
        net(torch.randn(5, 3)).pow(2).sum().backward()
        opt.step()
    ck = {"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 7, "loss": 0.125, "name": "run-1",
          "history": [1.5, 0.75, (2, "x", None)], "flags": (True, False), "nested": {"a": [{"b": (1, 2.0)}]},
          "tensors": [torch.ones(2), (torch.zeros(1, dtype=torch.int64),)], "raw": b"\x00\xff"}
    loaded = gm.load(saved(ck))
    _same(loaded, ck)
    assert loaded["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.99)
    assert loaded["optimizer"]["state"][0]["exp_avg_sq"].shape == (4, 3)
    # and it resumes: gpumemnet's Adam takes PyTorch's optimizer state
    gnet = gm.nn.Sequential(gm.nn.Linear(3, 4), gm.nn.ReLU(), gm.nn.Linear(4, 2))
    gnet.load_state_dict(loaded["model"])
    gopt = gm.optim.Adam(gnet.parameters(), lr=1e-3)
    gopt.load_state_dict(loaded["optimizer"])
    assert gopt.param_groups[0]["betas"] == (0.8, 0.99)


def test_parameters_keep_their_kind(saved):
    obj = {"p": torch.nn.Parameter(torch.randn(3)), "frozen": torch.nn.Parameter(torch.randn(2), requires_grad=False),
           "leaf": torch.randn(2).requires_grad_()}
    _same(gm.load(saved(obj)), obj)


def test_whole_pickled_module(saved):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 5 * 5, 3)).eval()
    net[1].running_mean.uniform_(-1, 1)
    path = saved(net)
    with pytest.raises(pickle.UnpicklingError, match=r"torch\.nn\.modules\.container\.Sequential.*weights_only"):
        gm.load(path)
    loaded = gm.load(path, weights_only=False)
    assert isinstance(loaded, gm.nn.Sequential) and isinstance(loaded[4], gm.nn.Linear)
    assert not loaded.training
    _same(loaded.state_dict(), net.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5)).astype(np.float32)
    with torch.no_grad():
        ref = net(torch.from_numpy(x)).numpy()
    calls = []
    loaded.register_forward_hook(lambda m, args, out: calls.append(1))  # gpumemnet's Module machinery works
    with gm.no_grad():
        out = loaded(gm.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert calls == [1]


def test_file_objects_and_paths(tmp_path):
    obj = {"w": torch.randn(3, 2), "n": 4}
    buf = io.BytesIO()
    torch.save(obj, buf)
    _same(gm.load(io.BytesIO(buf.getvalue())), obj)
    torch.save(obj, tmp_path / "p.pth")
    _same(gm.load(pathlib.Path(tmp_path / "p.pth")), obj)
    _same(gm.load(str(tmp_path / "p.pth")), obj)
    with open(tmp_path / "p.pth", "rb") as f:
        _same(gm.load(f), obj)


def _relocated(path, location):
    """A copy of the zip checkpoint at path whose storages say they were saved on `location` (a CPU-only PyTorch
    cannot save from CUDA; the location is a string in data.pkl, and pickle addresses nothing by offset)."""
    out = path.with_name("relocated.pt")
    old = b"X\x03\x00\x00\x00cpu"
    new = b"X" + len(location).to_bytes(4, "little") + location.encode()
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith("/data.pkl"):
                assert old in data
                data = data.replace(old, new)
            dst.writestr(name, data)
    return out


def test_map_location_forms(tmp_path):
    obj = {"w": torch.randn(4, 3), "t": None}
    obj["t"] = obj["w"].t()
    torch.save(obj, tmp_path / "m.pt")
    cuda = _relocated(tmp_path / "m.pt", "cuda:0")
    for where in ("cpu", gm.device("cpu"), {"cuda:0": "cpu"}, {"cuda:0": gm.device("cpu")}):
        loaded = gm.load(cuda, map_location=where)
        assert loaded["w"].device.type == "cpu"
        _same(loaded, obj)
    seen = []
    loaded = gm.load(cuda, map_location=lambda storage, loc: seen.append(loc) or storage)
    assert seen == ["cuda:0"]  # one storage, visited once
    _same(loaded, obj)
    meta = gm.load(cuda, map_location="meta")
    assert meta["w"].device.type == "meta" and tuple(meta["t"].shape) == (3, 4)
    _same(gm.load(tmp_path / "m.pt", map_location=None), obj)
    _same(gm.load(tmp_path / "m.pt", map_location={"cuda:0": "meta"}), obj)  # only cuda:0's storages move
    if not gm.cuda.is_available():
        with pytest.raises(RuntimeError, match=r"saved on 'cuda:0'.*CUDA is not available.*map_location='cpu'"):
            gm.load(cuda)


@pytest.mark.skipif(not gm.cuda.is_available(), reason="no CUDA device (nor the emulator build)")
def test_map_location_none_restores_cuda(tmp_path):
    obj = {"w": torch.randn(4, 3)}
    torch.save(obj, tmp_path / "m.pt")
    loaded = gm.load(_relocated(tmp_path / "m.pt", "cuda:0"))
    assert loaded["w"].device.type == "cuda"
    _same(loaded, obj)


class Unsafe:
    """A class of this test module: weights_only must refuse it."""


def test_weights_only_refuses_other_globals(saved):
    path = saved({"args": argparse.Namespace(lr=0.1), "w": torch.ones(2)})
    with pytest.raises(pickle.UnpicklingError, match=r"argparse\.Namespace.*weights_only=False"):
        gm.load(path)
    with pytest.raises(pickle.UnpicklingError, match=r"argparse\.Namespace"):
        gm.load(path, weights_only=True)
    loaded = gm.load(path, weights_only=False)
    assert loaded["args"].lr == 0.1 and loaded["w"].tolist() == [1.0, 1.0]
    path = saved({"x": Unsafe()}, "unsafe.pt")
    with pytest.raises(pickle.UnpicklingError, match=r"test_load_torch_checkpoints\.Unsafe"):
        gm.load(path)


@pytest.mark.parametrize("content,match", [
    (b"just some text, not a checkpoint\n" * 3, "not a PyTorch checkpoint.*nor a gpumemnet"),
    (b"PK\x03\x04" + b"\x00" * 40, "not a valid one"),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "not a PyTorch checkpoint"),
], ids=["text", "broken-zip", "png"])
def test_foreign_files_say_what_they_are(tmp_path, content, match):
    path = tmp_path / "f.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=match) as info:
        gm.load(path)
    assert str(path) in str(info.value)


def test_zip_that_is_not_a_checkpoint(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.ones(2))
    with pytest.raises(ValueError, match=r"zip archive but not a PyTorch checkpoint.*npz"):
        gm.load(tmp_path / "a.npz")


def test_truncated_checkpoints(tmp_path):
    torch.save({"w": torch.randn(100)}, tmp_path / "z.pt")
    torch.save({"w": torch.randn(100)}, tmp_path / "l.pt", _use_new_zipfile_serialization=False)
    for name in ("z.pt", "l.pt"):
        raw = (tmp_path / name).read_bytes()
        (tmp_path / name).write_bytes(raw[:len(raw) - 60])
        with pytest.raises(ValueError, match="truncated|damaged|not a valid"):
            gm.load(tmp_path / name)


def test_out_of_bounds_view_is_refused(tmp_path):
    """A file whose tensor claims more elements than its storage holds must not read past the storage."""
    torch.save({"w": torch.ones(4)}, tmp_path / "w.pt")
    bad = tmp_path / "bad.pt"
    with zipfile.ZipFile(tmp_path / "w.pt") as src, zipfile.ZipFile(bad, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith("/data.pkl"):  # size (4,) -> (40,): BININT1 4 in a TUPLE1
                assert data.count(b"K\x04\x85") == 1
                data = data.replace(b"K\x04\x85", b"K\x28\x85")
            dst.writestr(name, data)
    with pytest.raises(pickle.UnpicklingError, match="storage of 4 elements"):
        gm.load(bad)


# ---- a torchvision model under the drop-in alias ------------------------------------------------------------------
_DROPIN_SCRIPT = """
import sys
import numpy as np
import torch, torchvision
net = torchvision.models.resnet18(weights=None)
net.load_state_dict(torch.load(sys.argv[1], map_location="cpu"))
net.eval()
with torch.no_grad():
    out = net(torch.from_numpy(np.load(sys.argv[2])))
np.save(sys.argv[3], out.numpy())
"""


def test_resnet18_weights_run_under_the_dropin_alias(tmp_path):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.8, 1.2)
    net.eval()
    torch.save(net.state_dict(), tmp_path / "resnet18.pth")
    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    with torch.no_grad():
        ref = net(torch.from_numpy(x)).numpy()
    (tmp_path / "script.py").write_text(_DROPIN_SCRIPT)
    r = subprocess.run([sys.executable, "-m", "gpumemnet", "run", str(tmp_path / "script.py"),
                        str(tmp_path / "resnet18.pth"), str(tmp_path / "x.npy"), str(tmp_path / "out.npy")],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = np.load(tmp_path / "out.npy")
    assert out.shape == ref.shape
    assert np.abs(out - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())
