"""The one warning of gm.memory.set_fallback says what happened (issue 15, item 1): "full" when the device could not
hold the block, and otherwise that optimizer state went to the fallback early, before the device was full, to keep
the room forward and backward need (allocator.c state_first). The "full" wording: tests/test_fallback.py."""
import warnings

import pytest

import gpumemnet as gm

MiB = 1 << 20


@pytest.fixture(autouse=True)
def clean():
    yield
    for dev in ("meta", "cpu"):
        gm.memory.set_fallback(dev, None)
        gm.memory.set_limit(dev, None)
        gm.memory.empty_cache(dev)


def _block(n_bytes, device, category):
    with gm.memory.category(category):
        return gm.empty(n_bytes // 4, device=device)


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_state_moved_to_keep_the_steps_room_is_not_called_full(device, tmp_path):
    location = "host" if device == "meta" else str(tmp_path)
    gm.memory.empty_cache(device)
    base = gm.memory.memory_reserved(device)
    gm.memory.set_limit(device, base + 40 * MiB)
    gm.memory.set_fallback(device, location, ("optimizer",))
    act = _block(30 * MiB, device, "activation")  # a step's forward and backward: 30 of the 40 MiB
    del act  # freed (and cached): the device has room for 16 MiB, but the next step needs the 30 again
    with pytest.warns(UserWarning) as rec:
        state = _block(16 * MiB, device, "optimizer")
    text = str(rec[0].message)
    assert text.startswith(f"{device} was not full (") and f"{device} is full" not in text
    assert "a 16.00 MiB block of optimizer was placed in" in text
    # base: what earlier tests in this process left reserved (the room and the limit are counted from zero)
    assert f"{(base + 30 * MiB) / MiB:.2f} MiB that forward and backward have needed" in text
    assert f"limit {(base + 40 * MiB) / MiB:.2f} MiB" in text
    assert "given once" in text
    split = {k: v["allocated"]["current"] for k, v in gm.memory.memory_stats(device)["by_location"].items()}
    assert split["host" if device == "meta" else "file"] == 16 * MiB
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # still one warning
        more = _block(16 * MiB, device, "optimizer")
    del state, more


def test_a_full_device_is_still_called_full():
    gm.memory.empty_cache("meta")
    base = gm.memory.memory_reserved("meta")
    gm.memory.set_limit("meta", base + 40 * MiB)
    gm.memory.set_fallback("meta", "host", ("optimizer", "activation"))
    a = _block(30 * MiB, "meta", "activation")
    with pytest.warns(UserWarning, match=r"meta is full \(limit 40.00 MiB\): a 16.00 MiB block of activation"):
        b = _block(16 * MiB, "meta", "activation")  # 30 held + 16 > 40: the device has no room
    del a, b
