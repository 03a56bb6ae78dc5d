"""gm.save / gm.load (python/gpumemnet/serialization.py): round trips of nested structures with every dtype, the
file layout other tools read (a flat state_dict's keys are the safetensors keys), loading on meta, atomic
replacement (a failed save never damages an existing file), and the errors for bad paths and bad files."""
import json
import os
import struct

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet import serialization
from gpumemnet.serialization import load, save
from gradcheck import to_numpy
from serialization_util import leftovers, old_file

_rng = np.random.default_rng(7)


def _bits(t):
    """The exact stored values of a tensor as an ndarray (bfloat16 as its float32 widening, which is exact)."""
    return to_numpy(t)


def _header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def _assert_same(a, b, where="obj"):
    if isinstance(a, gm.Tensor):
        assert isinstance(b, gm.Tensor), f"{where}: {type(b).__name__} is not a tensor"
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), \
            f"{where}: {a.dtype}{tuple(a.shape)} != {b.dtype}{tuple(b.shape)}"
        np.testing.assert_array_equal(_bits(b), _bits(a), err_msg=where)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype
        np.testing.assert_array_equal(b, a, err_msg=where)
    elif isinstance(a, dict):
        assert type(b) is dict and list(a) == list(b), f"{where}: keys {list(b)} != {list(a)}"
        for k in a:
            _assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(b) is type(a) and len(a) == len(b), f"{where}: {b!r} != {a!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b), where
    else:
        assert type(b) is type(a) and b == a, f"{where}: {b!r} != {a!r}"


def _every_dtype():
    x = _rng.standard_normal((3, 5))
    return {
        "f32": gm.tensor(x, dtype=gm.float32),
        "f64": gm.tensor(x, dtype=gm.float64),
        "f16": gm.tensor(x, dtype=gm.float16),
        "bf16": gm.tensor(x, dtype=gm.bfloat16),
        "i64": gm.tensor(_rng.integers(-2 ** 40, 2 ** 40, (4,))),
        "bool": gm.tensor(_rng.random((2, 3)) < 0.5),
        "scalar": gm.tensor(2.5),
        "empty": gm.zeros(0, 3),
        "transposed": gm.tensor(x, dtype=gm.float32).T,  # non-contiguous: written as its values, row-major
    }


def test_round_trip_nested_every_dtype(tmp_path):
    obj = {
        "model": _every_dtype(),
        "optimizer": {"state": {0: {"step": 3, "exp_avg": gm.ones(2)}, 1: {"step": 3}},
                      "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "amsgrad": False, "params": [0, 1],
                                        "foreach": None, "name": "group ü"}]},
        "epoch": 7,
        "values": [1.5, float("inf"), float("-inf"), float("nan"), -0.0, True, None, "text", [], {}, ()],
        "keys": {1: "int", 2.5: "float", False: "bool", None: "none", "1": "str one"},
        "array": np.arange(6, dtype=np.int32).reshape(2, 3),
        "np_scalar": np.float32(1.25),
    }
    path = tmp_path / "ckpt.safetensors"
    save(obj, path)
    back = load(path)
    expected = dict(obj, np_scalar=1.25)
    _assert_same(expected, back)
    assert back["model"]["transposed"].is_contiguous()


def test_flat_state_dict_keys_are_the_file_keys(tmp_path):
    sd = {"features.0.weight": gm.randn(4, 3, 3, 3), "features.0.bias": gm.zeros(4), "fc.weight": gm.randn(2, 4),
          "bn.num_batches_tracked": gm.tensor(5)}
    path = tmp_path / "model.safetensors"
    save(sd, path)
    header = _header(path)
    meta = header.pop("__metadata__")
    assert set(header) == set(sd)
    assert header["fc.weight"]["dtype"] == "F32" and header["fc.weight"]["shape"] == [2, 4]
    assert header["bn.num_batches_tracked"]["dtype"] == "I64"
    assert meta["format"] == "pt"
    from safetensors.numpy import load_file  # what other tools do: read the raw tensors by key
    arrays = load_file(str(path))
    for k, t in sd.items():
        np.testing.assert_array_equal(arrays[k], to_numpy(t))
    _assert_same(sd, load(path))


