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

# Where PyTorch raises RuntimeError (or its subclass NotImplementedError) for a bad shape, size or dtype,
# gpumemnet raises ValueError or TypeError (Python's types for a bad argument value or type). Listed here so that
# the difference is a recorded choice, checked both ways: a case in this set must differ, one outside must agree.
ERROR_TYPES_DIFFER = {
    "avg_pool2d zero stride", "avg_pool2d padding over half the kernel", "max_pool2d zero dilation",
    "max_pool2d rank-2 input", "adaptive_avg_pool2d negative size", "adaptive_max_pool2d empty image",
    "avg_pool1d kernel longer than input", "batch_norm running_mean of the wrong size",
    "batch_norm weight of the wrong size", "batch_norm int64 input", "cross_entropy class weight of the wrong size",
    "cross_entropy label_smoothing above 1", "l1_loss shapes differ", "mean of an int64 tensor", "cat sizes differ",
    "stack shapes differ", "reshape with two -1", "view of a transposed tensor", "permute with a repeated dim",
    "flatten start after end", "expand to a smaller size", "in-place add that would broadcast self",
    "in-place multiply of int64 by a float", "matmul of a 0-d tensor", "item of two elements",
    "linear bias of the wrong size", "linear on a 0-d input", "conv2d bias of the wrong size",
    "conv2d padding='same' with stride", "conv2d unknown padding string", "conv2d zero groups",
    "conv_transpose2d output_padding not below stride", "interpolate to size 0", "leaky_relu of int64",
    "prelu weight of the wrong size", "Conv2d negative kernel", "Linear negative in_features",
    "BatchNorm2d channels differ", "full with a negative size", "arange with step 0",
    "arange stepping away from the end", "to an unknown device",
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
    theirs, ours = type(info.value), case.exc
    same = issubclass(theirs, ours) or issubclass(ours, theirs)
    if case.name in ERROR_TYPES_DIFFER:
        assert not same, f"{case.name}: now the same type as PyTorch's ({theirs.__name__}): drop it from the list"
    else:
        assert same, f"{case.name}: PyTorch raises {theirs.__name__}: {info.value}, gpumemnet {ours.__name__}"
