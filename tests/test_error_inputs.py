"""Every case of error_inputs.py raises its exception, with its message, on every device: cpu, meta and (when a
CUDA device or the emulator build is present) cuda. meta runs the same argument checks as the other devices, so
a program checked on meta fails there as it would on the CPU. The cases written for both libraries also run
against PyTorch, which must refuse them too: gpumemnet refuses nothing that PyTorch accepts."""
import re
from types import SimpleNamespace

import pytest

import gpumemnet as gm
from error_inputs import CASES, GM

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
    "TensorDataset sizes differ": "PyTorch checks with assert (AssertionError, gone under python -O); gpumemnet "
                                  "raises ValueError naming the sizes",
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


@pytest.mark.parametrize("case", BOTH, ids=[c.name for c in BOTH])
def test_pytorch_refuses_it_too(case):
    torch = pytest.importorskip("torch")
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