def test_pytorch_reads_the_model_weights(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file
    sd = {"conv.weight": gm.randn(2, 1, 3, 3), "fc.bias": gm.randn(3, dtype=gm.bfloat16)}
    save(sd, tmp_path / "m.safetensors")
    got = load_file(str(tmp_path / "m.safetensors"))
    assert set(got) == set(sd)
    assert got["fc.bias"].dtype == torch.bfloat16
    np.testing.assert_array_equal(got["conv.weight"].numpy(), to_numpy(sd["conv.weight"]))
    np.testing.assert_array_equal(got["fc.bias"].float().numpy(), to_numpy(sd["fc.bias"]))


def test_foreign_safetensors_file_loads_flat(tmp_path):
    from safetensors.numpy import save_file
    path = str(tmp_path / "foreign.safetensors")
    save_file({"a": np.arange(4, dtype=np.float32), "b.c": np.ones((2, 2)), "i": np.arange(3, dtype=np.int32)},
              path)
    back = load(path)
    assert set(back) == {"a", "b.c", "i"}
    assert back["b.c"].dtype == gm.float64 and to_numpy(back["b.c"]).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert back["i"].dtype == gm.int32 and to_numpy(back["i"]).tolist() == [0, 1, 2]  # int32 stays int32


def test_shared_tensor_is_stored_once(tmp_path):
    t = gm.randn(3)
    save({"a": t, "b": [t]}, tmp_path / "s.safetensors")
    header = _header(tmp_path / "s.safetensors")
    assert set(header) - {"__metadata__"} == {"a"}
    back = load(tmp_path / "s.safetensors")
    assert back["b"][0] is back["a"]


def test_key_collisions_are_disambiguated(tmp_path):
    obj = {"a.b": gm.ones(1), "a": {"b": gm.zeros(1)}, "__metadata__": gm.full((1,), 2.0)}
    save(obj, tmp_path / "c.safetensors")
    _assert_same(obj, load(tmp_path / "c.safetensors"))


def test_load_on_meta(tmp_path):
    sd = {"w": gm.randn(256, 512), "opt": {"step": 4, "m": gm.zeros(256, 512, dtype=gm.bfloat16)}}
    save(sd, tmp_path / "m.safetensors")
    before = gm.memory.memory_allocated("meta")
    back = load(tmp_path / "m.safetensors", device="meta")
    assert back["w"].device == "meta" and tuple(back["w"].shape) == (256, 512)
    assert back["opt"]["m"].dtype == gm.bfloat16 and back["opt"]["step"] == 4
    assert gm.memory.memory_allocated("meta") - before >= 256 * 512 * 6
    # Any other device loads on the CPU and moves there (test_load_map_location.py); a bad name is still refused.
    with pytest.raises(ValueError, match="gpu0"):
        load(tmp_path / "m.safetensors", device="gpu0")


def test_file_mode_follows_the_umask(tmp_path):
    save({"x": gm.ones(1)}, tmp_path / "f.safetensors")
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(tmp_path / "f.safetensors").st_mode & 0o777 == 0o666 & ~umask


# ---- atomicity ------------------------------------------------------------------------------------------------------
def test_unserializable_object_leaves_theold_file(tmp_path):
    path, old = old_file(tmp_path)
    with pytest.raises(ValueError, match=r"layer\.w.*meta tensor"):
        save({"layer": {"w": gm.empty(2, device="meta")}}, path)
    with pytest.raises(TypeError, match=r"opt\.fn.*function"):
        save({"opt": {"fn": lambda: 0}}, path)
    with pytest.raises(TypeError, match="keys must be str"):
        save({(1, 2): 3}, path)
    assert path.read_bytes() == old and leftovers(tmp_path) == []


def test_failure_while_writing_leaves_theold_file(tmp_path, monkeypatch):
    path, old = old_file(tmp_path)
    import safetensors

    def half_written(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"partial")  # what a crash mid-write leaves
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(safetensors, "serialize_file", half_written)
    with pytest.raises(OSError, match="No space left"):
        save({"w": gm.zeros(1000)}, path)
    assert path.read_bytes() == old and leftovers(tmp_path) == []


def test_failure_at_fsync_leaves_theold_file(tmp_path, monkeypatch):
    path, old = old_file(tmp_path)

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(serialization.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        save({"w": gm.zeros(10)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == old and leftovers(tmp_path) == []
    assert to_numpy(load(path)["w"]).tolist() == [1.0, 1.0, 1.0]


# ---- errors ----------------------------------------------------------------------------------------------------------
def test_directory_paths(tmp_path):
    with pytest.raises(IsADirectoryError, match="directory"):
        save({"w": gm.ones(1)}, tmp_path)
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        load(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save({"w": gm.ones(1)}, tmp_path / "missing" / "x.safetensors")
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nothing.safetensors")


def test_read_only_location(tmp_path):
    if os.geteuid() == 0:  # root writes through permission bits; sysfs refuses new files even to root
        target = "/sys/gpumemnet_test.safetensors"
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = str(ro / "x.safetensors")
    with pytest.raises(PermissionError, match="not writable") as info:
        save({"w": gm.ones(1)}, target)
    assert info.value.filename == target
    assert not os.path.exists(target)


@pytest.mark.parametrize("damage,match", [
    (lambda b: b[:-5], "truncated"),
    (lambda b: b[:6], "shorter than the 8-byte header"),
    (lambda b: b"", "shorter than the 8-byte header"),
    (lambda b: b + b"junk", "unexpected bytes"),
    (lambda b: b"just some text, not a checkpoint\n" * 3, "header length|not JSON"),
    (lambda b: struct.pack("<Q", 9) + b"[1, 2, 3]", "not a JSON object"),
    (lambda b: struct.pack("<Q", 2) + b"{x", "not JSON"),
], ids=["truncated", "tiny", "empty", "trailing", "text", "json-array", "bad-json"])
def test_damaged_or_foreign_files(tmp_path, damage, match):
    path = tmp_path / "d.safetensors"
    save({"w": gm.randn(8), "v": gm.randn(3)}, path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError, match=match) as info:
        load(path)
    assert str(path) in str(info.value)


def test_inconsistent_header(tmp_path):
    def write(header, data=b""):
        raw = json.dumps(header).encode()
        (tmp_path / "h.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + data)
        return tmp_path / "h.safetensors"
    with pytest.raises(ValueError, match="needs 16 bytes"):
        load(write({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}, b"\0" * 12))
    with pytest.raises(ValueError, match="malformed"):
        load(write({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4))
    with pytest.raises(ValueError, match="cannot load"):
        load(write({"a": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}, b"\0"))
    with pytest.raises(ValueError, match="overlapping or missing"):
        load(write({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                    "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}, b"\0" * 3))
    with pytest.raises(ValueError, match="structure"):
        load(write({"__metadata__": {"gpumemnet": "{\"version\": 1, \"structure\": {\"__tensor__\": \"z\"}}"}}))
