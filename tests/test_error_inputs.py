"""Every case of error_inputs.py raises its exception, with its message, on every device: cpu, meta and (when a
CUDA device or the emulator build is present) cuda. meta runs the same argument checks as the other devices, so
a program checked on meta fails there as it would on the CPU. The cases written for both libraries also run
against PyTorch, which must refuse them too: gpumemnet refuses nothing that PyTorch accepts."""
import gc
import os
import re
from types import SimpleNamespace

import numpy as np
import pytest

import gpumemnet as gm
from error_inputs import CASES, GM
from error_inputs_api import EDGE

DEVICES = ["cpu", "meta"] + (["cuda"] if gm.cuda.is_available() else [])

# gpumemnet's ValueError and TypeError from an op are gm.ArgumentError (ValueError + RuntimeError) and
# gm.ArgumentTypeError (TypeError + RuntimeError), so a PyTorch user's `except RuntimeError` catches them as it
# catches PyTorch's. What still differs is listed here with the reason, checked both ways: a case in this dict must
# differ, one outside must agree.
NOT_IMPLEMENTED = "PyTorch has no kernel for the dtype (NotImplementedError, a RuntimeError); gpumemnet refuses " \
    "the dtype (ArgumentTypeError, also a RuntimeError): `except RuntimeError` catches both"
ERROR_TYPES_DIFFER = {
    "batch_norm int64 input": NOT_IMPLEMENTED,
    "mean of an int64 tensor": NOT_IMPLEMENTED,
    "leaky_relu of int64": NOT_IMPLEMENTED,
    "manual_seed of a string": "PyTorch passes the seed through int() and lets its ValueError out; gpumemnet "
                               "names the argument and its type (TypeError, Python's type for a wrong type)",
    "Tensor.index_select with float indices": "index_select shares x[index]'s check, for which PyTorch itself "
                                              "raises IndexError; its index_select says RuntimeError",
}


def _devices(case):
    return [d for d in DEVICES if case.devices is None or d in case.devices]


def _call(case, dev, lib=GM):
    return case.call(dev, lib) if case.both else case.call(dev)


PAIRS = [(c, d) for c in CASES for d in _devices(c)]


@pytest.mark.parametrize("case,dev", PAIRS, ids=[f"{d}-{c.name}" for c, d in PAIRS])
def test_error_input(case, dev):
    with pytest.raises(case.exc) as info:
        _call(case, dev)
    assert re.search(case.pattern, str(info.value)), f"{case.name} on {dev}: {info.value!r}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_device_raises_the_same(case):
    seen = {}
    for dev in _devices(case):
        try:
            _call(case, dev)
        except Exception as e:  # noqa: BLE001 - the point is to compare whatever each device raised
            seen[dev] = type(e)
        else:
            seen[dev] = None
    assert len(set(seen.values())) == 1, f"{case.name}: devices disagree: {seen}"


BOTH = [c for c in CASES if c.both]


def _torch():
    """PyTorch, or a skip: where it is not installed, and under tools/sanitize.sh, where its C++ exceptions (how it
    raises RuntimeError) abort in AddressSanitizer's __cxa_throw interceptor before gpumemnet is involved."""
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("PyTorch cannot raise under AddressSanitizer's preloaded runtime")
    return pytest.importorskip("torch")


@pytest.mark.parametrize("case", BOTH, ids=[c.name for c in BOTH])
def test_pytorch_refuses_it_too(case):
    torch = _torch()
    lib = SimpleNamespace(L=torch, F=torch.nn.functional, nn=torch.nn)
    with pytest.raises(Exception) as info:  # noqa: B017 - any refusal; the type is compared below
        _call(case, "cpu", lib)
    theirs = type(info.value)
    with pytest.raises(case.exc) as mine:
        _call(case, "cpu")
    ours = type(mine.value)
    same = issubclass(ours, theirs)  # what PyTorch's user writes in `except` catches ours
    if case.name in ERROR_TYPES_DIFFER:
        assert not same, f"{case.name}: now the same type as PyTorch's ({theirs.__name__}): drop it from the list"
    else:
        assert same, f"{case.name}: PyTorch raises {theirs.__name__}: {info.value}, gpumemnet {ours.__name__}"


EDGE_IDS = [name for name, _ in EDGE]


@pytest.mark.parametrize("name,call", EDGE, ids=EDGE_IDS)
def test_ieee_and_empty_inputs_are_results_not_errors(name, call):
    """NaN, Inf and empty batches: a value (IEEE's, or an empty tensor), the same on every device, as PyTorch's."""
    ref = call("cpu", GM)
    for dev in DEVICES[1:]:
        got = call(dev, GM)
        assert (tuple(got.shape), got.dtype) == (tuple(ref.shape), ref.dtype), f"{name} on {dev}"
        if dev != "meta":
            np.testing.assert_array_equal(got.cpu().numpy(), ref.numpy())  # NaN where NaN
    torch = _torch()
    theirs = call("cpu", SimpleNamespace(L=torch, F=torch.nn.functional, nn=torch.nn))
    assert tuple(ref.shape) == tuple(theirs.shape), f"{name}: shape {tuple(ref.shape)}, PyTorch's {theirs.shape}"
    np.testing.assert_allclose(ref.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("case,dev", PAIRS, ids=[f"{d}-{c.name}" for c, d in PAIRS])
def test_refused_call_keeps_no_memory(case, dev):
    """A refused call frees whatever it allocated before refusing (its inputs, a half-built output, a
    workspace): the allocator holds exactly what it held before, once the exception is gone."""
    before = gm.memory.memory_allocated(dev)
    try:
        _call(case, dev)
    except Exception:  # noqa: BLE001, S110 - test_error_input checks what it raises
        pass
    after = gm.memory.memory_allocated(dev)
    if after > before:  # a cycle (an exception's traceback and its frames) may hold the inputs until collected
        gc.collect()
        after = gm.memory.memory_allocated(dev)
    # <=: garbage of an earlier test may be collected here too; a leak only ever adds
    assert after <= before, f"{case.name} on {dev}: {after - before} bytes still allocated after the refusal"
