"""gm.load on damaged files (hypothesis): a checkpoint truncated anywhere, with bytes overwritten anywhere, or with a
header rewritten at random loads or raises ValueError — never another exception, never a crash, never a read past
the file (AddressSanitizer checks that when tools/sanitize.sh runs this file). GPUMEMNET_FUZZ_EXAMPLES sets the
number of cases, as in test_fuzz_ops.py."""
import json
import os
import struct

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import gpumemnet as gm  # noqa: E402

EXAMPLES = int(os.environ.get("GPUMEMNET_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _checkpoint_bytes(tmp):
    net = gm.nn.Sequential(gm.nn.Conv2d(2, 3, 3), gm.nn.BatchNorm2d(3), gm.nn.Flatten(), gm.nn.Linear(3 * 4 * 4, 2))
    opt = gm.optim.Adam(net.parameters())
    net(gm.randn(2, 2, 6, 6)).sum().backward()
    opt.step()
    path = os.path.join(tmp, "good.safetensors")
    gm.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 1, "names": ["a", ("b", 2.5)]},
            path)
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return _checkpoint_bytes(str(tmp_path_factory.mktemp("fuzz_load")))


def _load_bytes(tmp_path, data):
    path = tmp_path / "damaged.safetensors"
    path.write_bytes(data)
    try:
        gm.load(path)
    except ValueError:
        pass  # the promised answer for a file that is not a valid checkpoint


@FUZZ
@given(cut=st.integers(0, 10 ** 6))
def test_truncated_anywhere(tmp_path, good, cut):
    _load_bytes(tmp_path, good[:cut % len(good)])


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 255)), min_size=1, max_size=8))
def test_bytes_overwritten(tmp_path, good, edits):
    data = bytearray(good)
    for where, value in edits:
        data[where % len(data)] = value
    _load_bytes(tmp_path, bytes(data))


json_values = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                       max_size=4), max_leaves=20)


@FUZZ
@given(entries=st.dictionaries(st.text(max_size=6), st.fixed_dictionaries(
    {"dtype": st.sampled_from(["F32", "F64", "BF16", "F16", "I64", "I32", "U8", "BOOL", "X9"]),
     "shape": st.lists(st.integers(-3, 2 ** 62), max_size=4),
     "data_offsets": st.lists(st.integers(-5, 2 ** 63), min_size=0, max_size=3)}) | json_values, max_size=4),
    payload=st.binary(max_size=64))
def test_random_header(tmp_path, entries, payload):
    header = json.dumps(entries).encode()
    _load_bytes(tmp_path, struct.pack("<Q", len(header)) + header + payload)


def test_the_fuzzed_file_is_valid(tmp_path, good):
    """The seed of the cases above loads (so the mutations start from a real checkpoint)."""
    path = tmp_path / "good.safetensors"
    path.write_bytes(good)
    assert gm.load(path)["epoch"] == 1
