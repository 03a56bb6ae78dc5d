"""gm.save / gm.load under faults: a full disk, a file-size limit, a save killed mid-write, objects that contain
themselves or nest absurdly deep, headers that do. Each failure is the exception gm.save / gm.load promise
(OSError naming the path for I/O, ValueError for a bad object or file), the old file survives, and no temporary
file stays behind."""
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpumemnet as gm
from gpumemnet.serialization import load, save
from serialization_util import leftovers, old_file


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs: a real full disk (root only; skipped where mounting is not allowed)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_full_disk_is_an_oserror_naming_the_path(small_disk):
    path, old = old_file(small_disk)
    with pytest.raises(OSError) as info:
        save({"w": gm.zeros(200_000)}, path)          # 800 KB on a 256 KiB disk
    e = info.value
    assert type(e) is OSError and e.errno == 28 and e.filename == str(path)
    assert str(path) in str(e) and "No space left on device" in str(e)
    assert path.read_bytes() == old and leftovers(small_disk) == []
    assert np.array_equal(load(path)["w"].numpy(), np.ones(3, np.float32))


def test_file_size_limit_is_an_oserror(tmp_path):
    # RLIMIT_FSIZE makes the write fail inside the safetensors package (EFBIG), without root.
    path, old = old_file(tmp_path)
    code = textwrap.dedent(f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        import gpumemnet as gm
        try:
            gm.save({{"w": gm.zeros(100_000)}}, {str(path)!r})
        except OSError as e:
            print(type(e).__name__, e.errno, e.filename)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["OSError", "27", str(path)]
    assert path.read_bytes() == old and leftovers(tmp_path) == []


def test_killed_save_leaves_a_temp_that_the_next_save_removes(tmp_path):
    path, old = old_file(tmp_path)
    code = textwrap.dedent(f"""
        import os, signal
        import gpumemnet as gm
        from gpumemnet import serialization

        def killed_mid_write(entries, metadata, filename):
            with open(filename, "wb") as f:
                f.write(b"\\x10" + b"\\0" * 4096)     # part of a checkpoint
                f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        serialization._write_safetensors = killed_mid_write
        gm.save({{"w": gm.zeros(1000)}}, {str(path)!r})
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert r.returncode == -signal.SIGKILL
    stale = leftovers(tmp_path)
    assert len(stale) == 1 and stale[0].startswith(".ckpt.safetensors.gmsave-") and stale[0].endswith(".tmp")
    assert path.read_bytes() == old                  # the destination was never touched

    # A save in progress in a live process (this one) and unrelated files are not this save's to remove.
    live = tmp_path / f".ckpt.safetensors.gmsave-{os.getpid()}-abc.tmp"
    live.write_bytes(b"x")
    other = tmp_path / ".other.safetensors.gmsave-999999999-abc.tmp"
    other.write_bytes(b"x")
    save({"w": gm.full((2,), 5.0)}, path)
    assert leftovers(tmp_path) == sorted([live.name, other.name])
    assert load(path)["w"].tolist() == [5.0, 5.0]


def test_object_that_contains_itself(tmp_path):
    path, old = old_file(tmp_path)
    d = {"w": gm.ones(2)}
    d["me"] = d
    with pytest.raises(ValueError, match=r"^save: me contains itself \(a reference cycle\)"):
        save(d, path)
    lst = [1]
    lst.append({"inner": [lst]})
    with pytest.raises(ValueError, match=r"^save: 1\.inner\.0 contains itself"):
        save(lst, path)
    assert path.read_bytes() == old and leftovers(tmp_path) == []
    shared = [gm.ones(1)]  # the same list twice is a DAG, not a cycle: saved as two copies of its structure
    save({"a": shared, "b": shared}, path)
    out = load(path)
    assert out["a"][0].tolist() == [1.0] and out["b"][0].tolist() == [1.0]


def test_nesting_depth(tmp_path):
    path, old = old_file(tmp_path)
    deep = node = []
    for _ in range(100_000):
        node.append([])
        node = node[0]
    with pytest.raises(ValueError, match="nests dicts, lists and tuples more than 200 levels deep"):
        save(deep, path)
    assert path.read_bytes() == old and leftovers(tmp_path) == []
    ok = node = {}
    for _ in range(199):
        node["x"] = {}
        node = node["x"]
    node["t"] = gm.ones(1)
    save(ok, path)
    back = load(path)
    for _ in range(199):
        back = back["x"]
    assert back["t"].tolist() == [1.0]


def _write_raw(path, header_bytes, data=b""):
    path.write_bytes(struct.pack("<Q", len(header_bytes)) + header_bytes + data)


def test_deeply_nested_header_is_a_valueerror(tmp_path):
    path = tmp_path / "deep.safetensors"
    _write_raw(path, b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ValueError, match="nests too deeply") as info:
        load(path)
    assert str(path) in str(info.value)
    structure = "[" * 100_000 + "]" * 100_000
    meta = json.dumps({"__metadata__": {"gpumemnet": json.dumps({"version": 1, "structure": "@"})}})
    _write_raw(path, meta.replace('\\"@\\"', structure.replace('"', '\\"')).encode())
    with pytest.raises(ValueError, match="gpumemnet") as info:
        load(path)
    assert str(path) in str(info.value)


def test_malformed_structure_is_a_valueerror(tmp_path):
    path = tmp_path / "bad.safetensors"
    meta = {"__metadata__": {"gpumemnet": json.dumps({"version": 1, "structure": {"__dict__": [[1, 2, 3]]}})}}
    _write_raw(path, json.dumps(meta).encode())
    with pytest.raises(ValueError, match="structure metadata is malformed"):
        load(path)
