"""Every case of error_inputs.py raises its exception, with its message, on every device: cpu, meta and (when a
CUDA device or the emulator build is present) cuda. meta runs the same argument checks as the other devices, so
a program checked on meta fails there as it would on the CPU."""
import re

import pytest

import gpumemnet as gm
from error_inputs import CASES

DEVICES = ["cpu", "meta"] + (["cuda"] if gm.cuda.is_available() else [])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("dev", DEVICES)
def test_error_input(case, dev):
    with pytest.raises(case.exc) as info:
        case.call(dev)
    assert re.search(case.pattern, str(info.value)), f"{case.name} on {dev}: {info.value!r}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_device_raises_the_same(case):
    seen = {}
    for dev in DEVICES:
        try:
            case.call(dev)
        except Exception as e:  # noqa: BLE001 - the point is to compare whatever each device raised
            seen[dev] = type(e)
        else:
            seen[dev] = None
    assert len(set(seen.values())) == 1, f"{case.name}: devices disagree: {seen}"
